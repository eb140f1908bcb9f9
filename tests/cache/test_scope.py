"""Conversation scope: who is asking, and may a stub be served to it right now."""

from __future__ import annotations

import json
import os
from pathlib import Path

from leanctx.cache.scope import (
    CONCURRENCY_WINDOW_S,
    RECORD_MAX_AGE_S,
    REFRESH_TTL_S,
    Connection,
)

from .conftest import World, code


def _file(world: World) -> str:
    world.write("src/app.py", code(120))
    return "src/app.py"


# -- explicit and task scopes ---------------------------------------------------------------------


def test_explicit_scope_wins_without_any_record(world: World) -> None:
    f = _file(world)
    c = world.conn(None, "c1", env={"LEANCTX_SCOPE": " bot-7 "})
    s = world.scope(c)
    assert (s.key, s.stub_ok) == ("custom:bot-7", True)
    assert world.read(c, f)["kind"] == "full"
    assert world.read(c, f)["kind"] == "stub"
    other = world.conn(None, "c2", env={"LEANCTX_SCOPE": "bot-8"})
    assert world.read(other, f)["kind"] == "full"


def test_explicit_scope_takes_compactions_and_subagents_from_a_record_of_the_same_id(world: World) -> None:
    f = _file(world)
    h = world.host("claude")
    world.session(h, "sess-1")
    c = world.conn(None, "c1", env={"LEANCTX_SCOPE": "sess-1"})
    s = world.scope(c)
    assert s.key.startswith("custom:sess-1@") and s.compactions == 0
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    world.hook(h, "compact", "sess-1")
    assert world.scope(c).compactions == 1
    assert world.read(c, f)["kind"] == "full"
    world.hook(h, "sub_start", "sess-1", sub="ag1")
    assert world.scope(c).stub_ok is False
    assert world.read(c, f)["kind"] == "full"


def test_cursor_task_scope_is_bound_to_its_host_process(world: World) -> None:
    """Another process started with the same CURSOR_TASK_ID under another host shares nothing."""
    f = _file(world)
    cursor, other = world.host("cursor", pid=4242), world.host("claude", pid=4343)
    sub = world.conn(cursor, "sub", env={"CURSOR_TASK_ID": "task-a"})
    spoof = world.conn(other, "spoof", env={"CURSOR_TASK_ID": "task-a"})
    assert world.read(spoof, f)["kind"] == "full"
    assert world.read(sub, f)["kind"] == "full"
    assert world.read(sub, f)["kind"] == "stub"
    assert world.read(spoof, f)["kind"] == "stub"  # its own reads only


def test_cursor_task_scope_is_its_own_conversation(world: World) -> None:
    f = _file(world)
    t1 = world.conn(None, "t1", env={"CURSOR_TASK_ID": "task-a"})
    t2 = world.conn(None, "t2", env={"CURSOR_TASK_ID": "task-b"})
    assert world.scope(t1).key == "task:task-a@None:None" and world.scope(t1).agent == "cursor"
    assert world.read(t1, f)["kind"] == "full"
    assert world.read(t2, f)["kind"] == "full"
    assert world.read(t1, f)["kind"] == "stub"
    assert world.read(t2, f)["kind"] == "stub"


def test_explicit_scope_beats_task_scope(world: World) -> None:
    c = world.conn(None, "c", env={"LEANCTX_SCOPE": "x", "CURSOR_TASK_ID": "t"})
    assert world.scope(c).key == "custom:x"


# -- records: staleness, caching, last-known-good -------------------------------------------------


def test_records_older_than_two_hours_are_ignored(world: World) -> None:
    f = _file(world)
    h = world.host()
    world.session(h, "s1")
    c = world.conn(h)
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    world.tick(RECORD_MAX_AGE_S + 1)
    s = world.scope(c)
    assert s.key is None and not s.stub_ok and "older than 2 h" in s.reason
    assert world.read(c, f)["kind"] == "full"
    world.hook(h, "prompt", "s1")  # the user comes back: the same conversation, stubs again
    assert world.read(c, f)["kind"] == "stub"


