"""End to end: opening a hostile repository in a real host runs none of its code.

The project folder a host is started in plants a `leanctx/` package, modules named like the
standard library's, `site.py`/`sitecustomize.py`, and a `.git/config` whose fsmonitor and clean
filter are programs (tests/hostile_repo.py). With leanctx installed at user level, the real
Claude Code lists our MCP server as connected from there, and a real Claude Code session and a
real Gemini CLI session there run our hooks and call ctx_read through our server: the tool
answers, and nothing of the repository ran as part of leanctx (git's programs record who ran
them: the hosts' own `git status` is theirs, not ours).
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests import hostile_repo, second_account
from tests.e2e import hostcli
from tests.e2e.conftest import CLI_TIMEOUT
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use
from tests.e2e.fake_gemini_chat import call
from tests.e2e.settings_home import wire
from tests.e2e.test_cache_e2e import tool_results
from tests.e2e.test_gemini_e2e import USER_SETTINGS, gemini_cli, run_gemini  # noqa: F401 (fixture)
from tests.second_account import OTHER

pytestmark = pytest.mark.e2e

CONTENT = "".join(f"line {i} of the project's notes\n" for i in range(60))


@pytest.fixture
def hostile(host_home, lean):
    yield host_home
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def plant(hh) -> None:
    """Turn the project into the hostile repository (after init: the test harness's own `leanctx`
    runs as `python -m leanctx` in the project folder)."""
    (hh.proj / "notes.txt").write_text(CONTENT)
    hostile_repo.make(hh.proj, hh.root / "markers")


def ours(hh) -> list[str]:
    return hostile_repo.ran_by_leanctx(hh.root / "markers")


@pytest.mark.parametrize("owner", ["ours", "another account"])
def test_claude_mcp_list_in_a_hostile_repository(claude_cli, hostile, lean, owner):
    """Also a repository another local account wrote (a shared checkout): nothing of it runs either."""
    lean.run("init", "--agent", "claude")
    plant(hostile)
    if owner == "another account":
        second_account.require()
        subprocess.run(["chown", "-R", f"{OTHER}:{OTHER}", str(hostile.proj)], check=True)
    env = hostcli.claude_env(hostile.home, "http://127.0.0.1:9")
    cp = subprocess.run([claude_cli, "mcp", "list"], cwd=hostile.proj, env=env, capture_output=True, text=True,
                        timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    line = next((ln for ln in cp.stdout.splitlines() if ln.startswith("leanctx")), "")
    assert "leanctx-hook mcp" in line and "Connected" in line, cp.stdout
    assert ours(hostile) == [] and "leanctx" not in hostile_repo.ran(hostile.root / "markers")


def test_a_claude_session_in_a_hostile_repository(claude_cli, hostile, lean, run_host):
    lean.run("init", "--agent", "claude")
    plant(hostile)
    read = "mcp__leanctx__ctx_read"
    with FakeAnthropic(script=[tool_use(read, {"path": "notes.txt"}), "done"]) as srv:
        env = hostcli.claude_env(hostile.home, srv.base_url)
        cp, _ = run_host([claude_cli, "-p", "read notes.txt", "--allowedTools", read], cwd=hostile.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        bodies = srv.main_requests
    assert tool_results(bodies[1])[0].startswith(CONTENT[:40]), tool_results(bodies[1])
    record = lean.only_record("claude")  # the hooks ran (SessionStart ... Stop) and published
    assert record["cwd"] == str(hostile.proj)
    lean.assert_no_hook_errors()
    assert ours(hostile) == [], [(m, (hostile.root / "markers" / m).read_text()) for m in ours(hostile)]


def test_a_gemini_session_in_a_hostile_repository(gemini_cli, hostile, lean, run_host):  # noqa: F811
    wire(hostile, lean, "gemini", USER_SETTINGS)
    plant(hostile)
    _sid, results = run_gemini(gemini_cli, hostile, lean, run_host, [call("mcp_leanctx_ctx_read", {"path": "notes.txt"}), "done"],
                               prompt="read notes.txt")
    assert results and CONTENT in results[0][1], results  # Gemini wraps an MCP answer in <untrusted_context>
    assert lean.only_record("gemini")["cwd"] == str(hostile.proj)
    assert ours(hostile) == [], [(m, (hostile.root / "markers" / m).read_text()) for m in ours(hostile)]
