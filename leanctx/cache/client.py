"""Talking to the cache daemon: where its files live, the wire format, and finding, verifying and
starting it.

Wire format: one JSON object per line each way over a Unix stream socket. A request is
`{"v": 1, "op": ..., "conn": {...}, "args": {...}}`; the answer is `{"ok": true, "result": ...}`
or `{"ok": false, "error": "...", "code": "..."}`. A socket stays open for many requests.

This module is imported by the MCP server on its start-up path: standard library only at import
(psutil is imported where a process has to be verified).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import threading
import time

from leanctx import safedir

PROTOCOL = 1
MAX_REQUEST = 1 << 20  # bytes of one request line; the daemon refuses more
MAX_RESPONSE = 256 << 20  # a read answer carries file text; the core caps file size well below this
SOCKET_NAME = "leanctx.sock"
PID_NAME = "leanctx.pid"
LOCK_NAME = "leanctx.lock"
LOG_NAME = "service.log"
CACHE_DIRNAME = "cache"
LOG_ROTATE_BYTES = 1 << 20
IDLE_ENV = "LEANCTX_IDLE_EXIT"  # minutes a daemon waits idle before it exits (service.idle_exit_minutes)
# Daemon command lines carry this module path or `leanctx serve`; used to recognise our daemon.
SERVE_MODULE = "leanctx.cache.cli"


def socket_path(base: str | os.PathLike) -> str:
    return os.path.join(os.fspath(base), SOCKET_NAME)


def pid_path(base: str | os.PathLike) -> str:
    return os.path.join(os.fspath(base), PID_NAME)


def lock_path(base: str | os.PathLike) -> str:
    return os.path.join(os.fspath(base), LOCK_NAME)


def log_path(base: str | os.PathLike) -> str:
    return os.path.join(os.fspath(base), "logs", LOG_NAME)


def cache_dir(base: str | os.PathLike) -> str:
    """Where the read cache persists its index (never file contents)."""
    return os.path.join(os.fspath(base), CACHE_DIRNAME)


class DaemonError(Exception):
    """The daemon could not be reached, went away mid-request, or spoke nonsense."""


class DaemonUnavailable(DaemonError):
    """No daemon accepted the connection: the request never reached one (safe to retry)."""


class DaemonTimeout(DaemonError):
    """The daemon accepted the request and did not answer in time (it may still be working)."""


class RemoteError(Exception):
    """The daemon answered, with an error (bad arguments, an internal failure)."""

    def __init__(self, message: str, code: str = "error") -> None:
        super().__init__(message)
        self.code = code


def encode(obj: object) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")


def decode(line: bytes) -> object:
    return json.loads(line.decode("utf-8", "surrogatepass"))


# sun_path, NUL included: 108 bytes on Linux, 104 on macOS and the BSDs
SUN_PATH_MAX = 108 if sys.platform.startswith("linux") else 104
FD_DIR = "/proc/self/fd"


class _Unix:
    """An AF_UNIX address that fits: sun_path holds 104-108 bytes, a deep data dir does not.
    On Linux a long path is reached through /proc/self/fd/<dir fd>/<name> instead; where there is
    no /proc (macOS) a path that does not fit is refused with a message naming the limit and the
    way out, never bound or connected somewhere else."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def __enter__(self) -> str:
        size = len(os.fsencode(self.path))
        if size < 100:
            return self.path
        if not os.path.isdir(FD_DIR):
            if size < SUN_PATH_MAX:
                return self.path
            raise OSError(errno.ENAMETOOLONG, f"the socket path is {size} bytes, over this platform's "
                          f"{SUN_PATH_MAX - 1}-byte limit for Unix sockets; set LEANCTX_HOME to a shorter folder", self.path)
        folder, name = os.path.split(self.path)
        self._fd = os.open(folder or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        return f"{FD_DIR}/{self._fd}/{name}"

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)


