"""The store contract, run against the file backend and a real redis-server alike."""

from __future__ import annotations

import json

import pytest

from leanctx.state import api, protocol
from leanctx.state.backend import Backend, Commit
from leanctx.state.errors import BadInput, ForeignThread, StateInvalid
from leanctx.state.slug import slugify
from leanctx.state.validate import validate_jsonschema

from .conftest import put_raw, raw_value


def test_load_of_an_absent_user_is_fresh_and_writes_nothing(store: Backend, cks_home) -> None:  # type: ignore[no-untyped-def]
    s = store.load("alice")
    assert s["revision"] == 0 and s["recent_turns"] == [] and s["user_slug"] == "alice"
    assert raw_value(store, "alice") is None
    assert not cks_home.exists()
    assert store.list_users() == []
    assert store.read_history("alice") == ""


def test_update_numbers_revisions_and_round_trips(store: Backend) -> None:
    s1 = store.update("alice", lambda s: protocol.inbound(s, "hello", "s1")[0])
    s2 = store.update("alice", lambda s: protocol.reply(s, "hi!", "s1"))
    assert (s1["revision"], s2["revision"]) == (1, 2)
    assert store.load("alice") == s2
    stored = json.loads(raw_value(store, "alice"))
    validate_jsonschema(stored)
    assert stored == s2
    assert [t["text"] for t in stored["recent_turns"]] == ["hello", "hi!"]


def test_a_failing_update_changes_nothing(store: Backend) -> None:
    store.update("alice", lambda s: protocol.inbound(s, "hello")[0])
    before = raw_value(store, "alice")

    def boom(s: dict) -> dict:
        raise BadInput("no")

    with pytest.raises(BadInput):
        store.update("alice", boom)

    def bad(s: dict) -> dict:
        s["recent_turns"].append({"role": "system", "text": "x", "ts": protocol.now_iso()})
        return s

    with pytest.raises(StateInvalid, match=r"\$\.recent_turns\[1\]\.role"):
        store.update("alice", bad)
    with pytest.raises(StateInvalid, match="user_slug"):
        store.update("alice", lambda s: {**s, "user_slug": "bob"})
    assert raw_value(store, "alice") == before


def test_end_thread_appends_the_digest_and_resets_in_one_commit(store: Backend) -> None:
    api.inbound("how do I add the bot?", user="alice", source="telegram")
    api.reply("Create it with BotFather.", user="alice")
    api.set_pending("Single-user or shared bot?", ["single", "shared"], user="alice")
    done = api.end_thread(user="alice")
    assert done["digest"].startswith("## [") and "conversation ended (2 turns, telegram)" in done["digest"]
    assert done["state"]["revision"] == 4 and done["state"]["recent_turns"] == [] and done["state"]["source"] == "telegram"
    assert store.read_history("alice") == done["digest"]
    api.inbound("new topic", user="alice")
    second = api.end_thread(user="alice")
    history = store.read_history("alice")
    assert history.count("## [") == 2 and history.endswith(second["digest"])
    assert api.end_thread(user="alice")["digest"] == ""  # empty thread: nothing appended
    assert store.read_history("alice") == history


def test_reset_starts_fresh_and_keeps_counting_revisions(store: Backend) -> None:
    api.inbound("hello", user="alice", source="cli")
    s = api.reset(user="alice")
    assert s["revision"] == 2 and s["turn_count"] == 0 and s["source"] == "cli"
    assert store.read_history("alice") == ""


def test_list_users(store: Backend) -> None:
    for user in ("Carol", "alice", "tg:42"):
        api.inbound("hi", user=user)
    api.show(user="nobody")  # a read creates nothing
    expected = sorted(slugify(u) for u in ("Carol", "alice", "tg:42"))
    assert store.list_users() == expected and api.list_users() == expected
    assert {api.owner(api.show(slug=s)) for s in expected} == {"Carol", "alice", "tg:42"}


def test_the_exact_id_is_kept_and_another_id_is_never_let_into_the_thread(store: Backend) -> None:
    """Defence in depth behind the one-to-one slug: a state that holds another id's thread (planted
    here; a hash collision in life) is refused, for reads and writes, and left as it was."""
    assert api.inbound("hi", user="Ана")["state"]["user_id"] == "Ана"
    assert api.show(slug=slugify("Ана"))["user_id"] == "Ана"
    foreign = {**protocol.fresh("bob", None, "2026-06-07T19:40:00.000Z"), "user_id": "mallory",
               "thread_summary": "mallory's secrets"}
    put_raw(store, "bob", json.dumps(foreign).encode())
    for call in (lambda: api.show(user="bob"), lambda: api.inbound("hi", user="bob"), lambda: api.reset(user="bob"),
                 lambda: api.end_thread(user="bob"), lambda: api.history(user="bob")):
        with pytest.raises(ForeignThread, match="belongs to user id 'mallory', not 'bob'"):
            call()
    assert json.loads(raw_value(store, "bob"))["thread_summary"] == "mallory's secrets"
    assert api.show(slug="bob")["user_id"] == "mallory"  # the operator, by slug, still sees it


