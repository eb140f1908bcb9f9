"""The read gate over HTTP: Claude Code posts its PreToolUse payload for ctx_read to the daemon.

A command hook costs a process start (~20 ms) before every ctx_read; Claude Code's `type: "http"`
hooks cost a POST on 127.0.0.1 to a daemon that is already running. The daemon answers at
`http://127.0.0.1:<port>/leanctx/read-gate` and writes the same note the command hook writes
(hooks/publish.py: note_read_call), under the call's `tool_use_id`.

Where: the port and a secret are chosen once per data dir by `leanctx init` and kept in
`<data dir>/read_gate.json` (0600); the settings entry names that port and sends the secret in
a header, so the URL stays valid across daemon restarts. When the port is taken, the daemon keeps
trying to bind it; meanwhile the host fails open (verified on Claude Code 2.1.197: a refused
connection, a non-2xx answer or a timeout lets the tool call run), the call gets no note, and a
call without a note never gets a stub on a host whose gate runs.

Who may post: the secret must match (else 401, nothing noted), and the TCP peer must be the host
process the conversation's record names: the client's end of the connection is looked up in
/proc/net/tcp{,6} and found among that one process's open descriptors (start time checked). The
note is written only into a record of that host (checked again under the record lock), and a note
there counts only for MCP connections whose kernel-verified host is that process (scope.py), so
that process is the only candidate worth checking; the MCP server connects to the daemon only at
its first call, so at the first gate no verified connection exists yet. A poster that cannot be
proven (another process, even with the secret; a chat of another host; no record; no /proc) gets
a 200 with no note: the ctx_read then withholds its stub, exactly as when the gate did not run.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import secrets
import socket
import threading
import time

from leanctx import fastjson
from leanctx.agents.base import GATE_HEADER, GATE_PATH, is_read_tool
from leanctx.hooks.hostproc import process_stat

log = logging.getLogger("leanctx.httpgate")

GATE_FILE = "read_gate.json"
TIMEOUT_S = 2  # what the settings entry asks the host to wait (seconds); the daemon answers in ~1 ms
PORT_RANGE = (20000, 32000)  # below Linux's ephemeral range (32768-60999): outgoing sockets never take it
MAX_HEAD = 16384
MAX_BODY = 1 << 20
MAX_CONNS = 64  # open HTTP connections; when full the longest-idle one makes room
READ_TIMEOUT_S = 10.0  # a started request must arrive whole within this
KEEP_IDLE_S = 75.0  # keep-alive: longer than the host's client keeps an idle socket
RETRY_BIND_S = 2.0

_pending: dict[str, dict] = {}  # data dir -> settings chosen by a plan, written when it is applied


# -- the per-install settings --------------------------------------------------------------------


def gate_file(data_dir: str | os.PathLike) -> str:
    return os.path.join(os.fspath(data_dir), GATE_FILE)


def read_config(data_dir: str | os.PathLike) -> dict | None:
    """{"port": int, "secret": str} from the data dir, or None (absent, unreadable, malformed)."""
    from leanctx.hooks.publish import read_json

    value = read_json(gate_file(data_dir))
    if not isinstance(value, dict):
        return None
    port, secret = value.get("port"), value.get("secret")
    if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
        return None
    if not isinstance(secret, str) or len(secret) < 32 or not secret.isalnum():
        return None
    return {"port": port, "secret": secret}


def _free_port() -> int:
    import random

    for _ in range(200):
        port = random.randint(*PORT_RANGE)
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise OSError("no free port on 127.0.0.1 for the read gate")


def planned_config(data_dir: str | os.PathLike) -> dict:
    """The settings an install writes: the saved ones, else new ones kept until `save_config`
    (a broken file of ours is replaced; something else in its place is refused: ValueError)."""
    import stat

    key = os.path.abspath(os.fspath(data_dir))
    saved = read_config(key)
    if saved is not None:
        return saved
    try:
        mode = os.lstat(gate_file(key)).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise ValueError(f"{gate_file(key)}: cannot be read ({exc.strerror or exc})") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise ValueError(f"{gate_file(key)} is not a regular file; move it away, then run init again")
    if key not in _pending:
        _pending[key] = {"port": _free_port(), "secret": secrets.token_hex(32)}
    return _pending[key]


def save_config(data_dir: str | os.PathLike) -> None:
    """Write the settings a plan chose (0600, temp file + rename); nothing when already saved."""
    key = os.path.abspath(os.fspath(data_dir))
    value = _pending.pop(key, None)
    if value is None or read_config(key) is not None:
        return
    from leanctx.hooks.publish import write_json_atomic

    write_json_atomic(gate_file(key), value)


def handler(config: dict) -> dict:
    """The `hooks` entry Claude Code runs for the read gate."""
    return {"type": "http", "url": f"http://127.0.0.1:{config['port']}{GATE_PATH}",
            "headers": {GATE_HEADER: config["secret"]}, "timeout": TIMEOUT_S}


# -- who posted: the TCP peer's process -----------------------------------------------------------


def _hex_addr(host: str, port: int, v6: bool) -> str:
    if not v6:
        return "%08X:%04X" % (int.from_bytes(socket.inet_aton(host), "little"), port)
    raw = socket.inet_pton(socket.AF_INET6, "::ffff:" + host if ":" not in host else host)
    words = "".join("%08X" % int.from_bytes(raw[i:i + 4], "little") for i in range(0, 16, 4))
    return f"{words}:{port:04X}"


def socket_inode(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """The inode of the client's end of an established 127.0.0.1 connection (its local address is
    our peer, its remote address is us), from /proc/net/tcp and tcp6; None when not found."""
    uid = os.getuid()
    for name, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        want = (_hex_addr(peer[0], peer[1], v6), _hex_addr(local[0], local[1], v6))
        try:
            with open(name, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) > 9 and parts[1] == want[0] and parts[2] == want[1] and parts[3] == "01":
                        return int(parts[9]) if parts[7] == str(uid) else None
        except (OSError, ValueError):
            continue
    return None


def holds(inode: int, host: tuple[int, int]) -> bool:
    """Does the host process (pid, start ticks), alive and unchanged, hold the socket `inode`?"""
    pid, ticks = host
    stat = process_stat(pid)
    if stat is None or stat[2] != ticks:
        return False
    folder = f"/proc/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    target = f"socket:[{inode}]"
    for fd in names:
        try:
            if os.readlink(f"{folder}/{fd}") == target:
                again = process_stat(pid)
                return again is not None and again[2] == ticks
        except OSError:
            continue
    return False


# -- the note -------------------------------------------------------------------------------------


def read_event(payload: object):  # -> HookEvent | None
    """The posted PreToolUse payload as a HookEvent, when it is a call of our ctx_read."""
    from leanctx.agents import claude

    if not isinstance(payload, dict):
        return None
    ev = claude.AGENT.normalize("PreToolUse", payload)
    return ev if is_read_tool(ev.tool_name) and isinstance(ev.conversation_id, str) else None


def record_host(data_dir: str, ev) -> tuple[int, int] | None:  # noqa: ANN001
    """(pid, start ticks) of the host process the conversation's record names (its hooks wrote it)."""
    from leanctx.hooks.publish import read_json, record_path

    record = read_json(record_path(data_dir, ev.agent, ev.conversation_id))
    host = record.get("host") if record else None
    pid, ticks = (host.get("pid"), host.get("start_ticks")) if isinstance(host, dict) else (None, None)
    if isinstance(pid, bool) or isinstance(ticks, bool) or not isinstance(pid, int) or not isinstance(ticks, int):
        return None
    return pid, ticks


