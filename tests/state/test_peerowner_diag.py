"""On Linux the owner of the server side of a loopback connection comes from one exact
NETLINK_SOCK_DIAG (inet_diag) lookup, not from scanning /proc/net/tcp(6): the same answers as that
scan (kept as the fallback), for a real redis-server another uid runs and for plain listeners on
127.0.0.1, ::1 and a dual-stack :: reached through a v4-mapped address."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from bench.support.localredis import LocalRedis
from leanctx.state import peerowner
from tests.second_account import OTHER, needs_second_uid
from tests.state.test_redis_owner import theirs  # noqa: F401  (fixture)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sock_diag is Linux's")


def _ends(sock: socket.socket) -> tuple[tuple, tuple]:
    peer, mine = sock.getpeername(), sock.getsockname()
    return (peer[0], peer[1]), (mine[0], mine[1])


def _no_proc_scan(monkeypatch: pytest.MonkeyPatch) -> list:
    """Make the /proc scan unusable, so only the netlink lookup can answer; its answers are kept."""
    seen: list = []
    real = peerowner._diag_server_uids

    def spy(server: tuple, client: tuple):
        seen.append(real(server, client))
        return seen[-1]

    def scan(*_args: object) -> None:
        raise AssertionError("the /proc scan ran")

    monkeypatch.setattr(peerowner, "_diag_server_uids", spy)
    monkeypatch.setattr(peerowner, "_tcp_server_uids", scan)
    return seen


@linux_only
@needs_second_uid
def test_netlink_names_the_uid_running_a_real_redis_as_the_proc_scan_does(theirs: LocalRedis,  # noqa: F811
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_connection(("127.0.0.1", theirs.port), timeout=10) as s:
        s.sendall(b"PING\r\n")
        assert s.recv(64) == b"+PONG\r\n"  # accepted: the server side has its inode and owner
        server, client = _ends(s)
        assert peerowner._diag_server_uids(server, client) == peerowner._tcp_server_uids(server, client) == [OTHER]
        seen = _no_proc_scan(monkeypatch)
        refusal = peerowner.problem(s, f"127.0.0.1:{theirs.port}", unix=False)
        assert seen == [[OTHER]]
        assert refusal and f"run by uid {OTHER}" in refusal and f"LEANCTX_REDIS_OWNER={OTHER}" in refusal
        monkeypatch.setenv("LEANCTX_REDIS_OWNER", str(OTHER))
        assert peerowner.problem(s, f"127.0.0.1:{theirs.port}", unix=False) is None
        assert seen == [[OTHER], [OTHER]]


@linux_only
@needs_second_uid
def test_netlink_refuses_a_real_redis_side_its_owner_closed_as_the_proc_scan_does(theirs: LocalRedis,  # noqa: F811
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEANCTX_REDIS_OWNER", str(OTHER))  # the owner is fine: only the closing is refused
    with socket.create_connection(("127.0.0.1", theirs.port), timeout=10) as s:
        s.sendall(b"QUIT\r\n")
        assert s.recv(64) == b"+OK\r\n"
        deadline = time.monotonic() + 10
        while s.recv(64) and time.monotonic() < deadline:  # until the server's FIN: its side is orphaned
            pass
        server, client = _ends(s)
        closed = "its side of the connection was already closed by its owner"
        assert peerowner._diag_server_uids(server, client) == peerowner._tcp_server_uids(server, client) == closed
        seen = _no_proc_scan(monkeypatch)
        refusal = peerowner.problem(s, f"127.0.0.1:{theirs.port}", unix=False)
        assert seen == [closed]
        assert refusal == f"refusing the server at 127.0.0.1:{theirs.port}: {closed}; nothing was sent to it"


def _listener(kind: str) -> tuple[socket.socket, str, int]:
    family, bind, reach = {"v4": (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
                           "v6": (socket.AF_INET6, "::1", "::1"),
                           "v4-mapped": (socket.AF_INET6, "::", "::ffff:127.0.0.1")}[kind]
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
        if kind == "v4-mapped":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((bind, 0))
    except OSError as exc:
        pytest.skip(f"no {kind} loopback here: {exc}")
    sock.listen(8)
    return sock, reach, family


@linux_only
@pytest.mark.parametrize("kind", ["v4", "v6", "v4-mapped"])
def test_netlink_and_the_proc_scan_agree_through_a_connection_s_life(kind: str) -> None:
    listener, host, family = _listener(kind)
    port = listener.getsockname()[1]
    with listener, socket.socket(family, socket.SOCK_STREAM) as c:
        c.connect((host, port))
        server, client = _ends(c)
        assert peerowner._loopback(server[0])
        if kind == "v4-mapped":
            assert server[0] == "::ffff:127.0.0.1"

        def both() -> object:
            answer = peerowner._diag_server_uids(server, client)
            assert answer is not None  # netlink answered: no fallback
            assert answer == peerowner._tcp_server_uids(server, client)
            return answer

        me = [peerowner.os.geteuid()]
        assert both() == me + me  # not accept()ed: the side (inherits the listener's owner) and the listener
        accepted, _ = listener.accept()
        assert both() == me
        accepted.close()  # our server side closed by its owner: orphaned, inode 0
        deadline = time.monotonic() + 5
        while c.recv(64) and time.monotonic() < deadline:
            pass
        assert both() == "its side of the connection was already closed by its owner"


@linux_only
def test_a_server_side_netlink_does_not_find_is_refused_once_our_own_side_shows_netlink_works(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A port forwarded elsewhere: the kernel has no server side for it (ENOENT), but it does
    find our own side, so the miss is real (ENOENT alone may mean "no inet_diag here")."""
    listener, host, family = _listener("v4")
    real = peerowner._diag_request
    calls: list[tuple] = []

    def first_misses(nl, fam, states, src, dst, dump):
        calls.append((src, dst))
        if len(calls) == 1:
            raise peerowner._DiagError(peerowner._ENOENT)
        return real(nl, fam, states, src, dst, dump)

    monkeypatch.setattr(peerowner, "_diag_request", first_misses)
    with listener, socket.socket(family, socket.SOCK_STREAM) as c:
        c.connect((host, listener.getsockname()[1]))
        server, client = _ends(c)
        assert peerowner._diag_server_uids(server, client) == (
            "no socket of this machine holds its side of the connection (a port forwarded elsewhere?)")
        assert calls[1] == (calls[0][1], calls[0][0])  # the second look was for our own side