def test_cached_for_three_seconds_fresh_resamples(world: World) -> None:
    h = world.host()
    world.session(h, "s1")
    c = world.conn(h)
    assert world.resolver.resolve(c).key.startswith("claude:s1@")
    world.hook(h, "sub_start", "s1", sub="a1")
    assert world.resolver.resolve(c).stub_ok is True  # cached
    assert world.resolver.resolve(c, fresh=True).stub_ok is False  # re-sampled now
    world.hook(h, "sub_stop", "s1", sub="a1")
    world.tick(REFRESH_TTL_S - 0.5)
    assert world.resolver.resolve(c).stub_ok is False  # still the cached sample
    world.tick(1.0)
    assert world.resolver.resolve(c).stub_ok is True  # expired: sampled again


def test_last_known_good_keeps_the_identity_across_a_transient_miss(world: World) -> None:
    f = _file(world)
    h = world.host()
    world.session(h, "s1")
    c = world.conn(h)
    key = world.scope(c).key
    world.read(c, f)
    rec = world.hook(h, "prompt", "s1")
    saved = Path(rec).read_bytes()
    os.remove(rec)  # the daemon cannot see the record for a moment
    s = world.scope(c)
    assert s.key == key and not s.stub_ok and "transient miss" in s.reason
    assert s.roots == (str(world.root),)  # relative paths and path safety still work
    assert world.read(c, f)["kind"] == "full"  # the miss may hide a compaction: no stub
    with open(rec, "w") as fh:
        fh.write("{torn")  # unreadable counts as a miss too
    assert world.scope(c).key == key and not world.scope(c).stub_ok
    with open(rec, "wb") as fh:
        fh.write(saved)
    assert world.read(c, f)["kind"] == "stub"  # readable again: the stub is back


def test_a_miss_that_hid_a_compaction_never_serves_a_stale_stub(world: World) -> None:
    f = _file(world)
    h = world.host()
    world.session(h, "s1")
    c = world.conn(h)
    world.read(c, f)
    rec = world.hook(h, "compact", "s1")  # not sampled yet
    os.replace(rec, rec + ".away")
    assert world.read(c, f)["kind"] == "full"
    os.replace(rec + ".away", rec)
    assert world.scope(c).compactions == 1


def test_a_miss_on_a_multi_chat_host_keeps_the_host_ambiguous(world: World) -> None:
    f = _file(world)
    cur = world.host("cursor")
    c = world.conn(cur)
    world.session(cur, "chat-a")
    world.session(cur, "chat-b")
    world.read(c, f)
    rec_a = world.hook(cur, "prompt", "chat-a")
    world.scope(c)  # sampled
    os.remove(rec_a)  # chat-a is still working, but invisible now
    s = world.scope(c)
    assert not s.stub_ok and "2 conversations" in s.reason


def test_last_good_records_survive_a_daemon_restart(world: World) -> None:
    cur = world.host("cursor")
    c = world.conn(cur)
    world.session(cur, "chat-a")
    world.session(cur, "chat-b")
    rec_a = world.hook(cur, "prompt", "chat-a")
    world.scope(c)
    assert os.path.exists(os.path.join(world.data, "conversations", ".last_good.json"))
    os.remove(rec_a)
    world.restart()
    assert "2 conversations" in world.scope(c).reason


def test_an_unreadable_record_of_unknown_host_withholds_everywhere(world: World) -> None:
    h = world.host()
    world.session(h, "s1")
    c = world.conn(h)
    bad = os.path.join(world.data, "conversations", "cursor", "x.json")
    os.makedirs(os.path.dirname(bad), exist_ok=True)
    with open(bad, "w") as fh:
        fh.write("{not json")
    s = world.scope(c)
    assert s.key.startswith("claude:s1@") and not s.stub_ok and "host unknown" in s.reason
    os.remove(bad)
    assert world.scope(c).stub_ok


def test_last_known_good_expires_with_the_record_age(world: World) -> None:
    h = world.host()
    world.session(h, "s1")
    c = world.conn(h)
    rec = world.hook(h, "prompt", "s1")
    assert world.scope(c).stub_ok
    os.remove(rec)
    world.tick(RECORD_MAX_AGE_S + 1)
    s = world.scope(c)
    assert s.key is None and not s.stub_ok


