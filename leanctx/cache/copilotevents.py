"""Did a Copilot CLI call's result reach the model as it left the tool? Copilot's session log says.

A `postToolUse` hook of any program may answer `modifiedResult` and so replace what the model
gets for a call; each later hook is handed the replaced text and the last one's answer wins
(1.0.102, seen in runs). Our own postToolUse hook (the credit of a `view` or `bash` read) may run
before such a hook, and our MCP server answers `ctx_read` before any postToolUse runs: what was
credited may then not be what the model received. Copilot writes its session log,
`<config dir>/session-state/<session id>/events.jsonl`, behind the hooks, per call: a
`tool.execution_start` line (`toolCallId`), one `hook.end` line per postToolUse run whose
`output` is `{"modifiedResult": true}` when a hook replaced the result, then the call's
`tool.execution_complete` line (`result.content`: the replaced text). Calls of one model response
run side by side, so their lines interleave.

`CopilotEventsIndex.holds(path, delivered, asking)` answers for the read cache: every call in
`delivered` must have its start and its complete line in the log, with no postToolUse `hook.end`
that changed a result (`modifiedResult` or `suppressOutput` in its output) anywhere between them:
another call's change there counts too, as which call a `hook.end` belongs to is not written.
Any doubt answers False, so the caller sends content: a log that is missing, not a regular file of
this user's, a symlink, over MAX_BYTES, replaced or shrunk, a call not (yet) completed in it.
The asking call is not looked for: its own lines come after the gate that asks.
"""

from __future__ import annotations

import json
import os
import threading
import time

from leanctx.cache.hostlog import LogIndex, LogIndexes

MAX_LOGS = 32
MAX_BYTES = 512 << 20
MAX_CALLS = 200_000  # calls remembered per log; more: undecidable (withhold)
WAIT_S = 1.0  # Copilot creates its log, and writes a call's lines, a moment after its hooks ran
POLL_S = 0.01
_MARKS = (b'"tool.execution_start"', b'"tool.execution_complete"', b'"hook.end"')
CHANGED = ("modifiedResult", "suppressOutput")  # a postToolUse answer that changes what the model gets


class _Index(LogIndex):
    __slots__ = ("changes", "started", "done")

    def __init__(self) -> None:
        super().__init__()
        self.changes = 0  # postToolUse runs so far that changed a result
        self.started: dict[str, int] = {}  # call id -> changes when it started
        self.done: dict[str, bool] = {}  # call id -> its result reached the model as the tool gave it

    def add(self, line: bytes) -> None:
        if not any(m in line for m in _MARKS):
            return
        try:
            value = json.loads(line)
        except ValueError:
            self.changes += 1  # unreadable, but may be one: count it (only ever withholds)
            return
        data = value.get("data") if isinstance(value, dict) else None
        if not isinstance(data, dict):
            return
        kind = value.get("type")
        if kind == "hook.end":
            output = data.get("output")
            if data.get("hookType") == "postToolUse" and isinstance(output, dict) and any(output.get(k) for k in CHANGED):
                self.changes += 1
            return
        cid = data.get("toolCallId")
        if not isinstance(cid, str):
            return
        if kind == "tool.execution_start":
            self.started.setdefault(cid, self.changes)
        elif kind == "tool.execution_complete":
            at = self.started.get(cid)
            clean = at is not None and at == self.changes and data.get("success") is True
            self.done[cid] = self.done.get(cid, True) and clean  # the same id twice: any doubt wins
        if len(self.started) + len(self.done) > MAX_CALLS:
            self.broken = True


class CopilotEventsIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs = LogIndexes(_Index, max_logs=MAX_LOGS, max_bytes=MAX_BYTES)

    def holds(self, path: str | None, delivered, asking: str | None = None) -> bool:
        """True only when the log shows every call in `delivered` completed with its result as the
        tool gave it (see the module doc); False on any doubt."""
        if not path or not delivered or any(not isinstance(d, str) or not d for d in delivered):
            return False
        deadline = time.monotonic() + WAIT_S
        while not os.path.lexists(path) and time.monotonic() < deadline:
            time.sleep(POLL_S)  # Copilot creates its log behind the calls (1.0.102: not there yet, now and then, at the next call)
        ix, written = self._logs.wait(self._lock, path, lambda x: all(d in x.done for d in delivered),
                                      max(0.0, deadline - time.monotonic()), POLL_S)
        if ix is None or not written:
            return False
        with self._lock:
            return all(ix.done.get(d) is True for d in delivered)
