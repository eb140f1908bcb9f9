"""Conversation scope: which conversation an MCP connection's read belongs to, and whether a stub
(or a range pointer, or a diff — anything that presumes the caller already holds bytes) may be
served to it right now.

A Connection's facts are first-hand: the stdio MCP server captures its own (in-process
fallback), and the daemon reads them from the kernel for the process at the other end of each
socket (peer.py), never from what a request claims.

Base semantics (seed 000, lean-ctx's conversation gate), then our two improvements:

1. `LEANCTX_SCOPE=<v>` in the connection's environment -> key `custom:<v>`; Cursor's
   `CURSOR_TASK_ID=<id>` (a subagent's own MCP process) -> key `task:<id>`. These win over
   everything else. If a hook record names the same id (`conversation_id` or `session_id` = v), its
   compaction counter and subagent windows still apply, and its incarnation is part of the key:
   at any age of the record (a stale record still carries the counter), and once a record was
   seen for v, never the bare key again after it is gone (`@gone:<incarnation>`).
2. `LEANCTX_CONVERSATION_SCOPE=0|false|off|no` -> legacy: one MCP connection is one
   conversation (`conn:<connection_id>`), stubs always allowed. The compaction counter is then
   a per-connection counter that goes up whenever any record of the same host process (or, with
   no host match, any record) shows a new compaction, appears (/clear: the MCP server survives
   it), ends or is re-created; the key carries the connection state's epoch, so a state evicted
   from the LRU and made again never finds what it held. Legacy deliveries are never persisted, so
   a legacy connection gets no cold stubs after a daemon restart.
3. Otherwise the hooks' records (`<data dir>/conversations/<agent>/<id>.json`):
   - records whose `updated_ts` is more than 2 h old are ignored (for matching; a chat still
     inside a turn keeps its own host process ambiguous at any age, see concurrency);
   - sampled with a 3 s cache per connection; `resolve(conn, fresh=True)` re-samples now and
     must be used right before every stub decision;
   - **per-connection identity** (improvement 2): the records whose `host` (pid + start ticks
     from /proc; where /proc is missing no host is named and nothing matches by host) is the
     connection's host process, i.e. the MCP server's parent. A CLI host
     (Claude Code, `codex exec`) runs one process per session and spawns both its hooks and its
     MCP server, so concurrent CLI sessions each resolve to their own record. Codex's interactive
     TUI runs every session in one app-server daemon by default: there several sessions share a
     host process: the per-call notes tell them apart, and a call without one, while two of
     them are active, gets no stub (below); When no record
     matches the host, `CLAUDE_CODE_SESSION_ID` / `CODEX_THREAD_ID` from the connection's
     environment match a record's session/conversation id — but only when one side has no host
     facts (a record that names a different live host belongs to another process: after a
     `--resume` in a second process, the first one must not keep the conversation's key);
   - a matched record is **active** when it was updated within 30 s or is still inside a turn
     (its last event was a prompt/subagent/compaction event with no stop since); ended records
     (`ended_at`) never count;
   - **concurrency**: more than one active record from the same host process means it serves
     several chats at once (Cursor: one process, several chats) -> no stub for anyone on it.
     Subagents live inside their parent's record, so they never count. On a host that runs
     several chats in one process (SEVERAL_CHATS) the elimination needs every chat's prompt hook,
     which may be lost or late: there, more than one open record of the process (any age) or a
     single one that stopped with no prompt since withholds as well;
   - otherwise the one active record wins, or with none active the **latest** (`updated_ts`):
     that covers `/clear` (the old session ends, the new one is written later);
   - **subagent window**: while the winning record has an open subagent (SubagentStart without
     SubagentStop), the subagent shares the parent's MCP connection and we cannot tell who is
     asking -> no stub;
   - **last-known-good**: a record we have read before that is now missing or unreadable (deleted,
     torn, a failed read) is still known by its last good contents (a "ghost") while its last
     update is within 2 h. A ghost keeps the connection's identity (key, roots) across the
     miss, and it still counts for concurrency (a chat whose record we cannot read may still be
     working). But a ghost can be stale — the update we failed to read may have been a
     compaction, a SubagentStart, a prompt that made its chat active again, or a resume that
     reopened it or moved it to another host process — so while a connection's own record is a
     ghost, stubs are withheld (lean-ctx keeps serving them; that is the one place we
     deliberately differ), and while ANY ghost is live (its last good update within 2 h, 24 h
     inside a turn) no connection-level identity is trusted: picking "the one active record of
     this host" is an elimination, and a stale ghost looking idle made one chat's reads count
     for another's (found by the property test). Per-call notes and explicit scopes name the
     caller and are not affected. The same holds when the records folder cannot be listed.
     The last good records are kept in `<data dir>/conversations/.last_good.json`, so a daemon
     restart does not forget them (nor the doubt a ghost carries). A
     record that is readable but now names another host is not a miss. An unreadable record we
     never read (host unknown) withholds stubs for every record-based scope until it is
     rewritten or 2 h old. A lost record that the next hook event re-creates is a new
     incarnation (see the key below); the subagent windows its lost incarnation had open (as
     far as we saw them) stay open for us. A subagent window closes on SubagentStop, on a
     SessionStart (startup/resume/clear) or SessionEnd, never by time alone (a subagent may run
     for days without a hook event);
   - **unknown caller** (improvement 1): nothing matches -> `key=None`, no stub, ever.

The key of a hook-record conversation is `<agent>:<conversation_id>@<created_at>#<pid>:<ticks>`:
the record's creation time is its incarnation, so a record that was lost and re-created (its
compaction counter restarts at 0) can never revive stubs delivered to the earlier incarnation;
the host process that wrote it makes one session open in two processes at once two contexts.

A read the cache serves while `stub_ok` is False is never recorded as delivered either: the bytes
may have gone to a subagent or another chat, so crediting them to this conversation could turn
into a wrong stub later.
"""

from __future__ import annotations

import os
import stat as statmod
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from leanctx.cache.hosthistory import HOSTS as HISTORY_HOSTS
from leanctx.cache.hosthistory import history_replacements
from leanctx.cache.rollout import subagent_rollout
from leanctx.cache.paths import real_roots
from leanctx.hooks.publish import MAX_SUBAGENTS, missed_count, pending_missed
from leanctx.cache.switches import switched_off

REFRESH_TTL_S = 3.0
CONCURRENCY_WINDOW_S = 30.0
RECORD_MAX_AGE_S = 7200.0
IN_TURN_MAX_AGE_S = 86400.0  # a chat still inside a turn keeps its host ambiguous this long
LAST_GOOD_NAME = ".last_good.json"
MAX_CONNECTIONS = 4096
MAX_EXPLICIT = 4096  # explicit scope ids whose record we remember having seen (least recently used dropped)
ID_ONLY = "matched by session id alone: the host process cannot be verified, so stubs are withheld"

