"""The default store: one JSON file per user, `$CKS_HOME/user/<slug>/conversation-state.json`.

- Writes are atomic: a temp file in the same folder (0600), fsync, rename over the state, fsync
  of the folder. A reader sees the old or the new state, never a mix, even if the writer is
  killed (a killed writer's temp file is removed by the next writer).
- Updates never lose each other: a per-user lock file (flock, a bounded wait) serialises
  read-modify-write across processes, and right before the rename the bytes read under the lock
  must still be on disk (a writer that ignores the lock, such as a model using its Write tool,
  makes us redo the update on its state instead of overwriting it).
- A state that does not read, parse or validate is renamed to
  `conversation-state.corrupt-<UTC time>.json` (never deleted) and the thread starts fresh.
- Every operation goes through a descriptor of the verified user folder (slug.open_user_dir), and
  files are opened with O_NOFOLLOW: nothing is written, or read, through a symlink.
- end_thread's digest is appended to history.md under the same lock, right before the rename that
  resets the state: a process killed between the two leaves the thread in place, so the next
  end_thread appends it again (a duplicate digest, never a lost one).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time

from leanctx.state import protocol
from leanctx.state.backend import MAX_DOC_BYTES, Backend, Commit, apply, decode, encode
from leanctx.state.errors import StateBusy, StateError, StateInvalid, UnsafePath
from leanctx.state.slug import check_slug, checked_cks_home, open_user_dir, user_dir, users_root

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

STATE = "conversation-state.json"
LOCK = ".conversation-state.lock"
HISTORY = "history.md"
TMP_PREFIX = ".conversation-state.json."
TMP_SUFFIX = ".tmp"
CORRUPT_PREFIX = "conversation-state.corrupt-"
LOCK_TIMEOUT_S = 5.0
CAS_RETRIES = 20

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class FileBackend(Backend):
    name = "file"

    def __init__(self, lock_timeout: float | None = None) -> None:
        env = os.environ.get("LEANCTX_STATE_LOCK_TIMEOUT")
        self.lock_timeout = lock_timeout if lock_timeout is not None else float(env) if env else LOCK_TIMEOUT_S

    def location(self, slug: str) -> str:
        return os.path.join(user_dir(slug), STATE)

    def load(self, slug: str) -> dict:
        fd = open_user_dir(slug, create=False)
        if fd is None:
            return protocol.fresh(slug)
        try:
            try:
                state, _ = _read(fd, slug)
            except StateInvalid:
                with _Lock(fd, self.lock_timeout, slug):
                    state, _ = _read_or_quarantine(fd, slug)
            return state or protocol.fresh(slug)
        finally:
            os.close(fd)

    def update(self, slug: str, fn: Callable[[dict], dict | Commit]) -> dict:
        fd = open_user_dir(slug, create=True)
        assert fd is not None
        try:
            with _Lock(fd, self.lock_timeout, slug):
                _remove_stale_temps(fd)
                for _ in range(CAS_RETRIES):
                    current, raw = _read_or_quarantine(fd, slug)
                    new, history = apply(fn, current or protocol.fresh(slug), slug)
                    body = encode(new)
                    if _read_bytes(fd) != raw:
                        continue  # someone wrote without the lock: redo on their state
                    if history:
                        _append(fd, history)
                    _write_atomic(fd, STATE, body)
                    return new
            raise StateBusy(f"{self.location(slug)} kept changing under the lock (a writer that ignores it?)")
        finally:
            os.close(fd)

    def append_history(self, slug: str, markdown: str) -> None:
        fd = open_user_dir(slug, create=True)
        assert fd is not None
        try:
            with _Lock(fd, self.lock_timeout, slug):
                _append(fd, markdown)
        finally:
            os.close(fd)

    def read_history(self, slug: str) -> str:
        fd = open_user_dir(slug, create=False)
        if fd is None:
            return ""
        try:
            try:
                h = os.open(HISTORY, os.O_RDONLY | _NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return ""
            except OSError as exc:
                raise UnsafePath(f"{os.path.join(user_dir(slug), HISTORY)}: cannot open ({exc.strerror})") from None
            try:
                return _read_all(h, 1 << 26).decode("utf-8", "replace")
            finally:
                os.close(h)
        finally:
            os.close(fd)

    def list_users(self) -> list[str]:
        """Users with a conversation state, or with a damaged one moved aside (doctor reports those)."""
        checked_cks_home()
        root = users_root()
        try:
            names = os.listdir(root)
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for name in names:
            try:
                check_slug(name)
                folder = os.path.join(root, name)
                if not stat.S_ISDIR(os.lstat(folder).st_mode):
                    continue
                if any(f == STATE or f.startswith(CORRUPT_PREFIX) for f in os.listdir(folder)):
                    found.append(name)
            except (OSError, StateError):  # not a slug, not readable: not listed
                continue
        return sorted(found)

    def corrupt_files(self, slug: str) -> list[str]:
        folder = user_dir(slug)
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(os.path.join(folder, n) for n in names if n.startswith(CORRUPT_PREFIX) and n.endswith(".json"))


class _Lock:
    """flock on the user's lock file, polled up to `timeout` seconds (a host hook must not hang)."""

    def __init__(self, dir_fd: int, timeout: float, slug: str) -> None:
        self.dir_fd, self.timeout, self.slug = dir_fd, timeout, slug
        self.fd = -1

    def __enter__(self) -> _Lock:
        self.fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o600, dir_fd=self.dir_fd)
        deadline = time.monotonic() + self.timeout
        pause = 0.0002
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    os.close(self.fd)
                    raise
            if time.monotonic() > deadline:
                os.close(self.fd)
                raise StateBusy(f"the conversation state of {self.slug!r} stayed locked for {self.timeout:g} s "
                                f"({os.path.join(user_dir(self.slug), LOCK)}); try again")
            time.sleep(pause)
            pause = min(pause * 2, 0.005)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing the descriptor releases the flock