def connect(path: str, timeout: float = 1.0) -> socket.socket:
    """Connect, waiting out a full listen backlog (a Unix socket says EAGAIN instead of queueing)."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            with _Unix(path) as addr:
                sock.connect(addr)
            return sock
        except BlockingIOError:
            sock.close()
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.002)
        except OSError:
            sock.close()
            raise


def bind(sock: socket.socket, path: str) -> None:
    with _Unix(path) as addr:
        sock.bind(addr)


class LineSocket:
    """One socket with a read buffer: send a line, receive a line."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_line(self, limit: int, line_timeout: float | None = None) -> bytes | None:
        """The next line (with its newline), b"" on a line over `limit`, None on EOF. With
        `line_timeout`, waiting for a line's first byte is unbounded but the whole line must be in
        within that many seconds of it (socket.timeout otherwise): a half-written line cannot hold
        the socket, however slowly it trickles."""
        deadline = None
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line = bytes(self.buf[: nl + 1])
                del self.buf[: nl + 1]
                return line
            if len(self.buf) > limit:
                return b""
            if line_timeout is not None:
                if self.buf and deadline is None:
                    deadline = time.monotonic() + line_timeout
                self.sock.settimeout(None if deadline is None else max(0.001, deadline - time.monotonic()))
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                return None
            self.buf += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class ServiceClient:
    """Requests to the daemon over a small pool of kept-open sockets (concurrent tool calls each
    take one). Any transport failure closes that socket and raises DaemonError; the caller decides
    whether to fall back. Never retries a request on its own: a read the daemon may have recorded
    must not be answered twice."""

    def __init__(self, base: str | os.PathLike, timeout: float = 20.0, connect_timeout: float = 1.0, pool: int = 4) -> None:
        self.path = socket_path(base)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.pool_size = pool
        self._idle: list[LineSocket] = []
        self._lock = threading.Lock()

    def _take(self) -> LineSocket:
        while True:
            with self._lock:
                if not self._idle:
                    break
                ls = self._idle.pop()
            if not _readable(ls.sock):
                return ls
            ls.close()  # EOF waiting on an idle socket: that daemon is gone (restarted, stopped)
        try:
            return LineSocket(connect(self.path, self.connect_timeout))
        except OSError as exc:
            raise DaemonUnavailable(f"cannot connect to {self.path}: {exc.strerror or exc}") from None

    def _give(self, ls: LineSocket) -> None:
        with self._lock:
            if len(self._idle) < self.pool_size:
                self._idle.append(ls)
                return
        ls.close()

    def request(self, op: str, conn: dict | None = None, args: dict | None = None, timeout: float | None = None) -> object:
        msg: dict = {"v": PROTOCOL, "op": op}
        if conn is not None:
            msg["conn"] = conn
        if args is not None:
            msg["args"] = args
        data = encode(msg)
        ls = self._take()
        try:
            ls.sock.settimeout(timeout or self.timeout)
            ls.send(data)
            line = ls.recv_line(MAX_RESPONSE)
        except socket.timeout:
            ls.close()
            raise DaemonTimeout(f"daemon did not answer {op!r} within {timeout or self.timeout:g} s") from None
        except OSError as exc:  # ECONNRESET from a killed daemon and friends
            ls.close()
            raise DaemonError(f"daemon request {op!r} failed: {exc}") from None
        if not line:
            ls.close()
            raise DaemonError(f"daemon closed the connection during {op!r}")
        try:
            answer = decode(line)
        except ValueError:
            ls.close()
            raise DaemonError(f"daemon sent a malformed answer to {op!r}") from None
        if not isinstance(answer, dict) or "ok" not in answer:
            ls.close()
            raise DaemonError(f"daemon sent a malformed answer to {op!r}")
        self._give(ls)
        if not answer["ok"]:
            raise RemoteError(str(answer.get("error") or "unknown error"), str(answer.get("code") or "error"))
        return answer.get("result")

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for ls in idle:
            ls.close()


PRESENCE_RETRY_S = 5.0  # a held-open socket that lost its daemon looks for the next one this often
HOST_CHECK_S = 5.0  # how often a held-open socket checks that its host still lives (one /proc read)


