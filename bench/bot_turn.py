"""Bot turn latency on the real Claude Agent SDK: no hooks vs the `init --bot` command hooks vs
leanctx's in-process callbacks and tools, in one run.

One `ClaudeSDKClient` per mode against the scripted fake Anthropic server on 127.0.0.1, in a
throwaway HOME; their text-only turns are interleaved round-robin, the order rotating each round,
so machine noise hits every mode alike. A turn is timed from `query` to the ResultMessage (what
the user waits for). Modes: `none` (setting_sources=[]), `command` (`init --bot --no-mcp` hooks), `in-process`
(leanctx.bot.claude_sdk_binding: one UserPromptSubmit callback; the reply is recorded by
`delivered()` once the user has it, timed apart as `delivered`), and `in-process-stop`
(claude_sdk_options: the reply recorded in a Stop callback, inside the turn). Prints the median and
p95 of turns 2..N per mode and each ratio to no hooks (target: in-process <= 1.3x).
Needs `pip install -e '.[sdk]'`.

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
MODES = ("none", "command", "in-process", "in-process-stop")


def options(mode: str, home: Path, cli: str | None):
    from claude_agent_sdk import ClaudeAgentOptions

    from leanctx.bot.claude_sdk import claude_sdk_binding, claude_sdk_options

    cwd = home / "cwd" / mode
    cwd.mkdir(parents=True, exist_ok=True)
    common = {"cwd": str(cwd), "cli_path": cli}
    user = f"bench-{mode}"
    if mode == "none":
        return ClaudeAgentOptions(**common, setting_sources=[]), None
    if mode == "command":
        return ClaudeAgentOptions(**common, setting_sources=["user"], env={"CKS_ACTIVE_USER": user}), None
    if mode == "in-process-stop":
        return ClaudeAgentOptions(**common, **claude_sdk_options(user)), None
    binding = claude_sdk_binding(user)
    return ClaudeAgentOptions(**common, **binding.options), binding


async def turn(client, binding, text: str, msg_id: str) -> tuple[float, float]:
    """(query to ResultMessage, the binding's delivered() after it) in seconds."""
    from claude_agent_sdk import AssistantMessage, ResultMessage, TextBlock

    start = time.perf_counter()
    if binding:
        await binding.query(client, text, message_id=msg_id)
    else:
        await client.query(text)
    parts = []
    async for m in client.receive_response():
        if isinstance(m, AssistantMessage):
            parts += [b.text for b in m.content if isinstance(b, TextBlock)]
        elif isinstance(m, ResultMessage):
            break
    took = time.perf_counter() - start
    if not binding:
        return took, 0.0
    start = time.perf_counter()
    await binding.delivered("\n".join(parts))
    return took, time.perf_counter() - start


async def run(turns: int, cli: str | None, home: Path) -> dict:
    from claude_agent_sdk import ClaudeSDKClient

    built = {m: options(m, home, cli) for m in MODES}
    clients = {m: ClaudeSDKClient(opts) for m, (opts, _) in built.items()}
    for c in clients.values():
        await c.connect()
    times: dict = {m: [] for m in MODES + ("delivered",)}
    try:
        for i in range(turns):
            for m in MODES[i % len(MODES):] + MODES[:i % len(MODES)]:  # rotated: no mode always follows another
                took, delivered = await turn(clients[m], built[m][1], f"hello {i}", f"m{i}")
                times[m].append(took)
                if m == "in-process":
                    times["delivered"].append(delivered)
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

        silent = [m for m in MODES[1:] if len(api.show(f"bench-{m}")["recent_turns"]) < 2]
    if silent:  # a mode whose hooks never ran measured nothing
        print(f"bot_turn: no turn was recorded in mode(s) {', '.join(silent)}: its hooks did not run", file=sys.stderr)
        return 1
    floor = statistics.median(times["none"])
    print(f"bot turn latency, {a.turns - 1} turns per mode (turns 2..{a.turns}), CLI: {a.cli or 'bundled'}")
    for mode, t in times.items():
        p50, p95 = statistics.median(t), sorted(t)[max(0, round(0.95 * len(t)) - 1)]
        ratio = f"{p50 / floor:5.2f}x no hooks" if mode != "delivered" else "after the reply, off the turn"
        print(f"  {mode:<15} p50 {p50 * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms  {ratio}")
    ratio = statistics.median(times["in-process"]) / floor
    print(f"in-process target <= {TARGET}x no hooks: {'met' if ratio <= TARGET else 'NOT met'} ({ratio:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
