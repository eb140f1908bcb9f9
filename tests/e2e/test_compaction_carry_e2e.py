"""End to end: carrying a coding session across `/compact` with the real Claude Code 2.1.197.

The scenario and its figures are in tests/e2e/compaction_scenario.py (shared with
bench/compaction_carry.py): 8 files read, todos, an edit, a failing command; `/compact` with a
poor summary; a re-attached file changed on disk; all 8 re-read. Three ways: no leanctx,
leanctx without carry (LEANCTX_CARRY=0, what it did before), leanctx with carry.
"""
from __future__ import annotations

import json
from pathlib import Path

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
    # the PreCompact instruction reached the summariser, with the paths worked with
    prompt = sc.compaction_prompt(out)
    assert "Additional Instructions:" in prompt and "do not copy file contents" in prompt, prompt[-600:]
    assert '"big.py"' in prompt[prompt.index("Additional Instructions:"):]  # a path is a quoted string
    # one card, all planted facts, within 1.5 KB, no file contents
    card = sc.card_of(out["bodies"][0])
    assert card is not None and len(card.encode()) <= 1536, card
    assert fig["card_facts"] == sorted(sc.PLANTED), card
    assert "(exit 3)" in card and 'Files edited: "f2.py"' in card, card
    assert 'Changed on disk since last read: "f1.py"' in card, card
    assert str(sc.transcript_of(out["home"])) in card, card
    assert not any(sc.marker(n) in card for n in sc.ORDER)
    assert json_count(out["bodies"][0], sc.CARD_HEAD) == 1  # injected once


def test_without_carry_every_reattached_file_is_sent_twice(claude_cli, tmp_path):
    """What leanctx did before (and does with LEANCTX_CARRY=0): the counter moved, so every
    re-read is full, including the 5 files Claude Code had just re-attached."""
    out = sc.run_way(claude_cli, tmp_path, "before")
    fig = sc.figures(out)
    assert fig["attached"] == sc.ATTACHED, fig
    assert set(fig["verdicts"].values()) == {"full"}, fig["verdicts"]
    assert fig["duplicates"] == len(sc.ATTACHED), fig
    assert fig["card_bytes"] == 0 and "leanctx:" not in sc.compaction_prompt(out)


def json_count(body: dict, text: str) -> int:
    return json.dumps(body).count(text)


def test_automatic_compaction_in_one_process(claude_cli, tmp_path):
    """A high usage figure makes Claude Code 2.1.197 compact on its own, mid-turn, in the same
    process. It writes the boundary and the attachments to the transcript only after the turn's
    first read, so that read is full; the transcript is looked at again as it grows, and every
    later read of a re-attached file is the stub. Never a stub for a file it did not attach."""
    from leanctx.cache import carry

    out = sc.run_auto(claude_cli, tmp_path)
    assert out["kinds"].count("compact") == 1, out["kinds"]
    found = carry.last_boundary(str(sc.transcript_of(out["home"])))
    assert found is not None
    attached = {Path(f.path).name for f in found.files}
    verdicts = {n: sc.verdict(t, n) for n, t in out["results"].items()}
    stubs = {n for n, v in verdicts.items() if v == "stub"}
    assert stubs <= attached, (verdicts, attached)  # never a stub for what was not attached
    assert set(verdicts.values()) <= {"stub", "full"}, verdicts
    later = [n for n in sc.ORDER[2:] if n in attached]  # read after two tool rounds since the compaction
    assert later and all(verdicts[n] == "stub" for n in later), (verdicts, attached)
    card = sc.card_of(out["first"])
    assert card is not None and len(card.encode()) <= 1536
