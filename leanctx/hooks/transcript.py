"""Reading a host's session transcript (jsonl) from its end, bounded: the hook path's and the
read cache's one way to look at what the host recorded (standard library only).

A transcript only grows and can be hundreds of MB; what leanctx needs (the last compaction, the
last prompt, todos and commands before it) sits near the end. So: at most a given number of
bytes from the end, whole lines only, and never a file that is not a regular file of ours
(a FIFO named by a hostile payload would hang the hook; a symlink could point anywhere).
"""

from __future__ import annotations

import os
import stat


def open_regular(path: str, owned: bool = True, follow: bool = False) -> tuple[int, os.stat_result] | None:
    """(descriptor, stat) of a regular file, opened without waiting on a FIFO or a device and,
    unless `follow`, without following a symlink; `owned`: only a file of this user's. None
    otherwise (nothing left open). The caller closes the descriptor."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | (0 if follow else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError, TypeError):
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not stat.S_ISREG(st.st_mode) or (owned and hasattr(os, "getuid") and st.st_uid != os.getuid()):
        os.close(fd)
        return None
    return fd, st


def read_tail(path: str, limit: int) -> tuple[bytes, bool] | None:
    """The last `limit` bytes of a regular file we own, from its first whole line on, and
    whether that is the whole file (None: unreadable, not a regular file, or not ours)."""
    opened = open_regular(path)
    if opened is None:
        return None
    fd, st = opened
    try:
        start = max(0, st.st_size - limit)
        data = os.pread(fd, st.st_size - start, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    if start > 0:  # we started mid-file: drop the partial first line
        cut = data.find(b"\n")
        data = data[cut + 1:] if cut >= 0 else b""
    return data, start == 0


def iso_ts(value: object) -> float | None:
    """Seconds since the epoch for a transcript timestamp (`2026-12-01T15:30:45.985Z`, UTC), or
    None. By hand: strptime costs the hook several ms of imports."""
    if not isinstance(value, str) or len(value) < 19 or value[4] != "-" or value[10] != "T":
        return None
    try:
        y, mo, d = int(value[0:4]), int(value[5:7]), int(value[8:10])
        h, mi, sec = int(value[11:13]), int(value[14:16]), int(value[17:19])
        rest = value[19:].rstrip("Z")
        frac = float("0" + rest) if rest.startswith(".") and rest[1:].isdigit() else 0.0
    except ValueError:
        return None
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and sec < 61):
        return None
    # days from 1970-01-01 (Howard Hinnant's days_from_civil)
    y -= mo <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (mo + (-3 if mo > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return days * 86400 + h * 3600 + mi * 60 + sec + frac
