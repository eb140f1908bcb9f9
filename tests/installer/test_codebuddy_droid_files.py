"""Where init puts CodeBuddy's and Droid's entries, on real files through the real CLI.

CodeBuddy reads MCP servers from the FIRST EXISTING of ~/.codebuddy/.mcp.json,
~/.codebuddy/mcp.json, ~/.codebuddy.json (verified on 2.117.0): our entry goes into that one,
~/.codebuddy.json is created only when none exists, and no file of ours ever hides the user's
servers. Droid takes hooks from settings.json, but a hooks.json beside it replaces the events it
names (read in the 0.215.0 CLI)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.installer.test_ownership import ok, snapshot, write

OURS = {"type": "stdio", "args": ["mcp"]}  # the command is the data dir's wrapper
USERS = '{\n    "mcpServers": {"mine": {"command": "my-mcp", "args": []}}\n}\n'


def servers(path: Path) -> dict:
    return json.loads(path.read_text())["mcpServers"]


CANDIDATES = (".codebuddy/.mcp.json", ".codebuddy/mcp.json", ".codebuddy.json")


@pytest.mark.parametrize("present", [(), (2,), (1, 2), (0, 1, 2), (0,), (1,)], ids=lambda p: "+".join(CANDIDATES[i] for i in p) or "none")
def test_codebuddy_server_goes_into_the_first_existing_file(home: Path, data_dir: Path, present: tuple) -> None:
    for i in present:
        write(home / CANDIDATES[i], USERS)
    before = snapshot(home, skip=data_dir)
    ok("init", "--agent", "codebuddy")
    target = home / CANDIDATES[present[0] if present else 2]
    assert servers(target)["leanctx"]["args"] == OURS["args"]
    for i, rel in enumerate(CANDIDATES):
        path = home / rel
        if path != target:  # never created (it would hide the user's servers), never touched
            assert (str(path) in before) == path.exists() and (not path.exists() or path.read_bytes() == before[str(path)])
    if present:
        assert servers(target)["mine"] == {"command": "my-mcp", "args": []}
    ok("uninstall", "--agent", "codebuddy")
    assert snapshot(home, skip=data_dir) == before


def test_codebuddy_config_dir_moves_two_candidates_but_not_the_home_file(home: Path, data_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "cbconf"
    write(other / "mcp.json", USERS)
    legacy = write(home / ".codebuddy.json", USERS)
    env = dict(os.environ, CODEBUDDY_CONFIG_DIR=str(other))
    assert run_cli("init", "--agent", "codebuddy", env=env).returncode == 0
    assert "leanctx" in servers(other / "mcp.json") and legacy.read_text() == USERS
    assert (other / "settings.json").exists() and not (home / ".codebuddy").exists()


def test_codebuddy_entry_moves_when_the_user_creates_a_file_read_first(home: Path, data_dir: Path) -> None:
    legacy = write(home / ".codebuddy.json", USERS)
    ok("init", "--agent", "codebuddy")
    assert "leanctx" in servers(legacy)
    first = write(home / ".codebuddy" / "mcp.json", '{"mcpServers": {"new": {"command": "x"}}}')
    # doctor says where ours is and that CodeBuddy no longer reads it
    proc = run_cli("doctor", "--agent", "codebuddy", "--json")
    assert proc.returncode == 1
    check = {c["name"]: c for c in json.loads(proc.stdout)["agents"][0]["checks"]}["mcp server"]
    assert check["status"] == "fail" and "~/.codebuddy.json" in check["detail"] and "~/.codebuddy/mcp.json only" in check["detail"]
    # init again: ours goes into the file CodeBuddy reads, and out of the one it no longer reads
    ok("init", "--agent", "codebuddy")
    assert set(servers(first)) == {"new", "leanctx"} and legacy.read_text() == USERS
    ok("uninstall", "--agent", "codebuddy")
    assert first.read_text() == '{"mcpServers": {"new": {"command": "x"}}}' and legacy.read_text() == USERS


def test_codebuddy_uninstall_finds_ours_in_a_file_no_longer_read(home: Path, data_dir: Path) -> None:
    legacy = write(home / ".codebuddy.json", USERS)
    ok("init", "--agent", "codebuddy")
    first = write(home / ".codebuddy" / ".mcp.json", "{}\n")
    ok("uninstall", "--agent", "codebuddy")
    assert legacy.read_text() == USERS and first.read_text() == "{}\n"


@pytest.mark.parametrize("rel", [".codebuddy/mcp.json", ".codebuddy.json"])
def test_codebuddy_unparseable_first_file_is_refused_untouched(home: Path, data_dir: Path, rel: str) -> None:
    write(home / ".codebuddy.json", USERS)
    broken = write(home / rel, '{"mcpServers": {"mine": ')
    before = snapshot(home, skip=data_dir)
    proc = run_cli("init", "--agent", "codebuddy")
    assert proc.returncode == 2 and str(broken) in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(home, skip=data_dir) == before


def test_codebuddy_project_server_file_and_approval(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    users = write(project / "mcp.json", USERS)  # CodeBuddy reads it when there is no .mcp.json
    local = write(project / ".codebuddy" / "settings.local.json", '{\n  "enabledMcpjsonServers": ["mine"]\n}\n')
    before = snapshot(project)
    ok("init", "--agent", "codebuddy", "--project", str(project))
    assert not (project / ".mcp.json").exists() and set(servers(users)) == {"mine", "leanctx"}
    assert json.loads(local.read_text())["enabledMcpjsonServers"] == ["mine", "leanctx"]
    once = snapshot(project)
    ok("init", "--agent", "codebuddy", "--project", str(project))
    assert snapshot(project) == once
    ok("uninstall", "--agent", "codebuddy", "--project", str(project))
    assert snapshot(project) == before


def test_codebuddy_approval_list_of_another_type_is_refused(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    local = write(project / ".codebuddy" / "settings.local.json", '{"enabledMcpjsonServers": "mine"}')
    before = snapshot(project)
    proc = run_cli("init", "--agent", "codebuddy", "--project", str(project))
    assert proc.returncode == 2 and str(local) in proc.stderr and "enabledMcpjsonServers" in proc.stderr
    assert snapshot(project) == before


def test_codebuddy_read_rule_names_the_deferred_tool_call(home: Path, data_dir: Path) -> None:
    ok("init", "--agent", "codebuddy", "--mcp-name", "lc")
    rule = (home / ".codebuddy" / "CODEBUDDY.md").read_text()
    assert '"toolName": "mcp__lc__ctx_read"' in rule and "DeferExecuteTool" in rule


# -- Droid -----------------------------------------------------------------------------------

DROID_SETTINGS = '{\n    // BYOK\n    "customModels": [{"model": "m", "apiKey": "k"}]\n}\n'


def test_droid_user_install_and_byte_identical_uninstall(home: Path, data_dir: Path) -> None:
    settings = write(home / ".factory" / "settings.json", DROID_SETTINGS)
    mcp = write(home / ".factory" / "mcp.json", USERS)
    before = snapshot(home, skip=data_dir)
    proc = run_cli("init", "--agent", "droid")
    assert proc.returncode == 1 and "comment at line 2" in proc.stderr  # Droid reads strict JSON: said, comment kept
    value = settings.read_text()
    assert "// BYOK" in value and '"customModels"' in value
    hooks = json.loads(value.replace("// BYOK", ""))["hooks"]
    # the read gate's entry also answers Droid's own Read and Execute; one post-tool entry credits them
    assert [g["matcher"] for g in hooks["PreToolUse"]] == ["leanctx___ctx_read|Read|Execute"]
    assert [g["matcher"] for g in hooks["PostToolUse"]] == ["Read|Execute"]
    assert "SubagentStart" not in hooks and "Stop" in hooks and "SessionEnd" in hooks
    assert set(servers(mcp)) == {"mine", "leanctx"}
    rule = (home / ".factory" / "AGENTS.md").read_text()
    assert "leanctx___ctx_read" in rule and "ToolSearch" in rule
    ok("uninstall", "--agent", "droid")
    assert snapshot(home, skip=data_dir) == before


@pytest.mark.parametrize("bommed", ["settings.json", "mcp.json"])
def test_droid_byte_order_mark_is_flagged_and_kept(home: Path, data_dir: Path, bommed: str) -> None:
    """Droid 0.215 ignores a settings.json or mcp.json that starts with a BOM (tests/e2e/test_droid_e2e.py):
    init says which file and what to remove, keeps the user's bytes (the mark too), and uninstall
    gives them back."""
    files = {"settings.json": '{"customModels": [{"model": "m", "apiKey": "k"}]}\n', "mcp.json": USERS}
    paths = {name: write(home / ".factory" / name, text) for name, text in files.items()}
    paths[bommed].write_bytes(b"\xef\xbb\xbf" + paths[bommed].read_bytes())
    before = snapshot(home, skip=data_dir)
    proc = run_cli("init", "--agent", "droid")
    warned = [line for line in proc.stderr.splitlines() if "will not load" in line and "byte order mark" in line]
    assert proc.returncode == 1 and len(warned) == 1 and bommed in warned[0], proc.stderr
    data = paths[bommed].read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and data.count(b"\xef\xbb\xbf") == 1 and b"leanctx" in data
    ok("uninstall", "--agent", "droid")
    assert snapshot(home, skip=data_dir) == before


def test_droid_project_files(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    ok("init", "--agent", "droid", "--project", str(project))
    assert "leanctx-hook droid SessionStart" in (project / ".factory" / "settings.json").read_text()
    assert servers(project / ".factory" / "mcp.json")["leanctx"]["command"] == "leanctx"
    assert (project / ".factory" / "AGENTS.md").exists() and not (project / "AGENTS.md").exists()
    assert not (home / ".factory").exists()
    ok("uninstall", "--agent", "droid", "--project", str(project))
    assert list(project.rglob("*")) == [] or all(p.is_dir() for p in project.rglob("*"))


def test_droid_home_override_moves_every_file(home: Path, data_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "fhome"
    env = dict(os.environ, FACTORY_HOME_OVERRIDE=str(other))
    assert run_cli("init", "--agent", "droid", env=env).returncode == 0
    assert {p.name for p in (other / ".factory").iterdir()} >= {"settings.json", "mcp.json", "AGENTS.md"}
    assert not (home / ".factory").exists()


@pytest.mark.parametrize("rel", ["hooks.json", "hooks/hooks.json"])
def test_droid_hooks_json_that_replaces_our_events_is_reported(home: Path, data_dir: Path, rel: str) -> None:
    write(home / ".factory" / rel, '{"SessionStart": [{"hooks": [{"type": "command", "command": "mine"}]}]}')
    proc = run_cli("init", "--agent", "droid")
    assert proc.returncode == 1
    assert f"~/.factory/{rel}" in proc.stderr and "SessionStart" in proc.stderr
    report = json.loads(run_cli("doctor", "--agent", "droid", "--json").stdout)
    check = {c["name"]: c for c in report["agents"][0]["checks"]}["droid hooks not shadowed"]
    assert check["status"] == "fail" and "SessionStart" in check["detail"]


def test_droid_hooks_json_with_other_events_is_fine(home: Path, data_dir: Path) -> None:
    write(home / ".factory" / "hooks.json", '{"Notification": []}')
    write(home / ".factory" / "hooks" / "hooks.json", '{"SessionStart": []}')  # not read: hooks.json exists
    assert run_cli("init", "--agent", "droid").returncode == 0


def test_codebuddy_candidate_we_may_not_write_blocks_nothing(home: Path, data_dir: Path, tmp_path: Path) -> None:
    """A dangling symlink is no existing file to CodeBuddy (Node's existsSync) nor to us: the next
    candidate is used. A candidate that points out of HOME, which we never wrote, must not stop
    init or uninstall of the file CodeBuddy really reads."""
    (home / ".codebuddy").mkdir()
    (home / ".codebuddy" / ".mcp.json").symlink_to(tmp_path / "nowhere.json")
    used = write(home / ".codebuddy" / "mcp.json", USERS)
    ok("init", "--agent", "codebuddy")
    assert set(servers(used)) == {"mine", "leanctx"}
    outside = write(tmp_path / "elsewhere.json", USERS)
    (home / ".codebuddy.json").symlink_to(outside)
    ok("uninstall", "--agent", "codebuddy")
    assert used.read_text() == USERS and outside.read_text() == USERS