#: environment names a connection captures (identity only; never credentials)
CONNECTION_ENV = (
    "LEANCTX_SCOPE",
    "LEANCTX_CONVERSATION_SCOPE",
    "CURSOR_TASK_ID",
    "CLAUDE_CODE_SESSION_ID",
    "CODEX_THREAD_ID",
    "COPILOT_AGENT_SESSION_ID",
    "CLAUDE_PROJECT_DIR",
    "CURSOR_PROJECT_DIR",
    "CURSOR_TRACE_ID",
    "LEANCTX_PER_CALL_IDENTITY",
)
_ID_ENV = ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID", "COPILOT_AGENT_SESSION_ID")  # the session the host started us in
_ROOT_ENV = ("CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR")


@dataclass(frozen=True)
class Connection:
    """Facts about one MCP connection, captured when the stdio MCP server starts (it is spawned by the host)."""

    connection_id: str  # unique per MCP server process
    env: dict[str, str]  # only the names in CONNECTION_ENV
    host_pid: int | None  # the MCP server's parent process (the host), shells skipped
    host_start_ticks: int | None  # its start time from /proc (pid reuse guard), like hooks/hostproc.py
    cwd: str | None = None  # the MCP server's working directory (hosts start it in the project)

    @classmethod
    def capture(cls, connection_id: str | None = None) -> Connection:
        """The facts of the current process, for the stdio MCP server to call at start-up."""
        import uuid

        from leanctx.hooks.hostproc import host_process

        host = host_process()
        try:
            cwd: str | None = os.getcwd()
        except OSError:
            cwd = None
        return cls(
            connection_id=connection_id or f"{os.getpid()}-{uuid.uuid4().hex[:12]}",
            env={k: os.environ[k] for k in CONNECTION_ENV if os.environ.get(k)},
            host_pid=host.get("pid"),
            host_start_ticks=host.get("start_ticks"),
            cwd=cwd,
        )

    def to_dict(self) -> dict:
        return {
            "connection_id": self.connection_id,
            "env": dict(self.env),
            "host_pid": self.host_pid,
            "host_start_ticks": self.host_start_ticks,
            "cwd": self.cwd,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Connection:
        env = d.get("env") if isinstance(d.get("env"), dict) else {}
        return cls(
            connection_id=str(d.get("connection_id") or ""),
            env={str(k): str(v) for k, v in env.items() if k in CONNECTION_ENV and isinstance(v, str)},
            host_pid=d.get("host_pid") if isinstance(d.get("host_pid"), int) else None,
            host_start_ticks=d.get("host_start_ticks") if isinstance(d.get("host_start_ticks"), int) else None,
            cwd=d.get("cwd") if isinstance(d.get("cwd"), str) else None,
        )


@dataclass(frozen=True)
class Scope:
    key: str | None  # the conversation key stubs are scoped to; None = unknown caller
    agent: str | None
    compactions: int  # the conversation's compaction counter now
    roots: tuple[str, ...]  # workspace roots / cwd from the record (for path safety)
    stub_ok: bool  # may a stub (or a pointer, or a diff) be served right now
    reason: str  # why not, when stub_ok is False (for stats and tests)
    cwd: str | None = None  # where relative paths resolve (the record's cwd, else the server's)
    persist: bool = field(default=True)  # may deliveries under this key outlive the daemon
    # (transcript path, the bump before the last compaction bump or None, the last bump): the
    # conversation's own context, never a subagent's, so the read cache can credit what the host
    # re-attached (carry.py)
    carry: tuple[str, float | None, float] | None = None
    # Claude Code: the session transcript is the authority on what the context still holds
    # (transcript.py); `verify` makes every stub/pointer/diff wait for its word, `call_id` is the
    # asking call's tool_use id (None: not sent, then the transcript's newest entry anchors)
    verify: bool = False
    transcript: str | None = None
    call_id: str | None = None
    # whose format `transcript` is in: "claude" (transcript.py), "codex" (its rollout: rollout.py) or
    # "copilot" (its session log: copilotevents.py)
    log: str = "claude"


# -- hook records -------------------------------------------------------------------------


class Rec:
    """One parsed conversation record (only what scoping needs)."""

    __slots__ = (
        "agent",
        "calls",
        "compacted_after",
        "compacted_ts",
        "compactions",
        "conversation_id",
        "created_at",
        "cwd",
        "ended",
        "ghost",
        "host_pid",
        "host_ticks",
        "in_turn",
        "inherited",
        "path",
        "roots",
        "session_id",
        "stopped",
        "subagents",
        "transcript",
        "updated_ts",
    )
    _OPTIONAL = ("compacted_after", "compacted_ts", "stopped", "transcript")  # absent from state files of older versions

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__ if k != "ghost"}

    @classmethod
    def from_dict(cls, d: dict) -> Rec | None:
        r = cls()
        try:
            for k in cls.__slots__:
                if k != "ghost":
                    setattr(r, k, d.get(k, {}) if k == "calls" else d.get(k) if k in cls._OPTIONAL else d[k])
            r.roots = tuple(r.roots)
            r.calls = {str(a): str(b) for a, b in dict(r.calls).items()}
            r.subagents = {str(a): float(b) for a, b in dict(r.subagents).items()}
            r.inherited = {str(a): float(b) for a, b in dict(r.inherited).items()}
            r.updated_ts = float(r.updated_ts)
            r.transcript = r.transcript if isinstance(r.transcript, str) else None
            r.compacted_ts = _num(r.compacted_ts)
            r.compacted_after = _num(r.compacted_after)
            if not (isinstance(r.path, str) and isinstance(r.conversation_id, str) and isinstance(r.compactions, int)):
                return None
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        r.ghost = False
        return r

    def key(self) -> str:
        """The conversation in the host process that last wrote the record: one session open in
        two processes at once (`--resume <id>` in a second terminal) is two contexts, so what
        one process received never counts for the other, whichever wrote the record last."""
        host = f"#{self.host_pid}:{self.host_ticks}" if self.host_pid is not None and self.host_ticks is not None else ""
        return f"{self.agent}:{self.conversation_id}@{self.created_at}{host}"


_KIND_CACHE: dict[tuple[str, str], str | None] = {}


def _event_kind(agent: str, event: str) -> str | None:
    k = (agent, event)
    if k not in _KIND_CACHE:
        kind = None
        try:
            from leanctx import agents

            spec = agents.get(agent).event(event)
            kind = spec.kind if spec else None
        except Exception:  # noqa: BLE001 - unknown agent/event: unknown kind
            kind = None
        _KIND_CACHE[k] = kind
    return _KIND_CACHE[k]


