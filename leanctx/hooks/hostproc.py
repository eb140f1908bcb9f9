"""Which host process fired this hook.

A CLI host (Claude Code, `codex exec`) runs one process per session and spawns both its hooks and its
MCP servers, so the host's pid (plus its start time, against pid reuse) lets the cache service
match an MCP connection to the hook records of the same session. Hooks run under `sh -c`, so we
walk up past shells. Linux reads /proc.

Where /proc cannot be read (macOS, a locked-down /proc) we name no host at all: our parent is then
the `sh` that ran the hook, not the host, and a pid without its start time can be reused by an
unrelated process, so a pid alone would match the wrong session's records (a wrong stub). No host
means the resolver cannot match this process by host (it falls back to the session id the host
put in the environment, or to no stub); it never guesses.
"""

from __future__ import annotations

import os

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "busybox", "env", "leanctx-hook", "timeout"})
# OpenClaw 2026.9.6 starts its MCP servers through a process supervisor of its own: the gateway's
# spawn broker (`dist/process/spawn-broker/worker.js`) runs a relay (`supervisor/service-child-
# relay.js`), which runs an anchor (`supervisor/service-child-group-anchor.js`), which runs the
# server; its plugins' hooks are the gateway's own children. These node processes (named
# `MainThread` or `node`) are walked past, so a server and the hooks name the same host: the gateway.
_RELAY_NAMES = frozenset({"MainThread", "node"})
_RELAY_SCRIPTS = ("/openclaw/dist/process/spawn-broker/worker.js", "/openclaw/dist/process/supervisor/service-child-relay.js",
                  "/openclaw/dist/process/supervisor/service-child-group-anchor.js")
# Amp 0.0.1790142911 runs each plugin in a process of its own, its binary again under Bun:
# `amp run <tmp>/amp-plugin-runtime-XXXXXX/plugin-runtime.ts <plugin>` (seen in /proc). Our plugin's
# hooks are that process's children, the MCP servers the Amp process's own: the runtime is walked
# past, so both name the Amp process.
_AMP_RUNTIME = "plugin-runtime.ts"
_AMP_RUNTIME_DIR = "amp-plugin-runtime-"


def process_stat(pid: int) -> tuple[str, int, int] | None:
    """(command name, parent pid, start time in clock ticks) from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    open_paren, close_paren = raw.find("("), raw.rfind(")")
    if open_paren < 0 or close_paren < 0:
        return None
    name = raw[open_paren + 1 : close_paren]
    fields = raw[close_paren + 2 :].split()
    try:
        return name, int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def host_process(first: int | None = None) -> dict:
    """{"pid", "name", "start_ticks"} of the nearest ancestor that is not a shell, looking from
    `first` (default: our parent) upwards. The cache daemon passes another process's parent here
    to find the host of the MCP server at the other end of a socket."""
    pid = os.getppid() if first is None else first
    for _ in range(8):
        info = process_stat(pid)
        if info is None:  # no /proc, or it exited: never a bare pid (see the module note)
            return {"pid": None, "name": None, "start_ticks": None}
        name, ppid, start = info
        if (name not in _SHELLS and not (name in _RELAY_NAMES and _relay(pid)) and not (name.startswith("amp") and _amp_runtime(pid))) or ppid <= 1:
            return {"pid": pid, "name": name, "start_ticks": start}
        pid = ppid
    return {"pid": None, "name": None, "start_ticks": None}  # shells eight deep: the host is further up


def _argv(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(4096).split(b"\0")
    except OSError:
        return []


def _amp_runtime(pid: int) -> bool:
    """Is this one of Amp's plugin runtimes (`amp run …/amp-plugin-runtime-*/plugin-runtime.ts …`)?"""
    argv = _argv(pid)
    if len(argv) < 3 or argv[1] != b"run":
        return False
    script = argv[2].decode("utf-8", "replace").replace("\\", "/").split("/")
    return len(script) >= 2 and script[-1] == _AMP_RUNTIME and script[-2].startswith(_AMP_RUNTIME_DIR)


def _relay(pid: int) -> bool:
    """Is this node process one of OpenClaw's supervisor links (its script, argv[1])?"""
    argv = _argv(pid)
    if not argv:
        return False
    script = argv[1].decode("utf-8", "replace").replace("\\", "/") if len(argv) > 1 else ""
    return script.endswith(_RELAY_SCRIPTS)
