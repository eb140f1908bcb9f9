"""Path safety and file loading for the read cache.

A read is allowed only for a regular file whose fully resolved path (symlinks resolved first) lies
inside one of the conversation's workspace roots / cwd or inside a configured allow-list folder.
The root "/" is never a root (it would allow everything). What comes back is text or a clear
error, never bytes: directories, devices, FIFOs, sockets, binary files (a NUL byte), files over
the size cap and non-UTF-8 text are refused, and a file that vanishes between resolving and
reading is a clean error.

A file is opened once (O_NOFOLLOW, O_NONBLOCK so a FIFO cannot hang us), checked with fstat on the
open descriptor, read, and fstat'ed again: a file that changed while we read it is read again.
On Linux the opened descriptor's path (/proc/self/fd) is checked against the roots once more, so a
path component swapped for a symlink between check and open is refused too.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
import os
import stat as statmod

READ_RETRIES = 3


class ReadError(Exception):
    """A read that must come back as `kind: "error"` with a clear message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FileSnap:
    """One consistent read of a file: its text and the facts a stub decision needs."""

    __slots__ = ("_starts", "fp", "ino", "mtime_ns", "nlines", "real", "size", "text")

    def __init__(self, real: str, size: int, mtime_ns: int, ino: int, text: str, fp: str) -> None:
        self.real = real
        self.size = size
        self.mtime_ns = mtime_ns
        self.ino = ino
        self.text = text
        self.fp = fp
        self.nlines = line_count(text)
        self._starts: list[int] | None = None

    @property
    def starts(self) -> list[int]:
        """Line offsets, built on first use: a whole-file stub or read never needs them."""
        if self._starts is None:
            self._starts = line_starts(self.text)
        return self._starts

    def slice(self, start: int, end: int) -> str:
        """Lines start..end (1-based, inclusive) with their original line endings."""
        a = self.starts[start - 1]
        b = self.starts[end] if end < self.nlines else len(self.text)
        return self.text[a:b]


def line_starts(text: str) -> list[int]:
    """Offsets where each line starts. Lines end at '\\n' only; a trailing newline ends the last
    line rather than starting an empty one; "" has no lines."""
    if not text:
        return []
    # start of line i = total length of the lines before it + one '\n' each (C loops only)
    starts = list(map(operator.add, itertools.accumulate(map(len, text.split("\n")), initial=0), itertools.count()))
    starts.pop()  # the running total after the last piece is len(text) + 1
    if starts[-1] == len(text):
        starts.pop()
    return starts


def line_count(text: str) -> int:
    """len(line_starts(text)) without building the list."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def fingerprint(data: bytes) -> str:
    """`<size>:<blake2b-128 hex>`: the size is part of it, so a hash prefix can't alias two sizes."""
    return f"{len(data)}:{hashlib.blake2b(data, digest_size=16).hexdigest()}"


def real_roots(roots) -> tuple[str, ...]:
    out = []
    for r in roots:
        if not isinstance(r, str) or not r or "\0" in r:
            continue
        rr = os.path.realpath(os.path.expanduser(r))
        if rr != os.sep and rr not in out:
            out.append(rr)
    return tuple(out)


def inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve(path: object, roots: tuple[str, ...], allow: tuple[str, ...], cwd: str | None) -> tuple[str, str]:
    """(real path, display path) or ReadError. `roots`/`allow` must already be real paths.
    The display path is relative to the outermost workspace root holding the file (stable for a
    conversation), or the real path for a file reached only through the allow-list."""
    if not isinstance(path, str) or not path.strip():
        raise ReadError("bad_path", "path must be a non-empty string")
    if "\0" in path:
        raise ReadError("bad_path", "path contains a NUL byte")
    p = os.path.expanduser(path)
    if not os.path.isabs(p):
        base = cwd or (roots[0] if roots else None)
        if not base:
            raise ReadError("bad_path", f"{path}: relative path, but no workspace root is known; pass an absolute path")
        p = os.path.join(base, p)
    real = os.path.realpath(p)
    holders = [r for r in roots if inside(real, r)]
    if holders:
        root = min(holders, key=len)
        return real, (os.path.relpath(real, root) if real != root else ".").replace(os.sep, "/")
    if any(inside(real, a) for a in allow):
        return real, real
    where = ", ".join(roots) if roots else "none known for this conversation"
    raise ReadError("outside_roots", f"{path}: outside the workspace (roots: {where}) and not in the allow-list")


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def load(real: str, display: str, max_bytes: int, allowed: tuple[str, ...] = ()) -> FileSnap:
    """Read `real` (already checked by resolve) into a FileSnap, or raise ReadError."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    for _attempt in range(READ_RETRIES):
        try:
            fd = os.open(real, flags)
        except FileNotFoundError:
            raise ReadError("not_found", f"{display}: no such file (deleted or moved?)") from None
        except IsADirectoryError:
            raise ReadError("not_a_file", f"{display}: is a directory") from None
        except PermissionError:
            raise ReadError("permission", f"{display}: permission denied") from None
        except OSError as exc:
            raise ReadError("io", f"{display}: cannot open ({exc.strerror or exc})") from None
        try:
            st = os.fstat(fd)
            if statmod.S_ISDIR(st.st_mode):
                raise ReadError("not_a_file", f"{display}: is a directory")
            if not statmod.S_ISREG(st.st_mode):
                raise ReadError("not_a_file", f"{display}: not a regular file (device, FIFO or socket)")
            if allowed:
                opened = _fd_path(fd)
                if opened is not None and not any(inside(opened, r) for r in allowed):
                    raise ReadError("outside_roots", f"{display}: resolves outside the workspace")
            if st.st_size > max_bytes:
                raise ReadError("too_large", f"{display}: {st.st_size} bytes, over the {max_bytes}-byte cap; read a window with start_line/end_line from a smaller file or raise the cap")
            chunks = []
            left = max_bytes + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            data = b"".join(chunks)
            st2 = os.fstat(fd)
        except ReadError:
            raise
        except OSError as exc:
            raise ReadError("io", f"{display}: read failed ({exc.strerror or exc})") from None
        finally:
            os.close(fd)
        if len(data) > max_bytes:
            raise ReadError("too_large", f"{display}: over the {max_bytes}-byte cap")
        if (st2.st_mtime_ns, st2.st_size) != (st.st_mtime_ns, st.st_size) or len(data) != st2.st_size:
            continue  # written while we read: read again
        if b"\0" in data:
            raise ReadError("binary", f"{display}: binary file (contains NUL bytes); not returned as text")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReadError("not_utf8", f"{display}: not UTF-8 text (invalid byte at offset {exc.start}); not returned") from None
        return FileSnap(real, len(data), st.st_mtime_ns, st.st_ino, text, fingerprint(data))
    raise ReadError("unstable", f"{display}: the file kept changing while being read; try again")
