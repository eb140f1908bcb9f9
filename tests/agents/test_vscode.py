"""VS Code (Copilot Chat's agent hooks): payloads in the shape its source builds
(tests/fixtures/documented/vscode, Copilot Chat 0.38+ and 0.37), fed to the hook commands
`leanctx init` wrote, the way VS Code runs them (`/bin/sh -c`, payload on stdin, cwd the workspace
root, its own environment: it sets no variable of its own).

VS Code runs our Claude Code entries (`~/.claude/settings.json`) and our Copilot CLI file
(`~/.copilot/hooks/leanctx.json`) too, ignoring every matcher: none of its tools may be denied,
gated or stubbed there, and its session is filed under `vscode` with its own id. Copilot CLI runs
our VS Code file from the same folder: it must do nothing there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents import vscode
from leanctx.agents.base import PRE_COMPACT, PRE_TOOL, SESSION_START, STOP, SUBAGENT_START
from leanctx.cache.scope import SILENT_COMPACTION
from leanctx.hooks.publish import read_json, record_path
from tests.conftest import PAYLOADS, REPO, run_cli
from tests.hooks.test_other_hosts_run_claude_hooks import records, run_as_host

DOC = REPO / "tests" / "fixtures" / "documented" / "vscode"
AGENT = agents.get("vscode")
SESSION = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
TOOL_CALLS = ("PreToolUse.read_file.json", "PreToolUse.run_in_terminal.json", "PreToolUse.replace_string_in_file.json",
              "PreToolUse.read_file.0.37.json")


def documented(name: str, project: Path | None = None) -> dict:
    body = json.loads((DOC / name).read_text())
    if project is not None:  # VS Code's `cwd` is the workspace root; file paths under it
        text = json.dumps(body).replace("/home/user/proj", str(project))
        body = json.loads(text)
    return body


def entries(config: Path, event: str) -> list[str]:
    """Every command of ours for `event` in a file init wrote (Claude's groups or flat entries)."""
    groups = json.loads(config.read_text())["hooks"].get(event, [])
    found = [h.get("command") or h.get("bash") for g in groups for h in g.get("hooks", [g])]
    return [c for c in found if c and "leanctx-hook" in c]


def run_vscode(command: str, payload: dict, project: Path):
    return run_as_host(command, payload, {}, project)  # VS Code adds no variable of its own


@pytest.fixture
def project(home: Path) -> Path:
    p = home / "proj"
    p.mkdir()
    (p / "a.txt").write_text("hello world file\n")
    return p


# -- who is calling ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(p.name for p in DOC.glob("*.json")))
def test_documented_payloads_are_vscode_s(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COPILOT_CLI", raising=False)
    assert vscode.is_vscode_call(documented(name))
    monkeypatch.setenv("COPILOT_CLI", "1")  # Copilot CLI's Claude-style dialect sends this very shape
    assert not vscode.is_vscode_call(documented(name))


@pytest.mark.parametrize("path", sorted((PAYLOADS / "claude").glob("*.json")) + sorted((PAYLOADS / "copilot").glob("*.json"))
                         + sorted((REPO / "tests" / "fixtures" / "documented" / "cursor").glob("*.json")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_other_hosts_payloads_are_not_vscode_s(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude Code's recorded payloads carry no timestamp, Copilot CLI's camelCase ones epoch ms
    (its snake_case ones come with COPILOT_CLI=1, which Copilot sets for every hook), Cursor's
    none; Continue's neither (its getCommonFields)."""
    monkeypatch.delenv("COPILOT_CLI", raising=False)
    if path.name.endswith(".pascal.json") or ".pascal." in path.name:
        monkeypatch.setenv("COPILOT_CLI", "1")
    assert not vscode.is_vscode_call(json.loads(path.read_text()))


@pytest.mark.parametrize("stamp", [1796104221509, "2026-03-20", "2026-03-20T10:30:00Z", "2026-03-20T10:30:00.000+01:00", None, True])
def test_a_timestamp_not_in_toisostring_form_is_not_vscode_s(stamp: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COPILOT_CLI", raising=False)
    assert not vscode.is_vscode_call(documented("SessionStart.json") | {"timestamp": stamp})


def test_normalize_names_vscode_s_session_in_both_payload_generations() -> None:
    for name in ("SessionStart.json", "SessionStart.0.37.json"):
        ev = AGENT.normalize("SessionStart", documented(name))
        assert (ev.agent, ev.kind, ev.conversation_id, ev.session_id, ev.source) == ("vscode", SESSION_START, SESSION, SESSION, "startup")
        assert ev.cwd == "/home/user/proj" and ev.transcript_path.endswith(f"/GitHub.copilot-chat/transcripts/{SESSION}.jsonl")
    sub = AGENT.normalize("SubagentStart", documented("SubagentStart.json"))
    assert (sub.kind, sub.conversation_id, sub.subagent_id, sub.subagent_type) == (SUBAGENT_START, SESSION, "subagent-1", "Plan")
    assert AGENT.normalize("PreCompact", documented("PreCompact.json")).kind == PRE_COMPACT
    assert AGENT.normalize("Stop", documented("Stop.json")).kind == STOP


def test_handover_files_lifecycle_events_and_no_tool_call() -> None:
    """The event VS Code ran an entry of ours for: its payload's own name when it is one of VS
    Code's, else the entry's (Copilot CLI's names mapped as VS Code maps them)."""
    for event, payload, want in [
        ("SessionStart", documented("SessionStart.json"), "SessionStart"),
        ("sessionStart", documented("SessionStart.json"), "SessionStart"),
        ("agentStop", documented("Stop.json"), "Stop"),
        ("agentStop", {}, "Stop"),
        ("userPromptSubmitted", {}, "UserPromptSubmit"),
        ("PreCompact", documented("SessionStart.0.37.json") | {"hookEventName": "PreCompact"}, "PreCompact"),
    ]:
        assert AGENT.handover(event, payload) == (AGENT, want)
    for event, payload in [("PreToolUse", documented("PreToolUse.read_file.json")), ("PostToolUse", documented("PostToolUse.read_file.json")),
                           ("preToolUse", {}), ("postToolUse", {}), ("SessionEnd", {}), ("sessionEnd", {}), ("preMcpToolCall", {})]:
        assert AGENT.handover(event, payload) is None


# -- where and what ---------------------------------------------------------------------------
def test_paths_and_entry_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "elsewhere"))  # VS Code spells `~/.copilot/hooks` itself
    assert AGENT.user_config_path(tmp_path) == tmp_path / ".copilot" / "hooks" / "leanctx-vscode.json"
    assert AGENT.project_config_path(tmp_path / "p") == tmp_path / "p" / ".github" / "hooks" / "leanctx-vscode.json"
    copilot = agents.get("copilot")
    assert AGENT.project_config_path(tmp_path).name != copilot.project_config_path(tmp_path).name  # never the same file
    assert AGENT.mcp_config(tmp_path, None) == (tmp_path / ".config" / "Code" / "User" / "mcp.json", "json", ("servers",))
    assert AGENT.mcp_config(tmp_path, tmp_path / "p") == (tmp_path / "p" / ".vscode" / "mcp.json", "json", ("servers",))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert AGENT.mcp_config(tmp_path, None)[0] == tmp_path / "xdg" / "Code" / "User" / "mcp.json"
    monkeypatch.setattr(sys, "platform", "darwin")
    assert AGENT.mcp_config(tmp_path, None)[0] == tmp_path / "Library" / "Application Support" / "Code" / "User" / "mcp.json"
    assert AGENT.mcp_entry("leanctx", ["mcp"]) == {"type": "stdio", "command": "leanctx", "args": ["mcp"]}
    spec = AGENT.event("SessionStart")
    assert AGENT.hook_group("leanctx-hook vscode SessionStart", spec) == {"type": "command", "command": "leanctx-hook vscode SessionStart",
                                                                          "timeout": 10}
    assert AGENT.rules_path(tmp_path, None) is None and AGENT.rules_path(tmp_path, tmp_path) is None


def test_profile_wires_no_tool_event_but_the_guard_s() -> None:
    """VS Code ignores matchers: a pre-tool entry would see every tool call. Only --guard adds one."""
    names = [spec.name for spec, _ in AGENT.profile_events(read_gate=True, builtin_read=True)]
    assert names == ["SessionStart", "UserPromptSubmit", "PreCompact", "SubagentStart", "SubagentStop", "Stop"]
    guarded = AGENT.profile_events(guard=True, read_gate=True, builtin_read=True)
    assert [(s.name, s.matcher, f) for s, f in guarded if s.kind == PRE_TOOL] == [("PreToolUse", None, ("--guard",))]
    assert AGENT.read_gate_event is None and AGENT.builtin_read_tools == () and AGENT.family == "claude-shaped"
    assert set(AGENT.support) == {"verified", "hooks", "mcp", "rule", "call_id", "bot", "guard"} and AGENT.verified_version == ""


def test_guard_answer_is_one_vscode_reads() -> None:
    """chatHookService.executePreToolUseHook: `hookSpecificOutput.permissionDecision`, kept only
    when its `hookEventName` is the hook's own (or absent)."""
    out = json.loads(AGENT.guard_output("PreToolUse", "no"))
    assert out == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}
    assert AGENT.check_output("PreToolUse", json.dumps(out)) is None
    assert AGENT.check_output("SessionStart", "") is None


def test_vscode_conversations_never_get_stubs() -> None:
    assert "vscode" in SILENT_COMPACTION and "hook" in SILENT_COMPACTION["vscode"]


# -- VS Code running our Claude Code entries ---------------------------------------------------
@pytest.mark.parametrize("profile", [[], ["--guard"], ["--bot"]])
def test_vscode_running_claude_entries_denies_no_tool_and_files_its_session(home: Path, data_dir: Path, project: Path,
                                                                           profile: list[str]) -> None:
    proc = run_cli("init", "--agent", "claude", *profile)  # with the MCP server: the read gate on Read|Bash
    assert proc.returncode == 0, proc.stderr
    settings = home / ".claude" / "settings.json"
    pre, post = entries(settings, "PreToolUse"), entries(settings, "PostToolUse")
    assert pre and post and any("--read-gate" in c for c in pre)
    # what a tool of VS Code's might touch under --guard: another user's folder
    other = home / ".cks" / "user" / "bob"
    other.mkdir(parents=True)
    for name in TOOL_CALLS:
        payload = documented(name, project)
        payload["tool_input"] = {**payload["tool_input"], **({"filePath": str(other / "profile.md")} if "filePath" in payload["tool_input"] else {})}
        for command in pre:
            ran = run_vscode(command, payload, project)
            assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b""), (name, command, ran)
    for command in post:
        ran = run_vscode(command, documented("PostToolUse.read_file.json", project), project)
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b"")
    assert records(data_dir) == []  # a tool call files nothing
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        (command,) = entries(settings, event)
        ran = run_vscode(command, documented(f"{event}.json", project), project)
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b""), ran  # no bot thread handed to VS Code
    assert records(data_dir) == [f"vscode/{SESSION}.json"]
    record = read_json(record_path(data_dir, "vscode", SESSION))
    assert (record["agent"], record["conversation_id"], record["session_id"], record["last_event"]) == ("vscode", SESSION, SESSION, "Stop")
    assert record["cwd"] == str(project) and record["transcript_path"].endswith(f"{SESSION}.jsonl")
    assert not (data_dir / "logs" / "hooks.log").exists()
    assert not (home / ".cks" / "user" / "local").exists()  # --bot kept no thread for VS Code's prompt


