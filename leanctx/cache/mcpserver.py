"""`leanctx mcp`: the stdio MCP server a host spawns (official `mcp` SDK, MCPServer).

At start it captures who spawned it (its Connection: a fresh id, the host-given environment that
names the session, and the host process with its start time, matched against the hooks'
records). Reads go to the shared daemon, which it starts detached when absent. When the daemon
cannot be reached, answers with an error, or dies mid-request, the same read is served
in-process by a private Resolver + ReadCache (memory only), so the host always gets a normal
answer. That private cache starts empty, so it never stubs what it did not deliver itself.

Switching back: paths served in-process while away are "tainted" for the daemon, whose record of
this conversation missed those deliveries; the daemon gets fresh=true for a tainted path until a
whole-file read of it has gone through the daemon again. One full re-send, never a stub built on
a stale record. The in-process cache is dropped on the way back, so a later fallback starts empty.

The conversation-state tools act on the active user's thread (CKS_ACTIVE_USER from the host's
environment, as the hooks do) in this process: they are store operations with their own locking,
not cache work, and the daemon's environment is not the host's.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import threading
import time
import uuid
from typing import Annotated

from pydantic import Field  # module level: the tools' string annotations are evaluated here

from leanctx import paths
from leanctx.cache import client
from leanctx.cache.service import BadRequest, call_id_arg, read_args
from leanctx.cache.switches import switched_off

log = logging.getLogger("leanctx.mcp")

# The host's id for the tool call being served, handed from the tools/call handler to the
# ctx_read tool when the SDK's own path serves it. Both hosts send the id their pre-tool hook
# gets as `tool_use_id` (verified: Claude Code 2.1.197 `_meta["claudecode/toolUseId"]`, Codex
# 0.171.0 `_meta["callId"]`); Copilot CLI 1.0.102 sends what our preMcpToolCall read gate hands
# it (`_meta["leanctx/callId"]`, its `toolCallId`; agents/copilot.py). A key another host means
# differently is harmless: an id only counts when our read gate noted it in a record of this
# connection's own host process.
_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("leanctx_call_id", default=None)
CALL_ID_META_KEYS = ("claudecode/toolUseId", "callId", "leanctx/callId")

SERVER_NAME = "leanctx"
SPAWN_WAIT_S = 3.0  # how long a tool call waits for a daemon it just started
DYING_WAIT_S = 3.0  # a daemon that stopped answering may still be exiting: wait this long for it
RESPAWN_AFTER_S = 10.0  # at most one start attempt per this interval
MAX_SPAWNS = 5  # attempts without the daemon ever answering, then in-process for good
DAEMON_TIMEOUT_S = 15.0  # one answer; the core caps files at 2 MB, a full read takes well under 1 s
SKIP_AFTER_TIMEOUT_S = 30.0  # after a timeout, serve in-process this long before trying again

INSTRUCTIONS = """\
leanctx serves file reads for this conversation.
ctx_read(path, start_line?, end_line?, fresh?) returns the file's text (or the line range). When \
this conversation already holds the identical bytes of that file or range, it returns a short \
`[unchanged]` stub naming the file instead of re-sending them; a file you hold that changed on \
disk may come back as a unified diff; a window overlapping lines you already hold may come back \
as a pointer to them plus the new lines. Stubs are only served when leanctx can prove this \
conversation received those bytes (never for text sent before a compaction, never inside a \
subagent for what only its parent read, never when unsure). If you no longer have the content in view, call ctx_read again \
with fresh=true to force it.
ctx_stats reports reads, stubs and tokens saved.
state_* tools keep the user's conversation thread (summary, pending question) across restarts."""


def capture_connection() -> dict:
    """This server's connection facts, taken once at start: a fresh id, the host-given
    environment that names the session (scope.CONNECTION_ENV only, never credentials), the host
    process (our parent, shells skipped) with its start ticks, and our cwd. Taken now because if
    the host dies we are re-parented and must not pick up the new parent."""
    from leanctx.cache.scope import Connection

    return Connection.capture(connection_id=uuid.uuid4().hex).to_dict()


