"""Who is at the other end of the daemon's socket, as the kernel says it, never as a request says.

One daemon serves every chat of the user, so what a request claims about itself (a session id,
a host pid and start time, a working directory) proves nothing: any local process can copy
another chat's values out of its readable hook record, send one read under that identity, and
the chat's genuine first read then comes back as a stub for bytes it never received. So the
daemon reads the facts a conversation is resolved from itself, once per accepted socket:

- the peer's pid from the socket (SO_PEERCRED on Linux, plus SO_PEERPIDFD on Linux 6.5+, a
  handle on that very process; LOCAL_PEERPID on macOS);
- its environment as it was given at exec (`/proc/<pid>/environ`; psutil on macOS), only the
  names in scope.CONNECTION_ENV: the host sets those when it spawns its MCP server, and a
  process cannot change what another process was started with;
- its working directory (`/proc/<pid>/cwd`), which is where relative paths resolve and, for a
  caller without a hook record, the only workspace root;
- its host: the nearest ancestor that is not a shell, with its start ticks (hooks/hostproc.py,
  the same walk the hooks use when they stamp their records).

Then it checks that the process it read is the one that connected: with a pidfd, that the process
is still alive after the reads (a pid is not reused while its process lives); without one, that
its start time is no later than the accept and did not change while we read. When any of this
cannot be read, or races, the socket is "unverified": the daemon serves it nothing that depends on
who it is (no read at all), and the MCP server then serves itself in-process from the facts it
knows first-hand, with a private cache that stubs only what it sent itself.

What this does not stop: a process can still act as the conversation whose host it descends from
(the model's own shell tool is such a process for its own chat), and a same-user process that
writes into the data dir can forge the hook records or the saved index (see docs/cache.md,
"Security boundaries").
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time

from leanctx.cache.scope import CONNECTION_ENV, Connection
from leanctx.hooks.hostproc import host_process, process_stat

SO_PEERPIDFD = 77  # Linux 6.5+ (asm-generic/socket.h); Python 3.11 has no name for it
SOL_LOCAL, LOCAL_PEERPID = 0, 2  # macOS <sys/un.h>
MAX_ENV_VALUE = 4096  # longer values are not ids or paths we use: dropped
_LINUX = sys.platform.startswith("linux")
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Peer:
    """The kernel's answer about one accepted socket, taken at accept."""

    __slots__ = ("accepted", "pid", "pidfd")

    def __init__(self, pid: int, pidfd: int | None, accepted: float) -> None:
        self.pid = pid
        self.pidfd = pidfd  # None: no pidfd (older kernel, macOS)
        self.accepted = accepted  # CLOCK_BOOTTIME seconds on Linux (what /proc start ticks count), wall time elsewhere

    def close(self) -> None:
        if self.pidfd is not None:
            try:
                os.close(self.pidfd)
            except OSError:
                pass
            self.pidfd = None


def _now() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME) if _LINUX else time.time()


def peer_of(sock: socket.socket) -> Peer | None:
    """The process at the other end of a Unix socket, or None where the platform cannot say."""
    accepted = _now()
    try:
        if _LINUX:
            pid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
        elif sys.platform == "darwin":
            pid = struct.unpack("i", sock.getsockopt(SOL_LOCAL, LOCAL_PEERPID, struct.calcsize("i")))[0]
        else:
            return None
    except (OSError, struct.error, AttributeError):
        return None
    if pid <= 0:
        return None
    pidfd = None
    if _LINUX:
        try:
            pidfd = sock.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
        except OSError:
            pidfd = None  # ENOPROTOOPT before Linux 6.5: the start-time check stands in
    return Peer(pid, pidfd, accepted)


def _env_facts(raw: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in raw.items() if k in CONNECTION_ENV and v and len(v) <= MAX_ENV_VALUE and "\x00" not in v}


def _environ_linux(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        raw = f.read()
    out = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            out[name.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def _alive(pidfd: int) -> bool:
    import signal

    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    return True


def identify(peer: Peer | None) -> Connection | str:
    """The peer's verified connection facts, or why they could not be verified."""
    if peer is None:
        return "the platform does not tell which process is at the other end of the socket"
    if not _LINUX:
        return _identify_psutil(peer)
    pid = peer.pid
    first = process_stat(pid)
    if first is None:
        return f"process {pid} is gone or unreadable"
    _name, ppid, ticks = first
    if peer.pidfd is None and ticks / _CLK_TCK > peer.accepted + 1 / _CLK_TCK:
        return f"process {pid} started after the socket was accepted (pid reused)"
    try:
        env = _environ_linux(pid)
    except OSError as exc:
        return f"cannot read the environment of process {pid} ({exc.strerror or exc})"
    try:
        cwd: str | None = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        cwd = None
    host = host_process(ppid)
    if peer.pidfd is not None:
        try:
            same = _alive(peer.pidfd)
        except OSError:
            same = False
    else:
        again = process_stat(pid)
        same = again is not None and again[2] == ticks
    if not same:
        return f"process {pid} exited while it was being checked"
    return Connection(connection_id=f"peer-{pid}-{ticks}", env=_env_facts(env), host_pid=host.get("pid"),
                      host_start_ticks=host.get("start_ticks"), cwd=cwd)


def _identify_psutil(peer: Peer) -> Connection | str:
    """macOS and other systems without /proc: the same facts through psutil, but no host. The
    hooks cannot name theirs there (hooks/hostproc.py), and a pid without its start ticks could
    match a record of whatever process had that pid before; so such a caller is known only by
    its session id, which the shared daemon serves no stub on (scope.ID_ONLY)."""
    import psutil

    pid = peer.pid
    try:
        proc = psutil.Process(pid)
        created = proc.create_time()
        if created > peer.accepted + 1.0:
            return f"process {pid} started after the socket was accepted (pid reused)"
        env = proc.environ()
        cwd = proc.cwd()
        if psutil.Process(pid).create_time() != created:
            return f"process {pid} exited while it was being checked"
    except (psutil.Error, OSError) as exc:
        return f"cannot read process {pid} ({type(exc).__name__})"
    return Connection(connection_id=f"peer-{pid}-{int(created * 1000)}", env=_env_facts(env), host_pid=None,
                      host_start_ticks=None, cwd=cwd)
