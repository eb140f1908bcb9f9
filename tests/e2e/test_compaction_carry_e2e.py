"""End to end: carrying a coding session across `/compact` with the real Claude Code 2.1.197.

The scenario and its figures are in tests/e2e/compaction_scenario.py (shared with
bench/compaction_carry.py): 8 files read, todos, an edit, a failing command; `/compact` with a
poor summary; a re-attached file changed on disk; all 8 re-read. Three ways: no leanctx,
leanctx without carry (LEANCTX_CARRY=0, what it did before), leanctx with carry.
"""
from __future__ import annotations

import pytest

from tests.e2e import compaction_scenario as sc

pytestmark = pytest.mark.e2e


def test_carry_reattached_files_get_stubs_and_a_changed_one_a_diff(claude_cli, tmp_path):
    out = sc.run_way(claude_cli, tmp_path, "carry")
    fig = sc.figures(out)
    # Claude Code re-attached the 5 most recently read or edited files whole, not big.py
    assert fig["attached"] == sc.ATTACHED, fig
    want = {n: "stub" for n in sc.ATTACHED} | {sc.CHANGED: "diff", sc.BIG: "full", "f1.py": "full", "f3.py": "full"}
    assert fig["verdicts"] == want, fig["verdicts"]
    assert "77510" in out["results"][sc.CHANGED]
    assert fig["duplicates"] == 0, fig
    last = out["bodies"][-1]
    assert all(sc.copies(last, n) == 1 for n in sc.ATTACHED)


def test_without_carry_every_reattached_file_is_sent_twice(claude_cli, tmp_path):
    """What leanctx did before (and does with LEANCTX_CARRY=0): the counter moved, so every
    re-read is full, including the 5 files Claude Code had just re-attached."""
    fig = sc.figures(sc.run_way(claude_cli, tmp_path, "before"))
    assert fig["attached"] == sc.ATTACHED, fig
    assert set(fig["verdicts"].values()) == {"full"}, fig["verdicts"]
    assert fig["duplicates"] == len(sc.ATTACHED), fig
