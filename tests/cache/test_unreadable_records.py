"""A conversation record the daemon read before but cannot read now (a "ghost": torn, failed read,
vanished) may hide ANY update since: a prompt that made its chat active, a SubagentStart, a
resume that reopened it or moved it to another host process. Connection-level identity picks the
caller by elimination (the one active record of the connection's host), so while a ghost is live
no caller may be picked that way: stubs, pointers and diffs are withheld for every
record-based scope, and what is served then is never credited to anyone.

Found by the property test (tests/cache/test_property.py): on a Cursor process with two chats,
chat0's record turned unreadable right after its prompt; its last good state (started, idle for
more than 30 s) made chat1 look like the only active chat, so chat0's read was credited to chat1,
and chat1 then got a stub for bytes it never received."""

from __future__ import annotations

import os
import tempfile

import pytest

from leanctx.cache import tokens
from bench.support.replay import Engine, Oracle, Ours
from leanctx.cache.scope import CONCURRENCY_WINDOW_S, RECORD_MAX_AGE_S

from .conftest import World, code

TEXT = "".join(f"def f_{i}(x):\n    return x * {i}\n" for i in range(1, 21))


@pytest.fixture(autouse=True)
def fast_tokens():
    saved = tokens._TOKENIZER
    tokens._TOKENIZER = tokens.Tokenizer(tokens.ESTIMATE)
    yield
    tokens._TOKENIZER = saved


def replay(events: list[dict]) -> tuple[Ours, Oracle]:
    with tempfile.TemporaryDirectory() as base:
        ours, oracle = Ours(), Oracle()
        Engine(base, [ours, oracle]).run(events)
    return ours, oracle


def two_idle_chats_then_chat1_reads(agent: str = "cursor") -> list[dict]:
    """One host process with chat0 and chat1 started; chat1 starts a turn 31 s later and reads
    a.py (the daemon samples both records then: chat0 is idle)."""
    return [{"op": "host", "host": "h", "agent": agent}, {"op": "write", "path": "a.py", "text": TEXT},
            {"op": "hook", "host": "h", "event": "start", "conv": "chat0"},
            {"op": "hook", "host": "h", "event": "start", "conv": "chat1"},
            {"op": "tick", "s": CONCURRENCY_WINDOW_S + 1},
            {"op": "hook", "host": "h", "event": "prompt", "conv": "chat1"},
            {"op": "read", "host": "h", "conv": "chat1", "path": "a.py"}]


def chat0_wakes_unseen(*, sub: bool = False) -> list[dict]:
    """chat0 starts a turn (and a subagent), and the daemon cannot read that update."""
    evs = [{"op": "hook", "host": "h", "event": "prompt", "conv": "chat0"}]
    if sub:
        evs.append({"op": "hook", "host": "h", "event": "sub_start", "conv": "chat0", "sub": "ag1"})
    return evs + [{"op": "miss", "host": "h", "conv": "chat0"}]


def test_found_by_the_property_a_stale_ghost_made_another_chat_look_alone() -> None:
    """The shrunk example, exactly: compact-free, miss -> edit -> chat0 reads -> chat1 got a stub."""
    events = (two_idle_chats_then_chat1_reads() + chat0_wakes_unseen(sub=True)
              + [{"op": "edit", "path": "a.py", "mode": "line", "n": 0},
                 {"op": "read", "host": "h", "conv": "chat0", "path": "a.py", "fresh": True},
                 {"op": "read", "host": "h", "conv": "chat1", "path": "a.py"}])
    ours, oracle = replay(events)
    assert ours.wrong == 0, ours.wrong_examples
    assert oracle.wrong == 0
    assert ours.sequence == ["full", "full", "full"]


@pytest.mark.parametrize("sub", [False, True])
def test_the_unseen_chat_never_gets_the_other_chats_stub(sub: bool) -> None:
    ours, _ = replay(two_idle_chats_then_chat1_reads() + chat0_wakes_unseen(sub=sub)
                     + [{"op": "read", "host": "h", "conv": "chat0", "path": "a.py"}])
    assert ours.wrong == 0, ours.wrong_examples
    assert ours.sequence == ["full", "full"]


def test_no_wrong_pointer_after_a_ghost() -> None:
    events = two_idle_chats_then_chat1_reads()
    events[-1] = dict(events[-1], start=30, end=40)
    events += chat0_wakes_unseen() + [
        {"op": "read", "host": "h", "conv": "chat0", "path": "a.py", "start": 1, "end": 20},
        {"op": "read", "host": "h", "conv": "chat1", "path": "a.py", "start": 1, "end": 40}]
    ours, _ = replay(events)
    assert ours.wrong == 0, ours.wrong_examples
    assert "pointer" not in ours.sequence


def test_no_wrong_diff_after_a_ghost() -> None:
    events = two_idle_chats_then_chat1_reads() + chat0_wakes_unseen() + [
        {"op": "edit", "path": "a.py", "mode": "line", "n": 0},
        {"op": "read", "host": "h", "conv": "chat0", "path": "a.py"},
        {"op": "edit", "path": "a.py", "mode": "line", "n": 5},
        {"op": "read", "host": "h", "conv": "chat1", "path": "a.py"}]
    ours, _ = replay(events)
    assert ours.wrong == 0, ours.wrong_examples
    assert ours.sequence == ["full", "full", "full"]


