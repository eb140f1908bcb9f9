"""Reading and writing users' config files without ever damaging them.

- A symlink on the way to a config (the file or any folder below HOME or the --project DIR) is
  followed only when the real path stays inside HOME or that project, else refused: we never
  write through a link to somewhere we were not asked to touch.
- Only regular files are read, without ever blocking: a FIFO, socket, device, folder or symlink
  loop where a config should be is refused with a message, at once.
- Writes are atomic (temp file in the target's folder, fsync, rename, fsync of the folder),
  keep the file's permission bits, and leave a timestamped copy of the old bytes in
  `<data dir>/backups/` (the newest BACKUPS_KEPT_PER_FILE per file, each name unique to its file). Temp files a killed run left behind are removed by the next one.
- A lock in the data dir serialises concurrent leanctx runs, and the file is re-read right
  before the rename: if a running host rewrote it meanwhile, the caller re-plans on fresh bytes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from leanctx import safedir

BACKUPS_KEPT_PER_FILE = 10
_TEMP_NAME = re.compile(r"^\..+\.leanctx-(\d{1,10})\.tmp$")
STALE_TEMP_S = 600  # a temp file this old is a leftover even if its pid is alive again (reused)
DATA_SUBDIRS = ("bin", "backups", "installed")  # what init/uninstall write in the data dir
DATA_DIR_FIX = "make it writable or set LEANCTX_HOME to a writable folder"


class ConfigError(Exception):
    """A config we must not touch; the message names the file (and line/column when parsing)."""


class ParseError(ConfigError):
    """A config that is not the JSON or TOML its host reads: init refuses it until the user
    corrects it, so doctor's fix names the spot (`path:line:col`) and what the parser wanted."""

    def __init__(self, path: Path, line: int, col: int, language: str, reason: str) -> None:
        self.path, self.line, self.col, self.language, self.reason = path, line, col, language, reason
        super().__init__(f"{path}:{line}:{col}: cannot parse{'' if language == 'JSON' else ' ' + language}"
                         f"{': ' + reason if reason else ''}; left untouched")


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass
class Target:
    """A config path as given (what the user knows) and the real file we would write."""

    path: Path
    real: Path


def real_folder(folder: Path | None) -> Path | None:
    """A --project DIR as the one real path every record is keyed by (`.`, `../A` and a symlink
    to A are all A)."""
    return None if folder is None else Path(os.path.realpath(folder))


def resolve_target(path: Path, home: Path, project: Path | None = None) -> Target:
    """Where writing `path` would really land, refused when a symlink takes it out of bounds.

    A symlink anywhere below the folder we were pointed at (HOME, or the --project DIR) may lead
    only to somewhere inside HOME or that project: `~/.claude -> /elsewhere` is refused exactly
    like `~/.claude/settings.json -> /elsewhere/settings.json`. Links above it (HOME itself on a
    symlinked mount, a CLAUDE_CONFIG_DIR the user chose) are the user's own choice of place."""
    _check_reachable(path)
    real = Path(os.path.realpath(path))
    anchor = _anchor(path, home, project)
    expected = Path(os.path.realpath(anchor)) / path.relative_to(anchor)
    if real != expected:
        roots = [Path(os.path.realpath(home))] + ([Path(os.path.realpath(project))] if project is not None else [])
        if not any(real == root or root in real.parents for root in roots):
            where = f"{home}" + (f" and {project}" if project is not None else "")
            raise ConfigError(f"{path}: resolves through a symlink to {real}, outside {where}; refusing to write through it")
    return Target(path, real)


def _anchor(path: Path, home: Path, project: Path | None) -> Path:
    """The folder we were pointed at: the deepest of the project and HOME holding `path`, else its folder."""
    for root in (project, home):
        if root is not None and (path == root or root in path.parents):
            return root
    return path.parent


