"""Incremental reading of a host's own JSONL log of a session (Claude Code's transcript, Codex's
rollout), shared by transcript.py and rollout.py.

Hosts append to these logs for as long as a session lives, so each look parses only the bytes
appended since the last one. A log replaced (another device or inode), shrunk, or rewritten in
place (its first bytes, or the bytes just before the offset parsed so far, differ) is indexed
again from the start. A last line still being written is left for the next look. The file is
opened by hooks/transcript.open_regular: a regular file (optionally the user's own), never
through a symlink, non-blocking so a FIFO cannot hold the daemon. Any doubt gives None, and the
callers withhold.
"""
from __future__ import annotations

import os
import time
from collections import OrderedDict

from leanctx.hooks.transcript import open_regular

CHUNK = 8 << 20
HEAD = 256  # first bytes remembered to notice a log rewritten in place


class LogIndex:
    """What has been parsed of one log. Subclasses keep what their checks need (`add`) and set
    `broken` when the log can no longer be decided (too many entries, a shape not known)."""

    __slots__ = ("broken", "dev_ino", "head", "offset", "tail")

    def __init__(self) -> None:
        self.dev_ino: tuple[int, int] | None = None
        self.head = b""
        self.tail = b""  # the last bytes before `offset`
        self.offset = 0
        self.broken = False

    def add(self, line: bytes) -> None:
        raise NotImplementedError


class LogIndexes:
    """The indexes of one kind of log, per path, least recently used dropped past `max_logs`.
    `refresh` is called with the caller's own lock held."""

    def __init__(self, make, *, max_logs: int, max_bytes: int, owned: bool = True) -> None:
        self.make, self.max_logs, self.max_bytes, self.owned = make, max_logs, max_bytes, owned
        self.idx: OrderedDict[str, LogIndex] = OrderedDict()

    def trim(self) -> None:
        """Drop the least recently used indexes beyond the limit (subclasses may add a budget)."""
        while len(self.idx) > self.max_logs:
            self.idx.popitem(last=False)

    def refresh(self, path: str) -> LogIndex | None:
        opened = open_regular(path, owned=self.owned)
        if opened is None:
            return None
        fd, st = opened
        try:
            if st.st_size > self.max_bytes:
                return None
            ix = self.idx.get(path)
            head = os.pread(fd, HEAD, 0)
            if ix is None or ix.dev_ino != (st.st_dev, st.st_ino) or st.st_size < ix.offset \
                    or head[: len(ix.head)] != ix.head \
                    or (ix.tail and os.pread(fd, len(ix.tail), ix.offset - len(ix.tail)) != ix.tail):
                ix = self.make()
                ix.dev_ino = (st.st_dev, st.st_ino)
            ix.head = head if len(head) >= len(ix.head) else ix.head
            self.idx[path] = ix
            self.idx.move_to_end(path)
            pending = b""
            while ix.offset + len(pending) < st.st_size and not ix.broken:
                data = os.pread(fd, min(CHUNK, st.st_size - ix.offset - len(pending)), ix.offset + len(pending))
                if not data:
                    break
                data = pending + data
                cut = data.rfind(b"\n")
                if cut < 0:
                    pending = data  # a line longer than a chunk, or the last one still being written
                    continue
                for line in data[:cut].split(b"\n"):
                    if line.strip():
                        ix.add(line)
                ix.offset += cut + 1
                ix.tail = data[max(0, cut + 1 - HEAD):cut + 1]
                pending = data[cut + 1:]
            self.trim()
            return None if ix.broken or self.idx.get(path) is not ix else ix
        except OSError:
            return None
        finally:
            os.close(fd)

    def wait(self, lock, path: str, ready, wait_s: float, poll_s: float) -> tuple[LogIndex | None, bool]:
        """Refresh `path` until `ready(index)` or `wait_s` passed: (the index or None, ready?).
        Hosts write their logs through a queue, so the asking call's own entry can come a little
        after the call; the sleeps are never under `lock`, so other conversations' checks go on."""
        deadline = time.monotonic() + wait_s
        while True:
            with lock:
                ix = self.refresh(path)
                if ix is None:
                    return None, False
                if ready(ix):
                    return ix, True
                if time.monotonic() >= deadline:
                    return ix, False
            time.sleep(poll_s)
