"""The conversation protocol as pure functions on the state dict (standard library only).

Every function takes a state and returns a new one (the input is never mutated), so a store can
call it again on fresh data when a compare-and-swap fails. Timestamps are passed in (`now`,
ISO 8601 UTC) so the functions stay deterministic; they default to the clock.

The seed's protocol: an inbound message first answers the pending clarification, if any (that is
what makes a question survive a restart), then becomes a user turn; a reply becomes an agent turn;
turns beyond the last `keep` fold into `thread_summary` as one short line each, after whatever
summary the model wrote, oldest folded lines dropped first, never over the cap.
"""

from __future__ import annotations

import time

from leanctx.state.errors import BadInput
from leanctx.state.render import answer_context, digest, rehydrate, resume_context  # noqa: F401 - part of this module's API

SCHEMA_VERSION = 1
TURN_MAX = 4000
SUMMARY_MAX = 2000
QUESTION_MAX = 1000
OPTIONS_MAX = 10
OPTION_MAX = 200
TURNS_MAX = 50
KEEP_DEFAULT = 10
FOLD_CHARS = 160
FIELD_MAX = 200
SOURCE_MAX = 64
SESSION_MAX = 200
FOLD_PREFIXES = ("- user: ", "- agent: ")


def now_iso(ts: float | None = None) -> str:
    ts = time.time() if ts is None else ts
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


def copy_tree(value: object) -> object:
    """A deep copy of a JSON tree (cheaper than `copy.deepcopy`, and no import on the hook path)."""
    if isinstance(value, dict):
        return {k: copy_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_tree(v) for v in value]
    return value


def fresh(slug: str, source: str | None = None, now: str | None = None) -> dict:
    """A new, empty thread (revision 0: the store numbers it when it is first written)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "revision": 0,
        "user_slug": slug,
        "source": _label(source, SOURCE_MAX),
        "thread_summary": "",
        "recent_turns": [],
        "turn_count": 0,
        "active_feature": None,
        "active_phase": None,
        "pending": None,
        "last_answer": None,
        "last_updated": now or now_iso(),
    }


def inbound(state: dict, text: str, session_id: str | None = None, now: str | None = None,
            keep: int = KEEP_DEFAULT, message_id: str | None = None) -> tuple[dict, dict | None]:
    """Record a user message. If a question was pending, this message is its answer: returned as
    `answered` ({question, options, answer, answered_ts}), kept in `last_answer`, pending cleared.

    A question not yet armed (asked inside a turn whose reply was never recorded: the process died
    before the user saw it) is dropped, never answered. A redelivered message (same `message_id`
    as a recorded turn, or, without ids, the same text as a last user turn that got no reply) is
    recorded once: the state is returned unchanged but for that unarmed question."""
    now = now or now_iso()
    s = _copy(state)
    body = cap_text(clean(text), TURN_MAX)
    answered = None
    if s.get("pending") and s["pending"].get("armed") is False:
        s["pending"] = None
    if is_redelivery(s, body, message_id, session_id):
        return s, None
    if s.get("pending"):
        p = s["pending"]
        answered = {"question": p["question"], "options": list(p["options"]), "answer": body, "answered_ts": now}
        s["pending"] = None
    s["last_answer"] = answered
    _append(s, "user", body, session_id, now, keep, _label(message_id, SESSION_MAX))
    return s, (dict(answered) if answered else None)


def is_redelivery(state: dict, body: str, message_id: str | None, session_id: str | None = None) -> bool:
    """`body` is a message already recorded: its id is on a recent turn, or (no id) it repeats the
    last turn, a user turn no reply followed, sent to another session (the process died inside
    the turn and the chat layer sent it again to the restarted one; within one live session the
    user may well say the same thing twice)."""
    turns = state.get("recent_turns") or []
    mid = _label(message_id, SESSION_MAX)
    if mid:
        return any(t.get("message_id") == mid for t in turns)
    last = turns[-1] if turns else None
    sid = _session(session_id)
    return (bool(last) and last.get("role") == "user" and last.get("text") == body and not last.get("message_id")
            and bool(sid) and bool(last.get("session_id")) and last.get("session_id") != sid)


def holds_thread(state: dict, session_id: str | None) -> bool:
    """A resumed session's transcript already holds the thread: a recorded turn carries its id and
    every turn since its first one does too (it got the full block when it started; nothing was
    recorded elsewhere since)."""
    if not session_id:
        return False
    sid = _session(session_id)
    turns = state.get("recent_turns") or []
    first = next((i for i, t in enumerate(turns) if t.get("session_id") == sid), None)
    return first is not None and all(t.get("session_id") == sid for t in turns[first:])


def session_context(state: dict, session_id: str | None, resumed: bool = True) -> str:
    """What a starting session is handed: only what its transcript lacks (resume_context) when it
    resumes a transcript that holds the thread, else the whole thread (rehydrate)."""
    return resume_context(state) if resumed and holds_thread(state, session_id) else rehydrate(state)


def reply(state: dict, text: str, session_id: str | None = None, now: str | None = None, keep: int = KEEP_DEFAULT) -> dict:
    """Record the agent's reply; the turns beyond the last `keep` fold into the summary."""
    now = now or now_iso()
    s = _copy(state)
    _append(s, "agent", cap_text(clean(text), TURN_MAX), session_id, now, keep)
    return arm_pending(s)


