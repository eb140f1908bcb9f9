"""A Chat Completions fake that answers every turn with ``reply to: <the user's text>`` and can
hold a request until the test releases it (to kill the host mid-turn).

Built on fake_chat.FakeChat (same wire format, request log and main/side split); adds:

* the answer is derived from the request, so it is deterministic whatever the order of turns;
  ``user_text(body)`` picks the user's words out of the last user message (``extract`` overrides);
* ``arrivals``: every request body the moment it arrives (before it is answered or held);
* ``stall_next()`` holds the next main request; ``wait_stalled()`` returns once it has arrived;
  ``release()`` lets every held request go on; one whose client died meanwhile is logged with
  kind ``abandoned`` (not ``main``: the host never got an answer to it);
* ``unix_path=``: listen on a unix socket instead of TCP (see tests/e2e/netns.py);
* ``read_tool=<suffix>``: a turn whose words are ``read FILE`` makes the model call the offered
  tool whose name ends with ``suffix`` with ``{"path": FILE}``, and the request that carries its
  result is answered ``<prefix>read FILE: <the result's first line>`` (so a chat shows what the
  tool returned).
"""
from __future__ import annotations

import json
import re
import threading
import time
from typing import Any, Callable, Optional

from tests.e2e.fake_chat import FakeChat, _make_handler as chat_handler, tool_call, tool_names

__all__ = ["EchoChat", "user_text", "message_text", "tool_result_text", "READ_WORDS"]

READ_WORDS = re.compile(r"^read (\S+)$")


def message_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return content if isinstance(content, str) else ""


