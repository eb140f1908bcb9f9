"""Scripted fake of the OpenAI Chat Completions API, for hosts that speak it (CodeBuddy Code,
Factory Droid with a BYOK custom model).

Usage::

    from tests.e2e.fake_chat import FakeChat, tool_call

    with FakeChat(script=[tool_call("Read", {"file_path": "/p/a.txt"}), "The file says hello."]) as srv:
        ...run the host with its base URL at srv.base_url (no /v1: CodeBuddy POSTs <base>/chat/completions)
        srv.tool_results()   # tool_call_id -> the text the host sent back for that call

Any path ending in ``/chat/completions`` is answered (CodeBuddy posts ``<base>/chat/completions``,
Droid ``<base>/v1/chat/completions``), streamed as ``data: <chunk>`` events ending in
``data: [DONE]`` when the request asks for ``stream``. A request that offers ``tools`` is a main
turn and takes the next script item; one without tools (titles, summaries) is a side request and
gets ``side_text``. ``usage(kind, body, items)`` may name the token usage an answer reports (None: the
default, 10 prompt tokens), e.g. a prompt past a host's compaction limit. Script items: a str (text), ``tool_call(name, args)``, a list of them (several
tool calls in one answer), or a callable ``f(body) -> item``.
"""
from __future__ import annotations

import itertools
import json
import time
from typing import Any, Callable, Iterable, Optional

from tests.e2e.fakeserver import ScriptedFakeServer, normalize_script_item

__all__ = ["FakeChat", "text", "tool_call", "tool_names"]

_ids = itertools.count()


def text(s: str) -> dict:
    return {"type": "text", "text": s}


def tool_call(name: str, arguments: Any = None, call_id: Optional[str] = None) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return {"type": "tool_call", "id": call_id or f"call_fake{next(_ids):05d}", "name": name, "arguments": args}


def tool_names(body: dict) -> list:
    """The tool names a request offers the model."""
    out = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            name = (t.get("function") or {}).get("name") or t.get("name")
            if name:
                out.append(name)
    return out


def _classify(body: dict) -> str:
    return "main" if body.get("tools") else "side"


class FakeChat(ScriptedFakeServer):
    NAME = "fake-chat"

    def __init__(self, script: Iterable[Any] = (), *, default_text: str = "done", side_text: str = "Fake title",
                 classify: Callable[[dict], Any] = _classify, model: str = "fake-model",
                 usage: Optional[Callable[[str, dict, list], Optional[dict]]] = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(script, default_text=default_text, side_text=side_text, compact_text=side_text,
                         classify=classify, model=model, host=host, port=port)
        # (kind, request body, answered items) -> the usage to report, None for the default (a host that
        # compacts by the reported prompt size can be made to compact after a chosen answer)
        self.usage = usage

    def _make_handler(self) -> type:
        return _make_handler(self)

    def _answer(self, body: dict) -> tuple[str, list]:
        kind = self._kind(body)
        if kind != "main":
            return kind, [text(self.side_text)]
        with self._lock:
            idx = self._next
            self._next += 1
        item = self.script[idx] if idx < len(self.script) else self.default_text
        return "main", normalize_script_item(item, body, text)

    def tool_results(self) -> dict:
        """tool_call_id -> the content the host sent back for it (the last request that has it wins)."""
        found: dict = {}
        for body in self.main_requests:
            for m in body.get("messages") or []:
                if isinstance(m, dict) and m.get("role") == "tool":
                    content = m.get("content")
                    if isinstance(content, list):
                        content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
                    found[m.get("tool_call_id")] = content if isinstance(content, str) else json.dumps(content)
        return found


def _make_handler(srv: FakeChat):
    from tests.e2e.fake_openai import _make_handler as openai_handler

    class Handler(openai_handler(srv)):  # its body reading, JSON answers, request log, GET answers
        def do_POST(self):
            body = self._read_body()
            path = self.path.split("?", 1)[0].rstrip("/")
            if not (path.endswith("/chat/completions") and isinstance(body, dict)):
                self._record("other", body)
                return self._json({})
            kind, items = srv._answer(body)
            self._record(kind, body, items)
            model = body.get("model") or srv.model
            calls = [{"id": i["id"], "type": "function", "function": {"name": i["name"], "arguments": i["arguments"]}}
                     for i in items if i["type"] == "tool_call"]
            content = "".join(i["text"] for i in items if i["type"] == "text")
            finish = "tool_calls" if calls else "stop"
            cid, created = f"chatcmpl_fake{next(_ids):05d}", int(time.time())
            usage = (srv.usage(kind, body, items) if srv.usage else None) or \
                {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            if not body.get("stream"):
                message = {"role": "assistant", "content": content or None}
                if calls:
                    message["tool_calls"] = calls
                return self._json({"id": cid, "object": "chat.completion", "created": created, "model": model,
                                   "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage})

            def chunk(delta: dict, finish_reason: Optional[str] = None, **extra: Any) -> bytes:
                obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
                obj.update(extra)
                return f"data: {json.dumps(obj)}\n\n".encode()

            out = [chunk({"role": "assistant", "content": ""})]
            if content:
                out.append(chunk({"content": content}))
            for n, call in enumerate(calls):
                out.append(chunk({"tool_calls": [{"index": n, "id": call["id"], "type": "function",
                                                  "function": {"name": call["function"]["name"], "arguments": ""}}]}))
                out.append(chunk({"tool_calls": [{"index": n, "function": {"arguments": call["function"]["arguments"]}}]}))
            out.append(chunk({}, finish))
            tail = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [], "usage": usage}
            out.append(f"data: {json.dumps(tail)}\n\n".encode())
            out.append(b"data: [DONE]\n\n")
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(b"".join(out))
            self.wfile.flush()
            self.close_connection = True

    return Handler
