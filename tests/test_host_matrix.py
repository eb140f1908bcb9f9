"""The support matrix and the version notes come from the host modules: the README cannot drift
from them, and doctor reads the installed CLI's version through the real command line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx import agents, hostversions
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parent.parent


def test_every_host_module_fills_the_matrix() -> None:
    found = [p for agent in agents.all_agents() for p in hostversions.problems(agent)]
    assert found == []


def test_the_readme_matrix_is_generated_from_the_host_modules() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    fresh = hostversions.replace_block(readme, hostversions.markdown())
    assert fresh is not None, "README.md lost its support-matrix markers"
    assert fresh == readme, "README.md's support matrix is stale: run python -m tests.readme_examples --update"


def test_the_printed_matrix_is_the_generated_one() -> None:
    proc = run_cli("hosts", "--markdown")
    assert proc.returncode == 0 and proc.stdout == hostversions.markdown()
    assert proc.stdout.count("\n") == len(agents.names()) + 2
    for name in agents.names():
        assert f"(`{name}`)" in proc.stdout


def test_problems_name_what_is_wrong() -> None:
    class Broken(type(agents.get("claude"))):
        family = "snowflake"
        support = {"verified": "run, 1.0.0", "hooks": "a|b"}
        verified_version = "2.0.0"
        min_version = "3.0.0"

    found = "\n".join(hostversions.problems(Broken()))
    assert "family 'snowflake'" in found
    assert "support lacks mcp, rule, call_id, bot, guard" in found
    assert "verified_version 2.0.0 but the matrix says 'run, 1.0.0'" in found
    assert "min_version 3.0.0 is newer than verified_version 2.0.0" in found
    assert "'|'" in found


@pytest.mark.parametrize(
    "printed,expected",
    [
        ("2.1.197 (Claude Code)", (2, 1, 197)),
        ("codex-cli 0.171.0", (0, 171, 0)),
        ("0.0.1790142911-g7618fb (released 2026-09-23T05:55:11.000Z, 2mo ago)", (0, 0, 1790142911)),
        ("v24.22.3", (24, 22, 3)),
        ("OpenClaw 2026.9.6 (abc1234)", (2026, 9, 6)),
        ("no digits here", ()),
    ],
)
def test_versions_parse_as_the_hosts_print_them(printed: str, expected: tuple) -> None:
    assert hostversions.parse(printed) == expected


def test_verdicts_compare_numerically() -> None:
    claude = agents.get("claude")  # verified 2.1.197 to 2.1.332
    assert hostversions.verdict(claude, "2.1.200")[0] == "ok"
    assert hostversions.verdict(claude, "2.1.1000")[0] == "newer"  # not a string comparison
    assert hostversions.verdict(claude, "2.1.99")[0] == "older"
    assert hostversions.verdict(agents.get("cursor"), "3.0.0")[0] == "unverified"


def _fake_cli(folder: Path, name: str, prints: str, exit_code: int = 0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / name
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' '{prints}'\nexit {exit_code}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _doctor(home: Path, fake_bin: Path, agent: str) -> tuple[int, dict, str]:
    env = dict(os.environ, PATH=f"{fake_bin}:{Path(sys.executable).parent}:/usr/bin:/bin")
    proc = run_cli("doctor", "--agent", agent, "--json", env=env)
    text = run_cli("doctor", "--agent", agent, env=env).stdout
    report = json.loads(proc.stdout)
    (result,) = report["agents"]
    return proc.returncode, {c["name"]: c for c in result["checks"]}, text


@pytest.mark.parametrize("agent", ["claude", "qwen", "droid"])
def test_doctor_notes_a_newer_cli_without_failing(home: Path, data_dir: Path, tmp_path: Path, agent: str) -> None:
    module = agents.get(agent)
    assert run_cli("init", "--agent", agent).returncode == 0
    newest = hostversions.parse(module.verified_version)
    newer = ".".join(map(str, newest[:-1] + (newest[-1] + 1,)))
    _fake_cli(tmp_path / "bin", module.version_command[0], f"{newer} ({module.display_name})")
    code, checks, text = _doctor(home, tmp_path / "bin", agent)
    assert code == 0, checks
    assert checks["version"]["status"] == "info"
    assert f"{newer} is newer than {module.verified_version}" in checks["version"]["detail"]
    assert f"{newer} is newer than" in text


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini"])
def test_doctor_fails_a_cli_older_than_the_oldest_known_to_work(home: Path, data_dir: Path, tmp_path: Path, agent: str) -> None:
    module = agents.get(agent)
    assert run_cli("init", "--agent", agent, *(["--trust"] if agent == "codex" else [])).returncode == 0
    oldest = hostversions.parse(module.min_version)
    older = ".".join(map(str, oldest[:-1] + (oldest[-1] - 1,))) if oldest[-1] else f"{oldest[0]}.{max(oldest[1] - 1, 0)}.99"
    fake = _fake_cli(tmp_path / "bin", module.version_command[0], f"{older}")
    code, checks, text = _doctor(home, tmp_path / "bin", agent)
    assert code == 1
    version = checks["version"]
    assert version["status"] == "fail" and f"{older} is older than {module.min_version}" in version["detail"]
    assert str(fake) in version["detail"]
    assert version["fix"] == f"upgrade {module.display_name} to {module.min_version} or newer (leanctx was verified on {module.verified_version})"
    # following the fix line: the upgraded CLI passes
    _fake_cli(tmp_path / "bin", module.version_command[0], module.verified_version)
    code, checks, _ = _doctor(home, tmp_path / "bin", agent)
    assert code == 0 and checks["version"]["status"] == "ok", checks["version"]


def test_doctor_says_why_it_could_not_read_a_version(home: Path, data_dir: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", "claude").returncode == 0
    _fake_cli(tmp_path / "bin", "claude", "command not understood", exit_code=3)
    code, checks, _ = _doctor(home, tmp_path / "bin", "claude")
    assert code == 0  # never a failure on what we could not read
    assert checks["version"]["status"] == "info"
    assert checks["version"]["detail"] == "not checked: `claude --version` printed no version (exit 3)"
    code, checks, _ = _doctor(home, tmp_path / "empty", "claude")
    assert code == 0 and checks["version"]["detail"] == "not checked: claude is not on PATH"


def test_hosts_lists_the_installed_versions(home: Path, tmp_path: Path) -> None:
    _fake_cli(tmp_path / "bin", "gemini", "0.1.0")
    _fake_cli(tmp_path / "bin", "claude", "99.0.0 (Claude Code)")
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    rows = {r["agent"]: r for r in json.loads(run_cli("hosts", "--json", env=env).stdout)}
    assert rows["gemini"]["installed_version"] == "0.1.0" and rows["gemini"]["verdict"] == "older"
    assert rows["claude"]["verdict"] == "newer"
    assert rows["codex"]["installed_version"] is None and rows["codex"]["verdict"] == "not installed"
    assert rows["cursor"]["verdict"] == "no CLI"
    text = run_cli("hosts", env=env).stdout
    gemini_line = next(line for line in text.splitlines() if line.startswith("gemini "))
    assert gemini_line.split() == ["gemini", "gemini-shaped", "0.61.0", "0.61.0", "0.1.0", "older"]


def test_a_real_host_cli_reports_its_pinned_version() -> None:
    """Parsing what the real CLIs print: every pinned CLI installed here reads as its pin."""
    from tests.e2e import install_clis

    bin_dir = install_clis.PREFIX / "node_modules" / ".bin"
    if not bin_dir.is_dir():
        pytest.skip("the host CLIs are not installed (python tests/e2e/install_clis.py)")
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin")
    checked = 0
    for agent in agents.all_agents():
        if not agent.version_command or not (bin_dir / agent.version_command[0]).exists():
            continue
        package = install_clis.BINARIES.get(agent.version_command[0])
        if package not in install_clis.PINNED:
            continue
        _, version, why = hostversions.installed(agent, env)
        assert version == install_clis.PINNED[package], (agent.name, why)
        assert hostversions.verdict(agent, version)[0] == "ok", (agent.name, version)
        checked += 1
    assert checked >= 8