def _read_bytes(dir_fd: int) -> bytes | None:
    """The state file's bytes; None when absent. StateInvalid when it is not a regular file."""
    try:
        fd = os.open(STATE, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise StateInvalid(f"$: {STATE} is a symlink; not followed") from None
        raise StateInvalid(f"$: cannot open {STATE}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StateInvalid(f"$: {STATE} is not a regular file")
        return _read_all(fd, MAX_DOC_BYTES + 1)
    finally:
        os.close(fd)


def _read(dir_fd: int, slug: str) -> tuple[dict | None, bytes | None]:
    raw = _read_bytes(dir_fd)
    return (None if raw is None else decode(raw, slug)), raw


def _read_or_quarantine(dir_fd: int, slug: str) -> tuple[dict | None, bytes | None]:
    """Under the lock: the state, or None after moving a damaged one aside."""
    try:
        return _read(dir_fd, slug)
    except StateInvalid:
        _quarantine(dir_fd)
        return None, None


def _quarantine(dir_fd: int) -> str:
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now % 1 * 1_000_000):06d}Z"
    name = f"{CORRUPT_PREFIX}{stamp}.json"
    n = 0
    while _exists(dir_fd, name):
        n += 1
        name = f"{CORRUPT_PREFIX}{stamp}-{n}.json"
    os.rename(STATE, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.fsync(dir_fd)
    return name


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except FileNotFoundError:
        return False


def _write_atomic(dir_fd: int, name: str, data: bytes) -> None:
    tmp = f"{TMP_PREFIX}{os.getpid()}.{os.urandom(4).hex()}{TMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, 0o600)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    os.fsync(dir_fd)


def _append(dir_fd: int, markdown: str) -> None:
    """One dated section at the end of history.md (0600, created when missing)."""
    try:
        fd = os.open(HISTORY, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise UnsafePath(f"{HISTORY} is a symlink; not writing through it") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(f"{HISTORY} is not a regular file; not appending to it")
        size = os.fstat(fd).st_size
        text = markdown if markdown.endswith("\n") else markdown + "\n"
        _write_all(fd, (("\n" if size else "") + protocol.clean(text)).encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_stale_temps(dir_fd: int) -> None:
    """Under the lock nobody else is writing, so any temp file is a killed writer's leftover."""
    for name in os.listdir(dir_fd):
        if name.startswith(TMP_PREFIX) and name.endswith(TMP_SUFFIX):
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass


def _read_all(fd: int, limit: int) -> bytes:
    chunks = []
    total = 0
    while total < limit:
        chunk = os.read(fd, min(1 << 16, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
