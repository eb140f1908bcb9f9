"""Ground truth for the read cache: what each context really holds, and helpers to simulate hosts.

Used by the property test (tests/cache) and by bench/cache_replay.py; nothing in the service
imports it.

- `Truth` knows, per context (a conversation, or a subagent's own context), which spans of which
  version (fingerprint) it received under which NAME. `violation()` says whether a response claims
  bytes the context does not hold (a wrong stub / pointer / diff); `apply()` folds a response into
  what the context holds.

  What counts as wrong (names and identity; conservative: any doubt makes the answer wrong, so a
  cache must withhold):
  - A name is a path as the model used it: the requested path made absolute against the
    conversation's working directory and normalised lexically (`os.path.normpath`), symlinks NOT
    resolved. A full answer carries no name of its own (it is the file's text), so the model knows
    those bytes only under the name it asked for; a re-attached file (carry) under the path the
    host wrote.
  - A stub, pointer or diff speaks of the `path` it shows. An absolute one is that name; a relative
    one is relative to the conversation's workspace root, and is a name only while the
    conversation has exactly one outermost root (every root it was ever given counts): with two
    (Cursor `workspace_roots`, a cwd outside the first root) `src/x.py` could be either, and the
    answer is wrong whatever it claims.
  - It is right only if the context holds, under the name it speaks of, the exact bytes it claims
    (fingerprint and spans) and those are the current bytes. So a read through a symlink or a
    hard link of a file the conversation read under another name is not held (another name), a
    symlink retargeted or a file renamed over is held only if the bytes are identical, and
    mtimes never matter.
  - Only the LATEST version the context received under a name counts: once it received other
    bytes under that name (an edit, a retargeted symlink, a rename over it), an older version is
    no longer "the copy that was sent earlier", even if the file goes back to it (A -> B -> A).
  - A re-attached file is credited exactly as attached: a whole file as the attached text (its
    own fingerprint, which may differ from the disk's); a range as its exact lines at their line
    numbers, which count when the conversation next reads that name if they are then the file's
    lines there (those spans of the version on disk then; the file may have changed elsewhere);
    nothing else.
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
from leanctx.cache.paths import ReadError, fingerprint, line_starts, load, real_roots, resolve
from leanctx.cache.readcache import DIFF_RATIO, render_diff, window_of


SAME_NAME = object()  # violation(): the answer speaks of the name the read asked for


def name_of(path: str, cwd: str) -> str:
    """The name a read of `path` uses: absolute against `cwd`, lexically normalised, symlinks kept."""
    return os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))


def outer_roots(roots) -> list[str]:
    rr = list(dict.fromkeys(os.path.normpath(r) for r in roots))
    return [r for r in rr if not any(o != r and (r + os.sep).startswith(o.rstrip(os.sep) + os.sep) for o in rr)]


def spoken_name(shown: str | None, roots) -> str | None:
    """The name an answer's `path` stands for, given every root the conversation was given: an
    absolute path is itself; a relative one is a name only under exactly one outermost root."""
    if not shown:
        return None
    if os.path.isabs(shown):
        return os.path.normpath(shown)
    outer = outer_roots(roots)
    return os.path.normpath(os.path.join(outer[0], shown)) if len(outer) == 1 else None


def shown_name(name: str, roots) -> str:
    """How the oracle shows a name: relative to the one outermost root holding it, else absolute."""
    outer = outer_roots(roots)
    if len(outer) == 1 and (name + os.sep).startswith(outer[0].rstrip(os.sep) + os.sep) and name != outer[0]:
        return os.path.relpath(name, outer[0])
    return name


class Truth:
    def __init__(self) -> None:
        # ctx -> real path -> fingerprint -> merged spans (empty file: [(0, 0)] marks "held")
        self.ctx: dict[str, dict[str, dict[str, list]]] = {}
        self.last_whole: dict[tuple[str, str], str] = {}
        self.carried: dict[tuple[str, str], list] = {}  # (ctx, name) -> [(start, count, text)] re-attached ranges
        # (ctx, name) -> (fingerprint, window) of the last built-in/shell read refused there (a
        # stub, pointer or diff in its place), until the content comes or the context is lost
        self.refused: dict[tuple[str, str], tuple] = {}

    def clear(self, ctx: str) -> None:
        """The context lost everything (compaction, /clear, a subagent that ended)."""
        self.ctx.pop(ctx, None)
        for k in [k for k in self.refused if k[0] == ctx]:
            del self.refused[k]
        for k in [k for k in self.last_whole if k[0] == ctx]:
            del self.last_whole[k]
        for k in [k for k in self.carried if k[0] == ctx]:
            del self.carried[k]

    def copy(self, src: str, dst: str) -> None:
        """dst starts holding exactly what src holds (a session resumed in a second process)."""
        self.clear(dst)
        self.ctx[dst] = {r: {f: list(s) for f, s in per.items()} for r, per in self.ctx.get(src, {}).items()}
        for (c, real), fp in list(self.last_whole.items()):
            if c == src:
                self.last_whole[(dst, real)] = fp
        for (c, real), got in list(self.carried.items()):
            if c == src:
                self.carried[(dst, real)] = list(got)
        for (c, real), got in list(self.refused.items()):
            if c == src:
                self.refused[(dst, real)] = got

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
        self._latest_only(ctx, real, per, fp)
        per[fp] = rng.merge(per.get(fp, []) + [tuple(s) for s in spans])
        if nlines == 0 or rng.covers(per[fp], (1, nlines)):
            self.last_whole[(ctx, real)] = fp

    # -- re-attached ranges (carry) ----------------------------------------------------------------
    def carry_range(self, ctx: str, name: str, start: int, count: int, text: str) -> None:
        """The host put lines start..start+count-1 of `name` into the context, as `text` (the
        lines joined, without the last one's newline, as Claude Code attaches them)."""
        self.carried.setdefault((ctx, name), []).append((start, count, text))

    def settle_carried(self, ctx: str, name: str, now: str | None) -> None:
        """Before the context's first read of `name` since its ranges were re-attached: each range
        whose lines are the file's lines now (`now`: the file's text, None if unreadable) is held
        as those spans of this version; the rest never will be."""
        got = self.carried.pop((ctx, name), None)
        if not got or now is None:
            return
        starts = line_starts(now)
        n = len(starts)
        data = now.encode("utf-8", "surrogatepass")
        fp = fingerprint(data)
        for start, count, text in got:
            end = start + count - 1
            if count < 1 or start < 1 or end > n:
                continue
            a, b = starts[start - 1], (starts[end] if end < n else len(now))
            lines = now[a:b]
            if (lines[:-1] if lines.endswith("\n") else lines) == text:
                self.deliver(ctx, name, fp, [(start, end)], n)

    # -- names: the latest version under a name is the only one held (see the module docstring) --
    def _latest_only(self, ctx: str, name: str, per: dict, fp: str) -> None:
        """Receiving `fp` under `name` replaces whatever other version the context had under it."""
        for old in [f for f in per if f != fp]:
            del per[old]
        if self.last_whole.get((ctx, name)) not in (None, fp):
            del self.last_whole[(ctx, name)]

    def received_other(self, ctx: str, name: str, keep_fp: str | None) -> None:
        """The context received under `name` bytes that are not a version's lines (a built-in or
        shell read's output cut, trimmed or stale): no version but `keep_fp` (the one those bytes
        are part of, if any) is the latest copy it holds under that name any more."""
        per = self.ctx.get(ctx, {}).get(name)
        if per is None:
            return
        for old in [f for f in per if f != keep_fp]:
            del per[old]
        if self.last_whole.get((ctx, name)) not in (None, keep_fp):
            del self.last_whole[(ctx, name)]

    def violation(self, ctx: str, real: str, result: dict, base_lines: int | None = None,
                  spoken: object = SAME_NAME) -> str | None:
        """Why `result` is wrong for `ctx` (it presumes bytes the context does not hold), or None.
        `real` is the name the read asked for; `spoken` the name the answer speaks of (default:
        the same; None: the answer's name is ambiguous, see spoken_name)."""
        kind = result.get("kind")
        if kind not in ("stub", "pointer", "diff"):
            return None
        if spoken is None:
            return f"{kind} names {result.get('path')!r}, which is ambiguous in {ctx} (several workspace roots)"
        if spoken is not SAME_NAME:
            real = spoken
        claims = result.get("claims") or {}
        fp, spans = claims.get("fingerprint"), [tuple(s) for s in claims.get("spans") or []]
        if kind == "diff":
            if fp not in self.ctx.get(ctx, {}).get(real, {}) or not self.holds(ctx, real, fp, spans):
                return f"diff against a version {ctx} does not hold whole"
            return None
        if not spans or not self.holds(ctx, real, fp, spans):
            return f"{kind} for {result.get('path')} {spans} that {ctx} does not hold"
        return None

    def apply(self, ctx: str, real: str, result: dict, host: str | None = None, reader: str = "ctx_read") -> None:
        """Fold `result` into what `ctx` holds. `host` (the agent's name) hands its model only
        answers within its limit whole (leanctx.cache.hostcaps, measured on the real CLIs; for
        `reader`: ctx_read, the host's own reader, its shell); a longer one reaches the model
        cut, so it delivers nothing. None: every answer arrives whole.
        A built-in or shell read that ran is folded in as a "full" result with the exact lines
        the model received (no fingerprint when it received anything else: nothing held)."""
        kind = result.get("kind")
        fp, n = result.get("fingerprint"), result.get("lines", 0)
        window = tuple(result["window"]) if result.get("window") else None
        if kind == "error" or fp is None:
            return
        if host is not None and not hostcaps.passes_whole(host, result.get("text") or "", reader):
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

    def read(self, ctx: str, roots, cwd: str | None, path: str, start_line=None, end_line=None, fresh=False,
             hint: str = stubs.FRESH) -> tuple[str, dict]:
        """(the name read, the answer): what the context holds is looked up under the name the
        read asks for, and the answer shows that name (see shown_name). `hint`: the stubs'
        closing words (a built-in or shell read's gate words them as ReadCache does)."""
        rr = real_roots(roots)
        try:
            real, _rel = resolve(path, rr, (), cwd)
            name = name_of(path, cwd or rr[0])
            rel = shown_name(name, rr)
            snap = load(real, rel, self.max_file_bytes, rr)
            win = window_of(snap.nlines, start_line, end_line)
        except ReadError as exc:
            return "", {"kind": "error", "text": exc.message, "tokens_raw": 0, "tokens_sent": 0}
        real = name
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
                s = stubs.stub(rel, n, None if whole else win, hint)
                if tokens.count(s) < traw:
                    res.update(kind="stub", text=s, claims={"fingerprint": snap.fp, "spans": [list(win)]})
            elif have and self.dedup:
                covered, new = rng.plan(win, have)
                if covered:
                    sections = [(sp, snap.slice(*sp)) for sp in new]
                    folded = sum(len(x) for _, x in sections) < rng.MIN_DELTA_CHARS
                    p = stubs.pointer(rel, n, win, covered, sections, folded, hint)
                    if tokens.count(p) < traw:
                        res.update(kind="pointer", text=p, claims={"fingerprint": snap.fp, "spans": [list(c) for c in covered]})
            if res["kind"] == "full" and whole:
                base = t.last_whole.get((ctx, real))
                if base and base != snap.fp and base in self.contents:
                    d = render_diff(rel, self.contents[base], snap.text, n, hint)
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

    host_agent = agents.get(agent)
    ev = host_agent.normalize(event, payload)
    if not ev.conversation_id:
        return None
    if ev.kind == "pre_tool":
        # our read gate is wired to the pre-tool event for ctx_read and, on a host that gates its
        # own readers, for those tools: it notes the call when it is a read it can name
        if (ev.tool_name or "").endswith("leanctx__ctx_read"):
            return note_read_call(data_dir, ev, ts, host)
        # (as hooks/readgate.py: the host module's ask may set the call's id, on a host whose
        # payloads name none)
        if ev.tool_name in host_agent.builtin_read_tools and host_agent.builtin_read_ask(ev) is not None \
                and isinstance(ev.tool_use_id, str):
            return note_read_call(data_dir, ev, ts, host)
        return None
    if ev.kind == "post_tool":  # the post-tool hook credits a built-in read; it publishes nothing
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

# timing traces: CodeBuddy Code fires Claude Code's event names (its read gate notes each call,
# but no call id reaches the MCP server: a replay host with "call_ids": false)
EVENTS["codebuddy"] = dict(EVENTS["claude"])


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


def read_gate(data_dir: str, host: FakeHost, conversation: str, sub: str | None, call_id: str, cwd: str, ts: float,
              tool_name: str = "mcp__leanctx__ctx_read", tool_input: dict | None = None) -> str | None:
    """The read gate's pre-tool event for one ctx_read call `call_id` by `conversation` (or its
    subagent `sub`), in the host's own payload shape (Claude Code's PreToolUse); or for one of
    the host's own readers (`tool_name`, `tool_input`: Claude Code's Read or Bash)."""
    extra: dict = {"tool_name": tool_name, "tool_input": dict(tool_input or {}), "tool_use_id": call_id}
    if sub:
        extra.update(agent_id=sub, agent_type="general-purpose")
    return publish_event(data_dir, host.agent, "PreToolUse", payload(host.agent, "PreToolUse", conversation, cwd, **extra),
                         host.as_host(), ts)