def test_vscode_1_109_payloads_through_claude_entries(home: Path, data_dir: Path, project: Path) -> None:
    """Copilot Chat 0.37 (VS Code 1.109) sent `sessionId`/`hookEventName`: the same outcome."""
    assert run_cli("init", "--agent", "claude").returncode == 0
    settings = home / ".claude" / "settings.json"
    for command in entries(settings, "PreToolUse"):
        ran = run_vscode(command, documented("PreToolUse.read_file.0.37.json", project), project)
        assert (ran.returncode, ran.stdout) == (0, b"")
    (command,) = entries(settings, "SessionStart")
    assert run_vscode(command, documented("SessionStart.0.37.json", project), project).returncode == 0
    assert records(data_dir) == [f"vscode/{SESSION}.json"]
    assert read_json(record_path(data_dir, "vscode", SESSION))["source"] == "startup"


def test_claude_code_s_own_payloads_are_unchanged(home: Path, data_dir: Path, project: Path) -> None:
    """With VS Code's entries wired beside them, a recorded Claude Code payload is Claude's."""
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert run_cli("init", "--agent", "vscode").returncode == 0
    settings = home / ".claude" / "settings.json"
    start = json.loads((PAYLOADS / "claude" / "SessionStart.json").read_text())
    (command,) = entries(settings, "SessionStart")
    ran = run_as_host(command, start, {"CLAUDE_CODE_SESSION_ID": start["session_id"], "CLAUDECODE": "1"}, project)
    assert (ran.returncode, ran.stdout) == (0, b"")
    ran = run_as_host(command, start, {}, project)  # an older Claude Code that sets no variable
    assert (ran.returncode, ran.stdout) == (0, b"")
    assert records(data_dir) == [f"claude/{start['session_id']}.json"]
    # Claude Code's Read still reaches the built-in read gate (a first read: no opinion, noted)
    read = json.loads((PAYLOADS / "claude" / "PreToolUse.json").read_text())
    read["tool_input"] = {"file_path": str(project / "a.txt")}
    gate = [c for c in entries(settings, "PreToolUse") if "--builtin-read" in c]
    assert gate
    ran = run_as_host(gate[0], read, {"CLAUDE_CODE_SESSION_ID": read["session_id"]}, project)
    assert (ran.returncode, ran.stdout) == (0, b"")
    assert not (data_dir / "logs" / "hooks.log").exists()


