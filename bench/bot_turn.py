"""Bot turn latency on the real Claude Agent SDK: no hooks vs the `init --bot` command hooks vs
leanctx's in-process callbacks and tools (leanctx.bot.claude_sdk_options), in one run.

Three `ClaudeSDKClient`s (one per mode) against the scripted fake Anthropic server on 127.0.0.1,
in a throwaway HOME; their text-only turns are interleaved round-robin so machine noise hits every
mode alike. Prints the median and p95 of turns 2..N per mode and each ratio to no hooks (issue
11's target: in-process <= 1.3x no hooks). Needs `pip install -e '.[sdk]'`.

Usage: python bench/bot_turn.py [--turns N] [--cli PATH]   (default: the SDK's bundled CLI)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET = 1.3


def options(mode: str, home: Path, cli: str | None):
    from claude_agent_sdk import ClaudeAgentOptions

    from leanctx.bot.claude_sdk import claude_sdk_options

    cwd = home / "cwd" / mode
    cwd.mkdir(parents=True, exist_ok=True)
    common = {"cwd": str(cwd), "cli_path": cli}
    user = f"bench-{mode}"
    if mode == "none":
        return ClaudeAgentOptions(**common, setting_sources=[])
    if mode == "command":
        return ClaudeAgentOptions(**common, setting_sources=["user"], env={"CKS_ACTIVE_USER": user})
    return ClaudeAgentOptions(**common, **claude_sdk_options(user))


async def turn(client, text: str) -> float:
    from claude_agent_sdk import ResultMessage

    start = time.perf_counter()
    await client.query(text)
    async for m in client.receive_response():
        if isinstance(m, ResultMessage):
            break
    return time.perf_counter() - start


async def run(turns: int, cli: str | None, home: Path) -> dict:
    from claude_agent_sdk import ClaudeSDKClient

    modes = ("none", "command", "in-process")
    clients = {m: ClaudeSDKClient(options(m, home, cli)) for m in modes}
    for c in clients.values():
        await c.connect()
    times: dict = {m: [] for m in modes}
    try:
        for i in range(turns):
            for m in modes:
                times[m].append(await turn(clients[m], f"hello {i}"))
    finally:
        for c in clients.values():
            await c.disconnect()
    return {m: t[1:] for m, t in times.items()}  # turn 1 pays start-up costs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--cli")
    a = ap.parse_args(argv)
    from tests.e2e import hostcli
    from tests.e2e.fake_anthropic import FakeAnthropic

    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic(script=[]) as srv:
        home = hostcli.make_home(tmp).home
        env = hostcli.claude_env(home, srv.base_url, {"LEANCTX_HOME": str(home / "leanctx-data")})
        subprocess.run([sys.executable, "-m", "leanctx", "init", "--agent", "claude", "--bot", "--no-mcp"],
                       env=env, check=True, capture_output=True)
        os.environ.clear()
        os.environ.update(env)  # the SDK passes this process's env to the CLI
        times = asyncio.run(run(a.turns, a.cli, home))
        from leanctx.state import api

        silent = [m for m in ("command", "in-process") if not api.show(f"bench-{m}")["recent_turns"]]
    if silent:  # a mode whose hooks never ran measured nothing
        print(f"bot_turn: no turn was recorded in mode(s) {', '.join(silent)}: its hooks did not run", file=sys.stderr)
        return 1
    floor = statistics.median(times["none"])
    print(f"bot turn latency, {a.turns - 1} turns per mode (turns 2..{a.turns}), CLI: {a.cli or 'bundled'}")
    for mode, t in times.items():
        p50, p95 = statistics.median(t), sorted(t)[max(0, round(0.95 * len(t)) - 1)]
        print(f"  {mode:<11} p50 {p50 * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms  {p50 / floor:5.2f}x no hooks")
    ratio = statistics.median(times["in-process"]) / floor
    print(f"in-process target <= {TARGET}x no hooks: {'met' if ratio <= TARGET else 'NOT met'} ({ratio:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
