"""Scripted fake of the Anthropic Messages API, enough to drive a real ``claude -p`` offline.

Usage::

    from tests.e2e.fake_anthropic import FakeAnthropic, text, tool_use

    with FakeAnthropic(script=[tool_use("Read", {"file_path": str(p)}), text("The file says hello.")]) as srv:
        env["ANTHROPIC_BASE_URL"] = srv.base_url
        ...run claude -p...
        srv.requests          # every parsed JSON body, in arrival order (main + side + count_tokens)
        srv.main_requests     # only the bodies that consumed (or would consume) a scripted turn
        srv.log               # RequestRecord(path, kind, body, response) for every request

The server listens on 127.0.0.1 on a random free port, in a background thread; every
request is handled in its own thread (``ThreadingHTTPServer``).

Endpoints
---------
* ``POST /v1/messages`` (Claude Code adds ``?beta=true``): answered as an SSE stream when the
  body says ``"stream": true`` (always the case for Claude Code), else as one JSON message.
* ``POST /v1/messages/count_tokens``: ``{"input_tokens": 10}``.
* anything else (GET/POST/HEAD ...): ``{}`` with status 200.

Script items
------------
Each item of ``script`` is one assistant message, served for one *main* request, in order:

* ``"some text"`` or ``text("...")``               -> one text block, ``stop_reason: end_turn``
* ``tool_use(name, input_dict)``                    -> one tool_use block, ``stop_reason: tool_use``
* a list of the above (``[text("x"), tool_use(...), tool_use(...)]``) -> several blocks in one
  message (parallel tool calls); the stop reason is ``tool_use`` if any block is a tool_use.
* a callable ``f(body) -> item``                   -> computed from the request body.

When the script is exhausted every further main request gets ``text(default_text)``
(``"done"``).

Main vs side vs compaction requests (verified against Claude Code 2.1.197, headless)
----------------------------------------------------------------------------------
Recorded bodies of ``claude -p`` runs (Read / Bash / MCP tool calls, an ``Agent`` subagent,
``/compact``) show three kinds of ``POST /v1/messages``:

* main conversation turns: non-empty ``tools`` (24 built-ins such as Agent, Bash, Read, Edit ...
  plus ``mcp__<server>__<tool>``), ``system`` = list of text blocks (billing header,
  "You are a Claude agent, built on Anthropic's Claude Agent SDK.", the big agent prompt),
  ``model`` = ``claude-opus-4-8``, ``max_tokens`` 64000, ``stream`` true.
* subagent turns (model called the ``Agent`` tool): same shape (``tools`` has 21 entries -- no
  Agent/SendMessage...), ``system[0]`` is ``x-anthropic-billing-header: ...; cc_is_subagent=true;``
  and the agent prompt starts "You are an agent for Claude Code ...".  They are *main* requests
  here and consume scripted turns in arrival order, which is the order the host needs them
  (parent's Agent call -> subagent turns -> parent's next turn); ``is_subagent(body)`` tells
  them apart if a test wants a callable script item that routes on it.
* compaction (``claude -p --continue /compact``): the conversation so far + ``tools`` (so it looks
  like a main turn) and a last user text block starting "CRITICAL: Respond with TEXT ONLY. Do NOT
  call any tools." / "Your task is to create a detailed summary of the conversation so far".
  It is classified ``compact`` and answered with ``text(compact_text)`` without consuming a
  scripted turn.  (Claude Code reports it as a SubagentStop with ``agent_type: ""``.)
* anything without ``tools`` is a side request (``side``) answered with ``text(side_text)``.
  With ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` (what hostcli.claude_env sets) 2.1.197 sent
  no such request at all in ``-p`` mode (no title/quota/haiku calls were observed, even without that
  variable); the rule is kept as a safety net for other versions.

Rule: ``kind = "compact" if is_compaction(body) else "main" if body.get("tools") else "side"``.

Deferred tools (Claude Code 2.1.332, tool search on by default): MCP tools are not in ``tools``;
their names are listed in a system message ("The following deferred tools are now available via
ToolSearch ...") and ``ToolSearch`` is offered. A real model calls ``ToolSearch`` with
``select:<name>`` first; the result is a ``tool_reference`` block and the next request offers the
tool (with ``defer_loading: true``). So when a scripted answer calls a tool the request does not
offer while it offers ``ToolSearch``, the fake answers ``ToolSearch select:<names>`` first, records
that turn as kind ``tool_search`` (not in ``main_requests``) and serves the scripted answer on the
next request. With 2.1.197 (no tool search) this never happens. ``load_deferred=False`` turns it off.
Override with ``FakeAnthropic(classify=lambda body: "main" | "side" | "compact")`` (a bool is
accepted too: True -> main, False -> side).

Besides ``/v1/messages?beta=true`` the CLI sends one ``HEAD /`` at start-up (answered 200).
"""
from __future__ import annotations

