"""The scale-out store: several bot replicas share one Redis (`LEANCTX_STATE_URL=redis://…`).

Keys (prefix `LEANCTX_STATE_PREFIX`, default `cks`, mirroring the file layout):
  cks:user:<slug>:conversation-state                the state JSON
  cks:user:<slug>:history                           history.md as a list, one digest per item
  cks:user:<slug>:conversation-state:corrupt:<time> a damaged value, renamed aside (never deleted)

An update is a compare-and-swap: WATCH the key, GET, apply, MULTI/SET(/RPUSH)/EXEC; EXEC comes
back empty when anyone committed in between, and the update runs again on the newer state
(jittered back-off, bounded in time). The history append of end_thread commits in the same
transaction. It talks RESP through leanctx.state.resp (standard library), so the hooks can use it
under `python -I -S` at no import cost.
"""

from __future__ import annotations

import os
import time

from leanctx.state import protocol
from leanctx.state.backend import Backend, Commit, apply, decode, encode, redact
from leanctx.state.errors import StateBusy, StateError, StateInvalid, StoreNotOurs, StoreUnavailable
from leanctx.state.resp import Client, RespConnectionError, RespError, RespNotOurs, check
from leanctx.state.slug import check_slug

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

CAS_TIMEOUT_S = 10.0
# Commands that change nothing: resent once on a fresh connection when the old one was found dead.
# Never a MULTI block (its WATCH died with the old connection) nor a write (it may have landed).
_SAFE_TO_RESEND = frozenset({"WATCH", "GET", "LRANGE", "SCAN"})


class RedisBackend(Backend):
    name = "redis"

    def __init__(self, url: str, prefix: str | None = None) -> None:
        self.url = url
        self.prefix = prefix or os.environ.get("LEANCTX_STATE_PREFIX") or "cks"
        try:
            self.client = Client(url)
        except ValueError as exc:
            raise StateError(f"LEANCTX_STATE_URL={redact(url)!r}: {exc}") from None

    def key(self, slug: str) -> str:
        return f"{self.prefix}:user:{check_slug(slug)}:conversation-state"

    def history_key(self, slug: str) -> str:
        return f"{self.prefix}:user:{check_slug(slug)}:history"

    def location(self, slug: str) -> str:
        return f"{redact(self.url)} key {self.key(slug)}"

    def load(self, slug: str) -> dict:
        raw = self._call("GET", self.key(slug))
        if raw is None:
            return protocol.fresh(slug)
        try:
            return decode(raw, slug)  # type: ignore[arg-type]
        except StateInvalid:
            self._quarantine(slug, raw)  # type: ignore[arg-type]
            return protocol.fresh(slug)

    def update(self, slug: str, fn: Callable[[dict], dict | Commit]) -> dict:
        key = self.key(slug)
        deadline = time.monotonic() + CAS_TIMEOUT_S
        pause = 0.0005
        while True:
            raw = self._run([("WATCH", key), ("GET", key)])[1]
            current = None
            if raw is not None:
                try:
                    current = decode(raw, slug)  # type: ignore[arg-type]
                except StateInvalid:
                    self._run([("MULTI",), ("RENAME", key, self._corrupt_key(key)), ("EXEC",)])
                    continue  # moved aside (or someone else rewrote it): start over
            try:
                new, history = apply(fn, current or protocol.fresh(slug), slug)
                body = encode(new)
            except BaseException:
                self._unwatch()
                raise
            commands: list[tuple] = [("MULTI",), ("SET", key, body)]
            if history:
                commands.append(("RPUSH", self.history_key(slug), protocol.clean(history).encode("utf-8")))
            commands.append(("EXEC",))
            if self._run(commands)[-1] is not None:
                return new
            if time.monotonic() > deadline:  # EXEC came back empty: another writer committed first
                raise StateBusy(f"{self.location(slug)}: other writers kept winning for {CAS_TIMEOUT_S:g} s; try again")
            time.sleep(pause * (0.5 + os.urandom(1)[0] / 255))
            pause = min(pause * 2, 0.01)

    def append_history(self, slug: str, markdown: str) -> None:
        self._call("RPUSH", self.history_key(slug), protocol.clean(markdown).encode("utf-8"))

    def read_history(self, slug: str) -> str:
        items = self._call("LRANGE", self.history_key(slug), 0, -1)
        parts = [i.decode("utf-8", "replace") for i in items]  # type: ignore[union-attr]
        return "\n".join(p if p.endswith("\n") else p + "\n" for p in parts)

    def list_users(self) -> list[str]:
        """Users with a conversation state, or with a damaged one moved aside (doctor reports those)."""
        head, tail = f"{self.prefix}:user:", ":conversation-state"
        slugs = set()
        for k in self._scan(f"{head}*{tail}") | self._scan(f"{head}*{tail}:corrupt:*"):
            slug = k[len(head):].split(":", 1)[0]
            if slug and k[len(head) + len(slug):].startswith(tail):
                slugs.add(slug)
        return sorted(slugs)

    def corrupt_files(self, slug: str) -> list[str]:
        return sorted(self._scan(f"{self.key(slug)}:corrupt:*"))

    # --- helpers ----------------------------------------------------------------------------------

    def _quarantine(self, slug: str, raw: bytes) -> None:
        """Rename the damaged value aside, unless a writer replaced it meanwhile."""
        key = self.key(slug)
        if self._run([("WATCH", key), ("GET", key)])[1] != raw:
            self._unwatch()
            return
        self._run([("MULTI",), ("RENAME", key, self._corrupt_key(key)), ("EXEC",)])

    def _corrupt_key(self, key: str) -> str:
        now = time.time()
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now)) + f"{int(now % 1 * 1_000_000):06d}Z"
        return f"{key}:corrupt:{stamp}-{os.urandom(3).hex()}"

    def _scan(self, pattern: str) -> set[str]:
        found: set[str] = set()
        cursor: object = b"0"
        while True:
            cursor, keys = self._call("SCAN", cursor, "MATCH", pattern, "COUNT", 500)  # type: ignore[misc]
            found.update(k.decode("utf-8", "replace") for k in keys)
            if cursor == b"0":
                return found

    def _call(self, *args: object) -> object:
        return self._run([args])[0]

    def _run(self, commands: list[tuple]) -> list[object]:
        """Send a pipeline; a connection found broken (server restarted, idle timeout) is redialled
        once, before anything is sent on it. Error replies raise StoreUnavailable."""
        reused = self.client.connected
        try:
            replies = self.client.pipeline(commands)
        except RespConnectionError as exc:
            if not reused or commands[0][0] not in _SAFE_TO_RESEND:
                raise _unavailable(self.url, exc) from None
            try:
                replies = self.client.pipeline(commands)
            except RespConnectionError as again:
                raise _unavailable(self.url, again) from None
        try:
            for reply in replies:
                check(reply)
        except RespError as exc:
            raise StoreUnavailable(f"Redis at {redact(self.url)} refused {commands[0][0]}: {exc}") from None
        return replies

    def _unwatch(self) -> None:
        try:
            self.client.call("UNWATCH")
        except (OSError, RespError):
            self.client.close()  # a closed connection drops its WATCH too


def _unavailable(url: str, exc: RespConnectionError) -> StoreUnavailable:
    kind = StoreNotOurs if isinstance(exc, RespNotOurs) else StoreUnavailable
    return kind(f"Redis at {redact(url)}: {exc}")
