"""Which store holds the state, and what every store guarantees.

`LEANCTX_STATE_URL` unset (or `file`): the file store under $CKS_HOME (default). `redis://…`,
`rediss://…` or `unix://…`: the Redis store (redis-py is imported only then). Both keep the
same contract, and the same tests run against both:

  load(slug)              the validated state; absent -> a fresh one (nothing written);
                          unreadable or invalid -> moved aside (never deleted), fresh one
  update(slug, fn)        read-modify-write that never loses an update across processes:
                          fn(state) -> new state (or Commit(state, history)); the store sets
                          revision = old + 1, validates, and commits only if nobody else
                          committed meanwhile (else fn runs again on the newer state)
  append_history / read_history / list_users / corrupt_files
"""

from __future__ import annotations

import os

from leanctx import fastjson
from leanctx.state import protocol
from leanctx.state.errors import StateError, StateInvalid
from leanctx.state.validate import validate

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable

MAX_DOC_BYTES = 1 << 20  # a valid state is far smaller (50 turns x 4000 chars); anything bigger is damage


class Commit:
    """What an update function returns when the same commit also appends a history.md section."""

    __slots__ = ("state", "history")

    def __init__(self, state: dict, history: str = "") -> None:
        self.state = state
        self.history = history


class Backend:
    """The contract (see the module docstring); subclasses implement the storage."""

    name = "?"

    def load(self, slug: str) -> dict:
        raise NotImplementedError

    def update(self, slug: str, fn: Callable[[dict], dict | Commit]) -> dict:
        raise NotImplementedError

    def append_history(self, slug: str, markdown: str) -> None:
        raise NotImplementedError

    def read_history(self, slug: str) -> str:
        raise NotImplementedError

    def list_users(self) -> list[str]:
        raise NotImplementedError

    def corrupt_files(self, slug: str) -> list[str]:
        raise NotImplementedError

    def location(self, slug: str) -> str:
        """Where this user's state lives, for messages."""
        raise NotImplementedError


def apply(fn: Callable[[dict], dict | Commit], current: dict, slug: str) -> tuple[dict, str]:
    """Run `fn` on a copy of `current`; number and validate what it returns."""
    result = fn(protocol.copy_tree(current))  # type: ignore[arg-type]
    state, history = (result.state, result.history) if isinstance(result, Commit) else (result, "")
    if not isinstance(state, dict):
        raise StateInvalid(f"$: an update produced {type(state).__name__}, not an object")
    state["revision"] = int(current["revision"]) + 1
    if state.get("user_slug") != slug:
        raise StateInvalid(f"$.user_slug: {state.get('user_slug')!r} in the state of {slug!r}")
    validate(state)
    return state, history


def decode(raw: bytes, slug: str) -> dict:
    """Bytes from the store -> a validated state of `slug`; StateInvalid on any damage."""
    if len(raw) > MAX_DOC_BYTES:
        raise StateInvalid(f"$: {len(raw)} bytes, more than any valid state")
    try:
        state = fastjson.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise StateInvalid(f"$: does not parse as JSON: {exc}") from None
    validate(state)
    assert isinstance(state, dict)
    if state["user_slug"] != slug:
        raise StateInvalid(f"$.user_slug: {state['user_slug']!r} found in the state of {slug!r}")
    return state


def encode(state: dict) -> bytes:
    return (fastjson.dumps(state) + "\n").encode("utf-8")


_redis_backends: dict[str, Backend] = {}


def get_backend() -> Backend:
    """The store `LEANCTX_STATE_URL` selects (read at every call: tests and tools switch it)."""
    url = os.environ.get("LEANCTX_STATE_URL", "").strip()
    if url in ("", "file"):
        from leanctx.state.filestore import FileBackend

        return FileBackend()
    if url.startswith(("redis://", "rediss://", "unix://")):
        backend = _redis_backends.get(url)
        if backend is None:
            from leanctx.state.redisstore import RedisBackend

            backend = _redis_backends[url] = RedisBackend(url)
        return backend
    raise StateError(f"LEANCTX_STATE_URL={redact(url)!r} is not supported: unset it (files under $CKS_HOME) "
                     "or give redis://host:port/db")


def redact(url: str) -> str:
    """A URL fit for messages: no password."""
    scheme, sep, rest = url.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        rest = "***@" + rest.split("@", 1)[1]
    return scheme + sep + rest
