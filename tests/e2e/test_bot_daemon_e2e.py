"""End to end: the read-cache daemon lives exactly as long as a bot's sessions. A bot on the real
Claude Agent SDK (its bundled Claude Code) with `init --agent claude --bot` (MCP server
registered) answers one message and then sits quiet: its MCP server is the daemon's client, so the
daemon stays. kill -9 the bot: its CLI and MCP server go with it, and the daemon exits after its (test-short) idle time. Before, every
SDK bot left a daemon running for good (23 in one test run).
"""
from __future__ import annotations

import json

import psutil
import pytest

from tests.cache import test_service_support as S
from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic
from tests.e2e.test_sdk_bot_e2e import FIRST, BotProcess, sdk_installed  # noqa: F401 (fixture)

pytestmark = pytest.mark.e2e

IDLE_MIN = "0.02"  # 1.2 s, noticed at the daemon's next housekeeping round
GENEROUS_S = 180.0


def wait_until(predicate, timeout: float = GENEROUS_S) -> bool:
    return S.wait_until(predicate, timeout, step=0.2)


def status(lean) -> dict:
    cp = lean.run("status", "--json", ok=False)
    return json.loads(cp.stdout) if cp.stdout.strip() else {}


def test_a_killed_sdk_bot_leaves_no_daemon(host_home, lean, sdk_installed):  # noqa: F811
    hh = host_home
    lean.run("init", "--agent", "claude", "--bot")
    with FakeAnthropic(script=["Welcome! How can I help?"]) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"PYTHONPATH": str(hostcli.REPO_ROOT), **lean.host_env,
                                                          "LEANCTX_IDLE_EXIT": IDLE_MIN})
        bot = BotProcess(hh.root / "spool", env, None, mode="settings")
        try:
            bot.start()
            bot.send("001", FIRST)
            assert bot.wait_replies(1)[0]["reply"] == "Welcome! How can I help?"
            # the bot's MCP server (under its Claude Code) is the daemon's client while the bot lives
            assert wait_until(lambda: len(status(lean).get("clients") or []) == 1), status(lean)
            report = status(lean)
            daemon = psutil.Process(report["pid"])
            (server,) = report["clients"]
            assert server["verified"] is True
            mcp = psutil.Process(server["pid"])
            assert any(p.pid == bot.proc.pid for p in mcp.parents()), "the client is not the bot's MCP server"
            since = report["uptime_s"]
            # quiet for many idle periods: the daemon stays under the live bot
            assert wait_until(lambda: (status(lean).get("uptime_s") or 0) >= since + 6 * 1.2)
            assert status(lean).get("pid") == daemon.pid
            bot.kill9()
            assert wait_until(lambda: not daemon.is_running() or daemon.status() == psutil.STATUS_ZOMBIE), status(lean)
            assert wait_until(lambda: not mcp.is_running() or mcp.status() == psutil.STATUS_ZOMBIE)
        finally:
            bot.stop()
    log = (lean.data / "logs" / "service.log").read_text()
    assert "no client and no request for 0.02 min (LEANCTX_IDLE_EXIT): shutting down" in log
    assert status(lean) == {"running": False, "socket": str(lean.data / "leanctx.sock"), "stale_files": False}