import itertools
import json
from http.server import BaseHTTPRequestHandler
from tests.e2e.fakeserver import RequestRecord, ScriptedFakeServer, normalize_script_item
from typing import Any, Callable, Iterable, Optional, Union

__all__ = [
    "FakeAnthropic",
    "RequestRecord",
    "text",
    "tool_use",
    "default_classify",
    "tool_results",
    "is_subagent",
    "is_compaction",
]

Block = dict
TOOL_SEARCH = "ToolSearch"
ScriptItem = Union[str, Block, list, Callable[[dict], Any]]


def _session_of(body: dict) -> str:
    """The conversation a request belongs to: Claude Code sends its session id inside
    `metadata.user_id` (a JSON string); "" when it cannot be told."""
    meta = body.get("metadata")
    raw = meta.get("user_id") if isinstance(meta, dict) else None
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return ""
    sid = value.get("session_id") if isinstance(value, dict) else None
    return sid if isinstance(sid, str) else ""


def text(s: str) -> Block:
    """A text content block for the script."""
    return {"type": "text", "text": s}


_tool_ids = itertools.count()


def tool_use(name: str, input: Optional[dict] = None, id: Optional[str] = None) -> Block:
    """A tool_use content block for the script (the id is generated if not given)."""
    return {
        "type": "tool_use",
        "id": id or f"toolu_fake{next(_tool_ids):04d}",
        "name": name,
        "input": dict(input or {}),
    }


def _last_user_text(body: dict) -> str:
    for msg in reversed(body.get("messages") or []):
        if msg.get("role") != "user":
            continue
        c = msg.get("content")
        if isinstance(c, str):
            return c
        return "\n".join(b.get("text", "") for b in c or [] if isinstance(b, dict) and b.get("type") == "text")
    return ""


def is_compaction(body: dict) -> bool:
    """The summarisation request of /compact (or auto-compaction)."""
    t = _last_user_text(body)
    return "create a detailed summary of the conversation so far" in t or (
        t.lstrip().startswith("CRITICAL: Respond with TEXT ONLY") and "summary" in t
    )


def is_subagent(body: dict) -> bool:
    """A turn of a subagent spawned through the Agent/Task tool."""
    sys_blocks = body.get("system")
    if isinstance(sys_blocks, list) and sys_blocks:
        first = sys_blocks[0].get("text", "") if isinstance(sys_blocks[0], dict) else ""
        return "cc_is_subagent=true" in first
    return False


def default_classify(body: dict) -> str:
    """"compact" | "main" | "side" for a /v1/messages body (see the module docstring)."""
    if is_compaction(body):
        return "compact"
    return "main" if body.get("tools") else "side"


def tool_results(body: dict) -> list:
    """All tool_result blocks sent in the *last* user message of a request body."""
    msgs = body.get("messages") or []
    if not msgs:
        return []
    content = msgs[-1].get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def _normalize(item: Any, body: dict) -> list:
    return normalize_script_item(item, body, text)


