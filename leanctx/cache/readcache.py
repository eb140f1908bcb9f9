"""The conversation-scoped read cache: full content, `[unchanged]` stubs, range pointers, diffs.

One decision point (lean-ctx #1128: never a second, ungated stub path). For a read of `path`
(optionally a window `start_line..end_line`) by a conversation `scope`:

- The file is resolved and checked (paths.py), then read once: its fingerprint
  (`<size>:<blake2b>` of the bytes just read), size, mtime and line count are facts of THIS read,
  so "hash verified" is always true of what we compare.
- A **stub** needs ALL of: a known conversation (`scope.key`), `scope.stub_ok` (fresh-sampled by
  the service), not `fresh=True`, a holding of this conversation for this name (the path as
  asked, symlinks not resolved: paths.named; the model knows a full answer's bytes only by it) with the same
  compaction counter, the same fingerprint, the same size and the same mtime (`!=`, so a
  backwards mtime is a change too), and the whole requested range inside what it holds.
  The stub must also be smaller than the content it replaces.
- **Range dedup** (unless `LEANCTX_DEDUP=0` / `dedup=False`): known conversation, `stub_ok`, not
  fresh, a holding at this compaction counter with the same fingerprint (CG-18's content gate: the
  bytes the held spans were sliced from; the mtime is not part of it), and the window only partly
  held -> covered runs of >= 8 lines become one pointer, only the new lines are sent; when the new
  text is under 160 characters it follows the pointer line directly.
- **Diff**: the conversation holds the whole file at this compaction counter, the file changed on
  disk, the request is for the whole file, and the unified diff is under 0.6x the file's tokens.
  The old text must still be in memory (never after a restart) — except when the bytes did not
  change at all and only the mtime moved (touch, checkout): then the diff is empty and says so.
- Otherwise **full** content (the window's lines).

What a conversation holds is recorded only for reads whose scope is known and `stub_ok` (a read
while a subagent window is open, or while several chats share the host, may have gone to someone
else). Holdings: per conversation key, per name: fingerprint, size, mtime, compaction
counter at delivery, line count, whole-or-ranges (ranges coalesced, at most 24 per file, smallest
dropped first; at most 192 range-holding files per conversation and 4096 files in all, least
recently used dropped first; 1024 conversations). Every bound drops what is held, so it can only
under-report. After a compaction (the counter moved) nothing held before counts: everything is
re-sent once. The old text of whole files delivered is kept in memory for diffs, as UTF-8 bytes
(64 MB, LRU).
The index (index.py) persists holdings, never contents, and is saved by `save()` and, when
dirty, on the first read `autosave_s` (5 s) after the last save.

The result is a dict: kind ("full"|"stub"|"diff"|"pointer"|"error"), text, path (the name, relative
to the workspace root; absolute once the conversation has had two outermost roots), lines (of the whole file), tokens_raw (tokens of the requested content),
tokens_sent (tokens of `text`), tokenizer, fingerprint (of the file now), window ([start, end] or
None for an empty file), and for stub/pointer/diff `claims`: {"fingerprint", "spans"} — the bytes
the caller is presumed to hold (what the oracle test checks). Errors carry `code` (bad_path,
outside_roots, not_found, not_a_file, permission, too_large, binary, not_utf8, bad_range, io,
unstable, changed, unverified) and a `text` starting with "error: ".
"""

from __future__ import annotations

import difflib
import os
import re
import threading
import time
from collections import OrderedDict

from leanctx.cache import carry, hostcaps
from leanctx.cache import dedup as rng
from leanctx.cache import index as idx
from leanctx.cache import overhead, stubs, tokens
from leanctx.cache.copilotevents import CopilotEventsIndex
from leanctx.cache.rollout import RolloutIndex
from leanctx.cache.transcript import TranscriptIndex
from leanctx.hooks import hostproc
from leanctx.cache.paths import (
    FileSnap,
    ReadError,
    fingerprint,
    line_starts,
    load,
    named,
    real_roots,
    resolve,
)
from leanctx.cache.scope import Scope
from leanctx.cache.switches import switched_off

MAX_CONVERSATIONS = 1024
MAX_FILES_PER_CONVERSATION = 4096  # whole-file holdings (a stub costs one fingerprint each)
# partial (range) holdings per conversation: codegraph's bounds, 8 retained calls x 24 files each;
# with MAX_RANGES_PER_FILE = 24 spans per file (dedup.py), the least recently used go first
MAX_RANGE_FILES_PER_CONVERSATION = 8 * 24
MAX_ROOTS_SEEN = 64  # workspace roots remembered per conversation (for how answers name files)
MAX_CALLS_PER_HOLDING = 32  # deliveries remembered per holding; more: it can no longer be verified
MAX_TOKENIZER_NAMES = 8  # distinct tokenizers remembered behind the cumulative totals
CONTENT_BUDGET_BYTES = 64 << 20
DIFF_RATIO = 0.6
DIFF_MAX_LINES = 20000
CARRY_ENV = "LEANCTX_CARRY"  # 0: never credit files the host re-attached after a compaction
CARRY_AGENTS = ("claude",)  # hosts whose transcript format carry.py reads (verified on 2.1.197)
# A compact_boundary is this compaction's when written between the bump before it (PreCompact)
# and this one (SessionStart(compact)), give or take CARRY_SLACK_S; with no bump before it (the
# first compaction, PreCompact not wired), at most CARRY_MAX_BOUNDARY_AGE_S before.
CARRY_SLACK_S = 5.0
CARRY_MAX_BOUNDARY_AGE_S = 600.0
# Claude Code writes the boundary and its attachments to the transcript some time after the
# compaction (in one process: not before the turn's next reads, observed on 2.1.197), so the
# transcript is looked at again when it has grown, at most this many times per compaction.
CARRY_MAX_TRIES = 8
KINDS = ("full", "stub", "diff", "pointer", "error")
_PLURAL = {"full": "full", "stub": "stubs", "diff": "diffs", "pointer": "pointers", "error": "errors"}
EARLIER = "unattributed"  # reads counted by a version that did not tell readers apart
OLDER = "(older conversations)"  # the counts of conversations dropped from the per-conversation table
MAX_CHARGED = 4 * MAX_CONVERSATIONS  # contexts remembered as charged (one dropped is charged again)
MAX_STUBBED = 64  # stubs per conversation remembered for the re-read rule (oldest go first)
COUNTING = ("saved = raw - sent - re-read - overhead. raw: the tokens of what each read asked for (the file's "
            "lines, no line numbers); sent: what went to the model instead (content, stub, pointer, diff, "
            "refusal text); re-read: the tokens of a full read a stub caused (the same context read those "
            "unchanged bytes again after being told it held them: without leanctx that read would not have "
            "happened); overhead: our tool definition and read rule, charged once per context "
            "(a conversation or subagent in one host process, again after each compaction, and a host "
            "process that listed our tools but read nothing through us), counted like a file's tokens: "
            "once where they enter a context, not once per model request")


