"""The branch and the changed files of the git checkout a session works in, without running git.

The folder is often a cloned repository, and its `.git/config` can make `git status` run programs
of its choosing (core.fsmonitor, a clean filter, ...). So this reads the files git keeps: HEAD
for the branch, the index for each tracked file's recorded size and mtime, compared with the
file's own (git's stat check, without git's content re-check). A file whose contents changed
while its size and mtime stayed is not seen; staged-only changes are not either. Standard
library only (the hook fast path).
"""

from __future__ import annotations

import os
import re
import struct

from leanctx.hooks.transcript import open_regular

MAX_INDEX_BYTES = 64 << 20  # a larger index is skipped: the card goes without the changed files
MAX_ENTRIES = 50_000  # files stat'ed at most
MAX_CHANGED = 64


def git_dir(cwd: str) -> tuple[str, str] | None:
    """(work tree root, git dir) of the checkout holding cwd, or None."""
    d = os.path.abspath(cwd)
    while True:
        dot = os.path.join(d, ".git")
        if os.path.isdir(dot):
            return d, dot
        if os.path.isfile(dot):  # a linked worktree or submodule: "gitdir: <path>"
            text = _read(dot, 4096)
            if text is None or not text.startswith(b"gitdir: "):
                return None
            target = text[8:].strip().decode("utf-8", "surrogateescape")
            return d, os.path.normpath(os.path.join(d, target))
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _read(path: str, limit: int) -> bytes | None:
    """A regular file's bytes, up to `limit` (None: absent, larger, or not a regular file). A
    repository can put a FIFO or a device where git keeps HEAD or the index: opened without
    O_NONBLOCK a FIFO would hold the hook until the host kills it."""
    opened = open_regular(path, owned=False, follow=True)
    if opened is None:
        return None
    fd, st = opened
    try:
        if st.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def branch(gitdir: str) -> str | None:
    """The checked-out branch (`HEAD` when detached), as `git rev-parse --abbrev-ref HEAD` says."""
    head = _read(os.path.join(gitdir, "HEAD"), 4096)
    if head is None:
        return None
    head = head.strip()
    if head.startswith(b"ref: "):
        ref = head[5:].decode("utf-8", "replace")
        return ref[len("refs/heads/"):] if ref.startswith("refs/heads/") else ref
    return "HEAD" if re.fullmatch(rb"[0-9a-f]{40}|[0-9a-f]{64}", head) else None


def changed(root: str, gitdir: str) -> list[str]:
    """Tracked files whose size or mtime differ from what the index recorded (or that are gone),
    relative to the work tree, in index order."""
    data = _read(os.path.join(gitdir, "index"), MAX_INDEX_BYTES)
    if data is None or len(data) < 12 or data[:4] != b"DIRC":
        return []
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        return []
    config = _read(os.path.join(_common_dir(gitdir), "config"), 1 << 20) or b""
    hash_len = 32 if re.search(rb"(?im)^\s*objectformat\s*=\s*sha256\s*$", config) else 20
    out: list[str] = []
    pos, name = 12, b""
    for _ in range(min(count, MAX_ENTRIES)):
        fixed = 40 + hash_len + 2
        if pos + fixed > len(data):
            break
        mtime_s, mtime_ns = struct.unpack(">II", data[pos + 8:pos + 16])
        mode, size = struct.unpack(">I", data[pos + 24:pos + 28])[0], struct.unpack(">I", data[pos + 36:pos + 40])[0]
        flags = struct.unpack(">H", data[pos + 40 + hash_len:pos + fixed])[0]
        at = pos + fixed
        skip = False
        if flags & 0x4000:  # extended flags (v3+): skip-worktree / intent-to-add
            if version < 3 or at + 2 > len(data):
                break
            skip = bool(struct.unpack(">H", data[at:at + 2])[0] & 0x4000)
            at += 2
        if version == 4:  # the name is the previous one minus N bytes, plus a NUL-terminated suffix
            strip, shift = 0, 0
            while at < len(data):
                byte = data[at]
                at += 1
                strip = (strip << 7) | (byte & 0x7F) if shift else byte & 0x7F
                if not byte & 0x80:
                    break
                strip += 1
                shift = 1
            end = data.find(b"\0", at)
            if end < 0:
                break
            name = name[:len(name) - strip] + data[at:end]
            pos = end + 1
        else:
            end = data.find(b"\0", at)
            if end < 0:
                break
            name = data[at:end]
            pos = pos + ((end - pos + 8) & ~7)  # entries are NUL-padded to a multiple of 8 bytes
        stage = (flags >> 12) & 3
        if skip or mode >> 12 == 0o16:  # sparse, or a submodule (gitlink)
            continue
        path = name.decode("utf-8", "surrogateescape")
        if stage or _differs(os.path.join(root, path), size, mtime_s, mtime_ns):
            if not out or out[-1] != path:  # a conflict lists one path up to three times
                out.append(path)
            if len(out) >= MAX_CHANGED:
                break
    return out


def _common_dir(gitdir: str) -> str:
    """A linked worktree's git dir names the repository's own (where its config is) in `commondir`."""
    common = _read(os.path.join(gitdir, "commondir"), 4096)
    if common is None:
        return gitdir
    return os.path.normpath(os.path.join(gitdir, common.strip().decode("utf-8", "surrogateescape")))


def _differs(path: str, size: int, mtime_s: int, mtime_ns: int) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return True  # deleted
    if st.st_size & 0xFFFFFFFF != size or int(st.st_mtime) & 0xFFFFFFFF != mtime_s:
        return True
    return bool(mtime_ns) and st.st_mtime_ns % 1_000_000_000 != mtime_ns
