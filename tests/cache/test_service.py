"""The cache daemon as a real process: socket, pid file, single instance, stale recovery, stop,
status, stats, the wire protocol and its refusals."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from leanctx.cache import client

_spec = importlib.util.spec_from_file_location("leanctx_test_service_support", Path(__file__).with_name("test_service_support.py"))
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 201)))
    return proj


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(S.leanctx_cmd(*args), env=env, capture_output=True, text=True, timeout=60)


def my_facts(**over: object) -> dict:
    """Connection facts naming this test process as the host (as an MCP server we spawned would)."""
    from leanctx.hooks.hostproc import process_stat

    facts = {"connection_id": uuid.uuid4().hex, "env": {}, "host_pid": os.getpid(),
             "host_start_ticks": process_stat(os.getpid())[2], "cwd": None}
    facts.update(over)
    return facts


def raw_exchange(path: str, payload: bytes) -> list[dict]:
    """Send raw bytes on a fresh socket, collect every answer line until the daemon closes or idles."""
    sock = client.connect(path, 2.0)
    sock.sendall(payload)
    sock.settimeout(2.0)
    buf = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
            if buf.count(b"\n") >= payload.count(b"\n") and buf.endswith(b"\n"):
                break
    except socket.timeout:
        pass
    finally:
        sock.close()
    return [json.loads(line) for line in buf.splitlines() if line.strip()]


# --- lifecycle ------------------------------------------------------------------------------


def test_socket_pidfile_and_status(daemon: subprocess.Popen, env: dict, data_dir: Path) -> None:
    sock = Path(client.socket_path(data_dir))
    assert stat.S_ISSOCK(sock.stat().st_mode)
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    info = client.read_pidfile(data_dir)
    assert info["pid"] == daemon.pid
    assert client.daemon_process(data_dir).pid == daemon.pid
    assert stat.S_IMODE(os.stat(client.pid_path(data_dir)).st_mode) == 0o600

    res = cli(env, "status", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["running"] is True and report["pid"] == daemon.pid
    assert report["uptime_s"] >= 0
    assert {"open_sockets", "clients", "clients_seen", "sockets_total"} <= set(report["connections"])
    assert "entries" in report
    assert {"tokens_raw", "tokens_sent", "tokens_saved", "tokenizer"} <= set(report["savings"])
    assert report["socket"] == str(sock)

    text = cli(env, "status")
    assert text.returncode == 0
    assert f"pid {daemon.pid}" in text.stdout and "clients" in text.stdout and "memory" in text.stdout and "savings" in text.stdout


def test_second_serve_says_so_and_exits_0(daemon: subprocess.Popen, env: dict, data_dir: Path) -> None:
    line = f"leanctx daemon: already running (pid {daemon.pid}), socket {client.socket_path(data_dir)}"
    second = cli(env, "serve")
    assert (second.returncode, second.stdout.strip()) == (0, line), second.stderr
    assert daemon.poll() is None
    assert client.ServiceClient(data_dir).request("hello")["pid"] == daemon.pid
    detached = cli(env, "serve", "--detach")
    assert (detached.returncode, detached.stdout.strip(), detached.stderr) == (0, line, "")


def test_stop_is_graceful(daemon: subprocess.Popen, env: dict, data_dir: Path, project: Path) -> None:
    S.publish_conversation(data_dir, "conv-stop", project)
    with S.Caller(data_dir, project) as c:
        assert c.read(project / "a.txt")["kind"] == "full"
    res = cli(env, "stop")
    assert res.returncode == 0, res.stderr
    assert f"stopped pid {daemon.pid}" in res.stdout
    assert daemon.wait(10) == 0
    assert not os.path.exists(client.socket_path(data_dir))
    assert not os.path.exists(client.pid_path(data_dir))
    assert os.listdir(client.cache_dir(data_dir)), "SIGTERM saves the index"
    after = cli(env, "status", "--json")
    assert after.returncode == 1 and json.loads(after.stdout)["running"] is False
    assert cli(env, "stop").stdout.strip() == "leanctx daemon: not running, nothing to stop"


def test_stale_pid_and_socket_are_recovered(env: dict, data_dir: Path, tmp_path: Path) -> None:
    first = S.start_daemon(env, tmp_path / "d1.log")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert os.path.exists(client.socket_path(data_dir)) and os.path.exists(client.pid_path(data_dir))
    assert client.daemon_process(data_dir) is None
    status = json.loads(cli(env, "status", "--json").stdout)
    assert status == {"running": False, "stale_files": True, "socket": client.socket_path(data_dir)}

    # A pid file naming a live process that is not our daemon (pid reuse): never signalled.
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        info = client.read_pidfile(data_dir)
        info["pid"] = bystander.pid
        Path(client.pid_path(data_dir)).write_text(json.dumps(info))
        assert client.daemon_process(data_dir) is None
        assert cli(env, "stop").stdout.strip() == "leanctx daemon: not running, nothing to stop"
        assert bystander.poll() is None
        second = S.start_daemon(env, tmp_path / "d2.log")
        try:
            assert client.read_pidfile(data_dir)["pid"] == second.pid
            assert client.ServiceClient(data_dir).request("hello")["pid"] == second.pid
            assert "removed stale" in (tmp_path / "d2.log").read_text()
        finally:
            second.send_signal(signal.SIGTERM)
            assert second.wait(10) == 0
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_socket_name_taken_by_a_directory_is_a_clear_refusal(env: dict, data_dir: Path) -> None:
    os.makedirs(client.socket_path(data_dir))
    res = cli(env, "serve")
    assert res.returncode == 2  # bad environment, named in one line
    assert "is a directory, not our socket; remove it" in res.stderr
    assert not os.path.exists(client.pid_path(data_dir))
    assert [n for n in os.listdir(data_dir) if n.endswith(".tmp")] == []


def test_socket_removed_under_a_live_daemon_shuts_it_down(daemon: subprocess.Popen, data_dir: Path, monkeypatch) -> None:
    os.unlink(client.socket_path(data_dir))
    # housekeeping runs every SAVE_EVERY_S; the daemon notices and exits so a client can start a healthy one
    assert daemon.wait(30) == 0
    assert not os.path.exists(client.pid_path(data_dir))


def test_idle_daemon_exits_but_not_while_a_client_is_connected(env: dict, data_dir: Path, tmp_path: Path) -> None:
    proc = S.start_daemon(dict(env, LEANCTX_IDLE_EXIT="0.02"), tmp_path / "idle.log")  # minutes
    try:
        held = client.connect(client.socket_path(data_dir), 2.0)
        time.sleep(4)  # two housekeeping rounds with a client connected
        assert proc.poll() is None
        held.close()
        assert proc.wait(15) == 0
        assert "no client and no request for 0.02 min (LEANCTX_IDLE_EXIT): shutting down" in (tmp_path / "idle.log").read_text()
        assert not os.path.exists(client.socket_path(data_dir))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_detached_start_never_holds_the_callers_stdio(env: dict, data_dir: Path) -> None:
    res = subprocess.run(S.leanctx_cmd("serve", "--detach"), env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    proc = client.daemon_process(data_dir)
    assert proc is not None
    assert proc.ppid() != os.getpid()
    assert os.getsid(proc.pid) != os.getsid(0)
    assert os.readlink(f"/proc/{proc.pid}/fd/0") == "/dev/null"
    log = os.path.realpath(client.log_path(data_dir))
    assert os.readlink(f"/proc/{proc.pid}/fd/1") == log
    assert os.readlink(f"/proc/{proc.pid}/fd/2") == log
    assert proc.cwd() == "/"
    # the spawning host's identity and credentials stay out of the daemon
    spawn_env = dict(env, ANTHROPIC_API_KEY="sk-secret", CLAUDE_CODE_SESSION_ID="s-1", LEANCTX_SCOPE="x")
    assert client.daemon_env(spawn_env).keys().isdisjoint({"ANTHROPIC_API_KEY", "CLAUDE_CODE_SESSION_ID", "LEANCTX_SCOPE"})
    assert "ANTHROPIC_API_KEY" not in proc.environ()


def test_long_data_dir_path(home: Path, tmp_path: Path, monkeypatch) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "leanctx"
    assert len(str(deep / client.SOCKET_NAME)) > 108
    monkeypatch.setenv("LEANCTX_HOME", str(deep))
    e = S.subprocess_env(home, deep)
    proc = S.start_daemon(e, tmp_path / "deep.log")
    try:
        assert client.ServiceClient(deep).request("hello")["pid"] == proc.pid
        assert stat.S_IMODE(os.stat(client.socket_path(deep)).st_mode) == 0o600
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


# --- protocol ---------------------------------------------------------------------------------


def test_read_full_then_stub_for_the_conversation(daemon: subprocess.Popen, data_dir: Path, project: Path) -> None:
    S.publish_conversation(data_dir, "conv-proto", project)
    with S.Caller(data_dir, project) as c:
        first = c.read(project / "a.txt")
        second = c.read(project / "a.txt")
        forced = c.read(project / "a.txt", fresh=True)
        assert first["kind"] == "full" and first["text"] == (project / "a.txt").read_text()
        assert second["kind"] == "stub" and second["text"].startswith("[unchanged]") and "fresh=true" in second["text"]
        assert forced["kind"] == "full"
        assert c.request("stats")["result"]["tokenizer"]
    # a caller the records do not name (another host process) never gets a stub
    with S.Caller(data_dir, project, stranger=True) as stranger:
        assert [stranger.read(project / "a.txt")["kind"] for _ in range(2)] == ["full", "full"]


def test_bad_requests_get_clear_errors(daemon: subprocess.Popen, data_dir: Path) -> None:
    path = client.socket_path(data_dir)
    answers = raw_exchange(path, b"not json\n" + b'[1]\n' + b'{"v": 99, "op": "hello"}\n' + b'{"v": 1, "op": "nope"}\n'
                           + b'{"v": 1, "op": "read", "args": {"path": "a"}}\n'
                           + json.dumps({"v": 1, "op": "read", "conn": my_facts(), "args": {"path": ""}}).encode() + b"\n"
                           + json.dumps({"v": 1, "op": "read", "conn": my_facts(), "args": {"path": "a", "start_line": 0}}).encode() + b"\n"
                           + json.dumps({"v": 1, "op": "read", "conn": my_facts(), "args": {"path": "a", "start_line": 5, "end_line": 2}}).encode() + b"\n"
                           + json.dumps({"v": 1, "op": "read", "conn": my_facts(host_pid="x"), "args": {"path": "a"}}).encode() + b"\n"
                           + b'{"v": 1, "op": "hello"}\n')
    assert [a["ok"] for a in answers] == [False] * 9 + [True]
    errors = [a["error"] for a in answers[:9]]
    assert errors[0] == "request is not valid JSON"
    assert errors[1] == "request must be a JSON object"
    assert "unsupported protocol version 99" in errors[2]
    assert errors[3] == "unknown op 'nope'"
    assert errors[4] == "conn must be an object"
    assert errors[5] == "path must be a non-empty string"
    assert errors[6] == "start_line must be a line number >= 1"
    assert errors[7] == "end_line is before start_line"
    assert errors[8] == "conn.host_pid must be a non-negative integer or null"
    assert all(a["code"] == "bad_request" for a in answers[:9])


def test_oversized_request_is_refused_and_the_daemon_keeps_serving(daemon: subprocess.Popen, data_dir: Path) -> None:
    path = client.socket_path(data_dir)
    sock = client.connect(path, 5.0)
    try:
        sock.sendall(b'{"v": 1, "op": "hello", "pad": "' + b"x" * (client.MAX_REQUEST + 10))
    except OSError:
        pass  # the daemon may already have closed its end
    ls = client.LineSocket(sock)
    answer = json.loads(ls.recv_line(1 << 16))
    assert answer == {"ok": False, "code": "too_large", "error": f"request over {client.MAX_REQUEST} bytes"}
    sock.close()
    assert client.ServiceClient(data_dir).request("hello")["pid"] == daemon.pid


def test_client_pool_survives_a_daemon_restart(env: dict, data_dir: Path, tmp_path: Path) -> None:
    first = S.start_daemon(env, tmp_path / "r1.log")
    c = client.ServiceClient(data_dir)
    assert c.request("hello")["pid"] == first.pid
    first.send_signal(signal.SIGTERM)
    assert first.wait(10) == 0
    with pytest.raises(client.DaemonUnavailable):
        c.request("hello")
    second = S.start_daemon(env, tmp_path / "r2.log")
    try:
        assert c.request("hello")["pid"] == second.pid  # the dead pooled socket is not reused
    finally:
        c.close()
        second.send_signal(signal.SIGTERM)
        second.wait(10)


def test_stats_cli(daemon: subprocess.Popen, env: dict, data_dir: Path, project: Path) -> None:
    S.publish_conversation(data_dir, "conv-stats", project)
    with S.Caller(data_dir, project) as c:
        for _ in range(2):
            c.read(project / "a.txt")
    res = cli(env, "stats", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["source"] == "daemon"
    assert report["tokenizer"]
    assert report["reads"] == 2 and report["stubs"] == 1 and report["tokens_sent"] < report["tokens_raw"]
    assert report["by_agent"]["claude"]["stubs"] == 1
    assert [k for k in report["by_conversation"] if "conv-stats" in k]
    text = cli(env, "stats")
    assert text.returncode == 0
    assert report["tokenizer_note"] in text.stdout
    assert "total" in text.stdout and "per host" in text.stdout and "per conversation" in text.stdout
    # with the daemon stopped, stats come from the persisted index
    assert cli(env, "stop").returncode == 0
    offline = cli(env, "stats", "--json")
    assert offline.returncode == 0, offline.stderr
    saved = json.loads(offline.stdout)
    assert saved["source"].startswith("persisted index")
    assert (saved["reads"], saved["stubs"]) == (2, 1)


def test_daemon_survives_a_client_dying_mid_request(daemon: subprocess.Popen, data_dir: Path, project: Path) -> None:
    S.publish_conversation(data_dir, "conv-drop", project)
    for _ in range(20):
        sock = client.connect(client.socket_path(data_dir), 2.0)
        sock.sendall(client.encode({"v": 1, "op": "read", "conn": my_facts(), "args": {"path": str(project / "a.txt")}}))
        sock.close()  # gone before the answer
    status = client.ServiceClient(data_dir)
    assert S.wait_until(lambda: status.request("status")["connections"]["open_sockets"] == 0)
    assert daemon.poll() is None


if sys.platform != "linux":  # /proc checks above
    pytestmark = pytest.mark.skip("Linux-only process checks")
