"""Who runs the Redis server on this machine that a connection reached, before anything is sent to it.

A unix socket path, or a 127.0.0.1/::1 port, can be taken by another local account while the
user's own Redis is down: it would then read the chat text the store writes and answer its reads
with a thread of its choosing. So on a unix socket (SO_PEERCRED on Linux, LOCAL_PEERCRED on macOS
and the BSDs) and on a loopback TCP connection (the server side of this very connection: on Linux one exact
NETLINK_SOCK_DIAG lookup, else its line in /proc/net/tcp or tcp6; without either this fails
closed) the server's owner must be one of: this uid, root, the system account `redis` or
`valkey`, or an account `LEANCTX_REDIS_OWNER` names.
A non-loopback address is not checked: a network peer is not a local account, and `rediss://`
verifies the server by TLS. Standard library only, no import beyond builtins on the usual path.
"""

from __future__ import annotations

import os
import sys

SYSTEM_OWNERS = ("redis", "valkey")  # what Debian, Ubuntu and Fedora packages run the server as
_ESTABLISHED, _SYN_RECV, _LISTEN = "01", "03", "0A"


def problem(sock: object, where: str, unix: bool) -> str | None:
    """None when the server side of `sock` is ours to trust, else the one-line refusal."""
    if unix:
        uid = _unix_peer_uid(sock)
        if uid is None:
            return (f"cannot tell who runs the server at {where} (this system reports no peer credentials); "
                    "nothing was sent to it")
        return _judge(uid, where)
    peer = sock.getpeername()  # type: ignore[attr-defined]
    if not _loopback(peer[0]):
        return None
    mine = sock.getsockname()  # type: ignore[attr-defined]
    try:
        found = _diag_server_uids((peer[0], peer[1]), (mine[0], mine[1]))
        if found is None:  # no sock_diag here (not Linux, no inet_diag, refused): the /proc scan
            found = _tcp_server_uids((peer[0], peer[1]), (mine[0], mine[1]))
    except OSError as exc:
        return (f"cannot tell who runs the server at {where}: {exc}; nothing was sent to it "
                "(use unix:///path/to/redis.sock, whose owner is checked)")
    if isinstance(found, str):
        return f"refusing the server at {where}: {found}; nothing was sent to it"
    for uid in found:
        verdict = _judge(uid, where)
        if verdict:
            return verdict
    return None


def _judge(uid: int, where: str) -> str | None:
    me = os.geteuid()
    if uid in (me, 0):
        return None
    try:
        if uid in _extra_owners():
            return None
    except ValueError as exc:
        return str(exc)
    name = _name(uid)
    who = f"uid {uid} ({name})" if name else f"uid {uid}"
    return (f"the server at {where} is run by {who}, not by you (uid {me}), root or a redis/valkey system "
            f"account; nothing was sent to it (if that is your server, set LEANCTX_REDIS_OWNER={name or uid})")


def _extra_owners() -> set[int]:
    """The redis/valkey system accounts that exist, and LEANCTX_REDIS_OWNER (names or uids, commas)."""
    import pwd

    owners = set()
    for name in SYSTEM_OWNERS:
        try:
            owners.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    for item in os.environ.get("LEANCTX_REDIS_OWNER", "").split(","):
        item = item.strip()
        if not item:
            continue
        if item.isdigit():
            owners.add(int(item))
            continue
        try:
            owners.add(pwd.getpwnam(item).pw_uid)
        except KeyError:
            raise ValueError(f"LEANCTX_REDIS_OWNER: no user named {item!r} on this system "
                             "(give user names or uids, separated by commas)") from None
    return owners


def _name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return ""


def _unix_peer_uid(sock: object) -> int | None:
    """The uid of the process that listens on the other end of a unix socket."""
    mod = sys.modules.get("_socket") or sys.modules.get("socket")
    peercred = getattr(mod, "SO_PEERCRED", None)
    try:
        if peercred is not None:  # Linux: struct ucred {pid_t pid; uid_t uid; gid_t gid}
            raw = sock.getsockopt(mod.SOL_SOCKET, peercred, 12)  # type: ignore[attr-defined,union-attr]
        elif sys.platform == "darwin" or "bsd" in sys.platform:  # struct xucred {u_int version; uid_t uid; ...}
            raw = sock.getsockopt(0, getattr(mod, "LOCAL_PEERCRED", 1), 76)  # type: ignore[attr-defined]
        else:
            return None
    except OSError:
        return None
    return int.from_bytes(raw[4:8], sys.byteorder) if len(raw) >= 8 else None


def _loopback(host: str) -> bool:
    if host.startswith("::ffff:"):
        host = host[7:]
    return host.startswith("127.") or host == "::1"


