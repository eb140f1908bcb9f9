"""Shared fixtures for the end-to-end tests that drive real host CLIs offline.

Makes ``from tests.e2e import hostcli`` importable regardless of pytest's import mode, and offers:

* ``host_home``  -> hostcli.HostHome under tmp_path (home/ with .claude/.codex, proj/a.txt)
* ``claude_cli`` / ``codex_cli`` -> path of the CLI, or the test is skipped
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from tests.e2e import hostcli  # noqa: E402


@pytest.fixture
def host_home(tmp_path):
    return hostcli.make_home(tmp_path)


@pytest.fixture
def claude_cli():
    return hostcli.require_cli("claude")


@pytest.fixture
def codex_cli():
    return hostcli.require_cli("codex")