def _check_reachable(path: Path) -> None:
    """Refuse a path the OS cannot walk (a symlink loop, a file where a folder should be)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        pass  # a new file, or a dangling symlink: realpath says where it would land
    except OSError as exc:
        raise ConfigError(_os_problem(path, exc)) from None


def _os_problem(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"{path}: symlink loop; fix or remove the link"
    if exc.errno == errno.ENOTDIR:
        return f"{path}: a folder on this path is a file"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{path}: permission denied ({exc.strerror}); check the folder's permissions"
    return f"{path}: cannot read: {exc.strerror or exc}"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


BIG_BLOCK = 1 << 20


def return_big_blocks() -> None:
    """Have the C allocator give every block of BIG_BLOCK or more back to the OS when it is freed.

    glibc raises its mmap threshold to the size of the biggest block freed so far, so after one
    copy of a big config (tens of MB) is freed the next copies are carved from the heap, where
    growing a string copies it and freed holes stay resident: 0.9x the file size of peak memory
    that holds nothing (measured on an 18 MB ~/.claude.json). A fixed threshold stops that. Not
    glibc (macOS, musl): nothing to do."""
    import ctypes

    try:
        ctypes.CDLL(None).mallopt(-3, BIG_BLOCK)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError, TypeError):
        pass


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist.

    Never blocks: anything but a regular file (a FIFO would wait forever for a writer, a device
    never ends) is refused before it is opened, and the open itself cannot block."""
    with _open_regular(path) as f:
        return None if f is None else f.read()


COMPARE_CHUNK = 1 << 20


def holds(path: Path, expected: bytes | None) -> bool:
    """Whether `path` holds exactly `expected` (None: it does not exist), read a chunk at a time:
    the re-check before a rename never makes a second copy of a big file."""
    with _open_regular(path) as f:
        if f is None or expected is None:
            return f is None and expected is None
        if os.fstat(f.fileno()).st_size != len(expected):
            return False
        view, pos = memoryview(expected), 0
        while chunk := f.read(COMPARE_CHUNK):
            if chunk != view[pos : pos + len(chunk)]:
                return False
            pos += len(chunk)
        return pos == len(expected)


@contextlib.contextmanager
def _open_regular(path: Path) -> Iterator:
    """The regular file at `path` opened for reading (None when it does not exist); see read_bytes."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{path}: is a directory, expected a config file")
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{path}: not a regular file ({_kind(mode)}); refusing to read or replace it")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = None
    except OSError as exc:
        raise ConfigError(_os_problem(path, exc)) from None
    if fd is None:
        yield None
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
            raise ConfigError(f"{path}: not a regular file; refusing to read or replace it")
        with os.fdopen(fd, "rb", closefd=False) as f:
            yield f
    except OSError as exc:
        raise ConfigError(_os_problem(path, exc)) from None
    finally:
        os.close(fd)


def decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(path, exc) from None


def not_utf8(path: Path, exc: UnicodeDecodeError) -> ConfigError:
    return ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); left untouched")


def check_writable(path: Path) -> None:
    """Fail before writing anything when the file or its folder cannot be written."""
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(f"{path}: is read-only; make it writable (chmod u+w) or run without this agent")
    problem = folder_problem(path.parent)
    if problem:
        raise ConfigError(f"{path}: {problem}")


def folder_problem(folder: Path) -> str | None:
    """Why files cannot be created in `folder` (or in the folders we would create for it), or None."""
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} is not writable"
    return None


_STAMP = re.compile(r"^\d{8}T\d{15}$")
BACKUP_SUFFIX = ".backup"  # an older leanctx wrote `<folded path>.<stamp>.bak`: never pruned by name


def backup_prefix(path: Path) -> str:
    """The start of every backup name of `path` and of no other file's: a readable label (the
    path with `/` as `__`, other characters as `_`, the end kept) then the hash of its bytes."""
    raw = os.fsencode(path)
    label = re.sub(r"[^A-Za-z0-9._-]", "_", str(path).strip("/").replace("/", "__"))[-150:]
    return f"{label}.{hashlib.sha256(raw).hexdigest()[:32]}."


def backup(data_dir: Path, path: Path, data: bytes) -> Path:
    """Keep a timestamped copy of `data` (the bytes about to be replaced), and only the newest
    BACKUPS_KEPT_PER_FILE of this file's: names are compared exactly, never as a pattern (a `[`
    or `*` in a path, or `a__b` beside `a/b`, must not reach another file's backups)."""
    folder = data_dir / "backups"
    safedir.make_private(folder)
    prefix = backup_prefix(path)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{time.time_ns() % 1_000_000_000:09d}"
    dest = folder / f"{prefix}{stamp}{BACKUP_SUFFIX}"
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    for stale in backups_of(data_dir, path)[:-BACKUPS_KEPT_PER_FILE]:
        with contextlib.suppress(OSError):
            stale.unlink()
    return dest


