"""A scripted fake model server for Gemini CLI (Gemini API) and Qwen Code (OpenAI Chat Completions).

Gemini CLI 0.61 posts `…/models/<m>:generateContent` for its side requests (the model router
wants a JSON answer shaped by `generationConfig.responseJsonSchema`) and
`…/models/<m>:streamGenerateContent?alt=sse` per turn (one SSE `data:` event with the whole
`GenerateContentResponse` is enough). Qwen Code 0.15 posts `/v1/chat/completions` with
`stream: true` (and `stream_options.include_usage`). A request that offers tools is a main turn
and takes the next script item; any other is a side request.

Script items: a str is a text answer, `call(name, args)` a tool call, a list several parts, and a
callable gets the request body and returns one of those.
"""
from __future__ import annotations

import itertools
import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any, Iterable, Optional

from tests.e2e.fakeserver import RequestRecord, ScriptedFakeServer, normalize_script_item

_ids = itertools.count()


def call(name: str, args: Optional[dict] = None) -> dict:
    """A tool call of the scripted model (its id is made when it is served)."""
    return {"call": name, "args": args or {}, "id": f"call_{next(_ids):05d}"}


def offered_tools(body: dict) -> list:
    """The tool names a request offers (Gemini functionDeclarations, Chat Completions functions)."""
    names = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            names += [d.get("name") for d in t.get("functionDeclarations") or t.get("function_declarations") or []]
            names.append((t.get("function") or {}).get("name"))
    return [n for n in names if n]


