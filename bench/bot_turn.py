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

`--openclaw`: the OpenClaw row instead. Two real OpenClaw gateways (npm openclaw, Node 24, as
pinned in tests/e2e/install_clis.py), offline in network namespaces of their own, each with the
fake Telegram Bot API and the echoing fake model of the end-to-end tests: one without leanctx,
one after `leanctx init --agent openclaw --bot`. A turn is timed from the person's message reaching
the fake Telegram to the bot's reply arriving there (what the person waits for); the two
gateways take turns, the order alternating each round. Target: <= 1.3x OpenClaw without leanctx.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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


def openclaw(turns: int) -> int:
    """The OpenClaw row: per-turn time with leanctx's plugin beside the same gateway without it."""
    from tests.e2e.openclaw_harness import OpenClawHarness, problem

    why = problem()
    if why:
        print(f"bot_turn --openclaw: OpenClaw cannot run here: {why}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        gws = {"none": OpenClawHarness(Path(tmp) / "none"), "leanctx": OpenClawHarness(Path(tmp) / "leanctx")}
        lc = gws["leanctx"]
        subprocess.run([sys.executable, "-m", "leanctx", "init", "--agent", "openclaw", "--bot"], env=lc.env,
                       check=True, capture_output=True)
        times: dict = {m: [] for m in gws}
        try:
            for h in gws.values():
                h.start()
            user = lc.users[0]
            for i in range(turns):
                order = list(gws) if i % 2 == 0 else list(gws)[::-1]
                for mode in order:
                    h = gws[mode]
                    start = time.perf_counter()
                    h.send(user, f"hello {i}")
                    reply = h.reply(user, timeout=120)
                    times[mode].append(time.perf_counter() - start)
                    if f"hello {i}" not in reply:
                        print(f"bot_turn --openclaw: {mode} answered {reply!r} to hello {i}", file=sys.stderr)
                        return 1
                    h.settle()
            kept = subprocess.run([sys.executable, "-m", "leanctx", "state", "list", "--json"],
                                  env=dict(lc.env, CKS_HOME=str(lc.home / ".cks")), capture_output=True, text=True)
            recorded = sum(e.get("turn_count", 0) for e in json.loads(kept.stdout or "[]"))
        finally:
            for h in gws.values():
                h.stop()
    if recorded < 2 * turns:
        print(f"bot_turn --openclaw: leanctx recorded {recorded} turns of {2 * turns}: its plugin did not run", file=sys.stderr)
        return 1
    base = {m: t[1:] for m, t in times.items()}  # turn 1 pays start-up costs
    floor = statistics.median(base["none"])
    print(f"OpenClaw bot turn (Telegram message to reply), {turns - 1} turns per gateway (turns 2..{turns}), "
          f"leanctx recorded {recorded} turns")
    for mode, t in base.items():
        p50, p95 = statistics.median(t), sorted(t)[max(0, round(0.95 * len(t)) - 1)]
        print(f"  {mode:<8} p50 {p50 * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms  {p50 / floor:5.2f}x OpenClaw alone  "
              f"({(p50 - floor) * 1000:+.1f} ms)")
    ratio = statistics.median(base["leanctx"]) / floor
    print(f"target <= {TARGET}x OpenClaw alone: {'met' if ratio <= TARGET else 'NOT met'} ({ratio:.2f}x)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=12)
    ap.add_argument("--cli")
    ap.add_argument("--openclaw", action="store_true", help="the OpenClaw row: the real gateway with and without leanctx")
    a = ap.parse_args(argv)
    if a.openclaw:
        return openclaw(a.turns)
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
