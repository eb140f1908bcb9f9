"""The hook fast path: what runs inside the host on every event.

`run()` is what the wrapper script calls (`python -I -S`, standard library only). It must never
break the host: every path exits 0, prints only what the host accepts for that event, and logs
problems to `<data dir>/logs/hooks.log` instead of stdout/stderr. Nothing here may import
click, jsonschema, tiktoken, psutil or mcp (a test pins that with `python -X importtime`).
"""

from __future__ import annotations

import os
import sys
import time

from leanctx import fastjson

LOG_MAX_BYTES = 1 << 20


def _data_dir() -> str:
    """The wrapper always exports LEANCTX_HOME; only a manual `leanctx hook` needs platformdirs."""
    env = os.environ.get("LEANCTX_HOME")
    if env:
        return os.path.expanduser(env)
    from leanctx.paths import data_dir

    return str(data_dir())


def log(data_dir: str | None, agent: str, event: str, message: str) -> None:
    """Append one line to the hook log (0600, rotated at 1 MiB); never raises. A data dir another
    account could plant files in is never written: the line goes to stderr instead."""
    try:
        from leanctx import logfile, safedir

        base = data_dir or _data_dir()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{stamp} pid={os.getpid()} {agent} {event}: {message}".replace("\n", " ")[:2000]
        if safedir.problem(base):
            _stderr_line(f"leanctx: {agent} {event}: {message}")
            return
        logfile.append(os.path.join(base, "logs", "hooks.log"), line + "\n", LOG_MAX_BYTES)
    except Exception:  # noqa: BLE001 - the log is best effort; the host must not notice
        pass


