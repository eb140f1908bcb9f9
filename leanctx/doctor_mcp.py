"""Doctor's MCP checks: the `leanctx` server is registered as init wrote it, and answers.

The round trip starts the registered command exactly as the host would (stdio, no shell) in a
scratch project with a scratch data dir, in-process mode (`LEANCTX_DAEMON=0`, so no daemon is
left behind) and an explicit scope, then reads one file twice through `ctx_read`: the first read
must return the file, the second the `[unchanged]` stub. That proves the whole chain: the entry,
the interpreter, the SDK, scope resolution and the read cache. Then `ctx_stats` says whether the
server could hook the SDK's private internals (fast path, per-call identity): an SDK that renamed
them still serves reads, so only this check notices.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import uuid
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import mcpreg
from leanctx.installer.files import ConfigError

ROUND_TRIP_TIMEOUT_S = 60.0


def checks(agent: Agent, home: Path, data_dir: Path, project: Path | None = None) -> list[dict]:
    from leanctx.doctor import init_fix

    fix = init_fix(agent, project)
    if agent.mcp_config(home, project) is None:
        return [{"name": "mcp server", "status": "info", "fix": None,
                 "detail": f"{agent.display_name} reads MCP servers only from its user-level settings: run leanctx doctor without --project"}]
    try:
        name = mcpreg.chosen_name(agent, home, data_dir, project)  # `init --mcp-name` is remembered
        entry = mcpreg.registered(agent, home, project, name)
    except ConfigError as exc:
        return [{"name": "mcp server", "status": "fail", "detail": str(exc), "fix": "fix the file's syntax"}]
    from leanctx.doctor import path_check
    from leanctx.installer.install import display

    path = display(agent.mcp_config(home, project)[0], home)
    if entry is None:
        hidden = [display(p, home) for p in mcpreg.recorded_elsewhere(agent, home, data_dir, project)]
        if hidden:  # e.g. CodeBuddy: the user created a file it reads before the one init wrote
            return [{"name": "mcp server", "status": "fail",
                     "detail": f"leanctx is registered in {', '.join(hidden)}, but {agent.display_name} reads its servers from {path} only",
                     "fix": fix}]
        return [{"name": "mcp server", "status": "info", "detail": f"leanctx is not registered in {path} (init --no-mcp?)", "fix": fix}]
    if not mcpreg.is_ours(entry):
        return [{"name": "mcp server", "status": "fail", "detail": f"the server named {name!r} in {path} is not leanctx's: {entry}",
                 "fix": f"rename yours, or: leanctx init --agent {agent.name} --mcp-name NAME"}]
    want = mcpreg.wanted_entry(agent, data_dir, project)
    if entry != want:
        return [{"name": "mcp server", "status": "fail", "detail": f"the entry in {path} differs from this installation's: {entry}", "fix": fix}]
    command, args, env = mcpreg.launch(entry)
    missing = path_check([str(command)], path)
    if missing:
        return [missing]
    out = [{"name": "mcp server", "status": "ok", "detail": f"registered as {name!r} in {path}", "fix": None}]
    out.extend(round_trip(str(command), list(args or []), env or {}))
    return out


def round_trip(command: str, args: list[str], entry_env: dict) -> list[dict]:
    started = time.perf_counter()
    try:
        first, second, stats = asyncio.run(asyncio.wait_for(_two_reads(command, args, entry_env), ROUND_TRIP_TIMEOUT_S))
    except Exception as exc:  # noqa: BLE001 - whatever broke, say it
        return [{"name": "mcp round trip", "status": "fail", "detail": f"{type(exc).__name__}: {exc}"[:300],
                 "fix": "run `leanctx mcp` by hand to see its error; reinstall leanctx if imports fail"}]
    ms = (time.perf_counter() - started) * 1000
    if first != _CONTENT or not second.startswith("[unchanged]"):
        return [{"name": "mcp round trip", "status": "fail", "detail": f"unexpected answers: {first[:60]!r} / {second[:60]!r}",
                 "fix": "leanctx doctor --fix"}]
    return [{"name": "mcp round trip", "status": "ok", "detail": f"ctx_read returned the file, then the [unchanged] stub ({ms:.0f} ms)",
             "fix": None, "ms": round(ms, 1)}, sdk_check(stats)]


def sdk_check(stats: str) -> dict:
    """The server's own account (ctx_stats "sdk") of the SDK internals it could hook."""
    from leanctx.cache.mcpserver import SDK_UNAVAILABLE

    try:
        sdk = json.loads(stats).get("sdk")
    except (ValueError, AttributeError):
        sdk = None
    if not isinstance(sdk, dict):
        return {"name": "mcp sdk internals", "status": "warn", "detail": f"ctx_stats did not report them: {stats[:80]!r}",
                "fix": "reinstall leanctx"}
    if sdk.get("fast_path") is True:
        return {"name": "mcp sdk internals", "status": "ok",
                "detail": f"mcp {sdk.get('mcp_version')}: fast path and per-call (subagent) identity on", "fix": None}
    return {"name": "mcp sdk internals", "status": "warn", "detail": SDK_UNAVAILABLE.format(version=sdk.get("mcp_version")),
            "fix": "reinstall leanctx so pip picks the mcp version it declares (mcp>=2.3,<2.4)"}


_CONTENT = "".join(f"leanctx doctor line {i}\n" for i in range(1, 41))


async def _two_reads(command: str, args: list[str], entry_env: dict) -> tuple[str, str, str]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    with tempfile.TemporaryDirectory(prefix="leanctx-doctor-mcp-") as scratch:
        project = Path(scratch) / "proj"
        project.mkdir()
        (project / "doctor.txt").write_text(_CONTENT)
        env = dict(os.environ, **entry_env)
        env.update(LEANCTX_HOME=str(Path(scratch) / "data"), LEANCTX_DAEMON="0",
                   LEANCTX_SCOPE=f"doctor-{uuid.uuid4().hex[:12]}")
        params = StdioServerParameters(command=command, args=args, env=env, cwd=str(project))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                answers = []
                for tool, args in (("ctx_read", {"path": "doctor.txt"}), ("ctx_read", {"path": "doctor.txt"}), ("ctx_stats", {})):
                    result = await session.call_tool(tool, args)
                    answers.append("".join(c.text for c in result.content if getattr(c, "type", None) == "text"))
        return answers[0], answers[1], answers[2]
