"""The protocol's pure functions: answers to pending questions, folding, caps, rendering."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leanctx.state import protocol as p
from leanctx.state.errors import BadInput
from leanctx.state.validate import validate_jsonschema, validate_stdlib

T0 = "2026-06-07T19:40:00.000Z"
T1 = "2026-06-07T19:41:00.000Z"
T2 = "2026-06-07T19:42:00.000Z"


def valid(state: dict) -> dict:
    validate_stdlib(state)
    validate_jsonschema(state)
    return state


def test_fresh_is_valid_and_empty() -> None:
    s = valid(p.fresh("alice", "telegram", T0))
    assert s["revision"] == 0 and s["schema_version"] == 1 and s["source"] == "telegram"
    assert s["recent_turns"] == [] and s["pending"] is None and s["last_updated"] == T0
    assert p.rehydrate(s) == ""
    assert p.is_empty(s)


def test_inbound_appends_a_user_turn_without_mutating_the_input() -> None:
    s0 = p.fresh("alice", None, T0)
    before = json.dumps(s0, sort_keys=True)
    s1, answered = p.inbound(s0, "how do I add the bot?", "sess-1", T1)
    assert json.dumps(s0, sort_keys=True) == before
    assert answered is None
    assert s1["recent_turns"] == [{"role": "user", "text": "how do I add the bot?", "ts": T1, "session_id": "sess-1"}]
    assert s1["turn_count"] == 1 and s1["last_updated"] == T1 and s1["last_answer"] is None
    valid(s1)


def test_inbound_answers_the_pending_question_and_clears_it() -> None:
    s = p.set_pending(p.fresh("alice", None, T0), "Single-user or shared bot?", ["single", "shared"], T0, "sess-1")
    assert s["pending"] == {"type": "clarify", "question": "Single-user or shared bot?", "options": ["single", "shared"],
                            "asked_ts": T0, "session_id": "sess-1"}
    s, answered = p.inbound(s, "shared", "sess-2", T1)
    assert answered == {"question": "Single-user or shared bot?", "options": ["single", "shared"], "answer": "shared",
                        "answered_ts": T1}
    assert s["pending"] is None and s["last_answer"] == answered
    assert s["recent_turns"][-1]["text"] == "shared"
    line = p.answer_context(answered)
    assert line.startswith("[leanctx] The user's message answers your pending question \"Single-user or shared bot?\"")
    assert 'which is the option "shared"' in line
    # the next message answers nothing: last_answer says so
    s, answered = p.inbound(s, "thanks", None, T2)
    assert answered is None and s["last_answer"] is None and p.answer_context(None) == ""
    valid(s)


@pytest.mark.parametrize(("answer", "option"), [("2", "shared"), (" Shared. ", "shared"), ("SINGLE", "single"),
                                                ("maybe", None), ("3", None), ("0", None)])
def test_answer_context_names_the_matching_option(answer: str, option: str | None) -> None:
    answered = {"question": "Single or shared?", "options": ["single", "shared"], "answer": answer, "answered_ts": T1}
    line = p.answer_context(answered)
    assert ("which is the option" in line) == (option is not None)
    if option:
        assert f'which is the option "{option}"' in line


def test_reply_keeps_the_last_n_turns_and_folds_the_rest_into_the_summary() -> None:
    s = p.fresh("alice", None, T0)
    for i in range(6):
        s, _ = p.inbound(s, f"question {i}\nwith a second line", None, T1, keep=4)
        s = p.reply(s, f"answer {i}", None, T2, keep=4)
    assert [t["text"] for t in s["recent_turns"]] == ["question 4\nwith a second line", "answer 4",
                                                      "question 5\nwith a second line", "answer 5"]
    assert s["turn_count"] == 12
    lines = s["thread_summary"].split("\n")
    assert lines[0] == "- user: question 0 with a second line" and lines[1] == "- agent: answer 0"
    assert len(lines) == 8
    valid(s)


def test_folded_lines_follow_the_model_summary_and_a_new_summary_replaces_them() -> None:
    s = p.set_summary(p.fresh("alice", None, T0), "Setting up the Telegram bot; VPS chosen.", T0)
    for i in range(3):
        s = p.reply(s, f"reply {i} " + "x" * 300, None, T1, keep=1)
    lines = s["thread_summary"].split("\n")
    assert lines[0] == "Setting up the Telegram bot; VPS chosen."
    assert lines[1].startswith("- agent: reply 0 xxx") and lines[1].endswith("…")
    assert len(lines[1]) == len("- agent: ") + p.FOLD_CHARS + 1
    s = p.set_summary(s, "Bot is live; next: webhooks.", T2)
    assert s["thread_summary"] == "Bot is live; next: webhooks."


def test_the_summary_stays_bounded_dropping_the_oldest_folded_lines() -> None:
    s = p.set_summary(p.fresh("alice", None, T0), "Model summary.", T0)
    for i in range(400):
        s = p.reply(s, f"turn {i:03d} " + "y" * 200, None, T1, keep=2)
    summary = s["thread_summary"]
    assert len(summary) <= p.SUMMARY_MAX
    assert summary.startswith("Model summary.\n- agent: turn ")
    assert "turn 397" in summary and "turn 000" not in summary  # newest folded kept, oldest dropped
    valid(s)


def test_folding_is_deterministic() -> None:
    def run() -> dict:
        s = p.fresh("alice", "cli", T0)
        for i in range(30):
            s, _ = p.inbound(s, f"m{i} " * (i + 1), "s", T1)
            s = p.reply(s, f"r{i}", "s", T2)
        return s

    assert run() == run()


def test_turn_text_is_capped_with_a_visible_mark() -> None:
    s, _ = p.inbound(p.fresh("alice", None, T0), "z" * 10_000, None, T1)
    text = s["recent_turns"][0]["text"]
    assert len(text) == p.TURN_MAX
    assert text.endswith("[… cut by leanctx: 10000 characters in all]")
    s = p.reply(s, "w" * 4000, None, T1)
    assert s["recent_turns"][1]["text"] == "w" * 4000  # exactly at the cap: untouched
    valid(s)


def test_lone_surrogates_are_made_storable() -> None:
    s, _ = p.inbound(p.fresh("alice", None, T0), "bad \ud800 half", None, T1)
    s["recent_turns"][0]["text"].encode("utf-8")


@pytest.mark.parametrize(("question", "options", "message"), [
    ("", [], "the question is empty"),
    ("   ", ["a"], "the question is empty"),
    ("q" * 1001, [], "at most 1000"),
    ("ok?", [str(i) for i in range(11)], "11 options; at most 10"),
    ("ok?", ["fine", ""], "an option is empty"),
    ("ok?", ["o" * 201], "at most 200"),
    ("ok?", "single", "not one text"),
])
def test_set_pending_refuses_bad_input(question: str, options: list[str], message: str) -> None:
    with pytest.raises(BadInput, match=message):
        p.set_pending(p.fresh("alice", None, T0), question, options, T1)


def test_set_pending_at_the_caps_is_valid() -> None:
    s = p.set_pending(p.fresh("alice", None, T0), "q" * 1000, ["o" * 200] * 10, T1)
    valid(s)
    assert p.clear_pending(s, T2)["pending"] is None


def test_other_caps() -> None:
    with pytest.raises(BadInput, match="at most 2000"):
        p.set_summary(p.fresh("alice", None, T0), "s" * 2001)
    with pytest.raises(BadInput, match="at most 200"):
        p.set_active(p.fresh("alice", None, T0), "f" * 201, None)
    s = p.set_active(p.fresh("alice", None, T0), "telegram-setup", "  ", T1)
    assert (s["active_feature"], s["active_phase"]) == ("telegram-setup", None)


def test_end_thread_returns_a_dated_digest_and_a_fresh_thread() -> None:
    s = p.set_summary(p.fresh("alice", "telegram", T0), "Helping set up the bot.", T0)
    s = p.set_active(s, "telegram-setup", "deploy", T0)
    s, _ = p.inbound(s, "how do I add the bot?", None, T1)
    s = p.reply(s, "Create it with BotFather.", None, T1)
    s = p.set_pending(s, "Single-user or shared bot?", ["single", "shared"], T1)
    digest, nxt = p.end_thread(s, "2026-06-07T19:45:30.000Z")
    assert digest.startswith("## [2026-06-07 19:45] conversation ended (2 turns, telegram)\n")
    for part in ("> Helping set up the bot.", "Active work: feature telegram-setup, phase deploy",
                 'Left unanswered: "Single-user or shared bot?" (options: single, shared)',
                 "- user: how do I add the bot?", "- agent: Create it with BotFather."):
        assert part in digest
    assert nxt == p.fresh("alice", "telegram", "2026-06-07T19:45:30.000Z")
    assert p.end_thread(nxt, T2)[0] == ""


def test_rehydrate_has_every_part_clearly_labelled() -> None:
    s = p.set_summary(p.fresh("alice", "telegram", T0), "Helping set up the Telegram bot; decided on VPS host.", T0)
    s = p.set_active(s, "telegram-setup", None, T0)
    s, _ = p.inbound(s, "how do I add the bot?", None, "2026-06-07T19:40:00.000Z")
    s = p.reply(s, "Create it with BotFather, then ...", None, "2026-06-07T19:40:05.000Z")
    s = p.set_pending(s, "Single-user or shared bot?", ["single", "shared"], "2026-06-07T19:41:00.000Z")
    text = p.rehydrate(s)
    assert text.startswith("[leanctx conversation state] user 'alice' on telegram, 2 turns so far")
    for part in ("Thread summary (what came before the recent turns):\n  Helping set up the Telegram bot; decided on VPS host.",
                 "Recent turns (oldest first):\n[2026-06-07T19:40:00.000Z] user: how do I add the bot?\n"
                 "[2026-06-07T19:40:05.000Z] agent: Create it with BotFather, then ...",
                 "Active work: feature telegram-setup, phase (none).",
                 "PENDING QUESTION (asked 2026-06-07T19:41:00.000Z, not answered yet):\n  Single-user or shared bot?\n"
                 "  Options: 1) single  2) shared\nThe user's next message is the answer to this question.",
                 "[end of conversation state]"):
        assert part in text, part
    s, answered = p.inbound(s, "shared", None, T2)
    assert 'answered your earlier question "Single-user or shared bot?": "shared"' in p.rehydrate(s)


def test_rehydrate_is_bounded_and_favours_the_newest_turns() -> None:
    s = p.set_summary(p.fresh("alice", "x" * 64, T0), "s" * 2000, T0)
    s = p.set_active(s, "f" * 200, "p" * 200, T0)
    for i in range(50):
        s = p.reply(s, f"turn {i:02d} " + "t" * 5000, None, T1, keep=50)
    s = p.set_pending(s, "q" * 1000, ["o" * 200] * 10, T2)
    text = p.rehydrate(s)
    assert len(text) <= 12_000
    assert "PENDING QUESTION" in text and "o" * 200 in text and "[end of conversation state]" in text
    assert "turn 49 " in text and "older turns omitted" in text


def test_keep_is_clamped_to_the_schema_cap() -> None:
    s = p.fresh("alice", None, T0)
    for i in range(60):
        s = p.reply(s, f"r{i}", None, T1, keep=1000)
    assert len(s["recent_turns"]) == p.TURNS_MAX
    valid(s)


OPS = st.one_of(
    st.tuples(st.just("inbound"), st.text(max_size=50) | st.integers(3990, 4100).map(lambda n: "é" * n)),
    st.tuples(st.just("reply"), st.text(max_size=300)),
    st.tuples(st.just("pending"), st.text(min_size=1, max_size=40).filter(str.strip),
              st.lists(st.text(min_size=1, max_size=20).filter(str.strip), max_size=10)),
    st.tuples(st.just("clear")),
    st.tuples(st.just("summary"), st.text(max_size=2000)),
    st.tuples(st.just("active"), st.none() | st.text(max_size=30), st.none() | st.text(max_size=30)),
    st.tuples(st.just("end")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, max_size=40), keep=st.integers(1, 60))
def test_any_sequence_of_operations_keeps_the_state_valid(ops: list[tuple], keep: int) -> None:
    s = p.fresh("alice", "telegram", T0)
    for op in ops:
        if op[0] == "inbound":
            s, _ = p.inbound(s, op[1], "sid", T1, keep=keep)
        elif op[0] == "reply":
            s = p.reply(s, op[1], "sid", T1, keep=keep)
        elif op[0] == "pending":
            s = p.set_pending(s, op[1], op[2], T1)
        elif op[0] == "clear":
            s = p.clear_pending(s, T1)
        elif op[0] == "summary":
            s = p.set_summary(s, op[1], T1)
        elif op[0] == "active":
            s = p.set_active(s, op[1], op[2], T1)
        else:
            _, s = p.end_thread(s, T2)
        valid(s)
        assert len(p.rehydrate(s)) <= 12_000


def test_a_question_the_user_never_saw_is_not_shown_as_awaiting_their_answer() -> None:
    """Saved inside a turn whose reply was never recorded (the process died mid-turn), the question
    is handed back as unsent: the next message will not answer it (inbound drops it), so telling
    the model it would be false."""
    s, _ = p.inbound(p.fresh("alice", None, T0), "I'd like to subscribe", "s1", T0)
    s = p.set_pending(s, "Which plan?", ["basic", "pro"], T0)
    for text in (p.rehydrate(s), p.resume_context(s)):
        assert "UNSENT QUESTION" in text and "Which plan?" in text and "1) basic  2) pro" in text
        assert "PENDING QUESTION" not in text and "next message is the answer" not in text
    armed = p.reply(s, "Which plan? basic or pro?", "s1", T0)
    assert "PENDING QUESTION" in p.rehydrate(armed) and "UNSENT" not in p.rehydrate(armed)
