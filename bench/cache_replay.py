"""Replay seeded synthetic traces (and recorded ones) through four read-cache policies in one run.

    python bench/cache_replay.py [--seed 7] [--scale 1.0] [--trace FILE.jsonl ...] [--json]

Policies, all on the same files, hook records and clock:
- no cache: every read sends its content;
- peer: the seed's gate (lean-ctx's conversation scoping, seeds/000): the conversation is the
  last writer of `active_transcript.json`; an unknown caller is allowed (legacy); more than one id
  sampled within 30 s withholds every stub; any compaction anywhere resets every delivery flag;
  windowed reads are always fresh; cold stubs from its index after a restart (which re-applies the
  last compaction marker, wiping the index, as lean-ctx's process-local LAST_COMPACTION_TS does);
- ours: leanctx.cache (Resolver + ReadCache), exactly as the service calls it;
- oracle: knows what each context really holds (bench.support.oracle.OracleCache).

Prints tokens delivered per policy, our savings as a fraction of the oracle's, wrong stubs (a
stub, pointer or diff for bytes the caller does not hold), per host and per reader (ctx_read, the
host's built-in reader, shell reads), and where ours sent more than the oracle and why. Targets: 0 wrong, ahead of the peer on concurrent CLI sessions, and >= 0.95 of the
oracle's savings where the rules allow a stub (the extra tokens ours sent only because a rule
withheld — unknown caller, several chats live on one host process, an open subagent window
without per-call identity — are counted back); the fractions with that withholding included
are printed beside them.

Trace format (`--trace`, one JSON object per line; `#` comments allowed): see the docstring of
bench/support/replay.py. In short: `host` (a host process and its MCP server), `hook` (an event
by meaning, or a recorded host payload), `read` (a ctx_read, with the ground-truth conversation
and subagent that made it; with `reader` "builtin"/"shell", the host's own reader or a shell
command, in that host's own shapes, gated before and credited after as the hooks do: Claude
Code's Read and Bash, Codex's shell, Gemini CLI's and Qwen Code's read_file and
run_shell_command, Copilot CLI's view and bash, OpenCode's read and bash, CodeBuddy's Read and
Bash, Droid's Read and Execute), `write`/`edit`, `tick`, `restart`, `miss`; for names and identity
`symlink`/`hardlink`/`mv`/`utime`, `roots` (several workspace roots, a moving cwd), `attach`
(a file Claude Code re-attached after a compaction) and `reconnect` (a new MCP connection). A recorded e2e run becomes
a trace by logging, in order, each hook payload the host sent (with its event name), each
ctx_read call (path, window, fresh, and which session/subagent made it — the test knows), each
file the test wrote, and the time between them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from leanctx.cache import tokens
from leanctx.cache.paths import ReadError, load, real_roots, resolve
from bench.support.replay import Engine, NoCache, Oracle, Ours, Policy, load_trace
from leanctx.cache.stubs import stub
from leanctx.hooks.publish import read_json

TRACES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "traces")  # recorded from the e2e runs

# -- the peer's policy (seed 000 + lean-ctx §2) -----------------------------------------------------


class Peer(Policy):
    name = "peer"

    def setup(self, eng: Engine) -> None:
        super().setup(eng)
        self.entries: dict[str, dict] = {}
        self.index: dict[str, dict] = {}
        self._new_process()

    def _new_process(self) -> None:
        self.cached: str | None = None
        self.seen: dict[str, float] = {}
        self.last_compaction = 0.0

    def restart(self, graceful: bool) -> None:
        self.entries = {}  # the in-memory cache is gone; the index is written through
        self._new_process()

    def _current(self) -> str | None:
        now = self.eng.clock()
        slot = read_json(os.path.join(self.eng.data, "active_transcript.json")) or {}
        conv = None
        ts = slot.get("updated_ts")
        if isinstance(ts, (int, float)) and now - ts <= 7200:
            conv = slot.get("conversation_id") or slot.get("session_id")
        if conv:
            self.seen[conv] = now
        if conv is None and self.cached is not None:
            return self.cached  # last-known-good
        self.cached = conv
        return conv

    def _concurrent(self) -> bool:
        now = self.eng.clock()
        self.seen = {k: t for k, t in self.seen.items() if now - t <= 30}
        return len(self.seen) > 1

    def _sync_compaction(self) -> None:
        latest = 0.0
        base = os.path.join(self.eng.data, "conversations")
        for agent in os.listdir(base) if os.path.isdir(base) else []:
            folder = os.path.join(base, agent)
            if not os.path.isdir(folder):
                continue
            for name in os.listdir(folder):
                rec = read_json(os.path.join(folder, name)) if name.endswith(".json") else None
                ts = (rec or {}).get("last_compaction_ts")
                if isinstance(ts, (int, float)):
                    latest = max(latest, ts)
        if latest > self.last_compaction:
            self.last_compaction = latest
            for e in self.entries.values():
                e["full"] = False
            self.index.clear()

    def read(self, host, conv, sub, path, start, end, fresh, call_id=None):
        root = self.eng.root
        scope_env = host.env.get("LEANCTX_SCOPE")
        if host.agent == "cursor" and sub:
            current: str | None = f"task:{sub}"
        elif scope_env:
            current = f"custom:{scope_env}"
        else:
            current = self._current()
        concurrent = self._concurrent()
        if not fresh:
            self._sync_compaction()
        try:
            real, rel = resolve(path, real_roots([root]), (), root)
            snap = load(real, rel, 2_000_000, real_roots([root]))
        except ReadError as exc:
            return {"kind": "error", "text": exc.message, "tokens_raw": 0, "tokens_sent": 0}
        n = snap.nlines
        windowed = start is not None or end is not None
        if windowed and n:
            s = start or 1
            e = min(end or n, n)
            if s > n or e < s:
                return {"kind": "error", "text": "bad range", "tokens_raw": 0, "tokens_sent": 0}
            win = (s, e)
        else:
            win = (1, n) if n else None
        text = snap.text if not windowed else snap.slice(*win)
        raw = tokens.count(text)
        res = {"kind": "full", "text": text, "path": rel, "lines": n, "fingerprint": snap.fp,
               "window": list(win) if win else None, "tokens_raw": raw, "tokens_sent": raw}
        if windowed or fresh:  # `lines:` modes and fresh=true: invalidate, store undelivered
            self.entries[real] = {"fp": snap.fp, "mtime": snap.mtime_ns, "full": not windowed, "conv": current}
            if not windowed and current:
                self.index[real] = {"fp": snap.fp, "mtime": snap.mtime_ns, "conv": current}
            return res
        e = self.entries.get(real)
        same = e is not None and e["fp"] == snap.fp and e["mtime"] == snap.mtime_ns
        allowed = False
        if same and e["full"]:
            allowed = (not concurrent) and (current is None or (e["conv"] is not None and current == e["conv"]))
        elif e is None:
            rec = self.index.get(real)
            if rec and rec["fp"] == snap.fp and rec["mtime"] == snap.mtime_ns:
                allowed = (not concurrent) and current is not None and current == rec["conv"]
        s_text = stub(rel, n)
        if allowed and n and tokens.count(s_text) < raw:
            res.update(kind="stub", text=s_text, tokens_sent=tokens.count(s_text),
                       claims={"fingerprint": snap.fp, "spans": [[1, n]]})
            return res
        self.entries[real] = {"fp": snap.fp, "mtime": snap.mtime_ns, "full": True, "conv": current}
        if current:
            self.index[real] = {"fp": snap.fp, "mtime": snap.mtime_ns, "conv": current}
        return res


# -- synthetic traces ---------------------------------------------------------------------------


WORDS = ["value", "result", "items", "config", "client", "session", "handler", "index", "buffer", "state",
         "request", "response", "cache", "entry", "record", "path", "token", "window", "range", "scope"]


def make_file(rng: random.Random, n: int, tag: str) -> str:
    out = []
    for i in range(n):
        if i % 12 == 0:
            out.append(f"def {tag}_{i // 12}({rng.choice(WORDS)}, {rng.choice(WORDS)}):")
        else:
            indent = "    " * rng.randint(1, 3)
            expr = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9)))
            out.append(f"{indent}{rng.choice(WORDS)} = {expr.replace(' ', ' + ', 2)}")
    return "\n".join(out) + "\n"


class Trace:
    def __init__(self, rng: random.Random, nfiles: int = 24) -> None:
        self.rng = rng
        self.ev: list[dict] = []
        self.files: dict[str, int] = {}
        for i in range(nfiles):
            n = rng.choice([40, 80, 150, 260, 400, 700, 1100])
            path = f"src/pkg{i % 4}/mod_{i}.py"
            self.files[path] = n
            self.ev.append({"op": "write", "path": path, "text": make_file(rng, n, f"m{i}")})
        self.read_by: dict[str, list[str]] = {}

    def host(self, name: str, agent: str, env: dict | None = None) -> None:
        self.ev.append({"op": "host", "host": name, "agent": agent, "env": env or {}})

    def hook(self, host: str, event: str, conv: str, **kw: object) -> None:
        self.ev.append({"op": "hook", "host": host, "event": event, "conv": conv, **kw})

    def tick(self, s: float) -> None:
        self.ev.append({"op": "tick", "s": s})

    def pick_file(self, ctx: str, reread: float = 0.4) -> str:
        seen = self.read_by.get(ctx) or []
        if seen and self.rng.random() < reread:
            return self.rng.choice(seen)
        return self.rng.choice(list(self.files))

    def read(self, host: str, conv: str, sub: str | None = None, reread: float = 0.4, readers: bool | tuple = False) -> None:
        """One read; `readers`: by ctx_read, the host's built-in reader or a shell command, at
        random (or one of the readers named)."""
        ctx = f"{conv}/{sub}" if sub else conv
        path = self.pick_file(ctx, reread)
        n = self.files[path]
        ev = {"op": "read", "host": host, "conv": conv, "sub": sub, "path": path, "fresh": self.rng.random() < 0.03}
        if n > 200 and self.rng.random() < 0.6:  # scroll through a big file in windows
            start = self.rng.randrange(1, n - 50)
            size = self.rng.choice([60, 120, 200])
            ev["start"], ev["end"] = start, min(n, start + size)
        if readers:
            codex = any(e.get("op") == "host" and e.get("host") == host and e.get("agent") == "codex" for e in self.ev)
            # (Codex has no file reader of its own: its model reads through the shell)
            choices = list(readers) if isinstance(readers, tuple) else \
                ["ctx_read", "shell", "shell"] if codex else ["ctx_read", "builtin", "builtin", "shell", "shell"]
            reader = self.rng.choice(choices)
            if reader != "ctx_read":
                ev["reader"] = reader
                ev.pop("fresh")
            if reader == "shell" and "start" not in ev and self.rng.random() < 0.3:
                ev["command"] = self.rng.choice([f"cat -n {path}", f"tail -n 40 {path}", f"head -n 80 {path}"])
        self.ev.append(ev)
        self.read_by.setdefault(ctx, []).append(path)

    def subagent(self, host: str, conv: str, sub: str, reads: tuple[int, int], reread: float, tick: float,
                 parents_files: float | None = None) -> None:
        """A subagent window: start, a random number of reads (with `parents_files`, after each
        read, that chance of also reading a file its parent read), stop."""
        self.hook(host, "sub_start", conv, sub=sub)
        for _ in range(self.rng.randint(*reads)):
            self.read(host, conv, sub=sub, reread=reread)
            if parents_files is not None and self.rng.random() < parents_files and self.read_by.get(conv):
                path = self.rng.choice(self.read_by[conv])
                self.ev.append({"op": "read", "host": host, "conv": conv, "sub": sub, "path": path, "fresh": False})
            self.tick(tick)
        self.hook(host, "sub_stop", conv, sub=sub)

    def edit(self, ctx: str) -> None:
        seen = self.read_by.get(ctx) or list(self.files)
        path = self.rng.choice(seen)
        mode = self.rng.choice(["line", "line", "line", "append", "touch"])
        self.ev.append({"op": "edit", "path": path, "mode": mode, "n": self.rng.randrange(10_000)})
        if mode == "append":
            self.files[path] += 2

    def turn(self, host: str, conv: str, reads: int, edit_p: float = 0.3) -> None:
        self.hook(host, "prompt", conv)
        for _ in range(reads):
            self.read(host, conv)
            self.tick(self.rng.uniform(0.5, 4))
            if self.rng.random() < edit_p / max(1, reads):
                self.edit(conv)
                self.read(host, conv, reread=1.0)
        self.hook(host, "stop", conv)


def sc_solo(rng: random.Random, scale: float) -> list[dict]:
    t = Trace(rng)
    t.host("h", "claude")
    conv = "solo-1"
    t.hook("h", "start", conv)
    turns = int(14 * scale)
    for i in range(turns):
        t.turn("h", conv, rng.randint(4, 9))
        t.tick(rng.uniform(10, 90))
        if i == turns // 2:
            t.hook("h", "compact", conv)
        if i == turns // 2 + 2:
            t.ev.append({"op": "restart", "graceful": True})
        if i == turns // 2 + 4:
            t.ev.append({"op": "restart", "graceful": False})
    t.hook("h", "end", conv, reason="clear")
    conv2 = "solo-2"
    t.hook("h", "start", conv2, source="clear")
    for _ in range(max(1, turns // 3)):
        t.turn("h", conv2, rng.randint(4, 8))
        t.tick(30)
    return t.ev


def sc_subagents(rng: random.Random, scale: float, agent: str = "claude") -> list[dict]:
    t = Trace(rng)
    t.host("h", agent)
    conv = f"{agent}-main"
    t.hook("h", "start", conv)
    nsub = 0
    for i in range(int(10 * scale)):
        t.hook("h", "prompt", conv)
        for _ in range(rng.randint(2, 5)):
            t.read("h", conv)
            t.tick(2)
        if rng.random() < 0.6:
            nsub += 1
            # the subagent often reads what the parent holds: exactly the #1292 hazard
            t.subagent("h", conv, f"agent-{nsub}", (3, 8), reread=0.2, tick=3, parents_files=0.5)
        for _ in range(rng.randint(3, 7)):
            t.read("h", conv, reread=0.6)
            t.tick(2)
        t.hook("h", "stop", conv)
        t.tick(rng.uniform(20, 120))
        if agent == "codex" and i == 5:
            t.hook("h", "compact", conv)
    return t.ev


def sc_cursor(rng: random.Random, scale: float) -> list[dict]:
    t = Trace(rng)
    t.host("cur", "cursor")
    chats = ["chat-a", "chat-b", "chat-c"]
    for c in chats:
        t.hook("cur", "start", c)
    nsub = 0
    for i in range(int(18 * scale)):
        c = rng.choice(chats)
        t.hook("cur", "prompt", c)
        other = None
        if rng.random() < 0.25:  # another chat works at the same time (truly concurrent)
            other = rng.choice([x for x in chats if x != c])
            t.hook("cur", "prompt", other)
        for _ in range(rng.randint(3, 8)):
            who = other if other and rng.random() < 0.4 else c
            t.read("cur", who, reread=0.5)
            t.tick(3)
        if rng.random() < 0.3:
            nsub += 1
            t.subagent("cur", c, f"task-{nsub}", (2, 5), reread=0.5, tick=2)
        t.hook("cur", "stop", c)
        if other:
            t.hook("cur", "stop", other)
        t.tick(rng.uniform(35, 200))
    return t.ev


def sc_concurrent_cli(rng: random.Random, scale: float) -> list[dict]:
    t = Trace(rng)
    sessions = [("c1", "claude", "cli-one"), ("c2", "claude", "cli-two"), ("c3", "claude", "cli-three"), ("x1", "codex", "cdx-four")]
    for h, agent, conv in sessions:
        t.host(h, agent)
        t.hook(h, "start", conv)
    active: dict[str, bool] = {}
    for _ in range(int(260 * scale)):
        h, agent, conv = rng.choice(sessions)
        if not active.get(conv):
            t.hook(h, "prompt", conv)
            active[conv] = True
        t.read(h, conv, reread=0.45)
        t.tick(rng.uniform(0.5, 3))
        if rng.random() < 0.06:
            t.hook(h, "stop", conv)
            active[conv] = False
        if rng.random() < 0.01:
            t.hook(h, "compact", conv)
        if rng.random() < 0.02:
            t.edit(conv)
    return t.ev


def sc_readers(rng: random.Random, scale: float) -> list[dict]:
    """Two Claude Code sessions and a Codex one reading through ctx_read, the host's own reader
    (Claude Code's Read) and the shell (cat, sed -n, tail, head, cat -n), with edits, a subagent
    and a compaction: the built-in and shell reads are gated and credited as each host's hooks do."""
    t = Trace(rng)
    sessions = [("c1", "claude", "rd-one"), ("c2", "claude", "rd-two"), ("x1", "codex", "rd-cdx")]
    for h, agent, conv in sessions:
        t.host(h, agent)
        t.hook(h, "start", conv)
    nsub = 0
    for i in range(int(30 * scale)):
        h, agent, conv = rng.choice(sessions)
        t.hook(h, "prompt", conv)
        for _ in range(rng.randint(3, 8)):
            t.read(h, conv, reread=0.5, readers=True)
            t.tick(rng.uniform(0.5, 3))
            if rng.random() < 0.08:
                t.edit(conv)
        if agent == "claude" and rng.random() < 0.25:
            nsub += 1
            t.hook(h, "sub_start", conv, sub=f"rd-agent-{nsub}")
            for _ in range(rng.randint(2, 5)):
                t.read(h, conv, sub=f"rd-agent-{nsub}", reread=0.4, readers=True)
                t.tick(2)
            t.hook(h, "sub_stop", conv, sub=f"rd-agent-{nsub}")
        t.hook(h, "stop", conv)
        t.tick(rng.uniform(20, 90))
        if i == int(15 * scale):
            t.hook(h, "compact", conv)
    return t.ev


def sc_host_readers(rng: random.Random, scale: float) -> list[dict]:
    """Every other gated host reading through its own reader and its shell, in its own shapes
    (bench/support/hostshapes.py: Gemini's read_file and run_shell_command, Qwen's, Copilot's view
    and bash, OpenCode's read and bash, CodeBuddy's Read and Bash, Droid's Read and Execute), one
    process each, with edits, subagents where the host has them, a compaction each and, once,
    an idle hour (Qwen clears old tool results then)."""
    t = Trace(rng)
    sessions = [("g1", "gemini", "hr-gemini"), ("q1", "qwen", "hr-qwen"), ("p1", "copilot", "hr-copilot"),
                ("o1", "opencode", "hr-opencode"), ("b1", "codebuddy", "hr-codebuddy"), ("d1", "droid", "hr-droid")]
    for h, agent, conv in sessions:
        t.host(h, agent)
        t.hook(h, "start", conv)
    nsub = 0
    turns = int(48 * scale)
    compacted: set = set()
    for i in range(turns):
        h, agent, conv = rng.choice(sessions)
        t.hook(h, "prompt", conv)
        for _ in range(rng.randint(3, 8)):
            t.read(h, conv, reread=0.5, readers=("builtin", "builtin", "shell"))
            t.tick(rng.uniform(0.5, 3))
            if rng.random() < 0.08:
                t.edit(conv)
        if agent != "droid" and rng.random() < 0.25:  # (Droid's hooks name no subagent)
            nsub += 1
            sub = f"hr-{agent}-sub-{nsub}" if agent != "opencode" else f"ses_hrsub{nsub}"
            t.hook(h, "sub_start", conv, sub=sub)
            for _ in range(rng.randint(2, 5)):
                t.read(h, conv, sub=sub, reread=0.4, readers=("builtin", "shell"))
                t.tick(2)
            t.hook(h, "sub_stop", conv, sub=sub)
        t.hook(h, "stop", conv)
        t.tick(rng.uniform(20, 90))
        if i >= turns // 2 and conv not in compacted:
            compacted.add(conv)
            t.hook(h, "compact", conv)
        if i == (2 * turns) // 3:
            t.tick(3700)
    return t.ev


def sc_no_hooks(rng: random.Random, scale: float) -> list[dict]:
    t = Trace(rng)
    t.host("cc", "claude")
    t.host("tool", "none")  # an MCP client that runs none of our hooks
    t.hook("cc", "start", "cc-main")
    for _ in range(int(10 * scale)):
        t.turn("cc", "cc-main", rng.randint(3, 6))
        for _ in range(rng.randint(1, 4)):
            t.read("tool", "tool-ctx", reread=0.3)
            if rng.random() < 0.5 and t.read_by.get("cc-main"):
                t.ev.append({"op": "read", "host": "tool", "conv": "tool-ctx", "sub": None,
                             "path": rng.choice(t.read_by["cc-main"]), "fresh": False})
            t.tick(2)
        t.tick(20)
    return t.ev


SCENARIOS = [
    ("solo claude (compaction, restarts, /clear)", sc_solo),
    ("claude subagents", lambda r, s: sc_subagents(r, s, "claude")),
    ("codex subagents + compaction", lambda r, s: sc_subagents(r, s, "codex")),
    ("cursor: 3 chats, one process", sc_cursor),
    ("concurrent CLI sessions (3 claude + 1 codex)", sc_concurrent_cli),
    ("claude + a host without hooks", sc_no_hooks),
    ("ctx_read + built-in Read + shell reads", sc_readers),
    ("every other gated host's own readers", sc_host_readers),
]
# the scenario with a caller no hook identifies: the rule "unknown caller -> no stub" withholds
# there by design, so the target is reported with and without it
HOOKLESS = {"claude + a host without hooks"}


# -- running ----------------------------------------------------------------------------------------


def run(name: str, events: list[dict]) -> dict:
    with tempfile.TemporaryDirectory(prefix="leanctx-replay-") as base:
        pol = [NoCache(), Peer(), Ours(), Oracle()]
        t0 = time.perf_counter()
        Engine(base, pol).run(events)
        elapsed = time.perf_counter() - t0
    by = {p.name: p for p in pol}
    none_t, orc_t = by["no cache"].tokens, by["oracle"].tokens
    room = max(1, none_t - orc_t)
    return {
        "scenario": name,
        "reads": by["ours"].reads,
        "tokens": {p.name: p.tokens for p in pol},
        "by_agent": {p.name: dict(p.by_agent) for p in pol},
        # per host agent and reader ("claude/builtin"): tokens delivered, reads, wrong answers
        "by_reader": {p.name: {f"{a}/{r}": n for (a, r), n in p.by_reader.items()} for p in pol},
        "reads_by_reader": {f"{a}/{r}": n for (a, r), n in by["ours"].reads_by.items()},
        "wrong_by_reader": {p.name: {f"{a}/{r}": n for (a, r), n in p.wrong_by.items()} for p in pol},
        "kinds": {p.name: dict(p.kinds) for p in pol},
        "fraction_of_oracle": {p.name: (none_t - p.tokens) / room for p in pol},
        "wrong": {p.name: p.wrong for p in pol},
        "wrong_raw": {p.name: p.wrong_raw for p in pol},
        "wrong_examples": {p.name: p.wrong_examples for p in pol if p.wrong},
        "ours_short_of_oracle": dict(by["ours"].why),
        "seconds": elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--trace", action="append", default=[], help="a recorded trace (.jsonl); repeatable")
    ap.add_argument("--no-recorded", action="store_true", help="skip the traces recorded from e2e runs in bench/traces/")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    rows = []
    for i, (name, gen) in enumerate(SCENARIOS):
        rows.append(run(name, gen(random.Random(args.seed * 1000 + i), args.scale)))
    recorded = [] if args.no_recorded else sorted(glob.glob(os.path.join(TRACES, "*.jsonl")))
    for path in recorded + args.trace:
        rows.append(run(f"recorded: {os.path.basename(path)[:-6]}", load_trace(path)))

    total = {k: sum(r["tokens"][k] for r in rows) for k in rows[0]["tokens"]}
    wrong_raw = {k: sum(r["wrong_raw"][k] for r in rows) for k in total}
    room = max(1, total["no cache"] - total["oracle"])
    summary = {
        **tokens.report(),  # tokenizer, tokens_exact, tokenizer_note, exact_counts
        "seed": args.seed,
        "rows": rows,
        "total_tokens": total,
        "total_fraction_of_oracle": {k: (total["no cache"] - v) / room for k, v in total.items()},
        "total_wrong": {k: sum(r["wrong"][k] for r in rows) for k in total},
        # a wrong stub is not a saving: the caller lacks those bytes and must fetch them again
        "total_fraction_of_oracle_wrong_refetched": {
            k: (total["no cache"] - v - wrong_raw[k]) / room for k, v in total.items()},
    }
    # per host: tokens each policy delivered to that host's reads, over every scenario and trace
    agents: dict[str, Counter] = {}
    for r in rows:
        for pname, per in r["by_agent"].items():
            for agent, n in per.items():
                agents.setdefault(agent, Counter())[pname] += n
    summary["by_host"] = {
        agent: {"tokens": dict(c), "ours_of_oracle": (c["no cache"] - c["ours"]) / max(1, c["no cache"] - c["oracle"])}
        for agent, c in sorted(agents.items())}
    # per host and reader (ctx_read, the host's built-in reader, a shell read), same run
    readers: dict[str, Counter] = {}
    for r in rows:
        for pname, per in r["by_reader"].items():
            for key, n in per.items():
                readers.setdefault(key, Counter())[pname] += n
        for key, n in r["reads_by_reader"].items():
            readers.setdefault(key, Counter())["reads"] += n
        for pname, per in r["wrong_by_reader"].items():
            for key, n in per.items():
                readers.setdefault(key, Counter())[f"wrong {pname}"] += n
    summary["by_host_reader"] = {
        key: {"reads": c["reads"], "tokens": {k: c[k] for k in total},
              "wrong": {k: c[f"wrong {k}"] for k in total},
              "ours_of_oracle": (c["no cache"] - c["ours"]) / max(1, c["no cache"] - c["oracle"]),
              "peer_of_oracle": (c["no cache"] - c["peer"]) / max(1, c["no cache"] - c["oracle"])}
        for key, c in sorted(readers.items())}
    why: Counter = Counter()
    for r in rows:
        why.update(r["ours_short_of_oracle"])
    summary["ours_short_of_oracle"] = dict(why.most_common())
    # the part of the gap the rules themselves mandate (no per-call identity: the caller cannot
    # be told apart), separated from what the cache could still do better
    mandated = sum(v for k, v in why.items() if k.startswith("withheld:"))
    summary["ours_fraction_outside_mandated_withholding"] = (total["no cache"] - total["ours"] + mandated) / room
    hooked = [r for r in rows if r["scenario"] not in HOOKLESS]
    htot = {k: sum(r["tokens"][k] for r in hooked) for k in total}
    hroom = max(1, htot["no cache"] - htot["oracle"])
    summary["hooked_fraction_of_oracle"] = {k: (htot["no cache"] - v) / hroom for k, v in htot.items()}
    cli = next(r for r in rows if r["scenario"].startswith("concurrent CLI"))
    outside = summary["ours_fraction_outside_mandated_withholding"]
    summary["targets"] = {
        "ours: 0 wrong stubs": summary["total_wrong"]["ours"] == 0,
        "ahead of the peer on concurrent CLI sessions": cli["tokens"]["ours"] < cli["tokens"]["peer"],
        "ours >= 0.95 of oracle savings where the rules allow a stub": outside >= 0.95,
    }
    # reported, not pass/fail: these include what the rules withhold by design (a caller no
    # hook identifies; several chats live on one Cursor process), which the oracle ignores
    summary["reported"] = {
        "ours of oracle savings, hosts running our hooks": summary["hooked_fraction_of_oracle"]["ours"],
        "ours of oracle savings, every scenario": summary["total_fraction_of_oracle"]["ours"],
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0 if all(summary["targets"].values()) else 1

    print(f"cache_replay: seed {args.seed}, scale {args.scale}, tokenizer {summary['tokenizer']}")
    print(summary["tokenizer_note"] + (f"; for exact counts: {summary['exact_counts']}" if summary["exact_counts"] else ""))
    print("tokens delivered per policy; 'x of oracle' = savings as a fraction of the oracle's savings")
    head = f"{'scenario':46} {'reads':>5} {'no cache':>9} {'peer':>8} {'ours':>8} {'oracle':>8}  {'peer x':>6} {'ours x':>6}  {'wrong peer/ours':>15}"
    print(head)
    print("-" * len(head))
    for r in rows:
        t, f, w = r["tokens"], r["fraction_of_oracle"], r["wrong"]
        print(f"{r['scenario'][:46]:46} {r['reads']:5d} {t['no cache']:9d} {t['peer']:8d} {t['ours']:8d} {t['oracle']:8d}"
              f"  {f['peer']:6.3f} {f['ours']:6.3f}  {w['peer']:>7d} / {w['ours']:<5d}")
    t, f, w = summary["total_tokens"], summary["total_fraction_of_oracle"], summary["total_wrong"]
    print("-" * len(head))
    print(f"{'total':46} {sum(r['reads'] for r in rows):5d} {t['no cache']:9d} {t['peer']:8d} {t['ours']:8d} {t['oracle']:8d}"
          f"  {f['peer']:6.3f} {f['ours']:6.3f}  {w['peer']:>7d} / {w['ours']:<5d}")
    adj = summary["total_fraction_of_oracle_wrong_refetched"]
    print(f"{'total, each wrong stub re-fetched in full':46} {'':5} {'':9} {'':8} {'':8} {'':8}  {adj['peer']:6.3f} {adj['ours']:6.3f}")
    hk = summary["hooked_fraction_of_oracle"]
    print(f"{'total, hosts running our hooks (all but one)':46} {'':5} {'':9} {'':8} {'':8} {'':8}  {hk['peer']:6.3f} {hk['ours']:6.3f}")
    print(f"{'ours, not counting rule-mandated withholding':46} {'':5} {'':9} {'':8} {'':8} {'':8}  {'':6} "
          f"{summary['ours_fraction_outside_mandated_withholding']:6.3f}")
    print()
    print("per host (every scenario and trace; 'none' = a host without our hooks):")
    print(f"  {'host':10} {'no cache':>9} {'ours':>8} {'oracle':>8}  {'ours x':>6}")
    for agent, h in summary["by_host"].items():
        t = h["tokens"]
        print(f"  {agent:10} {t.get('no cache', 0):9d} {t.get('ours', 0):8d} {t.get('oracle', 0):8d}  {h['ours_of_oracle']:6.3f}")
    print()
    print("per host and reader (ctx_read; builtin = the host's own file reader; shell = cat/sed/head/tail/nl):")
    print(f"  {'host/reader':18} {'reads':>5} {'no cache':>9} {'peer':>8} {'ours':>8} {'oracle':>8}  {'peer x':>6} {'ours x':>6}"
          f"  {'wrong peer/ours/oracle':>22}")
    for key, h in summary["by_host_reader"].items():
        t, w = h["tokens"], h["wrong"]
        print(f"  {key:18} {h['reads']:5d} {t['no cache']:9d} {t['peer']:8d} {t['ours']:8d} {t['oracle']:8d}"
              f"  {h['peer_of_oracle']:6.3f} {h['ours_of_oracle']:6.3f}  {w['peer']:>8d} / {w['ours']} / {w['oracle']}")
    print()
    print("where ours sent more than the oracle (extra tokens, by reason; 'withheld:' = mandated by the gate):")
    for reason, extra in summary["ours_short_of_oracle"].items():
        print(f"  {extra:8d}  {reason}")
    for r in rows:
        for pol, ex in r["wrong_examples"].items():
            print(f"  wrong ({pol}, {r['scenario']}): {ex[0]}")
    print()
    for target, ok in summary["targets"].items():
        print(f"  [{'ok' if ok else 'MISS'}] {target}")
    for what, value in summary["reported"].items():
        print(f"  [{'>=0.95' if value >= 0.95 else '<0.95 '}] {what}: {value:.3f} (includes the withholding the rules mandate)")
    return 0 if all(summary["targets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