class FakeAnthropic(ScriptedFakeServer):
    NAME = "fake-anthropic"
    URL_SUFFIX = ""

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        default_text: str = "done",
        side_text: str = "ok",
        compact_text: str = "<summary>Compacted by the fake server.</summary>",
        classify: Callable[[dict], Any] = default_classify,
        model: str = "claude-fake",
        host: str = "127.0.0.1",
        port: int = 0,
        input_tokens: int | Callable[[dict, str], int] = 1,
        load_deferred: bool = True,
    ) -> None:
        super().__init__(script, default_text=default_text, side_text=side_text, compact_text=compact_text,
                         classify=classify, model=model, host=host, port=port)
        self._msg_ids = itertools.count()
        # the usage an answer reports (or f(body, kind) -> it): a high figure near Claude Code's
        # window (CLAUDE_CODE_AUTO_COMPACT_WINDOW) makes it compact on its own before the next turn
        self.input_tokens = input_tokens
        # answer a scripted call of a deferred tool with a ToolSearch call first (see _deferred);
        # such a turn is recorded as kind "tool_search" and consumes no scripted item
        self.load_deferred = load_deferred
        # per session (several conversations may talk to one fake at once): the scripted answers
        # held back for a ToolSearch turn, oldest first
        self._held: dict[str, list[tuple[int, list]]] = {}

    def _make_handler(self) -> type:
        return _make_handler(self)

    def _answer(self, body: dict) -> tuple[str, list]:
        kind = self._kind(body)
        if kind == "compact":
            return "compact", [text(self.compact_text)]
        if kind == "side":
            return "side", [text(self.side_text)]
        session = _session_of(body)
        with self._lock:
            held = self._held.get(session)
            if held:  # this session's answer held back for its ToolSearch turn comes first
                idx, blocks = held.pop(0)
            else:
                idx, blocks = self._next, None
                self._next += 1
        if blocks is None:  # a callable item runs outside the lock (it may wait for other requests)
            item = self.script[idx] if idx < len(self.script) else self.default_text
            blocks = _normalize(item, body)
        deferred = self._deferred(blocks, body)
        if deferred:
            with self._lock:  # served on this session's request that follows the ToolSearch result
                self._held.setdefault(session, []).insert(0, (idx, blocks))
            return "tool_search", [tool_use(TOOL_SEARCH, {"query": "select:" + ",".join(deferred)})]
        return "main", blocks

    def _deferred(self, blocks: list, body: dict) -> list:
        """The tools the scripted answer calls that this request defers (Claude Code 2.1.332 sends
        MCP tools' names in a system message and their schemas only after ToolSearch loads them):
        a model must call ToolSearch for them first, as the system message tells it to."""
        if not self.load_deferred:
            return []
        offered = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}  # loaded ones included
        if TOOL_SEARCH not in offered:
            return []
        names = [b.get("name") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        return [n for n in dict.fromkeys(names) if n not in offered]

    def _next_msg_id(self) -> str:
        return f"msg_fake{next(self._msg_ids):05d}"


def _sse(event: str, data: dict) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _make_handler(srv: FakeAnthropic):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # silence
            pass

        def _read_body(self) -> Any:
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n) if n else b""
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError:
                return raw.decode("utf-8", "replace")

        def _json(self, obj: Any, status: int = 200) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self, kind: str, body: Any, response: Any = None) -> RequestRecord:
            rec = RequestRecord(self.command, self.path, kind, body, dict(self.headers.items()), response)
            with srv._lock:
                srv.log.append(rec)
            return rec

        def do_GET(self):
            self._record("other", None)
            self._json({})

        def do_HEAD(self):
            self._record("other", None)
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self):
            body = self._read_body()
            path = self.path.split("?", 1)[0].rstrip("/")
            if path.endswith("/v1/messages/count_tokens"):
                self._record("count_tokens", body)
                return self._json({"input_tokens": 10})
            if path.endswith("/v1/messages") and isinstance(body, dict):
                kind, blocks = srv._answer(body)
                self._record(kind, body, blocks)
                tokens = srv.input_tokens
                self._input_tokens = tokens(body, kind) if callable(tokens) else tokens
                model = body.get("model") or srv.model
                if body.get("stream"):
                    return self._stream(blocks, model)
                return self._json(self._message(blocks, model))
            self._record("other", body)
            return self._json({})

        # --- message rendering ---
        def _message(self, blocks: list, model: str) -> dict:
            stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
            return {
                "id": srv._next_msg_id(),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": self._input_tokens, "output_tokens": 1},
            }

        def _stream(self, blocks: list, model: str) -> None:
            stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            out = [
                _sse(
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {
                            "id": srv._next_msg_id(),
                            "type": "message",
                            "role": "assistant",
                            "model": model,
                            "content": [],
                            "stop_reason": None,
                            "stop_sequence": None,
                            "usage": {"input_tokens": self._input_tokens, "output_tokens": 1},
                        },
                    },
                )
            ]
            for i, b in enumerate(blocks):
                if b.get("type") == "tool_use":
                    start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                    delta = {"type": "input_json_delta", "partial_json": json.dumps(b.get("input") or {})}
                else:
                    start = {"type": "text", "text": ""}
                    delta = {"type": "text_delta", "text": b.get("text", "")}
                out.append(_sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
                out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
                out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
            out.append(
                _sse(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 1},
                    },
                )
            )
            out.append(_sse("message_stop", {"type": "message_stop"}))
            self.wfile.write(b"".join(out))
            self.wfile.flush()
            self.close_connection = True

    return Handler


if __name__ == "__main__":  # manual use: python -m tests.e2e.fake_anthropic
    import sys
    import time

    items = [json.loads(a) if a.startswith(("{", "[")) else a for a in sys.argv[1:]]
    with FakeAnthropic(script=items) as s:
        print(s.base_url, flush=True)
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
