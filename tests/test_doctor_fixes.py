"""Every fix line doctor prints works when followed.

Each test breaks a real install in a temp HOME, runs the real `leanctx doctor --json`, takes the
fix line of the failing check and FOLLOWS it: runs the command it names through the real CLI, or
makes the edit it describes at the spot it names (file, line, column). Then doctor must no longer
fail that check. A fix no machine can follow (upgrade a host) is checked for naming what to do.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.installer import wrapper
from tests.conftest import run_cli
from tests.test_doctor import checks_by_name, doctor_json, scripts_on_path


def agent_checks(report: dict, name: str) -> dict[str, dict]:
    return checks_by_name(next(a for a in report["agents"] if a["agent"] == name))


def failing(report: dict, name: str, check: str) -> dict:
    """The named check of agent `name` (or of the report itself), which must fail, with its fix."""
    found = agent_checks(report, name).get(check) or next((c for c in report["checks"] if c["name"] == check), None)
    assert found is not None and found["status"] == "fail" and found["fix"], json.dumps(report, indent=1)
    return found


def passes(report: dict, name: str, check: str) -> bool:
    found = agent_checks(report, name).get(check) or next((c for c in report["checks"] if c["name"] == check), None)
    return found is None or found["status"] != "fail"


def commands_in(fix: str) -> list[str]:
    """The `leanctx ...` commands a fix line names, in order (the first is the one to run)."""
    return [m.strip() for m in re.findall(r"(leanctx (?:init|doctor|uninstall)\b[^;()]*?)(?=\s{3}\(|\)|;|,|$)", fix)]


def follow(command: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run a `leanctx ...` command from a fix line through the real CLI."""
    words = shlex.split(command)
    assert words[0] == "leanctx", command
    return run_cli(*words[1:], env=env)


def spot(fix: str, home: Path) -> tuple[Path, int, int]:
    """The `~/file:line:col` a fix line names."""
    match = re.search(r"(~/\S+?):(\d+):(\d+)", fix)
    assert match, fix
    return home / match.group(1)[2:], int(match.group(2)), int(match.group(3))


