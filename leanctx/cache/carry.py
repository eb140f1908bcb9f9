"""What Claude Code re-attached after its last compaction, read back from the transcript.

After `/compact` (or auto-compaction) Claude Code 2.1.197 re-reads the 5 most recently read
files from disk (at most 5,000 tokens each, 50,000 in all) and puts them into the new context
without any tool call or hook. It writes each to the session transcript (jsonl) after the
`{"type":"system","subtype":"compact_boundary"}` line, as

    {"type":"attachment","isSidechain":false,"attachment":{"type":"file","filename":…,
     "content":{"type":"text","file":{"filePath","content","numLines","startLine","totalLines"}}}}

(recorded from the real CLI offline: tests/cache/fixtures/claude_compact_transcript.jsonl). The
read cache credits exactly those bytes to the conversation's new compaction epoch, so the
model's next read of an unchanged file is the stub and of a changed one a diff, instead of a
second full copy. A file too large to re-attach gets a `compact_file_reference` note only
(no content): it is not a "file" attachment and is never credited.

Bounded: only the transcript's last MAX_TAIL_BYTES are read, backwards from the end, once per
conversation and compaction (512 KB first, larger only while no boundary is found). Anything unexpected (no boundary in the tail, a line that is not
JSON, a field of the wrong type, not a regular file) credits nothing: the files are re-sent in
full, as without this module.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple

from leanctx.hooks.transcript import iso_ts, read_tail

__all__ = ["Attached", "Boundary", "iso_ts", "last_boundary"]

MAX_TAIL_BYTES = 8 << 20  # re-attached files are <= ~200 KB in all; the summary and tool lists more
FIRST_TAIL_BYTES = 512 << 10  # tried first; then 4x larger up to MAX_TAIL_BYTES
BOUNDARY_MARK = b'"compact_boundary"'
MAX_ATTACHED = 64  # Claude Code attaches 5 after a compaction; more is not a transcript we know


class Attached(NamedTuple):
    """One file the model was given after the boundary: the exact text and where it sits."""

    path: str  # absolute, as Claude Code wrote it
    content: str
    start_line: int  # 1-based
    num_lines: int  # Claude Code's count: content.split("\n") pieces
    total_lines: int

    @property
    def whole(self) -> bool:
        return self.start_line == 1 and self.num_lines >= self.total_lines


class Boundary(NamedTuple):
    uuid: str
    timestamp: str  # ISO 8601, UTC (`2026-12-01T15:30:45.985Z`)
    files: list  # [Attached]


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _file_of(entry: dict) -> Attached | None:
    att = entry.get("attachment")
    if not isinstance(att, dict) or att.get("type") != "file":
        return None
    content = att.get("content")
    f = content.get("file") if isinstance(content, dict) and content.get("type") == "text" else None
    if not isinstance(f, dict):
        return None
    path, text = f.get("filePath"), f.get("content")
    start, num, total = _int(f.get("startLine")), _int(f.get("numLines")), _int(f.get("totalLines"))
    if not (isinstance(path, str) and os.path.isabs(path) and isinstance(text, str)) or None in (start, num, total):
        return None
    if start < 1 or num < 0 or total < 0:
        return None
    return Attached(path, text, start, num, total)


def last_boundary(path: str, limit: int = MAX_TAIL_BYTES) -> Boundary | None:
    """The last compaction in the transcript's tail and the files attached after it in the main
    conversation (not a subagent's sidechain); None when there is none or the format is not
    the one we know."""
    size = FIRST_TAIL_BYTES
    while True:  # a bigger tail only when the boundary is not in the smaller one
        tail = read_tail(path, min(size, limit))
        if tail is None:
            return None
        lines = tail[0].split(b"\n")
        at = _boundary_at(lines)
        if at is not None or size >= limit or tail[1]:
            break
        size *= 4
    if at is None:
        return None
    head = _entry(lines[at])
    uuid, ts = head.get("uuid"), head.get("timestamp")
    if not (isinstance(uuid, str) and uuid and isinstance(ts, str) and ts) or head.get("isSidechain") is True:
        return None
    files: list[Attached] = []
    for line in lines[at + 1:-1]:  # the piece after the last newline may be half written
        if b'"attachment"' not in line:
            continue
        entry = _entry(line)
        if entry is None:
            if line.strip():
                return None  # a line we cannot read: not a transcript we know
            continue
        if entry.get("type") != "attachment" or entry.get("isSidechain") is not False:
            continue
        f = _file_of(entry)
        if f is not None:
            files.append(f)
            if len(files) > MAX_ATTACHED:
                return None
    return Boundary(uuid, ts, files)


def _boundary_at(lines: list) -> int | None:
    for i in range(len(lines) - 1, -1, -1):
        if BOUNDARY_MARK in lines[i]:
            entry = _entry(lines[i])
            if entry is not None and entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
                return i
    return None


def _entry(line: bytes) -> dict | None:
    try:
        v = json.loads(line.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    return v if isinstance(v, dict) else None
