"""Is a private folder (the data dir, `$CKS_HOME`) really ours, and creating one that is.

Another account that owns the folder, can write into it, or can rename or replace any folder on
the way to it could plant the files leanctx trusts (the read gate's secret, conversation records,
bot threads). So a folder is used only when, after following every symlink on its path:

- it is owned by us and nobody else can write into it (group and others have no write bit), and
- every folder above it (and above each symlink's target) is owned by us or by root and is not
  writable by group or others, unless it has the sticky bit (like /tmp: others cannot rename
  or delete what we put there).

A folder that does not exist yet passes when its parents do; `make_private()` then creates it and
every missing folder below the first existing one as 0700, whatever the umask. Standard library
only: the hook fast path calls this on every event (a handful of stat calls).
"""

from __future__ import annotations

import os
import stat

DIR_MODE = 0o700
FILE_MODE = 0o600


class Unsafe(ValueError):
    """A folder another account could plant files in or swap: the one-line reason and the fix."""


def _euid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else -1


def _ancestors(real: str) -> list[str]:
    """`/a/b/c` -> [`/`, `/a`, `/a/b`] (the folders above a resolved path)."""
    out = []
    parent = os.path.dirname(real)
    while True:
        out.append(parent)
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    return out[::-1]


def _prefixes(path: str) -> list[str]:
    """Every lexical prefix of an absolute path, shortest first, the path itself last."""
    parts = [p for p in path.split(os.sep) if p]
    return [os.sep + os.sep.join(parts[:i]) for i in range(1, len(parts) + 1)]


def _parent_problem(folder: str, st: os.stat_result, me: int) -> str | None:
    if st.st_uid not in (me, 0):
        return f"{folder} on its path is owned by uid {st.st_uid}, who could swap it"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return f"{folder} on its path is writable by group or others (no sticky bit), so they could swap it"
    return None


def problem(path: str | os.PathLike, what: str = "data dir") -> str | None:
    """Why `path` must not be used as `what` (one line with the fix), or None when it is safe."""
    if not hasattr(os, "geteuid"):
        return None  # no uids to compare (Windows): the platform's ACLs decide
    me = _euid()
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    try:
        chain = _plain_chain(path)
    except OSError as exc:
        return f"refusing {what} {path}: cannot check it ({exc.strerror or exc}); set {_var(what)} to a folder of yours"
    if chain is not None:  # no symlink on the way (the usual case): one lstat per component
        for folder, st in chain:
            reason = _parent_problem(folder, st, me) if folder != path else None
            if reason:
                return f"refusing {what} {path}: {reason}; use a folder only you can change (set {_var(what)})"
        if not chain or chain[-1][0] != path:
            return None  # not there yet: made by us, 0700
        return _own_problem(what, path, path, chain[-1][1], me)
    seen: set[str] = set()
    try:
        for prefix in _prefixes(path)[:-1] + [path]:
            real = os.path.realpath(prefix)
            for folder in _ancestors(real) + ([real] if prefix != path else []):
                if folder in seen:
                    continue
                seen.add(folder)
                try:
                    st = os.stat(folder)
                except FileNotFoundError:
                    continue  # created later, by us, as 0700
                reason = _parent_problem(folder, st, me)
                if reason:
                    return f"refusing {what} {path}: {reason}; use a folder only you can change (set {_var(what)})"
        real = os.path.realpath(path)
        try:
            st = os.stat(real)
        except FileNotFoundError:
            return None
    except OSError as exc:
        return f"refusing {what} {path}: cannot check it ({exc.strerror or exc}); set {_var(what)} to a folder of yours"
    return _own_problem(what, path, real, st, me)


def _plain_chain(path: str) -> list[tuple[str, os.stat_result]] | None:
    """lstat of `/` and every prefix of `path` that exists; None when one is a symlink."""
    out = []
    for prefix in [os.sep] + _prefixes(path):
        try:
            st = os.lstat(prefix)
        except FileNotFoundError:
            break  # neither it nor anything below exists yet
        if stat.S_ISLNK(st.st_mode):
            return None
        out.append((prefix, st))
    return out


def _own_problem(what: str, path: str, real: str, st: os.stat_result, me: int) -> str | None:
    """The folder itself: ours, and nobody else can write into it."""
    shown = path if real == path else f"{path} (-> {real})"
    if st.st_uid != me:
        return (f"refusing {what} {shown}: it is owned by uid {st.st_uid}, not by you (uid {me}), who could plant "
                f"files in it; remove it or set {_var(what)} to a folder of yours")
    if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022:  # not a folder at all: its users say so
        return (f"refusing {what} {shown}: it is writable by group or others, who could plant files in it; "
                f"chmod 700 {real}")
    return None


def _var(what: str) -> str:
    return "CKS_HOME" if "CKS" in what else "LEANCTX_HOME"


def check(path: str | os.PathLike, what: str = "data dir") -> None:
    """Raise Unsafe with the reason when `path` must not be used."""
    reason = problem(path, what)
    if reason:
        raise Unsafe(reason)


def make_private(path: str | os.PathLike) -> None:
    """Create `path` and every missing folder above it (up to the first existing one) as 0700,
    whatever the umask; an existing folder is left as it is."""
    path = os.path.abspath(os.fspath(path))
    missing = []
    folder = path
    while not os.path.isdir(folder):
        missing.append(folder)
        up = os.path.dirname(folder)
        if up == folder:
            break
        folder = up
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue  # made by a concurrent process: the caller's check covers it
        os.chmod(folder, DIR_MODE)  # the umask may have taken bits we need; never more than 0700


def write_private(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to a 0600 file (created so, whatever the umask; never through a symlink)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def tighten(path: str | os.PathLike) -> None:
    """Take group and other bits off a folder of ours (a data dir an older version made 0755)."""
    st = os.stat(path)
    if st.st_uid == _euid() and stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700 | DIR_MODE)
