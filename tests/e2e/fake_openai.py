"""Scripted fake of the OpenAI Responses API, enough to drive a real ``codex exec`` offline.

Usage::

    from tests.e2e.fake_openai import FakeOpenAI, text, function_call, shell_call

    with FakeOpenAI(script=[shell_call("cat a.txt"), text("The file says hello.")]) as srv:
        # ~/.codex/config.toml:  see hostcli.codex_config_toml(srv.base_url)
        ...run codex exec...
        srv.requests        # every parsed JSON body, in arrival order
        srv.main_requests   # bodies that consumed (or would consume) a scripted turn
        srv.log             # RequestRecord(method, path, kind, body, headers, response)

Codex must be configured with a custom provider whose ``base_url`` is ``srv.base_url`` (it ends
in ``/v1``) and ``wire_api = "responses"``; Codex then POSTs ``<base_url>/responses`` with
``"stream": true``.

Endpoints
---------
* ``POST .../responses``: answered as SSE (``content-type: text/event-stream``) with the event
  sequence ``response.created`` -> per output item ``response.output_item.added`` /
  (``response.output_text.delta``) / ``response.output_item.done`` -> ``response.completed``
  (with ``usage``); non-streaming bodies get the plain response object.
* ``POST .../chat/completions`` (Chat Completions, for OpenCode and Cline): the same script items,
  translated -- a ``message`` becomes ``content``, a ``function_call`` a ``tool_calls`` entry whose
  ``id`` is the item's ``call_id``; streamed as ``chat.completion.chunk`` SSE ending in ``[DONE]``
  when ``"stream": true``. A request with ``tools`` is main, one without is side (OpenCode's title
  request). The tool results come back as ``role: "tool"`` messages: ``chat_tool_outputs(body)``.
* ``GET .../models``: ``{"object": "list", "data": [], "models": []}``.
* anything else: ``{}``.

Script items
------------
One item per main request, in order (``default_text`` -- ``"done"`` -- once exhausted):

* ``"text"`` or ``text("...")``                      -> an assistant ``message`` item
* ``function_call(name, arguments_dict)``             -> a ``function_call`` item (Codex runs the
  tool and sends the result back as ``function_call_output`` in the next request)
* ``shell_call("cat a.txt")``                          -> a ``function_call`` to Codex's shell tool;
  the tool name and argument shape are picked *from the request's ``tools`` list*
  (``exec_command`` {"cmd": ...} / ``shell_command`` {"command": "..."} /
  ``shell`` {"command": ["bash","-lc", ...]}), so the same script works across Codex versions.
* a list of the above                                 -> several output items in one response
* a callable ``f(body) -> item``

Main vs side vs compaction requests (verified against Codex 0.171.0 ``exec``)
----------------------------------------------------------------------------
* main turns: one ``POST /v1/responses`` per model turn, with ``tools`` (exec_command,
  write_stdin, request_user_input, view_image, get_goal/create_goal/update_goal, web_search and
  ``namespace`` tools: ``multi_agent_v1`` {spawn_agent, wait_agent, send_input, close_agent,
  resume_agent} and one ``mcp__<server>`` namespace per MCP server), ``input`` (developer
  instructions, environment context, the user prompt, then function_call /
  function_call_output items), ``stream: true``, ``store: false`` and ``client_metadata``
  (``session_id``, ``thread_id``, ``turn_id``, ``x-codex-turn-metadata`` JSON string).
* subagent turns (after a ``multi_agent_v1.spawn_agent`` call): same shape with one tool less;
  ``client_metadata.thread_id`` != ``session_id`` and turn metadata ``thread_source`` is
  ``"subagent"`` -> ``is_subagent(body)``.  They are main requests and consume scripted turns in
  arrival order (they run concurrently with the parent, so route with a callable script item
  that checks ``is_subagent`` when order matters).
* compaction (auto-compaction when reported ``usage`` exceeds ``model_auto_compact_token_limit``):
  ``/v1/responses`` *without* ``tools`` whose last user input starts "You are performing a
  CONTEXT CHECKPOINT COMPACTION" -> kind ``compact``, answered with ``text(compact_text)``.
  Use ``FakeOpenAI(usage={"input_tokens": 50000, "total_tokens": 50005})`` and
  ``model_auto_compact_token_limit = 1000`` in config.toml to trigger it.
* anything else without ``tools`` -> ``side`` (none observed in 0.171 ``exec``).

Rule: ``"compact" if is_compaction(body) else "main" if body.get("tools") else "side"``; override
with ``classify=`` (returning a kind string or a bool).

Function calls to namespaced tools need ``"namespace"`` on the item:
``function_call("ping", {"x": "hi"}, namespace="mcp__x")`` (Codex reports it to hooks as
``tool_name: "mcp__x__ping"``).  An MCP tool call only runs in
``exec`` when the entry approves it (``[mcp_servers.NAME.tools.TOOL] approval_mode = "approve"``, or
``default_tools_approval_mode = "approve"`` for all; otherwise the tool output is "MCP tool call
requires approval, but approval policy is never").
"""
from __future__ import annotations

