"""Configs and data dirs that are not what they should be: FIFOs, sockets, folders, symlink loops,
folders symlinked out of HOME, read-only data dirs. init, uninstall and doctor refuse each at
once (exit 2; doctor a failing check, exit 1), never hang, never a traceback, nothing written.
A hang fails the test through run_cli's subprocess timeout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from leanctx.installer import wrapper
from tests.conftest import not_a_folder, run_cli

# (agent, config path under HOME) for every file init reads or writes at user level
CONFIGS = [
    ("claude", ".claude/settings.json"),
    ("claude", ".claude.json"),
    ("claude", ".claude/CLAUDE.md"),
    ("codex", ".codex/hooks.json"),
    ("codex", ".codex/config.toml"),
    ("codex", ".codex/AGENTS.md"),
    ("cursor", ".cursor/hooks.json"),
    ("cursor", ".cursor/mcp.json"),
    ("codebuddy", ".codebuddy/settings.json"),
    ("opencode", ".config/opencode/plugins/leanctx.js"),
    ("opencode", ".config/opencode/opencode.json"),
    ("opencode", ".config/opencode/AGENTS.md"),
    ("cline", ".cline/hooks/TaskStart"),
    ("cline", ".cline/hooks/SessionShutdown"),
    ("cline", ".cline/data/settings/cline_mcp_settings.json"),
    ("cline", ".cline/rules/leanctx-ctx-read.md"),
    ("codebuddy", ".codebuddy.json"),
    ("droid", ".factory/settings.json"),
    ("droid", ".factory/mcp.json"),
    ("droid", ".factory/AGENTS.md"),
]


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: file bytes, or the kind of anything else."""
    out: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        if key.startswith(".local/share/leanctx"):
            continue  # the data dir (its lock file); the user's files are what must not change
        if p.is_symlink():
            out[key] = "link:" + os.readlink(p)
        elif p.is_file():
            out[key] = p.read_bytes()
        elif not p.is_dir():
            out[key] = "special"
    return out


def assert_refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr, proc.stderr


def doctor_config_check(agent: str) -> dict:
    proc = run_cli("doctor", "--json", "--agent", agent)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    return next(c for c in report["agents"][0]["checks"] if c["status"] == "fail")


def make_fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize("name,rel", CONFIGS)
def test_fifo_config_is_refused_at_once(home: Path, data_dir: Path, name: str, rel: str) -> None:
    make_fifo(home / rel)
    before = tree(home)
    for command in ("init", "uninstall"):
        assert_refused(run_cli(command, "--agent", name), str(home / rel), "not a regular file", "FIFO")
        assert tree(home) == before
    assert not wrapper.wrapper_path(data_dir).exists()


@pytest.mark.parametrize("name,rel", [("claude", ".claude/settings.json"), ("codex", ".codex/hooks.json")])
def test_doctor_reports_a_fifo_config_as_failing(home: Path, name: str, rel: str) -> None:
    make_fifo(home / rel)
    failing = doctor_config_check(name)
    assert "not a regular file" in failing["detail"]
    proc = run_cli("doctor")  # every agent, none named: still a failure, still no hang
    assert proc.returncode == 1 and "not a regular file" in proc.stdout


def test_doctor_with_a_fifo_mcp_config_fails_after_init(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "codex").returncode == 0
    toml = home / ".codex" / "config.toml"
    toml.unlink()
    make_fifo(toml)
    proc = run_cli("doctor", "--agent", "codex")
    assert proc.returncode == 1 and "not a regular file" in proc.stdout and "Traceback" not in proc.stderr
    assert_refused(run_cli("uninstall", "--agent", "codex"), "not a regular file")


def test_socket_and_folder_where_a_config_should_be(home: Path, data_dir: Path, tmp_path: Path) -> None:
    sock_path = home / ".claude" / "settings.json"
    sock_path.parent.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        assert_refused(run_cli("init", "--agent", "claude"), "not a regular file", "socket")
        assert_refused(run_cli("uninstall", "--agent", "claude"), "not a regular file")
    finally:
        server.close()
    (home / ".codex" / "hooks.json").mkdir(parents=True)
    assert_refused(run_cli("init", "--agent", "codex"), "is a directory")
    assert_refused(run_cli("uninstall", "--agent", "codex"), "is a directory")


@pytest.mark.parametrize("name,rel", [("claude", ".claude/settings.json"), ("claude", ".claude.json"), ("codex", ".codex/config.toml"), ("codex", ".codex/AGENTS.md")])
def test_symlink_loop_at_a_config_path(home: Path, data_dir: Path, name: str, rel: str) -> None:
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    other = path.with_name(path.name + ".other")
    path.symlink_to(other)
    other.symlink_to(path)
    before = tree(home)
    for command in ("init", "uninstall"):
        assert_refused(run_cli(command, "--agent", name), str(path), "symlink loop")
        assert tree(home) == before
    if rel in (".claude/settings.json",):
        assert "symlink loop" in doctor_config_check(name)["detail"]


def test_symlink_loop_in_a_config_folder(home: Path, data_dir: Path) -> None:
    (home / ".codex").symlink_to(home / ".codex")
    assert_refused(run_cli("init", "--agent", "codex"), "symlink loop")
    assert_refused(run_cli("uninstall", "--agent", "codex"), "symlink loop")
    assert "symlink loop" in doctor_config_check("codex")["detail"]