def _in_turn(agent: str, value: dict, subagents: dict) -> bool:
    """Is this conversation inside a turn (a prompt seen, no stop since)? Unknown -> yes."""
    from leanctx.agents.base import SESSION_END, SESSION_START, STOP

    if subagents:
        return True
    last = value.get("last_event")
    if not isinstance(last, str):
        return True
    kind = _event_kind(agent, last)
    if kind in (STOP, SESSION_END):
        return False
    if kind == SESSION_START:
        return value.get("source") == "compact"
    return True  # a prompt, subagent, compaction, tool or reply event, or one we do not know


def _stopped(agent: str, value: dict) -> bool:
    """Was the conversation's last event the end of a turn (a Stop)? Then it makes no tool call
    until its next prompt."""
    from leanctx.agents.base import STOP

    last = value.get("last_event")
    return isinstance(last, str) and _event_kind(agent, last) == STOP


# Hosts whose one process serves several chats at once (Cursor). The connection is shared by all
# of them, so picking the chat by elimination needs every chat's prompt hook: one lost (or the
# first hooks of a new chat still on their way) and one chat's reads count for another's. On
# these hosts the elimination is used only while it cannot be wrong that way: exactly one chat of
# the process is open (any age: a chat idle for days may take a prompt whose hook is lost), and
# that chat has not stopped (a tool call happens inside a turn; after a Stop, a call means a
# prompt we did not see).
SEVERAL_CHATS = ("cursor",)

# Hosts whose MCP calls carry an id only because our read gate handed it over (Copilot CLI: the
# preMcpToolCall hook's `metaToUse`): a call without one is a call whose gate did not run (lost,
# timed out), so nobody can say who makes it, a subagent session whose first hooks are late included.
# OpenClaw 2026.9.6 likewise: its gateway, one process for every person, calls MCP tools with no
# `_meta`; our plugin hands ctx_read the call's id as an argument (mcpserver.CALL_ID_ARG). Matching
# by elimination there would pick one person's conversation for another's read. Amp likewise: one
# Amp process runs several threads, and its MCP client sends no `_meta` (agents/amp.py).
CALL_ID_FROM_GATE = ("copilot", "openclaw", "amp")
# Hosts whose call id reaches the MCP server in the call's arguments (mcpserver.CALL_ID_ARG, marked
# with ARG_CALL_ID), put there by our plugin over whatever the model wrote. On any other host the
# model could write it: there the id is dropped and the call goes on as one without an id.
CALL_ID_IN_ARGS = ("openclaw", "amp")
ARG_CALL_ID = "arg:"

# Hosts whose pre-tool payload may not name the subagent that makes a call: Qwen Code 0.15.10
# sends a subagent's PreToolUse without `agent_id` (0.24.4 names it), Gemini CLI 0.61.0 names no
# subagent anywhere (its window is the `invoke_agent` call: agents/gemini.py). A note without a
# subagent id made while a subagent runs may be the subagent's: nobody can say whose it is.
UNNAMED_SUBAGENT_CALLS = ("qwen", "gemini")

TRANSCRIPT_AGENTS = ("claude", "codex")  # hosts whose own log of the context is asked (transcript.py, rollout.py)

#: hosts that drop context with no hook leanctx receives and no file it reads: no stub, ever.
#: Cline CLI 3.0.65 (@cline/core 0.0.86) compacts on its own (auto_compaction,
#: compaction_budget_emergency, max_tokens_compaction) and maps a `PreCompact` hook file to no
#: event of its runtime (`["PreCompact"]: void 0`), so that hook never runs.
#: Windsurf (documentation only) has no session-start, compaction or session-end hook event at all
#: (docs.windsurf.com/windsurf/cascade/hooks); Kiro CLI compacts (`/compact`, automatically on
#: overflow) with none of its five hook events saying so (kiro.dev/docs/cli/hooks).
#: VS Code (documentation and source only, agents/vscode.py): with history summarization off, or
#: with the Responses API's own compaction or truncation on, Copilot Chat drops old turns to fit its
#: prompt budget without PreCompact (microsoft/vscode-copilot-chat agentIntent.ts,
#: agentConversationHistory.tsx: a PrioritizedList pruned by the budget); its MCP servers' caller
#: is not verified either.
SILENT_COMPACTION = {
    "cline": "Cline compacts without a hook leanctx receives, so stubs are withheld",
    # documentation only (docs/hosts.md): a released Crush fires PreToolUse alone, Goose's hooks
    # have no compaction event, Antigravity CLI documents none
    "crush": "Crush summarises its context without a hook leanctx receives, so stubs are withheld",
    "goose": "Goose compacts without a hook leanctx receives, so stubs are withheld",
    "antigravity": "Antigravity CLI has no compaction hook leanctx receives, so stubs are withheld",
    "windsurf": "Windsurf has no hook for a compaction or a new session, so stubs are withheld",
    "kiro": "Kiro CLI compacts without a hook leanctx receives, so stubs are withheld",
    # Auggie 0.36.0 summarizes its history (a `history_summary_node`, when its backend's
    # `history_summary_min_version` flag is set, or on the backend's `summarize_and_retry`; seen in
    # a run), cuts the oldest exchanges of a long one from the request (`max_history_chars`, marked
    # nowhere), and has no compaction hook event at all
    "auggie": "Auggie summarizes its history without a hook leanctx receives, so stubs are withheld",
    "vscode": "VS Code drops old turns without a hook leanctx receives, so stubs are withheld",
}


def _verified(scope: Scope, rec: Rec, call_id: str | None, agent_id: str | None = None,
              host_log: str | None = None) -> Scope:
    """Ask the host's own log before crediting anything to a Claude Code, Codex or Copilot CLI conversation.
    Claude Code: a subagent's context is its own transcript, `<session transcript without
    .jsonl>/subagents/agent-<id>.jsonl` (2.1.x; one kept in another sub-folder is not found, so
    nothing is credited). Codex: the rollout (rollout.py); a subagent's is its own rollout beside
    the parent's."""
    if rec.agent == "copilot":
        # Copilot CLI: its session log shows whether a postToolUse hook replaced what the model
        # got for a delivering call (copilotevents.py); the subagent rules stay as they are
        # (a subagent's calls sit in its parent's log: `host_log`, found by the caller)
        return replace(scope, verify=True, transcript=rec.transcript or host_log, call_id=call_id, log="copilot")
    if rec.agent not in TRANSCRIPT_AGENTS:
        return scope
    path = rec.transcript
    if rec.agent == "codex":
        path = subagent_rollout(path, agent_id) if agent_id else path
        return replace(scope, verify=True, transcript=path, call_id=call_id, log="codex")
    if path and agent_id:
        path = (os.path.join(path[:-6], "subagents", f"agent-{agent_id}.jsonl")
                if path.endswith(".jsonl") and "/" not in agent_id and agent_id not in (".", "..") else None)
    return replace(scope, verify=True, transcript=path, call_id=call_id)