class Holding:
    __slots__ = ("calls", "cold", "compactions", "fp", "lines", "mtime_ns", "ranges", "size", "whole")

    def __init__(self, fp: str, size: int, mtime_ns: int, compactions: int, lines: int, whole: bool,
                 ranges: list, cold: bool = False, calls: tuple | None = None) -> None:
        self.fp, self.size, self.mtime_ns, self.compactions = fp, size, mtime_ns, compactions
        self.lines, self.whole, self.ranges, self.cold = lines, whole, ranges, cold
        # the host's ids of the calls whose answers delivered these bytes (None: unknown, so a
        # transcript cannot confirm them: see transcript.py)
        self.calls = calls

    def add_call(self, call: str | None) -> None:
        if self.calls is None or call is None or len(self.calls) >= MAX_CALLS_PER_HOLDING:
            self.calls = None
        elif call not in self.calls:
            self.calls = self.calls + (call,)

    def spans(self) -> list:
        return [(1, self.lines)] if self.whole and self.lines else list(self.ranges)

    def to_dict(self) -> dict:
        return {"fp": self.fp, "size": self.size, "mtime_ns": self.mtime_ns, "compactions": self.compactions,
                "lines": self.lines, "whole": self.whole, "ranges": [list(r) for r in self.ranges],
                "calls": list(self.calls) if self.calls is not None else None}


class _Conv:
    __slots__ = ("agent", "asks", "carried", "carried_boundary", "carry_tries", "gate_stubs", "held", "persist",
                 "roots", "stubbed", "used_ts")

    def __init__(self, agent: str | None, persist: bool) -> None:
        self.agent = agent
        self.held: OrderedDict[str, Holding] = OrderedDict()
        self.used_ts = 0.0
        self.persist = persist
        self.carried: int | None = None  # the compaction counter re-attached files were credited for
        self.carried_boundary: str | None = None  # the transcript's compact_boundary credited then
        self.carry_tries: tuple = ()  # (counter, transcript size, mtime, tries) of the last look
        self.roots: tuple = ()  # every workspace root (real) the conversation was given: see paths.named
        # name -> (fingerprint, window, compaction counter, asks then) of the built-in reader gate's
        # last refusal of a read of it: those lines asked for again soon after (AGAIN_WITHIN),
        # unchanged since, the reader runs instead (no loop)
        self.gate_stubs: dict[str, tuple] = {}
        self.asks = 0  # reads this context asked for (gate and ctx_read), in order
        # name -> (fingerprint, window, compaction counter, raw tokens, reader) of the last stub,
        # pointer or diff: a full read of those bytes in this context after it is one we caused
        self.stubbed: OrderedDict[str, tuple] = OrderedDict()


_READER_FIELDS = ("reads", "full", "stubs", "diffs", "pointers", "errors", "cold_stubs", "withheld", "tokens_raw",
                  "tokens_sent", "rereads", "tokens_reread")
_OVERHEAD_FIELDS = ("contexts", "tokens_overhead", "tokens_tool", "tokens_rule")


def _reader_bucket() -> dict:
    return dict.fromkeys(_READER_FIELDS, 0)


def _bucket() -> dict:
    """Counters of one scope (all, a host, a conversation): every read field also per reader
    (`by_reader`), which sum to it; the overhead fields belong to no reader."""
    return {**_reader_bucket(), **dict.fromkeys(_OVERHEAD_FIELDS, 0), "by_reader": {}}


def _merge(into: dict, b: dict, sign: int = 1) -> None:
    for f in (*_READER_FIELDS, *_OVERHEAD_FIELDS):
        into[f] += sign * b.get(f, 0)
    for r, rb in b.get("by_reader", {}).items():
        mine = into["by_reader"].setdefault(r, _reader_bucket())
        for f in _READER_FIELDS:
            mine[f] += sign * rb.get(f, 0)


def _loaded_bucket(b: object) -> dict:
    """A bucket from the index: unknown fields dropped, counts that no reader accounts for (an
    index from before readers were told apart) under EARLIER, so the readers still sum to it."""
    nb = _bucket()
    if not isinstance(b, dict):
        return nb
    for f in (*_READER_FIELDS, *_OVERHEAD_FIELDS):
        v = b.get(f, 0)
        nb[f] = int(v) if isinstance(v, int) and not isinstance(v, bool) else 0
    readers = b.get("by_reader")
    for r, rb in (readers.items() if isinstance(readers, dict) else ()):
        if isinstance(r, str) and 0 < len(r) <= 32 and isinstance(rb, dict):
            nb["by_reader"][r] = {f: int(rb.get(f, 0)) if isinstance(rb.get(f, 0), int) else 0 for f in _READER_FIELDS}
    rest = {f: nb[f] - sum(rb[f] for rb in nb["by_reader"].values()) for f in _READER_FIELDS}
    if any(rest.values()):
        earlier = nb["by_reader"].setdefault(EARLIER, _reader_bucket())
        for f, v in rest.items():
            earlier[f] += v
    return nb


def saved(b: dict) -> int:
    """Net tokens saved of a bucket (negative when we cost more than we saved)."""
    return b["tokens_raw"] - b["tokens_sent"] - b["tokens_reread"] - b.get("tokens_overhead", 0)


def _shown(b: dict) -> dict:
    """A bucket as reported: with tokens_saved (net of overhead) and each reader's (gross: the
    overhead belongs to no reader, so the readers' savings minus tokens_overhead is the total)."""
    out = {k: v for k, v in b.items() if k != "by_reader"}
    out["tokens_saved"] = saved(b)
    out["by_reader"] = {r: {**rb, "tokens_saved": saved(rb)} for r, rb in sorted(b["by_reader"].items())}
    return out


def _host_of(key: str | None) -> str | None:
    """`<pid>:<start ticks>` of the host process a conversation key names (a subagent's too)."""
    m = _HOST_OF.search(key or "")
    return f"{m.group(1)}:{m.group(2)}" if m else None


def _calls(v: object) -> tuple | None:
    if isinstance(v, list) and len(v) <= MAX_CALLS_PER_HOLDING and all(isinstance(c, str) and c for c in v):
        return tuple(v)
    return None


def split_lines(text: str) -> list[str]:
    starts = line_starts(text)
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]


def render_diff(rel: str, old: str, new: str, nlines: int, hint: stubs.Hints = stubs.FRESH) -> str | None:
    """The diff text we send for a changed file, or None when a diff is not worth computing."""
    a, b = split_lines(old), split_lines(new)
    if len(a) > DIFF_MAX_LINES or len(b) > DIFF_MAX_LINES:
        return None
    out = []
    for line in difflib.unified_diff(a, b, fromfile=f"a/{stubs.shown(rel)}", tofile=f"b/{stubs.shown(rel)}", n=3):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return stubs.diff_header(rel, nlines, hint) + "".join(out)


