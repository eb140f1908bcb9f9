"""A minimal Redis client (RESP2 over one socket), standard library only.

Why not redis-py: the hooks run under `python -I -S`, where site-packages (and so redis-py) cannot
be imported at all, and `import redis` alone costs 150-200 ms (it pulls in asyncio) against a
hook budget of about 20 ms. The store needs a dozen commands, a pipeline and WATCH/MULTI/EXEC;
this is that, on the C `_socket` module (`import socket` costs ~15 ms through enum/selectors).

URLs: `redis://[[user]:password@]host[:port][/db]`, `rediss://…` (TLS, system CAs),
`unix://[[user]:password@]/path/to/socket[?db=N]`.

On a unix socket or a loopback port, who runs the server is checked before anything (AUTH
included) is sent: another local account can take that address while the user's Redis is down
(leanctx.state.peerowner). A non-loopback `redis://` peer is not a local account and is not
checked; `rediss://` verifies its server by TLS.
"""

from __future__ import annotations

import os

try:
    import _socket as _sock
except ImportError:  # another Python implementation: the public module has the same names
    import socket as _sock  # type: ignore[no-redef]

DEFAULT_TIMEOUT_S = 5.0


class RespError(Exception):
    """An error reply from the server (`-ERR …`, `-WRONGTYPE …`)."""


class RespConnectionError(OSError):
    """The server could not be reached, or the connection broke."""


class RespNotOurs(RespConnectionError):
    """The server on a local address is run by an account we do not trust; nothing was sent."""


class Address:
    __slots__ = ("scheme", "host", "port", "path", "db", "username", "password")

    def __init__(self, url: str) -> None:
        scheme, sep, rest = url.partition("://")
        if not sep or scheme not in ("redis", "rediss", "unix"):
            raise ValueError("expected redis://, rediss:// or unix://")
        self.scheme = scheme
        rest, _, query = rest.partition("?")
        self.username = self.password = None
        at = rest.rfind("@")
        if at >= 0:
            user, colon, password = rest[:at].partition(":")
            self.username = _unquote(user) or None
            self.password = _unquote(password) if colon else _unquote(user)
            if not colon:
                self.username = None
            rest = rest[at + 1:]
        self.db = 0
        self.host, self.port, self.path = "", 6379, ""
        if scheme == "unix":
            self.path = _unquote(rest)
            for pair in query.split("&"):
                key, _, value = pair.partition("=")
                if key == "db" and value:
                    self.db = int(value)
            if not self.path:
                raise ValueError("unix:// needs a socket path")
            return
        hostport, _, db = rest.partition("/")
        if db:
            self.db = int(db)
        if hostport.startswith("["):  # [::1]:6379
            host, _, port = hostport[1:].partition("]")
            port = port[1:]
        else:
            host, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
        self.host = _unquote(host) or "localhost"
        if port:
            self.port = int(port)

    def display(self) -> str:
        """Where the server is, without credentials, for messages."""
        if self.scheme == "unix":
            return f"unix://{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _unquote(text: str) -> str:
    """%XX decoding (passwords in URLs), without urllib.parse (it imports re)."""
    if "%" not in text:
        return text
    raw = text.encode("utf-8")
    out = bytearray()
    i = 0
    while i < len(raw):
        pair = raw[i + 1:i + 3]
        if raw[i] == 0x25 and len(pair) == 2 and all(c in b"0123456789abcdefABCDEF" for c in pair):
            out.append(int(pair, 16))
            i += 3
        else:
            out.append(raw[i])
            i += 1
    return out.decode("utf-8", "replace")


