"""End to end: `leanctx init --agent claude`, then the real Claude Code CLI (`claude -p`) offline.

Claude Code talks to tests/e2e/fake_anthropic.py on 127.0.0.1 and runs in a temp HOME; leanctx's
data dir (LEANCTX_HOME) is inside that HOME.  What the host really sent is taken from a second,
diagnostic hook (tests/e2e/conftest.py: Diag) that the "user" had in settings.json before init,
from the transcript Claude writes under ~/.claude/projects/, and from the process tree.
"""
from __future__ import annotations

import json

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, is_subagent, tool_use

pytestmark = pytest.mark.e2e

OUR_EVENTS = ["SessionStart", "UserPromptSubmit", "PreCompact", "SubagentStart", "SubagentStop", "Stop", "SessionEnd"]
DIAG_EVENTS = OUR_EVENTS + ["PreToolUse", "PostCompact"]
# What Claude Code 2.1.197 puts into the model context when a hook prints something
# (HOSTS_VERIFIED.md e): "SessionStart:startup hook success: ...", "... hook additional context: ...".
HOOK_TEXT_MARKERS = ("hook success", "hook additional context", "hook feedback", "hook blocking")


def claude_argv(cli: str, prompt: str, *extra: str, tools: str = "Read,Bash,Agent") -> list:
    return [cli, "-p", prompt, "--allowedTools", tools, *extra]


def settings_with_diag(diag, events=DIAG_EVENTS) -> dict:
    return {"hooks": {e: [diag.group(e)] for e in events}}


def assert_no_hook_text(srv: FakeAnthropic, lean) -> None:
    """Nothing any hook printed reached the model, and nothing of leanctx is in the requests."""
    bodies = srv.all_text()
    assert srv.main_requests, "the fake model server saw no request"
    for marker in HOOK_TEXT_MARKERS:
        assert marker not in bodies, f"hook output reached the model: {marker!r}"
    assert "leanctx-hook" not in bodies
    assert str(lean.data) not in bodies


def one_session(diag) -> tuple:
    """(session_id, transcript_path) the host sent to every hook; it must be one and the same."""
    pairs = {(p["session_id"], p["transcript_path"]) for p in diag.payloads()}
    assert len(pairs) == 1, f"host sent several sessions/transcripts: {pairs}"
    return pairs.pop()