def backups_of(data_dir: Path, path: Path) -> list[Path]:
    """This file's backups, oldest first (those an older leanctx named are not told apart: left alone)."""
    prefix = backup_prefix(path)
    try:
        names = os.listdir(data_dir / "backups")
    except OSError:
        return []
    mine = [n for n in names if n.startswith(prefix) and n.endswith(BACKUP_SUFFIX)
            and _STAMP.match(n[len(prefix):-len(BACKUP_SUFFIX)])]
    return [data_dir / "backups" / n for n in sorted(mine)]


class ChangedUnderUs(Exception):
    """The file changed between our read and our rename; re-plan on the fresh content."""


def atomic_write(path: Path, data: bytes, expected_old: bytes | None, new_file_mode: int = 0o600) -> list[Path]:
    """Replace `path` with `data` if it still holds `expected_old` (None = must not exist).

    Returns the folders created for it (so uninstall can remove them again)."""
    created: list[Path] = []
    missing = []
    folder = path.parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700)
        created.append(d)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = new_file_mode
    remove_stale_temps(path.parent)
    tmp = path.with_name(f".{path.name}.leanctx-{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # our name and pid: a leftover of ours (pid reused), whatever it is now
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if not holds(path, expected_old):
            raise ChangedUnderUs(str(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)
    return created


def atomic_remove(path: Path, expected_old: bytes) -> None:
    remove_stale_temps(path.parent)
    if not holds(path, expected_old):
        raise ChangedUnderUs(str(path))
    path.unlink()
    fsync_dir(path.parent)


def remove_stale_temps(folder: Path) -> None:
    """Remove the temp files a killed leanctx left in `folder` (kill -9 between create and rename).

    Only ours (`.<name>.leanctx-<pid>.tmp`, a regular file), and only when the pid that wrote
    it is gone or the file is older than any write takes (the pid may have been reused)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _TEMP_NAME.match(name)
        if not match:
            continue
        temp = folder / name
        try:
            info = os.lstat(temp)
        except OSError:
            continue
        pid = int(match.group(1))
        if not stat.S_ISREG(info.st_mode):
            continue
        if pid != os.getpid() and _alive(pid) and time.time() - info.st_mtime < STALE_TEMP_S:
            continue  # another leanctx (another data dir) is writing it right now
        with contextlib.suppress(OSError):
            temp.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def install_lock(data_dir: Path, timeout: float = 30.0) -> Iterator[None]:
    """One leanctx install/uninstall at a time per data dir.

    Taking it also proves the data dir usable (a folder, writable, with writable bin/, backups/,
    installed/) before anything is written, and clears what a killed run left there: under the
    lock nobody else writes the data dir, so any temp file in it is a leftover."""
    import fcntl

    try:
        problem = safedir.problem(data_dir)
        if problem is not None:
            raise ConfigError(problem)
        problem = folder_problem(data_dir)
        if problem is None:
            safedir.make_private(data_dir)
            safedir.tighten(data_dir)
            fd = os.open(data_dir / ".install.lock", os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        problem = exc.strerror or str(exc)
    if problem is not None:
        raise ConfigError(f"{data_dir}: leanctx's data dir is not usable: {problem}; {DATA_DIR_FIX}")
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConfigError(f"another leanctx init/uninstall holds {data_dir / '.install.lock'}") from None
                time.sleep(0.05)
        for sub in DATA_SUBDIRS:
            problem = folder_problem(data_dir / sub)
            if problem:
                raise ConfigError(f"{data_dir / sub}: {problem}; {DATA_DIR_FIX}")
            remove_stale_temps(data_dir / sub)
        _remove_manifest_temps(data_dir / "installed")
        yield
    finally:
        os.close(fd)


def _remove_manifest_temps(folder: Path) -> None:
    """`installed/<key>.json.tmp`: a manifest save killed before its rename (only under the lock).
    Whatever sits under that name goes: a FIFO there would block the next save forever."""
    with contextlib.suppress(OSError):
        for temp in folder.glob("*.json.tmp"):
            with contextlib.suppress(OSError):
                if not stat.S_ISDIR(os.lstat(temp).st_mode):
                    temp.unlink()
