"""Run a host process offline in a network namespace of its own, with its loopback ports relayed
to unix sockets of the test process.

Why: a host such as the OpenClaw gateway only starts offline when no route leaves the machine,
so it runs under ``unshare -n`` (``-rn`` when not root), where 127.0.0.1 is private to it. The
fake servers stay in the test process (their state outlives every restart of the host) and
listen on unix sockets, which cross namespaces through the filesystem; this module, run as the
namespace's first process, brings ``lo`` up, listens on the fixed loopback ports the host is
configured with, forks a relay that pipes each connection to its unix socket, and execs the
host. So the pid ``subprocess.Popen`` returns is the host's own pid, and the relay dies with it
(``PR_SET_PDEATHSIG``).

Command line (as built by ``wrap()``)::

    unshare -n python netns.py --forward 127.0.0.1:18081=/path/tg.sock ... -- node openclaw ...
"""
from __future__ import annotations

import argparse
import ctypes
import fcntl
import os
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any, Optional, Sequence

_PROBLEM: Optional[str] = None
_PROBED = False


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """``http.server`` on a unix socket (threaded, daemon threads)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, path: str, handler: type) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        super().__init__(path, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request (the point of these tests) is not an error worth a traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def unix_handler(base: type) -> type:
    """``base`` (a BaseHTTPRequestHandler) made safe on a unix socket, whose client address is ''."""

    class Handler(base):  # type: ignore[misc, valid-type]
        def address_string(self) -> str:
            return "unix"

        def setup(self) -> None:
            if not isinstance(self.client_address, tuple):
                self.client_address = ("unix", 0)
            super().setup()

    assert issubclass(Handler, BaseHTTPRequestHandler)
    return Handler


def unshare_prefix() -> list:
    return ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]


def problem() -> Optional[str]:
    """Why a process cannot be run in a loopback-only namespace here (None: it can)."""
    global _PROBLEM, _PROBED
    if _PROBED:
        return _PROBLEM
    _PROBED = True
    if not shutil.which("unshare"):
        _PROBLEM = "unshare (util-linux) is not installed"
        return _PROBLEM
    try:
        proc = subprocess.run([*unshare_prefix(), sys.executable, os.path.abspath(__file__), "--check"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        _PROBLEM = f"unshare failed: {e}"
        return _PROBLEM
    if proc.returncode != 0 or "loopback ok" not in proc.stdout:
        _PROBLEM = f"cannot make a network namespace with loopback ({' '.join(unshare_prefix())}): " \
                   f"{(proc.stderr or proc.stdout).strip()[-300:]}"
    return _PROBLEM


def wrap(forwards: dict, argv: Sequence[str]) -> list:
    """The command that runs ``argv`` in a new network namespace; ``forwards`` maps a loopback port
    there to the unix socket path it is relayed to."""
    cmd = [*unshare_prefix(), sys.executable, os.path.abspath(__file__)]
    for port, path in forwards.items():
        cmd += ["--forward", f"{int(port)}={path}"]
    return [*cmd, "--", *argv]


# ---- run inside the namespace -------------------------------------------------------------------
def _loopback_up() -> None:
    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(s, SIOCGIFFLAGS, req)[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | IFF_UP))


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        conn, _ = listener.accept()
        try:
            up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            up.connect(path)
        except OSError:
            conn.close()
            continue
        for a, b in ((conn, up), (up, conn)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _relay(listeners: list, parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: go when the host goes
    if os.getppid() != parent:  # it went before the line above
        return
    for listener, path in listeners:
        threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    threading.Event().wait()


def main(args: Sequence[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--forward", action="append", default=[])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("argv", nargs="*")
    opts = ap.parse_args(args)
    _loopback_up()
    if opts.check:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            socket.create_connection(s.getsockname(), timeout=5).close()
        print("loopback ok")
        return
    listeners = []
    for spec in opts.forward:
        port, path = spec.split("=", 1)
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", int(port)))
        s.listen(64)
        listeners.append((s, path))
    parent = os.getpid()
    if listeners and os.fork() == 0:
        _relay(listeners, parent)
        os._exit(0)
    for s, _ in listeners:
        s.close()
    os.execvp(opts.argv[0], opts.argv)


if __name__ == "__main__":
    main(sys.argv[1:])