def test_a_recreated_record_is_a_new_incarnation(world: World) -> None:
    """A lost record comes back with compactions=0: stubs from before must not revive."""
    f = _file(world)
    h = world.host()
    world.session(h, "s1")
    c = world.conn(h)
    assert world.read(c, f)["kind"] == "full"
    world.hook(h, "compact", "s1")
    rec = world.hook(h, "prompt", "s1")
    os.remove(rec)
    world.tick(1)
    world.hook(h, "prompt", "s1")  # re-created by the next event, counter back at 0
    s = world.scope(c)
    assert s.compactions == 0
    assert world.read(c, f)["kind"] == "full"


def test_a_record_moved_to_another_host_is_not_a_transient_miss(world: World) -> None:
    """`claude --resume s1` in a second process: the first process must lose the key."""
    f = _file(world)
    p1, p2 = world.host(), world.host()
    world.session(p1, "s1")
    c1, c2 = world.conn(p1), world.conn(p2)
    world.read(c1, f)
    world.hook(p2, "start", "s1", source="resume")
    world.hook(p2, "prompt", "s1")
    assert world.scope(c1).key is None
    assert world.read(c1, f)["kind"] == "full"
    # the first process may still be running: the second is its own context, so what the first
    # received is never the second's (even though a resumed transcript may hold it)
    assert world.read(c2, f)["kind"] == "full"
    assert world.read(c2, f)["kind"] == "stub"


# -- concurrency, subagents, identity ---------------------------------------------------------------


def test_several_chats_of_one_host_process_withhold_every_stub(world: World) -> None:
    f = _file(world)
    cur = world.host("cursor")
    c = world.conn(cur)
    world.session(cur, "chat-a")
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    world.session(cur, "chat-b")
    s = world.scope(c)
    assert not s.stub_ok and s.key is None and "2 conversations" in s.reason
    assert world.read(c, f)["kind"] == "full"
    world.hook(cur, "stop", "chat-a")
    world.tick(CONCURRENCY_WINDOW_S + 1)
    # chat-a stopped, but it is still open: a prompt of it whose hook is lost would make its reads
    # look like chat-b's, so the elimination waits until chat-a ends
    s = world.scope(c)
    assert not s.stub_ok and "2 conversations open" in s.reason
    world.hook(cur, "end", "chat-a")
    s = world.scope(c)
    assert s.stub_ok and s.key.startswith("cursor:chat-b@")
    assert world.read(c, f)["kind"] == "full"  # chat-b never received it
    assert world.read(c, f)["kind"] == "stub"


def test_a_chat_inside_a_long_turn_keeps_counting_as_active(world: World) -> None:
    f = _file(world)
    cur = world.host("cursor")
    c = world.conn(cur)
    world.session(cur, "chat-a")  # prompt, no stop: still working
    world.tick(600)
    world.session(cur, "chat-b")
    world.tick(60)
    assert not world.scope(c).stub_ok
    world.hook(cur, "end", "chat-a")
    world.tick(CONCURRENCY_WINDOW_S + 1)
    assert world.scope(c).stub_ok
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"


def test_subagents_do_not_count_as_concurrent_conversations(world: World) -> None:
    h = world.host("claude")
    world.session(h, "s1")
    world.hook(h, "sub_start", "s1", sub="a1")
    world.hook(h, "sub_start", "s1", sub="a2")
    s = world.scope(world.conn(h))
    assert s.key.startswith("claude:s1@") and "subagent window open (2)" == s.reason


def test_subagent_window_withholds_and_never_credits_the_parent(world: World) -> None:
    f = _file(world)
    h = world.host("claude")
    c = world.conn(h)
    world.session(h, "s1")
    world.hook(h, "sub_start", "s1", sub="a1")
    r = world.read(c, f)  # the subagent reads through the parent's connection
    assert r["kind"] == "full"
    assert world.read(c, f)["kind"] == "full"  # no stub while the window is open
    world.hook(h, "sub_stop", "s1", sub="a1")
    assert world.read(c, f)["kind"] == "full"  # the parent never received it
    assert world.read(c, f)["kind"] == "stub"
    st = world.cache.stats()
    assert st["withheld_reasons"] == {"subagent window open (1)": 2}


