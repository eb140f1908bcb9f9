"""Scripted fake of Augment's backend API, for Auggie (`@augmentcode/auggie` 0.36.0).

Auggie talks to the `tenantURL` of its session (`AUGMENT_SESSION_AUTH='{"accessToken": …,
"tenantURL": "<base>/"}'`), every call a POST with a JSON body: at start `get-models` (the default
model and the feature flags: hooks run only with `enable_hooks`), `agents/list-remote-tools`,
`settings/get-mcp-*-configs`; then one `chat-stream` per model turn, answered with lines of JSON
(`{"text", "nodes", "stop_reason"}`; a node of type 5 is a tool call, its result comes back in
the next request's `nodes` as type 1). Anything else gets `{}`.

Usage::

    with FakeAugment(script=[tool_call("ctx_read_leanctx", {"path": "a.py"}), "done"]) as srv:
        env["AUGMENT_SESSION_AUTH"] = srv.session_auth
        srv.tool_results()   # tool_use_id -> the text Auggie sent back for that call

Script items as in fake_chat: a str (text), `tool_call(name, args)`, a list, or a callable.
`flags` adds feature flags (e.g. SUMMARY_FLAGS: Auggie summarizes its history once the reported
prompt tokens pass about 175,000); `usage(body)` names the input tokens an answer reports (a node
of type 10), None for none. A request whose `message` is set and which carries no nodes is
Auggie's summary request: it gets `compact_text`.
"""
from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable, Iterable

from tests.e2e.fake_chat import text, tool_call
from tests.e2e.fakeserver import RequestRecord, ScriptedFakeServer, normalize_script_item

__all__ = ["FakeAugment", "text", "tool_call", "tool_names"]

END_TURN, TOOL_USE_REQUESTED = 1, 3
MODELS = {"default_model": "fake-model",
          "models": [{"name": "fake-model", "suggested_prefix_char_count": 0, "suggested_suffix_char_count": 0}],
          "feature_flags": {"enable_hooks": True}}
# history summarization: on from this CLI version, with a prompt (none: Auggie never summarizes)
SUMMARY_FLAGS = {"history_summary_min_version": "0.0.1",
                 "history_summary_params": json.dumps({"prompt": "Summarize the conversation so far.",
                                                       "history_tail_size_tokens_to_exclude": 500})}


def _classify(body: dict) -> str:
    return "compact" if body.get("message") and not body.get("nodes") else "main"


def tool_names(body: dict) -> list:
    """The tool names a chat-stream request offers the model."""
    return [t.get("name") for t in body.get("tool_definitions") or [] if isinstance(t, dict)]


class FakeAugment(ScriptedFakeServer):
    NAME = "fake-augment"

    def __init__(self, script: Iterable[Any] = (), *, default_text: str = "done", compact_text: str = "Summary of the work so far.",
                 flags: dict | None = None, usage: Callable[[dict], int | None] | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(script, default_text=default_text, side_text=default_text, compact_text=compact_text,
                         classify=_classify, model="fake-model", host=host, port=port)
        self.models = {**MODELS, "feature_flags": {**MODELS["feature_flags"], **(flags or {})}}
        self.usage = usage

    @property
    def session_auth(self) -> str:
        """AUGMENT_SESSION_AUTH pointing Auggie at this server."""
        return json.dumps({"accessToken": "fake-token", "tenantURL": self.base_url + "/", "scopes": ["email"]})

    def _make_handler(self) -> type:
        return _make_handler(self)

    def next_item(self, body: dict) -> list:
        with self._lock:
            idx = self._next
            self._next += 1
        item = self.script[idx] if idx < len(self.script) else self.default_text
        return normalize_script_item(item, body, text)

    def tool_results(self) -> dict:
        """tool_use_id -> the content Auggie sent back for it (the last request that has it wins)."""
        found: dict = {}
        for body in self.main_requests:
            for node in body.get("nodes") or []:
                result = node.get("tool_result_node") if isinstance(node, dict) and node.get("type") == 1 else None
                if isinstance(result, dict):
                    found[result.get("tool_use_id")] = result.get("content")
        return found

    def prompts(self) -> list:
        """The user's text of each chat-stream request that carries one."""
        return [n["text_node"]["content"] for b in self.main_requests for n in b.get("nodes") or []
                if isinstance(n, dict) and n.get("type") == 0 and isinstance(n.get("text_node"), dict)]


def _lines(blocks: list, input_tokens: int | None = None) -> bytes:
    nodes, texts = [], []
    for i, block in enumerate(blocks):
        if block["type"] == "tool_call":
            nodes.append({"id": i, "type": 5, "content": "", "tool_use": {
                "tool_use_id": block["id"], "tool_name": block["name"], "input_json": block["arguments"]}})
        else:
            texts.append(block["text"])
            nodes.append({"id": i, "type": 0, "content": block["text"]})
    calls = any(b["type"] == "tool_call" for b in blocks)
    if input_tokens is not None:
        nodes.append({"id": len(nodes), "type": 10, "content": "", "token_usage": {"input_tokens": input_tokens, "output_tokens": 10}})
    lines = [{"text": "".join(texts), "nodes": nodes},
             {"text": "", "nodes": [], "stop_reason": TOOL_USE_REQUESTED if calls else END_TURN}]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _make_handler(srv: FakeAugment) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, data: bytes, ctype: str = "application/json") -> None:
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            path = self.path.split("?", 1)[0]
            kind = srv._kind(body) if path == "/chat-stream" else "other"
            record = RequestRecord("POST", path, kind, body, dict(self.headers))
            with srv._lock:
                srv.log.append(record)
            if path == "/get-models":
                return self._send(json.dumps(srv.models).encode())
            if path == "/agents/list-remote-tools":
                return self._send(b'{"tools": []}')
            if kind == "other":
                return self._send(b"{}")
            blocks = srv.next_item(body) if kind == "main" else [text(srv.compact_text)]
            record.response = blocks
            self._send(_lines(blocks, srv.usage(body) if srv.usage and kind == "main" else None), "application/x-ndjson")

        do_GET = do_POST

    return Handler
