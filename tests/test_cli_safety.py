"""No `leanctx` command ends in a traceback: one line naming the log, exit 2 for bad input or
environment, 1 for our own bugs. Real processes, real broken environments."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import not_a_folder, run_cli

# A command with a bug in it, registered on the real group: what any unforeseen exception meets.
BUGGY = """
import sys
from leanctx.cli import main

@main.command()
def boom():
    raise ValueError("a bug\\nover two lines")

sys.argv = ["leanctx", "boom"]
main()
"""


def one_line_with_log(proc: subprocess.CompletedProcess) -> Path:
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    match = re.search(r"\(details in (.+)\)$", proc.stderr.strip())
    assert match, proc.stderr
    log = Path(match.group(1))
    assert "Traceback" in log.read_text()
    return log


def test_an_internal_error_is_one_line_exit_1_and_the_traceback_is_logged(home: Path, data_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", BUGGY], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.startswith("leanctx: internal error: ValueError: a bug over two lines (details in ")
    assert one_line_with_log(proc) == data_dir / "logs" / "cli.log"


def test_the_log_falls_back_to_a_temp_file_when_the_data_dir_is_unusable(home: Path, tmp_path: Path) -> None:
    blocker = not_a_folder(tmp_path / "not-a-dir")
    env = dict(os.environ, LEANCTX_HOME=str(blocker))
    proc = subprocess.run([sys.executable, "-c", BUGGY], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1
    log = one_line_with_log(proc)
    try:
        assert log.parent != blocker and oct(log.stat().st_mode & 0o777) == oct(0o600)
    finally:
        log.unlink()


# An OS error no command handled itself: bad environment, not a bug of ours.
UNHANDLED_OS_ERROR = """
import sys
from leanctx.cli import main

@main.command()
def touch_it():
    open(sys.argv_path + "/x", "w")

sys.argv_path = {path!r}
sys.argv = ["leanctx", "touch-it"]
main()
"""


def test_an_os_error_from_the_environment_is_bad_input_exit_2(home: Path, tmp_path: Path) -> None:
    blocker = not_a_folder(tmp_path / "not-a-dir")
    code = UNHANDLED_OS_ERROR.format(path=str(blocker))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"leanctx: {blocker}") and "internal error" not in proc.stderr
    one_line_with_log(proc)


def test_serve_detach_in_an_unusable_data_dir_is_one_line_exit_2(home: Path, tmp_path: Path) -> None:
    blocker = not_a_folder(tmp_path / "not-a-dir")
    proc = run_cli("serve", "--detach", env=dict(os.environ, LEANCTX_HOME=str(blocker)))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"leanctx: cannot start the daemon in {blocker}: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and blocker.read_text() == "x"


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_state_commands_with_a_broken_cks_home(home: Path, tmp_path: Path, kind: str) -> None:
    blocker = not_a_folder(tmp_path / "cks", kind)
    env = dict(os.environ, CKS_HOME=str(blocker))
    for args in (("state", "show"), ("state", "summary", "hi"), ("state", "list")):
        proc = run_cli(*args, env=env)
        assert proc.returncode in (0, 2) and "Traceback" not in proc.stderr, (args, proc.stderr)


def test_usage_errors_stay_clicks(home: Path) -> None:
    proc = run_cli("init")
    assert proc.returncode == 2 and "Missing option '--agent'" in proc.stderr and "internal error" not in proc.stderr