class ToolFailure(Exception):
    """A read the model should see as a tool error (outside the workspace, binary, too big...)."""


class Backend:
    """The daemon when it answers, in-process otherwise. Daemon requests run on the event loop
    (asyncio sockets, no worker thread); in-process reads and daemon start-up run in threads."""

    def __init__(self, data_dir: str, facts: dict, use_daemon: bool = True, autostart: bool = True) -> None:
        self.data_dir = data_dir
        self.facts = facts
        self.use_daemon = use_daemon
        self.autostart = autostart
        self.client = client.AsyncServiceClient(data_dir, timeout=DAEMON_TIMEOUT_S)
        self._local_core = None
        self._local_lock = threading.Lock()
        self._spawn_lock = threading.Lock()
        self._spawned_at: float | None = None
        self._spawns_unanswered = 0
        self._spawn_came_up = False
        self._tainted: set[str] = set()
        self._skip_until = 0.0
        self.unverified: str | None = None  # why the daemon could not verify this process (then in-process for good)
        self.cwd = os.getcwd()
        self.served = {"daemon": 0, "in_process": 0}
        self.sdk = {"fast_path": False, "call_ids": False}  # set by build_server: what the SDK let us install
        # Held open while we live, so a quiet session still counts as the daemon's client (idle exit).
        self.presence: client.Presence | None = None

    # --- daemon lifecycle ----------------------------------------------------------

    def start(self, after_failure: bool = False) -> None:
        """Off the caller's path, make sure a daemon is coming up: at server start (unless one
        accepts connections), and after the daemon died under a request (then without the
        connect probe: a dying daemon's listening socket can still accept for a moment)."""
        if not (self.use_daemon and self.autostart):
            return
        if self.presence is None:
            self.presence = client.Presence(self.data_dir, self.facts,
                                            host=(self.facts.get("host_pid"), self.facts.get("host_start_ticks"))).start()

        def probe() -> None:
            if not after_failure:
                try:
                    client.connect(client.socket_path(self.data_dir), 1.0).close()
                    return
                except OSError:
                    pass
            self._ensure_daemon(wait=True)  # off the caller's path: waiting only records that it came up

        threading.Thread(target=probe, name="leanctx-daemon-probe", daemon=True).start()

    def _ensure_daemon(self, wait: bool) -> bool:
        """Start the daemon if it is not running; with wait, until it accepts. One start per
        RESPAWN_AFTER_S while the last one has not come up; a daemon that came up and later
        exited idle is replaced at the next call, however soon. MAX_SPAWNS starts without an
        answered request (one that comes up and dies on every request) end the attempts."""
        if not (self.use_daemon and self.autostart):
            return False
        with self._spawn_lock:
            now = time.monotonic()
            recent = (self._spawned_at is not None and not self._spawn_came_up
                      and now - self._spawned_at < RESPAWN_AFTER_S)
            if not recent:
                if self._spawns_unanswered >= MAX_SPAWNS:
                    return False
                alive = client.daemon_process(self.data_dir)
                if alive is not None and not client.wait_gone(alive, DYING_WAIT_S):
                    return False  # alive but not accepting (stopping, or hung): do not pile on
                try:
                    client.spawn_daemon(self.data_dir)
                except OSError as exc:
                    log.warning("cannot start the leanctx daemon: %s", exc)
                    return False
                self._spawned_at = now = time.monotonic()
                self._spawn_came_up = False
                self._spawns_unanswered += 1
            assert self._spawned_at is not None
            remaining = self._spawned_at + SPAWN_WAIT_S - now
        up = wait and remaining > 0 and client.wait_for_socket(self.data_dir, remaining)
        if up:
            self._spawn_came_up = True
            if self.presence is not None:
                self.presence.poke()
        return up

    async def _daemon_request(self, op: str, args: dict | None = None) -> object:
        import anyio.to_thread

        if not self.use_daemon:
            raise client.DaemonError("daemon disabled (LEANCTX_DAEMON=0)")
        if self.unverified:
            raise client.DaemonError(self.unverified)
        if time.monotonic() < self._skip_until:
            raise client.DaemonError("daemon timed out recently; in-process for now")
        try:
            result = await self.client.request(op, self.facts, args)
        except client.DaemonTimeout:
            # Alive but not answering (stopped, wedged): do not make every call wait it out.
            self._skip_until = time.monotonic() + SKIP_AFTER_TIMEOUT_S
            raise
        except client.DaemonUnavailable:
            # Never reached a daemon: starting one and retrying cannot answer twice.
            if not await anyio.to_thread.run_sync(self._ensure_daemon, True):
                raise
            result = await self.client.request(op, self.facts, args)
        self._spawns_unanswered = 0
        return result

    # --- in-process -------------------------------------------------------------------

    def _local(self):
        with self._local_lock:
            if self._local_core is None:
                from leanctx.cache.service import CacheCore

                self._local_core = CacheCore(self.data_dir, None)
            return self._local_core

    def _local_read(self, path: str, start: int | None, end: int | None, fresh: bool, call_id: str | None) -> dict:
        from leanctx.cache.service import make_connection

        return self._local().read(make_connection(self.facts), path, start, end, fresh, call_id)

    def _keys(self, path: str, shown: object = None) -> set[str]:
        keys = {path, os.path.realpath(os.path.join(self.cwd, os.path.expanduser(path)))}
        if isinstance(shown, str) and shown:
            keys.add(shown)
        return keys

    # --- operations -----------------------------------------------------------------

    async def read(self, path: str, start_line: int | None = None, end_line: int | None = None, fresh: bool = False,
                   call_id: str | None = None) -> dict:
        args = {"path": path, "start_line": start_line, "end_line": end_line, "fresh": fresh}
        if call_id:
            args["call_id"] = call_id
        try:
            path, start_line, end_line, fresh = read_args(args)
        except BadRequest as exc:
            raise ToolFailure(str(exc)) from None
        keys = self._keys(path) if self._tainted else set()
        tainted = bool(self._tainted & keys)
        if tainted:
            args["fresh"] = True
        try:
            result = await self._daemon_request("read", args)
            if not isinstance(result, dict):
                raise client.DaemonError("daemon answered a read with no result")
        except (client.DaemonError, client.RemoteError) as exc:
            if isinstance(exc, client.RemoteError) and exc.code == "unverified":
                # The daemon serves only callers the kernel vouches for; this process's own facts
                # are first-hand, so its private cache is safe. That will not change: stay here.
                self.unverified = f"daemon could not verify this process: {exc}"
                if self.presence is not None:
                    self.presence.close()  # nothing to keep the daemon alive for
                log.warning("%s; serving in-process from now on", self.unverified)
            elif self.use_daemon and not self.unverified:
                log.warning("daemon read failed (%s); serving in-process", exc)
            if isinstance(exc, client.DaemonError) and not isinstance(exc, client.DaemonUnavailable):
                self.start(after_failure=True)  # it died under us: have a new one ready for the next call
        else:
            self._local_core = None  # back on the daemon: a later fallback starts empty
            if tainted and start_line is None and end_line is None and result.get("kind") != "error":
                self._tainted -= keys | self._keys(path, result.get("path"))
            self.served["daemon"] += 1
            return result
        import anyio.to_thread

        result = await anyio.to_thread.run_sync(self._local_read, path, start_line, end_line, fresh,
                                                call_id_arg(args))
        if self.use_daemon and not self.unverified:  # errors too: a daemon that died mid-request may have recorded it
            self._tainted |= self._keys(path, result.get("path"))
        self.served["in_process"] += 1
        return result

    async def stats(self) -> dict:
        import anyio.to_thread

        try:
            stats = await self._daemon_request("stats")
            served_by = "daemon"
        except (client.DaemonError, client.RemoteError):
            stats = await anyio.to_thread.run_sync(lambda: self._local().stats())
            served_by = "in-process (no daemon)"
        out = {"served_by": served_by, "this_connection": dict(self.served), "sdk": dict(self.sdk), "stats": stats}
        if self.unverified:
            out["unverified"] = self.unverified
        return out

    def close(self) -> None:
        self.client.close()
        if self.presence is not None:
            self.presence.close()


