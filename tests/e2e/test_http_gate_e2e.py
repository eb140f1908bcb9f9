"""End to end: Claude Code's read gate as an http hook answered by the cache daemon.

`leanctx init --agent claude` writes the PreToolUse entry for ctx_read as `type: "http"` (the
daemon on 127.0.0.1, a per-install secret in a header). With the real Claude Code CLI (offline,
scripted model) this checks that the hook fires before every ctx_read with its tool_use_id (the
daemon notes it in the session's record), that the re-read is a stub through it, and that the
host fails open when the endpoint is down, answers 500, never answers, or refuses the secret: the
tool call runs and returns the file's content.
"""
from __future__ import annotations

import json
import socket
import threading

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use
from tests.e2e.test_cache_e2e import READ, TOOLS, tool_results, wired  # noqa: F401 - the fixture, shared

pytestmark = pytest.mark.e2e


def gate_entry(hh) -> dict:
    settings = json.loads((hh.claude_dir / "settings.json").read_text())
    (group,) = settings["hooks"]["PreToolUse"]
    assert group["matcher"] == READ
    (handler,) = group["hooks"]
    return handler


def set_gate_entry(hh, **changes) -> None:
    path = hh.claude_dir / "settings.json"
    settings = json.loads(path.read_text())
    settings["hooks"]["PreToolUse"][0]["hooks"][0].update(changes)
    path.write_text(json.dumps(settings, indent=2))


def call_ids(body: dict) -> list[str]:
    """The tool_use_id of every tool_result in the request's last message."""
    content = body["messages"][-1]["content"]
    return [b["tool_use_id"] for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(content, list) else []


def two_reads(claude_cli, hh, run_host, extra_env=None, ids: list | None = None, lean=None) -> list:
    """Two ctx_reads of big.py in one `claude -p`. With `lean`, its daemon is started first: the
    gate is the daemon's, and the fake model calls ctx_read within a few hundred ms of start-up,
    sooner than a cold daemon may be listening on a loaded machine (a gate post that finds no
    daemon is a call without a note: content, as test_the_host_fails_open_when_no_daemon_listens
    shows). A real model's first turn takes longer than the daemon's start."""
    if lean is not None:
        lean.run("serve", "--detach")
    script = [tool_use(READ, {"path": "big.py"}), tool_use(READ, {"path": "big.py"}), "done"]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, dict(extra_env or {}))
        cp, _ = run_host([claude_cli, "-p", "read big.py twice", "--allowedTools", TOOLS], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        if ids is not None:
            ids.extend(i for b in srv.main_requests[1:3] for i in call_ids(b))
        return [tool_results(b)[0] for b in srv.main_requests[1:3]]


def notes(lean) -> dict:
    """tool_use_id -> note, over every Claude Code record in the data dir."""
    out: dict = {}
    for path in (lean.data / "conversations" / "claude").glob("*.json"):
        out.update(json.loads(path.read_text()).get("read_calls") or {})
    return out


def gate_status(lean) -> dict:
    return json.loads(lean.run("status", "--json").stdout)["read_gate"]


def test_the_http_gate_notes_each_call_by_its_id_and_the_reread_is_a_stub(claude_cli, wired, lean, run_host):
    hh = wired
    handler = gate_entry(hh)
    assert handler["type"] == "http" and handler["url"].startswith("http://127.0.0.1:")
    ids: list = []
    first, second = two_reads(claude_cli, hh, run_host, ids=ids, lean=lean)
    assert "def function_199" in first
    assert second.startswith("[unchanged]") and "big.py" in second
    # the daemon took both notes from the http hook, under the ids Claude Code gave the calls
    assert len(ids) == 2 and set(notes(lean)) == set(ids)
    status = gate_status(lean)
    assert status["noted"] == 2 and status["unauthorized"] == 0 and status["unproven"] == 0
    lean.assert_no_hook_errors()  # no command hook ran for the gate (nor failed)


def _server(mode: str):
    """A local endpoint that answers 500, or accepts and never answers (`hang`); returns
    (port, requests seen, stop)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    seen: list[bytes] = []
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    def answer(conn: socket.socket) -> None:
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            if b"POST" in data:
                seen.append(data)
                if mode == "500":
                    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom")

    threading.Thread(target=serve, daemon=True).start()

    def stop() -> None:
        listener.close()
        for c in held:
            c.close()

    return listener.getsockname()[1], seen, stop


@pytest.mark.parametrize("mode", ["500", "hang"])
def test_the_host_fails_open_when_the_gate_answers_500_or_never(claude_cli, wired, lean, run_host, mode):
    hh = wired
    port, seen, stop = _server(mode)
    try:
        set_gate_entry(hh, url=f"http://127.0.0.1:{port}/leanctx/read-gate")
        first, second = two_reads(claude_cli, hh, run_host)  # within CLI_TIMEOUT: the 2 s timeout holds
    finally:
        stop()
    assert len(seen) == 2, "the http hook did not fire before each ctx_read"
    assert "def function_199" in first
    assert notes(lean) == {}


def test_the_host_fails_open_when_no_daemon_listens(claude_cli, wired, lean, run_host):
    """LEANCTX_DAEMON=0: the MCP server serves reads itself and no daemon ever starts, so the
    gate's port is closed (as when the daemon is stopped): the calls run, with content."""
    hh = wired
    first, _second = two_reads(claude_cli, hh, run_host, {"LEANCTX_DAEMON": "0"})
    assert "def function_199" in first
    assert notes(lean) == {}


def test_a_wrong_secret_is_refused_and_notes_nothing(claude_cli, wired, lean, run_host):
    hh = wired
    set_gate_entry(hh, headers={"X-Leanctx-Secret": "0" * 64})
    first, _second = two_reads(claude_cli, hh, run_host, lean=lean)
    assert "def function_199" in first
    assert notes(lean) == {}
    status = gate_status(lean)
    assert status["unauthorized"] == 2 and status["noted"] == 0
