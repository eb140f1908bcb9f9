"""Claude Code's transcript decides whether a stub may presume bytes: rewinds, compact and
microcompact boundaries, cleared tool results, and every doubt withholds."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from leanctx.cache import transcript as tr
from leanctx.cache.transcript import CLEARED, TranscriptIndex

from .conftest import World, code


class T:
    """A transcript written entry by entry, as Claude Code appends it."""

    def __init__(self, path: Path) -> None:
        self.path, self.tip, self.n = path, None, 0

    def entry(self, body: dict, parent: object = "tip") -> str:
        self.n += 1
        uid = f"u{self.n}"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"parentUuid": self.tip if parent == "tip" else parent, "uuid": uid, **body}) + "\n")
        self.tip = uid
        return uid

    def call(self, cid: str, content: object = "the file") -> str:
        self.entry({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": cid, "name": "mcp__leanctx__ctx_read"}]}})
        return self.entry({"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": cid, "content": content}]}})


def test_a_delivery_on_the_chain_holds_and_a_rewound_one_does_not(tmp_path: Path) -> None:
    t, ix = T(tmp_path / "s.jsonl"), TranscriptIndex()
    t.entry({"type": "user", "message": {"content": "hi"}})
    r1 = t.call("c1")
    t.call("c2")
    assert ix.holds(str(t.path), ("c1", "c2"), None)
    t.tip = r1  # rewind: the next prompt continues from c1's result
    t.entry({"type": "user", "message": {"content": "again"}})
    t.entry({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "c3"}]}})
    assert ix.holds(str(t.path), ("c1",), "c3")
    assert not ix.holds(str(t.path), ("c2",), "c3")
    assert not ix.holds(str(t.path), ("c1", "c2"), "c3")
    # the asking call's entry not written yet: the newest entry anchors (the new branch)
    assert not ix.holds(str(t.path), ("c2",), "c9")


def test_compact_boundary_and_microcompact_withhold(tmp_path: Path) -> None:
    t, ix = T(tmp_path / "s.jsonl"), TranscriptIndex()
    t.call("c1")
    prev = t.tip
    b = t.entry({"type": "system", "subtype": "compact_boundary", "logicalParentUuid": prev}, parent=None)
    t.call("c2")
    assert not ix.holds(str(t.path), ("c1",), None)
    assert ix.holds(str(t.path), ("c2",), None)
    assert ix.holds(str(t.path), (f"compact:{b}",), None)
    assert not ix.holds(str(t.path), ("compact:other",), None)
    t.entry({"type": "system", "subtype": "microcompact_boundary"})
    t.call("c3")
    assert not ix.holds(str(t.path), ("c2",), None)  # above a microcompact: may have been cleared
    assert ix.holds(str(t.path), ("c3",), None)
    t.call("c4", content=[{"type": "text", "text": CLEARED}])
    assert not ix.holds(str(t.path), ("c4",), None)


def test_every_doubt_withholds(tmp_path: Path) -> None:
    ix = TranscriptIndex()
    t = T(tmp_path / "s.jsonl")
    t.call("c1")
    p = str(t.path)
    assert not ix.holds(str(tmp_path / "missing.jsonl"), ("c1",), None)
    assert not ix.holds(None, ("c1",), None)
    assert not ix.holds(p, None, None) and not ix.holds(p, (), None) and not ix.holds(p, ("c1", None), None)
    os.symlink(p, tmp_path / "link.jsonl")
    assert not ix.holds(str(tmp_path / "link.jsonl"), ("c1",), None)
    # a parent we never saw: the chain breaks
    t.entry({"type": "user", "message": {"content": "x"}}, parent="nowhere")
    assert not ix.holds(p, ("c1",), None)


def test_incremental_rewritten_and_partial_lines(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    t, ix = T(tmp_path / "s.jsonl"), TranscriptIndex()
    t.call("c1")
    assert ix.holds(str(t.path), ("c1",), None)
    first = ix._logs.idx[str(t.path)].offset
    t.call("c2")
    assert ix.holds(str(t.path), ("c1", "c2"), None)
    assert ix._logs.idx[str(t.path)].offset > first  # parsed on from where it stopped
    # a line still being written is not parsed until whole
    with open(t.path, "a", encoding="utf-8") as f:
        f.write('{"parentUuid": "u4", "uuid": "u5", "type": "assistant", "message": {"content": [{"type": "tool_use", "id": "c3"}]}}')
    assert ix.holds(str(t.path), ("c1", "c2"), None)
    # rewritten shorter (another session's file in its place): indexed again from the start
    t.path.unlink()
    t2 = T(t.path)
    t2.call("c9")
    assert not ix.holds(str(t.path), ("c1",), None)
    assert ix.holds(str(t.path), ("c9",), None)
    # too many entries to index: undecidable
    monkeypatch.setattr(tr, "MAX_ENTRIES", 3)
    big = T(tmp_path / "big.jsonl")
    for i in range(3):
        big.call(f"b{i}")
    assert not TranscriptIndex().holds(str(big.path), ("b0",), None)


def test_the_index_is_bounded_across_transcripts(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(tr, "MAX_TOTAL_ENTRIES", 5)
    ix = TranscriptIndex()
    a, b = T(tmp_path / "a.jsonl"), T(tmp_path / "b.jsonl")
    for i in range(2):
        a.call(f"a{i}")
        b.call(f"b{i}")
    assert ix.holds(str(a.path), ("a0", "a1"), None)
    assert ix.holds(str(b.path), ("b0", "b1"), None)
    assert list(ix._logs.idx) == [str(b.path)]  # a's index was dropped to stay in the bound
    assert ix.holds(str(a.path), ("a0",), None)  # and is built again when asked


def _claude(world: World, n: int = 120):
    world.write("a.py", code(n))
    world.write("b.py", code(n, "y"))
    h = world.host()
    world.session(h, "s1")
    return world.conn(h), str(world.tmp / "transcripts" / "s1.jsonl")


def test_read_cache_withholds_after_a_rewind(world: World) -> None:
    c, path = _claude(world)
    assert world.read(c, "a.py")["kind"] == "full"
    point = world._tips[path]
    assert world.read(c, "b.py")["kind"] == "full"
    assert world.read(c, "b.py")["kind"] == "stub"
    world._tips[path] = point  # the user rewinds to just after a.py was read
    world.transcript_entry(path, {"type": "user", "message": {"content": "edited prompt"}})
    assert world.read(c, "b.py")["kind"] == "full"  # the context lost it
    assert world.read(c, "a.py")["kind"] == "stub"  # still on the chain
    assert world.read(c, "b.py")["kind"] == "stub"  # re-sent on this branch


def test_read_cache_withholds_after_a_lost_compaction_or_a_microcompact(world: World) -> None:
    c, path = _claude(world)
    world.read(c, "a.py")
    world.read(c, "b.py", 1, 60)
    assert world.read(c, "a.py")["kind"] == "stub"
    world.transcript_entry(path, {"type": "system", "subtype": "compact_boundary"}, parent=None)  # no hook
    assert world.read(c, "a.py")["kind"] == "full"
    r = world.read(c, "b.py", 1, 100)
    assert r["kind"] == "full" and r["window"] == [1, 100]  # no pointer to lines the context lost
    assert world.read(c, "a.py")["kind"] == "stub"
    world.transcript_entry(path, {"type": "system", "subtype": "microcompact_boundary"})
    assert world.read(c, "a.py")["kind"] == "full"


def test_read_cache_withholds_when_the_transcript_is_missing_or_the_call_unknown(world: World) -> None:
    c, path = _claude(world)
    world.read(c, "a.py")
    assert world.read(c, "a.py")["kind"] == "stub"
    os.rename(path, path + ".moved")
    scope = world.scope(c)
    assert world.cache.read(dataclasses.replace(scope, call_id="toolu_x"), "a.py")["kind"] == "full"
    os.rename(path + ".moved", path)
    assert world.read(c, "a.py")["kind"] == "full"  # re-credited to the call the transcript never showed
    assert world.read(c, "a.py")["kind"] == "stub"
    assert scope.verify and scope.transcript == path
    world.cache.read(scope, "b.py")  # no call id sent: credited to nothing the transcript can confirm
    assert world.read(c, "b.py")["kind"] == "full"
    # a call without an id is anchored at the transcript's newest entry
    assert world.cache.read(scope, "b.py")["kind"] == "stub"


def test_holdings_keep_their_calls_across_a_restart(world: World) -> None:
    c, _ = _claude(world)
    world.read(c, "a.py")
    world.restart(graceful=True)
    assert world.read(c, "a.py")["kind"] == "stub"


def test_subagent_scope_reads_its_own_transcript(world: World) -> None:
    from leanctx.cache.scope import Rec, Scope, _verified

    r = Rec()
    r.agent, r.transcript = "claude", "/p/s1.jsonl"
    base = Scope("k", "claude", 0, (), True, "")
    assert _verified(base, r, "c1").transcript == "/p/s1.jsonl"
    assert _verified(base, r, "c1", "a12").transcript == "/p/s1/subagents/agent-a12.jsonl"
    assert _verified(base, r, "c1", "../x").transcript is None
    r.agent = "codex"  # its rollout decides (rollout.py); a subagent's lies beside it, named by its thread id
    assert _verified(base, r, "c1").log == "codex" and _verified(base, r, "c1").transcript == "/p/s1.jsonl"
    assert _verified(base, r, "c1", "a12").transcript is None  # no such rollout: nothing is credited
    r.agent = "gemini"
    assert not _verified(base, r, "c1").verify


def test_cut_and_cleared_results_reported_by_the_host_withhold(tmp_path: Path) -> None:
    """Claude Code 2.1.332 records results it cut from the context (after an idle hour, MCP
    results included; or a withdrawn tool's) as a `tool_results_cut` attachment naming the calls,
    and an API or client clearing on the assistant reply of the request it applied to."""
    t, ix = T(tmp_path / "s.jsonl"), TranscriptIndex()
    t.call("c1")
    t.call("c2")
    t.entry({"type": "attachment", "attachment": {"type": "tool_results_cut", "callIds": ["c1"],
                                                  "standIn": CLEARED, "roughTokens": 900}})
    t.call("c3")
    assert not ix.holds(str(t.path), ("c1",), None)  # named by the cut
    assert ix.holds(str(t.path), ("c2",), None) and ix.holds(str(t.path), ("c3",), None)
    t.entry({"type": "attachment", "attachment": {"type": "tool_results_cut", "callIds": "c2?"}})  # unreadable
    t.call("c4")
    assert not ix.holds(str(t.path), ("c2",), None) and not ix.holds(str(t.path), ("c3",), None)
    assert ix.holds(str(t.path), ("c4",), None)
    # the API cleared old tool uses for the request that produced this reply: which ones is not said
    t.entry({"type": "user", "message": {"content": "go on"}})
    t.entry({"type": "assistant", "message": {"content": [{"type": "text", "text": "ok"}], "context_management": {
        "applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2, "cleared_input_tokens": 5000}]}}})
    t.call("c5")
    assert not ix.holds(str(t.path), ("c4",), None) and ix.holds(str(t.path), ("c5",), None)
    t.entry({"type": "assistant", "message": {"content": [], "context_management": {
        "applied_edits": [], "client_cut_tool_uses": 1}}})
    t.call("c6")
    assert not ix.holds(str(t.path), ("c5",), None) and ix.holds(str(t.path), ("c6",), None)


def test_context_management_that_clears_no_tool_result_keeps_the_holding(tmp_path: Path) -> None:
    t, ix = T(tmp_path / "s.jsonl"), TranscriptIndex()
    t.call("c1")
    for cm in ({"applied_edits": [{"type": "clear_thinking_20251015", "cleared_thinking_turns": 3}]},
               {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 0}]},
               {"applied_edits": [], "client_cut_tool_uses": 0}):
        t.entry({"type": "assistant", "message": {"content": [], "context_management": cm}})
        assert ix.holds(str(t.path), ("c1",), None), cm
    for cm in ({"applied_edits": [{"type": "clear_tool_uses_20250919"}]}, {"applied_edits": ["?"]},
               {"applied_edits": [{"type": "clear_something_new"}]}, "?"):
        t2, ix2 = T(tmp_path / f"{len(str(cm))}.jsonl"), TranscriptIndex()
        t2.call("c1")
        t2.entry({"type": "assistant", "message": {"content": [], "context_management": cm}})
        assert not ix2.holds(str(t2.path), ("c1",), None), cm


def test_read_cache_withholds_a_result_the_host_cut(world: World) -> None:
    c, path = _claude(world)
    assert world.read(c, "a.py")["kind"] == "full"  # call toolu_world000001 delivers a.py
    assert world.read(c, "b.py")["kind"] == "full"
    assert world.read(c, "a.py")["kind"] == "stub"
    world.transcript_entry(path, {"type": "attachment", "attachment": {
        "type": "tool_results_cut", "callIds": ["toolu_world000001"], "standIn": CLEARED, "roughTokens": 900}})
    assert world.read(c, "a.py")["kind"] == "full"  # the context shows the placeholder now
    assert world.read(c, "b.py")["kind"] == "stub"  # not cut
    assert world.read(c, "a.py")["kind"] == "stub"  # re-sent after the cut


def test_a_result_the_host_kept_only_a_preview_of_is_not_held(tmp_path: Path) -> None:
    """Claude Code saves an MCP result too large for it (over 50,000 characters in 2.1.197) to a
    file and gives the model `<persisted-output>` with a preview: the bytes never reached it."""
    t, ix = T(tmp_path / "s.jsonl"), TranscriptIndex()
    preview = "<persisted-output>\nOutput too large (177.6KB). Full output saved to: /x/tool-results/c1.json\n\n" \
              "Preview (first 2KB):\ndef f():\n...\n</persisted-output>"
    t.call("c1", content=preview)
    t.call("c2", content=[{"type": "text", "text": preview}])
    t.call("c3", content=[{"type": "text", "text": "def f():\n    return '<persisted-output>'\n"}])
    assert not ix.holds(str(t.path), ("c1",), None)
    assert not ix.holds(str(t.path), ("c2",), None)
    assert ix.holds(str(t.path), ("c3",), None)  # the marker inside a file's text is not a preview
