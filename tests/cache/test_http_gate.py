"""The read gate over HTTP (cache/httpgate.py): a real daemon, real sockets, real processes.

Claude Code posts its PreToolUse payload for ctx_read to the daemon; the note must count only when
the secret matches and the poster is the host process the conversation's record names. Here the
test process plays the host (its hook record names it, the callers it spawns are its MCP
servers), posting as Claude Code does: keep-alive HTTP/1.1 on 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from leanctx.agents.base import GATE_HEADER, GATE_PATH
from leanctx.cache import httpgate

from .conftest import _support as S
from .test_service import project  # noqa: F401 - a fixture

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/net/tcp and /proc/<pid>/fd")

READ = "mcp__leanctx__ctx_read"


@pytest.fixture
def gate(home: Path, data_dir: Path, env: dict, tmp_path: Path):
    """Gate settings as init writes them, and a daemon serving them."""
    httpgate.planned_config(data_dir)
    httpgate.save_config(data_dir)
    proc = S.start_daemon(env, tmp_path / "daemon.log")
    yield httpgate.read_config(data_dir)
    proc.terminate()
    proc.wait(10)


def payload(conv: str, call_id: str, tool: str = READ) -> bytes:
    return json.dumps({"session_id": conv, "hook_event_name": "PreToolUse", "tool_name": tool,
                       "tool_input": {"path": "a.txt"}, "tool_use_id": call_id}).encode()


def post(port: int, body: bytes, headers: dict, conn: http.client.HTTPConnection | None = None) -> tuple[int, str]:
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", GATE_PATH, body=body, headers={"Content-Type": "application/json", **headers})
    answer = conn.getresponse()
    answer.read()
    return answer.status, answer.getheader("X-Leanctx-Gate")


def calls(data_dir: Path, conv: str) -> dict:
    record = json.loads((data_dir / "conversations" / "claude" / f"{conv}.json").read_text())
    return record.get("read_calls") or {}


def test_the_host_notes_its_calls_and_its_reread_is_a_stub(gate, data_dir: Path, project: Path, env: dict) -> None:
    S.publish_conversation(data_dir, "conv-a", project)
    keep = http.client.HTTPConnection("127.0.0.1", gate["port"], timeout=10)  # kept alive, as Claude Code's client
    with S.Caller(data_dir, project, env=env) as mcp:
        for n, want in ((0, "full"), (1, "stub")):
            assert post(gate["port"], payload("conv-a", f"toolu_{n}"), {GATE_HEADER: gate["secret"]}, keep) == (200, "noted")
            assert mcp.read(project / "a.txt", call_id=f"toolu_{n}")["kind"] == want
        # a call the gate did not note, on a host whose gate runs: withheld (content, never a stub)
        assert mcp.read(project / "a.txt", call_id="toolu_unnoted")["kind"] == "full"
    assert set(calls(data_dir, "conv-a")) == {"toolu_0", "toolu_1"}


@pytest.mark.parametrize("headers", [{}, {GATE_HEADER: ""}, {GATE_HEADER: "0" * 64}, {"Authorization": "Bearer x"}])
def test_a_missing_or_wrong_secret_is_refused_and_notes_nothing(gate, data_dir: Path, project: Path, headers: dict) -> None:
    S.publish_conversation(data_dir, "conv-b", project)
    assert post(gate["port"], payload("conv-b", "toolu_x"), headers) == (401, "unauthorized")
    assert calls(data_dir, "conv-b") == {}


def test_another_process_with_the_secret_cannot_note_a_call(gate, data_dir: Path, project: Path, env: dict) -> None:
    """The secret is in a settings file; the poster must still be the conversation's own host."""
    S.publish_conversation(data_dir, "conv-c", project)
    script = ("import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]));"
              f"c.request('POST', {GATE_PATH!r}, body=sys.argv[3].encode(), headers={{{GATE_HEADER!r}: sys.argv[2]}});"
              "r = c.getresponse(); print(r.status, r.getheader('X-Leanctx-Gate'))")
    out = subprocess.run([sys.executable, "-c", script, str(gate["port"]), gate["secret"], payload("conv-c", "toolu_y").decode()],
                         capture_output=True, text=True, timeout=30, env=env)
    assert out.stdout.split() == ["200", "unproven"], out.stderr
    assert calls(data_dir, "conv-c") == {}


