"""The daemon takes who is asking from the kernel, never from the request (cache/peer.py).

Real processes and a real daemon: a Claude Code-like host fires the real hooks and spawns its
"MCP server" (a process that talks to the daemon); another process, from another host, sends
requests carrying the first conversation's facts, copied from its readable hook record."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx.cache import client, peer

from .conftest import _support as S
from .test_service import project  # noqa: F401 - a fixture

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_PEERCRED and /proc")




def record_facts(data_dir: Path, agent: str, conv: str) -> dict:
    """Everything a spoofer can learn about a conversation from its hook record."""
    rec = json.loads((data_dir / "conversations" / agent / f"{conv}.json").read_text())
    env_name = "CLAUDE_CODE_SESSION_ID" if agent == "claude" else "CODEX_THREAD_ID"
    return {"connection_id": "victim", "env": {env_name: conv, "CLAUDE_PROJECT_DIR": rec["cwd"]},
            "host_pid": rec["host"]["pid"], "host_start_ticks": rec["host"]["start_ticks"], "cwd": rec["cwd"]}


@pytest.mark.parametrize("agent", ["claude", "codex"])
def test_a_spoofed_read_plants_no_stub_in_another_conversation(daemon, env, data_dir: Path, project: Path,
                                                              agent: str) -> None:
    conv = f"victim-{agent}"
    with S.Caller(data_dir, project, env=env, host=(agent, conv)) as victim:
        facts = record_facts(data_dir, agent, conv)
        # the spoofer: another host's process sending the victim's facts; the second one was also
        # started with the victim's session variable in its real environment
        spoof_env = dict(env, **facts["env"])
        for name, spoofer_env in (("a.txt", env), ("b.txt", spoof_env)):
            target = project / name
            target.write_text(f"{name}\n" * 300)
            with S.Caller(data_dir, project, env=spoofer_env, stranger=True) as spoofer:
                assert spoofer.read(target, facts=facts)["kind"] == "full"
                assert spoofer.read(target, facts=facts)["kind"] == "full"  # credited to nobody
            first = victim.read(target)  # the victim's genuine first read
            assert first["kind"] == "full" and first["text"] == target.read_text()
            assert victim.read(target)["kind"] == "stub"  # its own identity still works
        assert victim.request("hello")["result"]["caller"]["verified"] is True
    stats = S.Caller(data_dir, project, env=env)
    with stats:
        by_conv = stats.request("stats")["result"]["by_conversation"]
    assert [k for k in by_conv if conv in k], by_conv


def test_claimed_cwd_and_project_dir_are_ignored(daemon, env, data_dir: Path, tmp_path: Path) -> None:
    """A caller without a hook record reads inside its real working directory, not one it names."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "s.txt").write_text("top secret\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    facts = {"connection_id": "x", "env": {"CLAUDE_PROJECT_DIR": str(secret)}, "cwd": str(secret)}
    with S.Caller(data_dir, elsewhere, env=env, stranger=True) as c:
        answer = c.read("s.txt", facts=facts)
        assert answer["kind"] == "error" and "top secret" not in answer["text"]
        outside = c.read(str(secret / "s.txt"), facts=facts)
        assert outside["kind"] == "error" and outside["code"] == "outside_roots"
    with S.Caller(data_dir, secret, env=env, stranger=True) as inside:  # really started there: its own folder
        assert inside.read("s.txt")["text"] == "top secret\n"


def test_a_caller_that_cannot_be_verified_is_served_nothing(daemon, env, data_dir: Path, project: Path) -> None:
    """The process that connected is gone (its socket lives on in a child): the kernel's facts
    name a dead process, so the daemon refuses every read on that socket, whatever it claims."""
    S.publish_conversation(data_dir, "conv-orphan", project)
    code = r"""
import json, os, sys
from leanctx.cache import client
sock = client.connect(client.socket_path(sys.argv[1]), 2.0)
r, w = os.pipe()
if os.fork():  # the parent connected; it exits and the child inherits the socket
    os._exit(0)
os.close(w)
os.read(r, 1)  # EOF once the parent is gone
import time
time.sleep(0.2)
ls = client.LineSocket(sock)
msg = {"v": client.PROTOCOL, "op": "read", "conn": {"connection_id": "x", "host_pid": os.getppid()},
       "args": {"path": sys.argv[2]}}
ls.send(client.encode(msg))
print(ls.recv_line(client.MAX_RESPONSE).decode(), flush=True)
"""
    out = subprocess.run([sys.executable, "-c", code, str(data_dir), str(project / "a.txt")], env=env,
                         capture_output=True, text=True, timeout=30)
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer["ok"] is False and answer["code"] == "unverified", answer
    assert "could not verify" in answer["error"]
    with S.Caller(data_dir, project, env=env) as c:
        status = c.request("status")["result"]
        assert status["connections"]["callers_unverified"] >= 1


