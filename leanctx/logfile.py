"""Append to one of leanctx's own logs: private (0600 in a 0700 folder), bounded, never through a link.

Every log keeps at most `MAX_BYTES` plus one rotated `<name>.1` of the same size, so a busy hook,
a failing command or a long-lived daemon cannot fill the disk. Standard library only (the hook
fast path writes hooks.log through this).
"""

from __future__ import annotations

import os
import stat

from leanctx import safedir

MAX_BYTES = 1 << 20


def rotate(path: str, limit: int = MAX_BYTES) -> None:
    """Move `path` to `path.1` (replacing the older one) once it is over `limit` bytes."""
    try:
        if os.lstat(path).st_size > limit:
            os.replace(path, path + ".1")
    except OSError:
        pass


def append(path: str, text: str, limit: int = MAX_BYTES) -> None:
    """Append `text` to `path` after rotating it; the folder is created 0700, the file 0600.
    Raises OSError when it cannot (callers that must not fail catch it)."""
    safedir.make_private(os.path.dirname(path))
    rotate(path, limit)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0),
                 safedir.FILE_MODE)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)
