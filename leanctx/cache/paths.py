"""Path safety and file loading for the read cache.

A read is allowed only for a regular file whose fully resolved path (symlinks resolved first) lies
inside one of the conversation's workspace roots / cwd or inside a configured allow-list folder.
The root "/" is never a root (it would allow everything). What comes back is text or a clear
error, never bytes: directories, devices, FIFOs, sockets, binary files (a NUL byte), files over
the size cap and non-UTF-8 text are refused, and a file that vanishes between resolving and
reading is a clean error.

A file is opened once (O_NONBLOCK so a FIFO cannot hang us), checked with fstat on the open
descriptor, read, and fstat'ed again: a file that changed while we read it is read again.

The open itself cannot leave the roots, even if a folder is swapped for a symlink between the check
and the open: it walks the resolved path one component at a time from a descriptor of the root that
holds it (`openat` with O_NOFOLLOW, on Linux and macOS alike), so a symlink met anywhere below the
root is refused. The descriptor's own path (/proc/self/fd on Linux, F_GETPATH on macOS) is checked
as well where it can be read. Where the walk is not possible, the plain open counts only if that
path check succeeds: a file whose location cannot be verified is refused, never returned.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import operator
import os
import stat as statmod

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

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
    try:
        real = os.path.realpath(p)
    except OSError as exc:  # a symlink removed while realpath was reading it; a loop on old Pythons
        raise ReadError("changed", f"{path}: the path changed while it was being resolved ({exc.strerror or exc}); read it again") from None
    holders = [r for r in roots if inside(real, r)]
    if holders:
        root = min(holders, key=len)
        return real, (os.path.relpath(real, root) if real != root else ".").replace(os.sep, "/")
    if any(inside(real, a) for a in allow):
        return real, real
    where = ", ".join(roots) if roots else "none known for this conversation"
    raise ReadError("outside_roots", f"{path}: outside the workspace (roots: {where}) and not in the allow-list")


def outer_roots(roots: tuple[str, ...]) -> list[str]:
    """The roots not inside another one (real paths in, real paths out)."""
    return [r for r in roots if not any(o != r and inside(r, o) for o in roots)]


def named(path: str, roots: tuple[str, ...], cwd: str | None, cwd_real: str | None = None,
          every_root: tuple[str, ...] = ()) -> tuple[str, str]:
    """(name, display) of a read `resolve` accepted: the file as the model names it, not where it
    leads. The name is the requested path made absolute against `cwd` and normalised lexically,
    symlinks kept, except that a leading working directory reached through a symlink is written
    as its real path (`cwd_real`, default: resolved here) so one file under one spelling of the
    project has one name. What a conversation holds belongs to a name: bytes read through a
    symlink or a second hard link are not held under the other name, and a symlink retargeted is
    the same name with other bytes.

    The display is the name relative to the outermost workspace root holding it when the
    conversation has a single outermost root, counting `every_root` it was given before (a cwd
    that moved to another folder and back); with several (two folders both holding `src/x.py`)
    or outside every root (reached through a symlink from outside, or the allow-list), the
    absolute name: a relative one could name another file."""
    p = os.path.expanduser(path)
    if not os.path.isabs(p):
        p = os.path.join(cwd or roots[0], p)
    name = os.path.normpath(p)
    if cwd and not any(inside(name, r) for r in roots):
        lc = os.path.normpath(os.path.abspath(os.path.expanduser(cwd)))
        if inside(name, lc):
            if cwd_real is None:
                try:
                    cwd_real = os.path.realpath(lc)
                except OSError:
                    cwd_real = lc
            name = os.path.normpath(os.path.join(cwd_real, _below(name, lc)))
    holders = [r for r in roots if inside(name, r)]
    if not holders or len(outer_roots(tuple(dict.fromkeys(roots + every_root)))) > 1:
        return name, name
    root = min(holders, key=len)
    return name, (_below(name, root) if name != root else ".").replace(os.sep, "/")


def _below(path: str, root: str) -> str:
    """`path` relative to `root`, both normalised and absolute, `path` inside `root`."""
    return path[len(root.rstrip(os.sep)) + 1:] if path != root else "."


_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
# the component walk needs openat and both flags; without them only a readable descriptor path is proof
CAN_WALK = os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW") and hasattr(os, "O_DIRECTORY")


def _fd_path(fd: int) -> str | None:
    """Where the open descriptor really is, or None when this platform cannot say."""
    get_path = getattr(fcntl, "F_GETPATH", None) if fcntl else None
    try:
        if get_path is not None:  # macOS / BSD
            return os.fsdecode(fcntl.fcntl(fd, get_path, bytes(1024)).split(b"\0", 1)[0])
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _open_error(exc: OSError, display: str) -> ReadError:
    if isinstance(exc, FileNotFoundError):
        return ReadError("not_found", f"{display}: no such file (deleted or moved?)")
    if isinstance(exc, IsADirectoryError):
        return ReadError("not_a_file", f"{display}: is a directory")
    if isinstance(exc, PermissionError):
        return ReadError("permission", f"{display}: permission denied")
    return ReadError("io", f"{display}: cannot open ({exc.strerror or exc})")


def _swapped(display: str) -> ReadError:
    return ReadError("changed", f"{display}: a folder or the file on its path was replaced (by a symlink or "
                     "a file) after it was checked; refused, read it again")


def _walk_open(real: str, root: str, display: str) -> int:
    """Open `real` (inside `root`) component by component from a descriptor of `root`, refusing a
    symlink at any level: what is opened is beneath `root` whatever changes meanwhile."""
    parts = [p for p in os.path.relpath(real, root).split(os.sep) if p not in ("", ".")] if real != root else []
    try:
        fd = os.open(root, _DIR_FLAGS if parts else _FILE_FLAGS)  # an allow-list entry may be a file
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
            raise _swapped(display) from None
        raise _open_error(exc, display) from None
    try:
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nxt = os.open(name, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                # O_NOFOLLOW on a symlink: ELOOP (EMLINK on FreeBSD); with O_DIRECTORY Linux says ENOTDIR
                if exc.errno in (errno.ELOOP, errno.EMLINK) or (not last and exc.errno == errno.ENOTDIR):
                    raise _swapped(display) from None
                raise _open_error(exc, display) from None
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_beneath(real: str, display: str, allowed: tuple[str, ...]) -> int:
    """A descriptor of `real` that provably lies inside one of `allowed`, or ReadError."""
    holders = [r for r in allowed if inside(real, r)]
    if not holders:
        raise ReadError("outside_roots", f"{display}: outside the workspace and not in the allow-list")
    if CAN_WALK:
        fd = _walk_open(real, max(holders, key=len), display)
    else:
        try:
            fd = os.open(real, _FILE_FLAGS)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise _swapped(display) from None
            raise _open_error(exc, display) from None
    opened = _fd_path(fd)
    if opened is None and not CAN_WALK:
        os.close(fd)
        raise ReadError("unverified", f"{display}: refused: this platform offers no way to prove the opened "
                        "file is inside the workspace (no openat with O_NOFOLLOW, no /proc/self/fd, no F_GETPATH)")
    if opened is not None and not any(inside(opened, r) for r in allowed):
        os.close(fd)
        raise ReadError("outside_roots", f"{display}: resolves outside the workspace")
    return fd


def load(real: str, display: str, max_bytes: int, allowed: tuple[str, ...]) -> FileSnap:
    """Read `real` (already checked by resolve, and inside one of the real paths `allowed`) into a
    FileSnap, or raise ReadError."""
    for _attempt in range(READ_RETRIES):
        fd = _open_beneath(real, display, allowed)
        try:
            st = os.fstat(fd)
            if statmod.S_ISDIR(st.st_mode):
                raise ReadError("not_a_file", f"{display}: is a directory")
            if not statmod.S_ISREG(st.st_mode):
                raise ReadError("not_a_file", f"{display}: not a regular file (device, FIFO or socket)")
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
