"""`leanctx serve`: one cache daemon for every chat on the machine.

It listens on a Unix socket in the data dir (mode 0600), holds one Resolver and one ReadCache,
and answers JSON-line requests (client.py). Each request carries the asking MCP connection's
facts; the scope is re-resolved with fresh=True before every read, so a stub decision never rests
on a cached answer.

Single instance: an exclusive flock on `leanctx.lock` held for the daemon's whole life (the
kernel drops it when the process dies, however it dies), plus a pid file naming pid and start
time so `status`/`stop`/clients can verify with psutil that a pid is really our daemon. A new
daemon that gets the lock knows any pid file or socket left behind is stale and replaces them.

Threads: the main thread accepts (a selector over the listening socket and a signal wake-up
pipe); one thread per client socket; one housekeeping thread that saves
the index every SAVE_EVERY_S and notices (every CHECK_EVERY_S) when our socket or pid file was
removed from under us (we then shut down, so the next client starts a healthy daemon instead of
talking to nobody). Calls into the cache core run concurrently (the Resolver and the ReadCache
lock what they share). Requests are bounded (client.MAX_REQUEST bytes a line).
Sockets are bounded so that idle or half-written connections cannot lock clients out: at most
MAX_PEER_SOCKETS from one peer process (SO_PEERCRED; no per-peer cap where the platform does not
say), at most MAX_SOCKETS in all, and when all are taken a newcomer evicts the socket idle the
longest (never one with a request in progress); a request line must arrive whole within
LINE_TIMEOUT_S of its first byte. An idle socket is otherwise kept open for as long as its client
wants (an MCP server keeps a few); the clients notice a closed idle socket and open a new one.
SIGTERM/SIGINT, or `LEANCTX_IDLE_EXIT` minutes idle (no client socket open and no request):
stop accepting, let in-flight requests finish (bounded), save the index, remove our socket and
pid file, exit 0. A daemon started while another holds the lock exits 0 too, naming the one
that serves (the MCP server that started it connects to that one).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import selectors
import signal
import socket
import sys
import threading
import time

import leanctx
from leanctx import safedir
from leanctx.cache import client, peer
from leanctx.cache.scope import Connection
from leanctx.hooks.publish import MAX_CALL_ID  # the bound the read gate notes ids under

log = logging.getLogger("leanctx.service")

SAVE_EVERY_S = 15.0
PRUNE_EVERY_S = 3600.0  # old conversation records out (leanctx/cache/prune.py)
CHECK_EVERY_S = 2.0  # is our socket / pid file still ours
DRAIN_S = 3.0
MAX_SOCKETS = 256  # open client sockets (one thread each); when full, the longest-idle one makes room
MAX_PEER_SOCKETS = 32  # open sockets of one peer process (an MCP server pools 4); more are refused "busy"
LINE_TIMEOUT_S = 10.0  # a request line must be complete this long after its first byte, or the socket is dropped
IDLE_ENV = client.IDLE_ENV  # minutes; the next MCP server request starts a new daemon
# Minutes with no client (no MCP server connected: each holds a socket while it lives) and no
# request before the daemon exits. It only has to bridge the gap between sessions: a bot that
# spawns `claude -p` per message, back-to-back runs in a script. A restart costs about 0.5 s of
# CPU off the call path (the MCP server starts it when it starts) and loses only the text kept for
# diffs; stubs come back from the saved index. So short: a killed bot's daemon is gone in 2 min.
IDLE_EXIT_MIN = 2.0
LOCK_WAIT_S = 30.0  # a lock holder that does not accept connections is starting or stopping: wait (a start takes ~0.5 s, more under load)
OBSERVER_OPS = frozenset({"status", "stats", "own_stats"})  # looking at the daemon is not using it (idle exit)
MAX_PATH_CHARS = 4096
MAX_LINE = 10**9


class AlreadyRunning(Exception):
    def __init__(self, pid: int | None, sock: str, serving: bool = True) -> None:
        if pid and serving:
            text = f"leanctx daemon: already running (pid {pid}), socket {sock}"
        else:
            who = f" (pid {pid})" if pid else ""
            text = f"leanctx daemon: another one{who} holds the lock and is starting or stopping, socket {sock}"
        super().__init__(text)
        self.pid = pid


class BadSetting(ValueError):
    """A setting from the environment that we refuse (the message names the variable)."""


def idle_exit_minutes(raw: str | None, name: str = IDLE_ENV) -> float:
    """`LEANCTX_IDLE_EXIT` as minutes: unset or empty -> IDLE_EXIT_MIN, 0 -> never, a fraction is
    fine (0.5 = 30 s). Anything else (negative, nan, inf, words) is refused, never guessed."""
    if raw is None or not raw.strip():
        return IDLE_EXIT_MIN
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise BadSetting(f"{name} must be a number of minutes >= 0 (0 = never exit when idle), got {raw!r}")
    return value


class _Client:
    """One accepted socket as the admission and eviction rules see it (fields under _stats_lock)."""

    __slots__ = ("sock", "peer", "kernel_peer", "identity", "accepted", "last_active", "busy", "evicted",
                 "requests", "observer")

    def __init__(self, sock: socket.socket, kernel_peer: peer.Peer | None) -> None:
        self.sock = sock
        self.kernel_peer = kernel_peer
        self.peer = kernel_peer.pid if kernel_peer else None  # for the per-process socket cap
        self.identity: Connection | str | None = None  # verified facts, or why not; taken at the first request
        self.accepted = self.last_active = time.monotonic()  # last_active: accepted, or last answer sent
        self.busy = False  # a request is being answered: never evicted then
        self.evicted = False
        self.requests = 0
        # None until its first request; True while it only looked (status, stats, a bare hello):
        # an observer is no client, so `leanctx status` in a loop never keeps an idle daemon alive
        self.observer: bool | None = None


class BadRequest(Exception):
    pass


class Unverified(Exception):
    """The kernel could not tell us who is asking (peer.py): nothing that depends on it is served."""


class StartupError(Exception):
    """The daemon cannot start here (data dir unwritable, socket name taken...)."""


def _opt_line(args: dict, key: str) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LINE:
        raise BadRequest(f"{key} must be a line number >= 1")
    return value


def read_args(args: object) -> tuple[str, int | None, int | None, bool]:
    """Validate ctx_read arguments (the same checks in the daemon and in-process)."""
    if not isinstance(args, dict):
        raise BadRequest("args must be an object")
    path = args.get("path")
    if not isinstance(path, str) or not path.strip():
        raise BadRequest("path must be a non-empty string")
    if len(path) > MAX_PATH_CHARS or "\x00" in path:
        raise BadRequest("path is too long or contains a NUL byte")
    start, end = _opt_line(args, "start_line"), _opt_line(args, "end_line")
    if start is not None and end is not None and end < start:
        raise BadRequest("end_line is before start_line")
    fresh = args.get("fresh", False)
    if not isinstance(fresh, bool):
        raise BadRequest("fresh must be true or false")
    return path, start, end, fresh


def call_id_arg(args: dict) -> str | None:
    """The host's id for this tool call, if the request carries a usable one (else None: an
    odd id only loses per-call identity, it never fails the read)."""
    value = args.get("call_id")
    return value if isinstance(value, str) and 0 < len(value) <= MAX_CALL_ID else None


def make_connection(facts: object):  # -> scope.Connection
    """A Connection from a request's facts, checked (types, sizes) before the core sees them."""
    from leanctx.cache.scope import Connection

    if not isinstance(facts, dict):
        raise BadRequest("conn must be an object")
    cid = facts.get("connection_id")
    if not isinstance(cid, str) or not 0 < len(cid) <= 200:
        raise BadRequest("conn.connection_id must be a non-empty string")
    env = facts.get("env") or {}
    if not isinstance(env, dict) or len(env) > 200 or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise BadRequest("conn.env must be an object of strings")
    for name in ("host_pid", "host_start_ticks"):
        value = facts.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise BadRequest(f"conn.{name} must be a non-negative integer or null")
    cwd = facts.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or len(cwd) > MAX_PATH_CHARS or "\x00" in cwd):
        raise BadRequest("conn.cwd must be a path or null")
    return Connection.from_dict(facts)