def _hex_address(host: str, port: int, family6: bool) -> str:
    """An address as /proc/net/tcp(6) prints it: each 32-bit word in host byte order, in hex."""
    if ":" in host:
        raw = _ipv6_bytes(host)
    else:
        raw = bytes(int(part) for part in host.split("."))
        if family6:
            raw = b"\0" * 10 + b"\xff\xff" + raw
    words = [raw[i:i + 4] for i in range(0, len(raw), 4)]
    if sys.byteorder == "little":
        words = [w[::-1] for w in words]
    return b"".join(words).hex().upper() + f":{port:04X}"


def _ipv6_bytes(host: str) -> bytes:
    host = host.split("%", 1)[0]
    if "." in host:  # ::ffff:127.0.0.1
        head, _, v4 = host.rpartition(":")
        return _ipv6_bytes(head + ":0:0")[:12] + bytes(int(p) for p in v4.split("."))
    left, _, right = host.partition("::")
    a = [int(x, 16) for x in left.split(":") if x]
    b = [int(x, 16) for x in right.split(":") if x]
    groups = a + [0] * (8 - len(a) - len(b)) + b
    return b"".join(g.to_bytes(2, "big") for g in groups)


def _tcp_server_uids(server: tuple, client: tuple) -> list[int] | str:
    """The owners of the server side of the connection client -> server, from /proc/net/tcp(6).

    The entry of the server side shows its owner while a process holds it (inode not 0). Before
    the server accept()s it, it has no inode yet: then the listener on that port tells who will.
    A server side in any other state without an inode is one its owner already closed (it shows as
    root, inode 0): refused, since what it sent may still wait in our buffer."""
    uids: list[int] = []
    listeners: list[int] = []
    seen = False
    pending = False
    for name, family6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        if family6 and not os.path.exists(name):
            continue
        want = f"{_hex_address(server[0], server[1], family6)} {_hex_address(client[0], client[1], family6)}"
        port = f":{server[1]:04X}"
        listen_at = (_hex_address(server[0], server[1], family6), ("0" * (32 if family6 else 8)) + port)
        with open(name, "rb") as f:
            text = f.read().decode("ascii", "replace")
        for line in text.splitlines()[1:]:
            if port not in line:
                continue
            fields = line.split()
            if len(fields) < 10:
                continue
            if f"{fields[1]} {fields[2]}" == want:
                seen = True
                if fields[9] != "0":
                    uids.append(int(fields[7]))
                elif fields[3] in (_ESTABLISHED, _SYN_RECV):
                    pending = True
                    uids.append(int(fields[7]))  # newer kernels show the owner even here; older ones 0
                else:
                    return "its side of the connection was already closed by its owner"
            elif fields[3] == _LISTEN and fields[1] in listen_at and fields[9] != "0":
                listeners.append(int(fields[7]))
    if not seen:
        return "no socket of this machine holds its side of the connection (a port forwarded elsewhere?)"
    if pending:
        if not listeners:
            return "nobody listens there any more"
        uids.extend(listeners)
    return uids


# NETLINK_SOCK_DIAG (linux/sock_diag.h, linux/inet_diag.h): the kernel looks the server side up by
# its exact 4-tuple, where the /proc scan above reads every TCP socket of the machine (~18 ms with
# 6,600 of them). Same rules, same answers: _tcp_server_uids is the reference.
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY = 4, 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_TCP_ESTABLISHED, _TCP_SYN_RECV, _TCP_LISTEN = 1, 3, 10
_AF_INET, _AF_INET6 = 2, 10
_ENOENT = 2
_ALL_STATES = 0xFFFFFFFF
_NOCOOKIE = b"\xff" * 8  # INET_DIAG_NOCOOKIE in both words
_V4_MAPPED = b"\0" * 10 + b"\xff\xff"


class _DiagError(Exception):
    """The kernel answered a sock_diag request with this errno."""

    def __init__(self, errno: int) -> None:
        super().__init__(errno)
        self.errno = errno


def _diag_address(host: str) -> tuple[int, bytes]:
    """(family, raw address) as inet_diag looks it up: a v4-mapped IPv6 address as IPv4."""
    if ":" not in host:
        return _AF_INET, bytes(int(part) for part in host.split("."))
    raw = _ipv6_bytes(host)
    if raw[:12] == _V4_MAPPED:
        return _AF_INET, raw[12:]
    return _AF_INET6, raw


def _plain(raw: bytes) -> bytes:
    """An address an AF_INET6 socket reports, as _diag_address spells it."""
    return raw[12:] if len(raw) == 16 and raw[:12] == _V4_MAPPED else raw


def _diag_server_uids(server: tuple, client: tuple) -> list[int] | str | None:
    """What _tcp_server_uids answers, from one exact inet_diag lookup of the server side
    (src = server, dst = us); None when this system offers no sock_diag (then the /proc scan)."""
    mod = sys.modules.get("_socket") or sys.modules.get("socket")
    if getattr(mod, "AF_NETLINK", None) is None:
        return None
    family, server_raw = _diag_address(server[0])
    client_family, client_raw = _diag_address(client[0])
    if family != client_family:
        return None
    try:
        nl = mod.socket(mod.AF_NETLINK, mod.SOCK_DGRAM, _NETLINK_SOCK_DIAG)  # type: ignore[union-attr]
    except OSError:
        return None
    try:
        nl.settimeout(2.0)  # the kernel answers at once; this only bounds a broken emulation
        return _diag_lookup(nl, family, (server_raw, server[1]), (client_raw, client[1]))
    except (OSError, _DiagError, ValueError):
        return None  # EPERM, no inet_diag module, a short or odd reply: let /proc answer
    finally:
        nl.close()


