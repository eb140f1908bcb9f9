"""Replay a trace of host activity through read-cache policies, against the ground truth.

Used by bench/cache_replay.py and by the property test. A trace is a list of events (one JSON
object per line in a `.jsonl` file):

    {"op": "host", "host": "h1", "agent": "claude"|"codex"|"cursor"|"none", "env": {...}, "gate": bool?}
        a host process starts and spawns its MCP server (agent "none": a host without our hooks).
        "gate" (default: true for claude and codex): the host runs our read gate before every ctx_read and
        sends the call's id to the MCP server, so each synthetic read is preceded by its gate note
        and carries a fresh call id (recorded traces say false: their PreToolUse events and
        call ids are in the trace itself)
    {"op": "hook", "host": "h1", "event": "start"|"prompt"|"stop"|"compact"|"sub_start"|"sub_stop"|"end",
     "conv": "s1", "sub": "a1"?, "source": "startup"|"clear"|"resume"|"compact"?}
        one hook event of conversation s1 on h1, by meaning. "fork": true (with "start"/"resume",
        `claude --resume s1` in a second process while the first still runs): from here on s1 in
        h1 is its own context (ground truth), starting with what s1 held then, and diverging: a
        read, compaction or end in one process is not the other's. Or, for recorded traces,
    {"op": "hook", "host": "h1", "event": "<host's event name>", "payload": {...the host's stdin...}}
    {"op": "read", "host": "h1", "conv": "s1", "sub": null|"a1", "path": "src/a.py",
     "start": null|int, "end": null|int, "fresh": false, "call_id": "toolu_…"?, "gate_fails": false?}
        a ctx_read through h1's MCP connection, made by conversation s1 (or its subagent a1: on
        Claude Code / Codex through the parent's connection, on Cursor through the subagent's own
        connection with CURSOR_TASK_ID). `conv`/`sub` are the GROUND TRUTH, never shown to a policy.
        "gate_fails": on a gated host, the read gate's note is lost (hook crashed or timed out)
        while the host still sends the call id
    {"op": "read", ..., "reader": "builtin"|"shell", "command": "sed -n '1,40p' a.py"?, "start"?, "end"?,
     "last": int?, "numbered": bool?, "delivered": "..."?}
        the host's own file reader (Claude Code's Read: path, start, end) or a shell read
        (`command`, or one made from path and start/end, `last` for `tail -n`, `numbered` for
        `cat -n`), replayed as the hooks run it on a host whose module gates that tool
        (Agent.builtin_read_tools): the pre-tool gate (its note, a call id as for ctx_read; the
        host module's own builtin_read_ask names the span), whose stub, pointer or diff is what
        the model gets in place of the read; else the read runs, the model gets the file's lines,
        and the post-tool hook credits what the host module's builtin_read_delivery reads out of
        the host's post-tool payload (Claude Code's shape). Asked again right after a refusal,
        the host module's builtin_again_output may change the call (Read: one more line).
        "delivered" replaces what the reader gave (Read's content, the shell's stdout): a cut,
        trimmed or stale output, which the model holds as nothing, except the window's first lines
        when it is exactly those (a trim of trailing blank lines, a cut at a line's end). Claude Code trims the blank
        lines around a command's output before its model sees it. On a host whose module gates
        no such tool the read runs and nothing is noted or credited. The oracle judges these
        answers exactly as ctx_read's (what the context really received, under the name asked).
        On Gemini CLI, Qwen Code, Copilot CLI, OpenCode, CodeBuddy and Droid the call is made in
        the host's own shape (bench/support/hostshapes.py: its tool names and arguments, its
        payloads, what it writes to its own log first, its answer with its wrappers and cuts),
        and the host module's own normalize, builtin_read_ask and builtin_read_delivery decide
        the span, the call's id (Gemini: the call's words; Copilot: its session log; Droid: its
        transcript) and what is credited; the oracle uses the span the host really reads, and a
        stub for other lines than that counts as wrong. There:
    {"op": "read", ..., "input": {...}?, "host_state": {"twin": true}?}
        "input": the tool's arguments as the model wrote them (a relative path, Gemini without
        end_line, OpenCode's offset 0, Droid's negative offset); "host_state", for this call
        only: "twin" (Copilot, Droid: the same call twice in one response), "copilot_no_log",
        "copilot_no_pre_line", "droid_no_transcript", "droid_late_transcript" (the host's log or
        transcript lines for the call never written, or written only after its pre-tool hook).
        Hooks by meaning (`start`, `prompt`, ...) are sent in each host's own payload shape (an
        OpenCode subagent is a child session; Gemini's is an invoke_agent call; Droid has none),
        and a Qwen Code prompt an hour after the conversation's previous one clears its context
        (Qwen's idle clearing of old tool results, no hook).
    {"op": "write", "path": "src/a.py", "text": "..."}            create or replace a file
    {"op": "edit", "path": "src/a.py", "mode": "line"|"append"|"touch"|"same_mtime"|"revert", "n": int}
    {"op": "tick", "s": 31.0}                                      the clock moves
    {"op": "root", "path": "/home/me/proj"}                        the project folder of a recorded
                                                                   run: read paths under it are
                                                                   replayed relative to ours (recorded
                                                                   payloads' cwd/workspace_roots always
                                                                   map to the replay's project)
    {"op": "restart", "graceful": true}                            the daemon restarts
    {"op": "churn", "n": 4097}                                     n other MCP connections (host unknown)
                                                                   each make one resolve: connection
                                                                   state churns past its LRU size
    {"op": "rewind", "conv": "s1", "to_read": 2}                   Claude Code's transcript continues from the
                                                                   result of s1's 2nd read (0: from the session's
                                                                   first entry); no hook fires
    {"op": "microcompact", "conv": "s1", "upto_read": 3}           Claude Code clears the tool results of s1's
                                                                   reads 1..3 and writes a microcompact_boundary;
                                                                   no hook fires
    {"op": "compact_lost", "conv": "s1"}                           Claude Code compacts s1 (a compact_boundary in
                                                                   the transcript) and its hooks are lost
    {"op": "gemini_compress", "host": "h1", "conv": "s1", "transcript": "<recorded chat path>"}
                                                                   Gemini CLI replaces s1's history (automatic
                                                                   compression, masking): one line in its chat
                                                                   recording, no hook; the context keeps none
                                                                   of the earlier tool output
    {"op": "codex_compact_lost", "conv": "s1"}                     Codex compacts s1 (a `compacted` line in its
                                                                   rollout) and its hooks are lost (or not wired)
    {"op": "miss", "host": "h1", "conv": "s1"}                     the daemon cannot read the conversation's
                                                                   record (it reads torn) until h1's next
                                                                   hook event (a transient miss; the hook
                                                                   itself loses nothing)

Names, links, several roots, carry and reconnections (bench/support/oracle.py says what the
oracle then counts as wrong: an answer is right only if the context holds, under the name it
speaks of, the exact current bytes; only the latest version received under a name counts):

    {"op": "symlink", "path": "link.py", "to": "a.py"}             create `link.py` -> `a.py`, or retarget it
                                                                   (replaced atomically); paths are relative
                                                                   to the project, "../x/y" reaches a sibling
                                                                   folder (a second workspace root)
    {"op": "hardlink", "path": "h.py", "to": "a.py"}               `h.py` becomes a second name of `a.py`'s inode
                                                                   (write/edit through either name edits both)
    {"op": "mv", "from": "b.py", "path": "a.py"}                   rename over: `a.py` is now b's inode, with
                                                                   b's bytes and mtime (same path, new inode)
    {"op": "utime", "path": "b.py", "like": "a.py"}                b's mtime set equal to a's
    {"op": "roots", "conv": "s1", "roots": [".", "../other"], "cwd": "../other"}
                                                                   s1's workspace roots and working directory
                                                                   from its next hook event on (Claude/Codex:
                                                                   payload `cwd`; Cursor: `workspace_roots`);
                                                                   s1's relative read paths resolve against
                                                                   that cwd. The oracle counts every root s1
                                                                   was ever given
    {"op": "attach", "conv": "s1", "path": "a.py", "start": 5?, "lines": 10?, "text": "..."?}
                                                                   Claude Code re-attaches a file after s1's
                                                                   compaction (carry): an `attachment` entry
                                                                   after the compact_boundary, with the file's
                                                                   bytes on disk now (or `text`), whole or lines
                                                                   start..start+lines-1; no hook. The oracle
                                                                   credits exactly what was attached
    {"op": "reconnect", "host": "h1"}                              h1 reconnects its MCP server (`/mcp`): a
                                                                   new connection from the same host process
    a read's "conn": "b"                                           the read goes through a second MCP server
                                                                   that h1 spawned beside the first

A connection from a process that is not the host claiming a session is a `host` op (its own pid)
whose `env` names that session (`CLAUDE_CODE_SESSION_ID`), reading as its own conversation.

Timing (hook events published late, never, or out of order; the effect on the context happens
where the event stands in the trace, the hook's write when it is delivered):
    {"op": "hook", ..., "deliver": "late", "tag": "t1"}          ground truth now, the record written
    {"op": "deliver", "tag": "t1"}                                 here (at this time), after whatever came
                                                                   between; deliver in any order to swap
    {"op": "hook", ..., "deliver": "lost"}                         ground truth now, never written
    {"op": "note", "host": "h1", "conv": "s1", "sub": "a1"?, "tag": "n1"}
                                                                   the read gate's note for the call
    {"op": "read", ..., "note": "n1"}                              tagged n1: before its read (parallel
                                                                   calls, both noted first) or after it
                                                                   (a late note); the read writes none
    {"op": "host", ..., "call_ids": false}                         the host's gate notes each call but no
                                                                   call id reaches the MCP server (CodeBuddy)
    {"op": "hook", "event": "sub_start", ..., "resumed": true}     the same subagent goes on with its
                                                                   context; without it, a SubagentStart
                                                                   starts an empty context (an id used
                                                                   again is a fresh subagent)
    {"op": "hook", "event": "sub_stop", ..., "resumable": true}    the subagent stops but keeps its context
                                                                   (it is resumed later)

Claude Code conversations get a transcript (a tree of uuid/parentUuid entries, as the real CLI
writes) that their hook payloads point to: each read of the conversation's own context appends
the call's tool_use entry before the read and its tool_result after it; compactions append a
compact_boundary. Reads by subagents are not written there (Claude Code keeps them apart).
Codex conversations get a rollout, as the real CLI writes it (leanctx/cache/rollout.py): each
read with a call id appends its function_call line before the read and its function_call_output
after it (a subagent's to its own rollout beside its parent's), a compaction a `compacted` line.
Recorded Qwen Code sessions get a chat recording (no compression or rewind in it).
Recorded Gemini CLI sessions get the chat recording their payloads point to, with the lines the
CLI writes at a start or resume (a replacement of the history: leanctx/cache/hosthistory.py).
Codex conversations get a rollout (the hooks' `transcript_path`): a `compacted` line at each
compaction, when it happens, whenever its hooks are delivered (and at `compact_lost`).

Every policy sees the same files, the same records and the same clock. Each has its own Truth
(what each context received from THAT policy), which decides whether a stub/pointer/diff it sent
was wrong.
"""

