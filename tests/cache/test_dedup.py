"""Range dedup (codegraph CG-17/18 semantics, keyed by conversation + compaction counter)."""

from __future__ import annotations

import re

from leanctx.cache import ReadCache
from leanctx.cache import dedup as d

from .conftest import World


def lines(n: int, width: int = 40) -> str:
    return "".join(f"{i:>5} " + "v" * (width - 6) + "\n" for i in range(1, n + 1))


# -- range algebra (codegraph's explore-cross-call-dedup "range algebra" cases) ---------------------


def test_subtract_and_intersect() -> None:
    assert d.subtract((1, 100), [(20, 40)]) == [(1, 19), (41, 100)]
    assert d.subtract((10, 50), [(1, 20)]) == [(21, 50)]
    assert d.subtract((10, 50), [(30, 90)]) == [(10, 29)]
    assert d.subtract((10, 50), [(1, 90)]) == []
    assert d.intersect((10, 50), [(1, 20), (45, 80)]) == [(10, 20), (45, 50)]
    assert d.intersect((10, 50), [(60, 70)]) == []
    assert d.merge([(5, 9), (10, 12), (40, 41)]) == [(5, 12), (40, 41)]


def test_plan_emits_only_the_delta_and_needs_eight_lines() -> None:
    assert d.plan((80, 200), [(100, 140)]) == ([(100, 140)], [(80, 99), (141, 200)])
    assert d.plan((1, 100), [(10, 16)]) == ([], [(1, 100)])  # 7 lines: not worth a pointer
    assert d.plan((1, 100), [(10, 17)]) == ([(10, 17)], [(1, 9), (18, 100)])
    assert d.plan((1, 100), []) == ([], [(1, 100)])


def test_invalid_spans_are_discarded_not_clamped() -> None:
    assert d.merge([(0, 5), (7, 3), (2.5, 9), ("a", 3), (True, 4), (10, 12)]) == [(10, 12)]


def test_cap_drops_the_smallest_spans_first() -> None:
    spans = [(i * 100 + 1, i * 100 + 1 + (i % 7)) for i in range(30)]
    kept, truncated = d.coalesce(spans, cap=24)
    assert truncated and len(kept) == 24
    dropped = set(spans) - set(kept)
    assert max(e - s for s, e in dropped) <= min(e - s for s, e in kept)
    assert all(any(s <= ks and ke <= e for s, e in spans) for ks, ke in kept)  # never more than held


# -- through the cache ----------------------------------------------------------------------------------


def _conn(world: World):
    h = world.host()
    world.session(h, "s1")
    return h, world.conn(h)


def test_partial_overlap_sends_a_pointer_and_only_the_new_lines(world: World) -> None:
    world.write("src/big.py", lines(300))
    _, c = _conn(world)
    world.read(c, "src/big.py", 1, 80)
    world.read(c, "src/big.py", 120, 160)
    r = world.read(c, "src/big.py", 1, 200)
    assert r["kind"] == "pointer"
    assert r["claims"]["spans"] == [[1, 80], [120, 160]]
    t = r["text"]
    assert t.startswith("[partly unchanged] src/big.py L1-200 of 300 lines: L1-80, L120-160 were already sent")
    assert "unchanged on disk since" in t and "fresh=true" in t
    assert not re.search(r"omitted|unavailable", t, re.IGNORECASE)
    assert "@@ L81-119 @@" in t and "@@ L161-200 @@" in t
    sent = {int(m) for m in re.findall(r"^\s*(\d+) v", t, re.MULTILINE)}
    assert sent == set(range(81, 120)) | set(range(161, 201))  # no line sent twice
    assert world.read(c, "src/big.py", 1, 200)["kind"] == "stub"  # now it holds all of it


def test_short_remainder_folds_into_the_pointer(world: World) -> None:
    world.write("src/big.py", lines(300))
    _, c = _conn(world)
    world.read(c, "src/big.py", 1, 100)
    r = world.read(c, "src/big.py", 50, 102)
    assert r["kind"] == "pointer"
    t = r["text"]
    assert "L50-100 was already sent earlier in this conversation" in t
    assert "the only new lines are L101-102:" in t and "@@" not in t
    assert "\n101\t  101 v" in t and "\n102\t  102 v" in t


def test_whole_file_read_after_windows_uses_the_pointer_too(world: World) -> None:
    world.write("src/big.py", lines(100))
    _, c = _conn(world)
    world.read(c, "src/big.py", 1, 60)
    r = world.read(c, "src/big.py")
    assert r["kind"] == "pointer" and r["claims"]["spans"] == [[1, 60]]


