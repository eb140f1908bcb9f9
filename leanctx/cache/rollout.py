"""Does a Codex conversation's context still hold what a call delivered? Its rollout says.

Codex 0.171.0 records each thread in a rollout, `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread
id>.jsonl` (the hooks' `transcript_path`), append-only, one `{"timestamp","ordinal","type",
"payload"}` object a line. The model's history is rebuilt from it on resume by replaying
`response_item` lines, `compacted` lines (their `replacement_history` replaces the whole history:
an automatic or manual compaction) and `event_msg` lines of payload type `thread_rolled_back` (the
last `num_turns` user turns are dropped; read from the binary, not seen written). `thread/revert`
(an edited earlier prompt) goes on in a new segment, `rollout-<time>-<thread id>_<segment>.jsonl`,
which the next hooks name; the asking call is then not in the old file, so a record still naming
it credits nothing, and what the kept part of the old file delivered is sent again. Each call's output
is the `response_item` of payload type `function_call_output` with its `call_id`, written as the
model will see it: an output over the tool-output budget is cut in the middle to
`…N chars truncated…` (or `…N tokens truncated…`), and the model never received the rest. A shell
call (`exec_command`) that yielded before its process exited says "Process running with session ID
N" instead of "Process exited with code N": the rest came under later `write_stdin` calls, so its
own output is not whole either (its post-tool hook still carries all of it under this call's id).
Observed on 0.171.0: an automatic compaction writes `compacted`; a 417,780-byte `ctx_read` answer
reached the model as 11,991 characters; a revert starts a new segment.

`RolloutIndex.holds(path, delivered, asking)` answers for the read cache: the asking call's own
`function_call` line must be in the rollout (waited for, at most WAIT_S: Codex writes the rollout
through a queue), and every call in `delivered` must have its output in the rollout, untruncated,
with no `compacted` or `thread_rolled_back` line between it and the asking call (a rollback may
have kept it, but which turns it dropped is not looked at: it counts as lost). Any doubt answers
False, so the caller sends content: a rollout that is missing, not a regular file of this user's, a
symlink, over MAX_BYTES, replaced or shrunk (indexed again), a call never seen.

Indexed incrementally (hostlog.py; whole lines only), per rollout: the offset parsed so far, its (device,
inode), first bytes and the bytes before that offset; MAX_ROLLOUTS kept, least recently used dropped.
"""

from __future__ import annotations

import json
import os
import threading

from leanctx.cache.hostlog import LogIndex, LogIndexes

MAX_ROLLOUTS = 32
MAX_BYTES = 512 << 20
MAX_CALLS = 200_000  # calls remembered per rollout; more: undecidable (withhold)
WAIT_S = 0.5
POLL_S = 0.01
# what Codex 0.171.0 puts where it cut a tool output (strings in its binary)
TRUNCATED = ("chars truncated…", "tokens truncated…", "truncated output (original token count",
             "<truncated omitted_approx_tokens=")
# the header of a unified exec output (exec_command, write_stdin) and the line saying its process
# exited (0.171.0; a yielded call says "Process running with session ID N" there instead)
EXEC_HEAD, EXEC_BODY, EXEC_EXITED = "Chunk ID: ", "\nOutput:\n", "\nProcess exited with code "
# words a line must contain to be parsed at all (however its JSON is spaced)
_LOSS = (b"compacted", b"thread_rolled_back")
_CALLS = (b"function_call", b"custom_tool_call")


def _unfinished(output: str) -> bool:
    """An `exec_command` / `write_stdin` output (0.171.0: "Chunk ID: …\nWall time: …\nProcess
    exited with code N\nOriginal token count: N\nOutput:\n<text>") whose header does not say the
    process exited: the call yielded ("Process running with session ID N"), the rest of the output
    came later under another call (write_stdin), yet Codex's post-tool hook hands the whole output
    over under this call's id (observed on 0.171.0). So this call's output is not all of it."""
    if not output.startswith(EXEC_HEAD):
        return False
    head, sep, _ = output.partition(EXEC_BODY)
    return not sep or EXEC_EXITED not in head


