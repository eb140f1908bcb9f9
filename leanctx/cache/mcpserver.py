"""`leanctx mcp`: the stdio MCP server a host spawns, standard library only on its start-up path.

Hosts wait for it before their first turn (or, headless, send that turn without our tools), so it
answers the handshake itself at once: `initialize` (protocol version negotiated as the spec says:
the client's when we speak it, else our latest), `notifications/initialized`, `ping`,
`tools/list`. No MCP SDK, pydantic, anyio or click is imported on that path (`python -X
importtime -m leanctx mcp`): MCP over stdio is newline-delimited JSON-RPC 2.0, a few dozen lines.
Errors are JSON-RPC errors: a malformed line (-32700), a message that is no request (-32600), an
unknown method (-32601), bad params or an unknown tool (-32602), a request before `initialize`
was answered (-32002, LSP's "server not initialized"). None of them ends the server; only the
host closing stdin does.

`tools/call` for ctx_read / ctx_stats is relayed to the shared daemon over its socket (client.py),
which it starts detached when absent. The daemon takes who is asking from the kernel: this
process is the socket's peer, its parent is the host. When the daemon cannot be reached, answers
with an error, or dies mid-request, the same read is served in-process by a private CacheCore
(memory only, imported only then), so the host always gets a normal answer. That private cache
starts empty, so it never stubs what it did not deliver itself. A daemon that answers
`unverified` is never asked again: in-process for good.

Switching back: paths served in-process while away are "tainted" for the daemon, whose record of
this conversation missed those deliveries; the daemon gets fresh=true for a tainted path until a
whole-file read of it has gone through the daemon again. One full re-send, never a stub built on
a stale record. The in-process cache is dropped on the way back, so a later fallback starts empty.

Profiles (`--profile`, written into the registered command by init): `coding` lists ctx_read
alone, the one tool a coding session uses (the counters are for the user: `leanctx stats`);
`bot` adds ctx_stats (a chat user has no shell to run `leanctx stats`, the bot can answer; it
reports this conversation alone, never another's id, counters or a path) and the
conversation-state tools, which act on the active user's thread (CKS_ACTIVE_USER from the host's
environment, as the hooks do; in a channel session the one sender of the turn in progress,
state/channel.py turn_user) in this process: store operations with their own locking, not cache
work, and the daemon's environment is not the host's. Their refusals name no path and no other
user (the full text goes to stderr, the host's MCP log).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from leanctx.cache import client
from leanctx.cache.switches import switched_off

# The host's id for the tool call, from the request's `_meta`. Both hosts send the id their
# pre-tool hook gets as `tool_use_id` (verified: Claude Code 2.1.197 `_meta["claudecode/toolUseId"]`,
# Codex 0.171.0 `_meta["callId"]`); Copilot CLI 1.0.102 sends what our preMcpToolCall read gate
# hands it (`_meta["leanctx/callId"]`, its `toolCallId`; agents/copilot.py). A key another host
# means differently is harmless: an id only counts when our read gate noted it in a record of this
# connection's own host process.
CALL_ID_META_KEYS = ("claudecode/toolUseId", "callId", "leanctx/callId")
# OpenClaw 2026.9.6 sends no `_meta` with a call: our plugin's before_tool_call puts the call's id
# in the arguments under this name (the model's own value replaced; agents/openclaw.py), and so does
# our Amp plugin's tool.call (Amp 0.0.1790142911's MCP client sends no `_meta`; agents/amp.py). Used only
# when `_meta` names no id, and marked (scope.ARG_CALL_ID): it counts only on a host process whose
# records are all of a host whose plugin sets it (scope.CALL_ID_IN_ARGS); elsewhere a model could
# write it, and the call is treated as one without an id.
CALL_ID_ARG = "leanctx_call_id"

SERVER_NAME = "leanctx"
# Newest first: what `initialize` may settle on (the client's version if listed, else the first).
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
SPAWN_WAIT_S = 3.0  # how long a tool call waits for a daemon it just started
DYING_WAIT_S = 3.0  # a daemon that stopped answering may still be exiting: wait this long for it
RESPAWN_AFTER_S = 10.0  # at most one start attempt per this interval
MAX_SPAWNS = 5  # attempts without the daemon ever answering, then in-process for good
DAEMON_TIMEOUT_S = 15.0  # one answer; the core caps files at 2 MB, a full read takes well under 1 s
SKIP_AFTER_TIMEOUT_S = 30.0  # after a timeout, serve in-process this long before trying again
MAX_LINE = 4 << 20  # one message from the host; a longer line is answered -32700 and skipped
MAX_WORKERS = 16  # tool calls served at once; the reader waits for a free one beyond that
UNLISTED_START_S = 0.2  # after initialize, start the daemon this soon even if tools/list never comes

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
NOT_INITIALIZED = -32002

PROFILES = ("coding", "bot")
_NO_ARGS = {"type": "object", "properties": {}}

# The contract the model needs, in the fewest tokens (bench/mcp_startup.py counts them): what a
# stub means, and the way out when that copy is gone.
CTX_READ = {
    "name": "ctx_read",
    "description": "Read a workspace text file, or lines start_line..end_line. If this conversation already got "
                   "these exact bytes, unchanged since, the answer is an `[unchanged]` stub: you already hold this "
                   "text, use your earlier copy. A changed file may come back as a diff, an overlapping range as a "
                   "pointer plus the new lines. fresh=true always returns the full text.",
    "inputSchema": {"type": "object", "properties": {
        "path": {"type": "string"},
        "start_line": {"type": "integer", "minimum": 1},
        "end_line": {"type": "integer", "minimum": 1},
        "fresh": {"type": "boolean"},
    }, "required": ["path"]},
}
BOT_TOOLS = (
    {"name": "ctx_stats", "description": "Read-cache statistics of this conversation: reads, stubs, diffs, tokens raw "
                                         "vs delivered.", "inputSchema": _NO_ARGS},
    {"name": "state_show", "description": "Show the user's current conversation thread: summary, recent turns, "
                                          "active work, pending question.", "inputSchema": _NO_ARGS},
    {"name": "state_set_pending", "description": "Record a clarification question you just asked the user (and its "
                                                 "options); the user's next message is recorded as its answer.",
     "inputSchema": {"type": "object", "properties": {"question": {"type": "string"},
                                                      "options": {"type": "array", "items": {"type": "string"}}},
                     "required": ["question"]}},
    {"name": "state_clear_pending", "description": "Clear the pending question (answered or no longer relevant).",
     "inputSchema": _NO_ARGS},
    {"name": "state_set_summary", "description": "Replace the thread's running summary (one paragraph, at most "
                                                 "2,000 characters).",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "state_end_thread", "description": "End the current thread: its digest goes to the user's history and "
                                                "a fresh thread starts.", "inputSchema": _NO_ARGS},
)


def tools_for(profile: str) -> list[dict]:
    """What tools/list offers in a profile."""
    return [CTX_READ, *BOT_TOOLS] if profile == "bot" else [CTX_READ]


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


def warn(message: str) -> None:
    """One line on stderr, which hosts keep in their MCP log (logging costs an import here)."""
    try:
        sys.stderr.write(f"leanctx mcp: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class ToolFailure(Exception):
    """A call the model should see as a tool error (outside the workspace, binary, bad argument...)."""


class ProtocolError(Exception):
    """A request answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Backend:
    """The daemon when it answers, in-process otherwise. Called from worker threads."""

    def __init__(self, data_dir: str, facts: dict | None = None, use_daemon: bool = True, autostart: bool = True) -> None:
        self.data_dir = data_dir
        self._facts = facts
        self._facts_ready = threading.Event()
        if facts is not None:
            self._facts_ready.set()
        self.use_daemon = use_daemon
        self.autostart = autostart
        self.client = client.ServiceClient(data_dir, timeout=DAEMON_TIMEOUT_S)
        self._local_core = None
        self._lock = threading.Lock()  # the in-process core, the taint set, the counters
        self._spawn_lock = threading.Lock()
        self._spawned_at: float | None = None
        self._spawns_unanswered = 0
        self._spawn_came_up = False
        self._tainted: set[str] = set()
        self._skip_until = 0.0
        self.unverified: str | None = None  # why the daemon could not verify this process (then in-process for good)
        try:
            self.cwd = os.getcwd()
        except OSError:  # started in a folder that is gone: relative paths name nothing anyway
            self.cwd = "/"
        self.served = {"daemon": 0, "in_process": 0}
        self.channel_session = False  # a channel turn was seen: the state tools never fall back to CKS_ACTIVE_USER
        self._started = False
        # Held open while we live, so a quiet session still counts as the daemon's client (idle exit).
        self.presence: client.Presence | None = None

    @property
    def facts(self) -> dict:
        self.start()
        self._facts_ready.wait()
        assert self._facts is not None
        return self._facts

    # --- start-up, off the handshake's path ---------------------------------------------

    def start(self) -> None:
        """Once, in a thread, as soon as the host has our tools (or calls one first, or
        UNLISTED_START_S after initialize if it never lists them): take this
        process's connection facts (before the host could die and leave us re-parented to
        another process), then make sure a daemon is coming up unless one accepts connections.
        Nothing of it delays the handshake the host waits for."""
        with self._lock:
            if self._started:
                return
            self._started = True

        def prepare() -> None:
            if os.environ.get(client.IDLE_ENV, "").strip():
                from leanctx.cache.service import BadSetting, idle_exit_minutes

                try:
                    idle_exit_minutes(os.environ[client.IDLE_ENV])
                except BadSetting as exc:  # never lose the tools over a timer: the daemon we start uses the default
                    warn(f"{exc}; the daemon uses the default instead")
                    os.environ.pop(client.IDLE_ENV, None)
            if self._facts is None:
                cid = os.urandom(16).hex()
                try:
                    from leanctx.cache.scope import Connection

                    self._facts = Connection.capture(connection_id=cid).to_dict()
                except Exception as exc:  # noqa: BLE001 - no host facts: an unknown caller, never a stub
                    warn(f"cannot take this process's connection facts ({type(exc).__name__}: {exc})")
                    self._facts = {"connection_id": cid, "env": {}, "host_pid": None, "host_start_ticks": None, "cwd": None}
                finally:
                    self._facts_ready.set()
            if not (self.use_daemon and self.autostart):
                return
            if self.presence is None:
                facts = self._facts
                self.presence = client.Presence(self.data_dir, facts,
                                                host=(facts.get("host_pid"), facts.get("host_start_ticks"))).start()
            try:
                client.connect(client.socket_path(self.data_dir), 1.0).close()
                return
            except OSError:
                pass
            self._ensure_daemon(wait=True)  # off the caller's path: waiting only records that it came up

        threading.Thread(target=prepare, name="leanctx-prepare", daemon=True).start()

    def _restart_after_failure(self) -> None:
        """The daemon died under a request: have a new one ready for the next call (no connect
        probe: a dying daemon's listening socket can still accept for a moment)."""
        if self.use_daemon and self.autostart:
            threading.Thread(target=self._ensure_daemon, args=(True,), name="leanctx-respawn", daemon=True).start()

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
                    warn(f"cannot start the leanctx daemon: {exc}")
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

    def _daemon_request(self, op: str, args: dict | None = None) -> object:
        if not self.use_daemon:
            raise client.DaemonError("daemon disabled (LEANCTX_DAEMON=0)")
        if self.unverified:
            raise client.DaemonError(self.unverified)
        if time.monotonic() < self._skip_until:
            raise client.DaemonError("daemon timed out recently; in-process for now")
        facts = self.facts
        try:
            result = self.client.request(op, facts, args)
        except client.DaemonTimeout:
            # Alive but not answering (stopped, wedged): do not make every call wait it out.
            self._skip_until = time.monotonic() + SKIP_AFTER_TIMEOUT_S
            raise
        except client.DaemonUnavailable:
            # Never reached a daemon: starting one and retrying cannot answer twice.
            if not self._ensure_daemon(True):
                raise
            result = self.client.request(op, facts, args)
        self._spawns_unanswered = 0
        return result

    # --- in-process -------------------------------------------------------------------

    def _local(self):  # -> service.CacheCore
        with self._lock:
            if self._local_core is None:
                from leanctx.cache.service import CacheCore

                self._local_core = CacheCore(self.data_dir, None)
            return self._local_core

    def _keys(self, path: str, shown: object = None) -> set[str]:
        keys = {path, os.path.realpath(os.path.join(self.cwd, os.path.expanduser(path)))}
        if isinstance(shown, str) and shown:
            keys.add(shown)
        return keys

    # --- operations -----------------------------------------------------------------

    def read(self, path: object, start_line: object = None, end_line: object = None, fresh: object = False,
             call_id: str | None = None) -> dict:
        from leanctx.cache.service import BadRequest, call_id_arg, read_args

        args: dict = {"path": path, "start_line": start_line, "end_line": end_line, "fresh": fresh}
        if call_id:
            args["call_id"] = call_id
        try:
            path, start_line, end_line, fresh = read_args(args)
        except BadRequest as exc:
            raise ToolFailure(str(exc)) from None
        with self._lock:
            keys = self._keys(path) if self._tainted else set()
            tainted = bool(self._tainted & keys)
        if tainted:
            args["fresh"] = True
        try:
            result = self._daemon_request("read", args)
            if not isinstance(result, dict):
                raise client.DaemonError("daemon answered a read with no result")
        except (client.DaemonError, client.RemoteError) as exc:
            if isinstance(exc, client.RemoteError) and exc.code == "unverified":
                # The daemon serves only callers the kernel vouches for; this process's own facts
                # are first-hand, so its private cache is safe. That will not change: stay here.
                self.unverified = f"daemon could not verify this process: {exc}"
                if self.presence is not None:
                    self.presence.close()  # nothing to keep the daemon alive for
                warn(f"{self.unverified}; serving in-process from now on")
            elif self.use_daemon and not self.unverified:
                warn(f"daemon read failed ({exc}); serving in-process")
            if isinstance(exc, client.DaemonError) and not isinstance(exc, client.DaemonUnavailable):
                self._restart_after_failure()
        else:
            with self._lock:
                self._local_core = None  # back on the daemon: a later fallback starts empty
                if tainted and start_line is None and end_line is None and result.get("kind") != "error":
                    self._tainted -= keys | self._keys(path, result.get("path"))
                self.served["daemon"] += 1
            return result
        from leanctx.cache.service import make_connection

        result = self._local().read(make_connection(self.facts), path, start_line, end_line, fresh, call_id_arg(args))
        with self._lock:
            if self.use_daemon and not self.unverified:  # errors too: a daemon that died mid-request may have recorded it
                self._tainted |= self._keys(path, result.get("path"))
            self.served["in_process"] += 1
        return result

    def note_listed(self) -> None:
        """The host has our tool definition: tell the daemon once, off the handshake's path, so
        `leanctx stats` charges this host process's context for it even if it never reads
        through us. Best effort: no daemon, no charge (and no savings either)."""

        def tell() -> None:
            facts = self.facts  # taken by start(), which the listing has set off
            if self.unverified or not client.wait_for_socket(self.data_dir, SPAWN_WAIT_S + DYING_WAIT_S):
                return
            # a socket of its own, closed at once: the pool's stay open, and an orphaned server
            # must hold nothing but its presence (which lets go when its host is gone)
            once = client.ServiceClient(self.data_dir, timeout=DAEMON_TIMEOUT_S)
            try:
                once.request("listed", facts)
            except Exception:  # noqa: BLE001 - an older daemon (unknown op) or none: nothing to count in
                pass
            finally:
                once.close()

        if self.use_daemon and self.autostart:
            threading.Thread(target=tell, name="leanctx-listed", daemon=True).start()

    def stats(self) -> dict:
        """ctx_stats: this conversation's counters only (a chat user reaches this tool: nothing
        about other conversations, agents or this machine's paths)."""
        try:
            own = self._daemon_request("own_stats")
            if not isinstance(own, dict) or not isinstance(own.get("conversation"), dict):
                raise client.DaemonError("daemon answered own_stats with no result")
            served_by = "daemon"
        except (client.DaemonError, client.RemoteError):  # an older daemon too (unknown op)
            from leanctx.cache.service import make_connection

            own = self._local().own_stats(make_connection(self.facts), private=True)
            served_by = "in-process (no daemon)"
        with self._lock:
            out = {"served_by": served_by, "this_connection": dict(self.served),
                   "this_conversation": own["conversation"], "conversation_identified": bool(own.get("identified")),
                   "tokenizer": own.get("tokenizer"), "tokens_exact": own.get("tokens_exact")}
        if self.unverified:
            out["unverified"] = True  # why goes to the MCP log (warn), not to a chat user
        return out

    def close(self) -> None:
        self.client.close()
        if self.presence is not None:
            self.presence.close()