def _diag_lookup(nl: object, family: int, server: tuple, client: tuple) -> list[int] | str:
    try:
        [found] = _diag_request(nl, family, _ALL_STATES, server, client, dump=False)
    except _DiagError as exc:
        if exc.errno != _ENOENT:
            raise
        found = None
    if (found is None or found[1] == _TCP_LISTEN
            or ((_plain(found[2][0]), found[2][1]), (_plain(found[3][0]), found[3][1])) != (server, client)):
        # ENOENT also means "no inet_diag handler": our own side must be found if it works at all
        # (and a miss of the exact 4-tuple may come back as the listener of that port instead)
        _diag_request(nl, family, _ALL_STATES, client, server, dump=False)
        return "no socket of this machine holds its side of the connection (a port forwarded elsewhere?)"
    _family, state, _local, _remote, uid, inode = found
    if inode != 0:
        return [uid]
    if state not in (_TCP_ESTABLISHED, _TCP_SYN_RECV):
        return "its side of the connection was already closed by its owner"
    # not accept()ed yet (a request socket shows uid 0): the listener on that port tells who will,
    # every one /proc/net/tcp and tcp6 would list: bound to the server's address or the wildcard
    uids = [uid]
    listeners = []
    for listen_family in (_AF_INET, _AF_INET6):
        width = 4 if listen_family == _AF_INET else 16
        exact = server[0] if len(server[0]) == width else _V4_MAPPED + server[0] if width == 16 else None
        try:
            answers = _diag_request(nl, listen_family, 1 << _TCP_LISTEN, (bytes(width), server[1]),
                                    (bytes(width), 0), dump=True)
        except _DiagError as exc:
            if listen_family == _AF_INET6 and exc.errno == _ENOENT:  # a kernel without IPv6
                continue
            raise
        for _f, l_state, (l_addr, l_port), _r, l_uid, l_inode in answers:
            if l_state == _TCP_LISTEN and l_port == server[1] and l_inode != 0 and l_addr in (exact, bytes(width)):
                listeners.append(l_uid)
    if not listeners:
        return "nobody listens there any more"
    return uids + listeners


def _diag_request(nl: object, family: int, states: int, src: tuple, dst: tuple, dump: bool) -> list[tuple]:
    """Send one inet_diag_req_v2 for TCP; the replies as (family, state, (src, sport), (dst, dport),
    uid, inode), addresses as raw bytes (4 for an AF_INET socket, 16 for an AF_INET6 one)."""
    order = sys.byteorder
    sockid = (src[1].to_bytes(2, "big") + dst[1].to_bytes(2, "big")
              + src[0].ljust(16, b"\0") + dst[0].ljust(16, b"\0")
              + bytes(4) + _NOCOOKIE)  # idiag_if 0: any interface
    body = bytes((family, 6, 0, 0)) + states.to_bytes(4, order) + sockid  # IPPROTO_TCP, no extensions
    flags = _NLM_F_REQUEST | (_NLM_F_DUMP if dump else 0)
    header = ((16 + len(body)).to_bytes(4, order) + _SOCK_DIAG_BY_FAMILY.to_bytes(2, order)
              + flags.to_bytes(2, order) + (1).to_bytes(4, order) + bytes(4))
    nl.sendto(header + body, (0, 0))  # type: ignore[attr-defined]
    answers: list[tuple] = []
    while True:
        data = nl.recv(65536)  # type: ignore[attr-defined]
        at = 0
        while at + 16 <= len(data):
            size = int.from_bytes(data[at:at + 4], order)
            kind = int.from_bytes(data[at + 4:at + 6], order)
            if size < 16 or at + size > len(data):
                raise ValueError("a truncated sock_diag reply")
            msg = data[at + 16:at + size]
            at += (size + 3) & ~3
            if kind == _NLMSG_DONE:
                return answers
            if kind == _NLMSG_ERROR:
                errno = -int.from_bytes(msg[:4], order, signed=True)
                if errno:
                    raise _DiagError(errno)
                continue
            if kind != _SOCK_DIAG_BY_FAMILY or len(msg) < 72:
                raise ValueError("an unexpected sock_diag reply")
            width = 4 if msg[0] == _AF_INET else 16
            answers.append((msg[0], msg[1], (msg[8:8 + width], int.from_bytes(msg[4:6], "big")),
                            (msg[24:24 + width], int.from_bytes(msg[6:8], "big")),
                            int.from_bytes(msg[64:68], order), int.from_bytes(msg[68:72], order)))
        if not dump:
            return answers
