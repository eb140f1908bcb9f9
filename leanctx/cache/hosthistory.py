"""What Gemini CLI's and Qwen Code's chat recordings and Factory Droid's session log say about the history: how many times it was replaced.

Gemini CLI 0.61.0 records each session in `~/.gemini/tmp/<project>/chats/session-…-<id8>.jsonl`
(the hooks' `transcript_path`), append-only: one line per message, `{"$set": {...}}` lines for
metadata. Whenever the in-memory history is replaced wholesale — the chat starts or resumes,
an automatic or manual compression (`ChatCompressionService`), the masking of old tool outputs
(`ToolOutputMaskingService`: older function responses become a `<tool_output_masked>` preview),
a truncation to the tool-output budget, a rollback after a failed or aborted request — the CLI
writes the whole new history as one `{"$set":{"messages":[…]}}` line
(`ChatRecordingService.updateMessagesFromHistory`); a rewind writes `{"$rewindTo": id}`. No hook
says any of this (PreCompress(auto) fires before every request whether or not it compresses).

Qwen Code 0.15.10 (a Gemini CLI fork) records each session in
`~/.qwen/projects/<project>/chats/<session id>.jsonl` (the hooks' `transcript_path`), append-only,
one record a line shaped like Claude Code's (`uuid`, `parentUuid`, `type`, `subtype`). A
compression (automatic, past 70% of the context window by default, or `/compress`) writes the
compressed history as `{"type":"system","subtype":"chat_compression",…}`
(`ChatRecordingService.recordChatCompression`); a rewind writes `{"type":"system",
"subtype":"rewind",…}` and re-roots the chain after it (`rewindRecording`), with no hook. A
session's start writes neither.

Factory Droid 0.215.0 writes its session to `~/.factory/sessions/<project>/<session id>.jsonl`
(the hooks' `transcript_path`), append-only, one entry a line. Every compaction that replaces
part of the history with a summary writes `{"type":"compaction_state",…}` (`saveCompactionSummary`:
the summary, `removedCount`). Only its manual compaction fires PreCompact; the automatic one (past
`compactionTokenLimit`, 250,000 tokens by default, counted from the usage the model reports) runs
no hook at all (seen in a run: the line, no hook; in the binary the one PreCompact call sits in
the manual path).

So the number of such lines is a counter of "the context may have lost tool output": the cache
adds it to the conversation's compaction counter, and everything read before the last one is
sent again once. Gemini's starts and resumes count too (they lose nothing, so that costs one
re-send; it never credits). A file that cannot be read as ours gives None: no stubs.
"""
from __future__ import annotations

import json
import os
import threading

from leanctx.hooks.transcript import open_regular

_MARKS = (b'{"$set":', b'{"$rewindTo":')
_QWEN_MARKS = (b"chat_compression", b"rewind")  # words a Qwen record must contain to be parsed
_QWEN_SUBTYPES = ("chat_compression", "rewind")
_DROID_MARK = b'"compaction_state"'
HOSTS = ("gemini", "qwen", "droid")  # whose chat recording this module reads
_lock = threading.Lock()
# (agent, path) -> (dev, ino, bytes scanned, count so far, highest count ever returned)
_seen: dict[tuple[str, str], tuple[int, int, int, int, int]] = {}


def _qwen_replaces(line: bytes) -> bool:
    if not any(m in line for m in _QWEN_MARKS):
        return False
    try:
        value = json.loads(line)
    except ValueError:
        return True  # a line we cannot read may be one: count it (only ever withholds)
    return isinstance(value, dict) and value.get("type") == "system" and value.get("subtype") in _QWEN_SUBTYPES


def _droid_replaces(line: bytes) -> bool:
    if _DROID_MARK not in line:
        return False
    try:
        value = json.loads(line)
    except ValueError:
        return True  # a line we cannot read may be one: count it (only ever withholds)
    return isinstance(value, dict) and value.get("type") == "compaction_state"


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


def history_replacements(path: str | None, agent: str = "gemini") -> int | None:
    """How many times the host (`agent`: "gemini", "qwen" or "droid") replaced the chat history so far, or
    None when the recording cannot be trusted (missing, not a regular file of ours, a symlink,
    shrunk or replaced with a lower count): the caller withholds stubs then."""
    if agent not in HOSTS:
        return None
    replaces = {"qwen": _qwen_replaces, "droid": _droid_replaces}.get(agent, _replaces)
    if not path or not os.path.isabs(path):
        return None
    opened = open_regular(path)  # a FIFO must not hold the daemon; a symlink or another user's file: no
    if opened is None:
        return None
    fd, st = opened
    try:
        key = f"{agent}:{path}"
        with _lock:
            prev = _seen.get((agent, path))
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
            _seen[(agent, path)] = (st.st_dev, st.st_ino, end, count, max(high, count))
        return count
    except OSError:
        return None
    finally:
        os.close(fd)