def window_of(n: int, start_line: object, end_line: object) -> tuple[int, int] | None:
    """The requested span of an n-line file (None: the file is empty), or ReadError."""
    for name, v in (("start_line", start_line), ("end_line", end_line)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ReadError("bad_range", f"{name} must be a positive line number, got {v!r}")
    if n == 0:
        if start_line not in (None, 1):
            raise ReadError("bad_range", f"start_line {start_line} is past the end of the file (it is empty)")
        return None
    s = start_line or 1
    e = min(end_line, n) if end_line is not None else n
    if s > n:
        raise ReadError("bad_range", f"start_line {s} is past the end of the file ({n} lines)")
    if e < s:
        raise ReadError("bad_range", f"end_line {end_line} is before start_line {s}")
    return (s, e)


READERS = ("ctx_read", "builtin", "shell")  # who reads: our tool, a host's own reader, a shell command
MAX_GATE_STUBS = 64  # refusals remembered per conversation for the no-loop rule (oldest go first)
# A refused read asked for again within this many reads of the same context (the refusal's own
# included: a model that issued several calls at once asks again in its next turn) is the model
# wanting the content; later, it is a read like any other, answered by the ledger
AGAIN_WITHIN = 4
MAX_BUILTIN_LINE_CHARS = 2000  # a longer line may reach the model cut short: never credited


def builtin_delivery_matches(text: str, window: tuple[int, int] | None, start_line: object, delivered: object) -> bool:
    """Is `delivered` exactly what a host's built-in reader gives for `window` of `text` now?
    Claude Code's Read (2.1.197: `tool_response.file.content`) numbers lines by splitting on
    "\n" (a final newline makes an empty last line) and joins the requested lines with "\n":
    the whole file is its text, a range is its lines without the last one's newline. Anything
    else (a cut line, another encoding, CRLF turned into LF, a stale copy) is not credited."""
    if window is None or not isinstance(delivered, str) or not delivered:
        return False
    if start_line is not None and start_line != window[0]:
        return False
    lines = text.split("\n")
    s, e = window
    want = "\n".join(lines[s - 1:e])
    if delivered != want and not (e == len(lines) - 1 and delivered == want + "\n"):
        return False
    return all(len(line) <= MAX_BUILTIN_LINE_CHARS for line in lines[s - 1:e])


def delivered_prefix(text: str, delivered: object) -> int | None:
    """k when `delivered` is exactly the first k lines of `text` and not all of them (as
    builtin_delivery_matches reads lines: a final newline after line k allowed), else None. A
    whole-file read whose output a host trimmed of its trailing blank lines (Gemini CLI's and
    Copilot CLI's shells do) or cut at a line's end still handed the model those k lines."""
    if not isinstance(delivered, str) or not delivered:
        return None
    body = delivered[:-1] if delivered.endswith("\n") else delivered
    k = body.count("\n") + 1
    lines = text.split("\n")
    last = len(lines) - 1 if text.endswith("\n") else len(lines)  # the file's line count
    if k >= last or not builtin_delivery_matches(text, (1, k), 1, body):
        return None
    return k


# `<agent>:<id>@<created_at>#<host pid>:<start ticks>`: a conversation's main context in one host
# process (a subagent's key goes on with `/agent:<id>`, an explicit scope's has no host)
_HOST_KEY = re.compile(r"^(.+)#(\d+):(\d+)$")
_HOST_OF = re.compile(r"#(\d+):(\d+)(?:/|$)")
MAX_DONORS = 4  # exited processes of one session asked about per read


def _exited(pid: int, ticks: int) -> bool:
    """True only when /proc shows that process gone (no entry, or the pid now started at another
    time); False when it runs, is a zombie, or /proc cannot say."""
    if hostproc.process_stat(os.getpid()) is None:
        return False  # no readable /proc: cannot tell
    st = hostproc.process_stat(pid)
    if st is not None:
        return st[2] != ticks
    return not os.path.lexists(f"/proc/{pid}")


class ReadCache:
    def __init__(self, state_dir: str | None, *, dedup: bool | None = None, max_file_bytes: int = 2_000_000,
                 allow: tuple[str, ...] = (), autosave_s: float | None = 5.0, clock=time.time,
                 carry: bool | None = None, exited=None) -> None:
        self.state_dir = str(state_dir) if state_dir else None
        # (pid, start ticks) -> has that host process exited? (tests and replays model their hosts)
        self.exited = exited or _exited
        if dedup is None:
            dedup = not switched_off(os.environ.get("LEANCTX_DEDUP"))
        self.dedup = bool(dedup)
        if carry is None:
            carry = not switched_off(os.environ.get(CARRY_ENV))
        self.carry = bool(carry)
        self.max_file_bytes = int(max_file_bytes)
        self.allow = real_roots(allow)
        self.autosave_s = autosave_s
        self.clock = clock
        self._lock = threading.RLock()
        self._convs: OrderedDict[str, _Conv] = OrderedDict()
        self.transcripts = TranscriptIndex()
        self.rollouts = RolloutIndex()  # Codex's log of the context (rollout.py)
        self.copilot_logs = CopilotEventsIndex()  # what Copilot CLI's calls delivered (copilotevents.py)
        # fingerprint -> the file's UTF-8 bytes, for diffs. Bytes, not str: a str with one emoji
        # takes 4 bytes a character (PEP 393), its UTF-8 about 1 (bench/daemon_memory.py).
        self._contents: OrderedDict[str, bytes] = OrderedDict()
        self._content_bytes = 0
        self._file_tokens: OrderedDict[str, int] = OrderedDict()
        self._roots_memo: dict[tuple, tuple] = {}
        self._stats = {"total": _bucket(), "by_agent": {}, "by_conversation": OrderedDict(), "withheld_reasons": {},
                       "older": _bucket()}
        # context key -> the compaction counter its overhead was last charged for
        self._charged: OrderedDict[str, int] = OrderedDict()
        # host process "<pid>:<ticks>" that listed our tools before any conversation of it was
        # known -> (the bucket key charged, its agent): its first conversation takes that charge over
        self._pending_hosts: OrderedDict[str, tuple] = OrderedDict()
        self._counted_with: set[str] = set()  # tokenizers behind the cumulative totals (runs differ)
        self._dirty = False
        self._replaced = False  # a holding replaced by another version since the last save
        self._saved_at = clock()
        self.quarantined: str | None = None
        self.save_errors = 0
        self.loaded_holdings = 0
        if self.state_dir:
            self._load()

    # -- persistence --------------------------------------------------------------------------
    def _load(self) -> None:
        doc, self.quarantined = idx.load(self.state_dir)
        for key, c in doc["conversations"].items():
            conv = _Conv(c["agent"], True)
            conv.used_ts = c["used_ts"]
            conv.carried_boundary = c.get("carried_boundary")
            conv.roots = tuple(c.get("roots") or ())
            for path, h in c["held"].items():
                conv.held[path] = Holding(h["fp"], h["size"], h["mtime_ns"], h["compactions"], h["lines"],
                                          h["whole"], h["ranges"], cold=True, calls=_calls(h.get("calls")))
                self.loaded_holdings += 1
            self._convs[key] = conv
        st = doc.get("stats") or {}
        try:
            for name in ("total", "older"):
                if isinstance(st.get(name), dict):
                    self._stats[name] = _loaded_bucket(st[name])
            for group in ("by_agent", "by_conversation"):
                for k, b in (st.get(group) or {}).items():
                    if isinstance(k, str):
                        self._stats[group][k] = _loaded_bucket(b)
            for k, e in (st.get("charged") or {}).items():
                if isinstance(k, str) and isinstance(e, int) and not isinstance(e, bool):
                    self._charged[k] = e
            for h, v in (st.get("pending_hosts") or {}).items():
                if isinstance(h, str) and isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v):
                    self._pending_hosts[h] = tuple(v)
        except (TypeError, ValueError, AttributeError):
            pass
        self._reconcile()
        names = st.get("counted_with")
        if isinstance(names, list):
            self._counted_with.update(n for n in names[:MAX_TOKENIZER_NAMES] if isinstance(n, str) and len(n) <= 64)
        elif self._stats["total"]["reads"] and doc.get("tokenizer"):
            self._counted_with.add(doc["tokenizer"][:64])  # an index from before counted_with

    def save(self) -> None:
        """Persist the index (holdings of persistable conversations, cumulative stats; never contents)."""
        if not self.state_dir:
            return
        with self._lock:
            convs = {}
            for key, c in self._convs.items():
                if not c.persist or not c.held:
                    continue
                convs[key] = {"agent": c.agent, "used_ts": c.used_ts,
                              "held": {p: h.to_dict() for p, h in c.held.items()}}
                if c.carried_boundary:
                    convs[key]["carried_boundary"] = c.carried_boundary
                if c.roots:
                    convs[key]["roots"] = list(c.roots)
            stats = {"total": self._stats["total"], "by_agent": self._stats["by_agent"], "older": self._stats["older"],
                     "by_conversation": dict(self._stats["by_conversation"]), "counted_with": sorted(self._counted_with),
                     "charged": dict(self._charged), "pending_hosts": {h: list(v) for h, v in self._pending_hosts.items()}}
            idx.save(self.state_dir, {"conversations": convs, "stats": stats, "tokenizer": tokens.name()})
            self._dirty = False
            self._saved_at = self.clock()

    def _maybe_autosave(self) -> None:
        if self.state_dir and self._dirty and self.autosave_s is not None and self.clock() - self._saved_at >= self.autosave_s:
            try:
                self.save()
            except OSError:
                self.save_errors += 1
                self._saved_at = self.clock()

    # -- bookkeeping ----------------------------------------------------------------------------
    def _roots(self, roots: tuple) -> tuple:
        r = self._roots_memo.get(roots)
        if r is None:
            if len(self._roots_memo) > 1024:
                self._roots_memo.clear()
            r = self._roots_memo[roots] = real_roots(roots)
        return r

    def _file_token_count(self, snap: FileSnap) -> int:
        with self._lock:
            n = self._file_tokens.get(snap.fp)
            if n is not None:
                self._file_tokens.move_to_end(snap.fp)
                return n
        n = tokens.count(snap.text)
        with self._lock:
            self._file_tokens[snap.fp] = n
            while len(self._file_tokens) > 16384:
                self._file_tokens.popitem(last=False)
        return n

    def _put_content(self, fp: str, text: str) -> None:
        if fp in self._contents:
            self._contents.move_to_end(fp)
            return
        data = text.encode("utf-8", "surrogatepass")  # the budget counts what is held
        if len(data) > CONTENT_BUDGET_BYTES // 4:
            return
        self._contents[fp] = data
        self._content_bytes += len(data)
        while self._content_bytes > CONTENT_BUDGET_BYTES and self._contents:
            _, old = self._contents.popitem(last=False)
            self._content_bytes -= len(old)

    def _conv(self, scope: Scope) -> _Conv:
        conv = self._convs.get(scope.key)
        if conv is None:
            conv = self._convs[scope.key] = _Conv(scope.agent, scope.persist)
            while len(self._convs) > MAX_CONVERSATIONS:
                self._convs.popitem(last=False)
        else:
            self._convs.move_to_end(scope.key)
            if scope.agent and not conv.agent:
                conv.agent = scope.agent
        conv.used_ts = self.clock()
        return conv

    def _donors(self, scope: Scope, real: str) -> list:
        """Holdings of `real` that other processes of the same session left behind, once those
        processes have exited (a session resumed after its process ended): candidates only, each
        still needs the transcript's word that its deliveries are on the asking context's chain.
        A process that still runs is its own context and never shares (see scope.Rec.key)."""
        own = _HOST_KEY.match(scope.key or "")
        if own is None:
            return []
        out = []
        for key, conv in reversed(self._convs.items()):  # the most recently used first
            other = _HOST_KEY.match(key)
            if other is None or other.group(1) != own.group(1) or other.group(2, 3) == own.group(2, 3):
                continue
            h = conv.held.get(real)
            if h is None or not h.calls or h.compactions != scope.compactions:
                continue
            if not self.exited(int(other.group(2)), int(other.group(3))):
                continue
            out.append(h)
            if len(out) >= MAX_DONORS:
                break
        return out

    def _supersede(self, name: str, fp: str) -> None:
        """Content of `name` went to a caller nobody could name (or was cut by its host), so it
        was credited to no one. Whichever context got it now has a newer copy under that name
        than the version its holding remembers, and a diff or stub against that older version
        would be read against the wrong copy: every holding of another version is dropped (a
        wasted re-send at worst). Called under the lock."""
        for conv in self._convs.values():
            h = conv.held.get(name)
            if h is not None and h.fp != fp:
                del conv.held[name]
                self._dirty = True
                self._note_replaced(conv, name)

    def _received_other(self, scope: Scope, name: str, snap: FileSnap, delivered: object) -> None:
        """A built-in reader handed the caller something other than the file's lines now (cut,
        trimmed, stale): not credited, and what the caller's holding of `name` remembers is no
        longer the latest copy it saw under that name. A holding of another version goes; one of
        this version too when the output is not even part of its text (a stale one). A caller not
        named for sure (unknown, or stubs withheld): so in every conversation, as for content
        credited to no one."""
        part = isinstance(delivered, str) and bool(delivered) and delivered in snap.text
        with self._lock:
            conv = self._convs.get(scope.key) if scope.key is not None and scope.stub_ok else None
            # a caller not named for sure: whichever context got it, as for content credited to no one
            for c in [conv] if conv is not None else list(self._convs.values()):
                h = c.held.get(name)
                if h is not None and (h.fp != snap.fp or not part):
                    del c.held[name]
                    self._dirty = True
                    self._note_replaced(c, name)

    def _note_replaced(self, conv: _Conv, name: str) -> None:
        """The index must be written before the answer goes out (see _save_replaced)."""
        if conv.persist and self.state_dir:
            self._replaced = True

    def _hold(self, conv: _Conv, real: str, h: Holding) -> None:
        old = conv.held.get(real)
        if old is not None and (old.fp != h.fp or old.size != h.size):
            self._note_replaced(conv, real)  # another version: the index must not keep the old one
        conv.held[real] = h
        conv.held.move_to_end(real)
        while len(conv.held) > MAX_FILES_PER_CONVERSATION:
            conv.held.popitem(last=False)
        if not h.whole:
            partial = [p for p, x in conv.held.items() if not x.whole]
            for p in partial[: max(0, len(partial) - MAX_RANGE_FILES_PER_CONVERSATION)]:
                del conv.held[p]  # under-report: those ranges are simply re-sent
        self._dirty = True

    def _conv_bucket(self, key: str) -> dict:
        """The per-conversation bucket of `key` (caller holds the lock). One dropped for room is
        added to OLDER first: the conversations always sum to the total."""
        byconv = self._stats["by_conversation"]
        b = byconv.get(key)
        if b is None:
            b = byconv[key] = _bucket()
            while len(byconv) > MAX_CONVERSATIONS:
                _, old = byconv.popitem(last=False)
                _merge(self._stats["older"], old)
        else:
            byconv.move_to_end(key)
        return b

    def _buckets(self, scope: Scope | None, key: str | None = None, agent: str | None = None) -> tuple:
        agent = agent or (scope.agent if scope else None) or "unknown"
        key = key or (scope.key if scope else None) or "unknown"
        by_agent = self._stats["by_agent"].get(agent)
        if by_agent is None:
            by_agent = self._stats["by_agent"][agent] = _bucket()
        return (self._stats["total"], by_agent, self._conv_bucket(key))

    def _count(self, scope: Scope | None, kind: str, raw: int, sent: int, cold: bool = False, withheld: str | None = None,
               reader: str = "ctx_read") -> None:
        if len(self._counted_with) < MAX_TOKENIZER_NAMES:
            self._counted_with.add(tokens.name())
        for b in self._buckets(scope):
            for t in (b, b["by_reader"].setdefault(reader, _reader_bucket())):
                t["reads"] += 1
                t[_PLURAL[kind]] += 1
                t["tokens_raw"] += raw
                t["tokens_sent"] += sent
                if cold:
                    t["cold_stubs"] += 1
                if withheld:
                    t["withheld"] += 1
        if withheld:
            reasons = self._stats["withheld_reasons"]
            reasons[withheld] = reasons.get(withheld, 0) + 1
        self._charge(scope)
        self._dirty = True

    def _give_back(self, scope: Scope, amount: int, reader: str) -> None:
        """A read our stub caused: the context read in full the bytes it was told it held."""
        for b in self._buckets(scope):
            for t in (b, b["by_reader"].setdefault(reader, _reader_bucket())):
                t["rereads"] += 1
                t["tokens_reread"] += amount
        self._dirty = True

    def _reread(self, scope: Scope, conv: _Conv | None, name: str, fp: str, window: tuple | None, raw: int) -> None:
        """A full answer (or a built-in reader let through) of `raw` tokens for `name` in this
        context: if the context was last told it holds these very bytes (a stub, pointer or diff
        of them at this compaction counter, lines overlapping), this read would not have happened
        without us, so its tokens (at most the stubbed ones) are charged as re-read and that
        stub's saving is gone with it (caller holds the lock)."""
        if conv is None or window is None:
            return
        hit = conv.stubbed.get(name)
        if hit is None:
            return
        h_fp, (lo, hi), epoch, stubbed_raw, reader = hit
        if h_fp == fp and epoch == scope.compactions and lo <= window[1] and window[0] <= hi:
            del conv.stubbed[name]
            if min(stubbed_raw, raw) > 0:
                self._give_back(scope, min(stubbed_raw, raw), reader)

    def _charge(self, scope: Scope | None) -> None:
        """Charge our overhead (overhead.py) to the asking context unless charged already at this
        compaction counter. A context with no key (an unidentified caller) is charged through its
        host process's tools/list (charge_listed). Caller holds the lock."""
        key = scope.key if scope else None
        if key is None:
            return
        epoch = self._charged.get(key)
        if epoch is not None and epoch >= scope.compactions:
            self._charged.move_to_end(key)
            return
        self._charged[key] = scope.compactions
        self._charged.move_to_end(key)
        while len(self._charged) > MAX_CHARGED:
            self._charged.popitem(last=False)
        host = _host_of(key)
        pending = self._pending_hosts.pop(host, None) if epoch is None and host else None
        if pending is not None:
            # the host process's tools/list was charged before this conversation was known: the
            # same context, so that charge moves here (the total does not change)
            pkey, pagent = pending
            old = self._stats["by_conversation"].get(pkey)
            if old is not None:
                moved = {f: old[f] for f in _OVERHEAD_FIELDS}
                for b in (old, self._stats["by_agent"].get(pagent) or _bucket()):
                    for f, v in moved.items():
                        b[f] -= v
                for b in self._buckets(scope)[1:]:
                    for f, v in moved.items():
                        b[f] += v
                if not any(old[f] for f in (*_READER_FIELDS, *_OVERHEAD_FIELDS)):
                    del self._stats["by_conversation"][pkey]
                return
        self._book_overhead(self._buckets(scope), scope.agent)

    @staticmethod
    def _book_overhead(buckets: tuple, agent: str | None) -> None:
        cost = overhead.per_context(agent)
        for b in buckets:
            b["contexts"] += 1
            b["tokens_tool"] += cost["tool"]
            b["tokens_rule"] += cost["rule"]
            b["tokens_overhead"] += cost["tool"] + cost["rule"]

    def charge_listed(self, scope: Scope, host_pid: int | None, host_ticks: int | None) -> None:
        """Our MCP server answered tools/list in host process (pid, ticks): that process's
        context holds our tool definition and rule whether or not it ever reads through us."""
        with self._lock:
            if scope.key is not None:
                self._charge(scope)
            elif host_pid is not None and host_ticks is not None:
                host = f"{host_pid}:{host_ticks}"
                if host in self._pending_hosts or any(_host_of(k) == host for k in self._charged):
                    return
                agent = scope.agent or "unknown"
                key = f"{agent}:(tools listed, no conversation identified)#{host}"
                self._pending_hosts[host] = (key, agent)
                while len(self._pending_hosts) > MAX_CONVERSATIONS:
                    self._pending_hosts.popitem(last=False)
                self._book_overhead(self._buckets(None, key, agent), scope.agent)
            else:
                self._book_overhead(self._buckets(None, "unknown", scope.agent or "unknown"), scope.agent)
            self._dirty = True
            self._maybe_autosave()

    def _reconcile(self) -> None:
        """After a load: what the conversations do not account for of the total (dropped by a
        version that did not keep OLDER) goes to OLDER, so they sum to the total again."""
        total = self._stats["total"]
        summed = _bucket()
        for b in (*self._stats["by_conversation"].values(), self._stats["older"]):
            _merge(summed, b)
        missing = _bucket()
        _merge(missing, total)
        _merge(missing, summed, -1)
        if any(v > 0 for f, v in missing.items() if f != "by_reader"):
            for f in (*_READER_FIELDS, *_OVERHEAD_FIELDS):
                missing[f] = max(0, missing[f])
            for rb in missing["by_reader"].values():
                for f in _READER_FIELDS:
                    rb[f] = max(0, rb[f])
            _merge(self._stats["older"], missing)

    # -- the read -------------------------------------------------------------------------------
    def _every_root(self, scope: Scope, roots: tuple) -> tuple:
        """Every root the conversation was given, this read's included (kept with its holdings)."""
        if scope.key is None:
            return roots
        with self._lock:
            conv = self._convs.get(scope.key)
            if conv is None:
                if not scope.stub_ok:
                    return roots
                conv = self._conv(scope)
            new = tuple(r for r in roots if r not in conv.roots)
            if new:
                conv.roots = (conv.roots + new)[-MAX_ROOTS_SEEN:]
                self._dirty = True
            return conv.roots

    def _named(self, path: str, roots: tuple, cwd: str | None, every_root: tuple = ()) -> tuple[str, str]:
        """paths.named, with the working directory's real path remembered (it is the same for
        every read of a conversation)."""
        cwd_real = None
        if cwd:
            key = ("cwd", cwd)
            cwd_real = self._roots_memo.get(key)
            if cwd_real is None:
                if len(self._roots_memo) > 1024:
                    self._roots_memo.clear()
                lc = os.path.normpath(os.path.abspath(os.path.expanduser(cwd)))
                try:
                    cwd_real = os.path.realpath(lc)
                except OSError:
                    cwd_real = lc
                self._roots_memo[key] = cwd_real
        return named(path, roots, cwd, cwd_real, every_root)

    def _before_open(self, real: str) -> None:
        """Test seam: runs after the path check, before the file is opened."""

    def read(self, scope: Scope, path: str, start_line: int | None = None, end_line: int | None = None,
             fresh: bool = False, mode: str = "read", delivered: str | None = None, reader: str | None = None,
             last_lines: int | None = None) -> dict:
        """`mode` "read": ctx_read. "gate": a host's built-in reader is about to read; answered
        with the same stub, pointer or diff ctx_read would send (kind "full" with no text: let the
        reader run; nothing is credited or counted then). "credit": the built-in reader delivered
        `delivered` for that window; credited exactly as a ctx_read answer would be, only when it
        equals the file's lines on disk now (else kind "withheld").
        `reader`: who reads ("ctx_read", a host's "builtin" reader, a "shell" command): the stub's
        wording, the host's output limit for it, the stats (default: ctx_read for "read", else
        builtin). `last_lines`: the file's last N lines
        (`tail -n N`), in place of start_line/end_line."""
        if mode not in ("read", "gate", "credit"):
            raise ValueError(f"unknown mode {mode!r}")
        if reader is None:
            reader = "ctx_read" if mode == "read" else "builtin"
        if reader not in READERS or (reader == "ctx_read") != (mode == "read"):
            raise ValueError(f"reader {reader!r} cannot {mode}")
        try:
            result = self._read(scope, path, start_line, end_line, bool(fresh), mode, delivered, reader, last_lines)
        except ReadError as exc:
            if mode == "read":  # the built-in reader gives its own answer for a file we cannot serve
                with self._lock:
                    self._count(scope, "error", 0, 0, reader=reader)
            result = {"kind": "error", "code": exc.code, "text": f"error: {exc.message}", "path": str(path),
                      "lines": 0, "tokens_raw": 0, "tokens_sent": 0, "tokenizer": tokens.name()}
        with self._lock:
            if self._replaced:
                self._save_replaced()
            self._maybe_autosave()
        return result

    def _save_replaced(self) -> None:
        """A holding was replaced by another version, or dropped for a newer copy, since the
        index was last written: written now, before the answer goes out. A daemon killed before
        its next autosave would otherwise load the older version as held, and answer with a stub
        or a diff against a copy the model no longer holds as its latest. Called under the lock
        (save() takes it again: it is reentrant)."""
        try:
            self.save()
        except OSError:
            self.save_errors += 1
            self._saved_at = self.clock()
            # not written: the index on disk may still name the older version, so it goes (a
            # restart then starts with nothing held: content is re-sent, never a wrong stub)
            try:
                os.remove(idx.index_path(self.state_dir))
            except OSError:
                pass
        self._replaced = False

    # -- files the host re-attached after a compaction --------------------------------------
    def _maybe_carry(self, scope: Scope) -> None:
        """At most once per conversation and compaction counter: credit the files Claude Code re-attached
        after its last compaction (read back from the transcript, carry.py) to the new epoch, so
        re-reading one is the stub (unchanged) or a diff (changed since), not a second copy.

        Credited only: the conversation's own context (never a subagent's key: Scope.carry is
        None there), stubs allowed now, a compact_boundary not credited before and written
        between the compaction's two bumps (else it belongs to another compaction and this one's
        is not written yet: looked for again when the transcript grows), whole files whose
        attached text is exactly what we compare against; ranges only when the lines equal the
        file's lines on disk now. A file this conversation already read in this epoch keeps
        what that read recorded."""
        if not (self.carry and scope.carry and scope.key and scope.stub_ok and scope.compactions > 0
                and scope.agent in CARRY_AGENTS):
            return
        transcript, after, compacted_ts = scope.carry
        try:
            st = os.stat(transcript)
        except (OSError, ValueError):
            return
        with self._lock:
            conv = self._convs.get(scope.key)
            if conv is not None and conv.carried == scope.compactions:
                return
            conv = self._conv(scope)
            tries = conv.carry_tries
            n = tries[3] if tries and tries[0] == scope.compactions else 0
            if tries[:3] == (scope.compactions, st.st_size, st.st_mtime_ns) or n >= CARRY_MAX_TRIES:
                return  # looked at this very transcript already, or gave up for this compaction
            conv.carry_tries = (scope.compactions, st.st_size, st.st_mtime_ns, n + 1)
            done = conv.carried_boundary
        found = carry.last_boundary(transcript)
        if found is None or found.uuid == done:
            return  # not written yet (or an older one): look again when the transcript grows
        when = carry.iso_ts(found.timestamp)
        low = after - CARRY_SLACK_S if after is not None else compacted_ts - CARRY_MAX_BOUNDARY_AGE_S
        if when is None or not (low <= when <= compacted_ts + CARRY_SLACK_S):
            return  # another compaction's
        roots = self._roots(tuple(scope.roots))
        credits = []
        for f in found.files:
            try:
                real, _shown = resolve(f.path, roots, self.allow, scope.cwd)
                name, rel = self._named(f.path, roots, scope.cwd)
                snap = load(real, rel, self.max_file_bytes, roots + self.allow)
            except ReadError:
                continue
            h = self._credit(f, snap, scope.compactions)
            if h is not None:
                h.calls = (f"compact:{found.uuid}",)
                credits.append((name, h, f.content if h.fp != snap.fp else None))
        with self._lock:
            if conv.carried == scope.compactions or conv.carry_tries[:1] != (scope.compactions,):
                return  # credited by a read beside this one, or a later compaction was seen meanwhile
            conv.carried = scope.compactions
            conv.carried_boundary = found.uuid
            self._dirty = True
            for real, h, old_text in credits:
                cur = conv.held.get(real)
                if cur is not None and cur.compactions == scope.compactions:
                    continue  # read in this epoch already: what it holds is newer
                self._hold(conv, real, h)
                if old_text is not None:
                    self._put_content(h.fp, old_text)

    @staticmethod
    def _credit(f, snap: FileSnap, epoch: int) -> Holding | None:  # noqa: ANN001 - carry.Attached
        """The holding a re-attached file gives, or None when its bytes cannot be pinned down."""
        n = snap.nlines
        if f.whole:
            data = f.content.encode("utf-8", "surrogatepass")
            fp = fingerprint(data)
            if fp == snap.fp:
                return Holding(snap.fp, snap.size, snap.mtime_ns, epoch, n, True, [(1, n)] if n else [])
            # changed since it was attached: held as attached, so the next read is a diff against
            # exactly those bytes (mtime -1: never equal, never a stub)
            lines = len(split_lines(f.content))
            return Holding(fp, len(data), -1, epoch, lines, True, [(1, lines)] if lines else [])
        end = f.start_line + f.num_lines - 1
        if f.num_lines < 1 or end > n or f.start_line > n:
            return None
        # Claude Code's content for a range is the lines joined by "\n", without the last one's
        want = snap.slice(f.start_line, end)
        if want.endswith("\n"):
            want = want[:-1]
        if want != f.content:
            return None
        return Holding(snap.fp, snap.size, snap.mtime_ns, epoch, n, False, [(f.start_line, end)])

    def _read(self, scope: Scope, path: str, start_line, end_line, fresh: bool, mode: str = "read",
              delivered: str | None = None, reader: str = "ctx_read", last_lines: int | None = None) -> dict:
        self._maybe_carry(scope)
        roots = self._roots(tuple(scope.roots))
        real, _shown = resolve(path, roots, self.allow, scope.cwd)
        name, rel = self._named(path, roots, scope.cwd, self._every_root(scope, roots))
        self._before_open(real)
        snap = load(real, rel, self.max_file_bytes, roots + self.allow)
        n = snap.nlines
        if last_lines is not None:
            start_line, end_line = (max(1, n - last_lines + 1), None) if n else (None, None)
        window = window_of(n, start_line, end_line)
        whole = window is None or window == (1, n)
        raw_text = snap.text if whole else snap.slice(*window)
        known = scope.key is not None
        hint = stubs.FRESH if mode != "gate" else stubs.RUN_AGAIN if reader == "shell" else stubs.AGAIN
        again = False
        if mode == "credit" and not builtin_delivery_matches(snap.text, window, start_line, delivered):
            k = delivered_prefix(snap.text, delivered) if whole and start_line in (None, 1) and last_lines is None else None
            if k is None:
                self._received_other(scope, name, snap, delivered)
                return {"kind": "withheld", "text": "", "path": rel, "lines": n, "tokens_raw": 0, "tokens_sent": 0,
                        "tokenizer": tokens.name(), "fingerprint": snap.fp, "window": list(window) if window else None}
            # the whole file was asked for and its first k lines came, exactly (the host trimmed
            # trailing blank lines, or cut the output at a line's end): those lines are held
            window, whole = (1, k), False
            raw_text = snap.slice(1, k)
        tokens_raw = self._file_token_count(snap) if whole else tokens.count(raw_text)
        tok = tokens.count

        record = known and scope.stub_ok
        can_claim = record and not fresh and mode != "credit"
        kind, text, claims, cold = "full", raw_text, None, False
        verified = None  # the deliveries the transcript confirmed (asked outside the lock: it may wait)
        inherited = None  # a holding of an exited process of this session that the transcript confirmed
        if can_claim and scope.verify:
            with self._lock:
                conv0 = self._convs.get(scope.key)
                h0 = conv0.held.get(name) if conv0 is not None else None
                calls0 = h0.calls if h0 is not None and h0.compactions == scope.compactions else None
                # (Claude Code only: verified with the real CLI; Codex's resume is not)
                donors = self._donors(scope, name) if h0 is None and scope.log == "claude" else []
            log = {"codex": self.rollouts, "copilot": self.copilot_logs}.get(scope.log, self.transcripts)
            if calls0 and log.holds(scope.transcript, calls0, scope.call_id):
                verified = calls0
            for d in donors:
                if log.holds(scope.transcript, d.calls, scope.call_id):
                    inherited = d
                    break
        with self._lock:
            conv = self._convs.get(scope.key) if known else None
            h = conv.held.get(name) if conv is not None else None
            if h is None and inherited is not None:
                # `--resume`/`--continue` after the process that read it exited: the host's log
                # shows those deliveries on this context's chain, so this process holds them too
                conv = self._conv(scope)
                h = Holding(inherited.fp, inherited.size, inherited.mtime_ns, inherited.compactions, inherited.lines,
                            inherited.whole, list(inherited.ranges), cold=inherited.cold, calls=inherited.calls)
                self._hold(conv, name, h)
                verified = h.calls
            if h is not None and h.compactions != scope.compactions:
                h = None  # delivered before a compaction: the conversation no longer holds it
            if h is not None and can_claim and scope.verify and (verified is None or h.calls != verified):
                h = None  # the transcript does not show those bytes in this context any more
                self._stats["withheld_reasons"]["transcript"] = self._stats["withheld_reasons"].get("transcript", 0) + 1
            call = scope.call_id if scope.verify else None
            same_bytes = h is not None and h.fp == snap.fp and h.size == snap.size and h.lines == n
            same = same_bytes and h.mtime_ns == snap.mtime_ns
            held = h.spans() if same_bytes else []
            new_spans: list = []
            base_fp = None
            if can_claim and same_bytes and n:
                win = window or (1, n)
                if rng.covers(held, win):
                    if same:
                        t = stubs.stub(rel, n, None if whole else win, hint)
                        if tok(t) < tokens_raw:
                            kind, text, claims, cold = "stub", t, [win], h.cold
                    elif whole:
                        # touched (checkout, touch, save without change): the mtime moved, so no
                        # stub; the file "changed on disk" and its diff is empty
                        t = stubs.same_bytes(rel, n, hint)
                        if tok(t) < DIFF_RATIO * tokens_raw:
                            kind, text, claims, base_fp = "diff", t, [(1, n)], snap.fp
                elif self.dedup:
                    # the content gate of range dedup is the fingerprint (CG-18), not the mtime
                    covered, new_spans = rng.plan(win, held)
                    if covered:
                        sections = [(sp, snap.slice(*sp)) for sp in new_spans]
                        folded = sum(len(x) for _, x in sections) < rng.MIN_DELTA_CHARS
                        t = stubs.pointer(rel, n, win, covered, sections, folded, hint)
                        if tok(t) < tokens_raw:
                            kind, text, claims = "pointer", t, covered
            elif can_claim and h is not None and h.whole and whole and h.fp != snap.fp:
                old = self._contents.get(h.fp)
                if old is not None:
                    t = render_diff(rel, old.decode("utf-8", "surrogatepass"), snap.text, n, hint)
                    if t is not None and tok(t) < DIFF_RATIO * tokens_raw:
                        kind, text, claims, base_fp = "diff", t, [(1, h.lines)] if h.lines else [], h.fp
            if conv is not None and mode != "credit":
                conv.asks += 1
            refused = conv.gate_stubs.get(name) if mode == "gate" and kind != "full" and conv is not None else None
            if refused is not None and refused[0] == snap.fp and window is not None \
                    and refused[1][0] <= window[0] and window[1] <= refused[1][1] and refused[2] == scope.compactions \
                    and conv.asks - refused[3] <= AGAIN_WITHIN:
                # lines this context was just refused, asked for again (all or some of them) with
                # the file unchanged since: the model wants the content (no loop). A file changed
                # since (a diff) is news; a window reaching past them (paging on) is a new read
                del conv.gate_stubs[name]
                kind, again = "full", True
            if kind == "full" and known:
                self._reread(scope, conv or self._convs.get(scope.key), name, snap.fp, window, tokens_raw)
            if mode == "gate" and kind == "full":
                # the built-in reader runs and sends the content itself: its post-tool hook
                # credits what the model really received (mode "credit"); nothing counted here
                # (`again`: asked again right after a refusal, so the reader must send the content
                # even where the host would answer with its own "unchanged" note)
                return {"kind": "full", "text": "", "path": rel, "lines": n, "tokens_raw": tokens_raw,
                        "tokens_sent": tokens_raw, "tokenizer": tokens.name(), "fingerprint": snap.fp,
                        "window": list(window) if window else None, "again": again}
            cut = record and not hostcaps.passes_whole(scope.agent, text, reader)
            if cut and mode == "gate":
                # a refusal longer than the host hands its model whole would reach it cut, and a
                # refusal that is not remembered comes back the same when asked again: the
                # reader runs instead (and its own output is credited only if the host keeps it whole)
                return {"kind": "full", "text": "", "path": rel, "lines": n, "tokens_raw": tokens_raw,
                        "tokens_sent": tokens_raw, "tokenizer": tokens.name(), "fingerprint": snap.fp,
                        "window": list(window) if window else None, "again": False}
            if cut:
                # the host cuts an answer this long before its model sees it (hostcaps.py): the
                # model holds part of it at best, so nothing of it is credited (what it was sent
                # whole before is still in its context)
                record = False
            if record:
                conv = self._conv(scope)
                if mode == "gate":
                    conv.gate_stubs.pop(name, None)
                    # (the compaction epoch: a refusal from before a compaction is not in the context any more)
                    conv.gate_stubs[name] = (snap.fp, window or (1, 1), scope.compactions, conv.asks)
                    while len(conv.gate_stubs) > MAX_GATE_STUBS:
                        del conv.gate_stubs[next(iter(conv.gate_stubs))]
                elif kind == "full" and conv.gate_stubs:
                    conv.gate_stubs.pop(name, None)  # the content came some other way: the next refusal is new
                if kind == "stub":
                    conv.held.move_to_end(name)
                elif kind == "pointer" or (kind == "full" and not whole and same_bytes):
                    sent_spans = new_spans if kind == "pointer" else [window]
                    h.add_call(call)
                    h.ranges, _ = rng.coalesce(held + sent_spans)
                    h.whole = rng.covers(h.ranges, (1, n))
                    h.mtime_ns = snap.mtime_ns  # bytes verified identical at this mtime
                    conv.held.move_to_end(name)
                    self._dirty = True
                elif whole or kind == "diff":
                    calls = (call,) if call else None
                    if kind == "diff" and calls is not None:
                        calls = (h.calls + calls) if h.calls is not None else None  # the base came from those
                        if calls is not None and len(calls) > MAX_CALLS_PER_HOLDING:
                            calls = None
                    self._hold(conv, name, Holding(snap.fp, snap.size, snap.mtime_ns, scope.compactions, n, True,
                                                   [(1, n)] if n else [], calls=calls))
                    self._put_content(snap.fp, snap.text)
                else:
                    self._hold(conv, name, Holding(snap.fp, snap.size, snap.mtime_ns, scope.compactions, n, False, [window],
                                                   calls=(call,) if call else None))
            if not record and kind == "full" and n:
                self._supersede(name, snap.fp)
            withheld = None
            if cut:
                withheld = "answer longer than the host hands its model whole"
            elif known and not scope.stub_ok and not fresh:
                withheld = scope.reason or "stub not allowed"
            elif not known and not fresh:
                withheld = scope.reason or "unknown caller"
            sent = tok(text) if kind != "full" or not whole else tokens_raw
            if record and kind in ("stub", "pointer", "diff"):
                conv.stubbed.pop(name, None)
                conv.stubbed[name] = (snap.fp, window or (1, 1), scope.compactions, tokens_raw, reader)
                while len(conv.stubbed) > MAX_STUBBED:
                    conv.stubbed.popitem(last=False)
            self._count(scope, kind, tokens_raw, sent, cold=cold, withheld=withheld, reader=reader)
        result = {"kind": kind, "text": text, "path": rel, "lines": n, "tokens_raw": tokens_raw,
                  "tokens_sent": sent, "tokenizer": tokens.name()}
        if claims is not None:
            result["claims"] = {"fingerprint": base_fp or snap.fp, "spans": [list(s) for s in claims]}
        result["fingerprint"] = snap.fp
        result["window"] = list(window) if window else None
        return result

    # -- reporting ------------------------------------------------------------------------------
    def conversation_stats(self, key: str | None) -> dict:
        """The counters of one conversation alone (zeros for an unknown caller, whose reads are
        counted under a bucket every unidentified caller shares)."""
        with self._lock:
            b = _bucket()
            if key and key in self._stats["by_conversation"]:
                _merge(b, self._stats["by_conversation"][key])
        return _shown(b)

    def stats(self) -> dict:
        """Everything counted since the index began (never less after a restart or a dropped
        conversation): the total, per host (`by_agent`) and per conversation, each with
        `by_reader`. Always: the readers sum to their bucket, the hosts and the conversations
        (OLDER included) to the total, and tokens_saved = tokens_raw - tokens_sent -
        tokens_reread - tokens_overhead (negative when leanctx cost more than it saved)."""
        with self._lock:
            byconv = {k: _shown(v) for k, v in self._stats["by_conversation"].items()}
            older = self._stats["older"]
            if any(older[f] for f in (*_READER_FIELDS, *_OVERHEAD_FIELDS)):
                byconv[OLDER] = _shown(older)
            out = {
                **tokens.report(),  # tokenizer, tokens_exact, tokenizer_note, exact_counts
                "counted_with": sorted(self._counted_with),
                **_shown(self._stats["total"]),
                "counting": COUNTING,
                # what one context of each host seen is charged (none seen yet: an unknown host's, the most)
                "overhead_per_context": {a: overhead.per_context(a) for a in sorted(self._stats["by_agent"])}
                or {"unknown": overhead.per_context(None)},
                "by_agent": {k: _shown(v) for k, v in self._stats["by_agent"].items()},
                "by_conversation": byconv,
                "withheld_reasons": dict(self._stats["withheld_reasons"]),
                "conversations": len(self._convs),
                "entries": sum(len(c.held) for c in self._convs.values()),
                "files": len({p for c in self._convs.values() for p in c.held}),
                "contents": len(self._contents),  # file texts kept for diffs
                "content_bytes": self._content_bytes,  # their UTF-8 bytes (CONTENT_BUDGET_BYTES at most)
                "dedup": self.dedup,
                "index": {"path": idx.index_path(self.state_dir) if self.state_dir else None,
                          "quarantined": self.quarantined, "loaded_holdings": self.loaded_holdings,
                          "save_errors": self.save_errors},
            }
        return out