def test_a_host_cannot_note_a_call_of_another_hosts_conversation(gate, data_dir: Path, project: Path) -> None:
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        S.publish_conversation(data_dir, "conv-d", project, host_pid=other.pid)  # another host's chat
        assert post(gate["port"], payload("conv-d", "toolu_z"), {GATE_HEADER: gate["secret"]}) == (200, "unproven")
        assert post(gate["port"], payload("no-such-conv", "toolu_z"), {GATE_HEADER: gate["secret"]}) == (200, "unproven")
    finally:
        other.stdin.close()
        other.wait(10)
    assert calls(data_dir, "conv-d") == {}
    assert not (data_dir / "conversations" / "claude" / "no-such-conv.json").exists()


def test_other_tools_and_bad_requests_note_nothing(gate, data_dir: Path, project: Path) -> None:
    S.publish_conversation(data_dir, "conv-e", project)
    secret = {GATE_HEADER: gate["secret"]}
    assert post(gate["port"], payload("conv-e", "toolu_b", tool="Bash"), secret) == (200, "ignored")
    assert post(gate["port"], b"{not json", secret) == (400, "bad_request")
    assert post(gate["port"], b"[1, 2]", secret) == (200, "ignored")
    conn = http.client.HTTPConnection("127.0.0.1", gate["port"], timeout=10)
    conn.request("GET", GATE_PATH, headers=secret)
    assert conn.getresponse().status == 404
    conn = http.client.HTTPConnection("127.0.0.1", gate["port"], timeout=10)
    conn.putrequest("POST", GATE_PATH)
    conn.putheader(GATE_HEADER, gate["secret"])
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    conn.send(b"0\r\n\r\n")
    assert conn.getresponse().status == 411
    assert calls(data_dir, "conv-e") == {}


def test_many_connections_and_a_half_sent_request_do_not_lock_the_host_out(gate, data_dir: Path, project: Path) -> None:
    import socket

    S.publish_conversation(data_dir, "conv-f", project)
    idle = [socket.create_connection(("127.0.0.1", gate["port"])) for _ in range(httpgate.MAX_CONNS + 8)]
    idle[0].sendall(b"POST " + GATE_PATH.encode() + b" HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")  # never finished
    try:
        results: list = []
        t = threading.Thread(target=lambda: results.append(post(gate["port"], payload("conv-f", "toolu_f"), {GATE_HEADER: gate["secret"]})))
        t.start()
        t.join(30)
        assert results == [(200, "noted")]
    finally:
        for s in idle:
            s.close()


def test_status_reports_the_gate(gate, data_dir: Path, env: dict) -> None:
    out = subprocess.run(S.leanctx_cmd("status", "--json"), env=env, capture_output=True, text=True, timeout=60)
    status = json.loads(out.stdout)["read_gate"]
    assert status["listening"] is True and status["port"] == gate["port"]


def test_the_settings_file_is_private_and_reused(home: Path, data_dir: Path) -> None:
    first = httpgate.planned_config(data_dir)
    httpgate.save_config(data_dir)
    assert os.stat(httpgate.gate_file(data_dir)).st_mode & 0o777 == 0o600
    assert httpgate.planned_config(data_dir) == first == httpgate.read_config(data_dir)
    Path(httpgate.gate_file(data_dir)).write_text('{"port": 80, "secret": "short"}')
    assert httpgate.read_config(data_dir) is None  # not ours to trust: init chooses anew
