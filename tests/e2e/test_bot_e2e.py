"""End to end: the always-on bot profile against the real Claude Code CLI, restarted mid-thread.

Session 1 (one `claude -p` process): the user asks, the scripted model sets a summary and a
pending clarification through its Bash tool (`leanctx state …`, as the installed skill tells it)
and asks the question; the process ends. Session 2 is a new `claude -p` process with a new
session id: the first request the model server receives must carry the thread (summary, recent
turns, the pending question with its options) and the note that this message answers it; the
reply is then on disk as the answer and `pending` is cleared.
"""
from __future__ import annotations

import json
import shlex
import sys

import pytest

from leanctx.state.slug import slugify
from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use

pytestmark = pytest.mark.e2e

QUESTION = "Single-user or shared bot?"
SUMMARY = "Setting up the Telegram bot for Ana; the VPS host is chosen."
LEANCTX = f"{shlex.quote(sys.executable)} -m leanctx"


def state_file(hh) -> dict:
    return json.loads((hh.home / ".cks" / "user" / slugify("Ana") / "conversation-state.json").read_text())


def test_restarted_bot_resumes_with_its_pending_question(claude_cli, host_home, lean, run_host):
    hh = host_home
    init = lean.run("init", "--agent", "claude", "--bot")
    assert "bot profile" in init.stdout
    skill = hh.claude_dir / "skills" / "leanctx-conversation-state" / "SKILL.md"
    assert "state pending --question" in skill.read_text()

    session1 = [
        tool_use("Bash", {"command": f"{LEANCTX} state summary {shlex.quote(SUMMARY)}"}),
        tool_use("Bash", {"command": f"{LEANCTX} state pending --question {shlex.quote(QUESTION)} --option single --option shared"}),
        QUESTION,
    ]
    with FakeAnthropic(script=session1) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"CKS_ACTIVE_USER": "Ana"})
        cp, _ = run_host([claude_cli, "-p", "how do I add the bot?", "--allowedTools", "Bash"], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == QUESTION
    lean.assert_no_hook_errors()
    state = state_file(hh)
    assert state["user_slug"] == slugify("Ana") and state["user_id"] == "Ana"  # the hooks and the model's shell agree
    assert state["pending"]["question"] == QUESTION and state["pending"]["options"] == ["single", "shared"]
    assert [(t["role"], t["text"]) for t in state["recent_turns"]] == [("user", "how do I add the bot?"), ("agent", QUESTION)]
    first_session = state["recent_turns"][0]["session_id"]
    assert first_session and state["recent_turns"][1]["session_id"] == first_session
    assert SUMMARY in state["thread_summary"]

    # --- the bot restarts: a new process, a new session --------------------------------------
    with FakeAnthropic(script=["Shared it is: every member of the group can talk to the bot."]) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"CKS_ACTIVE_USER": "Ana"})
        cp, _ = run_host([claude_cli, "-p", "shared", "--allowedTools", "Bash"], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        first_request = json.dumps(srv.main_requests[0])
    for expected in (SUMMARY, "how do I add the bot?", QUESTION, "single", "shared"):
        assert expected in first_request, f"the restarted session was not given {expected!r}"
    assert "answers" in first_request and "pending question" in first_request
    lean.assert_no_hook_errors()

    state = state_file(hh)
    assert state["pending"] is None
    assert state["last_answer"]["question"] == QUESTION and state["last_answer"]["answer"] == "shared"
    assert state["last_answer"]["options"] == ["single", "shared"]
    roles = [(t["role"], t["text"]) for t in state["recent_turns"]]
    assert roles[-2:] == [("user", "shared"), ("agent", "Shared it is: every member of the group can talk to the bot.")]
    second_session = state["recent_turns"][-1]["session_id"]
    assert second_session and second_session != first_session
    # a plain coding install would have recorded nothing: the profile is visible to doctor
    rc, report = lean.doctor("claude")
    assert rc == 0, json.dumps(report, indent=1)
    assert report["agents"][0]["profile"] == "bot"


def test_guard_denies_another_users_folder_in_the_real_host(claude_cli, host_home, lean, run_host, bobs_secret):
    hh = host_home
    lean.run("init", "--agent", "claude", "--bot", "--guard")
    script = [tool_use("Bash", {"command": "cat ~/.cks/user/*/profile.md"}), "I cannot read that."]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"CKS_ACTIVE_USER": "ana"})
        cp, _ = run_host([claude_cli, "-p", "show me everyone's profile", "--allowedTools", "Bash"], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        tool_result = json.dumps(srv.main_requests[1])
    assert bobs_secret not in tool_result, "the guard let the model read another user's file"
    assert "leanctx guard" in tool_result, "the model was not told why the call was denied"
    lean.assert_no_hook_errors()
