"""GitHub Copilot CLI: payloads recorded from the real CLI 1.0.102 (tests/fixtures/payloads/copilot/),
normalized per event; what we print per event (Copilot denies a tool on plain stdout from
permissionRequest and on any non-zero preToolUse exit); the hooks file of ours, installed and
taken out through the real `leanctx` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.base import PRE_COMPACT, PRE_TOOL, PROMPT, SESSION_END, SESSION_START, STOP
from leanctx.cache.mcpserver import call_id_of
from leanctx.hooks.publish import read_json, record_path
from tests.conftest import payload, run_cli

COPILOT = agents.get("copilot")
SESSION = "470bf21e-27fd-4278-a04b-738423fc7ca4"
PROJ = "/home/user/work/proj"
# a main-agent event without `transcriptPath` is given the session log the hook derives (Copilot's
# config folder as the hook sees it): the cache checks there what each call delivered
OWN_LOG = os.path.join(os.environ.get("COPILOT_HOME") or os.path.expanduser("~/.copilot"), "session-state", SESSION,
                       "events.jsonl")


@pytest.mark.parametrize(
    ("fixture", "event", "kind", "fields"),
    [
        ("sessionStart", "sessionStart", SESSION_START, {"source": "startup", "transcript_path": OWN_LOG}),
        ("sessionStart.resume", "sessionStart", SESSION_START, {"source": "resume"}),
        ("userPromptSubmitted", "userPromptSubmitted", PROMPT, {"prompt": "read a.txt"}),
        ("agentStop", "agentStop", STOP,
         {"transcript_path": f"/home/user/.copilot/session-state/{SESSION}/events.jsonl"}),
        ("sessionEnd", "sessionEnd", SESSION_END, {"transcript_path": OWN_LOG}),
        ("preMcpToolCall", "preMcpToolCall", PRE_TOOL,
         {"tool_name": "mcp__logsrv__ping", "tool_use_id": "call_fake00002", "tool_input": {"x": "hi"}}),
        ("preToolUse", "preToolUse", PRE_TOOL, {"tool_name": "view", "tool_input": {"path": f"{PROJ}/a.txt"}, "tool_use_id": None}),
    ],
)
def test_recorded_payloads_normalize(fixture: str, event: str, kind: str, fields: dict) -> None:
    ev = COPILOT.normalize(event, payload("copilot", fixture))
    assert (ev.agent, ev.event, ev.kind) == ("copilot", event, kind)
    assert ev.conversation_id == ev.session_id == SESSION and ev.cwd == PROJ and ev.workspace_roots == []
    for name, value in fields.items():
        assert getattr(ev, name) == value, name


def test_second_recorded_run_and_sdk_field_names() -> None:
    """The second recorded run has its own session; the SDK typings name the folder workingDirectory."""
    assert COPILOT.normalize("agentStop", payload("copilot", "agentStop.2")).transcript_path.endswith("/events.jsonl")
    ev = COPILOT.normalize("sessionStart", {"sessionId": "s", "workingDirectory": "/w", "source": "new"})
    assert (ev.conversation_id, ev.cwd, ev.source) == ("s", "/w", "startup")
    # the initial prompt is not a turn of the user's (userPromptSubmitted follows with the prompt)
    assert COPILOT.normalize("sessionStart", payload("copilot", "sessionStart")).prompt is None


def test_subagent_tool_hook_names_the_child_session_and_agent() -> None:
    """SDK typings: child tool hooks carry the child's sessionId and its agentId."""
    body = dict(payload("copilot", "preMcpToolCall"), sessionId="child", agentId="sub-1", serverName="leanctx", toolName="ctx_read")
    ev = COPILOT.normalize("preMcpToolCall", body)
    assert (ev.conversation_id, ev.subagent_id, ev.tool_name) == ("child", "sub-1", "mcp__leanctx__ctx_read")


@pytest.mark.parametrize("body", [{"serverName": 5, "toolName": "ctx_read"}, {"serverName": "leanctx"}, {"toolCallId": ["x"]}])
def test_mcp_call_payload_with_wrong_types(body: dict) -> None:
    ev = COPILOT.normalize("preMcpToolCall", dict(body, sessionId="s"))
    assert ev.tool_name is None or ev.tool_use_id is None
    assert COPILOT.read_gate_output(ev) == ""


