"""Bounded, time-limited read of a hook's stdin.

A host writes one JSON document and closes the pipe. We never trust that: the read stops at a
deadline (a host that keeps the pipe open must not hang us) and keeps at most `cap` bytes,
draining and discarding the rest so the host never blocks on a full pipe.
"""

from __future__ import annotations

import os
import select
import time

CAP_BYTES = 4 * 1024 * 1024
TIMEOUT_S = 2.0


class PayloadTooLarge(ValueError):
    pass


def read_stdin(fd: int = 0, cap: int = CAP_BYTES, timeout: float = TIMEOUT_S) -> bytes:
    """Read until EOF or `timeout`; raise PayloadTooLarge when more than `cap` bytes came."""
    try:
        if os.isatty(fd):
            return b""
    except OSError:
        return b""
    chunks: list[bytes] = []
    kept = 0
    overflow = False
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            ready, _, _ = select.select([fd], [], [], remaining)
        except (OSError, ValueError):
            break
        if not ready:
            break
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        if overflow:
            continue
        kept += len(chunk)
        if kept > cap:
            overflow = True
            chunks.clear()
            continue
        chunks.append(chunk)
    if overflow:
        raise PayloadTooLarge(f"payload over {cap} bytes")
    return b"".join(chunks)