def test_identify_reads_the_kernel_facts_of_a_live_process(tmp_path: Path) -> None:
    """peer.identify on a real child: its own environment, working directory and host (the
    nearest non-shell ancestor: this test process, through `sh -c`)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = str(tmp_path / "s")
    listener.bind(path)
    listener.listen(1)
    env = dict(os.environ, CLAUDE_CODE_SESSION_ID="sess-real", LEANCTX_SCOPE="", SECRET_TOKEN="never-read")
    child = subprocess.Popen(["/bin/sh", "-c", f"exec {sys.executable} -c \"import socket,sys; s=socket.socket(socket.AF_UNIX);"
                              f" s.connect('{path}'); sys.stdin.read()\""], env=env, cwd=tmp_path, stdin=subprocess.PIPE)
    try:
        conn, _ = listener.accept()
        who = peer.peer_of(conn)
        assert who is not None and who.pid == child.pid
        ident = peer.identify(who)
        assert not isinstance(ident, str), ident
        assert ident.env == {"CLAUDE_CODE_SESSION_ID": "sess-real"}  # only the id names; empty values dropped
        assert ident.cwd == str(tmp_path)
        assert ident.host_pid == os.getpid()
        child.stdin.close()
        child.wait(10)
        assert isinstance(peer.identify(who), str)  # gone: never verified after the fact
        who.close()
        conn.close()
    finally:
        if child.poll() is None:
            child.kill()
        listener.close()


def test_identify_refuses_what_it_cannot_check() -> None:
    assert "platform" in peer.identify(None)
    gone = peer.Peer(2**22 + 12345, None, peer._now())  # above any pid_max: no such process
    assert "gone" in peer.identify(gone)
    born_later = peer.Peer(os.getpid(), None, 0.0)  # "accepted" at boot: this process started after it
    assert "pid reused" in peer.identify(born_later)


def test_the_mcp_server_serves_itself_when_the_daemon_cannot_verify_it(tmp_path: Path, home: Path) -> None:
    """A daemon that answers "unverified" (here a stand-in on a real socket: the kernel cannot be
    made to fail for a live process) turns the MCP backend in-process for good, with a full read."""
    import threading

    from leanctx.cache.mcpserver import Backend
    from leanctx.cache.scope import Connection

    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "a.txt").write_text("hello\n")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(client.socket_path(data))
    listener.listen(4)
    asked = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            ls = client.LineSocket(conn)
            while (line := ls.recv_line(client.MAX_REQUEST)):
                asked.append(client.decode(line)["op"])
                ls.send(client.encode({"ok": False, "code": "unverified", "error": "the daemon could not verify"}))
            ls.close()

    threading.Thread(target=serve, daemon=True).start()
    facts = Connection.capture("mcp-test").to_dict() | {"cwd": str(tmp_path)}
    backend = Backend(str(data), facts, autostart=False)
    try:
        first, second = (backend.read(str(tmp_path / "a.txt")) for _ in range(2))
        stats = backend.stats()
    finally:
        backend.close()
        listener.close()
    assert first["kind"] == "full" and first["text"] == "hello\n"
    assert second["kind"] == "full"  # no hook record names this process: an unknown caller, never a stub
    assert asked == ["read"]  # asked once, then in-process for good
    assert stats["served_by"].startswith("in-process") and stats["unverified"] is True  # why: the MCP log
    assert "could not verify" in (backend.unverified or "")
    assert backend.served == {"daemon": 0, "in_process": 2}


def test_doctor_says_whether_callers_can_be_verified(home: Path, monkeypatch) -> None:
    from leanctx import doctor
    from tests.conftest import run_cli

    res = run_cli("doctor", "--json")
    check = next(c for c in json.loads(res.stdout)["checks"] if c["name"] == "caller verification")
    assert check["status"] == "ok" and "kernel" in check["detail"]
    # a system that does not say who is at the other end of a socket (simulated): a warning that
    # says what still works, never a failure, and no fix line (nothing to do)
    monkeypatch.setattr(peer, "peer_of", lambda sock: None)
    check = doctor._caller_check()
    assert check["status"] == "warn" and "cannot verify callers" in check["detail"] and "in-process" in check["detail"]
    assert check["fix"] is None