@pytest.mark.parametrize("level", ["user", "project"])
def test_our_vscode_and_claude_entries_both_firing_fold_one_event_once(home: Path, data_dir: Path, project: Path, level: str) -> None:
    assert run_cli("init", "--agent", "claude", "--no-mcp").returncode == 0
    args = ["init", "--agent", "vscode", "--no-mcp"] + (["--project", str(project)] if level == "project" else [])
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    ours = AGENT.user_config_path(home) if level == "user" else AGENT.project_config_path(project)
    payload = documented("PreCompact.json", project)
    for command in entries(home / ".claude" / "settings.json", "PreCompact") + entries(ours, "PreCompact"):
        ran = run_vscode(command, payload, project)
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b"")
    assert records(data_dir) == [f"vscode/{SESSION}.json"]
    assert read_json(record_path(data_dir, "vscode", SESSION))["compactions"] == 1


# -- VS Code and Copilot CLI sharing the hooks folders -------------------------------------------
def test_vscode_running_copilot_cli_s_file_denies_nothing_and_files_vscode(home: Path, data_dir: Path, project: Path) -> None:
    """VS Code loads ~/.copilot/hooks/leanctx.json too and runs its sessionStart, userPromptSubmitted,
    preToolUse, postToolUse and agentStop (as Stop) with its own payloads."""
    proc = run_cli("init", "--agent", "copilot", "--guard")
    assert proc.returncode == 0, proc.stderr
    theirs = home / ".copilot" / "hooks" / "leanctx.json"
    for name in TOOL_CALLS:
        for command in entries(theirs, "preToolUse"):
            ran = run_vscode(command, documented(name, project), project)
            assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b""), (name, ran)
    for command in entries(theirs, "postToolUse"):
        ran = run_vscode(command, documented("PostToolUse.read_file.json", project), project)
        assert (ran.returncode, ran.stdout) == (0, b"")
    for event, fixture in (("sessionStart", "SessionStart.json"), ("userPromptSubmitted", "UserPromptSubmit.json"), ("agentStop", "Stop.json")):
        (command,) = entries(theirs, event)
        ran = run_vscode(command, documented(fixture, project), project)
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b"")
    assert records(data_dir) == [f"vscode/{SESSION}.json"]
    assert read_json(record_path(data_dir, "vscode", SESSION))["last_event"] == "Stop"
    assert not (data_dir / "logs" / "hooks.log").exists()