def test_outputs_are_copilots_own_forms() -> None:
    assert json.loads(COPILOT.context_output("sessionStart", "T")) == {"additionalContext": "T"}
    assert json.loads(COPILOT.context_output("userPromptSubmitted", "T")) == {"additionalContext": "T"}
    assert COPILOT.context_output("agentStop", "T") == ""
    deny = json.loads(COPILOT.guard_output("preToolUse", "R"))
    assert deny == {"permissionDecision": "deny", "permissionDecisionReason": "R"}
    assert COPILOT.check_output("preToolUse", COPILOT.guard_output("preToolUse", "R")) is None
    ev = COPILOT.normalize("preMcpToolCall", dict(payload("copilot", "preMcpToolCall"), serverName="leanctx", toolName="ctx_read"))
    answer = COPILOT.read_gate_output(ev)
    assert json.loads(answer) == {"metaToUse": {"leanctx/callId": "call_fake00002"}}
    assert COPILOT.check_output("preMcpToolCall", answer) is None
    # what Copilot merges into `_meta` is what our MCP server reads as the call id
    assert call_id_of(dict(json.loads(answer)["metaToUse"], progressToken=1)) == "call_fake00002"
    # plain text is never a valid answer (permissionRequest would deny the tool on it)
    for event in ("sessionStart", "preToolUse", "preMcpToolCall", "permissionRequest"):
        assert COPILOT.check_output(event, "some banner text") is not None
        assert COPILOT.check_output(event, "") is None
    assert COPILOT.check_output("agentStop", '{"additionalContext": "x"}') is not None
    assert COPILOT.read_gate_output(COPILOT.normalize("preMcpToolCall", dict(ev.as_dict(), toolCallId="x" * 201))) == ""


def test_wired_events_and_profiles() -> None:
    names = {spec.name: spec.kind for spec in COPILOT.events}
    assert names == {"sessionStart": SESSION_START, "userPromptSubmitted": PROMPT, "preCompact": PRE_COMPACT,
                     "agentStop": STOP, "sessionEnd": SESSION_END}
    # never permissionRequest: plain stdout there denies the tool
    coding = [(s.name, f) for s, f in COPILOT.profile_events(read_gate=True)]
    assert ("preMcpToolCall", ("--read-gate",)) in coding and not any(n.startswith("permission") for n, _ in coding)
    guarded = [(s.name, f) for s, f in COPILOT.profile_events(guard=True, read_gate=True)]
    # the guard and the read gate listen on two events here, each entry doing one job
    assert ("preToolUse", ("--guard",)) in guarded and ("preMcpToolCall", ("--read-gate",)) in guarded
    claude = [(s.name, f) for s, f in agents.get("claude").profile_events(guard=True, read_gate=True)]
    assert claude.count(("PreToolUse", ("--guard", "--read-gate"))) == 1 and len([c for c in claude if c[0] == "PreToolUse"]) == 1


def hook(event: str, body: bytes | str, *flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "leanctx", "hook", "copilot", event, *flags], input=body if isinstance(body, bytes) else body.encode(),
                          capture_output=True, env=env or dict(os.environ), timeout=60)


def test_read_gate_notes_the_call_and_hands_its_id_to_the_mcp_request(home: Path, data_dir: Path) -> None:
    body = dict(payload("copilot", "preMcpToolCall"), serverName="leanctx", toolName="ctx_read", arguments={"path": "a.txt"})
    proc = hook("preMcpToolCall", json.dumps(body), "--read-gate")
    assert proc.returncode == 0 and json.loads(proc.stdout) == {"metaToUse": {"leanctx/callId": "call_fake00002"}}
    record = read_json(record_path(data_dir, "copilot", SESSION))
    assert "call_fake00002" in record["read_calls"] and record["cwd"] == PROJ
    # another server's tool: nothing noted, nothing printed (Copilot keeps its `_meta`)
    other = hook("preMcpToolCall", json.dumps(payload("copilot", "preMcpToolCall")), "--read-gate")
    assert (other.returncode, other.stdout) == (0, b"")


@pytest.mark.parametrize("stdin", [b"", b"\x00\x01", b"[1]", b'{"sessionId": 5}', b"not json"])
@pytest.mark.parametrize(("event", "flags"), [("preToolUse", ("--guard",)), ("preMcpToolCall", ("--read-gate",)),
                                              ("sessionStart", ("--bot",)), ("permissionRequest", ())])
def test_hostile_stdin_never_denies_a_tool(home: Path, data_dir: Path, stdin: bytes, event: str, flags: tuple) -> None:
    """Copilot denies the tool on any non-zero preToolUse exit and on plain stdout from
    permissionRequest: whatever arrives, exit 0 and print nothing (the error goes to our log)."""
    proc = hook(event, stdin, *flags)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")