def test_subagent_window_with_real_codex_payloads(world: World) -> None:
    from tests.conftest import REPO

    rec_dir = REPO / "tests" / "e2e" / "recorded_payloads" / "codex"
    from bench.support.oracle import publish_event

    f = _file(world)
    h = world.host("codex")
    c = world.conn(h)  # Codex gives its MCP server no session id: host match only
    def load(name: str) -> dict:
        p = json.loads((rec_dir / name).read_text())
        p["cwd"] = str(world.root)
        return p

    start = load("SubagentStart.json")
    sid = start["session_id"]
    world.session(h, sid)
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    publish_event(str(world.data), "codex", "SubagentStart", start, h.as_host(), world.t)
    assert not world.scope(c).stub_ok
    sub_prompt = load("UserPromptSubmit.subagent.json")
    publish_event(str(world.data), "codex", "UserPromptSubmit", sub_prompt, h.as_host(), world.t)
    assert world.read(c, f)["kind"] == "full"
    stop = load("SubagentStop.json")
    publish_event(str(world.data), "codex", "SubagentStop", stop, h.as_host(), world.t)
    assert world.read(c, f)["kind"] == "stub"


def test_two_concurrent_claude_sessions_each_keep_their_stubs(world: World) -> None:
    f = _file(world)
    h1, h2 = world.host("claude"), world.host("claude")
    world.session(h1, "s1")
    world.session(h2, "s2")
    c1 = world.conn(h1, env={"CLAUDE_CODE_SESSION_ID": "s1"})
    c2 = world.conn(h2, env={"CLAUDE_CODE_SESSION_ID": "s2"})
    assert world.read(c1, f)["kind"] == "full"
    assert world.read(c2, f)["kind"] == "full"  # s2 never received it from s1
    assert world.read(c1, f)["kind"] == "stub"
    assert world.read(c2, f)["kind"] == "stub"
    assert world.scope(c1).key != world.scope(c2).key


def test_clear_starts_a_new_conversation_in_the_same_process(world: World) -> None:
    f = _file(world)
    h = world.host("claude")
    c = world.conn(h, env={"CLAUDE_CODE_SESSION_ID": "s1"})  # the env id goes stale after /clear
    world.session(h, "s1")
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    world.hook(h, "end", "s1", reason="clear")
    world.tick(0.1)
    world.session(h, "s2", source="clear")
    s = world.scope(c)
    assert s.key.startswith("claude:s2@") and s.stub_ok
    assert world.read(c, f)["kind"] == "full"
    assert world.read(c, f)["kind"] == "stub"


def test_pid_reuse_does_not_match(world: World) -> None:
    h = world.host("claude", pid=5000, ticks=100)
    world.session(h, "s1")
    reused = world.host("claude", pid=5000, ticks=999)
    assert world.scope(world.conn(reused)).key is None


def test_session_env_matches_only_when_a_host_side_is_unknown(world: World) -> None:
    f = _file(world)
    h = world.host("claude")
    world.session(h, "s1")
    no_host = world.conn(None, "c-nohost", env={"CLAUDE_CODE_SESSION_ID": "s1"})
    assert world.scope(no_host).key.startswith("claude:s1@")
    other = world.host("claude")
    wrong_host = world.conn(other, "c-other", env={"CLAUDE_CODE_SESSION_ID": "s1"})
    assert world.scope(wrong_host).key is None
    world.read(no_host, f)
    assert world.read(no_host, f)["kind"] == "stub"
    assert world.read(wrong_host, f)["kind"] == "full"


def test_ended_conversation_gets_no_stub(world: World) -> None:
    f = _file(world)
    h = world.host()
    c = world.conn(h)
    world.session(h, "s1")
    world.read(c, f)
    world.hook(h, "end", "s1", reason="other")
    s = world.scope(c)
    assert (s.key, s.stub_ok, s.reason) == (None, False, "conversation ended")
    assert world.read(c, f)["kind"] == "full"


def test_codex_new_without_session_end_waits_out_the_window(world: World) -> None:
    h = world.host("codex")
    c = world.conn(h)
    world.session(h, "t1")
    world.hook(h, "stop", "t1")
    world.session(h, "t2")
    assert not world.scope(c).stub_ok
    world.tick(CONCURRENCY_WINDOW_S + 1)
    world.hook(h, "prompt", "t2")
    s = world.scope(c)
    assert s.stub_ok and s.key.startswith("codex:t2@")


# -- legacy and unknown callers ---------------------------------------------------------------------