# -- the listener ---------------------------------------------------------------------------------


class _Conn:
    __slots__ = ("sock", "peer", "inode", "host", "last_active", "busy")

    def __init__(self, sock: socket.socket, peer: tuple[str, int]) -> None:
        self.sock = sock
        self.peer = peer
        self.inode: int | None = None  # the client's end of this connection
        self.host: tuple[int, int] | None = None  # proven once per connection (keep-alive)
        self.last_active = time.monotonic()
        self.busy = False


class HttpGate:
    """The listener: one thread accepting, one per HTTP connection (keep-alive)."""

    def __init__(self, data_dir: str, stopping: threading.Event) -> None:
        self.data_dir = data_dir
        self.port: int | None = None
        self.secret = b""
        self.stopping = stopping
        self.listener: socket.socket | None = None
        self.lock = threading.Lock()
        self.conns: set[_Conn] = set()
        self.counts = {"noted": 0, "unproven": 0, "ignored": 0, "unauthorized": 0, "bad_request": 0}
        self.bind_error: str | None = None

    def start(self) -> None:
        if self._reload():  # the first attempt before the daemon serves anyone; retries in the thread
            self.listener = self._bind()
        threading.Thread(target=self._run, name="leanctx-httpgate", daemon=True).start()

    def status(self) -> dict:
        with self.lock:
            return {"port": self.port, "listening": self.listener is not None, "bind_error": self.bind_error,
                    "open_connections": len(self.conns), **self.counts}

    def close(self) -> None:
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.close()

    def _bind(self) -> socket.socket | None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", self.port))
            s.listen(64)
        except OSError as exc:
            s.close()
            if self.bind_error != str(exc):
                log.warning("read gate: cannot listen on 127.0.0.1:%d (%s); retrying", self.port, exc)
            self.bind_error = str(exc)
            return None
        s.settimeout(1.0)
        self.bind_error = None
        log.info("read gate listening on 127.0.0.1:%d", self.port)
        return s

    def _reload(self) -> bool:
        """Take the settings from the data dir (an init may write them while the daemon runs)."""
        config = read_config(self.data_dir)
        if config is None:
            return False
        with self.lock:
            self.secret = config["secret"].encode("ascii")
            if self.listener is None:
                self.port = config["port"]
        return True

    def _run(self) -> None:
        while not self.stopping.is_set() and self.listener is None:
            if not self._reload():
                self.stopping.wait(RETRY_BIND_S)
                continue
            self.listener = self._bind()
            if self.listener is None:
                self.stopping.wait(RETRY_BIND_S)
        while not self.stopping.is_set() and self.listener is not None:
            try:
                sock, addr = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.stopping.is_set():
                    return
                time.sleep(0.05)
                continue
            conn = _Conn(sock, addr[:2])
            with self.lock:
                if len(self.conns) >= MAX_CONNS:
                    idle = [c for c in self.conns if not c.busy]
                    if not idle:
                        sock.close()
                        continue
                    victim = min(idle, key=lambda c: c.last_active)
                    self.conns.discard(victim)
                    with contextlib.suppress(OSError):
                        victim.sock.shutdown(socket.SHUT_RDWR)
                self.conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), name="leanctx-httpgate-conn", daemon=True).start()

    def _serve(self, conn: _Conn) -> None:
        buf = b""
        try:
            while not self.stopping.is_set():
                request = self._read_request(conn, buf)
                if request is None:
                    return
                head, body, buf, keep = request
                with self.lock:
                    conn.busy = True
                status, outcome = self._answer(conn, head, body)
                with self.lock:
                    self.counts[outcome] = self.counts.get(outcome, 0) + 1
                reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 411: "Length Required"}[status]
                keep = keep and status != 400
                conn.sock.settimeout(READ_TIMEOUT_S)
                conn.sock.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nX-Leanctx-Gate: {outcome}\r\n"
                                  f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n".encode("ascii"))
                with self.lock:
                    conn.busy = False
                    conn.last_active = time.monotonic()
                if not keep:
                    return
        except OSError:
            return
        finally:
            with self.lock:
                self.conns.discard(conn)
            with contextlib.suppress(OSError):
                conn.sock.close()

    def _read_request(self, conn: _Conn, buf: bytes):  # -> (head lines, body, rest, keep-alive) | None
        sock = conn.sock
        sock.settimeout(KEEP_IDLE_S)
        started = None
        while b"\r\n\r\n" not in buf:
            if len(buf) > MAX_HEAD:
                return None
            data = sock.recv(65536)
            if not data:
                return None
            buf += data
            if started is None:
                started = time.monotonic()
                sock.settimeout(READ_TIMEOUT_S)
        raw_head, _, buf = buf.partition(b"\r\n\r\n")
        lines = raw_head.decode("latin-1").split("\r\n")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if "transfer-encoding" in headers:
            return [lines[0], headers, "chunked"], b"", b"", False
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            return [lines[0], headers, "length"], b"", b"", False
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(buf) < length:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = sock.recv(min(65536, length - len(buf)))
            if not data:
                return None
            buf += data
        body, buf = buf[:length], buf[length:]
        keep = headers.get("connection", "").lower() != "close" and lines[0].endswith("HTTP/1.1")
        return [lines[0], headers, None], body, buf, keep

    def _answer(self, conn: _Conn, head: list, body: bytes) -> tuple[int, str]:
        request_line, headers, problem = head
        parts = request_line.split(" ")
        if problem == "chunked":
            return 411, "bad_request"
        if problem == "length":
            return 400, "bad_request"
        if len(parts) != 3 or parts[0] != "POST" or parts[1] != GATE_PATH:
            return 404, "bad_request"
        offered = headers.get(GATE_HEADER.lower(), "").encode("utf-8", "replace")
        if not hmac.compare_digest(offered, self.secret) and not (self._reload() and hmac.compare_digest(offered, self.secret)):
            return 401, "unauthorized"
        try:
            payload = fastjson.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return 400, "bad_request"
        try:
            ev = read_event(payload)
            if ev is None:
                return 200, "ignored"
            from leanctx.hooks.publish import note_read_call

            if conn.host is not None:  # proved on this kept-alive connection: the record is checked under its lock
                if note_read_call(self.data_dir, ev, host={"pid": conn.host[0], "start_ticks": conn.host[1]}, require_host=True):
                    return 200, "noted"
            host = record_host(self.data_dir, ev)
            if host is None or host == conn.host or not self._posted_by(conn, host):
                return 200, "unproven"
            path = note_read_call(self.data_dir, ev, host={"pid": host[0], "start_ticks": host[1]}, require_host=True)
            return 200, "noted" if path else "unproven"
        except Exception:  # noqa: BLE001 - a bad payload or a disk error: no note, the host proceeds
            log.exception("read gate: note failed")
            return 200, "unproven"

    def _posted_by(self, conn: _Conn, host: tuple[int, int]) -> bool:
        """Is the process at the other end of `conn` the host the record names? Its socket must be
        among that one process's descriptors (a note is only ever written into a record of the
        poster's own host, so that process is the only candidate worth checking)."""
        if conn.host == host:
            return True
        if conn.inode is None:
            try:
                local = conn.sock.getsockname()[:2]
            except OSError:
                return False
            conn.inode = socket_inode(conn.peer, local)
            if conn.inode is None:
                return False
        if not holds(conn.inode, host):
            return False
        conn.host = host
        return True


def probe(port: int, secret: str, timeout: float = TIMEOUT_S) -> tuple[int, str]:
    """POST a doctor's ctx_read payload as Claude Code would: (HTTP status, X-Leanctx-Gate), or
    raise OSError when nothing answers. The doctor's session has no record: nothing is noted."""
    import http.client

    body = fastjson.dumps({"session_id": "leanctx-doctor-00000000-0000-0000-0000-000000000000",
                           "hook_event_name": "PreToolUse", "tool_name": "mcp__leanctx__ctx_read",
                           "tool_input": {"path": "README.md"}, "tool_use_id": "toolu_doctor"})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", GATE_PATH, body=body, headers={"Content-Type": "application/json", GATE_HEADER: secret})
        answer = conn.getresponse()
        answer.read()
        return answer.status, answer.getheader("X-Leanctx-Gate") or ""
    finally:
        conn.close()


def start(daemon) -> HttpGate:  # noqa: ANN001 - service.Daemon
    """Start the gate for a daemon; it listens once this data dir has gate settings (an init
    that wired Claude Code's http read gate wrote them), checking every RETRY_BIND_S until then."""
    gate = HttpGate(daemon.data_dir, daemon.stopping)
    gate.start()
    return gate