def test_a_file_where_a_config_folder_should_be(home: Path, data_dir: Path) -> None:
    (home / ".claude").write_text("not a folder")
    assert_refused(run_cli("init", "--agent", "claude"), str(home / ".claude"))
    assert (home / ".claude").read_text() == "not a folder"


@pytest.mark.parametrize("name,folder", [("claude", ".claude"), ("codex", ".codex"), ("opencode", ".config/opencode/plugins"),
                                         ("cline", ".cline/hooks")])
def test_config_folder_symlinked_outside_home_is_refused(home: Path, data_dir: Path, tmp_path: Path, name: str, folder: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / folder).parent.mkdir(parents=True, exist_ok=True)
    (home / folder).symlink_to(elsewhere)
    for command in ("init", "uninstall"):
        assert_refused(run_cli(command, "--agent", name), "outside", str(home / folder))
    assert list(elsewhere.iterdir()) == []
    assert "outside" in doctor_config_check(name)["detail"]


def test_config_folder_symlinked_inside_home_is_followed(home: Path, data_dir: Path) -> None:
    dotfiles = home / "dotfiles" / "claude"
    dotfiles.mkdir(parents=True)
    (dotfiles / "settings.json").write_text('{"model": "opus"}\n')
    (home / ".claude").symlink_to(dotfiles)
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert "leanctx-hook" in (dotfiles / "settings.json").read_text()
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert (dotfiles / "settings.json").read_text() == '{"model": "opus"}\n'
    assert sorted(p.name for p in dotfiles.iterdir()) == ["settings.json"]


def test_project_folder_symlinked_out_of_the_project_is_refused(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "proj", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / ".codex").symlink_to(elsewhere)
    assert_refused(run_cli("init", "--agent", "codex", "--project", str(project)), "outside")
    assert list(elsewhere.iterdir()) == []
    inside = project / "shared-codex"
    inside.mkdir()
    (project / ".codex").unlink()
    (project / ".codex").symlink_to(inside)
    assert run_cli("init", "--agent", "codex", "--project", str(project)).returncode == 0
    assert (inside / "hooks.json").exists()


@pytest.mark.parametrize("sub", ["", "bin", "installed", "backups"])
def test_read_only_data_dir_is_refused_naming_the_folder(home: Path, data_dir: Path, immutable, sub: str) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{}\n")
    for folder in ("bin", "installed", "backups"):
        (data_dir / folder).mkdir(parents=True)
    immutable(data_dir / sub if sub else data_dir)
    proc = run_cli("init", "--agent", "claude")
    assert_refused(proc, str(data_dir / sub if sub else data_dir), "not writable", "nothing was written")
    assert settings.read_text() == "{}\n" and not (home / ".claude.json").exists()


def test_read_only_data_dir_parent_and_uninstall(home: Path, data_dir: Path, immutable) -> None:
    assert run_cli("init", "--agent", "codex").returncode == 0
    before = tree(home / ".codex")
    immutable(data_dir / "installed")
    assert_refused(run_cli("uninstall", "--agent", "codex"), str(data_dir / "installed"), "not writable")
    assert tree(home / ".codex") == before


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_data_dir_that_is_not_a_folder(home: Path, tmp_path: Path, kind: str) -> None:
    blocker = not_a_folder(tmp_path / "data", kind)
    env = dict(os.environ, LEANCTX_HOME=str(blocker))
    for args in (("init", "--agent", "claude"), ("uninstall", "--agent", "claude")):
        proc = run_cli(*args, env=env)
        assert_refused(proc, str(blocker), "not a folder")
    proc = run_cli("doctor", "--agent", "claude", env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert not (home / ".claude").exists()


def test_dangling_symlink_inside_home_is_written_through_and_restored(home: Path, data_dir: Path) -> None:
    link = home / ".claude" / "settings.json"
    link.parent.mkdir()
    target = home / "dotfiles" / "claude-settings.json"
    link.symlink_to(target)
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert link.is_symlink() and "leanctx-hook" in target.read_text()
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert link.is_symlink() and not target.exists() and not target.parent.exists()


def test_dangling_symlink_outside_home_is_refused(home: Path, data_dir: Path, tmp_path: Path) -> None:
    link = home / ".codex" / "hooks.json"
    link.parent.mkdir()
    link.symlink_to(tmp_path / "elsewhere" / "hooks.json")
    assert_refused(run_cli("init", "--agent", "codex"), "outside")
    assert not (tmp_path / "elsewhere").exists()


def test_read_only_config_folder_is_refused(home: Path, data_dir: Path, immutable) -> None:
    folder = home / ".claude"
    folder.mkdir()
    (folder / "settings.json").write_text("{}\n")
    immutable(folder)
    assert_refused(run_cli("init", "--agent", "claude"), str(folder), "not writable", "nothing was written")
    assert (folder / "settings.json").read_text() == "{}\n" and not (home / ".claude.json").exists()


def test_a_fifo_left_under_a_manifest_temp_name_does_not_block_the_next_run(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "codex").returncode == 0
    for record in (data_dir / "installed").glob("*.json"):
        os.mkfifo(record.with_name(record.name + ".tmp"))
    assert run_cli("init", "--agent", "codex", "--bot").returncode == 0
    assert run_cli("uninstall", "--agent", "codex").returncode == 0
    assert not (home / ".codex").exists() or tree(home / ".codex") == {}
