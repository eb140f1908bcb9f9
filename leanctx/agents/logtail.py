"""The end of a host's own log, read from a hook: a regular file only, never followed through a
symlink, never waited on (a FIFO in its place opens without blocking and is refused).

Hosts that name no tool call in their hook payloads (Copilot CLI, Factory Droid) write the call to
a log of their own first; the hook finds it in the log's last lines. Standard library only.
"""

from __future__ import annotations

import os


def tail(path: str, max_bytes: int, own_only: bool = False, missing_ok: bool = False) -> list[bytes] | None:
    """The lines of the file's last `max_bytes` (the first dropped when the cut fell inside it;
    the last is whatever follows the final newline, b"" when the file ends with one). None when
    the file cannot be opened, is not a regular file, or (`own_only`) is not this user's; a
    missing file is [] with `missing_ok`."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return [] if missing_ok else None
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (own_only and hasattr(os, "geteuid") and info.st_uid != os.geteuid()):
            return None
        start = max(0, info.st_size - max_bytes)
        os.lseek(fd, start, os.SEEK_SET)
        chunks, left = [], info.st_size - start
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    lines = b"".join(chunks).split(b"\n")
    return lines[1:] if start > 0 else lines