from __future__ import annotations

import json
import os
from collections import Counter

from bench.support.oracle import (
    EVENTS,
    SAME_NAME,
    FakeHost,
    OracleCache,
    Truth,
    hook,
    payload,
    publish_event,
    read_gate,
    spoken_name,
)
from bench.support.oracle import name_of
from bench.support.hostshapes import SHAPES
from leanctx import agents as _agents
from leanctx.cache import ReadCache, Resolver, hostcaps, stubs, tokens
from leanctx.cache.paths import fingerprint, line_count
from leanctx.cache.readcache import AGAIN_WITHIN
from leanctx.cache.scope import Connection, Scope
from leanctx.hooks.publish import now_iso, record_path

T0 = 1_800_000_000.0
# hosts whose pre-tool hook (our read gate) gets the same call id the MCP server receives in
# `_meta` (verified with Claude Code 2.1.197 and Codex 0.171.0)
GATED_AGENTS = ("claude", "codex")
# a read op's "reader" on Claude Code and Codex: the host's own tools that do it (the other gated
# hosts' are in bench/support/hostshapes.py; a host module lists the ones its hooks gate in
# Agent.builtin_read_tools)
READER_TOOLS = {"claude": ("Read", "Bash"), "codex": ("Read", "Bash")}  # (Codex has no reader of its own)
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,@:%=")


class HostProc:
    def __init__(self, name: str, agent: str, fake: FakeHost, env: dict, gate: bool = False) -> None:
        self.name, self.agent, self.fake, self.env, self.gate = name, agent, fake, env, gate
        self.conn_tag = ""  # which MCP connection of this host process the current read goes through
        self.generation = 0  # MCP reconnections so far
        self.state: dict = {}  # the host's own bookkeeping (bench/support/hostshapes.py)
        self.pstate: dict = {}  # ... per policy, where what the host did depends on the policy's answers


class Policy:
    name = "policy"

    def __init__(self) -> None:
        self.truth = Truth()
        self.tokens = 0
        self.by_agent: Counter = Counter()  # tokens delivered, per host agent
        self.raw = 0
        self.reads = 0
        self.kinds: Counter = Counter()
        self.sequence: list[str] = []  # the kind of each answer, in order
        self.wrong = 0
        self.wrong_raw = 0  # tokens a caller must fetch again after a wrong stub (what it lacked)
        self.wrong_examples: list[str] = []
        # per (host agent, reader: "ctx_read" | "builtin" | "shell"): tokens delivered, reads, wrong answers
        self.by_reader: Counter = Counter()
        self.reads_by: Counter = Counter()
        self.wrong_by: Counter = Counter()

    def setup(self, eng: Engine) -> None:
        self.eng = eng

    def gate(self, host: HostProc, conv: str, sub: str | None, ask, call_id: str | None,  # noqa: ANN001 - readers.Ask
             delivered: str | None = None) -> dict:
        """A host's own reader (built-in or shell): before it runs (`delivered` None), the answer
        the model gets instead of the read, if any (kind stub/pointer/diff); after it ran, what it
        delivered, to credit. Default: no opinion, nothing credited (a policy that only knows ctx_read)."""
        return {"kind": "full"}

    def read(self, host: HostProc, conv: str, sub: str | None, path: str, start, end, fresh: bool,
             call_id: str | None = None) -> dict:
        """`conv`/`sub` are the ground truth (only the oracle may use them); `call_id` is what
        the host sends with the call, if anything."""
        raise NotImplementedError

    def restart(self, graceful: bool) -> None:
        pass

    def churn(self, n: int) -> None:
        pass


class NoCache(Policy):
    name = "no cache"

    def setup(self, eng: Engine) -> None:
        super().setup(eng)
        self.cache = ReadCache(None, dedup=False)

    def read(self, host, conv, sub, path, start, end, fresh, call_id=None):
        root = self.eng.root
        return self.cache.read(Scope(None, None, 0, (root,), False, "no cache", root), path, start, end, True)


class Ours(Policy):
    name = "ours"

    def __init__(self, dedup: bool = True) -> None:
        super().__init__()
        self.dedup = dedup
        self.why: Counter = Counter()

    def setup(self, eng: Engine) -> None:
        super().setup(eng)
        self.state = os.path.join(eng.base, "state-ours")
        self._new()

    def _new(self) -> None:
        self.resolver = Resolver(self.eng.data, clock=self.eng.clock)
        # a trace's host processes never exit (a trace has no event for it): nothing is inherited
        self.cache = ReadCache(self.state, dedup=self.dedup, clock=self.eng.clock, exited=lambda pid, ticks: False)

    def conn(self, host: HostProc, sub: str | None) -> Connection:
        root = self.eng.root
        if host.agent == "cursor" and sub:
            return Connection(f"task-{host.name}-{sub}", {"CURSOR_TASK_ID": sub}, None, None, root)
        return Connection(f"mcp-{host.name}{host.conn_tag}", dict(host.env), host.fake.pid, host.fake.ticks, root)

    def read(self, host, conv, sub, path, start, end, fresh, call_id=None):
        scope = self.resolver.resolve(self.conn(host, sub), fresh=True, call_id=call_id)
        self.last_scope = scope
        self.last_holding = self._holding(scope, path)
        return self.cache.read(scope, path, start, end, fresh)

    def gate(self, host, conv, sub, ask, call_id, delivered=None):
        # the hook's own process, as the daemon identifies it from the kernel: a new connection
        # each time, with the host's environment and the host process as its parent
        conn = Connection(f"hook-{host.name}-{self.eng.events}-{'credit' if delivered is not None else 'gate'}",
                          dict(host.env), host.fake.pid, host.fake.ticks, self.eng.root)
        scope = self.resolver.resolve(conn, fresh=True, call_id=call_id)
        if delivered is not None and call_id is None:
            # a delivery no call could be named for (hooks/readgate.py after_read, service.gate)
            import dataclasses

            scope = dataclasses.replace(scope, key=None, stub_ok=False, reason="a delivery no call could be named for")
        span = {"last_lines": ask.last} if ask.last is not None else {"start_line": ask.start, "end_line": ask.end}
        if delivered is None:
            self.last_scope = scope
            self.last_holding = self._holding(scope, ask.path)
        return self.cache.read(scope, ask.path, mode="gate" if delivered is None else "credit", delivered=delivered,
                               reader=ask.reader, **span)

    def _holding(self, scope: Scope, path: str):
        conv = self.cache._convs.get(scope.key) if scope.key else None
        if conv is None:
            return None
        return conv.held.get(self.eng.last_name) or conv.held.get(os.path.realpath(os.path.join(self.eng.root, path)))

    def explain(self, res: dict, oracle_res: dict) -> str:
        """Why we sent content where the oracle did not (for the report)."""
        s = self.last_scope
        if not s.stub_ok:
            reason = s.reason
            for word in ("subagent window open", "conversations active on this host process",
                         "conversations open on this host process"):
                if word in reason:
                    return "withheld: " + word
            return "withheld: " + reason.split(":")[0]
        h = self.last_holding
        ok = oracle_res["kind"]
        if h is None:
            return "not credited: delivered while stubs were withheld, or to another key"
        if h.compactions != s.compactions:
            return "compaction epoch moved"
        if ok == "diff":
            return "diff: old text not in memory (restart) or holding partial"
        if h.fp == res.get("fingerprint") and h.mtime_ns is not None:
            if h.lines and res.get("window") and not h.whole:
                return "range not recorded (cap / under-report)"
            return "mtime changed, bytes identical"
        return "held an older version"

    def restart(self, graceful: bool) -> None:
        if graceful:
            self.cache.save()
        self._new()

    def churn(self, n: int) -> None:
        for i in range(n):
            self.resolver.resolve(Connection(f"churn-{self.eng.events}-{i}", {}, None, None, self.eng.root))