def build_server(backend: Backend):
    """The MCPServer with leanctx's tools. Each tool returns plain text (no structured copy: the
    host would carry the same bytes twice)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    import leanctx
    from leanctx.state import api as state_api
    from leanctx.state.errors import StateError

    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=leanctx.__version__, log_level="WARNING")

    def state_op(fn, *args):  # noqa: ANN001, ANN202
        try:
            return fn(*args)
        except StateError as exc:  # bad input: nothing was written
            raise ToolError(str(exc)) from None

    def tool(description: str):
        return server.tool(description=description, structured_output=False)

    @tool("Read a text file in the workspace (optionally lines start_line..end_line, 1-based, inclusive). "
          "Returns the content, or a short [unchanged] stub when this conversation already holds these exact bytes, "
          "or a diff / range pointer against what it holds. fresh=true always returns the content.")
    async def ctx_read(
        path: Annotated[str, Field(description="File path, absolute or relative to the workspace root.")],
        start_line: Annotated[int | None, Field(ge=1, description="First line (1-based).")] = None,
        end_line: Annotated[int | None, Field(ge=1, description="Last line, inclusive.")] = None,
        fresh: Annotated[bool, Field(description="Force the full content, never a stub.")] = False,
    ) -> str:
        try:
            result = await backend.read(path, start_line, end_line, fresh, call_id=_CALL_ID.get())
        except ToolFailure as exc:
            raise ToolError(str(exc)) from None
        if result.get("kind") == "error":
            raise ToolError(str(result.get("text") or "cannot read that file"))
        return str(result.get("text", ""))

    @tool("Read-cache statistics: reads, stubs, diffs, pointers, tokens of raw content vs tokens delivered, "
          "per agent and conversation, and the tokenizer used.")
    async def ctx_stats() -> str:
        return json.dumps(await backend.stats(), ensure_ascii=False, sort_keys=True)

    @tool("Show the user's current conversation thread: summary, recent turns, active work, pending question.")
    def state_show() -> str:
        return json.dumps(state_op(state_api.show), ensure_ascii=False, sort_keys=True)

    @tool("Record a clarification question you just asked the user (and its options); "
          "the user's next message will be recorded as its answer.")
    def state_set_pending(
        question: Annotated[str, Field(description="The question as asked.")],
        options: Annotated[list[str], Field(description="The offered options, if any.")] = [],  # noqa: B006
    ) -> str:
        state = state_op(state_api.set_pending, question, tuple(options))
        return f"pending question recorded (revision {state.get('revision')})"

    @tool("Clear the pending question (it was answered or no longer applies).")
    def state_clear_pending() -> str:
        state = state_op(state_api.clear_pending)
        return f"pending question cleared (revision {state.get('revision')})"

    @tool("Replace the thread's running summary with a one-paragraph summary (at most 2,000 characters).")
    def state_set_summary(text: Annotated[str, Field(description="The new summary.")]) -> str:
        state = state_op(state_api.set_summary, text)
        return f"summary saved (revision {state.get('revision')})"

    @tool("End the current thread: its digest is appended to the user's history and a fresh thread starts.")
    def state_end_thread() -> str:
        out = state_op(state_api.end_thread)
        return "thread ended; digest appended to history" if out.get("digest") else "thread was empty; nothing appended"

    installed = install_call_tool(server, backend)
    backend.sdk = {"mcp_version": sdk_version(), "fast_path": installed, "call_ids": installed and per_call_identity()}
    if not installed:
        log.warning("leanctx: %s", SDK_UNAVAILABLE.format(version=backend.sdk["mcp_version"]))
    drop_tracing(server)
    return server


# Why the fast path or call ids are off, for the server's log and doctor (one text, both places).
SDK_UNAVAILABLE = ("the installed mcp SDK {version} lacks the private internals leanctx hooks into "
                   "(MCPServer._lowlevel_server, MCPServer._handle_call_tool): the ctx_read fast path and per-call "
                   "(subagent) identity are off; reads are still served, with no stub while a subagent window is open")


def sdk_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp")
    except PackageNotFoundError:
        return "(unknown version)"


def drop_tracing(server) -> None:  # noqa: ANN001
    """The SDK wraps every message in an OpenTelemetry span by default (a no-op without an
    exporter, yet a fifth of a stub's time here); its documented opt-out is to drop the
    middleware from the lowlevel server's list. LEANCTX_MCP_OTEL=1 keeps it."""
    if os.environ.get("LEANCTX_MCP_OTEL", "").strip() in ("1", "true", "yes", "on"):
        return
    low = getattr(server, "_lowlevel_server", None)
    chain = getattr(low, "middleware", None)
    if isinstance(chain, list):
        chain[:] = [m for m in chain if type(m).__name__ != "OpenTelemetryMiddleware"]


def per_call_identity() -> bool:
    """LEANCTX_PER_CALL_IDENTITY=0 makes this server send no call ids: every read then follows
    the connection-level rules (no stub at all while a subagent window is open)."""
    return not switched_off(os.environ.get("LEANCTX_PER_CALL_IDENTITY"))


def call_id_of(meta: object) -> str | None:
    """The host's id for this tool call from the request's `_meta`, if it sends one."""
    if not isinstance(meta, dict) or not per_call_identity():
        return None
    for key in CALL_ID_META_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _plain_read_args(args: dict) -> bool:
    """Arguments already in their exact types (what hosts send): no coercion needed."""
    if not isinstance(args.get("path"), str) or set(args) - {"path", "start_line", "end_line", "fresh"}:
        return False
    lines_ok = all(args.get(k) is None or (type(args[k]) is int and args[k] >= 1) for k in ("start_line", "end_line"))
    return lines_ok and type(args.get("fresh", False)) is bool


def install_call_tool(server, backend: Backend) -> bool:  # noqa: ANN001
    """Our tools/call handler in front of MCPServer's: it takes the call id from `_meta` for
    ctx_read, and serves ctx_read with plain arguments directly (the same checks, texts and
    result as the SDK's path, without its per-call argument model: the hot path of a stub).
    Anything else, and ctx_read arguments that need the SDK's coercion, go to MCPServer's
    handler unchanged. Skipped (the SDK serves everything, with no call ids) if the SDK lacks
    what this uses: these are private names, hence the upper bound on `mcp` in pyproject.toml.
    Returns whether it was installed."""
    low = getattr(server, "_lowlevel_server", None)
    sdk_handler = getattr(server, "_handle_call_tool", None)
    if low is None or not callable(sdk_handler) or not callable(getattr(low, "add_request_handler", None)):
        return False
    from mcp.types import CallToolRequestParams, CallToolResult, TextContent

    def text_result(text: str, error: bool = False) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=error)

    async def call_tool(ctx, params: CallToolRequestParams):  # noqa: ANN001, ANN202
        if params.name != "ctx_read":
            return await sdk_handler(ctx, params)
        call_id = call_id_of(params.meta)
        args = params.arguments or {}
        if not _plain_read_args(args):
            token = _CALL_ID.set(call_id)
            try:
                return await sdk_handler(ctx, params)
            finally:
                _CALL_ID.reset(token)
        try:
            result = await backend.read(args["path"], args.get("start_line"), args.get("end_line"),
                                        args.get("fresh", False), call_id=call_id)
        except ToolFailure as exc:
            return text_result(str(exc), error=True)
        if result.get("kind") == "error":
            return text_result(str(result.get("text") or "cannot read that file"), error=True)
        return text_result(str(result.get("text", "")))

    low.add_request_handler("tools/call", CallToolRequestParams, call_tool)
    return True