def test_copilot_cli_running_our_vscode_file_does_nothing(home: Path, data_dir: Path, project: Path) -> None:
    """Copilot CLI loads every *.json in ~/.copilot/hooks; with PascalCase events it sends
    snake_case payloads and COPILOT_CLI=1 (recorded from 1.0.102): its sessions are our Copilot
    hooks' to publish, so ours for VS Code stay silent."""
    assert run_cli("init", "--agent", "vscode", "--guard").returncode == 0
    ours = AGENT.user_config_path(home)
    pascal = PAYLOADS / "copilot"
    for event in ("SessionStart", "UserPromptSubmit", "Stop", "PreToolUse"):
        payload = json.loads((pascal / f"{event}.pascal.json").read_text())
        for command in entries(ours, event):
            ran = run_as_host(command, payload, {"COPILOT_CLI": "1"}, project)
            assert (ran.returncode, ran.stdout, ran.stderr) == (0, b"", b"")
    assert records(data_dir) == []


def test_vscode_guard_denies_in_its_form_and_lets_other_tools_through(home: Path, data_dir: Path, project: Path) -> None:
    """`init --agent vscode --guard`: a tool that reaches another user's folder is denied in the
    form VS Code reads; any other call, whatever tool, passes without a word."""
    assert run_cli("init", "--agent", "vscode", "--guard").returncode == 0
    (command,) = entries(AGENT.user_config_path(home), "PreToolUse")
    other = home / ".cks" / "user" / "bob"
    other.mkdir(parents=True)
    bad = documented("PreToolUse.read_file.json", project)
    bad["tool_input"]["filePath"] = str(other / "profile.md")
    ran = run_vscode(command, bad, project)
    answer = json.loads(ran.stdout)["hookSpecificOutput"]
    assert ran.returncode == 0 and (answer["hookEventName"], answer["permissionDecision"]) == ("PreToolUse", "deny")
    for name in TOOL_CALLS:
        ran = run_vscode(command, documented(name, project), project)
        assert (ran.returncode, ran.stdout) == (0, b""), name
    unknown = documented("PreToolUse.read_file.json", project) | {"tool_name": "manage_todo_list",
                                                                  "tool_input": {"todoList": [{"id": 1, "title": "x", "status": "completed"}]}}
    assert run_vscode(command, unknown, project).stdout == b""