def offset(text: str, line: int, col: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + col - 1


# --- the init fix: a command with the installed profile's flags ---------------------------------


def test_init_fix_restates_the_installed_profile_and_repairs(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "claude", "--bot", "--guard").returncode == 0
    path = home / ".claude" / "settings.json"
    value = json.loads(path.read_text())
    del value["hooks"]["Stop"]
    path.write_text(json.dumps(value, indent=2))
    code, report = doctor_json("--agent", "claude")
    fix = failing(report, "claude", "event Stop")["fix"]
    init, alternative = commands_in(fix)
    assert init == "leanctx init --agent claude --bot --guard" and alternative == "leanctx doctor --agent claude --fix"
    assert follow(init).returncode == 0
    code, report = doctor_json("--agent", "claude")
    assert code == 0 and report["agents"][0]["profile"] == "bot+guard", json.dumps(report, indent=1)
    # the alternative works as well
    value = json.loads(path.read_text())
    del value["hooks"]["Stop"]
    path.write_text(json.dumps(value, indent=2))
    assert follow(alternative).returncode == 0
    code, report = doctor_json("--agent", "claude")
    assert code == 0 and report["agents"][0]["profile"] == "bot+guard"


def test_init_fix_keeps_no_builtin_gate_and_no_mcp(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "cursor", "--no-mcp").returncode == 0
    path = home / ".cursor" / "hooks.json"
    value = json.loads(path.read_text())
    event = next(iter(value["hooks"]))
    del value["hooks"][event]
    path.write_text(json.dumps(value, indent=2))
    code, report = doctor_json("--agent", "cursor")
    (init, _alt) = commands_in(failing(report, "cursor", f"event {event}")["fix"])
    assert init == "leanctx init --agent cursor --no-mcp"
    assert follow(init).returncode == 0
    code, report = doctor_json("--agent", "cursor")
    assert code == 0, json.dumps(report, indent=1)
    assert not (home / ".cursor" / "mcp.json").exists()  # following the fix did not register the server


def test_explicit_host_not_installed_fix_works(home: Path) -> None:
    code, report = doctor_json("--agent", "cursor")
    init, alternative = commands_in(failing(report, "cursor", "config")["fix"])
    assert follow(alternative).returncode == 0  # names the agent: a bare doctor --fix would leave it alone
    code, report = doctor_json("--agent", "cursor")
    assert code == 0, json.dumps(report, indent=1)


def test_hosts_not_on_this_machine_get_no_fix_line(home: Path) -> None:
    (home / ".cursor").mkdir()  # Cursor is here, nothing else
    assert run_cli("init", "--agent", "claude").returncode == 0
    code, report = doctor_json()
    assert code == 0, json.dumps(report, indent=1)
    for a in report["agents"]:
        if a["agent"] in ("claude", "cursor") or a["detected"]:
            continue
        assert all(c["fix"] is None for c in a["checks"]), a  # nothing to do for a host that is not here
    hint = next(c for c in report["agents"] if c["agent"] == "cursor")["checks"][0]
    assert hint["status"] == "info"
    init, _alt = commands_in(hint["fix"])
    assert follow(init).returncode == 0
    code, report = doctor_json()
    assert code == 0 and next(a for a in report["agents"] if a["agent"] == "cursor")["installed"]


# --- files init refuses: the spot and the change, and doctor --fix leaves them alone ------------


def test_unparseable_config_fix_names_the_spot_and_doctor_fix_skips_it(home: Path, data_dir: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    broken = '{\n  "model": "opus",\n  theme: "dark"\n}\n'
    path.write_text(broken)
    code, report = doctor_json("--agent", "claude")
    fix = failing(report, "claude", "config")["fix"]
    assert "~/.claude/settings.json:3:3" in fix and "expected a property name" in fix
    assert report["start"] == fix  # not an init that would refuse
    # doctor --fix cannot repair it and says so, instead of failing like init
    proc = run_cli("doctor", "--agent", "claude", "--fix", "--json")
    report = json.loads(proc.stdout)
    assert report["skipped"] == ["claude"] and report["fixed"] == []
    assert "doctor --fix leaves Claude Code alone" in proc.stderr and "settings.json:3:3" in proc.stderr
    assert "nothing was written" not in proc.stderr and path.read_text() == broken
    # follow it: correct the spot (the key in double quotes), then run the init it names
    file, line, col = spot(fix, home)
    text = file.read_text()
    at = offset(text, line, col)
    assert text[at:].startswith("theme")
    file.write_text(text[:at] + '"theme"' + text[at + len("theme"):])
    (init,) = commands_in(fix)
    assert init == "leanctx init --agent claude"
    assert follow(init).returncode == 0
    code, report = doctor_json("--agent", "claude")
    assert code == 0 and json.loads(path.read_text())["theme"] == "dark", json.dumps(report, indent=1)


def test_unparseable_config_moved_aside_as_the_fix_says(home: Path, data_dir: Path) -> None:
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text("not json at all\n")
    code, report = doctor_json("--agent", "gemini")
    fix = failing(report, "gemini", "config")["fix"]
    assert "~/.gemini/settings.json:1:1" in fix and "move the file aside" in fix
    path.rename(path.with_name("settings.json.broken"))
    (init,) = commands_in(fix)
    assert follow(init).returncode == 0
    code, report = doctor_json("--agent", "gemini")
    assert passes(report, "gemini", "config"), json.dumps(report, indent=1)


def test_unparseable_mcp_file_fix_names_the_spot(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "claude").returncode == 0
    path = home / ".claude.json"
    text = path.read_text()
    path.write_text(text.replace("{", "{\n  oops,", 1))
    code, report = doctor_json("--agent", "claude")
    fix = failing(report, "claude", "mcp server")["fix"]
    assert "~/.claude.json:2:3" in fix
    proc = run_cli("doctor", "--agent", "claude", "--fix", "--json")
    assert json.loads(proc.stdout)["skipped"] == ["claude"] and "leaves Claude Code alone" in proc.stderr
    file, line, col = spot(fix, home)
    broken = file.read_text()
    at = offset(broken, line, col)
    file.write_text(broken[:at] + broken[at + len("oops,"):])  # the stray word goes
    (init,) = commands_in(fix)
    assert follow(init).returncode == 0
    code, report = doctor_json("--agent", "claude")
    assert code == 0, json.dumps(report, indent=1)


def test_unparseable_codex_toml_fix_names_the_spot(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "codex", "--trust").returncode == 0
    path = home / ".codex" / "config.toml"
    good = path.read_text()
    path.write_text(good + "[broken\n")
    lines = path.read_text().count("\n")
    code, report = doctor_json("--agent", "codex")
    fix = failing(report, "codex", "codex config.toml")["fix"]
    file, line, _col = spot(fix, home)
    assert file == path and line == lines and "not TOML" in fix
    assert json.loads(run_cli("doctor", "--agent", "codex", "--fix", "--json").stdout)["skipped"] == ["codex"]
    text = path.read_text().split("\n")
    del text[line - 1]  # correct the line it names
    path.write_text("\n".join(text))
    (init,) = commands_in(fix)
    assert follow(init).returncode == 0
    code, report = doctor_json("--agent", "codex")
    assert code == 0, json.dumps(report, indent=1)


# --- edits described in words: made at the spot named ------------------------------------------


def test_strict_json_fix_removes_the_named_comma(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "claude").returncode == 0
    path = home / ".claude" / "settings.json"
    path.write_text(path.read_text().replace('"hooks": {', '"x": [1, 2,],\n  "hooks": {', 1))
    code, report = doctor_json("--agent", "claude")
    fix = failing(report, "claude", "config is strict JSON")["fix"]
    match = re.fullmatch(r"remove the trailing comma at line (\d+) column (\d+) from ~/\.claude/settings\.json", fix)
    assert match, fix
    text = path.read_text()
    at = offset(text, int(match.group(1)), int(match.group(2)))
    assert text[at] == ","
    path.write_text(text[:at] + text[at + 1:])
    code, report = doctor_json("--agent", "claude")
    assert code == 0 and passes(report, "claude", "config is strict JSON"), json.dumps(report, indent=1)


def test_disable_all_hooks_fix_names_the_line(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "claude").returncode == 0
    path = home / ".claude" / "settings.json"
    path.write_text(path.read_text().replace("{", '{\n  "disableAllHooks": true,', 1))
    code, report = doctor_json("--agent", "claude")
    fix = failing(report, "claude", "claude hooks enabled")["fix"]
    match = re.fullmatch(r'remove "disableAllHooks": true from ~/\.claude/settings\.json \(line (\d+)\)', fix)
    assert match, fix
    lines = path.read_text().split("\n")
    line = int(match.group(1))
    assert lines[line - 1].strip() == '"disableAllHooks": true,'
    del lines[line - 1]
    path.write_text("\n".join(lines))
    code, report = doctor_json("--agent", "claude")
    assert code == 0, json.dumps(report, indent=1)


@pytest.mark.parametrize("setting", ["enabled", "disabled"])
def test_gemini_switch_fix_says_what_to_change(home: Path, data_dir: Path, setting: str) -> None:
    assert run_cli("init", "--agent", "gemini").returncode == 0
    path = home / ".gemini" / "settings.json"
    value = json.loads(path.read_text())
    ours = next(h["command"] for groups in value["hooks"].values() for g in groups for h in g["hooks"])
    value["hooksConfig"] = {"enabled": False} if setting == "enabled" else {"disabled": [ours]}
    path.write_text(json.dumps(value, indent=2))
    code, report = doctor_json("--agent", "gemini")
    fix = failing(report, "gemini", "gemini hooks enabled")["fix"]
    match = re.search(r"in ~/\.gemini/settings\.json \(line (\d+)\)$", fix)
    assert match and '"hooksConfig"' in path.read_text().split("\n")[int(match.group(1)) - 1], fix
    if setting == "enabled":
        assert fix.startswith('remove "enabled": false from "hooksConfig"')
        del value["hooksConfig"]["enabled"]
    else:
        assert fix.startswith(f"take {json.dumps(ours)} out of \"hooksConfig.disabled\"")
        value["hooksConfig"]["disabled"].remove(ours)
    path.write_text(json.dumps(value, indent=2))
    code, report = doctor_json("--agent", "gemini")
    assert code == 0, json.dumps(report, indent=1)


def test_codex_hooks_feature_fix_names_the_line(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "codex", "--trust").returncode == 0
    path = home / ".codex" / "config.toml"
    path.write_text(path.read_text() + "\n[features]\nhooks = false\n")
    code, report = doctor_json("--agent", "codex")
    fix = failing(report, "codex", "codex hooks feature")["fix"]
    match = re.fullmatch(r"set hooks = true under \[features\] in ~/\.codex/config\.toml \(line (\d+)\)", fix)
    assert match, fix
    lines = path.read_text().split("\n")
    line = int(match.group(1))
    assert lines[line - 1] == "hooks = false"
    lines[line - 1] = "hooks = true"
    path.write_text("\n".join(lines))
    code, report = doctor_json("--agent", "codex")
    assert code == 0, json.dumps(report, indent=1)


def test_codex_trust_fix_command_keeps_the_profile(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "codex", "--bot").returncode == 0
    code, report = doctor_json("--agent", "codex")
    fix = failing(report, "codex", "codex hook trust")["fix"]
    (init,) = commands_in(fix)
    assert init == "leanctx init --agent codex --bot --trust"
    assert follow(init).returncode == 0
    code, report = doctor_json("--agent", "codex")
    assert code == 0 and report["agents"][0]["profile"] == "bot", json.dumps(report, indent=1)


# --- the wrapper, the smoke runs, PATH, the MCP entry ------------------------------------------


def test_missing_wrapper_fix_rewrites_it(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "cursor").returncode == 0
    wrapper.wrapper_path(data_dir).unlink()
    code, report = doctor_json("--agent", "cursor")
    (command,) = commands_in(failing(report, "cursor", "wrapper")["fix"])
    assert follow(command).returncode == 0
    code, report = doctor_json("--agent", "cursor")
    assert code == 0, json.dumps(report, indent=1)


def test_not_executable_wrapper_fix_is_a_shell_command(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "cursor").returncode == 0
    path = wrapper.wrapper_path(data_dir)
    path.chmod(path.stat().st_mode & ~(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
    code, report = doctor_json("--agent", "cursor")
    fix = failing(report, "cursor", "wrapper")["fix"]
    assert fix.startswith("chmod +x ")
    subprocess.run(["/bin/sh", "-c", fix], check=True, env=dict(os.environ))  # ~ is this HOME
    code, report = doctor_json("--agent", "cursor")
    assert code == 0, json.dumps(report, indent=1)


def test_failing_smoke_run_fix_repairs_it(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "cursor").returncode == 0
    path = wrapper.wrapper_path(data_dir)
    path.write_text(path.read_text().replace('exec "$LEANCTX_PYTHON"', 'echo not-json; exec "$LEANCTX_PYTHON"'))
    code, report = doctor_json("--agent", "cursor")
    (command,) = commands_in(failing(report, "cursor", "smoke sessionStart")["fix"])
    assert follow(command).returncode == 0
    code, report = doctor_json("--agent", "cursor")
    assert code == 0, json.dumps(report, indent=1)


def test_not_on_path_fix_names_the_folder(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    assert run_cli("init", "--agent", "claude", "--project", str(project), env=scripts_on_path()).returncode == 0
    bare = dict(os.environ, PATH="/usr/bin:/bin")
    code, report = doctor_json("--project", str(project), "--agent", "claude", env=bare)
    fix = failing(report, "claude", "on PATH")["fix"]
    folder = sysconfig.get_path("scripts")
    assert fix.startswith(f"add {folder} to the PATH"), fix
    code, report = doctor_json("--project", str(project), "--agent", "claude", env=dict(bare, PATH=f"{folder}:/usr/bin:/bin"))
    assert passes(report, "claude", "on PATH") and code == 0, json.dumps(report, indent=1)


def test_mcp_name_taken_fix_registers_under_another_name(home: Path, data_dir: Path) -> None:
    path = home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    mine = {"command": "my-own-server", "args": ["--x"]}
    assert run_cli("init", "--agent", "cursor").returncode == 0
    value = json.loads(path.read_text())
    value["mcpServers"]["leanctx"] = mine
    path.write_text(json.dumps(value, indent=2))
    code, report = doctor_json("--agent", "cursor")
    (init,) = commands_in(failing(report, "cursor", "mcp server")["fix"])
    assert init == "leanctx init --agent cursor --mcp-name leanctx-ctx"
    assert follow(init).returncode == 0
    code, report = doctor_json("--agent", "cursor")
    assert code == 0, json.dumps(report, indent=1)
    assert json.loads(path.read_text())["mcpServers"]["leanctx"] == mine  # theirs untouched


def test_damaged_state_fix_names_the_file(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "claude", "--bot").returncode == 0
    env = dict(os.environ, CKS_ACTIVE_USER="bob")
    assert run_cli("state", "pending", "--question", "Which plan?", env=env).returncode == 0
    (home / ".cks" / "user" / "bob" / "conversation-state.json").write_text("{not json")
    assert run_cli("state", "show", env=env).returncode == 0
    code, report = doctor_json("--agent", "claude")
    check = next(c for c in report["checks"] if c["name"] == "conversation state bob")
    match = re.fullmatch(r"read (~/\S+) for what was lost, then delete it", check["fix"])
    assert match, check
    (home / match.group(1)[2:]).unlink()
    code, report = doctor_json("--agent", "claude")
    assert all(c["name"] != "conversation state bob" for c in report["checks"]), json.dumps(report, indent=1)


def test_older_host_fix_names_the_version(home: Path, tmp_path: Path) -> None:
    """Cannot be followed here (upgrading a host): the line names the host and the version."""
    agent = agents.get("claude")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text("#!/bin/sh\necho '0.0.1 (Claude Code)'\n")
    fake.chmod(0o755)
    assert run_cli("init", "--agent", "claude").returncode == 0
    code, report = doctor_json("--agent", "claude", env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}"))
    fix = failing(report, "claude", "version")["fix"]
    assert fix == f"upgrade Claude Code to {agent.min_version} or newer (leanctx was verified on {agent.verified_version})"


# --- --project DIR must exist -----------------------------------------------------------------


@pytest.mark.parametrize("command", [["init", "--agent", "claude"], ["uninstall", "--agent", "claude"], ["doctor"]])
def test_missing_project_dir_is_refused(home: Path, tmp_path: Path, command: list[str]) -> None:
    typo = tmp_path / "proejct"
    proc = run_cli(*command, "--project", str(typo))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and f"--project {typo}: no such folder" in proc.stderr and "mkdir -p" in proc.stderr
    assert not typo.exists()
    assert not Path(os.environ["LEANCTX_HOME"]).exists()  # nothing written anywhere


# --- --help points at files that hold what it says ---------------------------------------------


def test_help_texts_point_at_existing_docs() -> None:
    from tests.conftest import REPO

    doctor_help = run_cli("doctor", "--help").stdout
    assert "docs/commands.md" in " ".join(doctor_help.split()) and "README" not in doctor_help
    commands = ["init", "uninstall", "doctor", "hosts", "hook", "state", "serve", "mcp", "status", "stop", "stats"]
    for command in commands:
        text = " ".join(run_cli(command, "--help").stdout.split())
        for doc in re.findall(r"\b(docs/[\w.-]+\.md|README(?:\.md)?)", text):
            assert (REPO / (doc if doc.endswith(".md") else doc + ".md")).exists(), (command, doc)
    schema = (REPO / "docs" / "commands.md").read_text()
    assert '"schema": 1' in schema  # where doctor --help sends the reader