class Oracle(Policy):
    name = "oracle"

    def setup(self, eng: Engine) -> None:
        super().setup(eng)
        self.cache = OracleCache(self.truth)
        self.asks: Counter = Counter()  # ctx -> reads it asked for (ctx_read and gated), as ReadCache counts them

    def read(self, host, conv, sub, path, start, end, fresh, call_id=None):
        ctx = self.eng.ctx(conv, sub, host.name)
        self.asks[ctx] += 1
        roots, cwd = self.eng.place(conv)
        _real, res = self.cache.read(ctx, roots, cwd, path, start, end, fresh)
        return res

    def gate(self, host, conv, sub, ask, call_id, delivered=None):
        """The best answer the truth allows, with the gate's one rule of its own: the same lines
        asked for again soon after their refusal (readcache.AGAIN_WITHIN), unchanged, are the
        content (no loop)."""
        if delivered is not None:
            return {}  # what was delivered is folded into the truth by the engine
        w = self.eng._reader_window(ask)
        if w is None:
            return {"kind": "full"}
        ctx = self.eng.ctx(conv, sub, host.name)
        self.asks[ctx] += 1
        roots, cwd = self.eng.place(conv)
        end = None if ask.last is not None else ask.end if ask.end is None else min(ask.end, w[1])
        hint = stubs.RUN_AGAIN if ask.reader == "shell" else stubs.AGAIN  # as ReadCache words a gate's answer
        real, res = self.cache.read(ctx, roots, cwd, ask.path, w[2], end, hint=hint)
        if res["kind"] not in ("stub", "pointer", "diff"):
            return res
        if not hostcaps.passes_whole(host.agent, res["text"], ask.reader):
            return dict(res, kind="full")  # a refusal the host would cut reaches its model as no refusal: the reader runs
        window = (w[2], w[3])
        before = self.truth.refused.get((ctx, real))
        if before is not None and before[0] == res.get("fingerprint") and before[1][0] <= window[0] \
                and window[1] <= before[1][1] and self.asks[ctx] - before[2] <= AGAIN_WITHIN:
            del self.truth.refused[(ctx, real)]
            return dict(res, kind="full", again=True)
        self.truth.refused[(ctx, real)] = (res.get("fingerprint"), window, self.asks[ctx])
        return res


