"""Ground truth for the read cache: what each context really holds, and helpers to simulate hosts.

Used by the property test (tests/cache) and by bench/cache_replay.py; nothing in the service
imports it.

- `Truth` knows, per context (a conversation, or a subagent's own context), which spans of which
  version (fingerprint) of which file it received. `violation()` says whether a response claims
  bytes the context does not hold (a wrong stub / pointer / diff); `apply()` folds a response into
  what the context holds.
- `OracleCache` is the best any cache could do with perfect knowledge: it serves a stub, pointer
  or diff whenever the truth allows it (same renderings and thresholds as ReadCache, so tokens are
  comparable), never needs hook records, never forgets across restarts, ignores mtime. The caller
  folds each response into the truth with `Truth.apply`.
- `publish_event()` writes a real conversation record exactly as the hook does
  (`leanctx.hooks.publish.apply_event` on the host's normalized payload), with the host process
  and the time given explicitly, so a test or replay can play several host processes on a
  virtual clock.
"""

from __future__ import annotations

import os

from leanctx.cache import dedup as rng
from leanctx.cache import hostcaps
from leanctx.cache import stubs, tokens
from leanctx.cache.paths import ReadError, line_starts, load, real_roots, resolve
from leanctx.cache.readcache import DIFF_RATIO, render_diff, window_of


class Truth:
    def __init__(self) -> None:
        # ctx -> real path -> fingerprint -> merged spans (empty file: [(0, 0)] marks "held")
        self.ctx: dict[str, dict[str, dict[str, list]]] = {}
        self.last_whole: dict[tuple[str, str], str] = {}

    def clear(self, ctx: str) -> None:
        """The context lost everything (compaction, /clear, a subagent that ended)."""
        self.ctx.pop(ctx, None)
        for k in [k for k in self.last_whole if k[0] == ctx]:
            del self.last_whole[k]

    def copy(self, src: str, dst: str) -> None:
        """dst starts holding exactly what src holds (a session resumed in a second process)."""
        self.clear(dst)
        self.ctx[dst] = {r: {f: list(s) for f, s in per.items()} for r, per in self.ctx.get(src, {}).items()}
        for (c, real), fp in list(self.last_whole.items()):
            if c == src:
                self.last_whole[(dst, real)] = fp

    def spans(self, ctx: str, real: str, fp: str) -> list:
        return self.ctx.get(ctx, {}).get(real, {}).get(fp, [])

    def holds(self, ctx: str, real: str, fp: str, spans: list) -> bool:
        have = self.spans(ctx, real, fp)
        return all(rng.covers(have, tuple(s)) for s in spans)

    def holds_file(self, ctx: str, real: str, fp: str, nlines: int) -> bool:
        if nlines == 0:
            return fp in self.ctx.get(ctx, {}).get(real, {})
        return self.holds(ctx, real, fp, [(1, nlines)])

    def deliver(self, ctx: str, real: str, fp: str, spans: list, nlines: int) -> None:
        per = self.ctx.setdefault(ctx, {}).setdefault(real, {})
        per[fp] = rng.merge(per.get(fp, []) + [tuple(s) for s in spans])
        if nlines == 0 or rng.covers(per[fp], (1, nlines)):
            self.last_whole[(ctx, real)] = fp

    def violation(self, ctx: str, real: str, result: dict, base_lines: int | None = None) -> str | None:
        """Why `result` is wrong for `ctx` (it presumes bytes the context does not hold), or None."""
        kind = result.get("kind")
        if kind not in ("stub", "pointer", "diff"):
            return None
        claims = result.get("claims") or {}
        fp, spans = claims.get("fingerprint"), [tuple(s) for s in claims.get("spans") or []]
        if kind == "diff":
            if fp not in self.ctx.get(ctx, {}).get(real, {}) or not self.holds(ctx, real, fp, spans):
                return f"diff against a version {ctx} does not hold whole"
            return None
        if not spans or not self.holds(ctx, real, fp, spans):
            return f"{kind} for {result.get('path')} {spans} that {ctx} does not hold"
        return None

    def apply(self, ctx: str, real: str, result: dict, host: str | None = None) -> None:
        """Fold `result` into what `ctx` holds. `host` (the agent's name) hands its model only
        answers within its limit whole (leanctx.cache.hostcaps, measured on the real CLIs); a
        longer one reaches the model cut, so it delivers nothing. None: every answer arrives whole."""
        kind = result.get("kind")
        fp, n = result.get("fingerprint"), result.get("lines", 0)
        window = tuple(result["window"]) if result.get("window") else None
        if kind == "error" or fp is None:
            return
        if host is not None and not hostcaps.passes_whole(host, result.get("text") or ""):
            return
        if kind == "full":
            self.deliver(ctx, real, fp, [window] if window else [], n)
        elif kind == "pointer":
            held = [tuple(s) for s in result["claims"]["spans"]]
            self.deliver(ctx, real, fp, rng.subtract(window, held), n)
        elif kind == "diff":
            self.deliver(ctx, real, fp, [(1, n)] if n else [], n)


