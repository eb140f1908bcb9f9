"""What a host's own session log says about its history: how many times it was replaced.

Gemini CLI 0.61.0 records each session in `~/.gemini/tmp/<project>/chats/session-…-<id8>.jsonl`
(the hooks' `transcript_path`), append-only: one line per message, `{"$set": {...}}` lines for
metadata. Whenever the in-memory history is replaced wholesale — the chat starts or resumes,
an automatic or manual compression (`ChatCompressionService`), the masking of old tool outputs
(`ToolOutputMaskingService`: older function responses become a `<tool_output_masked>` preview),
a truncation to the tool-output budget, a rollback after a failed or aborted request — the CLI
writes the whole new history as one `{"$set":{"messages":[…]}}` line
(`ChatRecordingService.updateMessagesFromHistory`); a rewind writes `{"$rewindTo": id}`. No hook
says any of this (PreCompress(auto) fires before every request whether or not it compresses).

So the number of such lines is a counter of "the context may have lost tool output": the cache
adds it to the conversation's compaction counter, and everything read before the last one is
sent again once. Starts and resumes count too (they lose nothing, so that costs one re-send;
it never credits). A file that cannot be read as ours gives None: no stubs.

Codex CLI 0.171.0 logs each session in its rollout, `~/.codex/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl`
(the hooks' `transcript_path`), one JSON object per line with a top-level `type`. A compaction
writes a `{"type":"compacted",…}` line (seen in a real run: tests/e2e/test_codex_cache_e2e.py),
whether or not its PreCompact hook reached us in time; a rollback of turns writes an `event_msg`
whose payload type is `thread_rolled_back` (the name is in the 0.171.0 binary; not run here).
Both count, so for Codex the rollout shows a compaction whose hooks are late or lost.
"""
from __future__ import annotations

import json
import os
import threading

from leanctx.hooks.transcript import open_regular

_MARKS = (b'{"$set":', b'{"$rewindTo":')
_lock = threading.Lock()
# path -> (dev, ino, bytes scanned, count so far, highest count ever returned)
_seen: dict[str, tuple[int, int, int, int, int]] = {}


def _replaces(line: bytes) -> bool:
    if not line.startswith(_MARKS):
        return False
    if line.startswith(b'{"$rewindTo":'):
        return True
    try:
        value = json.loads(line)
    except ValueError:
        return True  # a line we cannot read may be one: count it (only ever withholds)
    sets = value.get("$set") if isinstance(value, dict) else None
    return not isinstance(sets, dict) or "messages" in sets


_CODEX_MARKS = (b'"compacted"', b'"thread_rolled_back"')


def _codex_replaces(line: bytes) -> bool:
    if not any(m in line for m in _CODEX_MARKS):
        return False
    try:
        value = json.loads(line)
    except ValueError:
        return True  # a line we cannot read may be one: count it (only ever withholds)
    if not isinstance(value, dict):
        return False
    if value.get("type") == "compacted":
        return True
    payload = value.get("payload")
    return value.get("type") == "event_msg" and isinstance(payload, dict) and payload.get("type") == "thread_rolled_back"


#: the hosts whose session log this module reads, and what in it replaces the history
REPLACES = {"gemini": _replaces, "codex": _codex_replaces}


def history_replacements(path: str | None, agent: str = "gemini") -> int | None:
    """How many times the host replaced the chat history so far, or None when the recording
    cannot be trusted (missing, not a regular file of ours, a symlink, shrunk or replaced with a
    lower count): the caller withholds stubs then."""
    replaces = REPLACES.get(agent)
    if replaces is None or not path or not os.path.isabs(path):
        return None
    opened = open_regular(path)  # a FIFO must not hold the daemon; a symlink or another user's file: no
    if opened is None:
        return None
    fd, st = opened
    try:
        key = f"{agent}:{path}"
        with _lock:
            prev = _seen.get(key)
        start, count, high = 0, 0, 0
        if prev is not None:
            high = prev[4]
            if (prev[0], prev[1]) == (st.st_dev, st.st_ino) and st.st_size >= prev[2]:
                start, count = prev[2], prev[3]
        os.lseek(fd, start, os.SEEK_SET)
        buf = b""
        end = start
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                end += len(line) + 1
                if replaces(line):
                    count += 1
        # an unfinished last line is scanned again next time
        if count < high:
            return None  # rewritten with fewer replacements: earlier counters could come back
        with _lock:
            _seen[key] = (st.st_dev, st.st_ino, end, count, max(high, count))
        return count
    except OSError:
        return None
    finally:
        os.close(fd)