@linux_only
@pytest.mark.parametrize("broken", ["socket refused", "no inet_diag"])
def test_without_sock_diag_the_proc_scan_answers(broken: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if broken == "socket refused":
        mod = sys.modules.get("_socket") or socket

        class NoNetlink:
            def __getattr__(self, name: str) -> object:
                return getattr(mod, name)

            def socket(self, family: int, *args: object) -> object:
                if family == mod.AF_NETLINK:
                    raise PermissionError(1, "Operation not permitted")
                return mod.socket(family, *args)

        monkeypatch.setitem(sys.modules, "_socket", NoNetlink())
    else:
        def enoent(*_args: object, **_kw: object) -> None:
            raise peerowner._DiagError(peerowner._ENOENT)

        monkeypatch.setattr(peerowner, "_diag_request", enoent)
    scans: list = []
    real_scan = peerowner._tcp_server_uids
    monkeypatch.setattr(peerowner, "_tcp_server_uids", lambda *a: scans.append(real_scan(*a)) or scans[-1])
    listener, host, family = _listener("v4")
    with listener, socket.socket(family, socket.SOCK_STREAM) as c:
        c.connect((host, listener.getsockname()[1]))
        accepted, _ = listener.accept()
        with accepted:
            server, client = _ends(c)
            assert peerowner._diag_server_uids(server, client) is None
            assert peerowner.problem(c, "127.0.0.1", unix=False) is None  # our own uid
            assert scans == [[peerowner.os.geteuid()]]