class Client:
    """One connection, opened on first use and again after a fork or a broken connection."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.address = Address(url)
        self.timeout = timeout
        self._sock: object = None
        self._pid = 0
        self._buf = bytearray()

    # --- public ---------------------------------------------------------------------------------

    def call(self, *args: object) -> object:
        """One command, its reply. RespError on an error reply."""
        return self.pipeline([args])[0]

    def pipeline(self, commands: list[tuple]) -> list[object]:
        """Send every command, then read every reply (error replies come back as RespError values)."""
        self._ensure()
        try:
            self._sock.sendall(b"".join(_encode(c) for c in commands))  # type: ignore[attr-defined]
            return [self._read() for _ in commands]
        except OSError as exc:
            self.close()
            raise RespConnectionError(f"connection lost: {exc}") from None

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()  # type: ignore[attr-defined]
            except OSError:
                pass
        self._sock = None
        self._buf.clear()

    @property
    def connected(self) -> bool:
        return self._sock is not None and self._pid == os.getpid()

    # --- connection -----------------------------------------------------------------------------

    def _ensure(self) -> None:
        if self._sock is not None and self._pid == os.getpid():
            return
        self._sock = None  # after a fork the parent's socket is not ours: never close or use it
        self._buf.clear()
        try:
            self._sock = self._connect()
        except OSError as exc:
            raise RespConnectionError(f"cannot connect: {exc}") from None
        if self.address.scheme != "rediss":
            from leanctx.state import peerowner

            try:
                refusal = peerowner.problem(self._sock, self.address.display(), self.address.scheme == "unix")
            except OSError as exc:  # the connection broke while we looked
                refusal = f"cannot connect: {exc}"
            if refusal:
                self.close()
                raise RespNotOurs(refusal)
        self._pid = os.getpid()
        a = self.address
        setup: list[tuple] = []
        if a.password is not None:
            setup.append(("AUTH", a.username, a.password) if a.username else ("AUTH", a.password))
        if a.db:
            setup.append(("SELECT", a.db))
        if setup:
            for reply in self.pipeline(setup):
                if isinstance(reply, RespError):
                    self.close()
                    raise RespConnectionError(f"set-up refused: {reply}")

    def _connect(self) -> object:
        a = self.address
        if a.scheme == "unix":
            s = _sock.socket(_sock.AF_UNIX, _sock.SOCK_STREAM)
            s.settimeout(self.timeout)
            try:
                s.connect(a.path)
            except OSError:
                s.close()
                raise
            return s
        if a.scheme == "rediss":
            import socket
            import ssl

            raw = socket.create_connection((a.host, a.port), timeout=self.timeout)
            return ssl.create_default_context().wrap_socket(raw, server_hostname=a.host)
        error: OSError | None = None
        # an ASCII host as bytes: a str would load the idna codec (and with it re and enum)
        host: str | bytes = a.host.encode("ascii") if a.host.isascii() else a.host
        for family, kind, proto, _, addr in _sock.getaddrinfo(host, a.port, 0, _sock.SOCK_STREAM):
            s = _sock.socket(family, kind, proto)
            s.settimeout(self.timeout)
            try:
                s.connect(addr)
            except OSError as exc:
                s.close()
                error = exc
                continue
            if family != getattr(_sock, "AF_UNIX", -1):
                s.setsockopt(_sock.IPPROTO_TCP, _sock.TCP_NODELAY, 1)
            return s
        raise error or OSError(f"no address for {a.host}")

    # --- RESP2 ----------------------------------------------------------------------------------

    def _line(self) -> bytes:
        while True:
            end = self._buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[: end + 2]
                return line
            self._fill()

    def _fill(self) -> None:
        chunk = self._sock.recv(65536)  # type: ignore[attr-defined]
        if not chunk:
            raise OSError("server closed the connection")
        self._buf += chunk

    def _read(self) -> object:
        line = self._line()
        kind, body = line[:1], line[1:]
        if kind == b"+":
            return body.decode("utf-8", "replace")
        if kind == b"-":
            return RespError(body.decode("utf-8", "replace"))
        if kind == b":":
            return int(body)
        if kind == b"$":
            size = int(body)
            if size < 0:
                return None
            while len(self._buf) < size + 2:
                self._fill()
            data = bytes(self._buf[:size])
            del self._buf[: size + 2]
            return data
        if kind == b"*":
            count = int(body)
            return None if count < 0 else [self._read() for _ in range(count)]
        raise OSError(f"unexpected reply from the server: {line[:40]!r}")


def _encode(args: tuple) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, (bytes, bytearray)):
            data = bytes(arg)
        elif isinstance(arg, str):
            data = arg.encode("utf-8")
        elif isinstance(arg, int) and not isinstance(arg, bool):
            data = b"%d" % arg
        else:
            raise TypeError(f"cannot send {type(arg).__name__} to Redis")
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def check(reply: object) -> object:
    """The reply, or raise it when it is an error reply."""
    if isinstance(reply, RespError):
        raise reply
    return reply