class Presence:
    """One socket held open to the daemon for as long as this process lives, so the daemon counts
    it as a client while the model sends nothing: the daemon exits idle only when no client is
    connected, and a quiet MCP server under a live host must not lose its daemon. The socket says
    `hello` with the connection facts once (the daemon verifies the process and lists it in
    `leanctx status`), then only waits for EOF. It never starts a daemon: after one went away it
    looks for the next every PRESENCE_RETRY_S (or at once on `poke()`, when its owner has just
    started one). When `host` (pid, start ticks) is given and that process is gone, it lets go:
    an orphaned server that no host will ever call keeps no daemon alive. Standard library only."""

    def __init__(self, base: str | os.PathLike, facts: dict | None = None, host: tuple | None = None,
                 retry_s: float = PRESENCE_RETRY_S, host_check_s: float = HOST_CHECK_S) -> None:
        self.path = socket_path(base)
        self.facts = facts
        self.host = host if host and all(isinstance(v, int) for v in host) else None
        self.retry_s = retry_s
        self.host_check_s = host_check_s
        self.attached = threading.Event()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Presence:
        self._thread = threading.Thread(target=self._run, name="leanctx-presence", daemon=True)
        self._thread.start()
        return self

    def poke(self) -> None:
        """Look for a daemon now (the owner just started one)."""
        self._wake.set()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def host_alive(self) -> bool:
        if self.host is None:
            return True
        from leanctx.hooks.hostproc import process_stat

        info = process_stat(self.host[0])
        if info is None:
            return not os.path.isdir("/proc/self")  # gone; or a system with no /proc to ask (then assume alive)
        return info[2] == self.host[1]

    def _run(self) -> None:
        while not self._closed.is_set():
            if not self.host_alive():
                return
            self._wake.clear()
            try:
                self._hold()
            except OSError:
                pass
            finally:
                self.attached.clear()
            self._wake.wait(self.retry_s)

    def _hold(self) -> None:
        sock = connect(self.path, 1.0)
        self._sock = sock
        ls = LineSocket(sock)
        try:
            if self._closed.is_set():
                return
            msg: dict = {"v": PROTOCOL, "op": "hello"}
            if self.facts is not None:
                msg["conn"] = self.facts
            sock.settimeout(10.0)
            ls.send(encode(msg))
            if not ls.recv_line(MAX_RESPONSE):
                return
            self.attached.set()
            sock.settimeout(self.host_check_s)
            while not self._closed.is_set():
                try:
                    if ls.recv_line(MAX_RESPONSE) is None:
                        return  # the daemon went away (stopped, idle with no other client, restarted)
                except socket.timeout:
                    if not self.host_alive():
                        return
        finally:
            self._sock = None
            ls.close()


def _readable(sock: socket.socket) -> bool:
    """An idle socket has nothing to read; readable means EOF or garbage: do not reuse it."""
    import select

    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


# --- the daemon's process ---------------------------------------------------------------


def read_pidfile(base: str | os.PathLike) -> dict | None:
    try:
        with open(pid_path(base), "rb") as f:
            value = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) and isinstance(value.get("pid"), int) else None


def is_daemon_cmdline(cmdline: list[str]) -> bool:
    words = [os.path.basename(w) for w in cmdline]
    if "serve" not in words:
        return False
    return SERVE_MODULE in cmdline or any(w == "leanctx" or w.startswith("leanctx") for w in words[:3])


def daemon_process(base: str | os.PathLike):  # -> psutil.Process | None
    """The running daemon of this data dir, verified: the pid file's pid is alive, started at
    the recorded time (not a reused pid) and runs `serve`. None otherwise."""
    info = read_pidfile(base)
    if info is None or not _names_this_socket(info, base):
        return None
    return verify_pid(info)


def _names_this_socket(info: dict, base: str | os.PathLike) -> bool:
    """The pid file was written by a daemon of this data dir: a pid file copied or restored from
    another data dir names a live daemon that serves another socket (never ours to stop)."""
    named = info.get("socket")
    if not isinstance(named, str):
        return False
    try:
        return os.path.samefile(os.path.dirname(named), os.fspath(base)) and os.path.basename(named) == SOCKET_NAME
    except OSError:
        return False


def verify_pid(info: dict):  # -> psutil.Process | None
    import psutil

    try:
        proc = psutil.Process(info["pid"])
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        created = proc.create_time()
        recorded = info.get("create_time")
        if not isinstance(recorded, (int, float)) or abs(created - recorded) > 0.5:
            return None
        if not is_daemon_cmdline(proc.cmdline()):
            return None
    except (psutil.Error, OSError):
        return None
    return proc