def _stderr_line(text: str) -> None:
    """One line on stderr, unless this host takes stderr as the hook's answer (the wrapper says so)."""
    if os.environ.get("LEANCTX_QUIET_STDERR"):
        return
    try:
        sys.stderr.write(" ".join(text.split())[:2000] + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


# The flags a wired command may carry, and what each adds (also `leanctx hook --help`).
FLAGS = {
    "--bot": "always-on bot profile: record prompts and replies in conversation-state, hand the thread back at session start",
    "--guard": "multi-user guard on the pre-tool event: deny tool calls that touch another user's folder",
    "--read-gate": "on the pre-tool event narrowed to ctx_read: note who is about to read",
    "--builtin-read": "the host's own file reader under the read cache's rules: refuse an unchanged re-read with the "
                      "cache's text before it runs, credit what it delivered after",
}


def handle(agent_name: str, event_name: str, raw: bytes, data_dir: str, flags: tuple[str, ...] = ()) -> str:
    """Process one payload; returns what to print. Raises on bad input (the caller logs).

    `--bot` (the always-on bot profile) also records turns in conversation-state and returns the
    rehydrated thread at session start; `--guard` turns a pre-tool event into the multi-user guard."""
    from leanctx import agents
    from leanctx.agents.base import POST_TOOL, PRE_COMPACT, SESSION_START
    from leanctx.hooks.publish import publish

    agent = agents.get(agent_name)
    unknown = [f for f in flags if f not in FLAGS]
    if unknown:
        raise ValueError(f"unknown hook flags {unknown}")
    spec = agent.event(event_name)
    builtin = "--builtin-read" in flags
    wired = {s.name for s, _ in agent.profile_events(bot="--bot" in flags, guard="--guard" in flags, read_gate="--read-gate" in flags or builtin,
                                                      builtin_read=builtin)}
    if spec is None or event_name not in wired:
        raise ValueError(f"event {event_name!r} is not wired for {agent_name} {' '.join(flags)}".rstrip())
    text = raw.decode("utf-8")
    if text.startswith("\ufeff"):  # Cursor on Windows sends a BOM
        text = text[1:]
    if not text.strip():
        raise ValueError("empty stdin")
    payload = fastjson.loads(text)
    if not isinstance(payload, dict):
        raise ValueError(f"payload is a JSON {type(payload).__name__}, not an object")
    caller = agent.real_caller(event_name, payload)  # Cursor, Continue, Copilot CLI and VS Code also run Claude Code's hooks
    if caller is None:
        return ""
    if caller[0] is not agent:
        from leanctx.hooks.caller import runs_own_hook

        agent, event_name = caller
        if not agent.foreign_flags:  # VS Code running Claude Code's or Copilot CLI's entries
            flags, builtin = (), False
        if runs_own_hook(agent, event_name, payload):  # that hook publishes: fold the event once
            return agent.no_opinion(event_name)
    event = agent.normalize(event_name, payload)
    builtin = builtin and event.tool_name in agent.builtin_read_tools
    if event.kind == "pre_tool":
        noted = None
        if "--read-gate" in flags and agent.is_read_tool(event.tool_name):
            from leanctx.hooks.publish import note_read_call
            from leanctx.hooks.readgate import note_losses

            note_losses(data_dir, agent, event)
            noted = note_read_call(data_dir, event)
        if "--guard" in flags:
            from leanctx.hooks.guard import check

            out = check(agent, event, data_dir)
            if not builtin or out.strip():
                return out
        if builtin:
            from leanctx.hooks.readgate import before_read

            return before_read(data_dir, agent, event) or agent.no_opinion(event.event)
        return agent.read_gate_output(event) if noted else agent.no_opinion(event.event)
    if event.kind == POST_TOOL:
        if builtin:
            from leanctx.hooks.readgate import after_read

            return after_read(data_dir, payload, agent, event) or agent.no_opinion(event.event)
        return agent.no_opinion(event.event)
    if event.kind == "state_tool":  # the model's own state tools (bot profile), not a host event to publish
        from leanctx.hooks.bot import state_tool

        return state_tool(agent, event, data_dir)
    publish(data_dir, event)
    out = ""
    if "--bot" in flags:
        from leanctx.hooks.bot import on_event

        out = on_event(agent, event, data_dir)
    if not out and agent.compaction_notes and not event.subagent_id and (
            event.kind == PRE_COMPACT or (event.kind == SESSION_START and event.source == "compact")):
        from leanctx.hooks import compaction

        if event.kind == PRE_COMPACT:
            out = compaction.compact_hint(event.transcript_path, event.cwd)
        else:
            card = compaction.state_card(event.transcript_path, event.cwd)
            out = agent.context_output(event.event, card) if card else ""
    return out or agent.output(event)


def _no_opinion(agent_name: str, event_name: str) -> str:
    try:
        from leanctx import agents

        return agents.get(agent_name).no_opinion(event_name)
    except Exception:  # noqa: BLE001 - unknown agent: print nothing
        return ""


def main(argv: list[str]) -> int:
    """`leanctx-hook AGENT EVENT [--bot|--guard]` < payload. Always returns 0."""
    agent_name = argv[0] if len(argv) > 0 else "?"
    event_name = argv[1] if len(argv) > 1 else "?"
    data_dir: str | None = None
    out = ""
    try:
        if os.environ.get("LEANCTX_DISABLED", "") not in ("", "0"):
            return _emit(_no_opinion(agent_name, event_name))
        from leanctx.hooks.stdin import read_stdin

        raw = read_stdin()
        data_dir = _data_dir()
        from leanctx import safedir

        reason = safedir.problem(data_dir)
        if reason:  # fail open: no opinion, nothing written, one line for the user
            _stderr_line(f"leanctx: hook skipped: {reason}")
            return _emit(_no_opinion(agent_name, event_name))
        if len(argv) < 2:
            raise ValueError(f"expected AGENT EVENT [FLAGS] arguments, got {argv!r}")
        out = handle(agent_name, event_name, raw, data_dir, tuple(argv[2:]))
    except BaseException as exc:  # noqa: BLE001 - includes KeyboardInterrupt/SystemExit: exit 0 anyway
        log(data_dir, agent_name, event_name, f"{type(exc).__name__}: {exc}")
        out = _no_opinion(agent_name, event_name)
    return _emit(out)


def _emit(out: str) -> int:
    if out:
        try:
            sys.stdout.write(out)
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    return 0


def run() -> None:
    """Entry point for the wrapper script: exits 0 whatever happens."""
    code = main(sys.argv[1:])
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)
