"""Runs that are cut short from outside: kill -9 in the middle of a write, a reader that closes
stdout early (`leanctx init | head -1`). Real processes, real signals, real pipes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx.installer import wrapper
from tests.conftest import run_cli

# Runs `leanctx ARGS...` with os.fsync stalled on the one file whose name contains STALL_ON:
# the process is then inside atomic_write, its temp file written and not yet renamed.
STALLED = r"""
import os, sys, time
stall_on = sys.argv.pop(1)
real_fsync = os.fsync
def fsync(fd):
    if stall_on in os.readlink(f"/proc/self/fd/{fd}"):
        sys.stderr.write("stalled\n"); sys.stderr.flush()
        time.sleep(600)
    real_fsync(fd)
os.fsync = fsync
from leanctx.cli import main
sys.argv[0] = "leanctx"
main()
"""


def kill_mid_write(stall_on: str, *args: str) -> None:
    proc = subprocess.Popen([sys.executable, "-c", STALLED, stall_on, *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = proc.stderr.readline()
        assert line == "stalled\n", line + proc.stderr.read()
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
        proc.stderr.close()


def our_temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob(".*.leanctx-*.tmp")) if folder.is_dir() else []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to find the file being written")
@pytest.mark.parametrize("next_run", [("init", "--agent", "claude"), ("uninstall", "--agent", "claude")])
def test_kill_9_while_the_wrapper_is_written_leaves_no_temp_after_the_next_run(home: Path, data_dir: Path, next_run) -> None:
    kill_mid_write(".leanctx-hook.leanctx-", "init", "--agent", "claude")
    bin_dir = wrapper.wrapper_path(data_dir).parent
    assert len(our_temps(bin_dir)) == 1  # the leftover the issue saw
    proc = run_cli(*next_run)
    assert proc.returncode == 0, proc.stderr
    assert our_temps(bin_dir) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to find the file being written")
@pytest.mark.parametrize("name,config", [("claude", ".claude/settings.json"), ("codex", ".codex/hooks.json")])
def test_kill_9_while_a_config_is_written(home: Path, data_dir: Path, name: str, config: str) -> None:
    path = home / config
    path.parent.mkdir()
    path.write_text("{}\n")
    kill_mid_write(f".{path.name}.leanctx-", "init", "--agent", name)
    assert path.read_text() == "{}\n"  # never torn
    assert len(our_temps(path.parent)) == 1
    assert run_cli("init", "--agent", name).returncode == 0
    assert our_temps(path.parent) == [] and "leanctx-hook" in path.read_text()
    assert run_cli("uninstall", "--agent", name).returncode == 0
    assert path.read_text() == "{}\n"


def test_temps_of_a_live_writer_and_foreign_files_are_kept(home: Path, data_dir: Path) -> None:
    folder = home / ".claude"
    folder.mkdir()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = [folder / f".settings.json.leanctx-{live.pid}.tmp", folder / ".settings.json.tmp", folder / "notes.leanctx-1.tmp"]
        for p in kept:
            p.write_text("x")
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        stale = folder / f".settings.json.leanctx-{dead.pid}.tmp"
        stale.write_text("x")
        assert run_cli("init", "--agent", "claude").returncode == 0
        assert all(p.exists() for p in kept) and not stale.exists()
    finally:
        live.kill()
        live.wait()


def closed_stdout_run(*args: str) -> subprocess.CompletedProcess:
    """Run leanctx with stdout a pipe whose reader is already gone (every write gets EPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "leanctx", *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_closed_stdout_never_stops_an_install_between_files(home: Path, data_dir: Path, name: str) -> None:
    proc = closed_stdout_run("init", "--agent", name, "--bot")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    full = home / "full"
    env = dict(os.environ, HOME=str(full), LEANCTX_HOME=str(data_dir.parent / "full-data"))
    full.mkdir()
    assert run_cli("init", "--agent", name, "--bot", env=env).returncode == 0

    def written(root: Path) -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "full" not in p.relative_to(root).parts[:1])

    assert [p for p in written(home) if not p.startswith(".local")] == [p for p in written(full) if not p.startswith(".local")]
    proc = closed_stdout_run("uninstall", "--agent", name)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert [p for p in written(home) if not p.startswith(".local")] == []


def test_head_1_of_init(home: Path, data_dir: Path) -> None:
    """The shell pipeline itself, as the user typed it."""
    cmd = f"{sys.executable} -m leanctx init --agent codex --bot | head -1; echo status=${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[-1] == "status=0" and "Error" not in proc.stderr, proc.stderr
    assert "leanctx:conversation-state" in (home / ".codex" / "AGENTS.md").read_text()
    assert "leanctx" in (home / ".codex" / "config.toml").read_text()
