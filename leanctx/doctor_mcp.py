"""Doctor's MCP checks: the `leanctx` server is registered as init wrote it, and answers.

The round trip starts the registered command exactly as the host would (stdio, no shell) in a
scratch project with a scratch data dir, in-process mode (`LEANCTX_DAEMON=0`, so no daemon is
left behind) and an explicit scope, lists its tools (the profile's, no more) and reads one file
twice through `ctx_read`: the first read must return the file, the second the `[unchanged]` stub.
That proves the whole chain: the entry, the interpreter, the server, scope resolution and the
read cache. It speaks MCP itself (newline-delimited JSON-RPC on the pipes), so doctor needs no
MCP library either.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import mcpreg
from leanctx.installer.files import ConfigError

ROUND_TRIP_TIMEOUT_S = 60.0


def checks(agent: Agent, home: Path, data_dir: Path, project: Path | None = None, bot: bool = False, profile=None,
           mcp: bool = True) -> list[dict]:
    from leanctx.doctor import doctor_fix_command, init_command, init_fix, refused_fix

    fix = init_fix(agent, project, profile, mcp)
    if getattr(agent, "mcp_in_extension", False):  # Pi: no MCP client, our extension starts the server
        command, args = mcpreg.server_command(project, bot, data_dir)
        return [{"name": "mcp server", "status": "ok", "fix": None,
                 "detail": f"started by the leanctx extension ({command} {' '.join(args)})"},
                round_trip(command, args, {}, bot, doctor_fix_command(agent, project))]
    manual = mcpreg.by_hand(agent, data_dir, project, bot)
    if manual:  # Goose: YAML that init does not edit; a text search for our command, no parse
        from leanctx.installer.install import display

        config = home / agent.mcp_by_hand_file
        command, args = mcpreg.server_command(None, bot, data_dir)
        try:
            found = command.encode() in config.read_bytes()
        except OSError:
            found = False
        if found:
            return [{"name": "mcp server", "status": "info", "fix": None,
                     "detail": f"{display(config, home)} names leanctx's server command (added by hand; leanctx does not parse YAML)"},
                    round_trip(command, args, {}, bot, doctor_fix_command(agent, project))]
        return [{"name": "mcp server", "status": "info", "fix": manual,
                 "detail": f"leanctx's server is not in {display(config, home)}: leanctx does not edit YAML, add it by hand"}]
    if agent.mcp_config(home, project) is None:
        return [{"name": "mcp server", "status": "info", "fix": None,
                 "detail": f"{agent.display_name} reads MCP servers only from its user-level settings: run leanctx doctor without --project"}]
    try:
        name = mcpreg.chosen_name(agent, home, data_dir, project)  # `init --mcp-name` is remembered
        entry = mcpreg.registered(agent, home, project, name)
    except ConfigError as exc:
        return [{"name": "mcp server", "status": "fail", "detail": str(exc), "fix": refused_fix(exc, agent, home, project),
                 "init_refuses": True}]
    from leanctx.doctor import path_check
    from leanctx.installer.install import display

    path = display(agent.mcp_config(home, project)[0], home)
    if entry is None:
        hidden = [display(p, home) for p in mcpreg.recorded_elsewhere(agent, home, data_dir, project)]
        if hidden:  # e.g. CodeBuddy: the user created a file it reads before the one init wrote
            return [{"name": "mcp server", "status": "fail",
                     "detail": f"leanctx is registered in {', '.join(hidden)}, but {agent.display_name} reads its servers from {path} only",
                     "fix": fix}]
        return [{"name": "mcp server", "status": "info", "detail": f"leanctx is not registered in {path} (init --no-mcp?)",
                 "fix": init_fix(agent, project, profile)}]  # the init that registers it
    if not mcpreg.is_ours(entry):
        return [{"name": "mcp server", "status": "fail", "detail": f"the server named {name!r} in {path} is not leanctx's: {entry}",
                 "fix": f"rename yours, or register leanctx's under another name: "
                        f"{init_command(agent, project, profile, mcp)} --mcp-name leanctx-ctx"}]
    want = mcpreg.wanted_entry(agent, data_dir, project, bot)
    if entry != want:
        profile, other = ("bot", "coding") if bot else ("coding", "bot")
        if mcpreg.is_module_form(entry):
            detail = (f"the entry in {path} runs `python -m leanctx mcp`, which imports from the folder the host opens "
                      "(a repository's own leanctx/ or json.py would run as you)")
        elif entry == mcpreg.wanted_entry(agent, data_dir, project, not bot) or (
                bot and entry == _without_profile(want)):  # registered before the profiles
            detail = f"the entry in {path} offers the {other} profile's tools; this install is {profile}"
        else:
            detail = f"the entry in {path} differs from this installation's: {entry}"
        return [{"name": "mcp server", "status": "fail", "detail": detail, "fix": fix}]
    command, args, env = mcpreg.launch(entry)
    missing = path_check([str(command)], path)
    if missing:
        return [missing]
    out = [{"name": "mcp server", "status": "ok", "detail": f"registered as {name!r} in {path}", "fix": None}]
    out.append(round_trip(str(command), list(args or []), env or {}, bot, doctor_fix_command(agent, project)))
    return out


def _without_profile(entry: dict) -> dict:
    """The entry as init wrote it before `--profile` existed (the bot's then listed every tool)."""
    command, args, _env = mcpreg.launch(entry)
    old = dict(entry)
    if isinstance(entry.get("command"), list):
        old["command"] = [command, *args[:-2]]
    else:
        old["args"] = args[:-2]
    return old


def round_trip(command: str, args: list[str], entry_env: dict, bot: bool = False, fix: str = "leanctx doctor --fix") -> dict:
    from leanctx.cache.mcpserver import tools_for

    started = time.perf_counter()
    try:
        tools, first, second = _two_reads(command, args, entry_env)
    except Exception as exc:  # noqa: BLE001 - whatever broke, say it
        return {"name": "mcp round trip", "status": "fail", "detail": f"{type(exc).__name__}: {exc}"[:300],
                "fix": f"run `{command} {' '.join(args)}` by hand to see its error; reinstall leanctx if imports fail"}
    ms = (time.perf_counter() - started) * 1000
    want = [t["name"] for t in tools_for("bot" if bot else "coding")]
    if tools != want:
        return {"name": "mcp round trip", "status": "fail", "detail": f"the server offers {tools}, this install wants {want}",
                "fix": fix}
    if first != _CONTENT or not second.startswith("[unchanged]"):
        return {"name": "mcp round trip", "status": "fail", "detail": f"unexpected answers: {first[:60]!r} / {second[:60]!r}",
                "fix": fix}
    return {"name": "mcp round trip", "status": "ok",
            "detail": f"tools {', '.join(tools)}; ctx_read returned the file, then the [unchanged] stub ({ms:.0f} ms)",
            "fix": None, "ms": round(ms, 1)}


_CONTENT = "".join(f"leanctx doctor line {i}\n" for i in range(1, 41))


class _Session:
    """The host's side of one stdio MCP session: a request a line, the answer with its id."""

    def __init__(self, proc: subprocess.Popen, deadline: float) -> None:
        self.proc, self.deadline, self.next_id, self.buf = proc, deadline, 0, b""

    def request(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        self.notify(method, params, self.next_id)
        while True:
            message = json.loads(self._line())
            if isinstance(message, dict) and message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def notify(self, method: str, params: dict | None = None, msg_id: int | None = None) -> None:
        message: dict = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if msg_id is not None:
            message["id"] = msg_id
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def _line(self) -> bytes:
        out = self.proc.stdout
        assert out is not None
        while b"\n" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                raise TimeoutError(f"no answer within {ROUND_TRIP_TIMEOUT_S:g} s")
            chunk = os.read(out.fileno(), 1 << 16)
            if not chunk:
                raise EOFError(f"the server exited (code {self.proc.poll()})")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line


def _text(result: dict) -> str:
    return "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")


def _two_reads(command: str, args: list[str], entry_env: dict) -> tuple[list[str], str, str]:
    """(tool names, first read, second read) from the registered command, started as a host would."""
    with tempfile.TemporaryDirectory(prefix="leanctx-doctor-mcp-") as scratch:
        project = Path(scratch) / "proj"
        project.mkdir()
        (project / "doctor.txt").write_text(_CONTENT)
        env = dict(os.environ, **entry_env)
        env.update(LEANCTX_HOME=str(Path(scratch) / "data"), LEANCTX_DAEMON="0",
                   LEANCTX_SCOPE=f"doctor-{uuid.uuid4().hex[:12]}")
        proc = subprocess.Popen([command, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env, cwd=str(project))
        try:
            session = _Session(proc, time.monotonic() + ROUND_TRIP_TIMEOUT_S)
            session.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                           "clientInfo": {"name": "leanctx-doctor", "version": "1"}})
            session.notify("notifications/initialized")
            tools = [t.get("name") for t in session.request("tools/list").get("tools", [])]
            reads = [_text(session.request("tools/call", {"name": "ctx_read", "arguments": {"path": "doctor.txt"}}))
                     for _ in range(2)]
        finally:
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
        return tools, reads[0], reads[1]
