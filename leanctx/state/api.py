"""The conversation-state operations as plain functions: for the CLI, the hooks, and MCP tools.

`user` is a sender id or slug (slugified like CKS_ACTIVE_USER); None means CKS_ACTIVE_USER, or
`local` when that is unset. Arguments are checked before anything is written (BadSlug,
BadInput), and every change is one compare-and-swap update of the store `LEANCTX_STATE_URL`
selects (files under $CKS_HOME by default). Every function returns JSON-ready values.
"""

from __future__ import annotations

from leanctx.state import protocol
from leanctx.state.backend import Backend, Commit, get_backend
from leanctx.state.render import answer_context
from leanctx.state.slug import active_slug


def _target(user: str | None) -> tuple[str, Backend]:
    slug = active_slug(user)
    return slug, get_backend()


def inbound(text: str, user: str | None = None, session_id: str | None = None, source: str | None = None,
            keep: int = protocol.KEEP_DEFAULT) -> dict:
    """A user message arrived. Returns {state, answered, answer_context}: `answered` is the pending
    question it resolved ({question, options, answer, answered_ts}) or None."""
    protocol.clean(text)
    slug, backend = _target(user)
    box: dict = {}

    def change(state: dict) -> dict:
        if source:
            state = protocol.set_source(state, source)
        state, box["answered"] = protocol.inbound(state, text, session_id, protocol.now_iso(), keep)
        return state

    state = backend.update(slug, change)
    answered = box.get("answered")
    return {"state": state, "answered": answered, "answer_context": answer_context(answered)}


def reply(text: str, user: str | None = None, session_id: str | None = None, keep: int = protocol.KEEP_DEFAULT) -> dict:
    """The agent replied; older turns fold into the summary. Returns the state."""
    protocol.clean(text)
    slug, backend = _target(user)
    return backend.update(slug, lambda s: protocol.reply(s, text, session_id, protocol.now_iso(), keep))


def set_pending(question: str, options: list[str] | tuple[str, ...] = (), user: str | None = None,
                session_id: str | None = None) -> dict:
    """The agent asked a clarification; the user's next message will be recorded as its answer."""
    q, opts = protocol.pending_args(question, options)
    slug, backend = _target(user)
    return backend.update(slug, lambda s: protocol.set_pending(s, q, opts, protocol.now_iso(), session_id))


def clear_pending(user: str | None = None) -> dict:
    slug, backend = _target(user)
    return backend.update(slug, lambda s: protocol.clear_pending(s, protocol.now_iso()))


def set_summary(text: str, user: str | None = None) -> dict:
    """The model's one-paragraph summary replaces the running one (at most 2,000 characters)."""
    body = protocol.summary_arg(text)
    slug, backend = _target(user)
    return backend.update(slug, lambda s: protocol.set_summary(s, body, protocol.now_iso()))


def set_active(feature: str | None, phase: str | None, user: str | None = None) -> dict:
    feature, phase = protocol.active_args(feature, phase)
    slug, backend = _target(user)
    return backend.update(slug, lambda s: protocol.set_active(s, feature, phase, protocol.now_iso()))


def end_thread(user: str | None = None) -> dict:
    """Append the thread's digest to history.md and start a fresh thread, in one commit.
    Returns {digest, state}; digest is '' (nothing appended) when the thread was empty."""
    slug, backend = _target(user)
    box: dict = {}

    def change(state: dict) -> Commit:
        box["digest"], nxt = protocol.end_thread(state, protocol.now_iso())
        return Commit(nxt, box["digest"])

    state = backend.update(slug, change)
    return {"digest": box.get("digest", ""), "state": state}


def reset(user: str | None = None) -> dict:
    """Drop the thread without a digest."""
    slug, backend = _target(user)
    return backend.reset(slug)


def show(user: str | None = None) -> dict:
    """The current state (a fresh, unwritten one when the user has none)."""
    slug, backend = _target(user)
    return backend.load(slug)


def rehydrate(user: str | None = None) -> str:
    """The context a restarted session gets ('' when there is no thread to resume)."""
    return protocol.rehydrate(show(user))


def history(user: str | None = None) -> str:
    slug, backend = _target(user)
    return backend.read_history(slug)


def list_users() -> list[str]:
    return get_backend().list_users()


def corrupt_files(user: str | None = None) -> list[str]:
    """Damaged states moved aside for this user (for doctor)."""
    slug, backend = _target(user)
    return backend.corrupt_files(slug)


def location(user: str | None = None) -> str:
    slug, backend = _target(user)
    return backend.location(slug)