def cache_options(data_dir: str) -> dict:
    """ReadCache options from `<data dir>/config.json`, key "cache": {"allow": [folders readable
    besides the conversation's workspace], "max_file_bytes": N}. A missing file means defaults;
    a broken one is reported in the log and ignored (the defaults are the safe side)."""
    import json

    path = os.path.join(data_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring %s: %s", path, exc)
        return {}
    section = doc.get("cache") if isinstance(doc, dict) else None
    if not isinstance(section, dict):
        return {}
    out: dict = {}
    allow = section.get("allow")
    if isinstance(allow, list) and all(isinstance(a, str) for a in allow):
        out["allow"] = tuple(allow)
    elif allow is not None:
        log.warning("ignoring %s: cache.allow must be a list of folders", path)
    cap = section.get("max_file_bytes")
    if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0:
        out["max_file_bytes"] = cap
    elif cap is not None:
        log.warning("ignoring %s: cache.max_file_bytes must be a positive integer", path)
    return out


class CacheCore:
    """One Resolver + one ReadCache: what the daemon serves, and what an MCP server serves
    in-process when it has no daemon (state_dir None: memory only). Both are thread-safe."""

    def __init__(self, data_dir: str, state_dir: str | None) -> None:
        from leanctx.cache.readcache import ReadCache
        from leanctx.cache.scope import Resolver

        # the daemon's is shared by every process, and saves its record snapshot after the answer
        self.resolver = Resolver(data_dir, shared=state_dir is not None, save_after_answer=state_dir is not None)
        self.cache = ReadCache(state_dir, **cache_options(data_dir))
        if state_dir is not None:
            from leanctx.cache import overhead

            overhead.warm()  # the daemon: what it charges per context, counted before the first read

    def read(self, conn, path: str, start: int | None, end: int | None, fresh: bool,  # noqa: ANN001
             call_id: str | None = None) -> dict:
        # Re-sampled right before the decision: never a cached "who is asking" for a stub.
        scope = self.resolver.resolve(conn, fresh=True, call_id=call_id)
        return self.cache.read(scope, path, start_line=start, end_line=end, fresh=fresh)

    def gate(self, conn, path: str, start: int | None, end: int | None, call_id: str | None = None,  # noqa: ANN001
             delivered: str | None = None, reader: str = "builtin", last_lines: int | None = None,
             unnamed: bool = False) -> dict:
        """A host's built-in reader or a shell read: "gate" before it reads (delivered None),
        "credit" after, with what it delivered. Same scope, same ledger, same rules as `read`.
        `unnamed`: a delivery whose call the hook could not name: the caller is unknown (credited
        to no one; every older copy of that name is dropped, readcache._supersede)."""
        scope = self.resolver.resolve(conn, fresh=True, call_id=None if unnamed else call_id)
        if unnamed and delivered is not None:
            import dataclasses

            scope = dataclasses.replace(scope, key=None, stub_ok=False, reason="a delivery no call could be named for")
        mode = "gate" if delivered is None else "credit"
        return self.cache.read(scope, path, start_line=start, end_line=end, mode=mode, delivered=delivered,
                               reader=reader, last_lines=last_lines)

    def scope(self, conn) -> dict:  # noqa: ANN001
        s = self.resolver.resolve(conn, fresh=True)
        return {k: getattr(s, k, None) for k in ("key", "agent", "compactions", "roots", "stub_ok", "reason", "cwd")}

    def stats(self) -> dict:
        return self.cache.stats()

    def listed(self, conn) -> None:  # noqa: ANN001
        """Our MCP server gave its host process our tool definition (tools/list): that process's
        context is charged our overhead even if it never reads through us (readcache.charge_listed)."""
        s = self.resolver.resolve(conn, fresh=True)
        self.cache.charge_listed(s, getattr(conn, "host_pid", None), getattr(conn, "host_start_ticks", None))

    def own_stats(self, conn, private: bool = False) -> dict:  # noqa: ANN001
        """What a chat user may see: the asking conversation's counters, nothing of any other
        conversation, agent or path (stats() is the operator's, through `leanctx stats`).
        `private`: this core serves the asking process alone (an MCP server's in-process
        fallback), so all it counted is that conversation's, identified or not."""
        from leanctx.cache import tokens

        s = self.resolver.resolve(conn, fresh=True)
        tok = tokens.report()
        if private:
            counts = dict(self.cache.stats())
            counts = {k: counts[k] for k in (*self.cache.conversation_stats(None),) if k in counts}
        else:
            counts = self.cache.conversation_stats(s.key)
        return {"conversation": counts, "identified": s.key is not None or private,
                "tokenizer": tok["tokenizer"], "tokens_exact": tok["tokens_exact"]}

    def after_answer(self) -> None:
        """What may wait until the asking hook or server has its answer."""
        self.resolver.flush()

    def save(self) -> None:
        self.resolver.flush()
        self.cache.save()


class Daemon:
    def __init__(self, data_dir: str, idle_exit_s: float = 0.0) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.idle_exit_s = idle_exit_s
        self.last_active = time.monotonic()
        self.sock_path = client.socket_path(self.data_dir)
        self.pid_file = client.pid_path(self.data_dir)
        self.started = time.time()
        self.stopping = threading.Event()
        self.core: CacheCore | None = None
        self.listener: socket.socket | None = None
        self._tmp_sock: str | None = None
        self._lock_fd: int | None = None
        self._sock_ino: tuple[int, int] | None = None
        self._stats_lock = threading.Lock()
        self.clients: set[_Client] = set()
        self.sockets_total = 0
        self.sockets_evicted = 0
        self.sockets_refused = 0
        self.lines_timed_out = 0
        self.unverified = 0  # sockets whose caller the kernel facts could not verify (served nothing)
        self.live_ids: dict[str, int] = {}  # connection id -> open sockets carrying it
        self.seen_ids: set[str] = set()
        self.requests = 0
        self.errors = 0
        self.in_flight = 0
        self.records_pruned = 0

    @property
    def open_sockets(self) -> int:
        return len(self.clients)

    def _client_sockets(self, besides: _Client | None = None) -> int:
        """Open sockets that count as clients (caller holds _stats_lock): all but observers. A
        socket that has sent nothing yet counts (it may be a client about to ask)."""
        return sum(1 for c in self.clients if not c.observer and c is not besides)

    # --- start-up --------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the single-instance lock, or raise AlreadyRunning. While the holder accepts
        connections it serves this data dir: give up at once. A holder that does not (it is
        starting, or stopping after an idle exit) is waited for up to LOCK_WAIT_S, so a start
        that races a stop ends with one daemon serving instead of none."""
        import fcntl

        reason = safedir.problem(self.data_dir)
        if reason:
            raise StartupError(reason)
        safedir.make_private(self.data_dir)
        fd = os.open(client.lock_path(self.data_dir), os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                    os.close(fd)
                    raise
            if client.wait_for_socket(self.data_dir, 0) or time.monotonic() >= deadline:
                running = client.daemon_process(self.data_dir)
                holder = running or _lock_holder(fd)
                os.close(fd)
                raise AlreadyRunning(holder.pid if holder else None, self.sock_path, serving=running is not None) from None
            time.sleep(0.05)
        # Belt and braces: a lock file deleted and re-created under a live daemon would let a
        # second one in; the pid file still names the first.
        other = client.daemon_process(self.data_dir)
        if other is not None and other.pid != os.getpid():
            os.close(fd)
            raise AlreadyRunning(other.pid, self.sock_path)
        self._lock_fd = fd
        _claim_lock(fd)

    def recover_stale(self) -> None:
        """With the lock held nobody else serves this data dir: whatever is left is stale."""
        import stat as statmod

        old = client.read_pidfile(self.data_dir)
        try:
            if statmod.S_ISDIR(os.lstat(self.sock_path).st_mode):
                raise StartupError(f"{self.sock_path} is a directory, not our socket; remove it")
        except FileNotFoundError:
            pass
        for path in (self.sock_path, self.pid_file):
            try:
                os.unlink(path)
                log.info("removed stale %s%s", os.path.basename(path), f" (pid {old['pid']})" if old and path == self.pid_file else "")
            except FileNotFoundError:
                pass
        # temp names of a daemon that died between bind and rename
        prefixes = (client.SOCKET_NAME + ".", client.PID_NAME + ".")
        for name in os.listdir(self.data_dir):
            if name.startswith(prefixes) and name.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(self.data_dir, name))
                except OSError:
                    pass

    def listen(self) -> None:
        """Bind and listen under a temporary name; publish() renames it into place once the pid
        file is written, so a client that can connect always finds the pid file too."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._tmp_sock = f"{self.sock_path}.{os.getpid()}.tmp"
        try:
            os.unlink(self._tmp_sock)
        except FileNotFoundError:
            pass
        old_umask = os.umask(0o177)  # the socket file is born 0600: no window where others can connect
        try:
            client.bind(sock, self._tmp_sock)
        finally:
            os.umask(old_umask)
        os.chmod(self._tmp_sock, 0o600)
        sock.listen(512)
        sock.setblocking(False)
        st = os.stat(self._tmp_sock)
        self._sock_ino = (st.st_dev, st.st_ino)
        self.listener = sock

    def publish(self) -> None:
        assert self._tmp_sock is not None
        os.replace(self._tmp_sock, self.sock_path)
        self._tmp_sock = None

    def write_pidfile(self) -> None:
        import psutil

        info = {
            "pid": os.getpid(),
            "create_time": psutil.Process().create_time(),
            "socket": self.sock_path,
            "version": leanctx.__version__,
            "protocol": client.PROTOCOL,
            "started_at": self.started,
        }
        tmp = f"{self.pid_file}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, client.encode(info))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.pid_file)

    # --- serving ---------------------------------------------------------------------

    def start(self) -> None:
        """Lock, clean up, load the cache, bind, write the pid file, publish the socket."""
        try:
            self.acquire()
            self.recover_stale()
            self.core = CacheCore(self.data_dir, client.cache_dir(self.data_dir))
            self.listen()
            self.write_pidfile()
            self.publish()
        except OSError as exc:
            where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
            self._abandon()
            raise StartupError(f"{exc.strerror or exc}{where}") from None
        except BaseException:
            self._abandon()
            raise

    def _abandon(self) -> None:
        """Undo a half-done start (never touching what another daemon owns: we hold the lock or
        created nothing)."""
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self._tmp_sock is not None:
            try:
                os.unlink(self._tmp_sock)  # our pid is in its name: nobody else's
            except OSError:
                pass
        self._release_ownership()

    def _release_ownership(self) -> None:
        """Remove the pid file if it is still ours, and release the single-instance lock."""
        info = client.read_pidfile(self.data_dir)
        if info and info.get("pid") == os.getpid():
            try:
                os.unlink(self.pid_file)
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def run(self) -> int:
        self.start()
        log.info("leanctx %s daemon pid %d serving %s", leanctx.__version__, os.getpid(), self.sock_path)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        threading.Thread(target=self._housekeeping, name="leanctx-housekeeping", daemon=True).start()
        sel = selectors.DefaultSelector()
        assert self.listener is not None
        sel.register(self.listener, selectors.EVENT_READ, "accept")
        sel.register(wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self.stopping.is_set():
                for key, _ in sel.select(timeout=1.0):
                    if key.data == "wake":
                        try:
                            os.read(wake_r, 512)
                        except OSError:
                            pass
                    elif not self.stopping.is_set():
                        self._accept()
        finally:
            sel.close()
            self.shutdown()
            signal.set_wakeup_fd(-1)
            os.close(wake_r)
            os.close(wake_w)
        return 0

    def _on_signal(self, signum: int, frame: object) -> None:
        log.info("signal %d: shutting down", signum)
        self.stopping.set()

    def _accept(self) -> None:
        assert self.listener is not None
        while True:
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and friends: keep serving the sockets we have
                log.warning("accept failed: %s", exc)
                return
            conn.setblocking(True)
            me = _Client(conn, peer.peer_of(conn))
            with self._stats_lock:
                if self.stopping.is_set():  # decided to exit (idle) after this one queued: never half-serve it
                    conn.close()
                    return
                refusal = self._admit(me)
            if refusal:
                try:
                    conn.settimeout(0.5)
                    conn.sendall(client.encode({"ok": False, "code": "busy", "error": refusal}))
                except OSError:
                    pass
                conn.close()
                continue
            threading.Thread(target=self._serve_socket, args=(me,), name="leanctx-conn", daemon=True).start()

    def _admit(self, me: _Client) -> str | None:
        """Take `me` in, evicting the longest-idle socket when all MAX_SOCKETS are open; or say
        why not (caller holds _stats_lock)."""
        if me.peer is not None and sum(1 for c in self.clients if c.peer == me.peer) >= MAX_PEER_SOCKETS:
            self.sockets_refused += 1
            return f"over {MAX_PEER_SOCKETS} open connections from process {me.peer}"
        if len(self.clients) >= MAX_SOCKETS:
            idle = [c for c in self.clients if not c.busy]
            if not idle:
                self.sockets_refused += 1
                return f"over {MAX_SOCKETS} open connections, each with a request in progress"
            victim = min(idle, key=lambda c: c.last_active)
            self.clients.discard(victim)
            victim.evicted = True
            self.sockets_evicted += 1
            with contextlib.suppress(OSError):
                victim.sock.shutdown(socket.SHUT_RDWR)  # its thread sees EOF, closes and leaves
        self.clients.add(me)
        self.sockets_total += 1
        return None

    def _serve_socket(self, me: _Client) -> None:
        ls = client.LineSocket(me.sock)
        carried: str | None = None
        try:
            while not self.stopping.is_set():
                try:
                    line = ls.recv_line(client.MAX_REQUEST, LINE_TIMEOUT_S)
                except TimeoutError:
                    with self._stats_lock:
                        self.lines_timed_out += 1
                    with contextlib.suppress(OSError):
                        me.sock.settimeout(0.5)
                        ls.send(client.encode({"ok": False, "code": "timeout",
                                               "error": f"request line not complete within {LINE_TIMEOUT_S:g} s"}))
                    return
                except OSError:
                    return
                if line is None:
                    return
                with self._stats_lock:
                    if me.evicted:
                        return  # made room for a newcomer while this line came in: the client reconnects
                    me.busy = True
                if line == b"":
                    with contextlib.suppress(OSError):
                        ls.send(client.encode({"ok": False, "code": "too_large",
                                               "error": f"request over {client.MAX_REQUEST} bytes"}))
                    return  # the rest of that line is unreadable garbage: drop the socket
                answer, cid = self.handle_line(line, me)
                if cid and cid != carried:
                    self._note_id(cid, carried)
                    carried = cid
                try:
                    me.sock.settimeout(LINE_TIMEOUT_S)  # a peer that never reads its answers holds no thread
                    ls.send(answer)
                except OSError:
                    return
                finally:
                    self._after_answer()
                with self._stats_lock:
                    me.busy = False
                    me.last_active = time.monotonic()
        finally:
            ls.close()
            if me.kernel_peer is not None:
                me.kernel_peer.close()
            with self._stats_lock:
                self.clients.discard(me)
                if me.observer is False:  # a client left: the idle time counts from now
                    self.last_active = time.monotonic()
                if carried:
                    self._drop_id(carried)

    def _after_answer(self) -> None:
        try:
            if self.core is not None:
                self.core.after_answer()
        except Exception:  # noqa: BLE001 - a failed save is retried on the next answer or at shutdown
            log.exception("saving after an answer failed")

    def _note_id(self, cid: str, previous: str | None) -> None:
        with self._stats_lock:
            if previous:
                self._drop_id(previous)
            self.live_ids[cid] = self.live_ids.get(cid, 0) + 1
            self.seen_ids.add(cid)

    def _drop_id(self, cid: str) -> None:  # caller holds _stats_lock
        n = self.live_ids.get(cid, 0) - 1
        if n > 0:
            self.live_ids[cid] = n
        else:
            self.live_ids.pop(cid, None)

    def identity(self, me: _Client | None) -> Connection:
        """The verified facts of the process at the other end of `me` (peer.py), read once per
        socket: a process's environment and start time cannot change, and its host changes only
        when the host dies (then its conversation is over anyway). Raises Unverified."""
        if me is None:
            raise Unverified("no socket: nothing to verify the caller by")
        if me.identity is None:
            me.identity = peer.identify(me.kernel_peer)
            if isinstance(me.identity, str):
                with self._stats_lock:
                    self.unverified += 1
                log.warning("caller not verified: %s", me.identity)
        if isinstance(me.identity, str):
            raise Unverified(f"the daemon could not verify the calling process: {me.identity}")
        return me.identity

    def handle_line(self, line: bytes, me: _Client | None = None) -> tuple[bytes, str | None]:
        with self._stats_lock:
            self.requests += 1
            self.in_flight += 1
        cid = None
        try:
            try:
                msg = client.decode(line)
            except ValueError:
                raise BadRequest("request is not valid JSON") from None
            if not isinstance(msg, dict):
                raise BadRequest("request must be a JSON object")
            if msg.get("v") != client.PROTOCOL:
                raise BadRequest(f"unsupported protocol version {msg.get('v')!r} (this daemon speaks {client.PROTOCOL})")
            facts = msg.get("conn")
            if isinstance(facts, dict) and isinstance(facts.get("connection_id"), str):
                cid = facts["connection_id"][:200]
            op = str(msg.get("op"))
            if me is not None:
                self._note_request(me, op in OBSERVER_OPS or (op == "hello" and facts is None))
            result = self.dispatch(op, facts, msg.get("args") or {}, me)
            return client.encode({"ok": True, "result": result}), cid
        except Unverified as exc:
            return client.encode({"ok": False, "code": "unverified", "error": str(exc)}), cid
        except BadRequest as exc:
            self._count_error()
            return client.encode({"ok": False, "code": "bad_request", "error": str(exc)}), cid
        except Exception as exc:  # a bug in the core must not take the daemon down
            self._count_error()
            log.exception("request failed")
            return client.encode({"ok": False, "code": "internal", "error": f"{type(exc).__name__}: {exc}"}), cid
        finally:
            with self._stats_lock:
                self.in_flight -= 1

    def _note_request(self, me: _Client, looks_only: bool) -> None:
        with self._stats_lock:
            me.requests += 1
            me.observer = looks_only and me.observer is not False  # one real request makes it a client for good

    def _count_error(self) -> None:
        with self._stats_lock:
            self.errors += 1

    def dispatch(self, op: str, facts: object, args: object, me: _Client | None = None) -> object:
        """One request. Who is asking comes from the kernel (identity), never from `facts`: the
        facts a client sends are checked for shape and otherwise ignored."""
        assert self.core is not None
        if op == "read":
            make_connection(facts)
            path, start, end, fresh = read_args(args)
            return self.core.read(self.identity(me), path, start, end, fresh, call_id_arg(args))
        if op in ("gate", "credit"):
            # a host's built-in reader, asked by our own hooks (hooks/readgate.py): who reads is
            # the hook's process as the kernel reports it, resolved like an MCP connection
            make_connection(facts)
            path, start, end, _fresh = read_args(args)
            delivered = None
            if op == "credit":
                delivered = args.get("content")
                if not isinstance(delivered, str):
                    raise BadRequest("content must be a string")
            reader = args.get("reader", "builtin")
            if reader not in ("builtin", "shell"):
                raise BadRequest("reader must be \"builtin\" or \"shell\"")
            last = _opt_line(args, "last_lines")
            if last is not None and (start is not None or end is not None):
                raise BadRequest("last_lines goes without start_line and end_line")
            unnamed = op == "credit" and args.get("unnamed") is True
            result = self.core.gate(self.identity(me), path, start, end, call_id_arg(args), delivered, reader, last, unnamed)
            # the hook needs the decision and, for a refusal, its text; never the file's content
            return {k: result.get(k) for k in ("kind", "text", "path", "lines", "window", "code", "again")
                    if k in result and not (k == "text" and result.get("kind") in ("full", "error"))}
        if op == "hello":
            try:
                ident = self.identity(me)
                caller: dict = {"verified": True, "pid": me.peer if me else None, "host_pid": ident.host_pid}
            except Unverified as exc:
                caller = {"verified": False, "reason": str(exc)}
            return {"protocol": client.PROTOCOL, "version": leanctx.__version__, "pid": os.getpid(), "caller": caller}
        if op == "stats":
            return self.core.stats()
        if op == "own_stats":
            make_connection(facts)
            return self.core.own_stats(self.identity(me))
        if op == "listed":
            make_connection(facts)
            self.core.listed(self.identity(me))
            return {}
        if op == "status":
            return self.status(me)
        if op == "scope":
            make_connection(facts)
            return self.core.scope(self.identity(me))
        raise BadRequest(f"unknown op {op!r}")

    def status(self, me: _Client | None = None) -> dict:
        """What `leanctx status` shows. `me` (the socket asking) is left out of the counts."""
        assert self.core is not None
        stats = self.core.stats()
        now = time.monotonic()
        with self._stats_lock:
            clients = self._clients_report(me, now)
            idle_for = None if self._client_sockets(besides=me) else round(now - self.last_active, 3)
            conns = {"open_sockets": max(0, self.open_sockets - (me in self.clients)), "clients": len(clients),
                     "clients_seen": len(self.seen_ids), "sockets_total": self.sockets_total,
                     "sockets_evicted": self.sockets_evicted, "sockets_refused": self.sockets_refused,
                     "lines_timed_out": self.lines_timed_out, "callers_unverified": self.unverified,
                     "limits": {"max_sockets": MAX_SOCKETS, "max_peer_sockets": MAX_PEER_SOCKETS,
                                "line_timeout_s": LINE_TIMEOUT_S}}
            requests, errors = self.requests, self.errors
        for row in clients:
            row["name"] = _process_name(row["pid"])
            row["host_name"] = _process_name(row["host_pid"])
        return {
            "running": True,
            "pid": os.getpid(),
            "version": leanctx.__version__,
            "protocol": client.PROTOCOL,
            "data_dir": self.data_dir,
            "socket": self.sock_path,
            "started_at": self.started,
            "uptime_s": round(time.time() - self.started, 3),
            "idle_exit_min": self.idle_exit_s / 60,  # 0: never
            "idle_for_s": idle_for,  # None while a client is connected
            "memory": memory_report(stats),
            "connections": conns,
            "clients": clients,
            "requests": requests,
            "errors": errors,
            "entries": stats.get("entries"),
            "records_pruned": self.records_pruned,
            "savings": savings(stats),
        }

    def _clients_report(self, me: _Client | None, now: float) -> list[dict]:
        """The connected clients, one row per process (the kernel's peer pid), observers and the
        asking socket left out (caller holds _stats_lock)."""
        rows: dict = {}
        for c in self.clients:
            if c is me or c.observer:
                continue
            row = rows.setdefault(c.peer, {"pid": c.peer, "verified": None, "host_pid": None, "sockets": 0,
                                           "requests": 0, "connected_s": 0.0, "idle_s": None})
            row["sockets"] += 1
            row["requests"] += c.requests
            row["connected_s"] = round(max(row["connected_s"], now - c.accepted), 3)
            idle = round(now - c.last_active, 3)
            row["idle_s"] = idle if row["idle_s"] is None else min(row["idle_s"], idle)
            if isinstance(c.identity, Connection):
                row["verified"], row["host_pid"] = True, c.identity.host_pid
            elif isinstance(c.identity, str) and not row["verified"]:
                row["verified"], row["reason"] = False, c.identity
        return sorted(rows.values(), key=lambda r: (r["pid"] is None, r["pid"] or 0))

    # --- housekeeping and shutdown ------------------------------------------------------

    def _prune(self) -> None:
        from leanctx.cache.prune import keep_seconds, prune_records

        try:
            self.records_pruned += prune_records(self.data_dir, keep_seconds())
        except Exception:  # never let a clean-up take the daemon down
            log.exception("pruning old conversation records failed")

    def _housekeeping(self) -> None:
        saved_at = time.monotonic()
        self._prune()
        pruned_at = time.monotonic()
        while not self.stopping.wait(CHECK_EVERY_S):
            if time.monotonic() - pruned_at >= PRUNE_EVERY_S:
                pruned_at = time.monotonic()
                self._prune()
            if client.rotate_own_log(self.data_dir):
                log.info("service log rotated")
            if time.monotonic() - saved_at >= SAVE_EVERY_S:
                saved_at = time.monotonic()
                try:
                    assert self.core is not None
                    self.core.save()
                except Exception:
                    log.exception("saving the index failed")
            reason = None
            if not self._still_ours():
                reason = "our socket or pid file was removed or replaced"
            elif self.idle_exit_s > 0:
                with self._stats_lock:  # decided and marked together: _accept takes no new socket after
                    if self._client_sockets() == 0 and time.monotonic() - self.last_active >= self.idle_exit_s:
                        self.stopping.set()
                        reason = f"no client and no request for {self.idle_exit_s / 60:g} min ({IDLE_ENV})"
            if reason:
                log.warning("%s: shutting down", reason)
                self.stopping.set()
                os.kill(os.getpid(), signal.SIGTERM)  # wakes the selector

    def _still_ours(self) -> bool:
        try:
            st = os.stat(self.sock_path)
        except OSError:
            return False
        info = client.read_pidfile(self.data_dir)
        return (st.st_dev, st.st_ino) == self._sock_ino and bool(info) and info.get("pid") == os.getpid()

    def shutdown(self) -> None:
        self.stopping.set()
        if self.listener is not None:
            self.listener.close()
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline:
            with self._stats_lock:
                if self.in_flight == 0:
                    break
            time.sleep(0.01)
        if self.core is not None:
            try:
                self.core.save()
            except Exception:
                log.exception("saving the index at shutdown failed")
        # Remove only what is still ours (a successor may already have replaced them).
        try:
            st = os.stat(self.sock_path)
            if (st.st_dev, st.st_ino) == self._sock_ino:
                os.unlink(self.sock_path)
        except OSError:
            pass
        self._release_ownership()
        log.info("daemon pid %d stopped", os.getpid())


def _claim_lock(fd: int) -> None:
    """Name the lock's holder in the lock file, so a start that finds it busy while we are still
    starting (no socket or pid file yet) can say which process holds it."""
    import psutil

    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, client.encode({"pid": os.getpid(), "create_time": psutil.Process().create_time()}), 0)
    except (OSError, psutil.Error):
        pass  # only a message depends on it


def _lock_holder(fd: int):  # -> psutil.Process | None
    """The daemon process the lock file names, verified like the pid file's (client.verify_pid)."""
    import json

    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return client.verify_pid(info) if isinstance(info, dict) and isinstance(info.get("pid"), int) else None


def _process_name(pid: int | None) -> str | None:
    if pid is None:
        return None
    import psutil

    try:
        return psutil.Process(pid).name()
    except (psutil.Error, OSError):
        return None


def memory_report(stats: dict) -> dict:
    """The daemon's resident memory beside the file text it holds (the core's content_bytes)."""
    import psutil

    try:
        rss = psutil.Process().memory_info().rss
    except (psutil.Error, OSError):
        rss = None
    return {"rss_bytes": rss, "held_bytes": stats.get("content_bytes"), "held_files": stats.get("contents")}


def savings(stats: dict) -> dict:
    """Tokens of raw content vs tokens delivered, and what is left net of re-reads and our own
    overhead (the core's tokens_saved: negative when leanctx cost more than it saved; never
    clamped). `ratio` is tokens_saved / tokens_raw."""
    raw = stats.get("tokens_raw") or 0
    sent = stats.get("tokens_sent") or 0
    reread = stats.get("tokens_reread") or 0
    cost = stats.get("tokens_overhead") or 0
    net = raw - sent - reread - cost
    return {"tokens_raw": raw, "tokens_sent": sent, "tokens_reread": reread, "tokens_overhead": cost,
            "tokens_saved": net, "ratio": round(net / raw, 4) if raw else 0.0, "tokenizer": stats.get("tokenizer"),
            "tokens_exact": stats.get("tokens_exact")}


def serve(data_dir: str, idle_exit_min: float) -> int:
    """Run the daemon in the foreground until SIGTERM (or idle_exit_min idle; 0 = never).
    0 on a clean stop and when another daemon already serves this data dir (said on stdout),
    1 when it cannot start."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(process)d %(levelname)s %(message)s")
    daemon = Daemon(data_dir, idle_exit_min * 60)
    try:
        return daemon.run()
    except AlreadyRunning as exc:
        print(exc, flush=True)
        return 0
    except StartupError as exc:
        print(f"leanctx: cannot start the daemon in {data_dir}: {exc}", file=sys.stderr)
        return 2  # an OS error on the data dir or socket: bad environment, said in one line