class OracleCache:
    """Perfect knowledge: the truth decides, with ReadCache's renderings and thresholds."""

    def __init__(self, truth: Truth, max_file_bytes: int = 2_000_000, dedup: bool = True) -> None:
        self.truth = truth
        self.max_file_bytes = max_file_bytes
        self.dedup = dedup
        self.contents: dict[str, str] = {}

    def read(self, ctx: str, roots, cwd: str | None, path: str, start_line=None, end_line=None, fresh=False) -> tuple[str, dict]:
        rr = real_roots(roots)
        try:
            real, rel = resolve(path, rr, (), cwd)
            snap = load(real, rel, self.max_file_bytes, rr)
            win = window_of(snap.nlines, start_line, end_line)
        except ReadError as exc:
            return "", {"kind": "error", "text": exc.message, "tokens_raw": 0, "tokens_sent": 0}
        n = snap.nlines
        whole = win is None or win == (1, n)
        raw = snap.text if whole else snap.slice(*win)
        traw = tokens.count(raw)
        self.contents[snap.fp] = snap.text
        res = {"kind": "full", "text": raw, "path": rel, "lines": n, "fingerprint": snap.fp,
               "window": list(win) if win else None, "tokens_raw": traw}
        t = self.truth
        if not fresh and n:
            have = t.spans(ctx, real, snap.fp)
            if rng.covers(have, win):
                s = stubs.stub(rel, n, None if whole else win)
                if tokens.count(s) < traw:
                    res.update(kind="stub", text=s, claims={"fingerprint": snap.fp, "spans": [list(win)]})
            elif have and self.dedup:
                covered, new = rng.plan(win, have)
                if covered:
                    sections = [(sp, snap.slice(*sp)) for sp in new]
                    folded = sum(len(x) for _, x in sections) < rng.MIN_DELTA_CHARS
                    p = stubs.pointer(rel, n, win, covered, sections, folded)
                    if tokens.count(p) < traw:
                        res.update(kind="pointer", text=p, claims={"fingerprint": snap.fp, "spans": [list(c) for c in covered]})
            if res["kind"] == "full" and whole:
                base = t.last_whole.get((ctx, real))
                if base and base != snap.fp and base in self.contents:
                    d = render_diff(rel, self.contents[base], snap.text, n)
                    old_n = len(line_starts(self.contents[base]))
                    if d is not None and tokens.count(d) < DIFF_RATIO * traw:
                        res.update(kind="diff", text=d, claims={"fingerprint": base, "spans": [[1, old_n]] if old_n else []})
        res["tokens_sent"] = traw if res["kind"] == "full" else tokens.count(res["text"])
        return real, res


# -- simulating hosts --------------------------------------------------------------------------


class FakeHost:
    """A host process as the hooks and the MCP server see it (pid + start ticks)."""

    def __init__(self, pid: int, ticks: int, agent: str, name: str | None = None) -> None:
        self.pid, self.ticks, self.agent, self.name = pid, ticks, agent, name or agent

    def as_host(self) -> dict:
        return {"pid": self.pid, "name": self.name, "start_ticks": self.ticks}


