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
    {"op": "miss", "host": "h1", "conv": "s1"}                     the daemon cannot read the conversation's
                                                                   record (it reads torn) until h1's next
                                                                   hook event (a transient miss; the hook
                                                                   itself loses nothing)

Claude Code conversations get a transcript (a tree of uuid/parentUuid entries, as the real CLI
writes) that their hook payloads point to: each read of the conversation's own context appends
the call's tool_use entry before the read and its tool_result after it; compactions append a
compact_boundary. Reads by subagents are not written there (Claude Code keeps them apart).
Recorded Gemini CLI sessions get the chat recording their payloads point to, with the lines the
CLI writes at a start or resume (a replacement of the history: leanctx/cache/hosthistory.py).

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
    FakeHost,
    OracleCache,
    Truth,
    hook,
    publish_event,
    read_gate,
)
from leanctx.cache import ReadCache, Resolver
from leanctx.cache.scope import Connection, Scope
from leanctx.hooks.publish import record_path

T0 = 1_800_000_000.0
# hosts whose pre-tool hook (our read gate) gets the same call id the MCP server receives in
# `_meta` (verified with Claude Code 2.1.197 and Codex 0.171.0)
GATED_AGENTS = ("claude", "codex")


class HostProc:
    def __init__(self, name: str, agent: str, fake: FakeHost, env: dict, gate: bool = False) -> None:
        self.name, self.agent, self.fake, self.env, self.gate = name, agent, fake, env, gate


class Policy:
    name = "policy"

    def __init__(self) -> None:
        self.truth = Truth()
        self.tokens = 0
        self.raw = 0
        self.reads = 0
        self.kinds: Counter = Counter()
        self.sequence: list[str] = []  # the kind of each answer, in order
        self.wrong = 0
        self.wrong_raw = 0  # tokens a caller must fetch again after a wrong stub (what it lacked)
        self.wrong_examples: list[str] = []

    def setup(self, eng: Engine) -> None:
        self.eng = eng

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
        return Connection(f"mcp-{host.name}", dict(host.env), host.fake.pid, host.fake.ticks, root)

    def read(self, host, conv, sub, path, start, end, fresh, call_id=None):
        scope = self.resolver.resolve(self.conn(host, sub), fresh=True, call_id=call_id)
        self.last_scope = scope
        self.last_holding = self._holding(scope, path)
        return self.cache.read(scope, path, start, end, fresh)

    def _holding(self, scope: Scope, path: str):
        conv = self.cache._convs.get(scope.key) if scope.key else None
        if conv is None:
            return None
        return conv.held.get(os.path.realpath(os.path.join(self.eng.root, path)))

    def explain(self, res: dict, oracle_res: dict) -> str:
        """Why we sent content where the oracle did not (for the report)."""
        s = self.last_scope
        if not s.stub_ok:
            reason = s.reason
            for word in ("subagent window open", "conversations active on this host process"):
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

    def read(self, host, conv, sub, path, start, end, fresh, call_id=None):
        ctx = self.eng.ctx(conv, sub, host.name)
        _real, res = self.cache.read(ctx, [self.eng.root], self.eng.root, path, start, end, fresh)
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
            if host.agent in EVENTS:
                hook(self.data, host.fake, meaning, conv, self.root, self.t, **extra)
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
        else:
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
        uid = self._entry(conv, {"type": "system", "subtype": "compact_boundary", "logicalParentUuid": prev},
                          parent=None)
        self.transcripts[conv][3] = uid  # a rewind to read 0 goes back to here
        self.chain[conv] = []

    def _retruth(self, conv: str) -> None:
        """The context lost part of what it received: it holds what the reads still on its chain
        gave (an answer that presumed bytes no longer held gives nothing)."""
        for p in self.policies:
            p.truth.clear(conv)
            for n in self.chain.get(conv, []):
                got = self.deliveries.get((conv, n), {}).get(p.name)
                if got and not p.truth.violation(conv, got[0], got[1]):
                    p.truth.apply(conv, got[0], got[1])

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
        from leanctx.agents.base import PRE_COMPACT, SESSION_END, SUBAGENT_STOP

        norm = agents.get(host.agent).normalize(ev["event"], ev["payload"])
        meaning = {PRE_COMPACT: "compact", SESSION_END: "end", SUBAGENT_STOP: "sub_stop"}.get(norm.kind)
        if meaning and norm.conversation_id:
            self._truth_after(meaning, self.ctx(norm.conversation_id, None, host.name), norm.subagent_id)

    def _read(self, ev: dict) -> None:
        host = self.hosts[ev["host"]]
        conv, sub = ev["conv"], ev.get("sub")
        ctx = self.ctx(conv, sub, ev["host"])
        path = ev["path"]
        if self.recorded_root and (path == self.recorded_root or path.startswith(self.recorded_root + "/")):
            path = os.path.relpath(path, self.recorded_root)
        real = os.path.realpath(os.path.join(self.root, path))
        call_id = ev.get("call_id")
        if call_id is None and host.gate:
            self.calls += 1
            call_id = f"toolu_replay{self.calls:06d}"
            if not ev.get("gate_fails"):
                self._unhide(ev["host"])  # the gate is a hook event: it reads the record well
                read_gate(self.data, host.fake, conv, sub, call_id, self.root, self.t)
        traced = host.agent == "claude" and call_id is not None
        if traced:
            self._entry(ctx, {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": call_id, "name": "mcp__leanctx__ctx_read", "input": {"path": path}}]}})
        results = {}
        for p in self.policies:
            res = p.read(host, conv, sub, path, ev.get("start"), ev.get("end"), bool(ev.get("fresh")), call_id)
            results[p.name] = res
            p.reads += 1
            p.kinds[res["kind"]] += 1
            p.sequence.append(res["kind"])
            p.tokens += res.get("tokens_sent", 0)
            p.raw += res.get("tokens_raw", 0)
            why = p.truth.violation(ctx, real, res)
            if why:
                p.wrong += 1
                p.wrong_raw += res.get("tokens_raw", 0)
                if len(p.wrong_examples) < 5:
                    p.wrong_examples.append(f"event {self.events}: {why}")
            p.truth.apply(ctx, real, res)
        if traced:
            n = self.read_no[ctx] = self.read_no.get(ctx, 0) + 1
            self.result_uuid[(ctx, n)] = self._entry(ctx, {"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": "…"}]}})
            self.chain.setdefault(ctx, []).append(n)
            self.deliveries[(ctx, n)] = {p.name: (real, results[p.name]) for p in self.policies}
        ours = next((p for p in self.policies if isinstance(p, Ours)), None)
        orc = results.get("oracle")
        if ours is not None and orc is not None:
            mine = results[ours.name]
            if orc["kind"] in ("stub", "pointer", "diff") and mine["tokens_sent"] > orc["tokens_sent"]:
                ours.why[ours.explain(mine, orc)] += mine["tokens_sent"] - orc["tokens_sent"]


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
