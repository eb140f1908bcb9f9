"""Every bound, fallback and second process may only withhold: a context that lost what it read
(or never had it) is never credited with it again."""

from __future__ import annotations

import os
import tempfile

import pytest

from bench.support.replay import Engine, Oracle, Ours, load_trace
from leanctx.cache.scope import IN_TURN_MAX_AGE_S, MAX_CONNECTIONS, RECORD_MAX_AGE_S
from tests.conftest import REPO

from .conftest import World, code

OPT_OUT = {"LEANCTX_CONVERSATION_SCOPE": "0"}


def _file(world: World, rel: str = "src/app.py", tag: str = "x") -> str:
    world.write(rel, code(120, tag))
    return rel


# -- one session open in two host processes ----------------------------------------------------


def test_a_session_resumed_in_a_second_process_gets_nothing_the_first_one_read(world: World) -> None:
    a, b = _file(world, "a.py", "a"), _file(world, "b.py", "b")
    first, second = world.host("claude"), world.host("claude")
    world.session(first, "s1")
    c1 = world.conn(first, "c1", env={"CLAUDE_CODE_SESSION_ID": "s1"})
    assert world.read(c1, a)["kind"] == "full"
    world.session(second, "s1", source="resume")  # `claude --resume s1` while the first still runs
    c2 = world.conn(second, "c2", env={"CLAUDE_CODE_SESSION_ID": "s1"})
    assert world.scope(c2).key != world.scope(c1).key or world.scope(c1).key is None
    assert world.read(c2, a)["kind"] == "full"  # the first process's delivery is not the second's
    world.tick(40)
    world.hook(first, "prompt", "s1")  # the first process writes the record last
    assert world.read(c1, b)["kind"] == "full"
    assert world.read(c1, a)["kind"] == "stub"  # its own holding is still its own
    world.tick(40)
    world.hook(second, "prompt", "s1")
    assert world.read(c2, b)["kind"] == "full"  # only the first process read b.py
    assert world.read(c2, a)["kind"] == "stub"


def _resumed_after_exit(world: World):
    """A session read in one process that then exits; `claude --resume s1` opens it in another."""
    a, b = _file(world, "a.py", "a"), _file(world, "b.py", "b")
    first, second = world.host("claude"), world.host("claude")
    world.session(first, "s1")
    c1 = world.conn(first, "c1", env={"CLAUDE_CODE_SESSION_ID": "s1"})
    assert world.read(c1, a)["kind"] == "full"
    world.hook(first, "stop", "s1")
    world.hook(first, "end", "s1")
    world.exit(first)
    world.tick(5)
    world.session(second, "s1", source="resume")
    return a, b, first, second, world.conn(second, "c2", env={"CLAUDE_CODE_SESSION_ID": "s1"})


def test_a_session_resumed_after_its_process_exited_holds_what_its_transcript_shows(world: World) -> None:
    a, b, _first, _second, c2 = _resumed_after_exit(world)
    assert world.read(c2, a)["kind"] == "stub"  # the exited process's delivery is on this context's chain
    assert world.read(c2, b)["kind"] == "full"  # never read
    assert world.read(c2, b)["kind"] == "stub"


def test_an_inherited_holding_needs_the_transcript_and_the_counter(world: World) -> None:
    a, _b, _first, _second, c2 = _resumed_after_exit(world)
    path = str(world.tmp / "transcripts" / "s1.jsonl")
    # resumed at an entry before the read (`--resume-session-at`, or a rewind): not on the chain
    world.transcript_entry(path, {"type": "user", "message": {"content": "before the read"}}, parent=None)
    assert world.read(c2, a)["kind"] == "full"


def test_an_inherited_holding_does_not_survive_a_compaction(world: World) -> None:
    a, _b, _first, second, c2 = _resumed_after_exit(world)
    world.hook(second, "compact", "s1")
    path = str(world.tmp / "transcripts" / "s1.jsonl")
    world.transcript_entry(path, {"type": "system", "subtype": "compact_boundary"}, parent=None)
    assert world.read(c2, a)["kind"] == "full"


def test_a_holding_of_a_process_that_still_runs_is_never_inherited(world: World) -> None:
    a, _b, first, second, c2 = _resumed_after_exit(world)
    world.gone.clear()  # the first process still runs after all
    assert world.read(c2, a)["kind"] == "full"


def test_the_key_of_a_record_names_its_host_process(world: World) -> None:
    h = world.host("codex", pid=4242, ticks=99)
    world.session(h, "t1")
    s = world.scope(world.conn(h))
    assert s.key.startswith("codex:t1@") and s.key.endswith("#4242:99")


# -- bounds in time ------------------------------------------------------------------------------


