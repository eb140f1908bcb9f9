"""What the two fake model servers share: request log, inspection, lifecycle, turn routing.

Each fake (fake_anthropic.FakeAnthropic, fake_openai.FakeOpenAI) adds its wire format: the
handler (`_make_handler`), how a scripted item becomes response blocks, and its base URL.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any, Callable, Iterable, Optional


def normalize_script_item(item: Any, body: dict, text: Callable[[str], dict]) -> list:
    """One script item as the list of output blocks/items it stands for: a callable is called
    with the request body (and its result normalized again), a str is a text block made by
    `text`, a dict is one block, a list or tuple is its parts in order."""
    if callable(item) and not isinstance(item, (dict, list, str)):
        return normalize_script_item(item(body), body, text)
    if isinstance(item, str):
        return [text(item)]
    if isinstance(item, dict):
        return [item]
    if isinstance(item, (list, tuple)):
        out: list = []
        for x in item:
            out.extend(normalize_script_item(x, body, text))
        return out
    raise TypeError(f"bad script item: {item!r}")


@dataclass
class RequestRecord:
    method: str
    path: str
    kind: str  # "main" | "side" | "compact" | "tool_search" | "count_tokens" | "other"
    body: Any
    headers: dict
    response: Any = None  # the blocks served


class ScriptedFakeServer:
    NAME = "fake-model"
    URL_SUFFIX = ""

    def __init__(self, script: Iterable[Any], *, default_text: str, side_text: str, compact_text: str,
                 classify: Callable[[dict], Any], model: str, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = list(script)
        self.default_text = default_text
        self.side_text = side_text
        self.compact_text = compact_text
        self.classify = classify
        self.model = model
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._next = 0
        self.log: list[RequestRecord] = []
        self._server: Optional[ThreadingHTTPServer] = None

    # ---- inspection -------------------------------------------------------------------
    @property
    def requests(self) -> list:
        """Every parsed request body (all endpoints), in arrival order."""
        with self._lock:
            return [r.body for r in self.log]

    def _bodies(self, kind: str) -> list:
        with self._lock:
            return [r.body for r in self.log if r.kind == kind]

    @property
    def main_requests(self) -> list:
        return self._bodies("main")

    @property
    def side_requests(self) -> list:
        return self._bodies("side")

    @property
    def compaction_requests(self) -> list:
        return self._bodies("compact")

    @property
    def turns_served(self) -> int:
        return self._next

    def all_text(self) -> str:
        """JSON dump of every main request body (handy for `assert "x" in srv.all_text()`)."""
        return "\n".join(json.dumps(b) for b in self.main_requests)

    # ---- lifecycle ----------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.URL_SUFFIX}"

    def _make_handler(self) -> type:
        raise NotImplementedError

    def start(self):  # noqa: ANN201 - returns the concrete fake
        self._server = ThreadingHTTPServer((self._host, self._port), self._make_handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name=self.NAME, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self):  # noqa: ANN204
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- behaviour ----------------------------------------------------------------------
    def _kind(self, body: dict) -> str:
        """main / side / compact for one request, as `classify` says (anything odd: side)."""
        try:
            kind = self.classify(body)
        except Exception:
            kind = "side"
        if kind is True:
            return "main"
        if kind is False or kind not in ("main", "side", "compact"):
            return "side"
        return kind
