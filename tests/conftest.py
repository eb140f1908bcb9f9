"""Shared fixtures: every test runs with its own HOME and data dir (real files, no mocks)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Recorded payloads from the real CLIs live beside the repo in the workplace; a copy ships in
# tests/fixtures/payloads so the suite runs from a clean clone.
PAYLOADS = REPO / "tests" / "fixtures" / "payloads"

HOST_ENV = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "CODEBUDDY_CONFIG_DIR", "XDG_DATA_HOME", "LEANCTX_DISABLED",
            "CURSOR_TRANSCRIPT_PATH", "CLAUDE_CODE_SESSION_ID", "LEANCTX_HOME")


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
