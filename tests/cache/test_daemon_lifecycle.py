"""One daemon per data dir, and none left behind: concurrent `leanctx mcp` starts share one
daemon, an idle daemon exits after LEANCTX_IDLE_EXIT minutes and the next read starts a new one,
a second start or a stop with nothing to stop exits 0 saying so, and bad settings are refused.
Real processes throughout (SDK client, `leanctx mcp`, detached daemons); every wait is a poll
with a generous timeout, never a timed assertion."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from leanctx.cache import client
from tests.conftest import run_cli

_spec = importlib.util.spec_from_file_location("leanctx_test_service_support", Path(__file__).with_name("test_service_support.py"))
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)
_mspec = importlib.util.spec_from_file_location("leanctx_test_mcp", Path(__file__).with_name("test_mcp.py"))
M = importlib.util.module_from_spec(_mspec)
_mspec.loader.exec_module(M)

if sys.platform != "linux":
    pytestmark = pytest.mark.skip("Linux-only process checks")

GENEROUS_S = 90.0
TINY_IDLE = "0.02"  # minutes: 1.2 s, noticed at the next housekeeping round


project = M.project  # the MCP tests' workspace (a.txt, b.txt)


def daemons_of(data_dir: Path) -> list[int]:
    """Every `serve` process of this data dir (winner or a loser still on its way out)."""
    want = os.path.realpath(data_dir)
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if not client.is_daemon_cmdline(proc.info["cmdline"] or []):
                continue
            home = proc.environ().get("LEANCTX_HOME")
            if home and os.path.realpath(os.path.join(proc.cwd(), home)) == want:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def status_of(data_dir: Path) -> dict | None:
    """The daemon's own status (an observer's request: it never keeps the daemon alive)."""
    probe = client.ServiceClient(data_dir, timeout=10.0)
    try:
        answer = probe.request("status")
    except (client.DaemonError, client.RemoteError):
        return None
    finally:
        probe.close()
    return answer if isinstance(answer, dict) else None


def client_pids(data_dir: Path) -> list | None:
    """The pids of the clients the daemon lists (None: no daemon answered)."""
    report = status_of(data_dir)
    return None if report is None else sorted(c["pid"] for c in report.get("clients", []))


HANDSHAKE = [  # what every host sends an MCP server first
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "quiet-host", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def quiet_mcp_server(env: dict, cwd: Path, log: Path) -> subprocess.Popen:
    """`leanctx mcp` spawned as a host spawns it (stdio pipes), given the handshake every host
    sends (initialize, initialized, tools/list), then never another message: a session whose
    model reads nothing."""
    with open(log, "ab") as err:
        proc = subprocess.Popen(S.leanctx_cmd("mcp"), env=env, cwd=cwd, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in HANDSHAKE))
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert [a.get("id") for a in answers] == [1, 2] and "result" in answers[1], answers
    return proc


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)


def test_concurrent_mcp_starts_leave_exactly_one_daemon(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    S.publish_conversation(data_dir, "conv-many", project)  # all six serve this one conversation
    files = {f"f{i}.txt": f"file {i}\n" * 20 for i in range(6)}
    for name, text in files.items():
        (project / name).write_text(text)

    async def one(name: str) -> str:
        async with M.mcp_session(env, project, tmp_path / f"mcp-{name}.log") as session:
            await session.initialize()
            err, text = await M.read(session, name)
            assert not err
            return text

    async def scenario() -> list[str]:
        return await asyncio.gather(*(one(name) for name in files))

    assert asyncio.run(scenario()) == list(files.values())
    # Losers of the start race exit on their own; poll until they have, then count.
    assert S.wait_until(lambda: len(daemons_of(data_dir)) <= 1, GENEROUS_S), daemons_of(data_dir)
    winner = client.daemon_process(data_dir)
    assert winner is not None, M.diagnostics(data_dir, tmp_path)
    assert daemons_of(data_dir) == [winner.pid]
    log = Path(client.log_path(data_dir)).read_text()
    assert "Traceback" not in log


def test_a_daemon_gone_under_a_session_is_replaced_and_exits_idle_after_it(env: dict, data_dir: Path, project: Path,
                                                                            tmp_path: Path) -> None:
    """The daemon under a live session was stopped: the next ctx_read starts a new one and is
    answered by it, the session's held-open socket finds the new one, and once the session ends
    that daemon exits after LEANCTX_IDLE_EXIT with nothing left behind."""
    S.publish_conversation(data_dir, "conv-idle", project)
    content = (project / "a.txt").read_text()
    seen: dict = {}

    async def scenario() -> None:
        async with M.mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_IDLE_EXIT=TINY_IDLE) as session:
            await session.initialize()
            assert S.wait_until(lambda: len(client_pids(data_dir) or []) == 1, GENEROUS_S), M.diagnostics(data_dir, tmp_path)
            first = client.daemon_process(data_dir).pid
            seen["first"] = first
            server = client_pids(data_dir)[0]
            assert run_cli("stop", env=env).stdout == f"leanctx daemon: stopped pid {first}\n"
            assert await M.read(session, "a.txt") == (False, content)
            stats = json.loads(M.text_of(await session.call_tool("ctx_stats", {})))
            assert stats["served_by"] == "daemon", M.diagnostics(data_dir, tmp_path)
            assert stats["this_connection"] == {"daemon": 1, "in_process": 0}
            second = client.daemon_process(data_dir)
            assert second is not None and second.pid != first
            seen["second"] = second.pid
            assert S.wait_until(lambda: client_pids(data_dir) == [server], GENEROUS_S)
            assert (await M.read(session, "a.txt"))[1].startswith("[unchanged]")

    asyncio.run(scenario())
    # The session ended (its sockets closed): that daemon goes idle, and nothing is left.
    assert S.wait_until(lambda: gone(seen["second"]), GENEROUS_S)
    assert daemons_of(data_dir) == []
    assert "no client and no request for 0.02 min (LEANCTX_IDLE_EXIT)" in Path(client.log_path(data_dir)).read_text()


def test_a_session_holding_its_connection_keeps_the_daemon(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    """Idle means no client connected: an open MCP server that has read once keeps its socket,
    so the daemon outlives several idle periods while the session lives."""
    S.publish_conversation(data_dir, "conv-held", project)

    async def scenario() -> None:
        async with M.mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_IDLE_EXIT=TINY_IDLE) as session:
            await session.initialize()
            assert (await M.read(session, "a.txt"))[0] is False
            pid = client.daemon_process(data_dir).pid
            # several idle periods and housekeeping rounds pass with the socket held open
            assert not S.wait_until(lambda: gone(pid), 6.0)
            assert (await M.read(session, "a.txt"))[1].startswith("[unchanged]")
            assert client.daemon_process(data_dir).pid == pid

    asyncio.run(scenario())


@pytest.mark.parametrize("value", ["abc", "-1", "nan", "inf", "1e400", "10m"])
def test_bad_idle_exit_is_refused_naming_the_setting(env: dict, data_dir: Path, value: str) -> None:
    res = run_cli("serve", "--detach", env=dict(env, LEANCTX_IDLE_EXIT=value))
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert res.stderr == f"leanctx: LEANCTX_IDLE_EXIT must be a number of minutes >= 0 (0 = never exit when idle), got {value!r}\n"
    assert res.stdout == ""
    opt = run_cli("serve", "--detach", "--idle-exit", value, env=env)
    assert opt.returncode == 2 and opt.stderr.startswith("leanctx: --idle-exit must be a number of minutes >= 0"), opt.stderr
    assert opt.stderr.count("\n") == 1
    assert client.daemon_process(data_dir) is None and not os.path.exists(client.pid_path(data_dir))
    assert daemons_of(data_dir) == []


def test_mcp_with_a_bad_idle_exit_still_serves_through_a_default_daemon(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    S.publish_conversation(data_dir, "conv-badidle", project)

    async def scenario() -> None:
        async with M.mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_IDLE_EXIT="soon") as session:
            await session.initialize()
            assert (await M.read(session, "a.txt"))[0] is False
            stats = json.loads(M.text_of(await session.call_tool("ctx_stats", {})))
            assert stats["served_by"] == "daemon", M.diagnostics(data_dir, tmp_path)

    asyncio.run(scenario())
    assert "LEANCTX_IDLE_EXIT must be a number of minutes >= 0 (0 = never exit when idle), got 'soon'; " \
           "the daemon uses the default instead" in (tmp_path / "mcp.log").read_text()
    proc = client.daemon_process(data_dir)
    assert proc is not None and "LEANCTX_IDLE_EXIT" not in proc.environ()


def test_detach_and_stop_say_what_they_found_and_exit_0(env: dict, data_dir: Path) -> None:
    sock = client.socket_path(data_dir)
    nothing = run_cli("stop", env=env)
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (0, "leanctx daemon: not running, nothing to stop\n", "")
    first = run_cli("serve", "--detach", env=env)
    assert first.returncode == 0, first.stderr
    pid = client.daemon_process(data_dir).pid
    assert first.stdout == f"leanctx daemon: started (pid {pid}), socket {sock}\n"
    again = run_cli("serve", "--detach", env=env)
    assert (again.returncode, again.stdout, again.stderr) == (0, f"leanctx daemon: already running (pid {pid}), socket {sock}\n", "")
    assert daemons_of(data_dir) == [pid]
    assert json.loads(run_cli("status", "--json", env=env).stdout)["idle_exit_min"] == 2  # the default
    stopped = run_cli("stop", env=env)
    assert (stopped.returncode, stopped.stdout) == (0, f"leanctx daemon: stopped pid {pid}\n")
    assert run_cli("stop", env=env).returncode == 0
    assert run_cli("status", env=env).returncode == 1


def test_a_hung_daemon_is_not_reported_as_serving(env: dict, data_dir: Path) -> None:
    assert run_cli("serve", "--detach", env=env).returncode == 0
    proc = client.daemon_process(data_dir)
    proc.send_signal(signal.SIGSTOP)
    try:
        assert S.wait_until(lambda: M.stopped(proc.pid), GENEROUS_S)
        status = run_cli("status", env=env)
        assert status.returncode == 1 and f"pid {proc.pid} is alive but not answering" in status.stdout
        detach = run_cli("serve", "--detach", env=env)
        assert detach.returncode == 1
        assert f"daemon pid {proc.pid} is alive but not answering" in detach.stderr and "stop --force" in detach.stderr
        assert daemons_of(data_dir) == [proc.pid]
    finally:
        proc.send_signal(signal.SIGCONT)


def test_a_relative_data_dir_is_the_same_folder_for_the_daemon(env: dict, tmp_path: Path) -> None:
    """The detached daemon runs in /: it must serve the data dir the caller named, not /<name>."""
    name = f"leanctx-rel-{uuid.uuid4().hex[:8]}"
    rel_env = dict(env, LEANCTX_HOME=name)
    here = tmp_path / name
    stray = Path("/") / name
    try:
        res = subprocess.run([sys.executable, "-m", "leanctx", "serve", "--detach"], env=rel_env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert res.stdout.endswith(f"socket {here / client.SOCKET_NAME}\n")
        assert client.daemon_process(here) is not None
        assert not stray.exists()
    finally:
        for folder in (here, stray):
            S.stop_any_daemon(folder)
        if stray.exists():
            shutil.rmtree(stray, ignore_errors=True)


def test_a_start_racing_a_stopping_daemon_takes_over(env: dict, data_dir: Path) -> None:
    """The lock is still held by a daemon on its way out (no socket any more): a start waits for
    it instead of giving up, so the data dir ends with one daemon serving, not none."""
    import fcntl

    os.makedirs(data_dir, exist_ok=True)
    lock = client.lock_path(data_dir)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    released = False
    starter = subprocess.Popen([sys.executable, "-m", "leanctx", "serve", "--detach"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def waiting_on_the_lock() -> bool:
            for pid in daemons_of(data_dir):
                try:
                    if any(f.path == lock for f in psutil.Process(pid).open_files()):
                        return True
                except psutil.Error:
                    continue
            return False

        assert S.wait_until(waiting_on_the_lock, GENEROUS_S), "the new daemon gave up instead of waiting for the lock"
        os.close(fd)
        released = True
        out, err = starter.communicate(timeout=120)
        assert starter.returncode == 0, err
        proc = client.daemon_process(data_dir)
        assert proc is not None and out == f"leanctx daemon: started (pid {proc.pid}), socket {client.socket_path(data_dir)}\n"
    finally:
        if not released:
            os.close(fd)
        if starter.poll() is None:
            starter.kill()
            starter.wait()


@pytest.mark.parametrize("args", [("serve",), ("serve", "--detach")])
def test_a_data_dir_that_is_a_file_is_one_clear_line(env: dict, tmp_path: Path, args: tuple) -> None:
    where = tmp_path / "not-a-folder"
    where.write_text("x")
    res = run_cli(*args, env=dict(env, LEANCTX_HOME=str(where)))
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(f"leanctx: cannot start the daemon in {where}: ") and res.stderr.count("\n") == 1
    assert "Traceback" not in res.stderr and where.read_text() == "x"


# --- clients, idle exit, status ---------------------------------------------------------------


def test_a_quiet_session_keeps_the_daemon_and_kill_9_lets_it_go(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    """Two MCP servers that never send a thing (sessions whose model reads nothing) are the
    daemon's clients: it outlives several idle periods. Each killed with kill -9 (a bot killed
    mid-run) is dropped at once; when the last one is gone the daemon exits after its idle time."""
    from leanctx.cache.service import CHECK_EVERY_S

    idle_env = dict(env, LEANCTX_IDLE_EXIT=TINY_IDLE)  # the daemon they start inherits it
    a = quiet_mcp_server(idle_env, project, tmp_path / "a.log")
    b = quiet_mcp_server(idle_env, project, tmp_path / "b.log")
    try:
        assert S.wait_until(lambda: client_pids(data_dir) == sorted([a.pid, b.pid]), GENEROUS_S), status_of(data_dir)
        daemon = status_of(data_dir)["pid"]
        a.send_signal(signal.SIGKILL)
        a.wait(30)
        assert S.wait_until(lambda: client_pids(data_dir) == [b.pid], GENEROUS_S), status_of(data_dir)
        since = status_of(data_dir)["uptime_s"]
        # several idle periods and housekeeping rounds pass with only b connected, silent
        later = since + 3 * float(TINY_IDLE) * 60 + 2 * CHECK_EVERY_S
        assert S.wait_until(lambda: (status_of(data_dir) or {}).get("uptime_s", 0) >= later, GENEROUS_S, step=0.2)
        report = status_of(data_dir)
        assert report is not None and report["pid"] == daemon, "the daemon exited under a live session"
        assert report["idle_for_s"] is None and [c["requests"] for c in report["clients"]] == [1]  # its hello
        b.send_signal(signal.SIGKILL)
        b.wait(30)
        assert S.wait_until(lambda: gone(daemon), GENEROUS_S), status_of(data_dir)
    finally:
        end(a)
        end(b)
    assert daemons_of(data_dir) == []
    log = Path(client.log_path(data_dir)).read_text()
    assert "no client and no request for 0.02 min (LEANCTX_IDLE_EXIT): shutting down" in log and "Traceback" not in log


def test_an_orphaned_mcp_server_lets_the_daemon_go(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    """The host was killed with kill -9 but its MCP server lives on (something else holds its
    stdin): nobody will ever call it, so it lets go of the daemon, which then exits idle."""
    idle_env = dict(env, LEANCTX_IDLE_EXIT=TINY_IDLE)
    read_end, write_end = os.pipe()
    host_code = ("import subprocess, sys, time; subprocess.Popen(sys.argv[2:], stdin=int(sys.argv[1]), "
                 "stdout=subprocess.DEVNULL); time.sleep(600)")
    with open(tmp_path / "host.log", "ab") as err:
        host = subprocess.Popen([sys.executable, "-c", host_code, str(read_end), *S.leanctx_cmd("mcp")], env=idle_env,
                                cwd=project, pass_fds=(read_end,), stderr=err)
    os.close(read_end)
    os.write(write_end, b"".join(json.dumps(m).encode() + b"\n" for m in HANDSHAKE))  # as every host does
    server = None
    try:
        def one_client() -> bool:
            pids = client_pids(data_dir) or []
            return len(pids) == 1 and psutil.Process(pids[0]).ppid() == host.pid

        assert S.wait_until(one_client, GENEROUS_S), status_of(data_dir)
        server = psutil.Process(client_pids(data_dir)[0])
        report = status_of(data_dir)
        assert report["clients"][0]["host_pid"] == host.pid
        daemon = report["pid"]
        host.kill()
        host.wait(30)
        assert server.is_running() and server.status() != psutil.STATUS_ZOMBIE  # orphaned, stdin still open
        assert S.wait_until(lambda: gone(daemon), GENEROUS_S), status_of(data_dir)
        assert server.is_running()
    finally:
        os.close(write_end)
        end(host)
        if server is not None and server.is_running():
            server.kill()
    assert daemons_of(data_dir) == []


def test_looking_at_an_idle_daemon_never_keeps_it_alive(env: dict, data_dir: Path) -> None:
    """`leanctx status`/`stats` in a loop (a monitor) and bare connection probes are no clients:
    the idle daemon exits while they keep asking."""
    assert run_cli("serve", "--detach", env=dict(env, LEANCTX_IDLE_EXIT=TINY_IDLE)).returncode == 0
    pid = client.daemon_process(data_dir).pid

    def look() -> bool:
        status_of(data_dir)
        probe = client.ServiceClient(data_dir, timeout=10.0)
        try:
            probe.request("stats")
            probe.request("hello")  # a bare hello, as `serve --detach` checks a running daemon
        except (client.DaemonError, client.RemoteError):
            pass
        finally:
            probe.close()
        client.wait_for_socket(data_dir, 0)
        return gone(pid)

    assert S.wait_until(look, GENEROUS_S, step=0.1), status_of(data_dir)
    assert daemons_of(data_dir) == []


def _raw_mcp(env: dict, cwd: Path, log: Path) -> tuple[subprocess.Popen, object]:
    """`leanctx mcp` driven by bare JSON-RPC lines: (process, call(method, params) -> result)."""
    with open(log, "ab") as err:
        proc = subprocess.Popen(S.leanctx_cmd("mcp"), env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    ids = iter(range(1, 1000))

    def call(method: str, params: dict) -> dict:
        msg = {"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert "result" in answer, answer
        return answer["result"]

    call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}})
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    return proc, call


def test_status_shows_clients_uptime_and_memory(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    import re

    S.publish_conversation(data_dir, "conv-status", project)  # this test process is the MCP server's host
    assert run_cli("serve", "--detach", env=env).returncode == 0
    daemon = client.daemon_process(data_dir).pid
    server, call = _raw_mcp(env, project, tmp_path / "mcp.log")
    try:
        assert S.wait_until(lambda: client_pids(data_dir) == [server.pid], GENEROUS_S), status_of(data_dir)
        result = call("tools/call", {"name": "ctx_read", "arguments": {"path": "a.txt"}})
        assert result["content"][0]["text"] == (project / "a.txt").read_text()

        report = json.loads(run_cli("status", "--json", env=env).stdout)
        me, name = psutil.Process(), psutil.Process(server.pid).name()
        (row,) = report["clients"]
        assert {k: row[k] for k in ("pid", "name", "verified", "host_pid", "host_name", "sockets", "requests")} == {
            "pid": server.pid, "name": name, "verified": True, "host_pid": me.pid, "host_name": me.name(),
            "sockets": 2, "requests": 2}  # its held-open socket (hello) and the one the read took
        assert 0 <= row["idle_s"] <= row["connected_s"] <= report["uptime_s"]
        assert report["connections"]["clients"] == 1 and report["idle_for_s"] is None
        mem = report["memory"]
        assert mem["held_bytes"] == len((project / "a.txt").read_bytes()) and mem["held_files"] == 1
        assert mem["rss_bytes"] > 10 << 20  # the daemon's own resident size, not a placeholder

        text = run_cli("status", env=env)
        assert text.returncode == 0, text.stderr
        lines = text.stdout.splitlines()
        assert re.fullmatch(rf"leanctx daemon: running, pid {daemon}, up \d+m \d+s, leanctx \S+", lines[0]), lines
        assert re.fullmatch(r"  memory       \d+\.\d MiB resident, holding 0\.0 MiB of file text \(1 file, kept for diffs\)",
                            lines[2]), lines
        assert lines[3] == "  clients      1 connected (2 sockets), 1 MCP connection since start", lines
        assert re.fullmatch(rf"    pid {server.pid} {re.escape(name)}, host pid {me.pid} {re.escape(me.name())}: "
                            r"2 sockets, 2 requests, connected \d+m \d+s, last answer \d+m \d+s ago", lines[4]), lines
        assert lines[5] == "  idle exit    after 2 min with no client and no request (LEANCTX_IDLE_EXIT)", lines
    finally:
        server.stdin.close()
        server.wait(30)
    # the host closed the session: no client, and the idle clock runs
    assert S.wait_until(lambda: client_pids(data_dir) == [], GENEROUS_S)
    idle = run_cli("status", env=env).stdout.splitlines()
    assert idle[3] == "  clients      0 connected (0 sockets), 1 MCP connection since start", idle
    assert re.fullmatch(r"  idle exit    after 2 min with no client and no request \(LEANCTX_IDLE_EXIT\); "
                        r"no client for \d+m \d+s", idle[4]), idle


def test_concurrent_detached_starts_all_name_the_one_daemon(env: dict, data_dir: Path) -> None:
    """Four `serve --detach` at once: one daemon; each exits 0, the one whose daemon serves says
    "started", the others "already running", all naming its pid."""
    starters = [subprocess.Popen(S.leanctx_cmd("serve", "--detach"), env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=180) for p in starters]
    assert [p.returncode for p in starters] == [0] * 4, outs
    winner = client.daemon_process(data_dir).pid
    sock = client.socket_path(data_dir)
    assert sorted(out for out, _ in outs) == sorted(
        [f"leanctx daemon: started (pid {winner}), socket {sock}\n"] + [f"leanctx daemon: already running (pid {winner}), socket {sock}\n"] * 3)
    assert S.wait_until(lambda: daemons_of(data_dir) == [winner], GENEROUS_S), daemons_of(data_dir)


def test_a_pid_file_from_another_data_dir_is_stale(env: dict, data_dir: Path, tmp_path: Path) -> None:
    """A pid file copied or restored from another data dir names a live daemon serving another
    socket: not ours to report, stop, or defer to."""
    other = tmp_path / "other-data"
    other_env = dict(env, LEANCTX_HOME=str(other))
    assert run_cli("serve", "--detach", env=other_env).returncode == 0
    theirs = client.daemon_process(other)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(client.pid_path(other), client.pid_path(data_dir))
        assert client.daemon_process(data_dir) is None
        status = run_cli("status", env=env)
        assert (status.returncode, status.stdout) == (1, "leanctx daemon: not running (stale pid/socket files will be replaced at the next start)\n")
        stop = run_cli("stop", env=env)
        assert (stop.returncode, stop.stdout) == (0, "leanctx daemon: not running, nothing to stop\n")
        assert theirs.is_running()
        started = run_cli("serve", "--detach", env=env)
        ours = client.daemon_process(data_dir)
        assert started.returncode == 0 and ours is not None and ours.pid != theirs.pid, (started.stdout, started.stderr)
        assert started.stdout == f"leanctx daemon: started (pid {ours.pid}), socket {client.socket_path(data_dir)}\n"
        assert client.daemon_process(other).pid == theirs.pid
    finally:
        S.stop_any_daemon(other)


def test_concurrent_foreground_serves_leave_one_and_the_others_name_it(env: dict, data_dir: Path, tmp_path: Path) -> None:
    """Four `leanctx serve` at once: one serves (and stops cleanly on SIGTERM); the other three
    exit 0 at once, each naming the pid that serves."""
    starters = [subprocess.Popen(S.leanctx_cmd("serve", "--idle-exit", "0"), env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True) for _ in range(4)]
    try:
        assert S.wait_until(lambda: sum(p.poll() is not None for p in starters) >= 3, GENEROUS_S)
        (winner,) = [p for p in starters if p.poll() is None] or [None]
        assert winner is not None, [p.communicate() for p in starters]
        sock = client.socket_path(data_dir)
        for p in starters:
            if p is not winner:
                assert (p.returncode, p.stdout.read()) == (0, f"leanctx daemon: already running (pid {winner.pid}), socket {sock}\n")
        winner.send_signal(signal.SIGTERM)
        assert winner.wait(GENEROUS_S) == 0
    finally:
        for p in starters:
            end(p)
    assert daemons_of(data_dir) == []