# --- tools ------------------------------------------------------------------------------


def _int_arg(value: object) -> object:
    """What hosts and models send for a line number, as the SDK's lax validation took it: an int,
    or a string of digits. Anything else is passed on for read_args to refuse by name."""
    text = value.strip() if isinstance(value, str) else ""
    if text.isascii() and text.isdigit() and len(text) <= 18:  # never int() of "²" or of 5,000 digits
        return int(text)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _bool_arg(value: object) -> object:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return value


def _strings(value: object, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolFailure(f"{name} must be a list of strings")
    return value


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ToolFailure(f"{name} must be a string")
    return value


def call_tool(backend: Backend, profile: str, name: str, args: dict, meta: object) -> tuple[str, bool]:
    """(text, is_error) of one tool call; ProtocolError for a tool this profile does not offer."""
    if name not in {t["name"] for t in tools_for(profile)}:
        raise ProtocolError(INVALID_PARAMS, f"unknown tool: {name!r}")
    if name == "ctx_read":
        args = dict(args)
        arg_id = args.pop(CALL_ID_ARG, None)
        unknown = sorted(set(args) - {"path", "start_line", "end_line", "fresh"})
        if unknown:
            raise ToolFailure(f"unexpected argument(s): {', '.join(unknown)}")
        call_id = call_id_of(meta)
        if call_id is None and isinstance(arg_id, str) and arg_id and per_call_identity():
            from leanctx.cache.scope import ARG_CALL_ID

            call_id = ARG_CALL_ID + arg_id
        result = backend.read(args.get("path"), _int_arg(args.get("start_line")), _int_arg(args.get("end_line")),
                              _bool_arg(args.get("fresh", False)), call_id=call_id)
        if result.get("kind") == "error":
            return str(result.get("text") or "cannot read that file"), True
        return str(result.get("text", "")), False
    if name == "ctx_stats":
        return json.dumps(backend.stats(), ensure_ascii=False, sort_keys=True), False
    return _state_tool(name, args, _thread_user(backend)), False


def _thread_user(backend: Backend) -> str | None:
    """Whose thread the state tools act on: in a channel session the one sender of the turn in
    progress (state/channel.py turn_user: refused when there is none), else None, CKS_ACTIVE_USER's."""
    from leanctx.state import channel

    facts = backend.facts
    try:
        user = channel.turn_user(backend.data_dir, {"pid": facts.get("host_pid"), "start_ticks": facts.get("host_start_ticks")})
    except channel.Refused as exc:
        backend.channel_session = True
        raise ToolFailure(f"refused: {exc}; nothing was read or written") from None
    if user is None and backend.channel_session:  # its turn notes are gone (pruned): never the shared thread
        raise ToolFailure("refused: this channel session's turn record is gone; nothing was read or written")
    backend.channel_session = backend.channel_session or user is not None
    return user


# What a chat user may be told when the store refuses: the full text (paths, another sender's id)
# goes to the operator's MCP log only.
_PRIVATE_REFUSALS = {
    "ForeignThread": "refused: the stored thread under this user's name belongs to another user id; nothing was "
                     "read or written (the operator's `leanctx state list` shows it)",
    "UnsafePath": "refused: the conversation state folder is not safe to use; nothing was read or written "
                  "(the operator's `leanctx doctor` explains)",
    "StoreUnavailable": "the conversation state store cannot be reached now; nothing was written",
    "StateInvalid": "the stored conversation state is damaged; nothing was written (the operator's `leanctx doctor` explains)",
}


def _state_tool(name: str, args: dict, user: str | None = None) -> str:
    from leanctx.state import api as state_api
    from leanctx.state.errors import BadInput, BadSlug, StateError

    try:
        if name == "state_show":
            return json.dumps(state_api.show(user), ensure_ascii=False, sort_keys=True)
        if name == "state_set_pending":
            options = _strings(args.get("options", []), "options")
            state = state_api.set_pending(_text(args.get("question"), "question"), tuple(options), user=user)
            return f"pending question recorded (revision {state.get('revision')})"
        if name == "state_clear_pending":
            return f"pending question cleared (revision {state_api.clear_pending(user).get('revision')})"
        if name == "state_set_summary":
            state = state_api.set_summary(_text(args.get("text"), "text"), user=user)
            return f"summary saved (revision {state.get('revision')})"
        out = state_api.end_thread(user)
        return "thread ended; digest appended to history" if out.get("digest") else "thread was empty; nothing appended"
    except StateError as exc:  # nothing was written
        if isinstance(exc, (BadInput, BadSlug)):  # about the call's own arguments or its user
            raise ToolFailure(str(exc)) from None
        warn(f"{name}: {exc}")
        raise ToolFailure(_PRIVATE_REFUSALS.get(type(exc).__name__, "the conversation state store refused; "
                                                "nothing was written (the operator's MCP log has why)")) from None


# --- JSON-RPC over stdio ---------------------------------------------------------------------


def _error(msg_id: object, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def _result(msg_id: object, result: dict) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


class Server:
    """One MCP session on a pair of byte streams: the handshake here, tool calls in threads."""

    def __init__(self, backend: Backend, profile: str, out) -> None:  # noqa: ANN001 - a binary file
        self.backend = backend
        self.profile = profile
        self.out = out
        self._write_lock = threading.Lock()
        self._workers = threading.BoundedSemaphore(MAX_WORKERS)
        self.initialized = False
        self.listed = False  # tools/list answered: the handshake the host waits for is over
        self._timer: threading.Timer | None = None

    def send(self, message: object) -> None:
        # a lone surrogate (only in something the host sent us, echoed) stays a valid JSON \u escape
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "backslashreplace") + b"\n"
        with self._write_lock:
            try:
                self.out.write(data)
                self.out.flush()
            except (OSError, ValueError):  # the host went away; stdin's EOF ends us
                pass

    def handle_line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than json can parse
            self.send(_error(None, PARSE_ERROR, "parse error: not a JSON message"))
            return
        if isinstance(message, list):  # a batch (protocol 2025-03-26): answered as one array
            if not message:
                self.send(_error(None, INVALID_REQUEST, "empty batch"))
                return
            answers = [a for a in (self.handle(m, batched=True) for m in message) if a is not None]
            if answers:
                self.send(answers)
        else:
            answer = self.handle(message)
            if answer is not None:
                self.send(answer)
        if self.listed:
            self.backend.start()  # the host has our tools: now the facts and the daemon (once)
        elif self.initialized and self._timer is None:  # a host that never lists: soon anyway
            self._timer = threading.Timer(UNLISTED_START_S, self.backend.start)
            self._timer.daemon = True
            self._timer.start()

    def handle(self, message: object, batched: bool = False) -> dict | None:
        """The answer to one message (None: a notification, a response, or answered later)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return _error(None, INVALID_REQUEST, "not a JSON-RPC 2.0 message")
        method = message.get("method")
        has_id = "id" in message
        msg_id = message.get("id")
        if method is None and has_id and ("result" in message or "error" in message):
            return None  # a response: we send no requests, so nothing waits for it
        if has_id and (isinstance(msg_id, bool) or not isinstance(msg_id, (str, int))):
            return _error(None, INVALID_REQUEST, "id must be a string or an integer")
        if not isinstance(method, str):
            return _error(msg_id if has_id else None, INVALID_REQUEST, "method must be a string")
        params = message.get("params", {})
        if not has_id:  # a notification (`notifications/initialized`, `.../cancelled`...): never answered
            return None
        if params is not None and not isinstance(params, dict):
            return _error(msg_id, INVALID_PARAMS, "params must be an object")
        params = params or {}
        if method == "initialize":
            return _result(msg_id, self.initialize(params))
        if method == "ping":
            return _result(msg_id, {})
        if not self.initialized:
            return _error(msg_id, NOT_INITIALIZED, f"{method}: the server is not initialized (send initialize first)")
        if method == "tools/list":
            if not self.listed:
                self.backend.note_listed()
            self.listed = True
            return _result(msg_id, {"tools": tools_for(self.profile)})
        if method == "tools/call":
            name, args = params.get("name"), params.get("arguments", {})
            if not isinstance(name, str):
                return _error(msg_id, INVALID_PARAMS, "tools/call: name must be a string")
            if args is None:
                args = {}
            if not isinstance(args, dict):
                return _error(msg_id, INVALID_PARAMS, "tools/call: arguments must be an object")
            if batched:
                return self.run_call(msg_id, name, args, params.get("_meta"))
            self._workers.acquire()
            threading.Thread(target=self._call_thread, args=(msg_id, name, args, params.get("_meta")),
                             name="leanctx-call", daemon=True).start()
            return None
        return _error(msg_id, METHOD_NOT_FOUND, f"method not found: {method}")

    def initialize(self, params: dict) -> dict:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        import leanctx

        self.initialized = True  # a host may send tools/list before its `initialized` notification
        return {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": SERVER_NAME, "version": leanctx.__version__}}

    def run_call(self, msg_id: object, name: str, args: dict, meta: object) -> dict:
        try:
            text, is_error = call_tool(self.backend, self.profile, name, args, meta)
        except ProtocolError as exc:
            return _error(msg_id, exc.code, str(exc))
        except ToolFailure as exc:
            text, is_error = str(exc), True
        except Exception as exc:  # noqa: BLE001 - a bug answers this call, never ends the server
            warn(f"{name} failed: {type(exc).__name__}: {exc}")
            return _error(msg_id, INTERNAL_ERROR, f"{name} failed: {type(exc).__name__}: {exc}")
        return _result(msg_id, {"content": [{"type": "text", "text": text}], "isError": is_error})

    def _call_thread(self, msg_id: object, name: str, args: dict, meta: object) -> None:
        try:
            self.send(self.run_call(msg_id, name, args, meta))
        finally:
            self._workers.release()

    def serve(self, stdin) -> None:  # noqa: ANN001 - a binary file
        """Until EOF: one message per line; an over-long line is skipped whole."""
        while True:
            line = stdin.readline(MAX_LINE + 1)
            if not line:
                return
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):
                    line = stdin.readline(MAX_LINE + 1)
                self.send(_error(None, PARSE_ERROR, f"message over {MAX_LINE} bytes; skipped"))
                continue
            if line.strip():
                try:
                    self.handle_line(line)
                except Exception as exc:  # noqa: BLE001 - a bug answers this line, never ends the server
                    warn(f"internal error on a message: {type(exc).__name__}: {exc}")
                    self.send(_error(None, INTERNAL_ERROR, f"internal error: {type(exc).__name__}"))


def _protocol_out():  # -> a binary file
    """Our own copy of stdout for the protocol; fd 1 then points at stderr, so nothing a library
    or child prints can reach the wire."""
    fd = os.dup(1)
    try:
        os.dup2(2, 1)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    return os.fdopen(fd, "wb", buffering=0)


def run(data_dir: str | None = None, profile: str = "coding") -> int:
    """Serve MCP on stdin/stdout until the host closes stdin. A data dir another account could
    plant files in is refused before the handshake: one line on stderr (the host's MCP log), exit 2."""
    from leanctx import paths, safedir

    base = os.path.abspath(data_dir or paths.data_dir())
    reason = safedir.problem(base)
    if reason:
        warn(reason)
        return 2
    backend = Backend(base, use_daemon=not switched_off(os.environ.get("LEANCTX_DAEMON")))
    server = Server(backend, profile, _protocol_out())
    try:
        if sys.stdin is not None:  # no stdin at all: nothing to serve
            server.serve(sys.stdin.buffer)
    except KeyboardInterrupt:
        pass
    finally:
        backend.close()
    return 0



def profile_of(argv: list[str]) -> str | None:
    """The profile the registered command names (`mcp`, `mcp --profile bot`), None for anything
    else (then the full CLI parses it and explains)."""
    if argv == ["mcp"]:
        return "coding"
    if len(argv) == 3 and argv[:2] == ["mcp", "--profile"] and argv[2] in PROFILES:
        return argv[2]
    if len(argv) == 2 and argv[1].startswith("--profile=") and argv[0] == "mcp" and argv[1][10:] in PROFILES:
        return argv[1][10:]
    return None
