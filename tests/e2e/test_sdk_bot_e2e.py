"""End to end: a long-running bot on the real Claude Agent SDK (tests/e2e/sdk_bot.py), killed with
kill -9 and restarted, against the scripted fake Anthropic server:
(a) the `init --bot` settings hooks and (b) leanctx's in-process hooks and tools
(claude_sdk_options, setting_sources=[], no `leanctx init`), kill -9 between turns: the new
process's first request carries the thread and the answer line, and on disk the question is
answered; (c) kill -9 mid-turn or before delivery, then redelivery: the later real answer is the
one recorded, the message once; (d) 5 resumed restarts (`resume=`): one state block; (e) two
users in one process never see each other's state.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

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

    def __init__(self, spool, env, cli=None, mode="native", resume=False):
        self.spool, self.env, self.cli, self.mode, self.resume = spool, env, cli, mode, resume
        self.proc = None

    def start(self):
        cmd = [sys.executable, "-m", "tests.e2e.sdk_bot", str(self.spool), "--mode", self.mode]
        if self.cli:
            cmd += ["--cli", self.cli]
        if self.resume:
            cmd.append("--resume")
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
        """n replies delivered and every message acknowledged (a kill after a reply but before its
        acknowledgement would have the message redelivered)."""
        deadline = time.monotonic() + WAIT
        while len(self.replies()) < n or list((self.spool / "inbox").glob("*.json")):
            if self.proc.poll() is not None:
                pytest.fail(f"bot exited {self.proc.returncode}: {(self.spool.parent / 'bot.log').read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no reply {n} within {WAIT}s: {(self.spool.parent / 'bot.log').read_text()[-3000:]}")
            time.sleep(0.1)
        return self.replies()

    def wait_for(self, what, done):
        deadline = time.monotonic() + WAIT
        while not done():
            if self.proc.poll() is not None:
                pytest.fail(f"bot exited {self.proc.returncode} before {what}: {(self.spool.parent / 'bot.log').read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {WAIT}s: {(self.spool.parent / 'bot.log').read_text()[-3000:]}")
            time.sleep(0.05)

    def kill9(self, group=False):
        """The bot only, as a crash would (its CLI child sees EOF, and finishes a turn in flight),
        or its whole process group, as systemd's default KillMode=control-group does."""
        if group:
            os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            os.kill(self.proc.pid, signal.SIGKILL)
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


def restart_and_answer(bot) -> None:
    """kill -9 the bot, start a new process, and the user answers the question it asked."""
    bot.kill9()
    bot.start()
    bot.send("002", "pro")
    assert bot.wait_replies(2)[1]["reply"] == "Pro it is: welcome aboard."


def assert_thread_handed_back(first: str, home) -> dict:
    """The new process's first request carries the thread and the answer line; on disk the
    question is answered. Returns the state."""
    for needle in (SUMMARY, FIRST, QUESTION, "basic", "answers your pending question", "Their answer: \\\"pro\\\""):
        assert needle in first, needle
    state = state_of(home)
    assert state["pending"] is None
    assert state["last_answer"]["question"] == QUESTION and state["last_answer"]["answer"] == "pro"
    return state


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

            restart_and_answer(bot)
        finally:
            bot.stop()
        first = request_text(srv.main_requests[first_main])
    state = assert_thread_handed_back(first, hh.home)
    assert [(t["role"], t["text"]) for t in state["recent_turns"]][-2:] == [("user", "pro"), ("agent", "Pro it is: welcome aboard.")]
    assert not (hh.home / ".claude" / "settings.json").exists()  # nothing of the host's settings was needed


def test_settings_bot_resumes_after_kill9(host_home, lean, sdk_cli):
    """(a) the `init --agent claude --bot` command hooks under the SDK's default options
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
            restart_and_answer(bot)
        finally:
            bot.stop()
        first = request_text(srv.main_requests[first_main])
    assert_thread_handed_back(first, hh.home)
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
    """(e) ana and bob served at once by one bot process (one client each, no env), kill -9,
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


REPLY_Q = f"{QUESTION} basic or pro?"
BLOCK = "[leanctx conversation state]"


def pending_step(mode):
    """The model saving its question: through Bash and the state CLI (`init --bot`), or the in-process tool."""
    if mode == "settings":
        leanctx = f"{shlex.quote(sys.executable)} -m leanctx"
        return tool_use("Bash", {"command": f"{leanctx} state pending --question {shlex.quote(QUESTION)} --option basic --option pro"})
    return tool_use("mcp__leanctx__state_pending", {"question": QUESTION, "options": ["basic", "pro"]})


def user_turns(state, text):
    return [t for t in state["recent_turns"] if t["role"] == "user" and t["text"] == text]


@pytest.mark.parametrize("mode,kill_at,resume", [("settings", "mid-turn", False), ("binding", "mid-turn", False),
                                                 ("binding", "before-delivery", False), ("binding", "before-delivery", True)])