class _Lines:
    """stdin as the SDK's stdio_server iterates it: decoded lines, read by the event loop."""

    def __init__(self, reader) -> None:  # noqa: ANN001
        self.reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self.reader.readline()
            except ValueError:  # a line over the limit: dropped; its tail fails to parse and is reported
                log.warning("dropped an over-long message from the host")
                continue
            if not line:
                raise StopAsyncIteration
            return line.decode("utf-8", "replace")


class _Out:
    def __init__(self, writer) -> None:  # noqa: ANN001
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8", "replace"))

    async def flush(self) -> None:
        await self.writer.drain()


def _pipe_or_socket(fd: int) -> bool:
    import stat as statmod

    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return statmod.S_ISFIFO(mode) or statmod.S_ISSOCK(mode)


async def serve_stdio(server) -> None:  # noqa: ANN001
    """Serve MCP on stdin/stdout with the event loop reading and writing the pipes.

    The SDK's own stdio transport moves every line through worker threads (anyio.wrap_file),
    which costs most of a millisecond per message; this keeps the SDK's framing, parsing and
    protocol (its `stdio_server` with explicit streams) and only replaces the pipe I/O. Like the
    SDK, fd 0 and 1 point at /dev/null and stderr while serving, so nothing a library or child
    prints can reach the wire. Used only when stdin and stdout are pipes or sockets (what hosts
    give; a terminal shared with a shell must not be left non-blocking) and the SDK has the
    expected internals; otherwise the SDK's transport serves."""
    import asyncio
    import fcntl

    from mcp.server.stdio import stdio_server

    low = getattr(server, "_lowlevel_server", None)
    usable = low is not None and hasattr(low, "run") and hasattr(low, "create_initialization_options")
    if not (usable and _pipe_or_socket(0) and _pipe_or_socket(1)):
        await server.run_stdio_async()
        return
    loop = asyncio.get_running_loop()
    saved = (os.dup(0), os.dup(1))
    blocking = (os.get_blocking(0), os.get_blocking(1))
    in_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    out_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    reader = asyncio.StreamReader(limit=client.MAX_RESPONSE)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                     os.fdopen(in_fd, "rb", buffering=0))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(out_fd, "wb", buffering=0))
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    try:
        os.dup2(2, 1)
    except OSError:  # no usable stderr: stray output goes nowhere
        os.dup2(null, 1)
    os.close(null)
    try:
        async with stdio_server(stdin=_Lines(reader), stdout=_Out(writer)) as (read_stream, write_stream):
            await low.run(read_stream, write_stream, low.create_initialization_options())
    finally:
        transport.close()
        read_transport.close()
        for fd, was_blocking, saved_fd in zip((0, 1), blocking, saved):
            os.dup2(saved_fd, fd)
            os.close(saved_fd)
            try:
                os.set_blocking(fd, was_blocking)  # the descriptions are shared with the host's ends
            except OSError:
                pass


def run(data_dir: str | None = None) -> int:
    """Serve MCP on stdin/stdout until the host closes stdin."""
    import anyio

    from leanctx.cache.service import IDLE_ENV, BadSetting, idle_exit_minutes

    facts = capture_connection()
    base = os.path.abspath(data_dir or paths.data_dir())
    try:
        idle_exit_minutes(os.environ.get(IDLE_ENV))
    except BadSetting as exc:  # never lose the tools over a timer: the daemon we start uses the default
        log.warning("leanctx: %s; the daemon uses the default instead", exc)
        os.environ.pop(IDLE_ENV, None)
    use_daemon = not switched_off(os.environ.get("LEANCTX_DAEMON"))
    backend = Backend(base, facts, use_daemon=use_daemon)
    server = build_server(backend)
    backend.start()

    async def main() -> None:
        try:
            await serve_stdio(server)
        finally:
            backend.close()

    anyio.run(main)
    return 0
