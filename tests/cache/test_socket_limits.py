"""Idle and half-written sockets cannot lock clients out of the daemon: floods from other real
processes over real sockets, the per-peer cap, the line timeout, and an MCP session whose idle
socket was evicted keeps being served by the daemon."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leanctx.cache import client
from leanctx.cache.service import LINE_TIMEOUT_S, MAX_PEER_SOCKETS, MAX_SOCKETS

_spec = importlib.util.spec_from_file_location("leanctx_test_service_support", Path(__file__).with_name("test_service_support.py"))
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

if sys.platform != "linux":
    pytestmark = pytest.mark.skip("the per-peer cap needs SO_PEERCRED (Linux)")

# One flooding process: open N sockets (each optionally sending a half-written request line),
# say "ready" once every connect returned, hold them until stdin closes.
FLOOD = r"""
import sys
from leanctx.cache import client
path, n, payload = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
held = []
for _ in range(n):
    sock = client.connect(path, 30.0)
    if payload:
        try:
            sock.sendall(payload)
        except OSError:
            pass
    held.append(sock)
print("ready", flush=True)
sys.stdin.read()
"""


class Flood:
    """More sockets than MAX_SOCKETS, from several processes (none over the per-peer cap)."""

    def __init__(self, data_dir: Path, payload: bytes = b"") -> None:
        per, total = MAX_PEER_SOCKETS, MAX_SOCKETS + MAX_PEER_SOCKETS
        self.procs = [subprocess.Popen([sys.executable, "-c", FLOOD, client.socket_path(data_dir), str(per), payload.decode()],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                      for _ in range(-(-total // per))]

    def __enter__(self) -> Flood:
        for proc in self.procs:  # every connect returned: the daemon accepts (FIFO) them before any later one
            assert proc.stdout.readline() == "ready\n"
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.stdin.close()
        for proc in self.procs:
            proc.wait(30)


def hello_from_another_process(data_dir: Path) -> dict:
    code = ("import json, sys\nfrom leanctx.cache import client\n"
            "try:\n    print(json.dumps({'ok': client.ServiceClient(sys.argv[1]).request('hello')}))\n"
            "except client.RemoteError as exc:\n    print(json.dumps({'code': exc.code, 'error': str(exc)}))\n")
    out = subprocess.run([sys.executable, "-c", code, str(data_dir)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_idle_flood_does_not_lock_out_a_client(daemon: subprocess.Popen, data_dir: Path) -> None:
    with Flood(data_dir):
        assert client.ServiceClient(data_dir).request("hello")["pid"] == daemon.pid
        conns = client.ServiceClient(data_dir).request("status")["connections"]
        assert conns["sockets_evicted"] >= MAX_PEER_SOCKETS  # the flood made room for itself, then for us
        assert conns["open_sockets"] <= MAX_SOCKETS
        assert conns["limits"] == {"max_sockets": MAX_SOCKETS, "max_peer_sockets": MAX_PEER_SOCKETS,
                                   "line_timeout_s": LINE_TIMEOUT_S}


def test_half_written_lines_flood_does_not_lock_out_a_client(daemon: subprocess.Popen, data_dir: Path) -> None:
    with Flood(data_dir, b'{"v": 1, "op": "hel'):
        assert hello_from_another_process(data_dir)["ok"]["pid"] == daemon.pid
        assert client.ServiceClient(data_dir).request("hello")["pid"] == daemon.pid


def test_a_trickled_line_is_dropped_after_the_line_timeout(daemon: subprocess.Popen, data_dir: Path) -> None:
    sock = client.connect(client.socket_path(data_dir), 5.0)
    sock.sendall(b'{"v": 1, "op"')
    answer = b""
    deadline = time.monotonic() + LINE_TIMEOUT_S + 60
    try:
        while time.monotonic() < deadline and not answer.endswith(b"\n"):
            if select.select([sock], [], [], 0.5)[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
            else:
                try:
                    sock.sendall(b" ")  # a byte now and then does not extend the line's time
                except OSError:
                    break
        assert answer, "the daemon kept a half-written line open"
        reply = json.loads(answer)
        assert reply["code"] == "timeout" and f"within {LINE_TIMEOUT_S:g} s" in reply["error"]
        sock.settimeout(10)
        assert sock.recv(65536) == b""  # and closed
    finally:
        sock.close()
    status = client.ServiceClient(data_dir).request("status")["connections"]
    assert status["lines_timed_out"] == 1


def test_per_peer_cap(daemon: subprocess.Popen, data_dir: Path) -> None:
    path = client.socket_path(data_dir)
    held = []
    try:
        for _ in range(MAX_PEER_SOCKETS):
            ls = client.LineSocket(client.connect(path, 5.0))
            ls.send(client.encode({"v": client.PROTOCOL, "op": "hello"}))
            assert json.loads(ls.recv_line(1 << 16))["ok"] is True
            held.append(ls)
        extra = client.LineSocket(client.connect(path, 5.0))
        refusal = json.loads(extra.recv_line(1 << 16))
        assert refusal["code"] == "busy" and refusal["error"] == f"over {MAX_PEER_SOCKETS} open connections from process {os.getpid()}"
        assert extra.recv_line(1 << 16) is None  # and closed
        extra.close()
        assert hello_from_another_process(data_dir)["ok"]["pid"] == daemon.pid  # others are served
        held.pop().close()
        assert S.wait_until(lambda: _hello_or_busy(data_dir) == daemon.pid, 30)  # a freed slot is ours again
    finally:
        for ls in held:
            ls.close()


def _hello_or_busy(data_dir: Path) -> int | None:
    try:
        return client.ServiceClient(data_dir).request("hello")["pid"]
    except client.RemoteError:
        return None


def test_an_idle_mcp_session_survives_the_eviction_of_its_socket(daemon: subprocess.Popen, env: dict, data_dir: Path,
                                                                  tmp_path: Path) -> None:
    from tests.cache.test_mcp import mcp_session, read, text_of

    project = tmp_path / "proj"
    project.mkdir()
    content = "".join(f"line {i}\n" for i in range(1, 201))
    (project / "a.txt").write_text(content)
    S.publish_conversation(data_dir, "conv-idle", project)

    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log") as session:
            await session.initialize()
            assert await read(session, "a.txt") == (False, content)
            with Flood(data_dir):  # the MCP server's pooled socket is the one idle longest: evicted first
                # answered after the daemon took in (FIFO) every flood socket, evicting the idlest
                assert client.ServiceClient(data_dir).request("status")["connections"]["sockets_evicted"] > MAX_PEER_SOCKETS
                err, stub = await read(session, "a.txt")
                assert not err and stub.startswith("[unchanged]"), stub
            stats = json.loads(text_of(await session.call_tool("ctx_stats", {})))
            assert stats["this_connection"] == {"daemon": 2, "in_process": 0}

    asyncio.run(scenario())