class Engine:
    def __init__(self, base: str, policies: list[Policy]) -> None:
        self.base = base
        self.root = os.path.realpath(os.path.join(base, "proj"))
        self.data = os.path.join(base, "data")
        os.makedirs(self.root, exist_ok=True)
        self.t = T0
        self._mtime = int(T0 * 1e9)
        self._pid = 50000
        self.hosts: dict[str, HostProc] = {}
        self.history: dict[str, list[str]] = {}
        self.policies = policies
        self.events = 0
        self.divergences: Counter = Counter()
        self.hidden: dict[str, tuple[str, bytes]] = {}
        self.recorded_root: str | None = None
        self.calls = 0
        self.forks: dict[tuple, str] = {}  # (host, conv) -> the truth context of a session forked into host
        # Claude Code transcripts: conv -> [path, tip uuid, entries written]; per conv the numbers of
        # the reads on the current chain, each read's result uuid, and per policy what each read gave
        self.transcripts: dict[str, list] = {}
        self.chain: dict[str, list[int]] = {}
        self.read_no: dict[str, int] = {}
        self.result_uuid: dict[tuple[str, int], str] = {}
        self.deliveries: dict[tuple[str, int], dict[str, tuple]] = {}
        self._init_ident()
        for p in policies:
            p.setup(self)

    def clock(self) -> float:
        return self.t

    def ctx(self, conv: str, sub: str | None, host: str | None = None) -> str:
        """The ground-truth context: a conversation (in the process it was forked into), or its subagent's."""
        base = self.forks.get((host, conv), conv)
        return f"{base}/{sub}" if sub else base

    # files ------------------------------------------------------------------------------------
    def _path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def _write(self, rel: str, text: str, mtime_ns: int | None = None) -> None:
        p = self._path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        if mtime_ns is None:
            self._mtime += 1_000_003
            mtime_ns = self._mtime
        os.utime(p, ns=(mtime_ns, mtime_ns))
        hist = self.history.setdefault(rel, [])
        if not hist or hist[-1] != text:
            hist.append(text)

    def _edit(self, rel: str, mode: str, n: int) -> None:
        p = self._path(rel)
        with open(p, encoding="utf-8", newline="") as f:
            text = f.read()
        lines = text.split("\n")
        if mode == "touch":
            self._mtime += 1_000_003
            os.utime(p, ns=(self._mtime, self._mtime))
        elif mode == "same_mtime":
            m = os.stat(p).st_mtime_ns
            i = n % max(1, len(text))
            ch = text[i] if text else "a"
            rep = "b" if ch != "b" and ch.isascii() and ch != "\n" else "c" if ch != "\n" else "\n"
            self._write(rel, text[:i] + rep + text[i + 1 :] if text else "a", mtime_ns=m)
        elif mode == "append":
            self._write(rel, text + f"def added_{n}():\n    return {n}\n")
        elif mode == "revert":
            hist = self.history.get(rel, [])
            if len(hist) >= 2:
                self._write(rel, hist[-2])
        else:  # "line": change one line
            i = n % max(1, len(lines) - 1)
            lines[i] = f"    value_{n} = compute({n})  # edited"
            self._write(rel, "\n".join(lines))

    # events -------------------------------------------------------------------------------------
    def run(self, events) -> None:
        for ev in events:
            self.apply(ev)

    def apply(self, ev: dict) -> None:
        self.events += 1
        if self._timing(ev):  # late, lost and reordered hook deliveries (below)
            return
        op = ev["op"]
        if op == "host":
            self._pid += 1
            fake = FakeHost(self._pid, 1000 + self._pid, ev.get("agent", "claude"))
            agent = ev.get("agent", "claude")
            self.hosts[ev["host"]] = HostProc(ev["host"], agent, fake, dict(ev.get("env") or {}),
                                              bool(ev.get("gate", agent in GATED_AGENTS)))
        elif op == "hook":
            host = self.hosts[ev["host"]]
            self._unhide(ev["host"])
            if "payload" in ev:
                payload = dict(ev["payload"])
                if payload.get("cwd"):
                    payload["cwd"] = self.root  # the recorded project folder is replayed here
                if payload.get("workspace_roots") or payload.get("workspaceRoots"):
                    payload["workspace_roots"] = [self.root]
                    payload.pop("workspaceRoots", None)
                if host.agent == "claude" and payload.get("session_id"):
                    payload["transcript_path"] = self._transcript(payload["session_id"])[0]
                if host.agent == "gemini" and payload.get("transcript_path"):
                    payload["transcript_path"] = self._gemini_chat(payload["transcript_path"], ev["event"], payload.get("source"))
                if host.agent == "codex":  # codex rollout (see _codex_rollout)
                    self._codex_recorded(ev["event"], payload)
                if host.agent == "qwen" and payload.get("transcript_path"):  # qwen chat recording (see _qwen_chat)
                    payload["transcript_path"] = self._qwen_chat(payload["transcript_path"])
                if host.agent == "copilot" and not payload.get("agentId") and payload.get("sessionId"):
                    payload["transcriptPath"] = self._copilot_log(host, payload["sessionId"])  # see _copilot_log
                with self._host_env():
                    publish_event(self.data, host.agent, ev["event"], payload, host.fake.as_host(), self.t)
                ev = dict(ev, payload=payload)
                self._truth_after_raw(host, ev)
                return
            meaning, conv = ev["event"], ev["conv"]
            extra = {k: ev[k] for k in ("sub", "source", "reason", "prompt") if ev.get(k) is not None}
            if meaning == "start" and "source" not in extra:
                extra["source"] = "startup"
            if meaning == "start" and host.agent == "claude":
                # Claude Code puts the session id into its MCP server's environment at start-up
                # (it goes stale after /clear, which is what host matching is for)
                host.env.setdefault("CLAUDE_CODE_SESSION_ID", conv)
            if ev.get("fork"):
                self._fork(ev["host"], conv)
            if host.agent == "claude":
                extra["transcript_path"] = self._transcript(conv)[0]
                if meaning == "compact":
                    self._boundary(conv)
            if host.agent == "copilot" and not ev.get("sub"):
                extra["transcript_path"] = self._copilot_log(host, conv)  # see _copilot_log
            if host.agent == "codex":  # codex rollout (see _codex_rollout)
                extra["transcript_path"] = self._codex_rollout(conv)
                if meaning == "compact":
                    self._codex_compacted(conv)
            if host.agent in EVENTS:
                cwd = self._hook_place(host, conv, extra)
                hook(self.data, host.fake, meaning, conv, cwd, self.t, **extra)
            elif host.agent in SHAPES:  # the other gated hosts' own payloads (bench/support/hostshapes.py)
                cwd = self._hook_place(host, conv, extra)
                got = self.shape(host.agent).hook_payload(meaning, conv, ev.get("sub"), cwd, extra)
                if got is not None:
                    with self._host_env():
                        publish_event(self.data, host.agent, got[0], got[1], host.fake.as_host(), self.t)
            if meaning == "prompt" and not ev.get("sub"):
                self._idle_clear(host, conv)
            self._truth_after(meaning, self.ctx(conv, None, ev["host"]), ev.get("sub"))
        elif op == "root":
            self.recorded_root = ev["path"].rstrip("/")
        elif op == "read":
            self._read(ev)
        elif op == "write":
            self._write(ev["path"], ev["text"])
        elif op == "edit":
            self._edit(ev["path"], ev.get("mode", "line"), int(ev.get("n", 0)))
        elif op == "tick":
            self.t += float(ev["s"])
        elif op == "churn":
            for p in self.policies:
                p.churn(int(ev["n"]))
        elif op == "restart":
            for p in self.policies:
                p.restart(bool(ev.get("graceful", True)))
        elif op == "rewind":
            conv, k = ev["conv"], int(ev["to_read"])
            t = self._transcript(conv)
            t[1] = self.result_uuid.get((conv, k), t[3]) if k else t[3]
            self.chain[conv] = [n for n in self.chain.get(conv, []) if n <= k]
            self._retruth(conv)
        elif op == "microcompact":
            conv, k = ev["conv"], int(ev["upto_read"])
            self._entry(conv, {"type": "system", "subtype": "microcompact_boundary", "content": "Microcompacted"})
            self.chain[conv] = [n for n in self.chain.get(conv, []) if n > k]
            self._retruth(conv)
        elif op == "gemini_compress":
            self._gemini_chat(ev["transcript"], "compress", None)
            ctx = self.ctx(ev["conv"], None, ev["host"])
            for p in self.policies:
                p.truth.clear(ctx)
        elif op == "compact_lost":
            self._boundary(ev["conv"])
            for p in self.policies:
                p.truth.clear(ev["conv"])
        elif op == "codex_compact_lost":  # codex rollout (see _codex_rollout)
            self._codex_line(ev["conv"], "compacted", {"message": "summary", "replacement_history": []})
            for p in self.policies:
                p.truth.clear(ev["conv"])
        elif op == "miss":
            host = self.hosts[ev["host"]]
            path = record_path(self.data, host.agent, ev["conv"])
            if path in self.hidden:
                return
            try:
                with open(path, "rb") as f:
                    good = f.read()
            except OSError:
                return
            self.hidden[path] = (ev["host"], good)
            self._replace(path, good[: len(good) // 3])  # unreadable (torn) for the daemon
        elif not self._apply_ident(ev):
            raise ValueError(f"unknown trace op {op!r}")

    @staticmethod
    def _replace(path: str, data: bytes) -> None:
        tmp = path + ".replay-tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def _unhide(self, host: str) -> None:
        """A transient miss ends when the host writes the record again: the hook itself read it
        well (the miss is the daemon's), so no state is lost."""
        for path, (h, good) in list(self.hidden.items()):
            if h == host:
                self._replace(path, good)
                del self.hidden[path]

    def _fork(self, host: str, conv: str) -> None:
        """conv, resumed in `host` while another process still runs it: its own context from now on."""
        new = f"{conv}@{host}"
        old = self.ctx(conv, None, host)
        self.forks[(host, conv)] = new
        for p in self.policies:
            p.truth.copy(old, new)
    # Claude Code transcripts ------------------------------------------------------------------
    def _transcript(self, conv: str) -> list:
        t = self.transcripts.get(conv)
        if t is None:
            if "/" in conv:  # a subagent's own transcript, beside its session's as Claude Code keeps it
                main, sub = conv.split("/", 1)
                path = os.path.join(self._transcript(main)[0][:-6], "subagents", f"agent-{sub}.jsonl")
            else:
                path = os.path.join(self.base, "transcripts", f"{len(self.transcripts):04d}.jsonl")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            t = self.transcripts[conv] = [path, None, 0, None]
            t[3] = self._entry(conv, {"type": "user", "message": {"role": "user", "content": "start"}})
        return t

    # --- codex rollout, qwen chat recording: begin -----------------------------------------------
    def _codex_rollout(self, conv: str) -> str:
        """Codex's rollout of a conversation (`conv`) or of its subagent (`conv/sub`): one folder
        per conversation, the subagent's file beside its parent's and named by the subagent's id,
        as Codex 0.171.0 keeps them. Both processes of a resumed session append to the same one."""
        rollouts = self.__dict__.setdefault("codex_rollouts", {})
        main, _, sub = conv.partition("/")
        if main not in rollouts:
            folder = os.path.join(self.base, "codex-sessions", f"{len(rollouts):04d}")
            os.makedirs(folder, exist_ok=True)
            rollouts[main] = os.path.join(folder, f"rollout-2026-12-01T00-00-00-{main}.jsonl")
            self._codex_line(main, "session_meta", {"id": main})
        path = rollouts[main]
        return os.path.join(os.path.dirname(path), f"rollout-2026-12-01T00-00-01-{sub}.jsonl") if sub else path

    def _codex_line(self, conv: str, kind: str, payload: dict) -> None:
        path = self._codex_rollout(conv) if kind != "session_meta" else self.__dict__["codex_rollouts"][conv]
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"timestamp": "t", "type": kind, "payload": payload}, separators=(",", ":")) + "\n")

    def _codex_recorded(self, event: str, payload: dict) -> None:
        """A recorded Codex payload: its transcript_path (its own rollout, a subagent's for
        subagent events) pointed at the replay's; a compaction hook writes the compacted line."""
        sid = payload.get("session_id")
        if not isinstance(sid, str) or not sid:
            return
        sub = payload.get("agent_id") if isinstance(payload.get("agent_id"), str) else None
        payload["transcript_path"] = self._codex_rollout(f"{sid}/{sub}" if sub else sid)
        if event == "PreCompact":
            self._codex_compacted(sid)

    def _qwen_chat(self, recorded: str) -> str:
        """Qwen Code's chat recording for a recorded session, replayed here: records shaped like
        Claude Code's; a compression or a rewind is a `system` record (hosthistory.py), which
        the recorded sessions never wrote, so one user record is all it holds."""
        path = os.path.join(self.base, "qwen-chats", os.path.basename(recorded))
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write('{"uuid":"u1","parentUuid":null,"type":"user","message":{"role":"user"}}\n')
        return path
    # --- codex rollout, qwen chat recording: end -------------------------------------------------

    def _copilot_log(self, host: HostProc, conv: str) -> str:
        """Copilot CLI's session log (`events.jsonl`) of a conversation, which leanctx's hooks name
        (copilotevents.py reads it): each replayed call is logged started and completed with its
        result unchanged (the recorded sessions had no other postToolUse hook). A subagent's calls
        go to the log of its host process's conversation, as Copilot logs them."""
        logs = self.__dict__.setdefault("copilot_logs", {})
        if conv not in logs:
            folder = os.path.join(self.base, "copilot-sessions", f"{len(logs):04d}")
            os.makedirs(folder, exist_ok=True)
            logs[conv] = os.path.join(folder, "events.jsonl")
            open(logs[conv], "a").close()
        self.__dict__.setdefault("copilot_host_logs", {})[host.name] = logs[conv]
        return logs[conv]

    def _copilot_call(self, host: HostProc, conv: str, call_id: str) -> None:
        path = self.__dict__.get("copilot_host_logs", {}).get(host.name) or self._copilot_log(host, conv)
        with open(path, "a", encoding="utf-8") as f:
            for kind in ("tool.execution_start", "tool.execution_complete"):
                f.write(json.dumps({"type": kind, "data": {"toolCallId": call_id, "success": True}}) + "\n")

    def _gemini_chat(self, recorded: str, event: str, source: object) -> str:
        """Gemini CLI's chat recording for a recorded session, replayed here: the CLI writes the
        whole history as one `$set messages` line when a chat starts (twice on a resume) and again
        on every compression; the recorded sessions never compressed, so starts are all it holds."""
        path = os.path.join(self.base, "gemini-chats", os.path.basename(recorded))
        if event in ("SessionStart", "compress") or not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write('{"$set":{"messages":[]}}\n' * (2 if source == "resume" else 1))
        return path

    def _entry(self, conv: str, body: dict, parent: object = "tip") -> str:
        t = self._transcript(conv)
        t[2] += 1
        uid = f"{conv}-e{t[2]:06d}"
        entry = {"parentUuid": t[1] if parent == "tip" else parent, "uuid": uid, "sessionId": conv, **body}
        with open(t[0], "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        t[1] = uid
        return uid

    def _boundary(self, conv: str) -> None:
        prev = self._transcript(conv)[1]
        uid = self._entry(conv, {"type": "system", "subtype": "compact_boundary", "logicalParentUuid": prev,
                                 "timestamp": now_iso(self.t)}, parent=None)
        self.transcripts[conv][3] = uid  # a rewind to read 0 goes back to here
        self.chain[conv] = []

    def _retruth(self, conv: str) -> None:
        """The context lost part of what it received: it holds what the reads still on its chain
        gave (an answer that presumed bytes no longer held gives nothing)."""
        for p in self.policies:
            p.truth.clear(conv)
            for n in self.chain.get(conv, []):
                got = self.deliveries.get((conv, n), {}).get(p.name)
                if got and not p.truth.violation(conv, got[0], got[1], spoken=got[2]):
                    p.truth.apply(conv, got[0], got[1], got[3])

    def _truth_after(self, meaning: str, conv: str, sub: str | None) -> None:
        if meaning in ("compact", "end"):
            self.chain[conv] = []
        elif meaning == "sub_stop" and sub:
            self.chain[self.ctx(conv, sub)] = []
        for p in self.policies:
            if meaning == "compact" or meaning == "end":
                p.truth.clear(conv)
            elif meaning == "sub_stop" and sub:
                p.truth.clear(self.ctx(conv, sub))

    def _truth_after_raw(self, host: HostProc, ev: dict) -> None:
        from leanctx import agents
        from leanctx.agents.base import PRE_COMPACT, PROMPT, SESSION_END, SUBAGENT_STOP

        with self._host_env():
            norm = agents.get(host.agent).normalize(ev["event"], ev["payload"])
        if norm.kind == PROMPT and norm.conversation_id and not norm.subagent_id:
            self._idle_clear(host, norm.conversation_id)
        meaning = {PRE_COMPACT: "compact", SESSION_END: "end", SUBAGENT_STOP: "sub_stop"}.get(norm.kind)
        if meaning and norm.conversation_id:
            self._truth_after(meaning, self.ctx(norm.conversation_id, None, host.name), norm.subagent_id)

    def _read(self, ev: dict) -> None:
        host = self.hosts[ev["host"]]
        call = self._reader_call(host, ev) if ev.get("reader") else None
        shaped = call is not None and "shape" in call
        if shaped:
            # the host module named the call (or not): its note, published as the pre-tool hook does
            ev = dict(ev, call_id=call["call_id"] if call["gated"] else None)
            if call["gated"] and not ev.get("gate_fails"):
                self._unhide(ev["host"])
                with self._host_env():
                    publish_event(self.data, host.agent, call["pre"][0], call["pre"][1], host.fake.as_host(), self.t)
        elif call is None or call["gated"]:
            ev = self._timed_read(ev, call)  # a gate note published apart from its read (below)
        else:
            ev = dict(ev, call_id=None)  # a reader the host's hooks do not gate: no note, no call id
        conv, sub = ev["conv"], ev.get("sub")
        ctx = self.ctx(conv, sub, ev["host"])
        if shaped:
            path = call["real"].path if call["real"] is not None else call["full"]
        else:
            path = call["ask"].path if call is not None and call["ask"] is not None else ev["path"]
        if self.recorded_root and (path == self.recorded_root or path.startswith(self.recorded_root + "/")):
            path = os.path.relpath(path, self.recorded_root)
        real = self.last_name = self.name_of(conv, path)
        spoken_roots = self.seen_roots.get(conv) or [self.root]
        host.conn_tag = self._conn_tag(host, ev)
        self._settle_carried(ctx, real)
        call_id = ev.get("call_id")
        gated = call["gated"] if call is not None else host.gate
        if call_id is None and gated and (call is None or host.gate):
            self.calls += 1
            call_id = f"toolu_replay{self.calls:06d}"
            if not ev.get("gate_fails"):
                self._unhide(ev["host"])  # the gate is a hook event: it reads the record well
                if host.agent == "codex" and call is not None:
                    self._codex_note(host, conv, sub, call_id, call["tool"], call["input"])
                else:
                    read_gate(self.data, host.fake, conv, sub, call_id, self.place(conv)[1], self.t,
                              *((call["tool"], call["input"]) if call is not None else ()))
        tool = call["tool"] if call is not None else "mcp__leanctx__ctx_read"
        tool_input = call["input"] if call is not None else {"path": path}
        traced = host.agent == "claude" and call_id is not None
        if traced:
            self._entry(ctx, {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": call_id, "name": tool, "input": tool_input}]}})
        codex = host.agent == "codex" and call_id is not None  # codex rollout (see _codex_rollout)
        if codex:
            item = {"type": "function_call", "name": "ctx_read", "namespace": "mcp__leanctx", "call_id": call_id}
            if call is not None:
                item = {"type": "function_call", "name": tool, "call_id": call_id}
            self._codex_line(f"{conv}/{sub}" if sub else conv, "response_item", item)
        reader = call["ask"].reader if call is not None and call["ask"] is not None else "ctx_read"
        if shaped:
            reader = ev["reader"]
        results = {}
        for p in self.policies:
            if call is None:
                res = p.read(host, conv, sub, path, ev.get("start"), ev.get("end"), bool(ev.get("fresh")), call_id)
            elif shaped:
                res = self._shaped_answer(p, host, conv, sub, call, dict(ev, call_id=call_id))
            else:
                res = self._reader_answer(p, host, conv, sub, ctx, call, dict(ev, call_id=call_id))
            results[p.name] = res
            p.reads += 1
            p.kinds[res["kind"]] += 1
            p.sequence.append(res["kind"])
            p.tokens += res.get("tokens_sent", 0)
            p.by_agent[host.agent] += res.get("tokens_sent", 0)
            p.by_reader[(host.agent, reader)] += res.get("tokens_sent", 0)
            p.reads_by[(host.agent, reader)] += 1
            p.raw += res.get("tokens_raw", 0)
            why = p.truth.violation(ctx, real, res, spoken=spoken_name(res.get("path"), spoken_roots)) or res.get("wrong_span")
            if why:
                p.wrong += 1
                p.wrong_by[(host.agent, reader)] += 1
                p.wrong_raw += res.get("tokens_raw", 0)
                if len(p.wrong_examples) < 5:
                    p.wrong_examples.append(f"event {self.events}: {why}" + (f" ({reader} read)" if call else ""))
            p.truth.apply(ctx, real, res, host.agent, res.get("reader", "ctx_read"))
            if "other_bytes" in res:
                p.truth.received_other(ctx, real, res["other_bytes"])
            if res["kind"] == "full":
                p.truth.refused.pop((ctx, real), None)  # the content came: the next refusal is news
        if shaped:
            call["shape"].after_call(host, conv, sub, call["tool"], call["input"], call["model_call"], True)
            for k in ev.get("host_state") or {}:
                host.state.pop(k, None)  # for this call only
        if host.agent == "copilot" and call_id is not None:
            self._copilot_call(host, conv, call_id)
        if codex:
            self._codex_line(f"{conv}/{sub}" if sub else conv, "response_item",
                             {"type": "function_call_output", "call_id": call_id, "output": [{"type": "input_text", "text": "…"}]})
        if traced:
            n = self.read_no[ctx] = self.read_no.get(ctx, 0) + 1
            self.result_uuid[(ctx, n)] = self._entry(ctx, {"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": "…"}]}})
            self.chain.setdefault(ctx, []).append(n)
            self.deliveries[(ctx, n)] = {p.name: (real, results[p.name], spoken_name(results[p.name].get("path"), spoken_roots),
                                                  host.agent) for p in self.policies}
        ours = next((p for p in self.policies if isinstance(p, Ours)), None)
        orc = results.get("oracle")
        if ours is not None and orc is not None:
            mine = results[ours.name]
            if orc["kind"] in ("stub", "pointer", "diff") and mine["tokens_sent"] > orc["tokens_sent"]:
                ours.why[ours.explain(mine, orc)] += mine["tokens_sent"] - orc["tokens_sent"]

    # -- the hosts' own readers: a built-in Read or a shell read, gated and credited --------------
    def _reader_call(self, host: HostProc, ev: dict) -> dict:
        """A read op with "reader": the host's tool call (name, input, the payload its pre-tool
        hook gets), what it reads (the host module's own `builtin_read_ask`, None: not a read it
        can name), and whether the host's hooks gate it (its module lists the tool)."""
        from leanctx import readers

        agents = _agents
        reader = ev["reader"]
        if reader not in ("builtin", "shell"):
            raise ValueError(f"read: unknown reader {reader!r}")
        if host.agent in SHAPES:
            return self._shaped_call(host, ev)
        conv, sub = ev["conv"], ev.get("sub")
        cwd = self.place(conv)[1]
        path = ev.get("path")
        if path is not None and self.recorded_root and (path == self.recorded_root or path.startswith(self.recorded_root + "/")):
            path = os.path.relpath(path, self.recorded_root)
        if reader == "builtin":
            tool, full = READER_TOOLS.get(host.agent, READER_TOOLS["claude"])[0], os.path.normpath(os.path.join(cwd, path))
            tool_input: dict = {"file_path": full}
            if ev.get("start") is not None:
                tool_input["offset"] = int(ev["start"])
            if ev.get("end") is not None:
                tool_input["limit"] = int(ev["end"]) - int(ev.get("start") or 1) + 1
        else:
            tool = READER_TOOLS.get(host.agent, READER_TOOLS["claude"])[1]
            command = ev.get("command")
            if command is not None and self.recorded_root:
                command = command.replace(self.recorded_root + "/", self.root + "/")
            if command is None:
                q = "'" + path + "'" if any(c in path for c in " '\"") is False else path
                if ev.get("last") is not None:
                    command = f"tail -n {int(ev['last'])} {q}"
                elif ev.get("start") is not None or ev.get("end") is not None:
                    end = ev.get("end")
                    command = f"sed -n '{int(ev.get('start') or 1)},{int(end) if end is not None else '$'}p' {q}"
                else:
                    command = f"cat -n {q}" if ev.get("numbered") else f"cat {q}"
            # Codex 0.171.0's hooks get {"command": ...} alone; Claude Code's Bash a description too
            tool_input = {"command": command} if host.agent == "codex" else {"command": command, "description": "read"}
        try:
            agent = agents.get(host.agent)
        except agents.UnknownAgent:
            agent = None  # "none": a host without our hooks
        gated = agent is not None and tool in agent.builtin_read_tools
        if gated:
            pre = agent.normalize("PreToolUse", payload(host.agent, "PreToolUse", conv, cwd, tool_name=tool,
                                                         tool_input=tool_input, tool_use_id="toolu_ask"))
            ask = agent.builtin_read_ask(pre)
        elif reader == "builtin":
            ask = readers.Ask(tool_input["file_path"], int(ev.get("start") or 1),
                              int(ev["end"]) if ev.get("end") is not None else None)
        else:
            ask = readers.shell_ask(tool_input["command"], cwd)
        return {"tool": tool, "input": tool_input, "ask": ask, "gated": gated and ask is not None, "agent": agent,
                "cwd": cwd}

    def _reader_answer(self, p: Policy, host: HostProc, conv: str, sub: str | None, ctx: str, call: dict, ev: dict) -> dict:
        """What policy `p`'s context receives from one built-in/shell read: the gate's stub,
        pointer or diff; else what the reader delivers (then credited, as the post-tool hook does,
        with exactly what the host module reads out of the host's post-tool payload)."""
        ask, tool_input = call["ask"], call["input"]
        if ask is None:  # not a read the host module can name: it runs, and the cache learns nothing
            return {"kind": "full", "text": "", "fingerprint": None, "tokens_raw": 0, "tokens_sent": 0,
                    "reader": "shell" if call["tool"] != READER_TOOLS["claude"][0] else "builtin"}
        if call["gated"] and ev.get("call_id") is not None:
            ans = p.gate(host, conv, sub, ask, ev["call_id"])
            if ans.get("kind") in ("stub", "pointer", "diff"):
                ans = dict(ans, reader=ask.reader, tokens_raw=self._reader_raw(ask))
                return ans
            if ans.get("again") and call["agent"] is not None:
                # asked again right after a refusal: the host module may change the call so the
                # host sends the content (Claude Code's Read: one more line in `limit`)
                pre = call["agent"].normalize("PreToolUse", payload(host.agent, "PreToolUse", conv, call["cwd"],
                                              tool_name=call["tool"], tool_input=tool_input, tool_use_id=ev["call_id"]))
                out = call["agent"].builtin_again_output(pre, ask)
                try:
                    changed = json.loads(out).get("hookSpecificOutput", {}).get("updatedInput") if out.strip() else None
                except ValueError:
                    changed = None
                if isinstance(changed, dict):
                    tool_input = changed
                    pre = call["agent"].normalize("PreToolUse", payload(host.agent, "PreToolUse", conv, call["cwd"],
                                                  tool_name=call["tool"], tool_input=tool_input, tool_use_id=ev["call_id"]))
                    ask = call["agent"].builtin_read_ask(pre) or ask
        got, response = self._reader_run(ask, ev, host.agent)
        if call["gated"] and ev.get("call_id") is not None and response is not None:
            post = dict(payload(host.agent, "PostToolUse", conv, call["cwd"], tool_name=call["tool"], tool_input=tool_input,
                                tool_use_id=ev["call_id"]), tool_response=response)
            if sub:
                post.update(agent_id=sub, agent_type="general-purpose")
            delivery = call["agent"].builtin_read_delivery(call["agent"].normalize("PostToolUse", post), post)
            if delivery is not None:
                p.gate(host, conv, sub, delivery[0], ev["call_id"], delivered=delivery[1])
        return got

    def _reader_window(self, ask) -> tuple[str, int, int, int] | None:  # noqa: ANN001 - readers.Ask
        """(the file's text, its line count, first and last line the reader gives), or None
        (no such file, not text, a window past its end)."""
        try:
            with open(ask.path, encoding="utf-8", newline="") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        n = line_count(text)
        if ask.last is not None:
            s, e = max(1, n - ask.last + 1), n
        else:
            s, e = ask.start, min(ask.end if ask.end is not None else n, n)
        if n == 0 or s > n or e < s:
            return None
        return text, n, s, e

    def _reader_raw(self, ask) -> int:  # noqa: ANN001
        w = self._reader_window(ask)
        return tokens.count("\n".join(w[0].split("\n")[w[2] - 1:w[3]])) if w else 0

    def _reader_run(self, ask, ev: dict, agent: str = "claude") -> tuple[dict, object]:  # noqa: ANN001 - readers.Ask
        """The reader runs: (what the model receives, as a "full" result whose fingerprint is
        the file's only when it received exactly the window's lines; the host's post-tool
        `tool_response`, Claude Code's shape). `ev["delivered"]` replaces what the reader gave
        (Read's content, the shell's stdout): a cut, trimmed or stale output."""
        from leanctx import readers

        w = self._reader_window(ask)
        if w is None:
            return {"kind": "error", "text": "", "tokens_raw": 0, "tokens_sent": 0, "reader": ask.reader}, None
        text, n, s, e = w
        lines = text.split("\n")
        exact = "\n".join(lines[s - 1:e])
        if ask.reader == "builtin":
            content = ev.get("delivered", exact)
            response = {"type": "text", "file": {"filePath": ask.path, "content": content,
                                                 "numLines": len(content.split("\n")), "startLine": s, "totalLines": len(lines)}}
            seen = content
        else:
            body = [f"{i:6d}\t{line}" for i, line in enumerate(lines[s - 1:e], start=s)] if ask.numbered else lines[s - 1:e]
            stdout = ev.get("delivered", "\n".join(body) + ("\n" if e < len(lines) else ""))
            if agent == "codex":
                # Codex 0.171.0 hands its model and its post-tool hook the output as it is, one string
                trimmed, response = stdout, stdout
            else:
                # Claude Code trims the blank lines around a command's output, in what its model gets
                # and in its post-tool payload's stdout alike (2.1.197: the final newline goes too)
                trimmed = stdout.strip("\n")
                response = {"stdout": trimmed, "stderr": "", "interrupted": False, "isImage": False,
                            "noOutputExpected": False}
            seen = readers.shell_content(ask, trimmed) if trimmed else None
        raw = tokens.count(exact)
        shown = content if ask.reader == "builtin" else trimmed  # what the model got, as text
        if seen is not None and e == len(lines) - 1 and seen == exact + "\n":
            seen = exact  # Claude Code's Read of a whole file counts its final newline as an empty line: the same bytes
        fp = fingerprint(text.encode("utf-8", "surrogatepass")) if seen == exact else None
        if fp is None and seen:
            # exactly the window's first j lines and no more (trailing blank lines trimmed, or a
            # cut at a line's end): the model holds those lines of this version
            body = seen[:-1] if seen.endswith("\n") else seen
            j = body.count("\n") + 1
            if s + j - 1 < e and body == "\n".join(lines[s - 1:s - 1 + j]):
                fp, e = fingerprint(text.encode("utf-8", "surrogatepass")), s + j - 1
        got = {"kind": "full", "text": seen or "", "path": ask.path, "lines": n, "fingerprint": fp, "window": [s, e],
               "tokens_raw": raw, "tokens_sent": tokens.count(seen) if seen and seen != exact else raw, "reader": ask.reader}
        if fp is None and shown:
            # other bytes under this name: no older version is the latest copy the context holds
            # (the current one still is where they are part of its text: a cut or trimmed output)
            got["other_bytes"] = fingerprint(text.encode("utf-8", "surrogatepass")) if (seen or shown) in text else None
        return got, response

    # names, links, several roots, carry and reconnections ----------------------------------------
    def _init_ident(self) -> None:
        self.last_name: str | None = None
        self.places: dict[str, tuple[list[str], str]] = {}  # conv -> (roots, cwd), absolute
        self.seen_roots: dict[str, list[str]] = {}  # conv -> every root it was ever given

    def _abs(self, rel: str) -> str:
        return os.path.normpath(os.path.join(self.root, rel))

    def place(self, conv: str) -> tuple[list[str], str]:
        """The conversation's workspace roots and working directory (default: the project)."""
        return self.places.get(conv.split("/", 1)[0], ([self.root], self.root))

    def name_of(self, conv: str, path: str) -> str:
        """The name a read uses (oracle.name_of): a recorded run's absolute paths are replayed here."""
        if os.path.isabs(path):
            return os.path.normpath(path)
        return name_of(path, self.place(conv)[1])

    def _hook_place(self, host: HostProc, conv: str, extra: dict) -> str:
        """The cwd (and Cursor's workspace_roots) a synthetic hook payload of `conv` carries."""
        roots, cwd = self.place(conv)
        if host.agent == "cursor" and conv in self.places:
            extra["workspace_roots"] = list(roots)
        seen = self.seen_roots.setdefault(conv, [])
        for r in (roots if host.agent == "cursor" else [cwd]):
            if r not in seen:
                seen.append(r)
        return cwd

    @staticmethod
    def _conn_tag(host: HostProc, ev: dict) -> str:
        tag = f"~{host.generation}" if host.generation else ""
        return tag + (f"+{ev['conn']}" if ev.get("conn") else "")

    def _apply_ident(self, ev: dict) -> bool:
        op = ev["op"]
        if op == "symlink":
            link, target = self._abs(ev["path"]), self._abs(ev["to"])
            os.makedirs(os.path.dirname(link), exist_ok=True)
            tmp = link + ".replay-link"
            os.symlink(os.path.relpath(target, os.path.dirname(link)), tmp)
            os.replace(tmp, link)
        elif op == "hardlink":
            link = self._abs(ev["path"])
            tmp = link + ".replay-link"
            os.link(self._abs(ev["to"]), tmp)
            os.replace(tmp, link)
        elif op == "mv":
            os.replace(self._abs(ev["from"]), self._abs(ev["path"]))
            self.history.pop(ev["from"], None)
        elif op == "utime":
            m = os.stat(self._abs(ev["like"])).st_mtime_ns
            os.utime(self._abs(ev["path"]), ns=(m, m))
        elif op == "roots":
            roots = [os.path.realpath(self._abs(r)) for r in ev["roots"]]
            for r in roots:
                os.makedirs(r, exist_ok=True)
            cwd = os.path.realpath(self._abs(ev.get("cwd", ev["roots"][0])))
            self.places[ev["conv"]] = (roots, cwd)
        elif op == "attach":
            self._attach(ev)
        elif op == "reconnect":
            self.hosts[ev["host"]].generation += 1
        else:
            return False
        return True

    def _attach(self, ev: dict) -> None:
        """Claude Code re-attaches a file after the conversation's compaction (carry.py's format),
        and the oracle credits exactly those bytes under the path written."""
        conv = ev["conv"]
        ctx = self.ctx(conv, None, ev.get("host"))
        name = self.name_of(conv, ev["path"])
        with open(name, encoding="utf-8", newline="") as f:
            disk = f.read()
        text = ev.get("text", disk)
        pieces = text.split("\n")
        start = int(ev.get("start", 1))
        if ev.get("lines") is not None:
            num = int(ev["lines"])
            content = "\n".join(pieces[start - 1:start - 1 + num])
        else:
            start, num, content = 1, len(pieces), text
        self._entry(ctx, {"type": "attachment", "isSidechain": False, "attachment": {
            "type": "file", "filename": name, "content": {"type": "text", "file": {
                "filePath": name, "content": content, "numLines": num, "startLine": start, "totalLines": len(pieces)}}}})
        data = content.encode("utf-8")
        for p in self.policies:
            if ev.get("lines") is None:  # a whole file: exactly the attached text, whatever the disk holds
                fp, n = fingerprint(data), line_count(content)
                p.truth.deliver(ctx, name, fp, [(1, n)] if n else [], n)
                if isinstance(p, Oracle):
                    p.cache.contents[fp] = content
            else:  # a range: its exact lines, which count if they are the file's lines when next read
                p.truth.carry_range(ctx, name, start, num, content)

    def _settle_carried(self, ctx: str, name: str) -> None:
        if not any((ctx, name) in p.truth.carried for p in self.policies):
            return
        try:
            with open(name, encoding="utf-8", newline="") as f:
                now: str | None = f.read()
        except (OSError, UnicodeDecodeError):
            now = None
        for p in self.policies:
            p.truth.settle_carried(ctx, name, now)

    # -- timing: hook events published late, never, or out of order ------------------------------
    # (the "Timing" part of the module doc; kept apart from the ops above)
    def _timing(self, ev: dict) -> bool:
        """Handle the timing ops and flags; False: the event takes the usual path."""
        op = ev["op"]
        if op == "deliver":
            publish = self.__dict__.setdefault("_late", {}).pop(ev["tag"], None)
            if publish is None:
                raise ValueError(f"deliver: no late event tagged {ev['tag']!r}")
            publish()
            return True
        if op == "note":
            host = self.hosts[ev["host"]]
            self._unhide(ev["host"])
            if host.agent == "codex":
                self._codex_note(host, ev["conv"], ev.get("sub"), self._note_id(ev["tag"]))
            else:
                read_gate(self.data, host.fake, ev["conv"], ev.get("sub"), self._note_id(ev["tag"]), self.root, self.t)
            return True
        if op == "compact_lost" and ev["conv"] in self.__dict__.get("_rollouts", {}):
            self._codex_compacted(ev["conv"])  # Codex logs the compaction in its rollout; then as for Claude Code
            return False
        if op == "host" and "call_ids" in ev:
            self.events -= 1
            self.apply({k: v for k, v in ev.items() if k != "call_ids"})
            host = self.hosts[ev["host"]]
            if not ev["call_ids"] and ev.get("gate", True):
                host.gate, host.notes_only = False, True  # notes written, no call id reaches the MCP server
            return True
        if op != "hook":
            return False
        if ev.get("event") == "sub_start" and "payload" not in ev and not ev.get("resumed"):
            self._fresh_subagent(ev)
        if ev.get("event") == "sub_stop" and ev.get("resumable") and not ev.get("deliver"):
            self._publish_only({k: v for k, v in ev.items() if k != "resumable"})  # its context is kept
            return True
        if ev.get("deliver") not in ("late", "lost"):
            return False
        host = self.hosts[ev["host"]]
        if "payload" in ev:
            self._truth_after_raw(host, ev)
        else:
            meaning, conv = ev["event"], ev["conv"]
            if meaning == "start" and host.agent == "claude":
                host.env.setdefault("CLAUDE_CODE_SESSION_ID", conv)
            if ev.get("fork"):
                self._fork(ev["host"], conv)
            if host.agent == "claude" and meaning == "compact":
                self._boundary(conv)  # Claude Code writes its compact_boundary whatever its hooks do
            if host.agent == "codex" and meaning == "compact":
                self._codex_compacted(conv)  # and Codex its rollout's `compacted` line
            self._truth_after(meaning, self.ctx(conv, None, ev["host"]), ev.get("sub"))
        if ev["deliver"] == "late":
            later = {k: v for k, v in ev.items() if k not in ("deliver", "tag", "fork", "resumed")}
            self.__dict__.setdefault("_late", {})[ev["tag"]] = lambda: self._publish_only(later)
        return True

    def _publish_only(self, ev: dict) -> None:
        """The hook's write, now: its effect on the context was applied when it happened."""
        skip = ("_truth_after", "_truth_after_raw", "_boundary", "_fork", "_codex_compacted")
        for name in skip:
            setattr(self, name, lambda *a, **k: None)
        try:
            self.events -= 1
            self.apply(dict(ev, resumed=True))  # (its SubagentStart's fresh context was applied already)
        finally:
            for name in skip:
                delattr(self, name)

    def _codex_compacted(self, conv: str) -> None:
        """Codex's rollout gets its `compacted` line when the compaction happens (a late hook
        delivery skips this: the line was written already)."""
        self._codex_line(conv, "compacted", {"message": "summary", "replacement_history": []})

    def _codex_note(self, host: HostProc, conv: str, sub: str | None, call_id: str,
                    tool: str = "mcp__leanctx__ctx_read", tool_input: dict | None = None) -> None:
        """The read gate's note as Codex sends it: with its rollout as `transcript_path`."""
        extra: dict = {"tool_name": tool, "tool_input": dict(tool_input or {}), "tool_use_id": call_id,
                       "transcript_path": self._codex_rollout(conv)}
        if sub:
            extra.update(agent_id=sub, agent_type="general-purpose")
        publish_event(self.data, "codex", "PreToolUse", payload("codex", "PreToolUse", conv, self.root, **extra),
                      host.fake.as_host(), self.t)

    def _note_id(self, tag: str) -> str:
        return f"toolu_note_{tag}"

    def _fresh_subagent(self, ev: dict) -> None:
        """A SubagentStart starts an empty context (unless "resumed": the same subagent goes on)."""
        ctx = self.ctx(ev["conv"], ev.get("sub"), ev["host"])
        for p in self.policies:
            p.truth.clear(ctx)
        self.chain[ctx] = []
        if ctx in self.transcripts:
            self.transcripts[ctx][1] = None  # its transcript starts a new chain

    def _timed_read(self, ev: dict, call: dict | None = None) -> dict:
        """A read whose gate note is published by a separate `note` op (earlier: parallel calls;
        later: a late note), or on a host that notes calls but sends the MCP server no call id.
        `call`: a built-in/shell read's tool call (its note names that tool)."""
        host = self.hosts[ev["host"]]
        tool = (call["tool"], call["input"]) if call is not None else ()
        tag, notes_only = ev.get("note"), getattr(host, "notes_only", False)
        if tag is None and host.agent == "codex" and host.gate and ev.get("call_id") is None:
            self.calls += 1
            ev = dict(ev, call_id=f"toolu_replay{self.calls:06d}")
            if not ev.get("gate_fails"):
                self._unhide(ev["host"])
                self._codex_note(host, ev["conv"], ev.get("sub"), ev["call_id"], *tool)
            return ev
        if tag is None and not notes_only:
            return ev
        ev = dict(ev)
        if tag is not None:
            ev["call_id"] = None if notes_only else self._note_id(tag)
        elif not ev.get("gate_fails"):
            self.calls += 1
            self._unhide(ev["host"])
            read_gate(self.data, host.fake, ev["conv"], ev.get("sub"), f"toolu_replay{self.calls:06d}", self.root, self.t, *tool)
        return ev

    # -- the other gated hosts' readers, in their own shapes (bench/support/hostshapes.py) --------
    def shape(self, agent: str):  # noqa: ANN201 - hostshapes.Shape
        shapes = self.__dict__.setdefault("_shapes", {})
        if agent not in shapes:
            shapes[agent] = SHAPES[agent](self)
        return shapes[agent]

    def _host_env(self):  # noqa: ANN202 - a context manager
        """The environment a hook of the replay's hosts runs in: a home folder of the replay's own
        (no settings file of this machine's hosts is read), Copilot's config folder holding the
        session logs the replay writes."""
        import contextlib

        @contextlib.contextmanager
        def env():
            keys = ("HOME", "COPILOT_HOME", "GEMINI_CLI_HOME", "QWEN_HOME", "FACTORY_HOME_OVERRIDE",
                    "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
                    "QWEN_CODE_SYSTEM_SETTINGS_PATH", "QWEN_CODE_SYSTEM_DEFAULTS_PATH")
            saved = {k: os.environ.get(k) for k in keys}
            home = os.path.join(self.base, "home")
            os.makedirs(home, exist_ok=True)
            for k in keys:
                os.environ.pop(k, None)
            os.environ["HOME"] = home
            os.environ["COPILOT_HOME"] = os.path.join(self.base, "copilot-home")
            for k in ("GEMINI_CLI_SYSTEM_SETTINGS_PATH", "QWEN_CODE_SYSTEM_SETTINGS_PATH"):
                os.environ[k] = os.path.join(home, "no-system-settings", k.lower(), "settings.json")
            try:
                yield
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        return env()

    def _idle_clear(self, host: HostProc, conv: str) -> None:
        """Qwen Code clears old tool results from its context (no hook, nothing in its chat
        recording) when a prompt comes an hour or more after its last model answer. That answer
        came after the conversation's previous prompt event, so clearing whenever an hour passed
        since that event is at least as often as Qwen does it (the strict reading: the context
        then holds nothing it read before; Qwen keeps the last 5 tool results)."""
        if host.agent != "qwen":
            return
        last = self.__dict__.setdefault("_last_prompt", {})
        before = last.get((host.name, conv))
        last[(host.name, conv)] = self.t
        if before is not None and self.t - before >= 3600:
            for p in self.policies:
                p.truth.clear(self.ctx(conv, None, host.name))

    def _shaped_call(self, host: HostProc, ev: dict) -> dict:
        """A built-in or shell read on a host of hostshapes.py: the model's call in the host's
        own shape, its pre-tool payload (with whatever the host writes elsewhere first), what the
        host module makes of it (`normalize`, `builtin_read_ask`: the span and the call's id), and
        what the host really reads (the shape's own rules: `real`)."""
        from leanctx import readers

        shape, agent = self.shape(host.agent), _agents.get(host.agent)
        conv, sub = ev["conv"], ev.get("sub")
        cwd = self.place(conv)[1]

        def here(p: str) -> str:
            if self.recorded_root and (p == self.recorded_root or p.startswith(self.recorded_root + "/")):
                return os.path.normpath(os.path.join(self.root, os.path.relpath(p, self.recorded_root)))
            return p

        path = here(ev["path"]) if ev.get("path") is not None else None
        full = os.path.normpath(os.path.join(cwd, path)) if path is not None else None
        if ev["reader"] == "builtin":
            tool = shape.builtin_tool
            if ev.get("input") is not None:
                tool_input = {k: (here(v) if isinstance(v, str) and k in ("file_path", "filePath", "path") else v)
                              for k, v in ev["input"].items()}
            else:
                tool_input = shape.builtin_input(full, ev.get("start"), ev.get("end"))
            command = None
        else:
            tool = shape.shell_tool
            command = ev.get("command")
            if command is not None and self.recorded_root:
                command = command.replace(self.recorded_root + "/", self.root + "/")
            if command is None:
                if ev.get("last") is not None:
                    command = f"tail -n {int(ev['last'])} {path}"
                elif ev.get("start") is not None or ev.get("end") is not None:
                    end = ev.get("end")
                    command = f"sed -n '{int(ev.get('start') or 1)},{int(end) if end is not None else '$'}p' {path}"
                else:
                    command = f"cat -n {path}" if ev.get("numbered") else f"cat {path}"
            tool_input = dict(ev["input"]) if ev.get("input") is not None else shape.shell_input(command)
        self.calls += 1
        model_call = ev.get("call_id") or f"call_replay{self.calls:06d}"
        for k, v in (ev.get("host_state") or {}).items():
            host.state[k] = v  # e.g. a log the host did not write this time (adversarial traces)
        with self._host_env():
            pre = shape.pre_payload(host, conv, sub, cwd, tool, tool_input, model_call)
            norm = agent.normalize(pre[0], pre[1])
            ask = agent.builtin_read_ask(norm) if tool in agent.builtin_read_tools else None
        call_id = norm.tool_use_id if ask is not None else None
        # what the host really reads, by its own rules
        real = None
        if ev["reader"] == "builtin":
            target = tool_input.get("file_path") or tool_input.get("filePath") or tool_input.get("path")
            if isinstance(target, str):
                target = os.path.normpath(os.path.join(cwd, target))
                try:
                    with open(target, encoding="utf-8", newline="") as f:
                        text = f.read()
                    w = shape.window(tool_input, text)
                except (OSError, UnicodeDecodeError, TypeError, ValueError):
                    w = None
                real = readers.Ask(target, w[0], w[1]) if w else None
                full = target
        else:
            real = readers.shell_ask(command, cwd) if command is not None else None
            full = real.path if real is not None else full
        return {"tool": tool, "input": tool_input, "ask": ask, "gated": ask is not None and isinstance(call_id, str),
                "agent": agent, "cwd": cwd, "shape": shape, "pre": pre, "norm": norm, "call_id": call_id,
                "model_call": model_call, "real": real, "full": full, "command": command, "posts": {}}

    def _shaped_answer(self, p: Policy, host: HostProc, conv: str, sub: str | None, call: dict, ev: dict) -> dict:
        """What policy `p`'s context receives from one built-in/shell read of a host of
        hostshapes.py: the gate's stub, pointer or diff (ours asks with the host module's span,
        the oracle with the host's real one: an answer for other lines than the call reads is
        wrong); else the host's own answer, credited (ours) with exactly what the host module
        reads out of the host's post-tool payload."""
        real, ask, agent, shape = call["real"], call["ask"], call["agent"], call["shape"]
        if real is None:  # not a read of one file's lines: it runs, and nothing is learnt
            return {"kind": "full", "text": "", "fingerprint": None, "tokens_raw": 0, "tokens_sent": 0, "reader": ev["reader"]}
        oracle = isinstance(p, Oracle)
        tool_input = call["input"]
        if call["gated"]:
            ans = p.gate(host, conv, sub, real if oracle else ask, call["call_id"])
            if ans.get("kind") in ("stub", "pointer", "diff"):
                ans = dict(ans, reader=real.reader, tokens_raw=self._reader_raw(real))
                w = self._reader_window(real)
                if not oracle and w is not None and ans.get("window") is not None and tuple(ans["window"]) != (w[2], w[3]):
                    ans["wrong_span"] = f"{ans['kind']} for lines {ans['window']} of a call that reads {[w[2], w[3]]}"
                return ans
            if ans.get("again"):
                # asked again right after a refusal: the host module may answer (Qwen: the file's
                # text in the refusal, where read_file would give its own "unchanged" note)
                with self._host_env():
                    out = agent.builtin_again_output(call["norm"], ask or real)
                try:
                    said = json.loads(out) if out.strip() else None
                except ValueError:
                    said = None
                reason = (said or {}).get("hookSpecificOutput", {}).get("permissionDecisionReason") if isinstance(said, dict) else None
                if isinstance(reason, str):
                    got = self._shaped_got(real, reason, reason, p, host)
                    return got
        state = host.pstate.setdefault(p.name, {})
        if real.reader == "builtin":
            with open(real.path, encoding="utf-8", newline="") as f:
                text = f.read()
            proxy = HostProc(host.name, host.agent, host.fake, host.env)
            proxy.state = state
            shape.delivered_span = None  # (a host that gives fewer lines than asked says which)
            response, shown, seen, note = shape.render_builtin(proxy, tool_input, text, ev.get("delivered"))
        else:
            w = self._reader_window(real)
            if w is None:
                return {"kind": "error", "text": "", "tokens_raw": 0, "tokens_sent": 0, "reader": "shell"}
            text, n, s, e = w
            lines = text.split("\n")
            body = [f"{i:6d}\t{line}" for i, line in enumerate(lines[s - 1:e], start=s)] if real.numbered else lines[s - 1:e]
            stdout = ev.get("delivered", "\n".join(body) + ("\n" if e < len(lines) else ""))
            response, shown = shape.render_shell(call["command"], stdout)
            out = shape.shell_seen(stdout)
            if real.numbered and out[:1].isdigit():
                number, tab, rest = out.partition("\t")
                out = f"{number:>6}{tab}{rest}" if tab and number.isdigit() else out
            from leanctx import readers

            seen, note = (readers.shell_content(real, out) if out else None), False
        got = self._shaped_got(real, seen, shown, p, host, note, getattr(shape, "delivered_span", None))
        if call["tool"] in agent.builtin_read_tools and isinstance(p, Ours):
            # the post-tool hook runs for every call of the tools it is wired for, gated or not
            key = json.dumps(response, sort_keys=True, default=str)
            if key not in call["posts"]:
                call["posts"][key] = shape.post_payload(host, conv, sub, call["cwd"], call["tool"], tool_input,
                                                        call["model_call"], response)
            event, post = call["posts"][key]
            with self._host_env():
                norm = agent.normalize(event, post)
                delivery = agent.builtin_read_delivery(norm, post)
            if delivery is not None:  # (hooks/readgate.py after_read: a call it cannot name goes unnamed)
                p.gate(host, conv, sub, delivery[0], norm.tool_use_id if isinstance(norm.tool_use_id, str) else None,
                       delivered=delivery[1])
        return got

    def _shaped_got(self, real, seen: str | None, shown: str, p: Policy, host: HostProc, note: bool = False,
                    span: tuple[int, int] | None = None) -> dict:  # noqa: ANN001
        """A read that ran, as the context received it: the file's lines when `seen` is exactly
        them (a final newline aside), else what it got instead (a cut or trimmed output: other
        bytes under the name; a host's own note: nothing). `span`: the lines the host gave, when
        fewer than the call reads (OpenCode's 50 KB cap)."""
        from leanctx import readers

        if span is not None and span != (real.start, real.end):
            real = readers.Ask(real.path, span[0], span[1], reader=real.reader)
        w = self._reader_window(real)
        if w is None:
            return {"kind": "error", "text": "", "tokens_raw": 0, "tokens_sent": 0, "reader": real.reader}
        text, n, s, e = w
        exact = "\n".join(text.split("\n")[s - 1:e])
        if seen is not None and seen != exact and seen.endswith("\n") and seen[:-1] == exact:
            seen = exact
        raw = tokens.count(exact)
        fp = fingerprint(text.encode("utf-8", "surrogatepass")) if seen == exact else None
        sent = raw if fp else tokens.count(shown or "")
        if fp is None and seen:
            # exactly the window's first j lines and no more (trailing blank lines trimmed, or a
            # cut at a line's end): the model holds those lines of this version (as _reader_run)
            lines = text.split("\n")
            body = seen[:-1] if seen.endswith("\n") else seen
            j = body.count("\n") + 1
            if s + j - 1 < e and body == "\n".join(lines[s - 1:s - 1 + j]):
                fp, e, seen = fingerprint(text.encode("utf-8", "surrogatepass")), s + j - 1, body
        got = {"kind": "full", "text": seen if fp else (shown or ""), "path": real.path, "lines": n, "fingerprint": fp,
               "window": [s, e], "tokens_raw": raw, "tokens_sent": sent, "reader": real.reader}
        if fp is None and shown and not note:
            got["other_bytes"] = fingerprint(text.encode("utf-8", "surrogatepass")) if (seen or shown) in text else None
        return got


def load_trace(path: str) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            ev = json.loads(line)
            if not isinstance(ev, dict) or "op" not in ev:
                raise ValueError(f"{path}:{n}: not a trace event")
            out.append(ev)
    return out
