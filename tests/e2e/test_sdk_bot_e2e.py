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

import shlex

import pytest

from leanctx.state.slug import slugify
from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, text, tool_use

pytestmark = pytest.mark.e2e

USER = "Ana"
FIRST = "I'd like to subscribe"
QUESTION = "Which plan?"
SUMMARY = "Ana wants a subscription; the plan is still open."
WAIT = 180  # seconds a bot may take for one turn on a loaded 2-core machine before the test gives up


class BotProcess:
    """tests/e2e/sdk_bot.py as its own process group, fed through its spool."""

    def __init__(self, spool, env, cli=None, mode="native"):
        self.spool, self.env, self.cli, self.mode = spool, env, cli, mode
        self.proc = None

    def start(self):
        cmd = [sys.executable, "-m", "tests.e2e.sdk_bot", str(self.spool), "--mode", self.mode]
        if self.cli:
            cmd += ["--cli", self.cli]
        self.log = (self.spool.parent / "bot.log").open("a")
        self.proc = subprocess.Popen(cmd, cwd=hostcli.REPO_ROOT, env=self.env, stdout=self.log, stderr=self.log,
                                     start_new_session=True)

    def send(self, name, text, user=USER):
        inbox = self.spool / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        tmp = inbox / f".{name}.tmp"
        tmp.write_text(json.dumps({"user": user, "text": text}))
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


def state_of(home, user=USER) -> dict:
    return json.loads((home / ".cks" / "user" / slugify(user) / "conversation-state.json").read_text())


def request_text(body) -> str:
    return json.dumps(body, ensure_ascii=False)


@pytest.fixture
def sdk_installed():
    from tests.e2e.conftest import missing

    if importlib.util.find_spec("claude_agent_sdk") is None:
        missing("claude-agent-sdk is not installed (pip install -e '.[sdk]')")


@pytest.fixture(params=["bundled", "npm"])
def sdk_cli(request, sdk_installed):
    """The SDK's bundled Claude Code (None: the SDK finds it) or `cli_path` to the pinned npm CLI."""
    from tests.e2e.conftest import _cli

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


def test_settings_bot_resumes_after_kill9(host_home, lean, sdk_cli):
    """Issue 11 (a): the `init --agent claude --bot` command hooks under the SDK's default options
    (settings loaded), one client per user with env={"CKS_ACTIVE_USER": user}; the model saves its
    question through Bash as the skill says. kill -9, restart, answer: same outcome as (b)."""
    hh = host_home
    lean.run("init", "--agent", "claude", "--bot", "--no-mcp")
    leanctx = f"{shlex.quote(sys.executable)} -m leanctx"
    script = [
        tool_use("Bash", {"command": f"{leanctx} state summary {shlex.quote(SUMMARY)}"}),
        tool_use("Bash", {"command": f"{leanctx} state pending --question {shlex.quote(QUESTION)} --option basic --option pro"}),
        f"{QUESTION} basic or pro?",
        "Pro it is: welcome aboard.",
    ]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"PYTHONPATH": str(hostcli.REPO_ROOT), **lean.host_env})
        bot = BotProcess(hh.root / "spool", env, sdk_cli, mode="settings")
        try:
            bot.start()
            bot.send("001", FIRST)
            assert bot.wait_replies(1)[0]["reply"] == f"{QUESTION} basic or pro?"
            assert state_of(hh.home)["pending"]["question"] == QUESTION
            first_main = len(srv.main_requests)
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
    lean.assert_no_hook_errors()


MARKERS = {"ana": "ana-7f1", "bob": "bob-3c9"}


def two_user_model(body):
    """Route on the one user marker a request holds; a request holding both is a leak (answered
    "LEAK", and the test checks every request anyway)."""
    raw = json.dumps(body, ensure_ascii=False)
    held = [m for m in MARKERS.values() if m in raw]
    if len(held) != 1:
        return text("LEAK")
    mark = held[0]
    last = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    blocks = [{"type": "text", "text": last}] if isinstance(last, str) else last
    if any(b.get("type") == "tool_result" for b in blocks):
        return text(f"{mark} which size? small or large?")
    if "answer:" in " ".join(b.get("text", "") for b in blocks if b.get("type") == "text"):
        return text(f"{mark} noted.")
    return tool_use("mcp__leanctx__state_pending", {"question": f"{mark} which size?", "options": ["small", "large"]})


def test_two_users_in_one_native_bot_never_see_each_other(host_home, sdk_installed):
    """Issue 11 (e): ana and bob served at once by one bot process (one client each, no env), kill -9,
    restart, both answer at once: every request holds one user's marker only, and each state ends
    with its own answer."""
    hh = host_home
    with FakeAnthropic(script=[two_user_model] * 8) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"PYTHONPATH": str(hostcli.REPO_ROOT)})
        bot = BotProcess(hh.root / "spool", env)
        try:
            bot.start()
            bot.send("001", f"{MARKERS['ana']} I need a shirt", "ana")
            bot.send("002", f"{MARKERS['bob']} I need a coat", "bob")
            bot.wait_replies(2)
            bot.kill9()
            bot.start()
            bot.send("003", f"{MARKERS['ana']} answer: small", "ana")
            bot.send("004", f"{MARKERS['bob']} answer: large", "bob")
            replies = bot.wait_replies(4)
        finally:
            bot.stop()
        bodies = [json.dumps(b, ensure_ascii=False) for b in srv.main_requests]
    assert len(bodies) == 6
    for raw in bodies:
        assert (MARKERS["ana"] in raw) != (MARKERS["bob"] in raw), raw[:2000]
    assert sorted(r["reply"] for r in replies[2:]) == [f"{MARKERS['ana']} noted.", f"{MARKERS['bob']} noted."]
    for user, answer in (("ana", "small"), ("bob", "large")):
        state = state_of(hh.home, user)
        assert state["pending"] is None
        assert state["last_answer"]["question"] == f"{MARKERS[user]} which size?"
        assert state["last_answer"]["answer"] == f"{MARKERS[user]} answer: {answer}"