def test_a_subagent_window_never_closes_by_time_alone(world: World) -> None:
    h = world.host("claude")
    world.session(h, "s1")
    world.hook(h, "sub_start", "s1", sub="ag1")
    world.tick(IN_TURN_MAX_AGE_S + 60)
    world.hook(h, "prompt", "s1")  # the record is fresh, the subagent still has not stopped
    s = world.scope(world.conn(h))
    assert s.stub_ok is False and "subagent window open" in s.reason
    world.hook(h, "sub_stop", "s1", sub="ag1")
    assert world.scope(world.conn(h)).stub_ok is True


def test_a_chat_inside_a_turn_keeps_its_host_ambiguous_past_a_day(world: World) -> None:
    f = _file(world)
    h = world.host("cursor")
    world.session(h, "c1")  # inside a turn, then silent
    world.session(h, "c2")
    world.hook(h, "stop", "c2")
    world.tick(IN_TURN_MAX_AGE_S + 60)
    world.hook(h, "prompt", "c2")
    c = world.conn(h)
    s = world.scope(c)
    assert s.stub_ok is False and "conversations" in s.reason and "on this host process" in s.reason
    world.read(c, f)  # may be c1's read
    assert world.read(c, f)["kind"] == "full"


# -- the opt-out mode: one connection = one conversation -----------------------------------------


def _opt_out_stub(world: World):
    """A Claude Code session whose MCP connection runs in the opt-out mode and holds one file."""
    f = _file(world)
    h = world.host("claude")
    world.session(h, "s1")
    c = world.conn(h, "legacy", env=OPT_OUT)
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    return h, c, f


def test_opt_out_connection_evicted_from_the_lru_never_finds_its_old_holdings(world: World) -> None:
    h, c, f = _opt_out_stub(world)
    world.hook(h, "compact", "s1")
    for i in range(MAX_CONNECTIONS + 1):  # its counter (now 1) falls out of the LRU
        world.resolver.resolve(world.conn(None, f"other-{i}"))
    assert world.read(c, f)["kind"] == "full"
    assert world.read(c, f)["kind"] == "stub"


def test_opt_out_clear_starts_the_connection_afresh(world: World) -> None:
    h, c, f = _opt_out_stub(world)
    world.hook(h, "end", "s1", reason="clear")  # /clear: the MCP server survives it
    world.hook(h, "start", "s2", source="clear")
    assert world.read(c, f)["kind"] == "full"
    assert world.read(c, f)["kind"] == "stub"


# -- explicit scopes -----------------------------------------------------------------------------


def test_explicit_scope_keeps_its_record_counter_when_the_record_goes_stale(world: World) -> None:
    f, g = _file(world, "a.py", "a"), _file(world, "b.py", "b")
    h = world.host("claude")
    world.session(h, "s1")
    c = world.conn(None, "c", env={"LEANCTX_SCOPE": "s1"})
    world.tick(RECORD_MAX_AGE_S + 100)
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    world.hook(h, "compact", "s1")
    assert world.read(c, g)["kind"] == "full"
    world.tick(RECORD_MAX_AGE_S + 100)  # no hook event on this side of the compaction either
    s = world.scope(c)
    assert s.compactions == 1 and s.key.startswith("custom:s1@")
    assert world.read(c, f)["kind"] == "full"


def test_explicit_scope_whose_record_is_gone_never_takes_the_bare_key_again(world: World) -> None:
    f = _file(world)
    c = world.conn(None, "c", env={"LEANCTX_SCOPE": "s1"})
    world.read(c, f)  # no record yet: the bare key
    assert world.read(c, f)["kind"] == "stub"
    h = world.host("claude")
    world.session(h, "s1")
    world.hook(h, "compact", "s1")
    assert world.read(c, f)["kind"] == "full"
    rec = next(p for p in (world.data / "conversations").rglob("*.json") if not p.name.startswith("."))
    os.unlink(rec)  # pruned, and forgotten as a ghost
    world.tick(IN_TURN_MAX_AGE_S + 60)
    world.restart()  # the remembered incarnation survives a restart
    s = world.scope(c)
    assert s.key != "custom:s1"
    assert world.read(c, f)["kind"] == "full"


# -- the adversarial traces ------------------------------------------------------------------------

TRACES = sorted(p for p in (REPO / "bench" / "traces").glob("*.jsonl")
                if any(k in p.name for k in ("resume-two-processes", "past-bound", "optout-", "explicit-scope-stale")))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_adversarial_trace_gets_no_wrong_stub(path) -> None:  # noqa: ANN001
    with tempfile.TemporaryDirectory() as base:
        ours, oracle = Ours(), Oracle()
        Engine(base, [ours, oracle]).run(load_trace(str(path)))
    assert oracle.wrong == 0
    assert ours.wrong == 0, ours.wrong_examples


def test_the_adversarial_traces_are_all_there() -> None:
    assert len(TRACES) == 8