def _copilot_log(recs: list) -> str | None:
    """Copilot CLI runs a subagent in its parent's process and logs its calls in the parent's
    session log, while the subagent's hooks name only its own session: the one session log named
    by the records of that host process (two: which one is unknown, None)."""
    logs = {r.transcript for r in recs if r.agent == "copilot" and r.transcript}
    return logs.pop() if len(logs) == 1 else None


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def parse_record(path: str, agent_dir: str, value: object) -> Rec | None:
    """A record, or None when it is not one we can trust (treated as absent)."""
    if not isinstance(value, dict):
        return None
    cid = value.get("conversation_id")
    updated = _num(value.get("updated_ts"))
    comp = value.get("compactions", 0)
    if not isinstance(cid, str) or not cid or updated is None:
        return None
    if comp is None:
        comp = 0
    if not isinstance(comp, int) or isinstance(comp, bool) or comp < 0:
        return None
    r = Rec()
    r.path = path
    r.agent = value.get("agent") if isinstance(value.get("agent"), str) and value.get("agent") else agent_dir
    r.conversation_id = cid
    r.session_id = value.get("session_id") if isinstance(value.get("session_id"), str) else None
    r.created_at = value.get("created_at") if isinstance(value.get("created_at"), str) else ""
    r.updated_ts = updated
    # bumps from hooks that found the record lock busy (hooks/publish.py: missed_lock): counted
    # at once, and stubs stay withheld until a locked writer has folded them into the record
    missed, missed_at = pending_missed(path, value)
    r.compactions = comp + missed
    r.ended = bool(value.get("ended_at"))
    r.transcript = value.get("transcript_path") if isinstance(value.get("transcript_path"), str) else None
    r.compacted_ts = _num(value.get("last_compaction_ts"))
    r.compacted_after = _num(value.get("prev_compaction_ts"))
    host = value.get("host") if isinstance(value.get("host"), dict) else {}
    pid, ticks = host.get("pid"), host.get("start_ticks")
    r.host_pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else None
    r.host_ticks = ticks if isinstance(ticks, int) and not isinstance(ticks, bool) else None
    r.cwd = value.get("cwd") if isinstance(value.get("cwd"), str) and value.get("cwd") else None
    roots = value.get("workspace_roots")
    r.roots = tuple(x for x in roots if isinstance(x, str) and x) if isinstance(roots, list) else ()
    subs = value.get("active_subagents")
    r.subagents = {"lock-missed": missed_at} if missed else {}
    overflow = _num(value.get("subagents_overflow"))  # more subagents were open than the record keeps
    if overflow is not None:
        r.subagents["overflow"] = overflow
    if isinstance(subs, dict) and len(subs) > MAX_SUBAGENTS:  # not a record we wrote: withhold
        r.subagents["overflow"] = updated
    elif isinstance(subs, dict):
        for sid, info in subs.items():
            started = _num(info.get("started_ts")) if isinstance(info, dict) else None
            r.subagents[str(sid)] = started if started is not None else updated
    # The read gate (a pre-tool hook narrowed to ctx_read) notes, before each call runs, whether a
    # subagent is the caller. SubagentStart alone can land after the subagent's first tool call in
    # the real Claude Code, so a subagent's note withholds stubs until the conversation's own next
    # ctx_read note (agent_id None) replaces it.
    gate = value.get("last_read_call")
    if isinstance(gate, dict) and isinstance(gate.get("agent_id"), str) and gate["agent_id"]:
        ts = _num(gate.get("ts"))
        r.subagents["read-gate:" + gate["agent_id"]] = ts if ts is not None else updated
    # ...and, keyed by the host's id for each call, exactly which context made it ("" = the
    # conversation itself): see Resolver._by_call
    r.calls = {}
    calls = value.get("read_calls")
    if isinstance(calls, dict):
        for cid, note in calls.items():
            if isinstance(cid, str) and cid and isinstance(note, dict):
                agent_id = note.get("agent_id")
                if agent_id is None:
                    r.calls[cid] = ""
                elif isinstance(agent_id, str) and agent_id:
                    r.calls[cid] = agent_id
                # anything else: not a note we wrote, so it proves nothing
    r.in_turn = _in_turn(r.agent, value, r.subagents)
    r.stopped = _stopped(r.agent, value)
    r.inherited = {}
    r.ghost = False
    return r


def _carry_of(rec: Rec) -> tuple[str, float | None, float] | None:
    """What the read cache needs to credit re-attached files: the record's transcript and the
    times of the last two compaction bumps (None before any compaction)."""
    if rec.transcript and rec.compactions > 0 and rec.compacted_ts is not None:
        return (rec.transcript, rec.compacted_after, rec.compacted_ts)
    return None


def _kept(rec: Rec, now: float) -> bool:
    """Is a record's last good state still worth keeping (and, as a ghost, still doubted)?"""
    busy = rec.in_turn or rec.subagents or rec.inherited
    return now - rec.updated_ts <= (IN_TURN_MAX_AGE_S if busy else RECORD_MAX_AGE_S)


def _read_json(path: str) -> object:
    from leanctx.hooks.publish import read_json

    return read_json(path)


class _Dir:
    __slots__ = ("files", "mtime_ns")

    def __init__(self, mtime_ns: int, files: dict) -> None:
        self.mtime_ns = mtime_ns
        self.files = files  # name -> (signature, Rec | None, path)


class View:
    """Indexes over one version of the snapshot (time filters are applied by the caller)."""

    __slots__ = ("bad", "by_host", "by_id", "ghosts", "recs")

    def __init__(self, recs: list[Rec], bad: list[tuple[str, int]]) -> None:
        self.recs = recs
        self.ghosts = [r for r in recs if r.ghost]
        self.by_host: dict[tuple, list[Rec]] = {}
        self.by_id: dict[str, list[Rec]] = {}
        for r in recs:
            self.by_host.setdefault((r.host_pid, r.host_ticks), []).append(r)
            for i in {r.conversation_id, r.session_id}:
                if i:
                    self.by_id.setdefault(i, []).append(r)
        self.bad = bad  # (path, mtime_ns) of unreadable files whose host we never knew


