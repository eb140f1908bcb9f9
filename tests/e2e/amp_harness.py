"""Amp's side of its plugin protocol and of its account API, for the Amp end-to-end tests.

Amp 0.0.1790142911 runs no model offline: each turn is driven by a thread actor on ampcode.com
over a websocket (`/actors/gateway/threadActor/websocket/`, seen with a logging stand-in for
`AMP_URL`), so no fake model server can stand in for it here. What runs locally is real and is
used as it is:
- Amp's plugin runtime: Amp runs each plugin as `amp run <tmp>/amp-plugin-runtime-XXXXXX/
  plugin-runtime.ts <plugin>` (its binary again, as Bun: `BUN_BE_BUN=1`) and talks to it in JSON lines on
  stdio: `{"type": "request", "id", "method", "params"}` both ways, `{"type": "response", "id",
  "result" | "error"}`, `{"type": "event", "event"}`. `runtime_script` copies that very script
  out of a real `amp plugins exec` run; `PluginHost` starts it on our plugin and plays Amp's part
  (the events of a thread, `client.info`, `thread.messages`), as the real Amp process does.
- Amp's own commands that need only its account API (`getUserInfo`, `loadPlugins`, …):
  `FakeAmpApi` answers those on 127.0.0.1 (`AMP_URL`), so `amp tools list`, `amp mcp doctor` and
  `amp plugins list` run.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COPIER = """import { copyFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
export default function () {
  const to = process.env.LEANCTX_TEST_RUNTIME_COPY;
  if (to) { mkdirSync(dirname(to), { recursive: true }); copyFileSync(process.argv[1], to); }
}
"""


def runtime_script(amp: str, where: Path, env: dict) -> Path:
    """Amp's plugin runtime script, as a real `amp plugins exec` wrote it (kept in a folder named
    as Amp names its own, `amp-plugin-runtime-*`)."""
    plugins = where / "copier" / ".amp" / "plugins"
    plugins.mkdir(parents=True)
    (plugins / "copier.js").write_text(COPIER)
    target = where / "amp-plugin-runtime-test" / "plugin-runtime.ts"
    cp = subprocess.run([amp, "plugins", "exec", str(plugins / "copier.js"), "session.start", "--data", '{"thread":{"id":"T-copy"}}'],
                        cwd=str(where / "copier"), env={**env, "LEANCTX_TEST_RUNTIME_COPY": str(target)},
                        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0 and target.is_file(), f"amp plugins exec -> {cp.returncode}\n{cp.stdout}\n{cp.stderr}"
    return target


class PluginHost:
    """One plugin in Amp's real plugin runtime, with this process in Amp's place. `threads` maps
    a thread id to its messages as the next model request sees them (what Amp's host answers to
    the runtime's `thread.messages`)."""

    def __init__(self, amp: str, runtime: Path, plugin: Path, env: dict, workspace: Path, log: Path) -> None:
        self.threads: dict[str, list[dict]] = {}
        self.workspace = workspace
        self.asked: list[dict] = []  # the runtime's requests to Amp, in order
        self._replies: dict[str, queue.Queue] = {}
        self._ready = threading.Event()
        self._next = 0
        self._lock = threading.Lock()
        self.proc = subprocess.Popen([amp, "run", str(runtime), str(plugin)], cwd=str(plugin.parent), text=True,
                                     env={**env, "BUN_BE_BUN": "1", "AMP_PLUGIN_URI": plugin.as_uri(), "AMP_PLUGIN_RUNTIME_LOG_FILE": str(log)},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        assert self._ready.wait(120), f"the plugin runtime never got ready: {''.join(self.stderr)[-2000:]}"

    def _send(self, msg: dict) -> None:
        with self._lock:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("type") == "response" and msg.get("id") in self._replies:
                self._replies[msg["id"]].put(msg)
            elif msg.get("type") == "request":
                self.asked.append(msg)
                self._answer(msg)
            elif msg.get("type") == "event" and msg.get("event") == "runtime.ready":
                self._ready.set()

    def _answer(self, msg: dict) -> None:
        method, params = msg.get("method"), msg.get("params") or {}
        reply: dict = {"type": "response", "id": msg.get("id")}
        if method == "client.info":
            reply["result"] = {"ampURL": "http://127.0.0.1:9/", "workspaceRoot": self.workspace.as_uri(),
                               "authenticatedUser": None, "executorKind": "local"}
        elif method == "thread.messages" and params.get("threadID") in self.threads:
            messages = self.threads[params["threadID"]]
            opts = params.get("options") or {}
            offset, limit = int(opts.get("offset", 0)), min(int(opts.get("limit", 10)), 20)
            if opts.get("from", "end") == "start":
                reply["result"] = messages[offset:offset + limit]
            else:
                end = len(messages) - offset
                reply["result"] = messages[max(0, end - limit):max(0, end)]
        elif method == "thread.messages":
            reply["error"] = "Thread not found"
        else:
            reply["result"] = None
        self._send(reply)

    def request(self, method: str, params: dict, timeout: float = 120) -> object:
        """Send Amp's request `method` (an event that wants an answer: tool.call, agent.start, …,
        or `event` for a fire-and-forget one) and return the runtime's result."""
        self._next += 1
        rid = f"amp-{self._next}"
        self._replies[rid] = queue.Queue()
        self._send({"type": "request", "id": rid, "method": method, "params": params})
        try:
            msg = self._replies[rid].get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer to {method}: {''.join(self.stderr)[-2000:]}") from None
        assert "error" not in msg, msg
        return msg.get("result")

    def event(self, name: str, data: dict) -> None:
        self.request("event", {"event": name, "data": data})

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(5)


class McpClient:
    """An MCP client on stdio, in this process as Amp's is in its own (the server is our child)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict) -> None:
        self.proc = subprocess.Popen(argv, cwd=str(cwd), env=env, text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self._id = 0
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "amp-mcp-client", "version": "0.0.0-dev"}})
        self._write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _write(self, msg: dict) -> None:
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict) -> dict:
        self._id += 1
        self._write({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            assert line, "the MCP server exited"
            msg = json.loads(line)
            if msg.get("id") == self._id:
                assert "error" not in msg, msg
                return msg["result"]

    def read(self, arguments: dict) -> str:
        """tools/call ctx_read as Amp's client sends it: the arguments only, no `_meta`."""
        result = self.call("tools/call", {"name": "ctx_read", "arguments": arguments})
        return "\n".join(c["text"] for c in result["content"] if c.get("type") == "text")

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, 9)


class FakeAmpApi:
    """Amp's account API on 127.0.0.1, for the commands that ask it before anything else: a user,
    no account plugins, skills or MCP servers. It answers no thread (`/api/thread-actors`)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                if size:
                    self.rfile.read(size)
                api.paths.append(self.path)
                method = self.path.partition("?")[2]
                if self.path.startswith("/api/internal?") and method == "getUserInfo":
                    body: object = {"ok": True, "result": {"id": "u-test", "email": "test@example.invalid", "emailVerified": True,
                                                           "username": "test", "features": [], "team": None}}
                elif self.path.startswith("/api/internal?") and method == "loadPlugins":
                    body = {"ok": True, "result": []}
                elif self.path.startswith("/api/internal?"):
                    body = {"ok": True, "result": {}}
                elif self.path.startswith("/api/telemetry"):
                    body = {}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _reply

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
