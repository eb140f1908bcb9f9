"""Does the conversation's context still hold what a call delivered? Claude Code's transcript says.

Claude Code writes every message of a session to a JSONL transcript (the `transcript_path` of
every hook payload). Entries form a tree by `uuid` / `parentUuid`: the context the model sees is
the chain from the newest entry up to the root, or up to the last
`{"type":"system","subtype":"compact_boundary"}` (its `parentUuid` is null; what came before it
was summarised away). A rewind (`/rewind`, Esc Esc, an edited earlier message) continues from
an earlier node, so entries after it drop off the chain without any hook event. Old tool
results can also leave the context in place: a result that reads `[Old tool result content
cleared]`; a `{"type":"attachment","attachment":{"type":"tool_results_cut","callIds":[...]}}`
entry (2.1.332 writes it when it cuts old results, MCP ones included, from a conversation that
returns after an idle hour, or withdraws a tool's results); an assistant entry whose
`message.context_management` reports a `clear_tool_uses_20250919` edit or `client_cut_tool_uses`
(the results before it were cleared for that request: which ones is not recorded, so all count);
and a `{"subtype":"microcompact_boundary"}` system entry (recognised by 2.1.197 and 2.1.332,
written by neither: kept for other versions).

`TranscriptIndex.holds(path, delivered, asking)` answers for the read cache: every call in
`delivered` (the tool_use ids of the ctx_read calls whose answers gave the held bytes, or
`compact:<uuid>` for files the host re-attached after that compaction boundary) must have its
tool_result entry on the chain of the asking call's own tool_use entry (or, while that is not
written yet, of the transcript's newest entry), below the nearest compact boundary and below
every microcompact boundary or clearing assistant entry on that chain (everything above one
counts as cleared), and no result of it may read `[Old tool result content cleared]`, start
with `<persisted-output>` (the host kept only a preview of a result too large for it) or be
named by a `tool_results_cut` entry (anywhere in the transcript). Any doubt answers False, so the caller sends
content: a transcript that is missing, unreadable, not a regular file, too large to index
(MAX_BYTES / MAX_ENTRIES), a chain that breaks (a parent never seen), or a walk past MAX_DEPTH.

Indexed incrementally (hostlog.py): per transcript, the byte offset parsed so far (whole lines only), its
(device, inode) and its first bytes; a transcript that shrank or was replaced is indexed again
from the start. At most MAX_TRANSCRIPTS are kept and MAX_TOTAL_ENTRIES entries in all, least
recently used dropped first.
"""

from __future__ import annotations

import json
import threading

from leanctx.cache.hostlog import LogIndex, LogIndexes

CLEARED = "[Old tool result content cleared]"
PERSISTED = "<persisted-output>"  # a result too large for the context: a preview and the file it was saved to
CUT = "tool_results_cut"  # 2.1.332's attachment naming the calls whose results it cut from the context
MAX_TRANSCRIPTS = 32
MAX_ENTRIES = 100_000  # entries indexed per transcript; more: undecidable (withhold)
MAX_TOTAL_ENTRIES = 200_000  # across the transcripts kept; the least recently used are dropped
MAX_BYTES = 512 << 20  # a transcript larger than this is not indexed (withhold)
MAX_DEPTH = 200_000  # a chain walk longer than this is undecidable
# Claude Code queues transcript writes and flushes them every 100 ms (FLUSH_INTERVAL_MS in
# 2.1.197's code; observed: the second ctx_read of a turn arrived before the first one's
# tool_result and its own tool_use were written). A call whose tool_use entry is not written yet
# is waited for this long (polling), then the newest entry anchors (which withholds more).
WAIT_S = 0.5
POLL_S = 0.01


