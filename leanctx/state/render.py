"""Text made from a state: what a restarted session is told, the answer line, the history digest.

Plain text, clearly labelled, bounded: it goes into the model's context on every session start,
so its size must not depend on how long the users' messages were.
"""

from __future__ import annotations

REHYDRATE_MAX = 12000
ANSWER_QUOTE = 600
DIGEST_TURNS = 10
_MIN_TURN_TEXT = 200


def rehydrate(state: dict) -> str:
    """The conversation a restarted session resumes: summary, recent turns, active work, the
    pending question and its options. '' when there is nothing to resume. At most 12,000 chars."""
    turns = list(state.get("recent_turns") or [])
    summary = state.get("thread_summary") or ""
    pending = state.get("pending")
    answered = state.get("last_answer")
    feature, phase = state.get("active_feature"), state.get("active_phase")
    if not (turns or summary or pending or answered or feature or phase):
        return ""
    source = state.get("source")
    head = (f"[leanctx conversation state] user {state.get('user_slug')!r}" + (f" on {source}" if source else "")
            + f", {state.get('turn_count', len(turns))} turns so far, last updated {state.get('last_updated')}."
            + "\nThis is the live thread you were in before this session started: continue it, do not start over.")
    before = [head]
    if summary:
        before.append("Thread summary (what came before the recent turns):\n" + _indent(summary))
    after = []
    if feature or phase:
        after.append(f"Active work: feature {feature or '(none)'}, phase {phase or '(none)'}.")
    after += _open_question(answered, pending)
    after.append("[end of conversation state]")
    fixed = sum(len(p) + 2 for p in before + after) + 40
    lines = _turn_lines(turns, REHYDRATE_MAX - fixed)
    parts = before + (["Recent turns (oldest first):\n" + "\n".join(lines)] if lines else []) + after
    text = "\n\n".join(parts)
    return text if len(text) <= REHYDRATE_MAX else text[: REHYDRATE_MAX - 1] + "…"


def resume_context(state: dict) -> str:
    """What a resumed session whose transcript already holds the thread still lacks: the answer
    line and the pending question ('' when neither). Never the thread again: each resume's added
    context is kept in the transcript, so a full block per restart would stack without bound."""
    parts = _open_question(state.get("last_answer"), state.get("pending"))
    return "\n\n".join(["[leanctx resumed session] The thread is in this transcript; still open:"] + parts) if parts else ""


def _open_question(answered: dict | None, pending: dict | None) -> list[str]:
    parts = []
    if answered:
        parts.append("The user's latest message answered your earlier question "
                     f"{_quote(answered['question'], 300)}: {_quote(answered['answer'], ANSWER_QUOTE)}.")
    if pending and pending.get("armed") is False:  # saved in a turn whose reply was never recorded
        parts.append(f"UNSENT QUESTION (saved {pending.get('asked_ts')} in a turn whose reply never reached the "
                     f"user: they have not seen it):\n  {_flat(pending['question'])}\n"
                     + _options(pending.get("options") or [])
                     + "The user's next message does not answer it; ask it again if it still matters.")
    elif pending:
        parts.append(f"PENDING QUESTION (asked {pending.get('asked_ts')}, not answered yet):\n"
                     f"  {_flat(pending['question'])}\n" + _options(pending.get("options") or [])
                     + "The user's next message is the answer to this question.")
    return parts


def answer_context(answered: dict | None) -> str:
    """The line added to the prompt that answers a pending question, so even a fresh process reads
    the message as that answer. '' when the message answered nothing."""
    if not answered:
        return ""
    options = answered.get("options") or []
    match = matched_option(answered.get("answer", ""), options)
    text = (f"[leanctx] The user's message answers your pending question {_quote(answered['question'], 1000)}"
            + (f" (options: {', '.join(_quote(o, 200) for o in options)})" if options else "")
            + f". Their answer: {_quote(answered.get('answer', ''), ANSWER_QUOTE)}")
    if match is not None:
        text += f", which is the option {_quote(match, 200)}"
    return text + ". Treat it as that answer; the question is no longer pending."


def matched_option(answer: str, options: list[str]) -> str | None:
    """The option an answer names: its text (case and spacing ignored) or its number (1-based)."""
    norm = " ".join(answer.split()).casefold().rstrip(".!")
    for option in options:
        if " ".join(option.split()).casefold() == norm:
            return option
    if norm.isdigit() and norm.isascii() and 1 <= int(norm) <= len(options):
        return options[int(norm) - 1]
    return None


def digest(state: dict, now: str) -> str:
    """A dated markdown section for history.md (the kit's `## [YYYY-MM-DD HH:MM]` heading)."""
    when = f"{now[:10]} {now[11:16]}"
    source = state.get("source")
    lines = [f"## [{when}] conversation ended ({state.get('turn_count', 0)} turns"
             + (f", {source}" if source else "") + ")", ""]
    if state.get("thread_summary"):
        lines += ["Summary:", *("> " + line for line in state["thread_summary"].split("\n")), ""]
    if state.get("active_feature") or state.get("active_phase"):
        lines += [f"Active work: feature {state.get('active_feature') or '(none)'}, "
                  f"phase {state.get('active_phase') or '(none)'}", ""]
    pending = state.get("pending")
    if pending:
        opts = pending.get("options") or []
        lines += [f"Left unanswered: {_quote(pending['question'], 300)}"
                  + (f" (options: {', '.join(opts)})" if opts else ""), ""]
    turns = (state.get("recent_turns") or [])[-DIGEST_TURNS:]
    if turns:
        lines += ["Last turns:", *(f"- {t['role']}: {_flat(t['text'], 160)}" for t in turns), ""]
    return "\n".join(lines) + "\n"


def _turn_lines(turns: list[dict], budget: int) -> list[str]:
    """Newest turns first get their full text; older ones shrink, then are counted, not shown."""
    out: list[str] = []
    for i in range(len(turns) - 1, -1, -1):
        t = turns[i]
        prefix = f"[{t.get('ts')}] {t.get('role')}: "
        room = budget - len(prefix) - 1 - 60  # 60: room for the 'omitted' line
        if room < _MIN_TURN_TEXT:
            out.append(f"({i + 1} older turns omitted here; see the summary)")
            break
        text = t.get("text", "").replace("\n", "\n    ")
        if len(text) > room:
            text = text[: room - 1] + "…"
        line = prefix + text
        out.append(line)
        budget -= len(line) + 1
    out.reverse()
    return out


def _options(options: list[str]) -> str:
    if not options:
        return "  (free-form answer, no options given)\n"
    return "  Options: " + "  ".join(f"{n}) {_flat(o)}" for n, o in enumerate(options, 1)) + "\n"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.split("\n"))


def _flat(text: str, limit: int | None = None) -> str:
    flat = " ".join(text.split())
    return flat if limit is None or len(flat) <= limit else flat[:limit] + "…"


def _quote(text: str, limit: int) -> str:
    return '"' + _flat(text, limit) + '"'