def test_a_state_kept_before_ids_were_recorded_is_claimed_by_its_plain_id(store: Backend) -> None:
    put_raw(store, "alice", json.dumps(protocol.fresh("alice", None, "2026-06-07T19:40:00.000Z")).encode())
    assert api.owner(api.show(slug="alice")) == "alice"
    assert api.inbound("hi", user="alice")["state"]["user_id"] == "alice"


DAMAGE = [
    b"",
    b"{not json",
    b'{"schema_version": 1}',
    b"\xff\xfe garbage",
    json.dumps({**protocol.fresh("alice", None, "2026-06-07T19:40:00.000Z"), "revision": -5}).encode(),
    json.dumps({**protocol.fresh("mallory", None, "2026-06-07T19:40:00.000Z")}).encode(),  # another user's state
    json.dumps({**protocol.fresh("alice", None, "2026-06-07T19:40:00.000Z"), "thread_summary": "s" * 2001}).encode(),
]


@pytest.mark.parametrize("damage", DAMAGE, ids=range(len(DAMAGE)))
def test_a_damaged_state_is_quarantined_and_the_thread_restarts(store: Backend, damage: bytes) -> None:
    put_raw(store, "alice", damage)
    s = store.load("alice")
    assert s["revision"] == 0 and s["recent_turns"] == []
    aside = store.corrupt_files("alice")
    assert len(aside) == 1
    assert (":conversation-state:corrupt:" if store.name == "redis" else "/conversation-state.corrupt-") in aside[0]
    if store.name == "file":
        with open(aside[0], "rb") as f:
            assert f.read() == damage  # never deleted, byte for byte
    else:
        assert store.client.call("GET", aside[0]) == damage  # type: ignore[attr-defined]
    assert raw_value(store, "alice") is None  # moved aside; the fresh thread is written by the next update
    s = api.inbound("hello again", user="alice")["state"]
    assert s["revision"] == 1 and s["turn_count"] == 1
    # damage found by an update (not a load) is quarantined the same way
    put_raw(store, "alice", b"[]")
    s = api.reply("still here", user="alice")
    assert s["revision"] == 1 and [t["text"] for t in s["recent_turns"]] == ["still here"]
    assert len(store.corrupt_files("alice")) == 2
    # a user whose only state was moved aside is still listed (doctor reports the damage)
    put_raw(store, "bob", b"{")
    store.load("bob")
    assert store.list_users() == ["alice", "bob"] and len(store.corrupt_files("bob")) == 1


def test_caps_are_enforced_through_the_api(store: Backend) -> None:
    s = api.inbound("x" * 50_000, user="alice")["state"]
    assert len(s["recent_turns"][0]["text"]) == protocol.TURN_MAX
    assert len(raw_value(store, "alice")) < 6000
    for call in (lambda: api.set_pending("", ["a"], user="bob"), lambda: api.set_pending("q", ["o"] * 11, user="bob"),
                 lambda: api.set_summary("s" * 2001, user="bob"), lambda: api.set_active("f" * 201, None, user="bob")):
        with pytest.raises(BadInput):
            call()
    assert raw_value(store, "bob") is None
    assert store.list_users() == ["alice"]


def test_a_restarted_process_gets_the_pending_question_and_its_answer(store: Backend) -> None:
    """The seed's point: a clarification survives a restart (here: the state, read from the store)."""
    api.inbound("set up the bot please", user="alice", session_id="s1", source="telegram")
    api.reply("Single-user or shared bot?", user="alice", session_id="s1")
    api.set_pending("Single-user or shared bot?", ["single", "shared"], user="alice", session_id="s1")
    # ... the bot restarts: a new session rehydrates from the store alone
    text = api.rehydrate(user="alice")
    assert "PENDING QUESTION" in text and "1) single  2) shared" in text and "set up the bot please" in text
    out = api.inbound("shared", user="alice", session_id="s2")
    assert out["answered"]["question"] == "Single-user or shared bot?" and out["answered"]["answer"] == "shared"
    assert out["answer_context"].startswith("[leanctx] The user's message answers your pending question")
    assert store.load("alice")["pending"] is None
    assert store.load("alice")["last_answer"] == out["answered"]


def test_commit_with_history(store: Backend) -> None:
    store.update("alice", lambda s: Commit(protocol.inbound(s, "x")[0], "## [2026-01-01 00:00] note\n"))
    assert store.read_history("alice") == "## [2026-01-01 00:00] note\n"
    store.append_history("alice", "## [2026-01-02 00:00] another")
    assert store.read_history("alice") == "## [2026-01-01 00:00] note\n\n## [2026-01-02 00:00] another\n"
