"""No user text in leanctx's logs, and every log bounded: cli.log keeps the command's name and
where it failed (never its arguments nor the exception's message), and cli.log, hooks.log and the
daemon's service.log rotate at 1 MiB. Real commands, real files."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import not_a_folder, run_cli
from tests.test_cli_safety import BUGGY

SECRET = "meet me at the harbour at nine"
STATE_COMMANDS = [
    ["state", "summary", SECRET],
    ["state", "pending", "--question", SECRET, "--option", SECRET],
    ["state", "inbound", SECRET],
    ["state", "reply", SECRET],
]


@pytest.mark.parametrize("args", STATE_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_failing_state_command_logs_no_chat_text(home: Path, data_dir: Path, tmp_path: Path, args: list[str]) -> None:
    env = dict(os.environ, CKS_HOME=str(not_a_folder(tmp_path / "cks")), CKS_ACTIVE_USER="alice")
    proc = run_cli(*args, env=env)
    assert proc.returncode == 2, proc.stderr
    log = (data_dir / "logs" / "cli.log").read_text()
    assert f"leanctx {' '.join(args[:2])}\n" in log and "Traceback" in log  # still says what failed and where
    assert SECRET not in log and "harbour" not in log


def test_an_exception_message_is_not_logged(home: Path, data_dir: Path) -> None:
    """An internal error's message can quote anything; the user sees it once, on stderr."""
    proc = subprocess.run([sys.executable, "-c", BUGGY], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "a bug over two lines" in proc.stderr
    log = (data_dir / "logs" / "cli.log").read_text()
    assert "ValueError" in log and "a bug" not in log


def test_cli_log_is_rotated(home: Path, data_dir: Path) -> None:
    logs = data_dir / "logs"
    logs.mkdir(parents=True, mode=0o700)
    old = b"old line\n" * (1 << 17)  # just over 1 MiB
    (logs / "cli.log").write_bytes(old)
    proc = subprocess.run([sys.executable, "-c", BUGGY], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert (logs / "cli.log.1").read_bytes() == old
    assert (logs / "cli.log").stat().st_size < 64 << 10 and "ValueError" in (logs / "cli.log").read_text()


def test_the_daemon_keeps_its_log_bounded_while_it_runs(home: Path, data_dir: Path) -> None:
    """A daemon that never exits (idle exit 0) rotates its own service.log once it is over 1 MiB."""
    env = dict(os.environ, LEANCTX_IDLE_EXIT="0")
    proc = run_cli("serve", "--detach", env=env)
    assert proc.returncode == 0, proc.stderr
    log = data_dir / "logs" / "service.log"
    try:
        with open(log, "ab") as f:  # the same file the daemon's stderr appends to
            f.write(b"x" * ((1 << 20) + 1) + b"\n")
        deadline = time.monotonic() + 60  # a wait for the daemon's next housekeeping pass, not a timing claim
        while not (data_dir / "logs" / "service.log.1").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (data_dir / "logs" / "service.log.1").exists()
        assert log.stat().st_size < 64 << 10 and oct(log.stat().st_mode & 0o777) == oct(0o600)
        status = run_cli("status", env=env)
        assert status.returncode == 0, status.stderr
    finally:
        run_cli("stop", env=env)