# -- init, doctor, uninstall -----------------------------------------------------------------------
USER_MCP = '// my servers\n{\n  "servers": {\n    "mine": {"type": "stdio", "command": "mine"}, // keep\n  },\n}\n'


def test_init_beside_copilot_cli_and_uninstall_byte_for_byte(home: Path, data_dir: Path) -> None:
    hooks = home / ".copilot" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "mine.json").write_text('{"version": 1, "hooks": {}}\n')
    user_dir = home / ".config" / "Code" / "User"
    user_dir.mkdir(parents=True)
    (user_dir / "mcp.json").write_text(USER_MCP)
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    assert run_cli("init", "--agent", "copilot").returncode == 0
    copilot_file = (hooks / "leanctx.json").read_bytes()
    proc = run_cli("init", "--agent", "vscode")
    assert proc.returncode == 0, proc.stderr
    assert "VS Code: wired 6 events" in proc.stdout and "~/.copilot/hooks/leanctx-vscode.json" in proc.stdout
    assert (hooks / "leanctx.json").read_bytes() == copilot_file  # Copilot CLI's file untouched
    mcp = (user_dir / "mcp.json").read_text()
    assert '"mine"' in mcp and "// keep" in mcp and '"leanctx"' in mcp
    assert run_cli("init", "--agent", "vscode").returncode == 0  # twice is once
    rc = run_cli("doctor", "--agent", "vscode")
    assert rc.returncode == 0, rc.stdout + rc.stderr
    assert "read cache" in rc.stdout and "never a stub" in rc.stdout
    assert run_cli("uninstall", "--agent", "vscode").returncode == 0
    assert (hooks / "leanctx.json").read_bytes() == copilot_file
    assert run_cli("uninstall", "--agent", "copilot").returncode == 0
    after = {p: p.read_bytes() for p in home.rglob("*") if p.is_file() and data_dir not in p.parents}
    assert after == {p: b for p, b in before.items() if data_dir not in p.parents}


def test_project_install_calls_commands_on_path(home: Path, project: Path) -> None:
    proc = run_cli("init", "--agent", "vscode", "--project", str(project))
    assert proc.returncode == 0, proc.stderr
    hooks = json.loads(AGENT.project_config_path(project).read_text())["hooks"]
    assert hooks["SessionStart"] == [{"type": "command", "command": "leanctx-hook vscode SessionStart", "timeout": 10}]
    servers = json.loads((project / ".vscode" / "mcp.json").read_text())["servers"]
    assert servers["leanctx"] == {"type": "stdio", "command": "leanctx", "args": ["mcp"]}
    assert str(home) not in AGENT.project_config_path(project).read_text()
    assert run_cli("uninstall", "--agent", "vscode", "--project", str(project)).returncode == 0
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == ["a.txt"]


@pytest.mark.parametrize(("settings", "name"), [
    ('{\n  // hooks off\n  "chat.useHooks": false,\n}\n', "vscode hooks enabled"),
    ('{"chat.hookFilesLocations": {"~/.copilot/hooks": false}}', "vscode loads our hooks folder"),
])
def test_doctor_fails_when_vscode_settings_skip_our_hooks(home: Path, settings: str, name: str) -> None:
    assert run_cli("init", "--agent", "vscode", "--no-mcp").returncode == 0
    user_dir = home / ".config" / "Code" / "User"
    user_dir.mkdir(parents=True, exist_ok=True)
    (user_dir / "settings.json").write_text(settings)
    rc = run_cli("doctor", "--agent", "vscode", "--json")
    assert rc.returncode == 1
    report = json.loads(rc.stdout)
    failing = [c for a in report["agents"] for c in a["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failing] == [name], failing
    assert os.path.basename(str(user_dir / "settings.json")) in failing[0]["fix"]