class _Index(LogIndex):
    __slots__ = ("cleared", "kind", "memo", "newest", "parent", "result_of", "use_of")

    def __init__(self) -> None:
        super().__init__()
        self.parent: dict[str, str | None] = {}  # uuid -> parentUuid
        self.kind: dict[str, str] = {}  # uuid -> "compact" | "micro" (boundaries and clearing replies only)
        self.result_of: dict[str, list] = {}  # tool_use id -> uuids of entries holding its tool_result
        self.use_of: dict[str, str] = {}  # tool_use id -> uuid of the assistant entry that made the call
        self.cleared: set[str] = set()  # tool_use ids whose result was replaced by CLEARED or cut
        self.newest: str | None = None
        # the last chain walked: (anchor, chain, entries below every microcompact, compact top);
        # a later anchor that descends from it walks only the entries added since
        self.memo: tuple | None = None

    def chain(self, start: str) -> tuple | None:
        """(chain entries, those newer than every microcompact boundary, the compact boundary that
        ends it or None), walking up from `start`; None when the chain cannot be followed."""
        walked: list[str] = []
        node: str | None = start
        memo = self.memo
        reuse = False
        for _ in range(MAX_DEPTH):
            if node is None:
                break
            if memo is not None and node == memo[0]:
                reuse = True
                break
            if node not in self.parent:
                return None  # a parent we never saw: the chain cannot be followed
            walked.append(node)
            if self.kind.get(node) == "compact":
                break
            node = self.parent[node]
        else:
            return None
        micro_at = next((i for i, n in enumerate(walked) if self.kind.get(n) == "micro"), None)
        top = walked[-1] if walked and self.kind.get(walked[-1]) == "compact" else None
        if reuse:
            chain, below, top = memo[1], memo[2], memo[3]
            chain.update(walked)  # the old anchor's chain is a part of this one (updated in place)
            below = set(walked[:micro_at]) if micro_at is not None else below | set(walked)
        else:
            chain = set(walked)
            below = set(walked[:micro_at]) if micro_at is not None else set(walked)
        self.memo = (start, chain, below, top)
        return chain, below, top

    def add(self, line: bytes) -> None:
        if b'"uuid"' not in line:
            return
        try:
            e = json.loads(line)
        except ValueError:
            return  # a line we cannot read is never evidence of a delivery
        if not isinstance(e, dict):
            return
        uid, par = e.get("uuid"), e.get("parentUuid")
        if not isinstance(uid, str) or (par is not None and not isinstance(par, str)):
            return
        if len(self.parent) >= MAX_ENTRIES:
            self.broken = True
            return
        self.parent[uid] = par
        self.newest = uid
        if e.get("type") == "system":
            sub = e.get("subtype")
            if sub == "compact_boundary":
                self.kind[uid] = "compact"
            elif sub == "microcompact_boundary":
                self.kind[uid] = "micro"
            return
        att = e.get("attachment")
        if e.get("type") == "attachment" and isinstance(att, dict) and att.get("type") == CUT:
            ids = att.get("callIds")
            if isinstance(ids, list):
                self.cleared.update(i for i in ids if isinstance(i, str))
            else:
                self.kind[uid] = "micro"  # a cut we cannot read: everything above it counts as cut
            return
        msg = e.get("message")
        if e.get("type") == "assistant" and isinstance(msg, dict) and _clears(msg.get("context_management")):
            self.kind[uid] = "micro"  # the request that produced this reply had old tool results cleared
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            return
        for part in content:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "tool_use" and isinstance(part.get("id"), str):
                self.use_of.setdefault(part["id"], uid)
            elif part.get("type") == "tool_result" and isinstance(part.get("tool_use_id"), str):
                tid = part["tool_use_id"]
                self.result_of.setdefault(tid, []).append(uid)
                if _cleared(part.get("content")):
                    self.cleared.add(tid)


def _clears(cm: object) -> bool:
    """An assistant message's `context_management` reports tool results cleared from the request
    that produced it: an applied edit (the API's `clear_tool_uses_20250919` unless its count is a
    plain 0; any other kind but `clear_thinking_*`) or the client's own cut (`client_cut_tool_uses`)."""
    if cm is None:
        return False
    if not isinstance(cm, dict):
        return True  # unreadable: assume the worst
    edits = cm.get("applied_edits")
    for edit in edits if isinstance(edits, list) else [edits] if edits is not None else []:
        kind = edit.get("type") if isinstance(edit, dict) else None
        if not isinstance(kind, str) or not kind.startswith("clear_thinking") and not (
                kind.startswith("clear_tool_uses") and edit.get("cleared_tool_uses") == 0):
            return True  # any edit but thinking's, or a tool-use clearing that did not clear none
    return cm.get("client_cut_tool_uses") not in (None, 0)


def _cleared(content: object) -> bool:
    """The result the model got is not the bytes sent: cleared, or swapped for a preview and a file
    path (Claude Code stores an MCP result over 50,000 characters in 2.1.197 that way)."""
    texts = [content] if isinstance(content, str) else \
        [c.get("text") for c in content if isinstance(c, dict)] if isinstance(content, list) else []
    return any(isinstance(t, str) and (t.strip() == CLEARED or t.lstrip().startswith(PERSISTED)) for t in texts)


class _Transcripts(LogIndexes):
    def trim(self) -> None:
        super().trim()
        while len(self.idx) > 1 and sum(len(x.parent) for x in self.idx.values()) > MAX_TOTAL_ENTRIES:
            self.idx.popitem(last=False)  # indexed again from the start when asked about again


class TranscriptIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs = _Transcripts(_Index, max_logs=MAX_TRANSCRIPTS, max_bytes=MAX_BYTES, owned=False)

    def _refresh(self, path: str) -> _Index | None:
        return self._logs.refresh(path)

    def holds(self, path: str | None, delivered, asking: str | None) -> bool:
        """True only when the transcript shows every delivery in `delivered` still in the context
        of the call `asking` (see the module doc); False on any doubt."""
        if not path or not delivered or any(not isinstance(d, str) or not d for d in delivered):
            return False
        ix, _ = self._logs.wait(self._lock, path, lambda x: not asking or asking in x.use_of, WAIT_S, POLL_S)
        if ix is None:
            return False
        with self._lock:
            start = ix.use_of.get(asking) if asking else None
            if start is None:
                start = ix.newest
            if start is None:
                return False
            walked = ix.chain(start)
            if walked is None:
                return False
            _chain, below_micro, compact_top = walked
            for d in delivered:
                if d.startswith("compact:"):
                    if d[len("compact:"):] != compact_top:
                        return False
                    continue
                if d in ix.cleared:
                    return False
                if not any(u in below_micro for u in ix.result_of.get(d, ())):
                    return False
            return True
