"""End to end with the real Claude Code: a data dir another local account owns (a real second
uid) named by the host's LEANCTX_HOME is never used. Every leanctx hook fails open (the turn runs
as without leanctx), nothing is written there and nothing planted there reaches the model. (The
MCP entry init wrote names its own data dir, so the server keeps serving from that one.)"""
from __future__ import annotations

import json
import os

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic
from tests.e2e.test_claude_e2e import HOOK_TEXT_MARKERS, claude_argv

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(
    os.geteuid() != 0 and not os.environ.get("LEANCTX_REQUIRE_E2E"), reason="needs root to give a folder to a second uid")]
OTHER = 4242


def _tree(folder) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"") for p in sorted(folder.rglob("*"))}


def test_claude_with_another_accounts_data_dir_runs_as_without_leanctx(claude_cli, host_home, lean, run_host):
    hh = host_home
    lean.run("init", "--agent", "claude")
    planted = hh.home / "planted"
    planted.mkdir(mode=0o755)
    (planted / "read_gate.json").write_text(json.dumps({"port": 1, "secret": "PLANTED-SECRET"}))
    (planted / "conversations").mkdir(mode=0o755)
    for p in (planted, planted / "read_gate.json", planted / "conversations"):
        os.chown(p, OTHER, OTHER)
    before = _tree(planted)
    with FakeAnthropic(script=["All done."]) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"LEANCTX_HOME": str(planted)})
        cp, _ = run_host(claude_argv(claude_cli, "say done"), cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == "All done."
        bodies = srv.all_text()
    assert srv.main_requests
    for marker in HOOK_TEXT_MARKERS:
        assert marker not in bodies
    assert "PLANTED-SECRET" not in bodies
    assert _tree(planted) == before
    assert not (lean.data / "conversations").exists()  # nor was our own data dir used instead