def arm_pending(state: dict) -> dict:
    """The reply that asks the pending question has been recorded: the next message answers it."""
    pending = state.get("pending")
    if not pending or pending.get("armed") is not False:
        return state
    s = _copy(state)
    del s["pending"]["armed"]
    return s


def pending_args(question: str, options: list[str] | tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """The question and options as stored; BadInput when over a cap or empty (nothing written)."""
    q = clean(question).strip()
    if not q:
        raise BadInput("the question is empty")
    if len(q) > QUESTION_MAX:
        raise BadInput(f"the question has {len(q)} characters; at most {QUESTION_MAX}")
    if isinstance(options, str):
        raise BadInput("options must be a list of texts, not one text")
    opts = [clean(o).strip() for o in options]
    if len(opts) > OPTIONS_MAX:
        raise BadInput(f"{len(opts)} options; at most {OPTIONS_MAX}")
    for o in opts:
        if not o:
            raise BadInput("an option is empty")
        if len(o) > OPTION_MAX:
            raise BadInput(f"an option has {len(o)} characters; at most {OPTION_MAX}: {o[:40]!r}...")
    return q, opts


def summary_arg(text: str) -> str:
    body = clean(text).strip()
    if len(body) > SUMMARY_MAX:
        raise BadInput(f"the summary has {len(body)} characters; at most {SUMMARY_MAX}: shorten it")
    return body


def active_args(feature: str | None, phase: str | None) -> tuple[str | None, str | None]:
    values = []
    for name, value in (("feature", feature), ("phase", phase)):
        value = (clean(value).strip() or None) if value is not None else None
        if value is not None and len(value) > FIELD_MAX:
            raise BadInput(f"the active {name} has {len(value)} characters; at most {FIELD_MAX}")
        values.append(value)
    return values[0], values[1]


def set_pending(state: dict, question: str, options: list[str] | tuple[str, ...] = (), now: str | None = None,
                session_id: str | None = None) -> dict:
    """The agent asked a clarification (through the channel): the next inbound message answers it."""
    q, opts = pending_args(question, options)
    now = now or now_iso()
    s = _copy(state)
    pending = {"type": "clarify", "question": q, "options": opts, "asked_ts": now}
    turns = s.get("recent_turns") or []
    if turns and turns[-1].get("role") == "user":
        pending["armed"] = False  # asked inside a turn: answerable once its reply is recorded
    sid = _session(session_id)
    if sid:
        pending["session_id"] = sid
    s["pending"] = pending
    s["last_updated"] = now
    return s


def clear_pending(state: dict, now: str | None = None) -> dict:
    s = _copy(state)
    s["pending"] = None
    s["last_updated"] = now or now_iso()
    return s


def set_summary(state: dict, text: str, now: str | None = None) -> dict:
    """The model's summary replaces the running summary, folded lines included."""
    body = summary_arg(text)
    s = _copy(state)
    s["thread_summary"] = body
    s["last_updated"] = now or now_iso()
    return s


def set_active(state: dict, feature: str | None, phase: str | None, now: str | None = None) -> dict:
    s = _copy(state)
    s["active_feature"], s["active_phase"] = active_args(feature, phase)
    s["last_updated"] = now or now_iso()
    return s


def set_source(state: dict, source: str | None) -> dict:
    s = _copy(state)
    s["source"] = _label(source, SOURCE_MAX)
    return s


def is_empty(state: dict) -> bool:
    """Nothing worth rehydrating or keeping in history."""
    return not (state.get("turn_count") or state.get("recent_turns") or state.get("thread_summary")
                or state.get("pending") or state.get("active_feature") or state.get("active_phase"))


def end_thread(state: dict, now: str | None = None) -> tuple[str, dict]:
    """The digest for history.md ('' for an empty thread) and the fresh state of the next thread."""
    now = now or now_iso()
    text = "" if is_empty(state) else digest(state, now)
    return text, fresh(state["user_slug"], state.get("source"), now)


# --- helpers ---------------------------------------------------------------------------------


def clean(text: object) -> str:
    """Text that can be stored: a str, with lone surrogates (from JSON escapes) replaced."""
    if not isinstance(text, str):
        raise BadInput(f"expected text, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def cap_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a visible mark saying how long it was."""
    if len(text) <= limit:
        return text
    mark = f"\n[… cut by leanctx: {len(text)} characters in all]"
    return text[: limit - len(mark)] + mark


def fold_line(turn: dict) -> str:
    flat = " ".join(turn.get("text", "").split())
    if len(flat) > FOLD_CHARS:
        flat = flat[:FOLD_CHARS] + "…"
    return f"- {turn.get('role', 'user')}: {flat}"


def fold(summary: str, turns: list[dict]) -> str:
    """`summary` with one line per dropped turn appended; oldest folded lines go first at the cap.

    The folded lines are the summary's trailing lines that start with `- user: ` or `- agent: `;
    everything before them is the model's text, kept whole (set_summary caps it)."""
    lines = summary.split("\n") if summary else []
    cut = len(lines)
    while cut > 0 and lines[cut - 1].startswith(FOLD_PREFIXES):
        cut -= 1
    head = "\n".join(lines[:cut]).rstrip()
    folded = lines[cut:] + [fold_line(t) for t in turns]
    if len(head) > SUMMARY_MAX:
        head = cap_text(head, SUMMARY_MAX)
    budget = SUMMARY_MAX - len(head) - (1 if head else 0)
    total = sum(len(line) + 1 for line in folded) - (1 if folded else 0)
    drop = 0
    while drop < len(folded) and total > budget:
        total -= len(folded[drop]) + (1 if drop < len(folded) - 1 else 0)
        drop += 1
    folded = folded[drop:]
    return "\n".join(([head] if head else []) + folded)


def _append(s: dict, role: str, text: str, session_id: str | None, now: str, keep: int,
            message_id: str | None = None) -> None:
    turn = {"role": role, "text": text, "ts": now}
    sid = _session(session_id)
    if sid:
        turn["session_id"] = sid
    if message_id:
        turn["message_id"] = message_id
    turns = s["recent_turns"]
    turns.append(turn)
    keep = max(1, min(int(keep), TURNS_MAX))
    if len(turns) > keep:
        dropped = turns[: len(turns) - keep]
        del turns[: len(turns) - keep]
        s["thread_summary"] = fold(s.get("thread_summary", ""), dropped)
    s["turn_count"] = int(s.get("turn_count", 0)) + 1
    s["last_updated"] = now


def _session(session_id: str | None) -> str | None:
    if not session_id:
        return None
    return clean(session_id)[:SESSION_MAX]


def _label(value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    value = clean(value).strip()
    return value[:limit] or None


def _copy(state: dict) -> dict:
    s = copy_tree(state)
    assert isinstance(s, dict)
    return s