def _truncated(output: object) -> bool:
    if isinstance(output, str):
        if _unfinished(output):
            return True
        texts = [output]
    elif isinstance(output, list):
        texts = [c.get("text") for c in output if isinstance(c, dict) and isinstance(c.get("text"), str)]
    elif isinstance(output, dict):  # {"content": ...} / {"body": ...} shapes of other versions
        return _truncated(output.get("content")) or _truncated(output.get("body"))
    else:
        return True  # a shape we do not know: cannot say it is whole
    return any(mark in t for t in texts for mark in TRUNCATED)


class _Index(LogIndex):
    __slots__ = ("called", "losses", "output")

    def __init__(self) -> None:
        super().__init__()
        self.losses = 0  # compacted + thread_rolled_back lines so far
        self.called: dict[str, int] = {}  # call_id -> losses when its call was written
        self.output: dict[str, tuple[int, bool]] = {}  # call_id -> (losses when written, truncated)

    def add(self, line: bytes) -> None:
        loss = any(m in line for m in _LOSS)
        if not loss and not any(m in line for m in _CALLS):
            return
        try:
            value = json.loads(line)
        except ValueError:
            if loss:
                self.losses += 1  # unreadable, but may be one: count it (only ever withholds)
            return
        if not isinstance(value, dict):
            return
        kind, payload = value.get("type"), value.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        ptype = payload.get("type")
        if kind == "compacted" or (kind == "event_msg" and ptype == "thread_rolled_back"):
            self.losses += 1
            return
        if kind != "response_item" or not isinstance(payload.get("call_id"), str):
            return
        cid = payload["call_id"]
        if ptype in ("function_call", "custom_tool_call"):
            self.called.setdefault(cid, self.losses)
        elif ptype in ("function_call_output", "custom_tool_call_output"):
            prev = self.output.get(cid)
            cut = _truncated(payload.get("output"))
            # the same id written twice: the earlier loss count and any cut win (only withholds)
            self.output[cid] = (min(prev[0], self.losses), prev[1] or cut) if prev else (self.losses, cut)
        if len(self.called) + len(self.output) > MAX_CALLS:
            self.broken = True


class RolloutIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs = LogIndexes(_Index, max_logs=MAX_ROLLOUTS, max_bytes=MAX_BYTES)

    def _refresh(self, path: str) -> _Index | None:
        return self._logs.refresh(path)

    def holds(self, path: str | None, delivered, asking: str | None) -> bool:
        """True only when the rollout shows every delivery in `delivered` still in the context
        of the call `asking` (see the module doc); False on any doubt."""
        if not path or not asking or not delivered or any(not isinstance(d, str) or not d for d in delivered):
            return False
        ix, written = self._logs.wait(self._lock, path, lambda x: asking in x.called, WAIT_S, POLL_S)
        if ix is None or not written:
            return False  # the asking call is not written: what came before it may not be either
        with self._lock:
            at = ix.called[asking]
            for d in delivered:
                out = ix.output.get(d)
                if out is None or out[1] or out[0] != at:
                    return False
            return True


def subagent_rollout(parent: str | None, agent_id: str) -> str | None:
    """A Codex subagent's own rollout: `rollout-<time>-<agent id>.jsonl` beside its parent's (0.171.0
    names it by the subagent's thread id, the hooks' `agent_id`). None unless exactly one is there
    (one started on another day lies in another folder: not found, so nothing is credited)."""
    if not parent or not agent_id or "/" in agent_id or agent_id in (".", "..") or "\0" in agent_id:
        return None
    folder = os.path.dirname(parent)
    suffix = f"-{agent_id}.jsonl"
    try:
        found = [n for n in os.listdir(folder) if n.startswith("rollout-") and n.endswith(suffix)]
    except OSError:
        return None
    return os.path.join(folder, found[0]) if len(found) == 1 else None
