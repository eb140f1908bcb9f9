"""Crush, Goose and Antigravity CLI, wired from their documentation (docs/hosts.md, "verified vs
not"): the real `leanctx` CLI on real files in a throw-away HOME. No host CLI runs here, so these
pin what init writes (the documented shapes), that uninstall gives every byte back, that a file
init cannot parse is refused by name, and what doctor says; the payload shapes are the
documented ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx import agents, doctor
from leanctx.agents.base import NOTICE, PRE_TOOL, PROMPT
from leanctx.cache.scope import SILENT_COMPACTION
from leanctx.installer import mcpreg
from tests.conftest import run_cli
from tests.installer.test_ownership import ok, snapshot, write

WRAPPER = "leanctx-hook"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


# -- Crush ------------------------------------------------------------------------------


CRUSH_USERS = '{\n  "options": {"debug": false},\n  "hooks": {"PreToolUse": [{"matcher": "^bash$", "command": "./mine.sh"}]},\n' \
              '  "mcp": {"mine": {"type": "stdio", "command": "my-mcp"}}\n}\n'


def test_crush_user_file_keeps_the_users_entries_and_comes_back_byte_for_byte(home: Path, data_dir: Path) -> None:
    config = write(home / ".config" / "crush" / "crush.json", CRUSH_USERS)
    before = snapshot(home, skip=data_dir)
    out = ok("init", "--agent", "crush")
    assert "Crush: wired 1 events" in out
    doc = load(config)
    mine, ours = doc["hooks"]["PreToolUse"]
    assert mine == {"matcher": "^bash$", "command": "./mine.sh"}
    # flat entry, no `type` (Crush's schema allows name, matcher, command, timeout only); the
    # matcher is a regular expression naming our tool whole
    assert set(ours) == {"matcher", "command", "timeout"} and ours["matcher"] == "^mcp_leanctx_ctx_read$"
    assert ours["command"].split()[1:] == ["crush", "PreToolUse", "--read-gate"] and ours["timeout"] == 10
    assert doc["mcp"]["mine"] == {"type": "stdio", "command": "my-mcp"}
    assert doc["mcp"]["leanctx"]["type"] == "stdio" and doc["mcp"]["leanctx"]["args"] == ["mcp"]
    assert "mcpServers" not in doc
    assert ok("init", "--agent", "crush") and load(config) == doc  # twice = once
    ok("uninstall", "--agent", "crush")
    assert snapshot(home, skip=data_dir) == before


def test_crush_guard_is_one_pre_tool_entry_that_denies_in_crushs_words(home: Path, data_dir: Path) -> None:
    ok("init", "--agent", "crush", "--guard")
    entries = load(home / ".config" / "crush" / "crush.json")["hooks"]["PreToolUse"]
    assert len(entries) == 1 and "matcher" not in entries[0] and entries[0]["command"].endswith("--guard --read-gate")
    crush = agents.get("crush")
    assert json.loads(crush.guard_output("PreToolUse", "no")) == {"decision": "deny", "reason": "no"}


def test_crush_follows_xdg_and_its_own_override(home: Path, data_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert run_cli("init", "--agent", "crush", env=env).returncode == 0
    assert (tmp_path / "xdg" / "crush" / "crush.json").exists() and not (home / ".config" / "crush").exists()
    env = dict(os.environ, CRUSH_GLOBAL_CONFIG=str(tmp_path / "own"))
    assert run_cli("init", "--agent", "crush", env=env).returncode == 0
    assert (tmp_path / "own" / "crush.json").exists()


def test_crush_project_prefers_the_dotted_file_it_already_has(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    ok("init", "--agent", "crush", "--project", str(project))
    plain = load(project / "crush.json")
    assert plain["hooks"]["PreToolUse"][0]["command"].startswith(f"{WRAPPER} crush PreToolUse")
    assert plain["mcp"]["leanctx"] == {"type": "stdio", "command": "leanctx", "args": ["mcp"]}
    ok("uninstall", "--agent", "crush", "--project", str(project))
    assert not (project / "crush.json").exists()
    dotted = write(project / ".crush.json", "{}\n")
    ok("init", "--agent", "crush", "--project", str(project))
    assert "leanctx" in load(dotted)["mcp"] and not (project / "crush.json").exists()


def test_crush_refuses_a_file_it_cannot_parse_and_warns_on_what_crush_would_refuse(home: Path, data_dir: Path) -> None:
    config = write(home / ".config" / "crush" / "crush.json", '{"hooks": [1, }\n')
    proc = run_cli("init", "--agent", "crush")
    assert proc.returncode == 2 and str(config) in proc.stderr and config.read_text() == '{"hooks": [1, }\n'
    write(config, '{\n  // mine\n  "options": {}\n}\n')
    proc = run_cli("init", "--agent", "crush")
    # written, comment kept; but Crush stops on a file that is not strict JSON: exit 1 with the fix
    assert proc.returncode == 1 and "// mine" in config.read_text()
    assert "invalid JSON in config file" in proc.stdout + proc.stderr


def test_crush_payload_and_answers() -> None:
    crush = agents.get("crush")
    documented = {"event": "PreToolUse", "session_id": "313909e", "cwd": "/home/user/project", "tool_name": "mcp_leanctx_ctx_read",
                  "tool_input": {"path": "/home/user/project/a.py"}}  # docs/hooks/README.md "Stdin payload"
    ev = crush.normalize("PreToolUse", documented)
    assert (ev.kind, ev.conversation_id, ev.cwd, ev.tool_name) == (PRE_TOOL, "313909e", "/home/user/project", "mcp_leanctx_ctx_read")
    assert crush.is_read_tool(ev.tool_name) and not crush.is_read_tool("view")
    assert crush.check_output("PreToolUse", "") is None
    assert crush.check_output("PreToolUse", '{"decision": "allow"}') is not None  # we never approve a call
    assert "crush" in SILENT_COMPACTION


# -- doctor's version row (a stand-in `crush` on PATH: no Crush binary installs here) --------


@pytest.mark.parametrize(("printed", "status"), [("crush version v0.60.2", "fail"), ("crush version v0.63.0", "info"),
                                                  ("crush version v0.96.1", "info"), ("no digits", "info")])
def test_crush_doctor_version_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, printed: str, status: str) -> None:
    bin_dir = tmp_path / "bin"
    write(bin_dir / "crush", f"#!/bin/sh\necho '{printed}'\n").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    row = doctor.version_check(agents.get("crush"))
    assert row["status"] == status
    if status == "fail":
        assert row["fix"] == "upgrade Crush to 0.63.0 or newer"
    elif printed != "no digits":
        assert "documentation only" in row["detail"]


def test_doctor_version_row_without_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    for name in ("crush", "goose", "antigravity"):
        row = doctor.version_check(agents.get(name))
        assert row["status"] == "info" and "not on PATH" in row["detail"] and "documentation only" in row["detail"]


# -- Goose ------------------------------------------------------------------------------


def test_goose_plugin_folder_is_ours_whole_and_goes_whole(home: Path, data_dir: Path) -> None:
    write(home / ".agents" / "plugins" / "theirs" / "hooks" / "hooks.json", '{"hooks": {}}\n')
    before = snapshot(home, skip=data_dir)
    ok("init", "--agent", "goose", "--guard")
    hooks = load(home / ".agents" / "plugins" / "leanctx" / "hooks" / "hooks.json")["hooks"]
    assert list(hooks) == ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd", "PreToolUse"]
    group = hooks["Stop"][0]  # Claude Code's shape: matcher groups of typed handlers
    assert set(group) == {"hooks"} and group["hooks"][0]["type"] == "command"
    assert group["hooks"][0]["command"].split()[1:] == ["goose", "Stop"]
    ok("uninstall", "--agent", "goose")
    assert snapshot(home, skip=data_dir) == before
    assert not (home / ".agents" / "plugins" / "leanctx").exists()


def test_goose_read_gate_matches_gooses_tool_name() -> None:
    goose = agents.get("goose")
    wired = dict((s.name, s.matcher) for s, _ in goose.profile_events(read_gate=True))
    assert wired["PreToolUse"] == "^leanctx__ctx_read$"
    assert goose.is_read_tool("leanctx__ctx_read") and not goose.is_read_tool("developer__shell")


def test_goose_init_leaves_its_yaml_alone_and_says_what_to_add(home: Path, data_dir: Path) -> None:
    config = write(home / ".config" / "goose" / "config.yaml", "# my settings\nextensions:\n  developer:\n    enabled: true\n")
    out = ok("init", "--agent", "goose")
    assert config.read_text() == "# my settings\nextensions:\n  developer:\n    enabled: true\n"
    assert "leanctx does not edit Goose's YAML config" in out
    assert f'cmd: "{data_dir}/bin/{WRAPPER}"' in out and 'args: ["mcp"]' in out and "type: stdio" in out
    assert "envs: {}" in out  # the default data dir: nothing to pass on
    other = home / "elsewhere"
    proc = run_cli("init", "--agent", "goose", env=dict(os.environ, LEANCTX_HOME=str(other)))
    assert proc.returncode == 0 and f'envs: {{"LEANCTX_HOME": "{other}"}}' in proc.stdout  # the server must find the hooks' records
    run_cli("uninstall", "--agent", "goose", env=dict(os.environ, LEANCTX_HOME=str(other)))
    assert "MCP server" not in ok("init", "--agent", "goose", "--no-mcp")
    doctor = run_cli("doctor", "--agent", "goose", "--json")
    rows = {c["name"]: c for c in json.loads(doctor.stdout)["agents"][0]["checks"]}
    assert rows["mcp server"]["status"] == "info" and "type: stdio" in rows["mcp server"]["fix"]


def test_goose_entry_added_by_hand_is_found_and_answers(home: Path, data_dir: Path) -> None:
    ok("init", "--agent", "goose")
    text = mcpreg.by_hand(agents.get("goose"), data_dir)
    entry = text.split("config.yaml:\n", 1)[1]
    write(home / ".config" / "goose" / "config.yaml", "extensions:\n" + entry + "\n")
    doctor = run_cli("doctor", "--agent", "goose", "--json")
    rows = {c["name"]: c for c in json.loads(doctor.stdout)["agents"][0]["checks"]}
    assert rows["mcp server"]["status"] == "info" and "added by hand" in rows["mcp server"]["detail"]
    assert rows["mcp round trip"]["status"] == "ok", rows["mcp round trip"]


def test_goose_payload() -> None:
    goose = agents.get("goose")
    # crates/goose/src/hooks/mod.rs HookContext: `working_dir`, `message`, `tool_call_id`
    ev = goose.normalize("UserPromptSubmit", {"event": "UserPromptSubmit", "session_id": "20260718_15", "working_dir": "/w",
                                              "message": "fix it"})
    assert (ev.kind, ev.conversation_id, ev.cwd, ev.prompt) == (PROMPT, "20260718_15", "/w", "fix it")
    ev = goose.normalize("PreToolUse", {"event": "PreToolUse", "session_id": "s", "tool_call_id": "call_1",
                                        "tool_name": "leanctx__ctx_read", "tool_input": {"path": "/w/a"}})
    assert (ev.tool_use_id, ev.tool_name, ev.tool_input) == ("call_1", "leanctx__ctx_read", {"path": "/w/a"})
    assert json.loads(goose.guard_output("PreToolUse", "no")) == {"decision": "block", "reason": "no"}
    assert goose.check_output("PreToolUse", goose.guard_output("PreToolUse", "no")) is None
    assert goose.check_output("Stop", '{"decision": "block", "reason": "x"}') is not None
    assert "goose" in SILENT_COMPACTION


# -- Antigravity CLI ------------------------------------------------------------------------


def test_antigravity_named_hook_set_beside_others(home: Path, data_dir: Path) -> None:
    users = '{\n  "mine": {"Stop": [{"type": "command", "command": "echo hi"}]}\n}\n'
    hooks = write(home / ".gemini" / "config" / "hooks.json", users)
    servers = write(home / ".gemini" / "antigravity-cli" / "mcp_config.json", '{"mcpServers": {"x": {"command": "y"}}}\n')
    before = snapshot(home, skip=data_dir)
    ok("init", "--agent", "antigravity")
    doc = load(hooks)
    assert doc["mine"] == {"Stop": [{"type": "command", "command": "echo hi"}]}
    assert list(doc["leanctx"]) == ["PreInvocation", "Stop"]
    entry = doc["leanctx"]["Stop"][0]  # lifecycle events take flat typed entries
    assert set(entry) == {"type", "command", "timeout"} and entry["command"].split()[1:] == ["antigravity", "Stop"]
    assert load(servers)["mcpServers"]["leanctx"]["args"] == ["mcp"] and "type" not in load(servers)["mcpServers"]["leanctx"]
    ok("uninstall", "--agent", "antigravity")
    assert snapshot(home, skip=data_dir) == before


def test_antigravity_and_gemini_cli_share_no_file(home: Path, data_dir: Path) -> None:
    (home / ".gemini").mkdir()
    ok("init", "--agent", "gemini")
    gemini_files = snapshot(home / ".gemini")
    ok("init", "--agent", "antigravity")
    after = snapshot(home / ".gemini")
    assert all(after[p] == b for p, b in gemini_files.items())  # Gemini CLI's files untouched
    ok("uninstall", "--agent", "antigravity")
    assert snapshot(home / ".gemini") == gemini_files
    ok("init", "--agent", "antigravity")
    ok("uninstall", "--agent", "gemini")
    assert (home / ".gemini" / "config" / "hooks.json").exists() and not (home / ".gemini" / "settings.json").exists()


def test_antigravity_is_not_detected_from_gemini_clis_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    (tmp_path / ".gemini" / "config").mkdir(parents=True)
    assert not agents.get("antigravity").detect(tmp_path)
    (tmp_path / ".gemini" / "antigravity-cli").mkdir()
    assert agents.get("antigravity").detect(tmp_path)


def test_antigravity_project_hooks_and_no_project_mcp(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    ok("init", "--agent", "antigravity", "--project", str(project))
    doc = load(project / ".agents" / "hooks.json")
    assert doc["leanctx"]["PreInvocation"][0]["command"] == f"{WRAPPER} antigravity PreInvocation"
    assert sorted(p.name for p in project.rglob("*") if p.is_file()) == ["hooks.json"]


def test_antigravity_payload_and_answers() -> None:
    agy = agents.get("antigravity")
    # camelCase fields (antigravity.google/docs/hooks)
    ev = agy.normalize("PreInvocation", {"conversationId": "c1", "workspacePaths": ["/w", "/x"], "transcriptPath": "/t.jsonl",
                                         "invocationNum": 0})
    assert (ev.kind, ev.conversation_id, ev.cwd, ev.workspace_roots, ev.transcript_path) == (NOTICE, "c1", "/w", ["/w", "/x"], "/t.jsonl")
    assert agy.guard_event is None and agy.read_gate_event is None
    assert agy.no_opinion("Stop") == "{}" and agy.check_output("Stop", "{}") is None
    assert agy.check_output("Stop", '{"decision": "block"}') is not None
    assert "antigravity" in SILENT_COMPACTION


def test_the_hook_prints_antigravitys_empty_answer_on_bad_input(home: Path, data_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "leanctx", "hook", "antigravity", "Stop"], input="not json",
                          capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 0 and proc.stdout.strip() == "{}"
