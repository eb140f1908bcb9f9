"""Reading and writing users' config files without ever damaging them.

- A symlinked config is followed only when its target stays inside HOME (dotfile managers),
  else refused: we never write through a link to somewhere we were not asked to touch.
- Writes are atomic (temp file in the target's folder, fsync, rename, fsync of the folder),
  keep the file's permission bits, and leave a timestamped copy of the old bytes in
  `<data dir>/backups/`.
- A lock in the data dir serialises concurrent leanctx runs, and the file is re-read right
  before the rename: if a running host rewrote it meanwhile, the caller re-plans on fresh bytes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BACKUPS_KEPT_PER_FILE = 10


class ConfigError(Exception):
    """A config we must not touch; the message names the file (and line/column when parsing)."""


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


@dataclass
class Target:
    """A config path as given (what the user knows) and the real file we would write."""

    path: Path
    real: Path


def resolve_target(path: Path, home: Path) -> Target:
    """Follow a symlinked config only within HOME; refuse otherwise."""
    if not path.is_symlink():
        return Target(path, path)
    real = path.resolve()
    home_real = home.resolve()
    if real != home_real and home_real not in real.parents:
        raise ConfigError(f"{path}: is a symlink to {real}, outside {home}; refusing to write through it")
    return Target(path, real)


def read_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, expected a config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None


def decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); left untouched") from None


def check_writable(path: Path) -> None:
    """Fail before writing anything when the file or its folder cannot be written."""
    existing = path if path.exists() else None
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if existing is not None and not os.access(existing, os.W_OK):
        raise ConfigError(f"{path}: is read-only; make it writable (chmod u+w) or run without this agent")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{path}: folder {folder} is not writable")


def backup(data_dir: Path, path: Path, data: bytes) -> Path:
    """Keep a timestamped copy of `data` (the bytes about to be replaced)."""
    folder = data_dir / "backups"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    stem = str(path).strip("/").replace("/", "__").replace("\\", "__")
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{time.time_ns() % 1_000_000_000:09d}"
    dest = folder / f"{stem}.{stamp}.bak"
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    old = sorted(folder.glob(f"{stem}.*.bak"))
    for stale in old[:-BACKUPS_KEPT_PER_FILE]:
        with contextlib.suppress(OSError):
            stale.unlink()
    return dest


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
    tmp = path.with_name(f".{path.name}.leanctx-{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if read_bytes(path) != expected_old:
            raise ChangedUnderUs(str(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)
    return created


def atomic_remove(path: Path, expected_old: bytes) -> None:
    if read_bytes(path) != expected_old:
        raise ChangedUnderUs(str(path))
    path.unlink()
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def install_lock(data_dir: Path, timeout: float = 30.0) -> Iterator[None]:
    """One leanctx install/uninstall at a time per data dir."""
    import fcntl

    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(data_dir / ".install.lock", os.O_RDWR | os.O_CREAT, 0o600)
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
        yield
    finally:
        os.close(fd)