def test_small_overlap_is_sent_again(world: World) -> None:
    world.write("src/big.py", lines(300))
    _, c = _conn(world)
    world.read(c, "src/big.py", 1, 57)
    r = world.read(c, "src/big.py", 51, 120)  # 7 held lines overlap
    assert r["kind"] == "full" and r["window"] == [51, 120]


def test_window_inside_held_ranges_is_the_ordinary_stub(world: World) -> None:
    world.write("src/big.py", lines(300))
    _, c = _conn(world)
    world.read(c, "src/big.py", 1, 80)
    world.read(c, "src/big.py", 81, 150)  # adjacent: one held block
    r = world.read(c, "src/big.py", 70, 90)
    assert r["kind"] == "stub" and "src/big.py L70-90 of 300 lines" in r["text"]


def test_edit_invalidates_held_ranges(world: World) -> None:
    world.write("src/big.py", lines(300))
    _, c = _conn(world)
    world.read(c, "src/big.py", 1, 100)
    world.write("src/big.py", lines(300).replace("    5 v", "    5 w"))
    assert world.read(c, "src/big.py", 50, 150)["kind"] == "full"


def test_compaction_invalidates_held_ranges(world: World) -> None:
    world.write("src/big.py", lines(300))
    h, c = _conn(world)
    world.read(c, "src/big.py", 1, 100)
    world.hook(h, "compact", "s1")
    assert world.read(c, "src/big.py", 50, 150)["kind"] == "full"


def test_other_conversation_gets_no_pointer(world: World) -> None:
    world.write("src/big.py", lines(300))
    _, c = _conn(world)
    world.read(c, "src/big.py", 1, 100)
    h2 = world.host()
    world.session(h2, "s2")
    assert world.read(world.conn(h2), "src/big.py", 50, 150)["kind"] == "full"


def test_kill_switch(world: World, monkeypatch) -> None:
    world.write("src/big.py", lines(300))
    monkeypatch.setenv("LEANCTX_DEDUP", "0")
    world.cache = ReadCache(None)
    _, c = _conn(world)
    world.read(c, "src/big.py", 1, 100)
    assert world.read(c, "src/big.py", 50, 150)["kind"] == "full"
    assert world.read(c, "src/big.py", 20, 60)["kind"] == "stub"  # ordinary stubs stay on


def test_memory_is_bounded_and_under_reports(world: World) -> None:
    world.write("src/big.py", lines(2000))
    _, c = _conn(world)
    windows = [(i * 50 + 1, i * 50 + 10 + (i % 5)) for i in range(30)]  # 30 separate windows
    for s, e in windows:
        world.read(c, "src/big.py", s, e)
    scope = world.scope(c)
    h = world.cache._convs[scope.key].held[str(world.path("src/big.py").resolve())]
    assert len(h.ranges) == d.MAX_RANGES_PER_FILE
    lost = [w for w in windows if tuple(w) not in h.ranges]
    assert len(lost) == 30 - d.MAX_RANGES_PER_FILE
    kept_len = min(e - s for s, e in h.ranges)
    assert all(e - s <= kept_len for s, e in lost)  # the smallest went first
    s, e = lost[0]
    assert world.read(c, "src/big.py", s, e)["kind"] == "full"  # under-report: re-sent, never a wrong stub


def test_partial_holdings_per_conversation_are_bounded(world: World) -> None:
    from leanctx.cache import readcache

    world.write("src/big.py", lines(100))
    _, c = _conn(world)
    old = readcache.MAX_RANGE_FILES_PER_CONVERSATION
    readcache.MAX_RANGE_FILES_PER_CONVERSATION = 3
    try:
        for i in range(5):
            world.write(f"src/f{i}.py", lines(100))
            world.read(c, f"src/f{i}.py", 1, 40)
        world.read(c, "src/big.py")  # whole files do not count against the range bound
    finally:
        readcache.MAX_RANGE_FILES_PER_CONVERSATION = old
    held = world.cache._convs[world.scope(c).key].held
    assert sum(1 for h in held.values() if not h.whole) == 3
    assert world.read(c, "src/f0.py", 1, 40)["kind"] == "full"  # evicted: re-sent, never wrong
    assert world.read(c, "src/f4.py", 1, 40)["kind"] == "stub"