class RecordSnapshot:
    """All records under `<data dir>/conversations`, re-read only when they changed.

    Records are always written by rename, which touches their folder's mtime: a folder whose
    mtime is unchanged is not listed again, unless that mtime is so recent that a second write in
    the same timestamp tick could hide behind it (RACY: 50 ms where the filesystem keeps
    sub-second mtimes, 2 s where it does not). Every FULL_RESCAN_S of wall time everything is
    listed and stat'ed again (a safety net for writes that did not rename). Files are re-parsed
    only when their (mtime, size, inode) changed. `last_good` keeps the last good parse of every
    record (persisted), so a record that vanishes or turns unreadable is still known (a ghost)."""

    FULL_RESCAN_S = 60.0

    def __init__(self, data_dir: str, persist: bool = True) -> None:
        self.base = os.path.join(data_dir, "conversations")
        self.state_file = os.path.join(self.base, LAST_GOOD_NAME) if persist else None
        self._dirs: dict[str, _Dir] = {}
        self._full_at = 0.0
        self._fine_mtime = False  # seen a sub-second mtime on this filesystem
        self.degraded = False
        self.last_good: dict[str, Rec] = {}
        # explicit scope id -> the incarnation (created_at) of the last record seen for it, so
        # that once its record is gone the scope never falls back to the bare key it had before
        # any record existed (whose holdings may predate a compaction)
        self.explicit: OrderedDict[str, str] = OrderedDict()
        self._dirty = False
        self._urgent = False  # an `explicit` change: saved before the answer (see save_if_dirty)
        self.version = 0
        self._view: View | None = None
        self._view_version = -1
        self._load()

    def _load(self) -> None:
        if not self.state_file:
            return
        value = _read_json(self.state_file)
        seen = value.get("explicit") if isinstance(value, dict) else None
        if isinstance(seen, dict):
            for k, v in list(seen.items())[-MAX_EXPLICIT:]:
                if isinstance(k, str) and isinstance(v, str):
                    self.explicit[k] = v
        recs = value.get("records") if isinstance(value, dict) else None
        for d in recs if isinstance(recs, list) else []:
            rec = Rec.from_dict(d) if isinstance(d, dict) else None
            if rec is not None:
                self.last_good[rec.path] = rec

    def forget_stale(self, now: float) -> None:
        """Drop last good records past their age, BEFORE a view is built from them: a ghost too
        old to doubt that still sits in `last_good` would be neither a ghost nor an unknown
        unreadable record for one resolve."""
        stale = [p for p, r in self.last_good.items() if not _kept(r, now)]
        for p in stale:
            del self.last_good[p]
        if stale:
            self.version += 1
            self._dirty = True

    def saw_explicit(self, match_id: str, created_at: str) -> None:
        if self.explicit.get(match_id) != created_at:
            self.explicit[match_id] = created_at
            self._dirty = self._urgent = True
        self.explicit.move_to_end(match_id)
        while len(self.explicit) > MAX_EXPLICIT:
            self.explicit.popitem(last=False)

    def save_if_dirty(self, now: float, urgent_only: bool = False) -> None:
        """`urgent_only`: save only when `explicit` changed. A newer `last_good` record may wait
        until after the answer (the daemon saves right after it sends it): a crash in between
        leaves an older last good copy, which matters only for a record that is unreadable at the
        next start, and such a record (a ghost) withholds stubs whatever its version. An explicit
        scope's incarnation may not wait: lost, a scope whose record is then gone would fall back
        to its bare key, whose holdings may predate a compaction."""
        self.forget_stale(now)
        if not self._dirty or not self.state_file or (urgent_only and not self._urgent):
            return
        try:
            from leanctx.hooks.publish import write_json_atomic

            write_json_atomic(self.state_file, {"records": [r.to_dict() for r in self.last_good.values()],
                                                "explicit": dict(self.explicit)})
            self._dirty = self._urgent = False
        except OSError:
            pass

    def _racy(self, wall: float, mtime_ns: int) -> bool:
        if mtime_ns % 1_000_000_000:
            self._fine_mtime = True
        return wall - mtime_ns / 1e9 <= (0.05 if self._fine_mtime else 2.0)

    def refresh(self) -> None:
        wall = time.time()
        force = wall - self._full_at >= self.FULL_RESCAN_S
        self.degraded = False
        try:
            entries = list(os.scandir(self.base))
        except FileNotFoundError:
            if self._dirs:
                self._dirs = {}
                self.version += 1
            return
        except OSError:
            self.degraded = True  # keep what we had, but it may be stale
            return
        seen = set()
        for d in entries:
            try:
                if d.name.startswith(".") or not d.is_dir(follow_symlinks=False):
                    continue
                st = d.stat(follow_symlinks=False)
            except OSError:
                continue
            seen.add(d.name)
            cached = self._dirs.get(d.name)
            if not force and cached and cached.mtime_ns == st.st_mtime_ns and not self._racy(wall, st.st_mtime_ns):
                continue
            old = cached.files if cached else {}
            files = {}
            changed = cached is None
            try:
                listing = list(os.scandir(d.path))
            except OSError:
                self.degraded = True
                continue
            for f in listing:
                if f.name.startswith(".") or not f.name.endswith(".json"):
                    continue
                try:
                    fst = f.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                except OSError:
                    self.degraded = True
                    continue
                if not statmod.S_ISREG(fst.st_mode):
                    continue
                sig = (fst.st_mtime_ns, fst.st_size, fst.st_ino, missed_count(f.path)[0])
                prev = old.get(f.name)
                if prev is not None and prev[0] == sig:
                    files[f.name] = prev
                    continue
                changed = True
                rec = parse_record(f.path, d.name, _read_json(f.path))
                files[f.name] = (sig, rec, f.path)
                if rec is not None:
                    self._inherit(rec, self.last_good.get(rec.path))
                    self.last_good[rec.path] = rec
                    self._dirty = True
            if changed or len(files) != len(old):
                self.version += 1
            self._dirs[d.name] = _Dir(st.st_mtime_ns, files)
        for name in list(self._dirs):
            if name not in seen:
                del self._dirs[name]
                self.version += 1
        if force:
            self._full_at = wall

    @staticmethod
    def _inherit(rec: Rec, prev: Rec | None) -> None:
        """A record re-created at the same path (lost and written again from the next event)
        starts with no subagent windows; the windows the lost incarnation had open may still be
        running in the same host process, so they stay open for us (until the conversation ends
        or a new process takes it over)."""
        if prev is None or rec.ended:
            return
        if prev.created_at == rec.created_at:
            inh = dict(prev.inherited)
        elif not prev.ended and (prev.host_pid, prev.host_ticks) == (rec.host_pid, rec.host_ticks):
            inh = {**prev.inherited, **prev.subagents}
        else:
            inh = {}
        if inh:
            rec.inherited = inh
            rec.in_turn = True

    def records(self) -> list[Rec]:
        return [rec for d in self._dirs.values() for _sig, rec, _p in d.files.values() if rec is not None]

    def view(self) -> View:
        """Readable records plus ghosts (the last good state of records that vanished or turned
        unreadable), indexed by host and by id; rebuilt only when something changed."""
        if self._view is None or self._view_version != self.version:
            recs = self.records()
            readable = {r.path for r in recs}
            for path, r in self.last_good.items():
                if path not in readable:
                    g = Rec.from_dict(r.to_dict())
                    if g is not None:
                        g.inherited = dict(r.inherited)
                        g.ghost = True
                        recs.append(g)
            bad = [(path, sig[0]) for d in self._dirs.values() for sig, rec, path in d.files.values()
                   if rec is None and path not in self.last_good]
            self._view, self._view_version = View(recs, bad), self.version
        return self._view

    def unknown_bad(self) -> list[str]:
        """Unreadable record files we never read well (their host is unknown), modified < 2 h ago."""
        wall = time.time()
        return [p for p, m in self.view().bad if wall - m / 1e9 <= RECORD_MAX_AGE_S]