def publish_event(data_dir: str, agent: str, event: str, payload: dict, host: dict, ts: float) -> str | None:
    """What `leanctx.hooks.publish.publish` does for one hook event, with host and time given."""
    from leanctx import agents
    from leanctx.hooks.publish import (
        apply_event,
        note_read_call,
        now_iso,
        read_json,
        record_path,
        write_json_atomic,
    )

    ev = agents.get(agent).normalize(event, payload)
    if not ev.conversation_id:
        return None
    if ev.kind == "pre_tool":  # only our read gate is wired to a pre-tool event for ctx_read
        if (ev.tool_name or "").endswith("leanctx__ctx_read"):
            return note_read_call(data_dir, ev, ts, host)
        return None
    path = record_path(data_dir, ev.agent, ev.conversation_id)
    record = apply_event(read_json(path) or {}, ev, ts, host)
    write_json_atomic(path, record)
    write_json_atomic(
        os.path.join(data_dir, "active_transcript.json"),
        {"agent": ev.agent, "transcript_path": record.get("transcript_path"), "conversation_id": ev.conversation_id,
         "session_id": record.get("session_id"), "updated_at": now_iso(ts), "updated_ts": ts},
    )
    return path


def payload(agent: str, event: str, conversation: str, cwd: str, **extra: object) -> dict:
    """A host-shaped payload for `event` of `conversation` (Claude/Codex shape, or Cursor's)."""
    if agent == "cursor":
        p: dict = {"conversation_id": conversation, "generation_id": f"g-{conversation}", "hook_event_name": event,
                   "workspace_roots": [cwd], "transcript_path": None}
        if event == "sessionStart":
            p["session_id"] = conversation
        if "subagent_id" in extra:
            p["parent_conversation_id"] = conversation
    else:
        p = {"session_id": conversation, "transcript_path": f"/tmp/transcripts/{conversation}.jsonl", "cwd": cwd,
             "hook_event_name": event}
    p.update(extra)
    return p


EVENTS = {
    # meaning -> host event name
    "claude": {"start": "SessionStart", "prompt": "UserPromptSubmit", "stop": "Stop", "compact": "PreCompact",
               "sub_start": "SubagentStart", "sub_stop": "SubagentStop", "end": "SessionEnd"},
    "codex": {"start": "SessionStart", "prompt": "UserPromptSubmit", "stop": "Stop", "compact": "PreCompact",
              "sub_start": "SubagentStart", "sub_stop": "SubagentStop", "end": "SessionEnd"},
    "cursor": {"start": "sessionStart", "prompt": "beforeSubmitPrompt", "stop": "stop", "compact": "preCompact",
               "sub_start": "subagentStart", "sub_stop": "subagentStop", "end": "sessionEnd"},
}


def hook(data_dir: str, host: FakeHost, meaning: str, conversation: str, cwd: str, ts: float, **extra: object) -> str | None:
    """Publish one hook event by meaning (start/prompt/stop/compact/sub_start/sub_stop/end)."""
    agent = host.agent
    event = EVENTS[agent][meaning]
    if meaning in ("sub_start", "sub_stop") and "sub" in extra:
        sub = extra.pop("sub")
        if agent == "cursor":
            extra["subagent_id"] = sub
        else:
            extra.update(agent_id=sub, agent_type="general-purpose")
    return publish_event(data_dir, agent, event, payload(agent, event, conversation, cwd, **extra), host.as_host(), ts)


def read_gate(data_dir: str, host: FakeHost, conversation: str, sub: str | None, call_id: str, cwd: str, ts: float) -> str | None:
    """The read gate's pre-tool event for one ctx_read call `call_id` by `conversation` (or its
    subagent `sub`), in the host's own payload shape (Claude Code's PreToolUse)."""
    extra: dict = {"tool_name": "mcp__leanctx__ctx_read", "tool_input": {}, "tool_use_id": call_id}
    if sub:
        extra.update(agent_id=sub, agent_type="general-purpose")
    return publish_event(data_dir, host.agent, "PreToolUse", payload(host.agent, "PreToolUse", conversation, cwd, **extra),
                         host.as_host(), ts)
