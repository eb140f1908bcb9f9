"""init says, at the end and loudly, when a host will not load what it wired (exit 1).

Every host behaviour assumed here was observed on the real CLIs (tests/e2e/HOSTS_VERIFIED.md and
tests/e2e/test_host_loads.py): Claude Code 2.1.197 and Codex 0.171 ignore a whole hooks file with
a comment or trailing comma, Codex also one starting with a byte order mark (Claude Code accepts
that), Claude Code replaces an unparseable ~/.claude.json with its defaults, `disableAllHooks`
and Codex's `[features] hooks = false` turn every hook off.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leanctx import agents
from tests.conftest import run_cli


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("WARNING: ")]


def wired(path: Path) -> bool:
    return "leanctx-hook" in path.read_text()


def test_claude_settings_with_a_comment_is_wired_and_flagged_after_every_file(home: Path) -> None:
    settings = write(home / ".claude" / "settings.json", '{\n  // my note\n  "model": "opus"\n}\n')
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 1, proc.stderr
    assert warnings(proc.stderr) == [
        "WARNING: Claude Code: wired, but Claude Code will not load ~/.claude/settings.json: it reads strict JSON and "
        "ignores this whole file (the comment at line 2 column 3)"
    ]
    assert "  fix: remove the comment at line 2 column 3 from ~/.claude/settings.json" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1].startswith("leanctx: 1 file(s) the host will not load")
    # never stopped between files: hooks, MCP entry and rule file are all written, the comment kept
    assert wired(settings) and "// my note" in settings.read_text()
    assert "leanctx" in json.loads((home / ".claude.json").read_text())["mcpServers"]
    assert (home / ".claude" / "CLAUDE.md").exists()
    assert "Check it with: leanctx doctor" in proc.stdout


def test_trailing_commas_are_located_too(home: Path) -> None:
    write(home / ".claude" / "settings.json", '{\n  "model": "opus",\n  "env": {"A": "1",},\n}\n')
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 1
    assert "the trailing comma at line 3 column 19" in proc.stderr
    assert proc.stderr.count("trailing comma at line") == 4  # two named in the reason, two in the fix


def test_codex_hooks_json_with_a_trailing_comma(home: Path) -> None:
    hooks = write(home / ".codex" / "hooks.json", '{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify"}]},]}}\n')
    proc = run_cli("init", "--agent", "codex")
    assert proc.returncode == 1
    assert warnings(proc.stderr)[0].startswith("WARNING: Codex CLI: wired, but Codex CLI will not load ~/.codex/hooks.json")
    assert "the trailing comma at line 1 column" in proc.stderr and wired(hooks)


def test_byte_order_mark_rejected_by_codex_accepted_by_claude(home: Path) -> None:
    write(home / ".codex" / "hooks.json", '\ufeff{"hooks": {}}\n')
    write(home / ".claude" / "settings.json", '\ufeff{"model": "opus"}\n')
    codex = run_cli("init", "--agent", "codex")
    assert codex.returncode == 1 and "remove the byte order mark at the start of the file from ~/.codex/hooks.json" in codex.stderr
    claude = run_cli("init", "--agent", "claude")
    assert claude.returncode == 0 and not warnings(claude.stderr), claude.stderr


def test_claude_json_with_a_comment_would_be_replaced_by_claude(home: Path) -> None:
    write(home / ".claude.json", '{\n  "numStartups": 3 // counted\n}\n')
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 1
    (warning,) = warnings(proc.stderr)
    assert "will not load ~/.claude.json: it stops with a configuration error and replaces this file with its defaults" in warning


@pytest.mark.parametrize("agent", ["claude", "codebuddy"])
def test_project_files_with_comments(home: Path, tmp_path: Path, agent: str) -> None:
    project = tmp_path / "repo"
    local = agents.get(agent).project_config_path(project)
    write(local, "{\n  /* mine */\n}\n")
    write(project / ".mcp.json", '{"mcpServers": {}, // shared\n}\n')
    proc = run_cli("init", "--agent", agent, "--project", str(project))
    assert proc.returncode == 1
    assert len(warnings(proc.stderr)) == 2
    assert f"will not load {local}" in proc.stderr and f"will not load {project / '.mcp.json'}" in proc.stderr


def test_disable_all_hooks_is_flagged_with_its_line(home: Path, tmp_path: Path) -> None:
    write(home / ".claude" / "settings.json", '{\n  "model": "opus",\n  "disableAllHooks": true\n}\n')
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 1
    assert 'fix: remove "disableAllHooks": true from ~/.claude/settings.json (line 3)' in proc.stderr
    # a project install is switched off by the user-level setting as well as by the project's own
    project = tmp_path / "repo"
    write(project / ".claude" / "settings.json", '{"disableAllHooks": true}')
    proc = run_cli("init", "--agent", "claude", "--project", str(project))
    assert proc.returncode == 1 and len(warnings(proc.stderr)) == 2


@pytest.mark.parametrize(
    "features, line",
    [("[features]\nhooks = false\n", 3), ("[features]\ncodex_hooks = false\n", 3), ("features.hooks = false\n", 2),
     ("[features]\nhooks = false\ncodex_hooks = true\n", 3)],
)
def test_codex_hooks_feature_off(home: Path, features: str, line: int) -> None:
    write(home / ".codex" / "config.toml", "# mine\n" + features)
    proc = run_cli("init", "--agent", "codex")
    assert proc.returncode == 1
    assert f"fix: set hooks = true under [features] in ~/.codex/config.toml (line {line})" in proc.stderr
    assert "Codex runs no hooks" in proc.stderr


def test_codex_hooks_feature_on_wins_over_the_old_name(home: Path) -> None:
    """Verified on 0.171: `hooks = true` with `codex_hooks = false` runs the hooks."""
    write(home / ".codex" / "config.toml", "[features]\nhooks = true\ncodex_hooks = false\n")
    proc = run_cli("init", "--agent", "codex", "--trust")
    assert proc.returncode == 0 and not warnings(proc.stderr), proc.stderr
    report = json.loads(run_cli("doctor", "--agent", "codex", "--json").stdout)
    assert "codex hooks feature" not in {c["name"] for c in report["agents"][0]["checks"]}


@pytest.mark.parametrize("name", agents.names())
def test_clean_configs_give_exit_0_and_no_warning(home: Path, name: str) -> None:
    proc = run_cli("init", "--agent", name)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING" not in proc.stderr and "NOTE" not in proc.stderr


def test_dry_run_prints_the_same_warning_and_writes_nothing(home: Path) -> None:
    settings = write(home / ".claude" / "settings.json", '{"model": "opus", // note\n}\n')
    proc = run_cli("init", "--agent", "claude", "--dry-run")
    assert proc.returncode == 1
    assert "WARNING: Claude Code: would be wired, but Claude Code will not load ~/.claude/settings.json" in proc.stderr
    assert "+++ b/~/.claude/settings.json" in proc.stdout
    assert settings.read_text() == '{"model": "opus", // note\n}\n' and not (home / ".claude.json").exists()


def test_codex_project_trust(home: Path, tmp_path: Path) -> None:
    project = (tmp_path / "repo").resolve()
    project.mkdir()
    proc = run_cli("init", "--agent", "codex", "--project", str(project))
    assert proc.returncode == 0 and not warnings(proc.stderr)
    assert f"NOTE: Codex CLI: Codex loads {project}/.codex (our hooks and MCP server) only once you trust the folder" in proc.stderr
    config = home / ".codex" / "config.toml"
    write(config, f'[projects."{project}"]\ntrust_level = "untrusted"\n')
    proc = run_cli("init", "--agent", "codex", "--project", str(project))
    assert proc.returncode == 1
    assert f'fix: set trust_level = "trusted" under [projects."{project}"] in ~/.codex/config.toml (line 2)' in proc.stderr
    write(config, f'[projects."{project}"]\ntrust_level = "trusted"\n')
    proc = run_cli("init", "--agent", "codex", "--project", str(project))
    assert proc.returncode == 0 and "NOTE" not in proc.stderr, proc.stderr


def test_doctor_flags_a_disabled_codex_mcp_server(home: Path) -> None:
    assert run_cli("init", "--agent", "codex", "--trust").returncode == 0
    config = home / ".codex" / "config.toml"
    config.write_text(config.read_text().replace("[mcp_servers.leanctx]\n", "[mcp_servers.leanctx]\nenabled = false\n"))
    proc = run_cli("doctor", "--agent", "codex", "--json")
    report = json.loads(proc.stdout)
    check = {c["name"]: c for c in report["agents"][0]["checks"]}["codex mcp server enabled"]
    assert proc.returncode == 1 and check["status"] == "fail"
    assert "delete enabled = false under [mcp_servers.leanctx] in ~/.codex/config.toml (line" in check["fix"]


def test_init_all_with_no_host_is_one_line(home: Path, tmp_path: Path) -> None:
    empty_path = tmp_path / "bin"
    empty_path.mkdir()
    proc = run_cli("init", "--agent", "all", env=dict(os.environ, PATH=str(empty_path)))
    assert proc.returncode == 1
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith("leanctx: no supported host found (looked for ~/.claude, ~/.codex, ~/.cursor, ~/.codebuddy")
    assert "leanctx init --agent claude|codex|cursor|codebuddy" in line
    assert not (home / ".claude").exists()
