"""Publish who is talking: one record per conversation, plus the last-writer slot.

Layout in the data dir:
  conversations/<agent>/<conversation key>.json   one record per conversation (see RECORD_FIELDS)
  active_transcript.json                          {transcript_path, conversation_id, session_id,
                                                   updated_at, agent}: the last writer, for tools
                                                   that only understand one slot
Every write is a temp file in the same folder + rename, so a reader never sees half a record.
Records are rebuilt from the next event if lost, so we skip fsync to keep the hook fast; a torn
file after a power cut only parses as absent, which makes the cache withhold stubs (safe side).
A short lock serialises read-modify-write of one agent's records (parallel subagent events).
A hook that cannot get the lock in LOCK_WAIT_S never writes the record unlocked (that could undo
another writer's compaction bump); it appends one byte to the conversation's missed-lock file
(`.<key>.missed`, O_APPEND, so no bump is lost) and logs it. Readers add the bytes not yet
folded into the record to its compaction counter and keep stubs withheld while any are pending;
the next locked writer folds them in (`missed_folded` = bytes already counted, so the counter
as readers see it never goes down and never misses a bump).
"""

from __future__ import annotations

import os
import stat
import time

from leanctx.agents.base import (
    PROMPT,
    PRE_COMPACT,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    HookEvent,
)
from leanctx import fastjson, safedir
from leanctx.hooks.hostproc import host_process

SCHEMA = 1
LOCK_WAIT_S = 1.0
# Caps on what a payload can make a record hold (every hook and every cache refresh parses it):
MAX_TEXT = 4096  # a path or id longer than this is not stored (the field keeps its last value)
MAX_ID = 200  # a subagent id longer than this is kept as its hash (start and stop still match)
# subagent ids a host module makes up from the call that runs the subagent (Gemini CLI names no
# subagent: agents/gemini.py), so two runs at once can share one: counted, not replaced
COUNTED_SUBAGENTS = ("invoke_agent:",)
MAX_SUBAGENTS = 64  # open subagents; past that the oldest go, and `subagents_overflow` keeps
#                    stubs withheld until the session ends or restarts (one may still be running)
MAX_ROOTS = 64  # workspace roots
MAX_RECORD_BYTES = 1 << 20  # a bigger file is not a record we wrote: read as absent (safe side)
# Environment the host gives its hooks that identifies the session (never credentials).
_ID_ENV = ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID", "CURSOR_TRANSCRIPT_PATH", "CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR")
_SAFE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def now_iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


def conversation_key(conversation_id: str) -> str:
    """A file name for a conversation id: the id itself when it is safe, else its hash."""
    if 0 < len(conversation_id) <= 96 and not conversation_id.startswith(".") and _SAFE_CHARS.issuperset(conversation_id):
        return conversation_id
    return _hashed(conversation_id)


def _hashed(value: str) -> str:
    import hashlib  # only for ids that are not safe file names or too long (rare)

    return "sha256-" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def subagent_key(subagent_id: str | None) -> str | None:
    """A subagent id as records keep it: itself, or its hash when longer than MAX_ID."""
    if isinstance(subagent_id, str) and len(subagent_id) > MAX_ID:
        return _hashed(subagent_id)
    return subagent_id


def _text(value: object) -> bool:
    """Is this a payload string a record may keep?"""
    return isinstance(value, str) and 0 < len(value) <= MAX_TEXT


def record_path(data_dir: str | os.PathLike, agent: str, conversation_id: str) -> str:
    return os.path.join(data_dir, "conversations", agent, f"{conversation_key(conversation_id)}.json")


def write_json_atomic(path: str, value: object) -> None:
    """Temp file in the same folder + rename (paths are strings: pathlib costs the hook ~2 ms)."""
    folder, name = os.path.split(path)
    safedir.make_private(folder)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    data = fastjson.dumps(value).encode("utf-8", "surrogatepass")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_json(path: str | os.PathLike) -> dict | None:
    """A record, or None; a FIFO or device in its place is None at once, never a hang."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(MAX_RECORD_BYTES + 1)
            if len(data) > MAX_RECORD_BYTES:
                return None
            value = fastjson.loads(data.decode("utf-8", "surrogatepass"))
        finally:
            os.close(fd)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class RecordLock:
    """flock on a lock file, waiting at most LOCK_WAIT_S; then `acquired` stays False and the
    caller must not write the record (see missed_lock)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd: int | None = None
        self.acquired = False

    def __enter__(self) -> RecordLock:
        try:
            import fcntl
        except ImportError:  # not on Unix: single writer assumed
            self.acquired = True
            return self
        safedir.make_private(os.path.dirname(self.path))
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.acquired = True
                return self
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return self
                time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock


def apply_event(record: dict, ev: HookEvent, ts: float, host: dict) -> dict:
    """Fold one event into a conversation record (pure; the caller reads and writes)."""
    stamp = now_iso(ts)
    if not record:
        record = {
            "schema": SCHEMA,
            "agent": ev.agent,
            "conversation_id": ev.conversation_id,
            "created_at": stamp,
            "compactions": 0,
            "last_compaction_at": None,
            "active_subagents": {},
            "workspace_roots": [],
        }
    for key, value in (
        ("session_id", ev.session_id),
        ("transcript_path", ev.transcript_path),
        ("cwd", ev.cwd),
        ("turn_id", ev.turn_id),
    ):
        if _text(value) and not (ev.subagent_id and key == "transcript_path"):
            record[key] = value
    roots = [r for r in ev.workspace_roots if _text(r)][:MAX_ROOTS] if isinstance(ev.workspace_roots, list) else []
    if roots:
        record["workspace_roots"] = roots
    elif _text(ev.cwd) and not record.get("workspace_roots"):
        record["workspace_roots"] = [ev.cwd]
    record["host"] = host
    env = {k: os.environ[k] for k in _ID_ENV if _text(os.environ.get(k))}
    if env:
        record["host_env"] = env
    subagents: dict = record.setdefault("active_subagents", {})
    sub_id = subagent_key(ev.subagent_id)
    if ev.kind == SESSION_START:
        record["source"] = ev.source if _text(ev.source) else None
        record.pop("ended_at", None)
        if ev.source in ("startup", "resume", "clear"):
            subagents.clear()  # subagents of an earlier process are gone
            record.pop("subagents_overflow", None)
        if ev.source == "compact":
            _compacted(record, stamp, ts)
    elif ev.kind == PRE_COMPACT:
        _compacted(record, stamp, ts)
    elif ev.kind == PROMPT and isinstance(ev.idle_clear_s, (int, float)):
        # the host clears old tool results from its context, with no hook and no line in its
        # chat recording, when a prompt comes long enough after its last model answer; the
        # previous request's prompt event came before that answer, so measuring from it can
        # only count too often
        last = record.get("last_request_ts")
        if isinstance(last, (int, float)) and not isinstance(last, bool) and ts - last >= ev.idle_clear_s:
            _compacted(record, stamp, ts)
        record["last_request_ts"] = ts
    elif ev.kind == SUBAGENT_START and sub_id and sub_id.startswith(COUNTED_SUBAGENTS) and sub_id in subagents:
        # one more run under an id that is still open (the same call made twice at once): it
        # stays open until as many stops came
        info = subagents[sub_id] if isinstance(subagents[sub_id], dict) else {}
        runs = info.get("runs")
        info["runs"] = (runs if isinstance(runs, int) and not isinstance(runs, bool) and runs > 0 else 1) + 1
        subagents[sub_id] = info
    elif ev.kind == SUBAGENT_START and sub_id:
        subagents.pop(sub_id, None)
        kind = ev.subagent_type[:MAX_ID] if isinstance(ev.subagent_type, str) else None
        subagents[sub_id] = {"type": kind, "started_at": stamp, "started_ts": ts}
        while len(subagents) > MAX_SUBAGENTS:
            del subagents[_oldest(subagents, "started_ts")]
            record["subagents_overflow"] = ts
    elif ev.kind == SUBAGENT_STOP and sub_id:
        info = subagents.get(sub_id)
        runs = info.get("runs") if isinstance(info, dict) else None
        if isinstance(runs, int) and not isinstance(runs, bool) and runs > 1:
            info["runs"] = runs - 1
        else:
            subagents.pop(sub_id, None)
        record["last_subagent_stop_at"] = stamp
    elif ev.kind == STOP:
        record["stopped_at"] = stamp
    elif ev.kind == SESSION_END:
        record["ended_at"] = stamp
        subagents.clear()
        record.pop("subagents_overflow", None)
    record["last_event"] = ev.event
    record["updated_at"] = stamp
    record["updated_ts"] = ts
    return record


def _oldest(entries: dict, field: str) -> str:
    """The key whose entry has the smallest `field` (records are written with sorted keys, so
    insertion order does not survive a write; an entry without a number goes first)."""

    def when(key: str) -> float:
        v = entries[key].get(field) if isinstance(entries[key], dict) else None
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else float("-inf")

    return min(entries, key=when)


