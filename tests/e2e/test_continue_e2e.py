"""Continue CLI (`cn`, npm @continuedev/cli 1.5.47) beside our Claude Code hooks, offline.

Continue's source loads Claude-shaped hooks from `~/.claude/settings.json` too
(src/hooks/hookConfig.ts), so with `leanctx init --agent claude` our Claude hooks would be run by
Continue with its own payload; the hook then publishes nothing (tests/hooks/
test_other_hosts_run_claude_hooks.py, with the payload and environment from its hookRunner.ts).
In 1.5.47 nothing fires them: its HookService.fireEvent has no caller. This pins that on the real
CLI: a scripted run that reads a file beside our hooks and a diagnostic hook on every event fires
no hook and files nothing. Should a later Continue fire them, the diagnostic hook sees it and this
test fails: then check what it sends against the payload tests.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.e2e.conftest import _cli

pytestmark = pytest.mark.e2e
CLAUDE_EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Notification", "PreCompact",
                 "SubagentStart", "SubagentStop", "Stop", "SessionEnd")
ANSWER = "The file says hello."


class FakeChat:
    """The smallest OpenAI Chat Completions stream Continue drives a turn with: the first request
    gets a call to Continue's Read tool, the one after the tool result gets the answer."""

    def __init__(self, read_path: str) -> None:
        self.read_path = read_path
        self.requests: list[dict] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeChat:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reply(self, body: dict) -> dict:
        if any(m.get("role") == "tool" for m in body.get("messages", [])):
            return {"content": ANSWER}
        call = {"index": 0, "id": "call_fake_read", "type": "function",
                "function": {"name": "Read", "arguments": json.dumps({"filepath": self.read_path})}}
        return {"tool_calls": [call]}

    def _handler(self) -> type:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                fake.requests.append(body)
                delta = fake.reply(body)
                finish = "tool_calls" if "tool_calls" in delta else "stop"
                chunks = [{"role": "assistant", **delta}, {}]
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for i, d in enumerate(chunks):
                    chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake-model",
                             "choices": [{"index": 0, "delta": d, "finish_reason": finish if i == len(chunks) - 1 else None}]}
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.write(b"data: [DONE]\n\n")

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"object": "list", "data": []}')

        return Handler


def test_continue_fires_none_of_our_claude_hooks_and_nothing_is_filed(host_home, lean, diag, run_host) -> None:
    cn = _cli("cn")
    lean.run("init", "--agent", "claude")
    settings_path = host_home.home / ".claude" / "settings.json"
    settings = json.loads(settings_path.read_text())
    for event in CLAUDE_EVENTS:  # a diagnostic hook beside ours on every event Continue knows
        settings["hooks"].setdefault(event, []).append(diag.group(event))
    settings_path.write_text(json.dumps(settings, indent=2))
    read_path = str(host_home.proj / "a.txt")
    with FakeChat(read_path) as fake:
        config = host_home.home / ".continue" / "config.yaml"
        config.parent.mkdir(parents=True)
        config.write_text("name: fake\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: fake\n    provider: openai\n"
                          f"    model: fake-model\n    apiKey: sk-fake\n    apiBase: {fake.base_url}\n    roles: [chat]\n")
        env = lean.env({"CONTINUE_CLI_ENABLE_TELEMETRY": "0", "CONTINUE_METRICS_ENABLED": "0"})
        cp, _ = run_host(["node", cn, "--config", str(config), "-p", "read a.txt", "--auto"], cwd=host_home.proj, env=env)
    assert cp.returncode == 0, f"{cp.stdout}\n{cp.stderr}"
    assert ANSWER in cp.stdout
    # the turn really ran a tool (where PreToolUse/PostToolUse would fire): the file's text came back
    tool_results = [m for m in fake.requests[-1]["messages"] if m.get("role") == "tool"]
    assert tool_results and "hello world file" in str(tool_results[0].get("content"))
    assert diag.entries() == [], "Continue now runs Claude Code's hooks: check its payloads against the hook's caller rules"
    assert not (lean.data / "conversations").exists() or not any((lean.data / "conversations").rglob("*.json"))
    lean.assert_no_hook_errors()
