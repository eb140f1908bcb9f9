"""Shared fixtures: every test runs with its own HOME and data dir (real files, no mocks)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Recorded payloads from the real CLIs ship in tests/fixtures/payloads, so the suite runs from a
# clean clone.
PAYLOADS = REPO / "tests" / "fixtures" / "payloads"

HOST_ENV = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "CODEBUDDY_CONFIG_DIR", "FACTORY_HOME_OVERRIDE", "XDG_DATA_HOME", "XDG_CONFIG_HOME",
            "LEANCTX_DISABLED", "CURSOR_TRANSCRIPT_PATH", "CLAUDE_CODE_SESSION_ID", "LEANCTX_HOME", "GEMINI_CLI_HOME", "QWEN_HOME",
            "COPILOT_HOME", "PI_CODING_AGENT_DIR", "CRUSH_GLOBAL_CONFIG", "AMP_SETTINGS_FILE")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME with a data dir inside it; host config dirs are created by each test."""
    h = tmp_path / "home"
    h.mkdir()
    for name in HOST_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("LEANCTX_HOME", str(h / ".local" / "share" / "leanctx"))
    return h


@pytest.fixture
def data_dir(home: Path) -> Path:
    return Path(os.environ["LEANCTX_HOME"])


def not_a_folder(path: Path, kind: str = "file") -> Path:
    """Put a FIFO or a plain file where a folder (a data dir, CKS_HOME) is expected."""
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_text("x")
    return path


def payload(host: str, event: str) -> dict:
    return json.loads((PAYLOADS / host / f"{event}.json").read_text())


def run_cli(*args: str, input: str | None = None, env: dict | None = None, cwd: Path | None = None):
    """Run the real `leanctx` command in a subprocess (what a user types)."""
    import subprocess

    return subprocess.run(
        [sys.executable, "-m", "leanctx", *args],
        capture_output=True,
        text=True,
        input=input,
        env=env or dict(os.environ),
        cwd=cwd,
        timeout=120,
    )


@pytest.fixture
def immutable():
    """Take write permission away from a file or folder in a way that binds even for root (CI runs
    as root here): chmod, plus chattr +i as root; undone after the test."""
    import subprocess

    made: list[Path] = []

    def make(path: Path) -> None:
        path.chmod(0o555 if path.is_dir() else 0o444)
        if os.geteuid() == 0:
            if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
                pytest.skip("root without chattr: write permission cannot be taken away")
            made.append(path)

    yield make
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        path.chmod(0o755 if path.is_dir() else 0o644)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Install the pinned host CLIs (about 3 GB, minutes) before the first test when end-to-end
    tests were collected and some are missing, saying on the terminal what is being installed and
    how far along: inside a test fixture the same install would run silently, captured."""
    e2e = REPO / "tests" / "e2e"
    if os.environ.get("LEANCTX_HOST_CLI_DIR") or session.config.option.collectonly:
        return
    if not any(e2e in Path(str(item.path)).parents for item in session.items):
        return
    import shutil

    from tests.e2e import install_clis

    if not install_clis.missing_steps() or shutil.which("npm") is None:
        return  # nothing to do, or the e2e fixtures say why they cannot run
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    capture = session.config.pluginmanager.get_plugin("capturemanager")

    def say(line: str) -> None:
        if reporter is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(line)
            reporter.flush()

    problem = install_clis.ensure(say=say)
    if problem:
        say("leanctx e2e: the host CLIs could not be installed (above); the end-to-end tests that need them "
            "will skip, or fail under LEANCTX_REQUIRE_E2E")