def _compacted(record: dict, stamp: str, ts: float) -> None:
    # Counted on PreCompact and again on SessionStart(compact): over-counting only costs one
    # extra full re-send, while a missed compaction would let a stub through.
    record["compactions"] = int(record.get("compactions") or 0) + 1
    record["last_compaction_at"] = stamp
    # the bump before this one: Claude Code writes its compact_boundary between PreCompact and
    # SessionStart(compact), so the read cache credits only a boundary inside that window
    record["prev_compaction_ts"] = record.get("last_compaction_ts")
    record["last_compaction_ts"] = ts


def missed_path(path: str) -> str:
    """The missed-lock counter beside a record (a dot file: record scans skip it)."""
    folder, name = os.path.split(path)
    return os.path.join(folder, "." + name[: -len(".json")] + ".missed")


def missed_count(path: str) -> tuple[int, float]:
    """(bytes in a record's missed-lock file, its mtime); (0, 0.0) when there is none."""
    try:
        st = os.stat(missed_path(path))
    except OSError:
        return 0, 0.0
    return st.st_size, st.st_mtime


def pending_missed(path: str, value: dict) -> tuple[int, float]:
    """Missed-lock bumps a reader must add to this record's counter, and when the last came."""
    size, mtime = missed_count(path)
    folded = value.get("missed_folded")
    folded = folded if isinstance(folded, int) and not isinstance(folded, bool) and folded >= 0 else 0
    return max(0, size - folded), mtime


def _fold_missed(record: dict, path: str) -> None:
    """Under the lock: count the missed-lock bumps not yet in the record (the file only grows)."""
    size = missed_count(path)[0]
    pending = pending_missed(path, record)[0]
    if pending:
        record["compactions"] = int(record.get("compactions") or 0) + pending
    if size:
        record["missed_folded"] = size


def missed_lock(data_dir: str | os.PathLike, path: str, ev: HookEvent) -> None:
    """The lock stayed busy: count a bump without touching the record, and say so in the log.
    Every missed event counts as a compaction (we do not know what it would have changed; an
    extra bump costs one full re-send, a lost one could let a wrong stub through)."""
    from leanctx.hooks import log

    try:
        safedir.make_private(os.path.dirname(path))
        fd = os.open(missed_path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, b"+")
        finally:
            os.close(fd)
        os.utime(os.path.dirname(path))  # appends leave the folder's mtime alone; readers watch it
        note = "counted as a compaction"
    except OSError as exc:
        note = f"could not count it either: {exc}"
    log(str(data_dir), ev.agent, ev.event, f"record lock busy for {LOCK_WAIT_S:g} s; record not written, {note}")


def publish(data_dir: str | os.PathLike, ev: HookEvent) -> str | None:
    """Update the conversation record and the last-writer slot. Returns the record path."""
    if not _text(ev.conversation_id):  # none, or too long to be an id we keep
        return None
    ts = time.time()
    host = host_process()
    path = record_path(data_dir, ev.agent, ev.conversation_id)
    with RecordLock(os.path.join(os.path.dirname(path), ".lock")) as lock:
        if not lock.acquired:
            missed_lock(data_dir, path, ev)
            return path
        record = apply_event(read_json(path) or {}, ev, ts, host)
        _fold_missed(record, path)
        write_json_atomic(path, record)
    write_json_atomic(
        os.path.join(data_dir, "active_transcript.json"),
        {
            "agent": ev.agent,
            "transcript_path": record.get("transcript_path"),
            "conversation_id": ev.conversation_id,
            "session_id": record.get("session_id"),
            "updated_at": now_iso(ts),
            "updated_ts": ts,
        },
    )
    return path


MAX_READ_CALLS = 64  # per conversation: more than a turn's parallel ctx_read calls, a few KB
MAX_CALL_ID = 200  # the longest call id we keep (the service ignores longer ones too)