import itertools
import json
import time
from http.server import BaseHTTPRequestHandler
from tests.e2e.fakeserver import RequestRecord, ScriptedFakeServer, normalize_script_item
from typing import Any, Callable, Iterable, Optional

__all__ = [
    "FakeOpenAI",
    "RequestRecord",
    "text",
    "function_call",
    "shell_call",
    "default_classify",
    "function_outputs",
    "chat_tool_outputs",
    "chat_results",
    "is_subagent",
    "is_compaction",
    "turn_metadata",
]

_ids = itertools.count()


def _nid(prefix: str) -> str:
    return f"{prefix}_fake{next(_ids):05d}"


def text(s: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": s, "annotations": []}]}


def function_call(name: str, arguments: Any = None, call_id: Optional[str] = None,
                  namespace: Optional[str] = None) -> dict:
    """A ``function_call`` output item; ``namespace`` for namespaced tools (``mcp__<server>``,
    ``multi_agent_v1``)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    item = {"type": "function_call", "name": name, "arguments": args, "call_id": call_id or _nid("call")}
    if namespace:
        item["namespace"] = namespace
    return item


def shell_call(command: str, workdir: Optional[str] = None, call_id: Optional[str] = None) -> Callable[[dict], dict]:
    """A call to Codex's shell tool, shaped after whichever shell tool the request offers."""
    cid = call_id or _nid("call")

    def build(body: dict) -> dict:
        names = {_tool_name(t) for t in body.get("tools") or []}
        if "exec_command" in names:
            args: dict = {"cmd": command}
            if workdir:
                args["workdir"] = workdir
            return function_call("exec_command", args, cid)
        if "shell_command" in names:
            args = {"command": command}
            if workdir:
                args["workdir"] = workdir
            return function_call("shell_command", args, cid)
        args = {"command": ["bash", "-lc", command]}
        if workdir:
            args["workdir"] = workdir
        return function_call("shell", args, cid)

    build.__name__ = f"shell_call({command!r})"
    return build


def _tool_name(t: Any) -> Optional[str]:
    if not isinstance(t, dict):
        return None
    return t.get("name") or (t.get("function") or {}).get("name")


def turn_metadata(body: dict) -> dict:
    """The parsed ``client_metadata["x-codex-turn-metadata"]`` of a request ({} if absent)."""
    try:
        return json.loads((body.get("client_metadata") or {}).get("x-codex-turn-metadata") or "{}")
    except ValueError:
        return {}


def is_subagent(body: dict) -> bool:
    cm = body.get("client_metadata") or {}
    if cm.get("thread_id") and cm.get("session_id") and cm["thread_id"] != cm["session_id"]:
        return True
    return turn_metadata(body).get("thread_source") == "subagent"


def _input_texts(body: dict) -> list:
    out = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "message" and item.get("role") == "user":
            for c in item.get("content") or []:
                if isinstance(c, dict) and c.get("type") == "input_text":
                    out.append(c.get("text", ""))
    return out


def is_compaction(body: dict) -> bool:
    texts = _input_texts(body)
    return bool(texts) and "CONTEXT CHECKPOINT COMPACTION" in texts[-1] and not body.get("tools")


def default_classify(body: dict) -> str:
    if is_compaction(body):
        return "compact"
    return "main" if body.get("tools") else "side"


def function_outputs(body: dict) -> list:
    """The ``function_call_output`` items in a request's ``input``."""
    return [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") == "function_call_output"]


def chat_tool_outputs(body: dict) -> dict:
    """tool_call_id -> the text of each tool result in a Chat Completions request."""
    out: dict = {}
    for msg in body.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "tool" and msg.get("tool_call_id"):
            content = msg.get("content")
            if isinstance(content, list):
                content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
            out[msg["tool_call_id"]] = content if isinstance(content, str) else json.dumps(content)
    return out


def chat_results(srv: "FakeOpenAI") -> dict:
    """tool_call_id -> tool result text over every Chat Completions request `srv` received; an MCP
    result handed over as its JSON (Cline does) is reduced to its text content."""
    found: dict = {}
    for body in srv.requests:
        if isinstance(body, dict):
            found.update(chat_tool_outputs(body))
    for call_id, text in found.items():
        try:
            result = json.loads(text)
        except ValueError:
            continue
        if isinstance(result, dict) and isinstance(result.get("content"), list):
            found[call_id] = "".join(c.get("text", "") for c in result["content"] if isinstance(c, dict))
    return found


def _chat_message(items: list) -> tuple[str, list]:
    """(text, tool_calls) of Responses-shaped script items, for a Chat Completions answer."""
    text = "".join(c.get("text", "") for it in items if it.get("type") == "message" for c in it.get("content") or [])
    calls = [{"id": it["call_id"], "type": "function", "function": {"name": it["name"], "arguments": it.get("arguments", "{}")}}
             for it in items if it.get("type") == "function_call"]
    return text, calls


def _normalize(item: Any, body: dict) -> list:
    return normalize_script_item(item, body, text)


class FakeOpenAI(ScriptedFakeServer):
    NAME = "fake-openai"
    URL_SUFFIX = "/v1"

    def __init__(
        self,
        script: Iterable[Any] = (),
        *,
        default_text: str = "done",
        side_text: str = "ok",
        compact_text: str = "Summary: compacted by the fake server.",
        classify: Callable[[dict], Any] = default_classify,
        model: str = "gpt-5",
        usage: Optional[dict] = None,
        chat_usage: Optional[Callable[[str, dict], Optional[dict]]] = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(script, default_text=default_text, side_text=side_text, compact_text=compact_text,
                         classify=classify, model=model, host=host, port=port)
        self.usage = usage
        # Chat Completions: (request kind, body) -> the usage to report, None for the default
        self.chat_usage = chat_usage

    def _make_handler(self) -> type:
        return _make_handler(self)

    def _answer(self, body: dict) -> tuple[str, list]:
        kind = self._kind(body)
        if kind == "compact":
            return "compact", [text(self.compact_text)]
        if kind == "side":
            return "side", [text(self.side_text)]
        with self._lock:
            idx = self._next
            self._next += 1
        item = self.script[idx] if idx < len(self.script) else self.default_text
        return "main", _normalize(item, body)


def _sse(data: dict) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def _make_handler(srv: FakeOpenAI):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _read_body(self) -> Any:
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n) if n else b""
            if not raw and (self.headers.get("transfer-encoding") or "").lower() == "chunked":
                raw = self._read_chunked()
            if not raw:
                return None
            if (self.headers.get("content-encoding") or "").lower() == "zstd":
                return {"_undecoded_zstd_bytes": len(raw)}
            try:
                return json.loads(raw)
            except ValueError:
                return raw.decode("utf-8", "replace")

        def _read_chunked(self) -> bytes:
            out = b""
            while True:
                line = self.rfile.readline().strip()
                size = int(line.split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()

        def _json(self, obj: Any, status: int = 200) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self, kind: str, body: Any, response: Any = None) -> None:
            with srv._lock:
                srv.log.append(RequestRecord(self.command, self.path, kind, body, dict(self.headers.items()), response))

        def do_GET(self):
            self._record("other", None)
            path = self.path.split("?", 1)[0].rstrip("/")
            if path.endswith("/models"):
                return self._json({"object": "list", "data": [], "models": []})
            return self._json({})

        def do_POST(self):
            body = self._read_body()
            path = self.path.split("?", 1)[0].rstrip("/")
            if path.endswith("/responses") and isinstance(body, dict):
                kind, items = srv._answer(body)
                self._record(kind, body, items)
                model = body.get("model") or srv.model
                if body.get("stream", False):
                    return self._stream(items, model)
                return self._json(self._response_obj(items, model, "completed"))
            if path.endswith("/chat/completions") and isinstance(body, dict):
                return self._chat(body)
            self._record("other", body)
            return self._json({})

        def _chat(self, body: dict) -> None:
            kind, items = srv._answer(body)
            self._record(kind, body, items)
            text, calls = _chat_message(items)
            model = body.get("model") or srv.model
            cid, finish = _nid("chatcmpl"), "tool_calls" if calls else "stop"
            usage = (srv.chat_usage(kind, body) if srv.chat_usage else None) or \
                {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            if not body.get("stream"):
                msg: dict = {"role": "assistant", "content": text or None}
                if calls:
                    msg["tool_calls"] = calls
                return self._json({"id": cid, "object": "chat.completion", "created": int(time.time()), "model": model,
                                   "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage})
            chunks = []

            def chunk(delta: Optional[dict], fin: Optional[str] = None, use: Optional[dict] = None) -> None:
                data: dict = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                              "choices": [] if use else [{"index": 0, "delta": delta, "finish_reason": fin}]}
                if use:
                    data["usage"] = use
                chunks.append(b"data: " + json.dumps(data).encode() + b"\n\n")

            chunk({"role": "assistant", "content": ""})
            if text:
                chunk({"content": text})
            for i, call in enumerate(calls):
                chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                       "function": {"name": call["function"]["name"], "arguments": ""}}]})
                chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]})
            chunk({}, finish)
            if (body.get("stream_options") or {}).get("include_usage"):
                chunk(None, None, usage)
            chunks.append(b"data: [DONE]\n\n")
            self._send_sse(chunks)

        def _send_sse(self, chunks: list) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(b"".join(chunks))
            self.wfile.flush()
            self.close_connection = True

        def _response_obj(self, items: list, model: str, status: str, rid: Optional[str] = None) -> dict:
            usage = {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15,
            }
            if srv.usage:
                usage.update(srv.usage)
            return {
                "id": rid or _nid("resp"),
                "object": "response",
                "created_at": int(time.time()),
                "status": status,
                "model": model,
                "output": items,
                "usage": usage,
            }

        def _stream(self, items: list, model: str) -> None:
            rid = _nid("resp")
            full = []
            for it in items:
                it = dict(it)
                it.setdefault("id", _nid("msg" if it.get("type") == "message" else "fc"))
                it.setdefault("status", "completed")
                full.append(it)
            ev = []
            created = self._response_obj([], model, "in_progress", rid)
            created.pop("usage")
            ev.append(_sse({"type": "response.created", "response": created}))
            ev.append(_sse({"type": "response.in_progress", "response": created}))
            for idx, it in enumerate(full):
                added = dict(it, status="in_progress")
                if it.get("type") == "message":
                    added["content"] = []
                ev.append(_sse({"type": "response.output_item.added", "output_index": idx, "item": added}))
                if it.get("type") == "message":
                    for cidx, part in enumerate(it.get("content") or []):
                        t = part.get("text", "")
                        ev.append(_sse({"type": "response.content_part.added", "item_id": it["id"], "output_index": idx,
                                        "content_index": cidx, "part": {"type": "output_text", "text": "", "annotations": []}}))
                        ev.append(_sse({"type": "response.output_text.delta", "item_id": it["id"], "output_index": idx,
                                        "content_index": cidx, "delta": t}))
                        ev.append(_sse({"type": "response.output_text.done", "item_id": it["id"], "output_index": idx,
                                        "content_index": cidx, "text": t}))
                        ev.append(_sse({"type": "response.content_part.done", "item_id": it["id"], "output_index": idx,
                                        "content_index": cidx, "part": part}))
                elif it.get("type") == "function_call":
                    ev.append(_sse({"type": "response.function_call_arguments.delta", "item_id": it["id"],
                                    "output_index": idx, "delta": it.get("arguments", "")}))
                    ev.append(_sse({"type": "response.function_call_arguments.done", "item_id": it["id"],
                                    "output_index": idx, "arguments": it.get("arguments", "")}))
                ev.append(_sse({"type": "response.output_item.done", "output_index": idx, "item": it}))
            ev.append(_sse({"type": "response.completed", "response": self._response_obj(full, model, "completed", rid)}))
            self._send_sse(ev)

    return Handler
