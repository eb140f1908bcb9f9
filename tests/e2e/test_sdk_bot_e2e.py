"""End to end: a long-running bot on the real Claude Agent SDK with leanctx's in-process hooks and
tools (leanctx.bot.claude_sdk_options, setting_sources=[], no `leanctx init`), killed with kill -9
between turns and restarted: the new process's first model request carries the thread (summary,
the recorded turns, the pending question with its options) and the answer line, and on disk the
question is answered. Issue 11, scenario (b).
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from leanctx.state.slug import slugify
from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use

pytestmark = pytest.mark.e2e

USER = "Ana"
FIRST = "I'd like to subscribe"
QUESTION = "Which plan?"
SUMMARY = "Ana wants a subscription; the plan is still open."
WAIT = 180  # seconds a bot may take for one turn on a loaded 2-core machine before the test gives up


class BotProcess:
    """tests/e2e/sdk_bot.py as its own process group, fed through its spool."""

    def __init__(self, spool, env, cli=None):
        self.spool, self.env, self.cli = spool, env, cli
        self.proc = None

    def start(self):
        cmd = [sys.executable, "-m", "tests.e2e.sdk_bot", str(self.spool), "--mode", "native"]
        if self.cli:
            cmd += ["--cli", self.cli]
        self.log = (self.spool.parent / "bot.log").open("a")
        self.proc = subprocess.Popen(cmd, cwd=hostcli.REPO_ROOT, env=self.env, stdout=self.log, stderr=self.log,
                                     start_new_session=True)

    def send(self, name, text):
        inbox = self.spool / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        tmp = inbox / f".{name}.tmp"
        tmp.write_text(json.dumps({"user": USER, "text": text}))
        tmp.rename(inbox / f"{name}.json")

    def replies(self):
        out = self.spool / "outbox.jsonl"
        return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []

    def wait_replies(self, n):
        deadline = time.monotonic() + WAIT
        while len(self.replies()) < n:
            if self.proc.poll() is not None:
                pytest.fail(f"bot exited {self.proc.returncode}: {(self.spool.parent / 'bot.log').read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no reply {n} within {WAIT}s: {(self.spool.parent / 'bot.log').read_text()[-3000:]}")
            time.sleep(0.1)
        return self.replies()

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)  # the bot only, as a crash would; its CLI child sees EOF
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # a CLI child the crash left behind
        except (ProcessLookupError, PermissionError, TypeError, AttributeError):
            pass


def state_of(home) -> dict:
    return json.loads((home / ".cks" / "user" / slugify(USER) / "conversation-state.json").read_text())


def request_text(body) -> str:
    return json.dumps(body, ensure_ascii=False)


@pytest.fixture(params=["bundled", "npm"])
def sdk_cli(request):
    """The SDK's bundled Claude Code (None: the SDK finds it) or `cli_path` to the pinned npm CLI."""
    from tests.e2e.conftest import _cli, missing

    if importlib.util.find_spec("claude_agent_sdk") is None:
        missing("claude-agent-sdk is not installed (pip install -e '.[sdk]')")
    return None if request.param == "bundled" else _cli("claude")


def test_native_bot_resumes_after_kill9_with_isolated_settings(host_home, sdk_cli):
    hh = host_home
    script = [
        [tool_use("mcp__leanctx__state_summary", {"text": SUMMARY}),
         tool_use("mcp__leanctx__state_pending", {"question": QUESTION, "options": ["basic", "pro"]})],
        f"{QUESTION} basic or pro?",
        "Pro it is: welcome aboard.",
    ]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"PYTHONPATH": str(hostcli.REPO_ROOT)})
        bot = BotProcess(hh.root / "spool", env, sdk_cli)
        try:
            bot.start()
            bot.send("001", FIRST)
            assert bot.wait_replies(1)[0]["reply"] == f"{QUESTION} basic or pro?"
            state = state_of(hh.home)
            assert state["pending"]["question"] == QUESTION and state["pending"]["options"] == ["basic", "pro"]
            assert [(t["role"], t["text"]) for t in state["recent_turns"]] == [
                ("user", FIRST), ("agent", f"{QUESTION} basic or pro?")]
            first_main = len(srv.main_requests)
            assert first_main == 2  # the two parallel tool calls, then the question
            assert "leanctx" in request_text(srv.main_requests[0]["system"])  # the instructions reached the model

            bot.kill9()
            bot.start()
            bot.send("002", "pro")
            assert bot.wait_replies(2)[1]["reply"] == "Pro it is: welcome aboard."
        finally:
            bot.stop()
        first = request_text(srv.main_requests[first_main])
    for needle in (SUMMARY, FIRST, QUESTION, "basic", "answers your pending question", "Their answer: \\\"pro\\\""):
        assert needle in first, needle
    state = state_of(hh.home)
    assert state["pending"] is None
    assert state["last_answer"]["question"] == QUESTION and state["last_answer"]["answer"] == "pro"
    assert [(t["role"], t["text"]) for t in state["recent_turns"]][-2:] == [("user", "pro"), ("agent", "Pro it is: welcome aboard.")]
    assert not (hh.home / ".claude" / "settings.json").exists()  # nothing of the host's settings was needed