def test_broken_data_dir_still_exits_zero_silently(home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    body = dict(payload("copilot", "preMcpToolCall"), serverName="leanctx", toolName="ctx_read")
    proc = hook("preMcpToolCall", json.dumps(body), "--read-gate", env=dict(os.environ, LEANCTX_HOME=str(blocker / "data")))
    assert (proc.returncode, proc.stdout) == (0, b"")


def test_guard_denies_in_copilots_form(home: Path, tmp_path: Path) -> None:
    cks = home / ".cks"
    (cks / "user" / "bob").mkdir(parents=True)
    body = dict(payload("copilot", "preToolUse"), toolArgs={"path": str(cks / "user" / "bob" / "profile.md")}, cwd=str(tmp_path))
    proc = hook("preToolUse", json.dumps(body), "--guard", env=dict(os.environ, CKS_HOME=str(cks), CKS_ACTIVE_USER="alice"))
    answer = json.loads(proc.stdout)
    assert proc.returncode == 0 and answer["permissionDecision"] == "deny" and "bob" in answer["permissionDecisionReason"]


def transcript_line(content: str, **top: object) -> str:
    return json.dumps({"type": "assistant.message", "data": {"content": content, "toolRequests": []}, **top}) + "\n"


def stop_line(stamp: int) -> str:
    """Copilot's own line for an agentStop hook it is about to run (compact JSON, as it writes it)."""
    return json.dumps({"type": "hook.start", "data": {"hookType": "agentStop", "input": {"timestamp": stamp}}},
                      separators=(",", ":")) + "\n"


STAMP = payload("copilot", "agentStop")["timestamp"]


def reply(body: dict) -> str | None:
    """What the bot profile records for this agentStop (the plain profile never reads the transcript)."""
    ev = COPILOT.normalize("agentStop", body)
    assert ev.reply is None
    return COPILOT.reply_text(ev)


def test_reply_comes_from_the_transcript_tail(tmp_path: Path) -> None:
    """agentStop names the transcript but carries no reply: the last main-agent message with text
    before Copilot's line for this very agentStop."""
    path = tmp_path / "events.jsonl"
    path.write_text("x" * 300_000 + "\n" + transcript_line("the answer") + transcript_line("")
                    + transcript_line("sub: done", agentId="sub-1") + '{"type": "session.shutdown"}\n{broken\n'
                    + stop_line(STAMP) + transcript_line("a later turn"))
    body = dict(payload("copilot", "agentStop"), transcriptPath=str(path))
    assert reply(body) == "the answer"
    assert reply(dict(body, agentId="sub-1")) is None  # a subagent's stop: not the user's reply
    assert COPILOT.reply_text(COPILOT.normalize("sessionEnd", dict(body))) is None


def test_reply_waits_for_copilot_to_write_the_turn(tmp_path: Path) -> None:
    """The hook may start before Copilot wrote the turn: the reply is taken once this stop's line
    is there, never an older turn's reply in its place."""
    import threading

    path = tmp_path / "events.jsonl"
    path.write_text(transcript_line("the previous turn") + stop_line(STAMP - 5000))
    body = dict(payload("copilot", "agentStop"), transcriptPath=str(path))
    writer = threading.Timer(0.3, lambda: path.open("a").write(transcript_line("this turn") + stop_line(STAMP)))
    writer.start()
    try:
        assert reply(body) == "this turn"
    finally:
        writer.join()
    path.unlink()  # not even created yet when the hook starts
    writer = threading.Timer(0.3, lambda: path.write_text(transcript_line("this turn") + stop_line(STAMP)))
    writer.start()
    try:
        assert reply(body) == "this turn"
    finally:
        writer.join()
    path.write_text(transcript_line("the previous turn") + stop_line(STAMP - 5000))
    assert reply(body) is None  # never written: nothing, not the old reply


@pytest.mark.parametrize("kind", ["missing", "fifo", "folder", "binary", "no stamp"])
def test_reply_from_a_hostile_transcript_path_is_none_and_never_blocks(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "events.jsonl"
    body = dict(payload("copilot", "agentStop"), transcriptPath=str(path))
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading would block a plain open() forever
    elif kind == "folder":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00" * 1000 + b'"assistant.message"\xff\n' + stop_line(STAMP).encode())
    elif kind == "no stamp":
        path.write_text(transcript_line("x") + stop_line(STAMP))
        body["timestamp"] = "soon"
    assert reply(body) is None


# -- the hooks file of ours, through the real command ---------------------------------------------------------

USER_HOOKS = '{\n  "version": 1,\n  "hooks": {"sessionStart": [{"type": "command", "bash": "echo mine", "timeoutSec": 5}]}\n}\n'
USER_MCP = '{\n  // my servers\n  "mcpServers": {"mine": {"type": "local", "command": "mine", "args": [], "tools": ["*"]}}\n}\n'


def snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()} if folder.exists() else {}


def test_init_writes_our_own_hooks_file_beside_the_users_and_uninstall_restores_bytes(home: Path, data_dir: Path) -> None:
    cdir = home / ".copilot"
    (cdir / "hooks").mkdir(parents=True)
    (cdir / "hooks" / "mine.json").write_text(USER_HOOKS)
    (cdir / "mcp-config.json").write_text(USER_MCP)
    before = snapshot(cdir)
    assert run_cli("init", "--agent", "copilot").returncode == 0
    ours = json.loads((cdir / "hooks" / "leanctx.json").read_text())
    assert ours["version"] == 1
    entry = ours["hooks"]["preMcpToolCall"][0]
    assert set(entry) == {"type", "bash", "timeoutSec"} and entry["bash"].endswith("leanctx-hook copilot preMcpToolCall --read-gate")
    mcp = (cdir / "mcp-config.json").read_text()
    assert "// my servers" in mcp and '"mine"' in mcp
    server = json.loads("\n".join(line for line in mcp.splitlines() if "//" not in line))["mcpServers"]["leanctx"]
    assert server["type"] == "local" and server["tools"] == ["*"]
    assert (cdir / "hooks" / "mine.json").read_text() == USER_HOOKS
    once = snapshot(cdir)
    assert run_cli("init", "--agent", "copilot").returncode == 0
    assert snapshot(cdir) == once
    assert run_cli("uninstall", "--agent", "copilot").returncode == 0
    assert snapshot(cdir) == before and sorted(p.name for p in (cdir / "hooks").iterdir()) == ["mine.json"]


def test_copilot_home_is_where_copilot_reads(home: Path, data_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "copilot-home"
    env = dict(os.environ, COPILOT_HOME=str(elsewhere))
    assert run_cli("init", "--agent", "copilot", env=env).returncode == 0
    assert (elsewhere / "hooks" / "leanctx.json").is_file() and (elsewhere / "mcp-config.json").is_file()
    assert not (home / ".copilot").exists()
    assert run_cli("uninstall", "--agent", "copilot", env=env).returncode == 0
    assert snapshot(elsewhere) == {}


@pytest.mark.parametrize(("name", "text"), [("hooks/leanctx.json", '{"version": 1, "hooks": {'),
                                            ("hooks/leanctx.json", '{"version": 1, "hooks": []}'),
                                            ("mcp-config.json", '{"mcpServers": {"mine": }')])
def test_unparseable_file_is_left_untouched_and_nothing_is_written(home: Path, data_dir: Path, name: str, text: str) -> None:
    path = home / ".copilot" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    before = snapshot(home / ".copilot")
    proc = run_cli("init", "--agent", "copilot")
    assert proc.returncode == 2 and str(path) in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(home / ".copilot") == before and not (data_dir / "installed").exists()


def test_project_install_says_copilot_needs_a_trusted_folder(home: Path, data_dir: Path, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    proc = run_cli("init", "--agent", "copilot", "--project", str(proj))
    assert proc.returncode == 0, proc.stderr
    assert (proj / ".github" / "hooks" / "leanctx.json").is_file()
    assert json.loads((proj / ".github" / "mcp.json").read_text())["mcpServers"]["leanctx"]["type"] == "local"
    assert "NOTE: GitHub Copilot CLI: Copilot runs project hooks only in a folder you trusted" in proc.stderr
    doctor = run_cli("doctor", "--agent", "copilot", "--project", str(proj), "--json")
    report = json.loads(doctor.stdout)
    checks = {c["name"]: c for a in report["agents"] for c in a["checks"]}
    assert "trusted" in checks["copilot trusts the project folder"]["detail"]
    assert run_cli("uninstall", "--agent", "copilot", "--project", str(proj)).returncode == 0
    assert snapshot(proj) == {}


def test_comment_in_our_hooks_file_is_flagged_since_copilot_skips_the_file(home: Path, data_dir: Path) -> None:
    """Verified on 1.0.102: a hooks file with a comment or trailing comma never runs."""
    path = home / ".copilot" / "hooks" / "leanctx.json"
    path.parent.mkdir(parents=True)
    path.write_text('{\n  // mine\n  "version": 1,\n  "hooks": {}\n}\n')
    proc = run_cli("init", "--agent", "copilot")
    assert proc.returncode == 1 and "it silently skips this whole file" in proc.stderr and "line 2" in proc.stderr
    assert "// mine" in path.read_text()
    report = json.loads(run_cli("doctor", "--agent", "copilot", "--json").stdout)
    failing = [c["name"] for a in report["agents"] for c in a["checks"] if c["status"] == "fail"]
    assert "config is strict JSON" in failing