# -- the resolver ---------------------------------------------------------------------------


class _ConnState:
    __slots__ = ("epoch", "legacy_count", "legacy_seen", "legacy_started", "sampled_at", "scope")

    def __init__(self, epoch: int = 0) -> None:
        self.epoch = epoch  # distinct per state: one evicted from the LRU and made again starts afresh
        self.sampled_at = -1e18
        self.scope: Scope | None = None
        self.legacy_seen: dict[str, tuple[str, int]] = {}
        self.legacy_count = 0
        self.legacy_started = False


class Resolver:
    def __init__(self, data_dir: str, clock: Callable[[], float] = time.time, *, persist: bool = True,
                 shared: bool = False, save_after_answer: bool = False) -> None:
        self.data_dir = str(data_dir)
        self.clock = clock
        # the daemon: a record snapshot that only a newer last good copy made dirty is saved by
        # flush() after the answer went out (RecordSnapshot.save_if_dirty), not before it
        self.save_after_answer = save_after_answer
        # The daemon serves every process of the user (shared=True): there a session variable
        # alone proves nothing (any process can be started with another chat's id), so a match
        # by id without the host process gets no stubs and credits nothing. An MCP server's own
        # in-process cache is private to it, so there the id alone is enough.
        self.shared = shared
        self._snap = RecordSnapshot(self.data_dir, persist=persist)
        self._conns: OrderedDict[str, _ConnState] = OrderedDict()
        self._epochs = 0
        self._lock = threading.RLock()

    # public ---------------------------------------------------------------------------------
    def resolve(self, conn: Connection, fresh: bool = False, call_id: str | None = None) -> Scope:
        """Who is asking on `conn`, and may they get a stub. `call_id` is the host's id for this
        very tool call (Claude Code's `_meta["claudecode/toolUseId"]`) when it sends one."""
        now = self.clock()
        with self._lock:
            st = self._conns.get(conn.connection_id)
            if st is None:
                self._epochs += 1
                st = self._conns[conn.connection_id] = _ConnState(self._epochs)
                while len(self._conns) > MAX_CONNECTIONS:
                    self._conns.popitem(last=False)
            else:
                self._conns.move_to_end(conn.connection_id)
            if not fresh and not call_id and st.scope is not None and 0 <= now - st.sampled_at < REFRESH_TTL_S:
                return st.scope
            scope, per_call = self._resolve_now(conn, st, now, call_id)
            if not per_call:  # the connection's own answer; one call's answer is not cached
                st.scope, st.sampled_at = scope, now
            self._snap.save_if_dirty(now, urgent_only=self.save_after_answer)
            if call_id and scope.verify and scope.call_id is None and not call_id.startswith(ARG_CALL_ID):
                scope = replace(scope, call_id=call_id)  # the host named this call: its transcript entry anchors
            return scope

    def flush(self) -> None:
        """Save what resolve() left for after the answer (save_after_answer)."""
        with self._lock:
            self._snap.save_if_dirty(self.clock())

    def forget(self, connection_id: str) -> None:
        with self._lock:
            self._conns.pop(connection_id, None)

    # internals ------------------------------------------------------------------------------
    def _fallback_roots(self, conn: Connection) -> tuple[str, ...]:
        cands = [conn.env.get(k) for k in _ROOT_ENV] + [conn.cwd]
        return real_roots(c for c in cands if c)

    def _view(self) -> View:
        self._snap.refresh()
        self._snap.forget_stale(self.clock())
        return self._snap.view()

    def _roots_of(self, recs: list[Rec], conn: Connection) -> tuple[str, ...]:
        raw: list[str] = []
        for r in recs:
            raw.extend(r.roots)
            if r.cwd:
                raw.append(r.cwd)
        roots = real_roots(raw)
        return roots or self._fallback_roots(conn)

    @staticmethod
    def _host_match(conn: Connection, view: View) -> list[Rec]:
        """Every record (any age) of the connection's host process. A pid without its start ticks
        proves nothing (it may be reused), so it matches nothing."""
        if conn.host_pid is None or conn.host_start_ticks is None:
            return []
        return view.by_host.get((conn.host_pid, conn.host_start_ticks), [])

    @staticmethod
    def _env_match(conn: Connection, view: View) -> list[Rec]:
        out = []
        for i in {conn.env[k] for k in _ID_ENV if conn.env.get(k)}:
            for r in view.by_id.get(i, []):
                if r.host_pid is not None and conn.host_pid is not None:
                    continue  # both sides know their host and they differ: another process's session
                if r not in out:
                    out.append(r)
        return out

    @staticmethod
    def _fresh(recs: list[Rec], now: float) -> list[Rec]:
        return [r for r in recs if now - r.updated_ts <= RECORD_MAX_AGE_S]

    def _resolve_now(self, conn: Connection, st: _ConnState, now: float, call_id: str | None) -> tuple[Scope, bool]:
        """The scope, and whether it was decided for this one call (from its read-gate note)."""
        env = conn.env
        explicit = (env.get("LEANCTX_SCOPE") or "").strip()
        if explicit:
            return self._explicit(conn, f"custom:{explicit}", explicit, now, agent=None), False
        task = (env.get("CURSOR_TASK_ID") or "").strip()
        if task:
            # bound to the host process too: a subagent's MCP server always runs under the one
            # Cursor process, and another process started with the same id must not share it
            return self._explicit(conn, f"task:{task}@{conn.host_pid}:{conn.host_start_ticks}", None, now,
                                  agent="cursor"), False
        if switched_off(env.get("LEANCTX_CONVERSATION_SCOPE")):
            return self._legacy(conn, st, now), False
        view = self._view()
        if call_id and call_id.startswith(ARG_CALL_ID):
            recs = self._fresh(self._host_match(conn, view), now)
            ok = recs and all(r.agent in CALL_ID_IN_ARGS for r in recs)
            call_id = call_id[len(ARG_CALL_ID):] if ok else None
        if call_id:
            scope = self._by_call(conn, view, call_id, now)
            if scope is not None:
                return scope, True
        elif not switched_off(env.get("LEANCTX_PER_CALL_IDENTITY")):
            scope = self._gate_skipped(conn, view, now)
            if scope is not None:
                return scope, True
        return self._by_records(conn, view, now), False

    def _gate_skipped(self, conn: Connection, view: View, now: float) -> Scope | None:
        """A call without an id on a host where only our read gate gives calls their id
        (CALL_ID_FROM_GATE): its gate did not run, so it is withheld and credited to nobody."""
        recs = self._fresh(self._host_match(conn, view), now)
        if not recs or not all(r.agent in CALL_ID_FROM_GATE for r in recs):
            return None
        latest = max(recs, key=lambda r: r.updated_ts)
        return Scope(None, latest.agent, 0, self._roots_of(recs, conn), False, "read gate did not run for this call",
                     latest.cwd or conn.cwd, False)

    def _by_records(self, conn: Connection, view: View, now: float) -> Scope:
        """The connection-level rules: its host's records (or the session its host named)."""
        mine = self._host_match(conn, view)
        cands = self._fresh(mine, now)
        by_id_only = not cands
        if by_id_only:
            cands = self._fresh(self._env_match(conn, view), now)
        if not cands:
            return Scope(None, None, 0, self._fallback_roots(conn), False, self._why_unknown(conn), conn.cwd, False)
        if by_id_only and self.shared:
            latest = max(cands, key=lambda r: r.updated_ts)
            return Scope(None, latest.agent, 0, self._roots_of([latest], conn), False, ID_ONLY,
                         latest.cwd or conn.cwd, False)
        open_ = [r for r in cands if not r.ended]
        if not open_:
            latest = max(cands, key=lambda r: r.updated_ts)
            return Scope(None, latest.agent, 0, self._roots_of([latest], conn), False, "conversation ended", latest.cwd or conn.cwd, False)
        several = self._several_chats(mine, open_)
        if several:
            latest = max(open_, key=lambda r: r.updated_ts)
            return Scope(None, latest.agent, 0, self._roots_of(open_, conn), False, several, latest.cwd or conn.cwd, False)
        active = [r for r in open_ if now - r.updated_ts <= CONCURRENCY_WINDOW_S or r.in_turn]
        # a chat of this host still inside a turn whose record is older than 2 h is ignored for
        # matching, but it may still be working: it keeps the host ambiguous, at any age (the
        # host process is alive: this connection is its own)
        active += [r for r in mine if r.in_turn and not r.ended and RECORD_MAX_AGE_S < now - r.updated_ts]
        if len(active) > 1:
            latest = max(active, key=lambda r: r.updated_ts)
            return Scope(None, latest.agent, 0, self._roots_of(active, conn), False,
                         f"{len(active)} conversations active on this host process", latest.cwd or conn.cwd, False)
        latest = active[0] if active else max(open_, key=lambda r: r.updated_ts)
        return self._unseen(self._guard(self._scope_of(latest, latest.key(), conn, now), latest), view, now)

    @staticmethod
    def _several_chats(mine: list[Rec], open_: list[Rec]) -> str:
        """Why a host that runs several chats in one process cannot be told apart by elimination
        now (SEVERAL_CHATS), or ""."""
        if not open_ or not all(r.agent in SEVERAL_CHATS for r in open_):
            return ""
        chats = {r.path for r in mine if not r.ended} | {r.path for r in open_}
        if len(chats) > 1:
            return f"{len(chats)} conversations open on this host process (one's prompt hook may be lost)"
        if open_[0].stopped and not open_[0].subagents:
            return "the conversation stopped and no prompt was seen since (a prompt hook may be lost)"
        return ""

    @staticmethod
    def _unseen(scope: Scope, view: View, now: float) -> Scope:
        """Connection-level identity is an elimination: the one active record of this host
        process is the caller. A ghost (a record read before, unreadable or gone now) may hide
        any update since — a prompt that made its chat active, a SubagentStart, a resume that
        reopened it or moved it onto this host — so while one is live, wherever it was last
        seen, nobody is picked that way and nothing served is credited. Per-call notes and
        explicit scopes name the caller outright and do not need this."""
        if not scope.stub_ok:
            return scope
        live = [r for r in view.ghosts if _kept(r, now)]
        if not live:
            return scope
        return replace(scope, stub_ok=False,
                       reason=f"{len(live)} conversation record(s) unreadable (transient miss): stubs withheld")

    def _by_call(self, conn: Connection, view: View, call_id: str, now: float) -> Scope | None:
        """Per-call identity: the read gate (a pre-tool hook the host runs, and waits for, before
        this call) noted under the call's id which context makes it: the conversation itself or
        one of its subagents. That settles what the subagent window and the several-chats rule
        only guard against, so neither applies; a subagent gets its own key (its context holds
        only what it read itself). The note must sit in a record of this connection's own host
        process (or, host unknown, of the session the host named in our environment), in
        exactly one such record. A host whose gate runs (its records hold notes) but no note of
        this call, or the id in two records: withheld. A host without notes: None (the usual
        rules). Explicit and legacy scopes come first and never get here."""
        if conn.host_pid is None and self.shared:
            return None  # a note found by session id alone proves nothing here: _by_records withholds
        cands = self._fresh(self._host_match(conn, view) if conn.host_pid is not None else self._env_match(conn, view), now)
        hits = [r for r in cands if call_id in r.calls]
        if len(hits) != 1:
            # The gate runs for this host (its records hold notes), yet this call has no note of its
            # own: the hook failed or timed out, its note is still on its way (a subagent's first
            # call can get here before its note or its SubagentStart), or the id is ambiguous.
            # Nobody can say who is asking, and nothing served may be credited. Before the host's
            # first note the same holds where no host log can check the credit later (every host
            # but Claude Code and Codex): the connection's rules would credit a subagent's read to
            # its parent. Claude Code's transcript shows that call's result outside the parent's
            # chain, Codex's rollout in the subagent's own rollout, not the parent's.
            if not hits and not any(r.calls for r in cands) and all(r.agent in TRANSCRIPT_AGENTS for r in cands):
                return None
            recs = cands or self._host_match(conn, view)
            latest = max(recs, key=lambda r: r.updated_ts) if recs else None
            return Scope(None, latest.agent if latest else None, 0, self._roots_of(recs, conn) if recs else self._fallback_roots(conn),
                         False, "read gate note missing for this call", (latest.cwd if latest else None) or conn.cwd, False)
        rec = hits[0]
        if rec.ended:
            return Scope(None, rec.agent, 0, self._roots_of([rec], conn), False, "conversation ended", rec.cwd or conn.cwd, False)
        agent_id = rec.calls[call_id]
        key = rec.key()
        if not agent_id and rec.agent in UNNAMED_SUBAGENT_CALLS and {**rec.inherited, **rec.subagents}:
            return Scope(None, rec.agent, 0, self._roots_of([rec], conn), False,
                         f"subagent window open ({len({**rec.inherited, **rec.subagents})})", rec.cwd or conn.cwd, False)
        if agent_id:
            # the subagent's incarnation: a SubagentStart (or the first note of a subagent whose start
            # is not seen yet) opens it; the same id used again later is a new, empty context
            started = {**rec.inherited, **rec.subagents}.get(agent_id)
            if started is None:  # stopped already, or its window was dropped: who holds what is unknown
                return Scope(None, rec.agent, 0, self._roots_of([rec], conn), False, "subagent not open for this call",
                             rec.cwd or conn.cwd, False)
            key = f"{key}/agent:{agent_id}@{started!r}"
        scope = Scope(key, rec.agent, rec.compactions, self._roots_of([rec], conn), True, "", rec.cwd or conn.cwd, True,
                      None if agent_id else _carry_of(rec))
        return self._guard(_verified(scope, rec, call_id, agent_id, _copilot_log(cands)), rec)

    @staticmethod
    def _host_history(scope: Scope, rec: Rec | None) -> Scope:
        """Gemini CLI compresses, masks old tool outputs and rolls back without a hook, and Qwen
        Code rewinds without one (its compression hook can be lost), Factory Droid compacts
        automatically without one; their chat recordings (Droid's session log) log each
        replacement of the history (hosthistory.py). Each one counts as a compaction; a
        recording we cannot read withholds. A host that compacts with no signal leanctx reads
        (SILENT_COMPACTION) gets no stub at all."""
        if rec is not None and rec.agent in SILENT_COMPACTION and scope.stub_ok:
            return replace(scope, stub_ok=False, reason=SILENT_COMPACTION[rec.agent])
        if rec is None or rec.agent not in HISTORY_HOSTS:
            return scope
        n = history_replacements(rec.transcript, rec.agent)
        if n is None:
            return replace(scope, stub_ok=False, reason="host chat recording unreadable: stubs withheld")
        return replace(scope, compactions=scope.compactions + n)

    def _guard(self, scope: Scope, rec: Rec | None) -> Scope:
        """Withhold stubs when what we read may be stale or incomplete."""
        scope = self._host_history(scope, rec)
        if not scope.stub_ok:
            return scope
        if rec is not None and rec.ghost:
            return replace(scope, stub_ok=False, reason="record unreadable (transient miss): identity kept, stubs withheld")
        if self._snap.degraded:
            return replace(scope, stub_ok=False, reason="conversation records could not be listed: stubs withheld")
        bad = self._snap.unknown_bad()
        if bad:
            return replace(scope, stub_ok=False, reason=f"{len(bad)} unreadable conversation record(s), host unknown")
        return scope

    def _scope_of(self, rec: Rec, key: str, conn: Connection, now: float, agent: str | None = None) -> Scope:
        # no time bound: a subagent may run for days without a hook event, and an expired window
        # would credit its reads to the parent
        open_subs = list({**rec.inherited, **rec.subagents})
        reason = f"subagent window open ({len(open_subs)})" if open_subs else ""
        return _verified(Scope(key, agent or rec.agent, rec.compactions, self._roots_of([rec], conn), not open_subs,
                               reason, rec.cwd or conn.cwd, True, _carry_of(rec) if key == rec.key() else None),
                         rec, None)

    def _explicit(self, conn: Connection, key: str, match_id: str | None, now: float, agent: str | None) -> Scope:
        rec = None
        if match_id:
            # at any age: a record with no hook event for hours still carries the conversation's
            # incarnation and compaction counter; falling back to the bare key (counter 0) would
            # make holdings from before a compaction current again
            same = self._view().by_id.get(match_id, [])
            rec = max(same, key=lambda r: r.updated_ts) if same else None
            if rec is None:
                gone = self._snap.explicit.get(match_id)
                if gone is not None:  # a record existed and is gone (pruned): never the bare key again
                    return Scope(f"{key}@gone:{gone}", agent, 0, self._fallback_roots(conn), True, "", conn.cwd, True)
            else:
                self._snap.saw_explicit(match_id, rec.created_at)
        if rec is None:
            return Scope(key, agent, 0, self._fallback_roots(conn), True, "", conn.cwd, True)
        scope = self._host_history(self._scope_of(rec, f"{key}@{rec.created_at}", conn, now, agent=agent or rec.agent), rec)
        return replace(scope, stub_ok=False, reason="record unreadable (transient miss): stubs withheld") if rec.ghost and scope.stub_ok else scope

    def _legacy(self, conn: Connection, st: _ConnState, now: float) -> Scope:
        view = self._view()
        live = self._fresh(view.recs, now)
        recs = self._fresh(self._host_match(conn, view), now) or live
        for r in recs:
            cur = (r.created_at, r.compactions, r.ended)
            prev = st.legacy_seen.get(r.path)
            if prev is None:
                # a conversation that appears while we serve (/clear, a new chat in this process)
                # may mean the context behind this connection was emptied
                if st.legacy_started:
                    st.legacy_count += 1
            elif prev != cur and (prev[0] != cur[0] or cur[1] > prev[1] or cur[2] != prev[2]):
                st.legacy_count += 1
            st.legacy_seen[r.path] = cur
        st.legacy_started = True
        mine = self._fresh(self._host_match(conn, view), now)
        latest = max(mine, key=lambda r: r.updated_ts) if mine else None
        roots = self._roots_of([latest], conn) if latest else self._fallback_roots(conn)
        # the state's epoch is in the key: a connection whose counter was evicted from the LRU
        # (and restarts at 0) never finds what it held before
        silent = SILENT_COMPACTION.get(latest.agent) if latest else None
        return Scope(f"conn:{conn.connection_id}#{st.epoch}", latest.agent if latest else None, st.legacy_count, roots,
                     silent is None, silent or "", (latest.cwd if latest else None) or conn.cwd, False)

    def _why_unknown(self, conn: Connection) -> str:
        if conn.host_pid is None and not any(conn.env.get(k) for k in _ID_ENV):
            return "unknown caller: the connection names no host process and no session"
        if self._snap.view().by_host.get((conn.host_pid, conn.host_start_ticks)):
            return "unknown caller: this host's hook records are older than 2 h"
        return "unknown caller: no hook record for this connection's host process"