def test_a_crash_mid_turn_and_redelivery_record_the_real_answer(host_home, lean, sdk_installed, mode, kill_at, resume):
    """(c) kill -9 after the model saved its question but before the reply reached the
    user (mid-turn: while the model writes the reply; before-delivery: the turn is over, the bot
    has not sent it), the chat layer redelivers the message, the redone turn asks again, the user
    answers: that answer is `last_answer`, the first message is one user turn, and the redelivered
    message was never told it answers a question, and the reply nobody got is not in the thread.

    The settings hooks are killed with their CLI (the service's process group): a CLI orphaned
    mid-turn finishes the turn and its Stop hook records a reply nobody got. The binding is
    killed alone, orphan included: it records a reply only once the bot delivered it. Resumed
    (`resume=`), the redelivery reaches the same session: only its chat message id tells it apart."""
    hh = host_home
    if mode == "settings":
        lean.run("init", "--agent", "claude", "--bot", "--no-mcp")
    reached, release = threading.Event(), threading.Event()
    lost = f"{REPLY_Q} (never delivered)"

    def stall(body):  # the reply of the crashed turn: the bot dies while the model writes it
        reached.set()
        release.wait(WAIT)
        return text(lost)

    first_turn = [pending_step(mode), stall if kill_at == "mid-turn" else lost]
    script = first_turn + [pending_step(mode), REPLY_Q, "Pro it is: welcome aboard."]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"PYTHONPATH": str(hostcli.REPO_ROOT), **lean.host_env})
        bot = BotProcess(hh.root / "spool", env, mode=mode, resume=resume)
        try:
            if kill_at == "before-delivery":
                (bot.spool).mkdir(parents=True, exist_ok=True)
                (bot.spool / "hold").write_text("1")
            bot.start()
            bot.send("001", FIRST)
            if kill_at == "mid-turn":
                bot.wait_for("the reply request", reached.is_set)
            else:
                bot.wait_for("the finished turn", (bot.spool / "held").exists)
                (bot.spool / "hold").unlink()
            assert state_of(hh.home)["pending"]["question"] == QUESTION  # the model saved it; the user saw nothing
            assert bot.replies() == []
            bot.kill9(group=mode == "settings")
            release.set()
            bot.start()  # the inbox still holds 001: redelivered
            assert bot.wait_replies(1)[0]["reply"] == REPLY_Q
            redone = request_text(srv.main_requests[2])  # the crashed turn made two (a request is logged once answered)
            state = state_of(hh.home)
            assert state["pending"]["question"] == QUESTION and len(user_turns(state, FIRST)) == 1
            bot.send("002", "pro")
            assert bot.wait_replies(2)[1]["reply"] == "Pro it is: welcome aboard."
            answered = request_text(srv.main_requests[-1])
        finally:
            bot.stop()
    assert "answers your pending question" not in redone  # the redelivered message answered nothing
    assert "UNSENT QUESTION" in redone and "PENDING QUESTION" not in redone  # nor was it said to
    assert "answers your pending question" in answered and 'Their answer: \\"pro\\"' in answered
    state = state_of(hh.home)
    assert state["pending"] is None
    assert state["last_answer"]["question"] == QUESTION and state["last_answer"]["answer"] == "pro"
    assert len(user_turns(state, FIRST)) == 1
    assert lost not in [t["text"] for t in state["recent_turns"]]  # the thread holds what the user got
    assert [(t["role"], t["text"]) for t in state["recent_turns"]][-2:] == [("user", "pro"), ("agent", "Pro it is: welcome aboard.")]
    if mode == "binding":  # the chat message ids reached the turns
        assert [t.get("message_id") for t in state["recent_turns"] if t["role"] == "user"] == ["001", "002"]
    if mode == "settings":
        lean.assert_no_hook_errors()


@pytest.mark.parametrize("mode", ["settings", "binding"])
def test_five_resumed_restarts_hold_one_state_block(host_home, lean, sdk_cli, mode):
    """(d) a bot that resumes its SDK session (`resume=<sid>`, the id kept per user in
    its spool) is killed and restarted 5 times; each restart's first prompt gets only what the
    transcript lacks, so the first request of the 5th restart holds the thread's block exactly
    once (the fresh first session's), with the pending question and the answer line."""
    hh = host_home
    if mode == "settings":
        lean.run("init", "--agent", "claude", "--bot", "--no-mcp")
    lean.run("state", "summary", SUMMARY, "--user", USER)  # an earlier thread: the first (fresh) session gets its block
    script = [pending_step(mode), REPLY_Q] * 5 + ["Pro it is: welcome aboard."]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"PYTHONPATH": str(hostcli.REPO_ROOT), **lean.host_env})
        bot = BotProcess(hh.root / "spool", env, sdk_cli, mode=mode, resume=True)
        try:
            messages = [FIRST] + [f"let me think ({i})" for i in range(1, 5)] + ["pro"]
            for i, message in enumerate(messages):
                if i:
                    bot.kill9()
                bot.start()
                first = len(srv.main_requests)
                bot.send(f"{i:03d}", message)
                bot.wait_replies(i + 1)
        finally:
            bot.stop()
        last_start = srv.main_requests[first]
    held = json.dumps(last_start["messages"], ensure_ascii=False)
    assert "let me think (4)" in held and FIRST in held  # the SDK resumed the whole transcript
    assert held.count(BLOCK) == 1, held.count(BLOCK)
    assert "PENDING QUESTION" in held and "answers your pending question" in held and 'Their answer: \\"pro\\"' in held
    state = state_of(hh.home)
    assert state["pending"] is None
    assert state["last_answer"]["question"] == QUESTION and state["last_answer"]["answer"] == "pro"
    if mode == "settings":
        lean.assert_no_hook_errors()
