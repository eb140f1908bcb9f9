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


def test_idle_daemon_exits_and_the_next_read_starts_a_new_one(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    """A host session idle for longer than LEANCTX_IDLE_EXIT: the daemon its MCP server started
    has exited; the next ctx_read starts a new one and is answered by it."""
    S.publish_conversation(data_dir, "conv-idle", project)
    content = (project / "a.txt").read_text()
    seen: dict = {}

    async def scenario() -> None:
        async with M.mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_IDLE_EXIT=TINY_IDLE) as session:
            await session.initialize()
            assert S.wait_until(lambda: client.daemon_process(data_dir) is not None, GENEROUS_S), M.diagnostics(data_dir, tmp_path)
            first = client.daemon_process(data_dir).pid
            seen["first"] = first
            assert S.wait_until(lambda: gone(first), GENEROUS_S), "the idle daemon did not exit"
            assert client.daemon_process(data_dir) is None
            assert await M.read(session, "a.txt") == (False, content)
            stats = json.loads(M.text_of(await session.call_tool("ctx_stats", {})))
            assert stats["served_by"] == "daemon", M.diagnostics(data_dir, tmp_path)
            assert stats["this_connection"] == {"daemon": 1, "in_process": 0}
            second = client.daemon_process(data_dir)
            assert second is not None and second.pid != first
            seen["second"] = second.pid
            assert (await M.read(session, "a.txt"))[1].startswith("[unchanged]")

    asyncio.run(scenario())
    # The session ended (its socket closed): that daemon goes idle too, and nothing is left.
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
    assert json.loads(run_cli("status", "--json", env=env).stdout)["idle_exit_min"] == 10  # the default
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