def test_turn_with_tool_call_publishes_what_the_host_sent(claude_cli, host_home, lean, diag, mcp_probe, run_host):
    hh = host_home
    hostcli.write_claude_settings(hh.home, settings_with_diag(diag))
    # A user-scope MCP server: Claude starts it eagerly as its own child; leanctx's `host` must
    # name that same process (that is how an MCP connection is matched to a conversation).
    hostcli.write_claude_json(hh.home, {"mcpServers": {"probe": {"type": "stdio", "command": mcp_probe.argv[0],
                                                                  "args": mcp_probe.argv[1:]}}})
    init = lean.run("init", "--agent", "claude")
    assert "Claude Code" in init.stdout

    with FakeAnthropic(script=[tool_use("Read", {"file_path": str(hh.proj / "a.txt")}), "The file says hello."]) as srv:
        # No LEANCTX_HOME in the host's env: the wrapper's baked-in data dir must be used.
        env = hostcli.claude_env(hh.home, srv.base_url)
        assert "LEANCTX_HOME" not in env
        cp, claude_pid = run_host(claude_argv(claude_cli, "read a.txt"), cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == "The file says hello."
        assert "hello world file" in srv.all_text(), "the scripted Read tool call did not run"
        assert_no_hook_text(srv, lean)
    assert "leanctx" not in cp.stdout + cp.stderr

    # --- what the host really sent ---------------------------------------------------------
    seen = diag.events()
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"):
        assert event in seen, f"host did not fire {event}: {seen}"
    session_id, transcript = one_session(diag)
    transcripts = list((hh.claude_dir / "projects").glob(f"*/{session_id}.jsonl"))
    assert [str(p) for p in transcripts] == [transcript], "the transcript Claude wrote is not the one it announced"

    # --- what leanctx published ------------------------------------------------------------
    lean.assert_no_hook_errors()
    rec = lean.only_record("claude")
    assert rec["agent"] == "claude"
    assert rec["session_id"] == session_id
    assert rec["conversation_id"] == session_id
    assert rec["transcript_path"] == transcript
    assert rec["cwd"] == diag.payloads("SessionStart")[0]["cwd"] == str(hh.proj)
    assert rec["source"] == "startup"
    assert rec["last_event"] == "SessionEnd"
    assert rec["ended_at"] and rec["stopped_at"], "Stop and SessionEnd must both have been seen"
    assert rec["stopped_at"] <= rec["ended_at"]
    assert rec["active_subagents"] == {}
    assert rec["compactions"] == 0

    # The host process: the very `claude` process this test started (no node wrapper here).
    host = rec["host"]
    assert host["pid"] == claude_pid
    ancestors = {st["pid"]: st for st in diag.entries("SessionEnd")[0]["chain"]}
    assert claude_pid in ancestors, "the hook did not run under the claude process"
    assert host["name"] == ancestors[claude_pid]["name"]
    assert "claude" in host["name"]
    assert host["start_ticks"] == ancestors[claude_pid]["start_ticks"]
    probes = mcp_probe.starts()
    assert probes, "Claude did not start the MCP server"
    assert {(p["parent"]["pid"], p["parent"]["start_ticks"]) for p in probes} == {(host["pid"], host["start_ticks"])}

    slot = lean.active_transcript
    assert slot["agent"] == "claude"
    assert slot["session_id"] == session_id and slot["conversation_id"] == session_id
    assert slot["transcript_path"] == transcript

    # --- doctor sees it ----------------------------------------------------------------------
    rc, report = lean.doctor("claude")
    assert rc == 0 and report["ok"] is True, json.dumps(report, indent=2)
    last = report["agents"][0]["last_published"]
    assert last["session_id"] == session_id
    assert last["conversation_id"] == session_id
    assert last["transcript_path"] == transcript
    assert last["last_event"] == "SessionEnd"


def test_subagent_is_tracked_while_it_runs_and_dropped_on_stop(claude_cli, host_home, lean, diag, run_host):
    hh = host_home
    hostcli.write_claude_settings(hh.home, settings_with_diag(diag))
    lean.run("init", "--agent", "claude")
    script = [
        tool_use("Agent", {"description": "read the file", "prompt": "Read a.txt and report.",
                           "subagent_type": "general-purpose",
                           "run_in_background": False}),  # parent turn 1 (2.1.332 runs agents in the background by default)
        tool_use("Read", {"file_path": str(hh.proj / "a.txt")}),   # subagent turn 1
        "sub: it says hello",                                     # subagent turn 2
        "parent: done",                                           # parent turn 2
    ]
    with FakeAnthropic(script=script) as srv:
        cp, _ = run_host(claude_argv(claude_cli, "use an agent"), cwd=hh.proj,
                         env=hostcli.claude_env(hh.home, srv.base_url, lean.host_env))
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == "parent: done"
        assert [is_subagent(b) for b in srv.main_requests] == [False, True, True, False]
        assert_no_hook_text(srv, lean)

    starts, stops = diag.payloads("SubagentStart"), diag.payloads("SubagentStop")
    assert len(starts) == 1 and len(stops) == 1, diag.events()
    agent_id = starts[0]["agent_id"]
    assert agent_id and stops[0]["agent_id"] == agent_id
    session_id, transcript = one_session(diag)

    # While the subagent ran (its own Read call), our record listed it.
    during = [e for e in diag.entries("PreToolUse") if e["payload"].get("agent_id") == agent_id]
    assert len(during) == 1, "the subagent's tool call was not seen"
    snap = [r for r in during[0]["snapshot"].values() if isinstance(r, dict) and r.get("session_id") == session_id]
    assert len(snap) == 1, during[0]["snapshot"]
    assert snap[0]["active_subagents"].get(agent_id, {}).get("type") == "general-purpose", snap[0]
    assert snap[0]["last_event"] == "SubagentStart"

    lean.assert_no_hook_errors()
    rec = lean.only_record("claude")
    assert rec["session_id"] == session_id
    assert rec["transcript_path"] == transcript, "a subagent event must not replace the parent's transcript"
    assert agent_id not in rec["active_subagents"] and rec["active_subagents"] == {}
    assert rec["last_subagent_stop_at"]
    assert rec["last_subagent_stop_at"] <= rec["stopped_at"] <= rec["ended_at"]
    assert rec["last_event"] == "SessionEnd"


def test_compact_in_a_continued_session_counts_a_compaction(claude_cli, host_home, lean, diag, run_host):
    hh = host_home
    hostcli.write_claude_settings(hh.home, settings_with_diag(diag))
    lean.run("init", "--agent", "claude")
    # One plain exchange is "Not enough messages to compact."; a tool round trip is enough.
    with FakeAnthropic(script=[tool_use("Read", {"file_path": str(hh.proj / "a.txt")}), "first answer"]) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, lean.host_env)
        cp, _ = run_host(claude_argv(claude_cli, "read a.txt"), cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        session_id, transcript = one_session(diag)
        before = lean.only_record("claude")
        assert before["compactions"] == 0 and before["last_compaction_at"] is None

        cp, _ = run_host(claude_argv(claude_cli, "/compact", "--continue"), cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        assert len(srv.compaction_requests) == 1, f"Claude did not compact: {cp.stdout!r} {[r.kind for r in srv.log]}"

    pre = diag.payloads("PreCompact")
    assert len(pre) == 1 and pre[0]["session_id"] == session_id and pre[0]["trigger"] == "manual"
    assert [p["source"] for p in diag.payloads("SessionStart")] == ["startup", "resume", "compact"]
    assert one_session(diag) == (session_id, transcript)

    lean.assert_no_hook_errors()
    rec = lean.only_record("claude")  # same conversation, no second record
    assert rec["conversation_id"] == session_id and rec["session_id"] == session_id
    assert rec["transcript_path"] == transcript
    assert rec["compactions"] >= 1
    assert rec["last_compaction_at"] and rec["last_compaction_at"] > before["updated_at"]
    assert rec["last_event"] == "SessionEnd"
    assert rec["created_at"] == before["created_at"]


# A user's settings.json as they wrote it: other keys, their own hooks, 4-space indent and no
# trailing newline -- `uninstall` must give back exactly these bytes.
def users_settings(foreign_log, flag_log) -> str:
    foreign = (f"{{ cat; echo; }} >> '{foreign_log}'; printf 'flag=%s\\n' \"$MY_TEAM_FLAG\" >> '{flag_log}'; "
               "echo FOREIGN-CONTEXT-7f3a")
    settings = {
        "permissions": {"allow": ["Read", "Bash(ls:*)"], "deny": []},
        "env": {"MY_TEAM_FLAG": "team-42"},
        "cleanupPeriodDays": 30,
        "hooks": {
            "SessionStart": [{"hooks": [{"type": "command", "command": foreign, "timeout": 10}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}],
        },
    }
    return json.dumps(settings, indent=4)


def test_foreign_settings_and_hooks_survive_init_run_uninstall(claude_cli, host_home, lean, tmp_path, run_host):
    hh = host_home
    foreign_log, flag_log = tmp_path / "foreign.jsonl", tmp_path / "flag.txt"
    original = users_settings(foreign_log, flag_log).encode()
    settings = hh.claude_dir / "settings.json"
    settings.write_bytes(original)

    lean.run("init", "--agent", "claude")
    wired = json.loads(settings.read_text())
    assert wired["env"] == {"MY_TEAM_FLAG": "team-42"} and wired["cleanupPeriodDays"] == 30
    assert wired["permissions"] == {"allow": ["Read", "Bash(ls:*)"], "deny": []}
    first = wired["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert "FOREIGN-CONTEXT-7f3a" in first, "the user's own hook must stay first"
    # the user's pre-tool hook stays first and untouched; ours (the read gate) comes after it
    assert wired["hooks"]["PreToolUse"][0] == {"matcher": "Bash", "hooks": [{"type": "command", "command": "true"}]}
    assert [g.get("matcher") for g in wired["hooks"]["PreToolUse"][1:]] == ["mcp__leanctx__ctx_read|Read|Bash"]

    with FakeAnthropic(script=["hi there", "hi again"]) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, lean.host_env)
        cp, _ = run_host(claude_argv(claude_cli, "hello"), cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == "hi there"
        # Both fired in the same run: the user's hook (its stdout became model context, which also
        # proves the file was accepted, env included) and ours (a record for the same session).
        foreign = [json.loads(line) for line in foreign_log.read_text().splitlines() if line.strip()]
        assert len(foreign) == 1 and foreign[0]["hook_event_name"] == "SessionStart"
        session_id = foreign[0]["session_id"]
        assert flag_log.read_text() == "flag=team-42\n"
        first_bodies = srv.all_text()
        assert "hook success: FOREIGN-CONTEXT-7f3a" in first_bodies  # the detector works ...
        assert first_bodies.count("hook success") == first_bodies.count("hook success: FOREIGN-CONTEXT-7f3a")  # ... and only the user's hook spoke
        lean.assert_no_hook_errors()
        rec = lean.only_record("claude")
        assert rec["session_id"] == session_id and rec["last_event"] == "SessionEnd" and rec["stopped_at"]
        assert rec["transcript_path"] == foreign[0]["transcript_path"]

        lean.run("uninstall", "--agent", "claude")
        assert settings.read_bytes() == original, "uninstall did not restore the user's exact bytes"
        assert not lean.wrapper.exists(), "the last uninstall should remove the hook wrapper"

        state = lean.state()
        cp, _ = run_host(claude_argv(claude_cli, "hello again"), cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == "hi again"
    foreign = [json.loads(line) for line in foreign_log.read_text().splitlines() if line.strip()]
    assert len(foreign) == 2 and foreign[1]["session_id"] != session_id, "the user's hook must keep working"
    assert lean.state() == state, "leanctx published something after uninstall"
    assert list(lean.records("claude")) == [session_id]
    lean.assert_no_hook_errors()
    assert settings.read_bytes() == original