def note_read_call(data_dir: str | os.PathLike, ev: HookEvent, ts: float | None = None, host: dict | None = None) -> str | None:
    """Note, just before the host runs our ctx_read, who is asking: the conversation itself, or
    one of its subagents (`agent_id`). The pre-tool hook finishes before the tool call is sent,
    so the cache service sees the note in time; a SubagentStart hook gives no such guarantee.

    When the host names the call (`tool_use_id`; Claude Code also sends it to the MCP server as
    `_meta["claudecode/toolUseId"]`), the note is kept under that id, so the service can tell
    exactly which context made each call, even with a subagent running beside its parent.
    (`ts`/`host` are given only by simulations; the hook uses now and its own host.)"""
    if not _text(ev.conversation_id):
        return None
    ts = time.time() if ts is None else ts
    path = record_path(data_dir, ev.agent, ev.conversation_id)
    with RecordLock(os.path.join(os.path.dirname(path), ".lock")) as lock:
        if not lock.acquired:
            missed_lock(data_dir, path, ev)
            return path
        record = read_json(path) or apply_event({}, ev, ts, host or host_process())
        _fold_missed(record, path)
        agent_id = subagent_key(ev.subagent_id)
        record["last_read_call"] = {"agent_id": agent_id, "ts": ts}
        if agent_id:
            # the subagent is running, whatever its SubagentStart says (it may land later, or be
            # lost): its window stays open until its SubagentStop, not until another call's note
            # (a parallel call of the parent replaces `last_read_call` while the subagent's own
            # call is still on its way to the MCP server)
            subagents = record.get("active_subagents")
            subagents = record["active_subagents"] = dict(subagents) if isinstance(subagents, dict) else {}
            if agent_id not in subagents:
                subagents[agent_id] = {"type": None, "started_at": now_iso(ts), "started_ts": ts, "by": "read-gate"}
                while len(subagents) > MAX_SUBAGENTS:
                    del subagents[_oldest(subagents, "started_ts")]
                    record["subagents_overflow"] = ts
        call_id = ev.tool_use_id
        if isinstance(call_id, str) and 0 < len(call_id) <= MAX_CALL_ID:
            calls = record.get("read_calls")
            calls = dict(calls) if isinstance(calls, dict) else {}
            calls.pop(call_id, None)
            # the compaction counter now: a delivery credited later (earlier_notes) must predate no bump
            calls[call_id] = {"agent_id": agent_id, "ts": ts, "compactions": int(record.get("compactions") or 0)}
            while len(calls) > MAX_READ_CALLS:
                del calls[_oldest(calls, "ts")]
            record["read_calls"] = calls
        write_json_atomic(path, record)
    return path


def earlier_notes(data_dir: str | os.PathLike, ev: HookEvent) -> dict:
    """The read-gate notes of this conversation whose calls no compaction has followed since
    (call id -> note), for crediting a delivery that shows only after its post-tool hook
    (Agent.builtin_read_earlier). Nothing while a missed-lock bump is pending, or for a note
    without its counter."""
    if not _text(ev.conversation_id):
        return {}
    path = record_path(data_dir, ev.agent, ev.conversation_id)
    record = read_json(path)
    if record is None or pending_missed(path, record)[0]:
        return {}
    now = record.get("compactions")
    calls = record.get("read_calls")
    if not isinstance(now, int) or isinstance(now, bool) or not isinstance(calls, dict):
        return {}
    return {cid: note for cid, note in calls.items()
            if isinstance(note, dict) and note.get("compactions") == now and not isinstance(note.get("compactions"), bool)}


MAX_LOSSES_SEEN = 64  # compaction ids a host log showed, kept so each is counted once


def note_losses(data_dir: str | os.PathLike, ev: HookEvent, ids: list, ts: float | None = None) -> None:
    """Count as a compaction each context loss the host's own log shows (Agent.context_losses)
    that this conversation's record has not counted yet. The host's hook for the same loss may
    count it again: one more re-send, never a stub."""
    if not _text(ev.conversation_id):
        return
    ids = [i for i in ids if isinstance(i, str) and 0 < len(i) <= MAX_ID]
    path = record_path(data_dir, ev.agent, ev.conversation_id)
    record = read_json(path)
    seen = record.get("losses_seen") if record else None
    if isinstance(seen, list) and all(i in seen for i in ids):
        return  # the common case: nothing new, no lock, no write
    ts = time.time() if ts is None else ts
    with RecordLock(os.path.join(os.path.dirname(path), ".lock")) as lock:
        if not lock.acquired:
            missed_lock(data_dir, path, ev)  # counted as a compaction all the same
            return
        record = read_json(path) or apply_event({}, ev, ts, host_process())
        _fold_missed(record, path)
        seen = record.get("losses_seen")
        seen = list(seen) if isinstance(seen, list) else []
        new = [i for i in ids if i not in seen]
        if not new:
            return
        for _ in new:
            _compacted(record, now_iso(ts), ts)
        record["losses_seen"] = (seen + new)[-MAX_LOSSES_SEEN:]
        write_json_atomic(path, record)