def tool_result_text(text: str) -> str:
    """What a tool returned, out of the envelope OpenClaw's ``tool_call`` hands the model: a
    security notice, then ``<<<EXTERNAL_UNTRUSTED_CONTENT …>>>``, ``Source: …``, ``---`` and the
    JSON ``{"tool": …, "result": {"content": [{"type": "text", "text": …}]}}`` (2026.9.6). Any
    other text is returned as it is."""
    start = text.find("<<<EXTERNAL_UNTRUSTED_CONTENT")
    end = text.rfind("<<<END_EXTERNAL_UNTRUSTED_CONTENT")
    if start < 0 or end < start:
        return text
    inner = text[start:end]
    cut = inner.find("\n---\n")
    try:
        value = json.loads(inner[cut + 5:] if cut >= 0 else "")
    except ValueError:
        return text
    content = ((value.get("result") or {}).get("content") if isinstance(value, dict) else None) or []
    parts = [c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"]
    return "".join(parts) if parts else text


def user_text(body: dict) -> str:
    """The text of the last user message of a Chat Completions request."""
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            return message_text(m)
    return ""


def _client_gone(conn: Any) -> bool:
    """True when the peer of a connection has closed it (EOF waiting)."""
    import socket

    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class EchoChat(FakeChat):
    NAME = "fake-echo-chat"

    def __init__(self, *, extract: Callable[[dict], str] = user_text, prefix: str = "reply to: ",
                 unix_path: Optional[str] = None, read_tool: Optional[str] = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.extract = extract
        self.read_tool = read_tool
        self.internal_prefix = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"  # a user message that is the host's, not the person's
        self.read_tool_names: list = []  # the name each read call used (found in tools or by a search)
        self.prefix = prefix
        self.unix_path = unix_path
        self.arrivals: list = []
        self._stall_next = False
        self._held: list = []  # events of held requests
        self._cv = threading.Condition(self._lock)

    def answer_text(self, body: dict) -> str:
        return self.prefix + self.extract(body).strip()

    def _answer(self, body: dict) -> tuple:
        kind = self._kind(body)
        if kind != "main":
            return kind, [{"type": "text", "text": self.side_text}]
        with self._lock:
            self._next += 1
        if self.read_tool:
            item = self._read_step(body)
            if item is not None:
                return "main", [item]
        return "main", [{"type": "text", "text": self.answer_text(body)}]

    def _read_step(self, body: dict) -> Optional[dict]:
        """With ``read_tool``: the next step of a ``read FILE`` turn. The tool offered directly
        (its name ends with ``read_tool``) is called at once; a host that defers tools behind a
        tool search (OpenClaw's ``tool_search``/``tool_call``) is searched first, and the name
        found in the search result is called through ``tool_call``. The request carrying the
        read's result is answered with its first line."""
        words = self.extract(body).strip()
        m = READ_WORDS.match(words)
        if not m:
            return None
        messages = [x for x in body.get("messages") or [] if isinstance(x, dict)]
        turn = []  # this turn's assistant calls and tool results, after the person's last message
        for x in reversed(messages):  # (OpenClaw adds a user message of its own context after each result)
            if x.get("role") == "user" and not message_text(x).startswith(self.internal_prefix):
                break
            turn.insert(0, x)
        calls = {c.get("id"): (c.get("function") or {}).get("name") for x in turn if x.get("role") == "assistant"
                 for c in x.get("tool_calls") or [] if isinstance(c, dict)}
        results = [(calls.get(x.get("tool_call_id")), message_text(x)) for x in turn if x.get("role") == "tool"]
        path = m.group(1)
        if len(results) > 3:  # a host that keeps answering what this script does not expect: stop
            return {"type": "text", "text": f"{self.prefix}{words}: gave up after {len(results)} tool calls"}
        if results and (results[-1][0] == "tool_call" or (results[-1][0] or "").endswith(self.read_tool)):
            first = tool_result_text(results[-1][1]).split("\n", 1)[0]
            return {"type": "text", "text": f"{self.prefix}{words}: {first}"}
        offered = tool_names(body)
        direct = [n for n in offered if n.endswith(self.read_tool)]
        if len(direct) == 1:
            self.read_tool_names.append(direct[0])
            return tool_call(direct[0], {"path": path})
        if "tool_search" not in offered or "tool_call" not in offered:
            return None
        if results and results[-1][0] == "tool_search":
            names = sorted(set(re.findall(r'"name\\?":\s*\\?"([^"\\]*' + re.escape(self.read_tool) + ')', results[-1][1])))
            if len(names) != 1:
                return {"type": "text", "text": f"{self.prefix}{words}: no single read tool found: {names}"}
            self.read_tool_names.append(names[0])
            return tool_call("tool_call", {"id": names[0], "args": {"path": path}})
        return tool_call("tool_search", {"query": "ctx_read read a workspace text file"})

    # ---- stalling ------------------------------------------------------------------------------
    def stall_next(self) -> None:
        """Hold the next main request (the model "thinks" until release())."""
        with self._cv:
            self._stall_next = True

    def wait_stalled(self, timeout: float = 60.0) -> dict:
        """Wait until a request is being held; returns its body."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while not self._held:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"fake model: no request held within {timeout:g} s")
                self._cv.wait(min(left, 1.0))
            return self._held[-1][1]

    def release(self) -> None:
        with self._cv:
            self._stall_next = False
            for ev, _ in self._held:
                ev.set()
            self._held.clear()

    def wait_requests(self, count: int, timeout: float = 60.0, kind: str = "main") -> list:
        """Wait until ``count`` requests of ``kind`` were answered; returns their bodies."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                got = [r.body for r in self.log if r.kind == kind]
                if len(got) >= count:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"fake model: {len(got)} of {count} {kind} request(s) within {timeout:g} s")
                self._cv.wait(min(left, 1.0))

    def _arrived(self, body: Any) -> Optional[threading.Event]:
        with self._cv:
            self.arrivals.append(body)
            ev = None
            if self._stall_next and isinstance(body, dict) and self._kind(body) == "main":
                self._stall_next = False
                ev = threading.Event()
                self._held.append((ev, body))
            self._cv.notify_all()
            return ev

    def _recorded(self) -> None:
        with self._cv:
            self._cv.notify_all()

    # ---- lifecycle -----------------------------------------------------------------------------
    def _make_handler(self) -> type:
        srv = self
        base = chat_handler(self)

        class Handler(base):  # type: ignore[misc, valid-type]
            abandoned = False

            def _read_body(self) -> Any:
                body = super()._read_body()
                ev = srv._arrived(body)
                if ev is not None:
                    ev.wait()
                    self.abandoned = _client_gone(self.connection)
                return body

            def _record(self, kind: str, body: Any, response: Any = None) -> None:
                # a held request whose client died meanwhile (killed host) was never answered
                super()._record("abandoned" if self.abandoned else kind, body, response)
                srv._recorded()

        return Handler

    def start(self) -> "EchoChat":
        if not self.unix_path:
            return super().start()
        from tests.e2e.netns import UnixHTTPServer, unix_handler

        self._server = UnixHTTPServer(self.unix_path, unix_handler(self._make_handler()))
        threading.Thread(target=self._server.serve_forever, name=self.NAME, daemon=True).start()
        return self

    @property
    def base_url(self) -> str:
        assert not self.unix_path, "listening on a unix socket"
        return super().base_url

    def main_texts(self) -> list:
        """Each main request's messages as (role, text) pairs, in arrival order."""
        return [[(m.get("role"), message_text(m)) for m in (b.get("messages") or []) if isinstance(m, dict)]
                for b in self.main_requests]

    def dump(self) -> str:
        return "\n".join(json.dumps(b) for b in self.main_requests)