def wait_gone(proc, timeout: float) -> bool:  # noqa: ANN001 - psutil.Process
    """True once the process has exited (a zombie counts: its parent just has not reaped it)."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def daemon_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a detached daemon starts with: what locates files and tools, never the
    spawning host's identity or credentials (the daemon serves every chat on the machine; each
    request brings its own connection facts)."""
    environ = dict(os.environ if environ is None else environ)
    keep_exact = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "TZ", "VIRTUAL_ENV", "PYTHONPATH",
                  "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "LEANCTX_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
                  "XDG_RUNTIME_DIR", "CKS_HOME", "LEANCTX_CONFIG"}
    # Per-connection switches travel with each request instead (scope.CONNECTION_ENV).
    per_connection = {"LEANCTX_SCOPE", "LEANCTX_CONVERSATION_SCOPE", "LEANCTX_DISABLED"}
    env = {}
    for key, value in environ.items():
        if key in keep_exact or key.startswith("LC_") or (key.startswith("LEANCTX_") and key not in per_connection):
            env[key] = value
    return env


def _rotate_log(path: str) -> None:
    from leanctx import logfile

    logfile.rotate(path, LOG_ROTATE_BYTES)


def rotate_own_log(base: str | os.PathLike) -> bool:
    """For a detached daemon whose stdout/stderr is the service log: once that file is over
    LOG_ROTATE_BYTES, move it to `.1` and point stdout/stderr at a fresh 0600 one, so a daemon
    that never exits (idle exit 0) keeps its log bounded too. True when it rotated."""
    log = log_path(base)
    try:
        st = os.fstat(2)
        here = os.stat(log)
    except OSError:
        return False
    if (st.st_dev, st.st_ino) != (here.st_dev, here.st_ino) or st.st_size <= LOG_ROTATE_BYTES:
        return False  # not writing to the service log (a foreground `leanctx serve`), or small
    try:
        os.replace(log, log + ".1")
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), safedir.FILE_MODE)
    except OSError:
        return False
    try:
        sys.stderr.flush()
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return True


def spawn_daemon(base: str | os.PathLike, python: str | None = None) -> int | None:
    """Start `serve` fully detached: its own session (a host's process-group kill does not reach
    it), stdin from /dev/null, stdout/stderr to the service log, no inherited descriptors, cwd /.
    Through a short-lived intermediate that exits at once, so the daemon is re-parented away from
    the caller (no zombie when it exits, not part of the caller's process tree). Returns the
    daemon's pid as the intermediate reports it (None if it did not), so a caller can tell the
    daemon it started from one that won a start race."""
    import subprocess

    base = os.path.abspath(base)  # the daemon runs in /: a relative data dir would name another folder
    log = log_path(base)
    safedir.make_private(os.path.dirname(log))
    _rotate_log(log)
    python = python or sys.executable
    env = daemon_env()
    env["LEANCTX_HOME"] = base
    from leanctx import launch

    cmd = launch.argv(SERVE_MODULE, "serve", python=python)  # isolated: nothing in a folder can be imported
    launcher = (
        "import subprocess,sys\n"
        "p=subprocess.Popen(sys.argv[1:],stdin=subprocess.DEVNULL,stdout=2,stderr=2,"
        "start_new_session=True,close_fds=True,cwd='/')\n"
        "sys.stdout.write(str(p.pid))\n"
    )
    log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        with open(os.devnull, "rb") as null_in:
            inter = subprocess.Popen([python, "-I", "-S", "-c", launcher, *cmd], stdin=null_in, stdout=subprocess.PIPE,
                                     stderr=log_fd, close_fds=True, cwd="/", env=env, start_new_session=True)
    finally:
        os.close(log_fd)
    # The intermediate exits as soon as it has forked (which also reaps it).
    try:
        out, _ = inter.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        threading.Thread(target=inter.communicate, name="leanctx-spawn-reaper", daemon=True).start()
        return None
    text = out.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


def wait_for_socket(base: str | os.PathLike, timeout: float) -> bool:
    """Poll until the daemon accepts connections (True) or the timeout passes."""
    path = socket_path(base)
    deadline = time.monotonic() + timeout
    while True:
        try:
            connect(path, 0.2).close()
            return True
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