def _from_schema(schema: Any) -> Any:
    """A value that satisfies a JSON schema well enough for the CLIs' side requests."""
    if not isinstance(schema, dict):
        return "ok"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = (kind[0] if isinstance(kind, list) else kind or "").lower()
    if kind == "object" or "properties" in schema:
        return {k: _from_schema(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    return False if kind == "boolean" else "ok"


def _side_text(body: dict) -> str:
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    schema = schema or ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    return json.dumps(_from_schema(schema)) if schema else "ok"


def gemini_tool_results(body: dict) -> list:
    """(name, output text) of every functionResponse in a Gemini request, in order."""
    out = []
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            fr = part.get("functionResponse") if isinstance(part, dict) else None
            if fr:
                response = fr.get("response") or {}
                out.append((fr.get("name"), response.get("output", json.dumps(response)) if isinstance(response, dict) else str(response)))
    return out


def chat_tool_results(body: dict) -> dict:
    """tool_call_id -> the tool message's text in a Chat Completions request."""
    out = {}
    for msg in body.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "tool":
            content = msg.get("content")
            if isinstance(content, list):
                content = "".join(c.get("text", "") for c in content if isinstance(c, dict))
            out[msg.get("tool_call_id")] = content
    return out


def is_compaction(body: dict) -> bool:
    """A compression's summary request (Gemini CLI 0.61, Qwen Code 0.15): no tools, a system
    prompt that asks for a `<state_snapshot>`; not Gemini's second look at the summary it got
    ("Critically evaluate the <state_snapshot> you just generated"), one compression each."""
    if offered_tools(body):
        return False
    system = body.get("systemInstruction") or body.get("system_instruction") or [
        m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "system"]
    turns = body.get("contents") or body.get("messages") or [{}]
    return "<state_snapshot>" in json.dumps(system) and "Critically evaluate the <state_snapshot>" not in json.dumps(turns[-1])


class FakeGeminiChat(ScriptedFakeServer):
    NAME = "fake-gemini-chat"

    def __init__(self, script: Iterable[Any] = (), *, default_text: str = "done", model: str = "fake-model",
                 prompt_tokens: Iterable[int] = (), side_prompt_tokens: int = 10) -> None:
        super().__init__(script, default_text=default_text, side_text="ok", compact_text="Summary.",
                         classify=lambda body: "main" if offered_tools(body) else "side", model=model)
        # the `promptTokenCount` reported with the n-th main answer (10 past the list): Gemini CLI
        # compresses before a request once the last one it saw reaches its threshold
        self.prompt_tokens = list(prompt_tokens)
        # ...and with every side answer (a summary: Qwen Code takes a compression whose new count,
        # before - (summary prompt - 1000) + summary output, comes out higher than before as failed)
        self.side_prompt_tokens = side_prompt_tokens

    @property
    def chat_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _make_handler(self) -> type:
        return _make_handler(self)

    def answer(self, body: dict) -> tuple[str, list]:
        return self.answer_with_usage(body)[:2]

    def answer_with_usage(self, body: dict) -> tuple[str, list, int]:
        kind = self._kind(body)
        if kind != "main":
            return kind, [{"text": _side_text(body)}], self.side_prompt_tokens
        with self._lock:
            idx = self._next
            self._next += 1
        item = self.script[idx] if idx < len(self.script) else self.default_text
        tokens = self.prompt_tokens[idx] if idx < len(self.prompt_tokens) else 10
        return "main", normalize_script_item(item, body, lambda s: {"text": s}), tokens


def _make_handler(srv: FakeGeminiChat) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def _send(self, data: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self, kind: str, body: Any, parts: Any = None) -> None:
            with srv._lock:
                srv.log.append(RequestRecord(self.command, self.path, kind, body, dict(self.headers.items()), parts))

        def do_GET(self) -> None:
            self._record("other", None)
            self._send(json.dumps({"object": "list", "data": [], "models": []}).encode(), "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = None
            path = self.path.split("?", 1)[0]
            if not isinstance(body, dict):
                self._record("other", body)
                return self._send(b"{}", "application/json")
            if ":countTokens" in path:
                self._record("other", body)
                return self._send(b'{"totalTokens": 10}', "application/json")
            if ":generateContent" in path or ":streamGenerateContent" in path:
                return self._gemini(body, stream=":streamGenerateContent" in path)
            if path.endswith("/chat/completions"):
                return self._chat(body)
            self._record("other", body)
            return self._send(b"{}", "application/json")

        def _gemini(self, body: dict, stream: bool) -> None:
            kind, parts, tokens = srv.answer_with_usage(body)
            self._record(kind, body, parts)
            gparts = [{"functionCall": {"name": p["call"], "args": p["args"]}} if "call" in p else {"text": p["text"]} for p in parts]
            resp = {"candidates": [{"content": {"role": "model", "parts": gparts}, "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": tokens, "candidatesTokenCount": 5, "totalTokenCount": tokens + 5},
                    "modelVersion": srv.model}
            if stream:
                return self._send(("data: " + json.dumps(resp) + "\r\n\r\n").encode(), "text/event-stream")
            return self._send(json.dumps(resp).encode(), "application/json")

        def _chat(self, body: dict) -> None:
            kind, parts, tokens = srv.answer_with_usage(body)
            self._record(kind, body, parts)
            model = body.get("model") or srv.model
            text = "".join(p.get("text", "") for p in parts)
            calls = [{"id": p["id"], "type": "function", "function": {"name": p["call"], "arguments": json.dumps(p["args"])}}
                     for p in parts if "call" in p]
            finish = "tool_calls" if calls else "stop"
            usage = {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5}
            base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": model}
            if not body.get("stream"):
                message = {"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})}
                answer = dict(base, object="chat.completion", usage=usage,
                              choices=[{"index": 0, "message": message, "finish_reason": finish}])
                return self._send(json.dumps(answer).encode(), "application/json")
            deltas: list = [({"role": "assistant", "content": text}, None)]
            deltas += [({"tool_calls": [dict(c, index=i)]}, None) for i, c in enumerate(calls)]
            deltas.append(({}, finish))
            chunks = [dict(base, object="chat.completion.chunk", choices=[{"index": 0, "delta": d, "finish_reason": f}])
                      for d, f in deltas]
            if (body.get("stream_options") or {}).get("include_usage"):
                chunks.append(dict(base, object="chat.completion.chunk", choices=[], usage=usage))
            data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
            return self._send(data, "text/event-stream")

    return Handler