def test_a_ghost_persisted_across_a_daemon_restart_still_withholds() -> None:
    """The last good records survive a restart (.last_good.json), and so does their doubt."""
    events = two_idle_chats_then_chat1_reads() + [{"op": "restart", "graceful": True}] + chat0_wakes_unseen() + [
        {"op": "restart", "graceful": True},
        {"op": "read", "host": "h", "conv": "chat0", "path": "a.py"},
        {"op": "read", "host": "h", "conv": "chat1", "path": "a.py"}]
    ours, _ = replay(events)
    assert ours.wrong == 0, ours.wrong_examples
    assert ours.sequence == ["full", "full", "full"]


def test_once_the_record_reads_well_again_stubs_come_back() -> None:
    """The miss ends with chat0's next hook event; chat1 (who really read a.py) gets its stub
    once chat0 is done (on Cursor: ended; a chat still open may take a prompt whose hook is lost),
    and nothing chat0 was served meanwhile was credited to chat1."""
    events = two_idle_chats_then_chat1_reads() + chat0_wakes_unseen() + [
        {"op": "read", "host": "h", "conv": "chat0", "path": "a.py"},
        {"op": "hook", "host": "h", "event": "end", "conv": "chat0"},
        {"op": "tick", "s": CONCURRENCY_WINDOW_S + 1},
        {"op": "read", "host": "h", "conv": "chat1", "path": "a.py"},
        {"op": "read", "host": "h", "conv": "chat1", "path": "a.py"}]
    ours, oracle = replay(events)
    assert ours.wrong == 0, ours.wrong_examples
    # (chat1's first read came while chat0 was open too: served, credited to nobody)
    assert ours.sequence == ["full", "full", "full", "stub"]
    assert oracle.sequence == ["full", "full", "stub", "stub"]


# -- the same mechanism, seen through the resolver ---------------------------------------------


def _file(world: World) -> str:
    world.write("src/app.py", code(120))
    return "src/app.py"


def test_a_torn_record_on_another_host_withholds_elimination(world: World) -> None:
    """`claude --resume s0` in process p2 whose record write the daemon cannot read: s0 may now
    be p2's live session beside p2's own s1, so p2 cannot pick s1 by elimination."""
    f = _file(world)
    p1, p2 = world.host(), world.host()
    world.session(p1, "s0")
    world.hook(p1, "stop", "s0")
    world.session(p2, "s1")
    c2 = world.conn(p2)
    world.scope(c2)  # both records sampled
    world.read(c2, f)
    assert world.read(c2, f)["kind"] == "stub"
    rec = world.hook(p2, "start", "s0", source="resume")  # s0 moves to p2...
    with open(rec, "w") as fh:
        fh.write('{"torn')  # ...and the daemon cannot read it
    s = world.scope(c2)
    assert not s.stub_ok and "unreadable" in s.reason
    assert world.read(c2, f)["kind"] == "full"


def test_a_vanished_record_withholds_elimination_until_it_ages_out(world: World) -> None:
    f = _file(world)
    cur = world.host("cursor")
    c = world.conn(cur)
    world.session(cur, "chat-a")
    world.hook(cur, "stop", "chat-a")
    rec_b = world.hook(cur, "start", "chat-b")
    world.hook(cur, "end", "chat-b")  # (an open chat-b would withhold on its own: a lost prompt)
    world.tick(CONCURRENCY_WINDOW_S + 1)
    world.hook(cur, "prompt", "chat-a")
    world.scope(c)
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    os.remove(rec_b)  # chat-b may have been resumed before it vanished
    assert not world.scope(c).stub_ok
    assert world.read(c, f)["kind"] == "full"
    world.tick(RECORD_MAX_AGE_S + 1)
    world.hook(cur, "prompt", "chat-a")
    s = world.scope(c)
    assert s.stub_ok and s.key.startswith("cursor:chat-a@")


def test_a_ghost_that_ages_out_while_still_unreadable_is_still_doubted(world: World) -> None:
    """Its last good update is 2 h old, but the write we cannot read is recent: once the ghost is
    forgotten the file is an unreadable record of unknown host, which still withholds."""
    f = _file(world)
    cur = world.host("cursor")
    c = world.conn(cur)
    rec_b = world.hook(cur, "start", "chat-b")
    world.tick(RECORD_MAX_AGE_S - 60)
    world.session(cur, "chat-a")
    world.scope(c)
    with open(rec_b, "w") as fh:
        fh.write('{"torn')  # chat-b wakes now; the daemon cannot read it
    assert not world.scope(c).stub_ok
    world.tick(120)  # chat-b's last good state is older than 2 h now
    s = world.scope(c)
    assert not s.stub_ok and "host unknown" in s.reason
    assert world.read(c, f)["kind"] == "full"
    assert world.read(c, f)["kind"] == "full"
