"""The conversation-state operations as plain functions: for the CLI, the hooks, and MCP tools.

Every function addresses one user's thread by `user`, the exact sender id (None: CKS_ACTIVE_USER,
`local` when unset, refused when set but empty), or by `slug=`, the folder name `leanctx state
list` shows (for operators; a slug is never re-slugified, so it cannot land in another thread).
The id is kept in the state (`user_id`), and a state that holds a different id's thread is
refused (ForeignThread) rather than read or merged. Arguments are checked before anything is
written (BadSlug, BadInput), and every change is one compare-and-swap update of the store
`LEANCTX_STATE_URL` selects (files under $CKS_HOME by default). Every function returns JSON-ready
values.
"""

from __future__ import annotations

from leanctx.state import protocol
from leanctx.state.backend import Backend, Commit, get_backend
from leanctx.state.errors import BadInput, ForeignThread
from leanctx.state.render import answer_context
from leanctx.state.slug import active_id, check_id, check_slug, is_plain, slugify, stored_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class Target:
    """One user's thread: its slug, the id it is addressed by (None when by slug), its store."""

    __slots__ = ("slug", "user_id", "backend")

    def __init__(self, slug: str, user_id: str | None, backend: Backend) -> None:
        self.slug, self.user_id, self.backend = slug, user_id, backend

    def claim(self, state: dict) -> str | None:
        """The id to keep in `state`; ForeignThread when it already holds another id's thread."""
        held = state.get("user_id")
        if self.user_id is None:
            return held
        if held is not None and held != self.user_id:
            raise ForeignThread(f"the conversation state at {self.backend.location(self.slug)} belongs to user id "
                                f"{held!r}, not {self.user_id!r}; refusing to mix two users' threads")
        return self.user_id

    def load(self) -> dict:
        state = self.backend.load(self.slug)
        owner = self.claim(state)
        if owner is not None and "user_id" not in state:
            state = dict(state, user_id=owner)  # a fresh or older state: shown with its id, written at the next update
        return state

    def update(self, fn: Callable[[dict], dict | Commit]) -> dict:
        def owned(state: dict) -> dict | Commit:
            owner = self.claim(state)
            result = fn(state)
            new = result.state if isinstance(result, Commit) else result
            if owner is not None and isinstance(new, dict):
                new["user_id"] = owner
            return result

        return self.backend.update(self.slug, owned)


def target(user: str | None = None, slug: str | None = None) -> Target:
    """Whose thread: `user` (a sender id), else `slug`, else CKS_ACTIVE_USER. Nothing is written."""
    if slug is not None:
        if user is not None:
            raise BadInput("give a user id or a slug, not both")
        return Target(check_slug(slug), None, get_backend())
    user_id = active_id() if user is None else check_id(user)
    return Target(slugify(user_id), stored_id(user_id), get_backend())


def owner(state: dict) -> str | None:
    """The sender id whose thread `state` is: the one kept in it, else, for a plain slug, the slug
    itself (the only id that maps to it); None when unknown (a hashed slug written by --slug)."""
    held = state.get("user_id")
    if held is not None:
        return held
    return state["user_slug"] if is_plain(state["user_slug"]) else None


def inbound(text: str, user: str | None = None, session_id: str | None = None, source: str | None = None,
            keep: int = protocol.KEEP_DEFAULT, slug: str | None = None, message_id: str | None = None) -> dict:
    """A user message arrived. Returns {state, answered, answer_context}: `answered` is the pending
    question it resolved ({question, options, answer, answered_ts}) or None. `message_id`, the chat
    layer's id for the message, makes a redelivered message count once."""
    protocol.clean(text)
    t = target(user, slug)
    box: dict = {}

    def change(state: dict) -> dict:
        if source:
            state = protocol.set_source(state, source)
        state, box["answered"] = protocol.inbound(state, text, session_id, protocol.now_iso(), keep, message_id)
        return state

    state = t.update(change)
    answered = box.get("answered")
    return {"state": state, "answered": answered, "answer_context": answer_context(answered)}


def reply(text: str, user: str | None = None, session_id: str | None = None, keep: int = protocol.KEEP_DEFAULT,
          slug: str | None = None) -> dict:
    """The agent replied; older turns fold into the summary. Returns the state."""
    protocol.clean(text)
    return target(user, slug).update(lambda s: protocol.reply(s, text, session_id, protocol.now_iso(), keep))


def arm_pending(user: str | None = None, slug: str | None = None) -> dict:
    """The turn ended (a stop with no reply text): a question asked in it becomes answerable."""
    t = target(user, slug)
    state = t.load()
    return t.update(protocol.arm_pending) if (state.get("pending") or {}).get("armed") is False else state


def set_pending(question: str, options: list[str] | tuple[str, ...] = (), user: str | None = None,
                session_id: str | None = None, slug: str | None = None) -> dict:
    """The agent asked a clarification; the user's next message will be recorded as its answer."""
    q, opts = protocol.pending_args(question, options)
    return target(user, slug).update(lambda s: protocol.set_pending(s, q, opts, protocol.now_iso(), session_id))


def clear_pending(user: str | None = None, slug: str | None = None) -> dict:
    return target(user, slug).update(lambda s: protocol.clear_pending(s, protocol.now_iso()))


def set_summary(text: str, user: str | None = None, slug: str | None = None) -> dict:
    """The model's one-paragraph summary replaces the running one (at most 2,000 characters)."""
    body = protocol.summary_arg(text)
    return target(user, slug).update(lambda s: protocol.set_summary(s, body, protocol.now_iso()))


def set_active(feature: str | None, phase: str | None, user: str | None = None, slug: str | None = None) -> dict:
    feature, phase = protocol.active_args(feature, phase)
    return target(user, slug).update(lambda s: protocol.set_active(s, feature, phase, protocol.now_iso()))


def end_thread(user: str | None = None, slug: str | None = None) -> dict:
    """Append the thread's digest to history.md and start a fresh thread, in one commit.
    Returns {digest, state}; digest is '' (nothing appended) when the thread was empty."""
    box: dict = {}

    def change(state: dict) -> Commit:
        box["digest"], nxt = protocol.end_thread(state, protocol.now_iso())
        return Commit(nxt, box["digest"])

    state = target(user, slug).update(change)
    return {"digest": box.get("digest", ""), "state": state}


def reset(user: str | None = None, slug: str | None = None) -> dict:
    """Drop the thread without a digest (a fresh thread; the revision keeps counting up)."""
    t = target(user, slug)
    return t.update(lambda s: protocol.fresh(t.slug, s.get("source")))


def show(user: str | None = None, slug: str | None = None) -> dict:
    """The current state (a fresh, unwritten one when the user has none)."""
    return target(user, slug).load()


def rehydrate(user: str | None = None, slug: str | None = None) -> str:
    """The context a restarted session gets ('' when there is no thread to resume)."""
    return protocol.rehydrate(show(user, slug))


def history(user: str | None = None, slug: str | None = None) -> str:
    t = target(user, slug)
    t.load()  # refused when the folder holds another id's thread
    return t.backend.read_history(t.slug)


def list_users() -> list[str]:
    """The slugs that have a conversation state (owner() of each state gives its id)."""
    return get_backend().list_users()


def corrupt_files(user: str | None = None, slug: str | None = None) -> list[str]:
    """Damaged states moved aside for this user (for doctor)."""
    t = target(user, slug)
    return t.backend.corrupt_files(t.slug)


def location(user: str | None = None, slug: str | None = None) -> str:
    t = target(user, slug)
    return t.backend.location(t.slug)