def test_unknown_caller_never_gets_a_stub(world: World) -> None:
    f = _file(world)
    c = world.conn(world.host(), "lonely")
    for _ in range(3):
        r = world.read(c, f)
        assert r["kind"] == "full"
    s = world.scope(c)
    assert s.key is None and "unknown caller" in s.reason
    # another host's records do not make this caller known
    h = world.host()
    world.session(h, "s1")
    assert world.read(c, f)["kind"] == "full"
    assert world.scope(world.conn(None, "anon", env={})).reason.startswith("unknown caller: the connection names no host")


def test_legacy_scope_is_one_connection_one_conversation(world: World) -> None:
    f = _file(world)
    off = {"LEANCTX_CONVERSATION_SCOPE": "0"}
    c1 = world.conn(None, "L1", env=off)
    c2 = world.conn(None, "L2", env=off)
    assert world.scope(c1).key.startswith("conn:L1#") and world.scope(c1).stub_ok
    assert world.read(c1, f)["kind"] == "full"
    assert world.read(c1, f)["kind"] == "stub"
    assert world.read(c2, f)["kind"] == "full"


def test_legacy_scope_still_resends_after_a_compaction(world: World) -> None:
    f = _file(world)
    h = world.host()
    world.session(h, "s1")
    c = world.conn(h, "L", env={"LEANCTX_CONVERSATION_SCOPE": "off"})
    world.read(c, f)
    assert world.read(c, f)["kind"] == "stub"
    world.hook(h, "compact", "s1")
    assert world.scope(c).compactions == 1
    assert world.read(c, f)["kind"] == "full"
    assert world.read(c, f)["kind"] == "stub"


def test_connection_round_trips_and_filters_env() -> None:
    c = Connection("x", {"LEANCTX_SCOPE": "a"}, 12, 34, "/w")
    d = c.to_dict()
    d["env"]["ANTHROPIC_API_KEY"] = "secret"
    back = Connection.from_dict(d)
    assert back.env == {"LEANCTX_SCOPE": "a"} and back.host_pid == 12 and back.cwd == "/w"


def test_a_session_id_alone_earns_no_stub_in_the_shared_daemon(world: World) -> None:
    """A hook record without host facts (hooks that cannot read /proc) can only be matched by the
    session variable in the caller's environment. Any process can be started with another chat's
    id, so the daemon (shared by every process) withholds stubs and credits nothing for such a
    match; an MCP server's private in-process cache may still use it."""
    from leanctx.cache import Resolver
    from bench.support.oracle import FakeHost
    from leanctx.cache.scope import ID_ONLY

    hostless = FakeHost(None, None, "claude")  # type: ignore[arg-type]
    world.session(hostless, "sess-noproc")
    conn = world.conn(world.host("claude", pid=5151), "c", env={"CLAUDE_CODE_SESSION_ID": "sess-noproc"})
    private = world.scope(conn)
    assert private.key and private.key.startswith("claude:sess-noproc@") and private.stub_ok
    shared = Resolver(str(world.data), world.clock, shared=True).resolve(conn, fresh=True)
    assert (shared.key, shared.stub_ok, shared.reason) == (None, False, ID_ONLY)


def test_the_daemon_saves_a_newer_last_good_record_after_the_answer_and_an_explicit_scope_before(world: World) -> None:
    """The daemon's resolver (save_after_answer) leaves a newer last good copy of a record for
    flush(), which the daemon calls once the answer is sent; an explicit scope's incarnation is
    saved before the answer, since losing it could bring back holdings from before a compaction."""
    from leanctx.cache.scope import Resolver

    state = os.path.join(world.data, "conversations", ".last_good.json")
    world.resolver = Resolver(str(world.data), clock=world.clock, save_after_answer=True)
    h = world.host("claude")
    world.session(h, "s1")
    c = world.conn(h)
    assert world.scope(c).stub_ok
    assert not os.path.exists(state)  # not before the answer
    world.resolver.flush()  # the daemon, after sending it
    with open(state) as f:
        assert [r["conversation_id"] for r in json.load(f)["records"]] == ["s1"]
    world.hook(h, "compact", "s1")
    explicit = world.conn(None, "c9", env={"LEANCTX_SCOPE": "s1"})
    assert world.scope(explicit).compactions == 1
    with open(state) as f:  # saved before the answer: the explicit scope's incarnation, and the records with it
        saved = json.load(f)
    assert "s1" in saved["explicit"] and saved["records"][0]["compactions"] == 1
