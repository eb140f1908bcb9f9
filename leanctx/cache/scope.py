"""Conversation scope: which conversation an MCP connection's read belongs to, and whether a stub
(or a range pointer, or a diff — anything that presumes the caller already holds bytes) may be
served to it right now.

Base semantics (seed 000, lean-ctx's conversation gate), then our two improvements:

1. `LEANCTX_SCOPE=<v>` in the connection's environment -> key `custom:<v>`; Cursor's
   `CURSOR_TASK_ID=<id>` (a subagent's own MCP process) -> key `task:<id>`. These win over
   everything else. If a hook record names the same id (`conversation_id` or `session_id` = v), its
   compaction counter and subagent windows still apply, and its incarnation is part of the key.
2. `LEANCTX_CONVERSATION_SCOPE=0|false|off|no` -> legacy: one MCP connection is one
   conversation (`conn:<connection_id>`), stubs always allowed. The compaction counter is then
   a per-connection counter that goes up whenever any record of the same host process (or, with
   no host match, any record) shows a new compaction. Legacy deliveries are never persisted, so
   a legacy connection gets no cold stubs after a daemon restart.
3. Otherwise the hooks' records (`<data dir>/conversations/<agent>/<id>.json`):
   - records whose `updated_ts` is more than 2 h old are ignored;
   - sampled with a 3 s cache per connection; `resolve(conn, fresh=True)` re-samples now and
     must be used right before every stub decision;
   - **per-connection identity** (improvement 2): the records whose `host` (pid + start ticks
     from /proc) is the connection's host process, i.e. the MCP server's parent. A CLI host
     (Claude Code, Codex) runs one process per session and spawns both its hooks and its MCP
     server, so concurrent CLI sessions each resolve to their own record. When no record
     matches the host, `CLAUDE_CODE_SESSION_ID` / `CODEX_THREAD_ID` from the connection's
     environment match a record's session/conversation id — but only when one side has no host
     facts (a record that names a different live host belongs to another process: after a
     `--resume` in a second process, the first one must not keep the conversation's key);
   - a matched record is **active** when it was updated within 30 s or is still inside a turn
     (its last event was a prompt/subagent/compaction event with no stop since); ended records
     (`ended_at`) never count;
   - **concurrency**: more than one active record from the same host process means it serves
     several chats at once (Cursor: one process, several chats) -> no stub for anyone on it.
     Subagents live inside their parent's record, so they never count;
   - otherwise the one active record wins, or with none active the **latest** (`updated_ts`):
     that covers `/clear` (the old session ends, the new one is written later);
   - **subagent window**: while the winning record has an open subagent (SubagentStart without
     SubagentStop, started within 2 h), the subagent shares the parent's MCP connection and we
     cannot tell who is asking -> no stub;
   - **last-known-good**: when nothing matches because the record we matched last is missing or
     unreadable (a transient miss), the previous scope is kept while that record's last update is
     within 2 h. A record that is readable but now names another host is not a miss.
   - **unknown caller** (improvement 1): nothing matches -> `key=None`, no stub, ever.

The key of a hook-record conversation is `<agent>:<conversation_id>@<created_at>`: the record's
creation time is its incarnation, so a record that was lost and re-created (its compaction counter
restarts at 0) can never revive stubs delivered to the earlier incarnation.

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
from dataclasses import dataclass, field
from typing import Callable

from leanctx.cache.paths import real_roots

REFRESH_TTL_S = 3.0
CONCURRENCY_WINDOW_S = 30.0
RECORD_MAX_AGE_S = 7200.0
RACY_S = 2.0  # a folder modified this recently may hide a same-timestamp change: rescan it
MAX_CONNECTIONS = 4096

#: environment names a connection captures (identity only; never credentials)
CONNECTION_ENV = (
    "LEANCTX_SCOPE",
    "LEANCTX_CONVERSATION_SCOPE",
    "CURSOR_TASK_ID",
    "CLAUDE_CODE_SESSION_ID",
    "CODEX_THREAD_ID",
    "CLAUDE_PROJECT_DIR",
    "CURSOR_PROJECT_DIR",
    "CURSOR_TRACE_ID",
)
_ID_ENV = ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID")
_ROOT_ENV = ("CLAUDE_PROJECT_DIR", "CURSOR_PROJECT_DIR")
_OFF = frozenset({"0", "false", "off", "no"})


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


# -- hook records -------------------------------------------------------------------------


class Rec:
    """One parsed conversation record (only what scoping needs)."""

    __slots__ = (
        "path", "agent", "conversation_id", "session_id", "created_at", "compactions", "updated_ts",
        "ended", "host_pid", "host_ticks", "cwd", "roots", "subagents", "in_turn",
    )

    def key(self) -> str:
        return f"{self.agent}:{self.conversation_id}@{self.created_at}"


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
    from leanctx.agents.base import PRE_COMPACT, PRE_TOOL, PROMPT, REPLY, SESSION_END, SESSION_START, STOP, SUBAGENT_START, SUBAGENT_STOP

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
    if kind in (PROMPT, SUBAGENT_START, SUBAGENT_STOP, PRE_COMPACT, PRE_TOOL, REPLY):
        return True
    return True


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
    r.compactions = comp
    r.updated_ts = updated
    r.ended = bool(value.get("ended_at"))
    host = value.get("host") if isinstance(value.get("host"), dict) else {}
    pid, ticks = host.get("pid"), host.get("start_ticks")
    r.host_pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else None
    r.host_ticks = ticks if isinstance(ticks, int) and not isinstance(ticks, bool) else None
    r.cwd = value.get("cwd") if isinstance(value.get("cwd"), str) and value.get("cwd") else None
    roots = value.get("workspace_roots")
    r.roots = tuple(x for x in roots if isinstance(x, str) and x) if isinstance(roots, list) else ()
    subs = value.get("active_subagents")
    r.subagents = {}
    if isinstance(subs, dict):
        for sid, info in subs.items():
            started = _num(info.get("started_ts")) if isinstance(info, dict) else None
            r.subagents[str(sid)] = started if started is not None else updated
    r.in_turn = _in_turn(r.agent, value, r.subagents)
    return r


def _read_json(path: str) -> object:
    from leanctx.hooks.publish import read_json

    return read_json(path)


class _Dir:
    __slots__ = ("mtime_ns", "files")

    def __init__(self, mtime_ns: int, files: dict) -> None:
        self.mtime_ns = mtime_ns
        self.files = files  # name -> (signature, Rec | None)


class RecordSnapshot:
    """All records under `<data dir>/conversations`, re-read only when they changed.

    A record is always written by rename, which touches its folder's mtime; a folder whose mtime
    is unchanged (and not racily recent) is not listed again, except on a full rescan every
    REFRESH_TTL_S of wall time (which also catches in-place edits). Files are re-parsed only when
    their (mtime, size, inode) changed."""

    def __init__(self, data_dir: str) -> None:
        self.base = os.path.join(data_dir, "conversations")
        self._dirs: dict[str, _Dir] = {}
        self._full_at = 0.0

    def refresh(self) -> None:
        wall = time.time()
        force = wall - self._full_at >= REFRESH_TTL_S
        try:
            entries = list(os.scandir(self.base))
        except OSError:
            self._dirs = {}
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
            if not force and cached and cached.mtime_ns == st.st_mtime_ns and wall - st.st_mtime_ns / 1e9 > RACY_S:
                continue
            old = cached.files if cached else {}
            files = {}
            try:
                listing = list(os.scandir(d.path))
            except OSError:
                continue
            for f in listing:
                if f.name.startswith(".") or not f.name.endswith(".json"):
                    continue
                try:
                    fst = f.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not statmod.S_ISREG(fst.st_mode):
                    continue
                sig = (fst.st_mtime_ns, fst.st_size, fst.st_ino)
                prev = old.get(f.name)
                if prev is not None and prev[0] == sig:
                    files[f.name] = prev
                    continue
                files[f.name] = (sig, parse_record(f.path, d.name, _read_json(f.path)))
            self._dirs[d.name] = _Dir(st.st_mtime_ns, files)
        for name in list(self._dirs):
            if name not in seen:
                del self._dirs[name]
        if force:
            self._full_at = wall

    def records(self) -> list[Rec]:
        return [rec for d in self._dirs.values() for _sig, rec in d.files.values() if rec is not None]

    def readable_paths(self) -> set[str]:
        return {rec.path for rec in self.records()}


# -- the resolver ---------------------------------------------------------------------------


class _ConnState:
    __slots__ = ("sampled_at", "scope", "lkg_path", "lkg_updated", "lkg_scope", "legacy_seen", "legacy_count", "legacy_started")

    def __init__(self) -> None:
        self.sampled_at = -1e18
        self.scope: Scope | None = None
        self.lkg_path: str | None = None
        self.lkg_updated = 0.0
        self.lkg_scope: Scope | None = None
        self.legacy_seen: dict[str, tuple[str, int]] = {}
        self.legacy_count = 0
        self.legacy_started = False


class Resolver:
    def __init__(self, data_dir: str, clock: Callable[[], float] = time.time) -> None:
        self.data_dir = str(data_dir)
        self.clock = clock
        self._snap = RecordSnapshot(self.data_dir)
        self._conns: OrderedDict[str, _ConnState] = OrderedDict()
        self._lock = threading.RLock()

    # public ---------------------------------------------------------------------------------
    def resolve(self, conn: Connection, fresh: bool = False) -> Scope:
        now = self.clock()
        with self._lock:
            st = self._conns.get(conn.connection_id)
            if st is None:
                st = self._conns[conn.connection_id] = _ConnState()
                while len(self._conns) > MAX_CONNECTIONS:
                    self._conns.popitem(last=False)
            else:
                self._conns.move_to_end(conn.connection_id)
            if not fresh and st.scope is not None and 0 <= now - st.sampled_at < REFRESH_TTL_S:
                return st.scope
            scope = self._resolve_now(conn, st, now)
            st.scope, st.sampled_at = scope, now
            return scope

    def forget(self, connection_id: str) -> None:
        with self._lock:
            self._conns.pop(connection_id, None)

    # internals ------------------------------------------------------------------------------
    def _fallback_roots(self, conn: Connection) -> tuple[str, ...]:
        cands = [conn.env.get(k) for k in _ROOT_ENV] + [conn.cwd]
        return real_roots(c for c in cands if c)

    def _live(self, now: float) -> list[Rec]:
        self._snap.refresh()
        return [r for r in self._snap.records() if now - r.updated_ts <= RECORD_MAX_AGE_S]

    def _roots_of(self, recs: list[Rec], conn: Connection) -> tuple[str, ...]:
        raw: list[str] = []
        for r in recs:
            raw.extend(r.roots)
            if r.cwd:
                raw.append(r.cwd)
        roots = real_roots(raw)
        return roots or self._fallback_roots(conn)

    def _host_match(self, conn: Connection, live: list[Rec]) -> list[Rec]:
        if conn.host_pid is None:
            return []
        return [r for r in live if r.host_pid == conn.host_pid and r.host_ticks == conn.host_start_ticks]

    def _env_match(self, conn: Connection, live: list[Rec]) -> list[Rec]:
        ids = {conn.env[k] for k in _ID_ENV if conn.env.get(k)}
        if not ids:
            return []
        out = []
        for r in live:
            if r.session_id not in ids and r.conversation_id not in ids:
                continue
            if r.host_pid is not None and conn.host_pid is not None:
                continue  # both sides know their host and they differ: another process's session
            out.append(r)
        return out

    def _resolve_now(self, conn: Connection, st: _ConnState, now: float) -> Scope:
        env = conn.env
        explicit = (env.get("LEANCTX_SCOPE") or "").strip()
        if explicit:
            return self._explicit(conn, f"custom:{explicit}", explicit, now, agent=None)
        task = (env.get("CURSOR_TASK_ID") or "").strip()
        if task:
            return self._explicit(conn, f"task:{task}", None, now, agent="cursor")
        if (env.get("LEANCTX_CONVERSATION_SCOPE") or "").strip().lower() in _OFF:
            return self._legacy(conn, st, now)
        live = self._live(now)
        cands = self._host_match(conn, live) or self._env_match(conn, live)
        if not cands:
            if (
                st.lkg_scope is not None
                and st.lkg_path not in self._snap.readable_paths()
                and now - st.lkg_updated <= RECORD_MAX_AGE_S
            ):
                return st.lkg_scope
            return Scope('anon', None, 0, self._fallback_roots(conn), True, '', conn.cwd, False)
        open_ = [r for r in cands if not r.ended]
        if not open_:
            latest = max(cands, key=lambda r: r.updated_ts)
            st.lkg_scope = None
            return Scope(None, latest.agent, 0, self._roots_of([latest], conn), False, "conversation ended", latest.cwd or conn.cwd, False)
        active = [r for r in open_ if now - r.updated_ts <= CONCURRENCY_WINDOW_S or r.in_turn]
        if len(active) > 1:
            st.lkg_scope = None
            latest = max(active, key=lambda r: r.updated_ts)
            return Scope(None, latest.agent, 0, self._roots_of(active, conn), False,
                         f"{len(active)} conversations active on this host process", latest.cwd or conn.cwd, False)
        latest = active[0] if active else max(open_, key=lambda r: r.updated_ts)
        scope = self._scope_of(latest, latest.key(), conn, now)
        st.lkg_path, st.lkg_updated, st.lkg_scope = latest.path, latest.updated_ts, scope
        return scope

    def _scope_of(self, rec: Rec, key: str, conn: Connection, now: float, agent: str | None = None) -> Scope:
        open_subs = [s for s, ts in rec.subagents.items() if now - ts <= RECORD_MAX_AGE_S]
        reason = f"subagent window open ({len(open_subs)})" if open_subs else ""
        return Scope(key, agent or rec.agent, rec.compactions, self._roots_of([rec], conn), not open_subs, reason,
                     rec.cwd or conn.cwd, True)

    def _explicit(self, conn: Connection, key: str, match_id: str | None, now: float, agent: str | None) -> Scope:
        rec = None
        if match_id:
            live = self._live(now)
            same = [r for r in live if r.conversation_id == match_id or r.session_id == match_id]
            rec = max(same, key=lambda r: r.updated_ts) if same else None
        if rec is None:
            return Scope(key, agent, 0, self._fallback_roots(conn), True, "", conn.cwd, True)
        return self._scope_of(rec, f"{key}@{rec.created_at}", conn, now, agent=agent or rec.agent)

    def _legacy(self, conn: Connection, st: _ConnState, now: float) -> Scope:
        live = self._live(now)
        recs = self._host_match(conn, live) or live
        for r in recs:
            cur = (r.created_at, r.compactions)
            prev = st.legacy_seen.get(r.path)
            if prev is None:
                if st.legacy_started and r.compactions > 0:
                    st.legacy_count += 1
            elif prev != cur and (prev[0] != cur[0] or cur[1] > prev[1]):
                st.legacy_count += 1
            st.legacy_seen[r.path] = cur
        st.legacy_started = True
        mine = self._host_match(conn, live)
        latest = max(mine, key=lambda r: r.updated_ts) if mine else None
        roots = self._roots_of([latest], conn) if latest else self._fallback_roots(conn)
        return Scope(f"conn:{conn.connection_id}", latest.agent if latest else None, st.legacy_count, roots, True, "",
                     (latest.cwd if latest else None) or conn.cwd, False)

    def _why_unknown(self, conn: Connection) -> str:
        if conn.host_pid is None and not any(conn.env.get(k) for k in _ID_ENV):
            return "unknown caller: the connection names no host process and no session"
        stale = [r for r in self._snap.records() if r.host_pid == conn.host_pid and r.host_ticks == conn.host_start_ticks]
        if stale:
            return "unknown caller: this host's hook records are older than 2 h"
        return "unknown caller: no hook record for this connection's host process"
