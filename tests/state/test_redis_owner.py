"""A Redis on a loopback port or a unix socket that another local account runs is refused before
anything (AUTH included) is sent to it: the store, the CLI (exit 2, one line), doctor (fails the
check with the refusal as the fix) and the hooks (fail open). LEANCTX_REDIS_OWNER accepts it.
A real redis-server started as a second uid (setpriv), its own byte counters as the witness."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.support.localredis import LocalRedis
from leanctx.state import api
from leanctx.state import backend as backend_mod
from leanctx.state.cli import state
from leanctx.state.errors import StoreNotOurs
from tests.conftest import PAYLOADS
from tests.second_account import OTHER, can_switch_uid, needs_second_uid

_PROBE = b"*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n"


def _stats(server: LocalRedis) -> dict[str, int]:
    """The server's own counters, read over a raw socket (not the client under test)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(_PROBE)
        head = b""
        while b"\r\n" not in head:
            head += s.recv(65536)
        size = int(head[1:head.index(b"\r\n")])
        body = head[head.index(b"\r\n") + 2:]
        while len(body) < size:
            body += s.recv(65536)
    pairs = (line.split(":", 1) for line in body.decode().splitlines() if ":" in line)
    return {k: int(v) for k, v in pairs if v.isdigit()}


@pytest.fixture
def theirs(redis_server: str):
    """A redis-server that uid OTHER runs, on a free 127.0.0.1 port and a unix socket."""
    if not can_switch_uid():
        pytest.fail("LEANCTX_REQUIRE_E2E=1 but a second local account needs root and setpriv")
    server = LocalRedis(redis_server, as_uid=OTHER)
    server.start()
    yield server
    server.stop()


def _url(server: LocalRedis, kind: str) -> str:
    # a password in the URL: AUTH must not reach the other account either
    if kind == "tcp":
        return f"redis://:hunter2@127.0.0.1:{server.port}/0"
    return f"unix://:hunter2@{server.socket_path}"


def _use(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEANCTX_STATE_URL", url)
    backend_mod._redis_backends.clear()


@needs_second_uid
@pytest.mark.parametrize("kind", ["tcp", "unix"])
def test_a_redis_another_account_runs_gets_nothing_not_even_auth(theirs: LocalRedis, kind: str, cks_home: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    before = _stats(theirs)
    _use(_url(theirs, kind), monkeypatch)
    with pytest.raises(StoreNotOurs) as info:
        api.inbound("my private chat text")
    line = str(info.value)
    assert f"run by uid {OTHER}" in line and f"LEANCTX_REDIS_OWNER={OTHER}" in line and "nothing was sent" in line
    assert "hunter2" not in line and "\n" not in line
    where = f"127.0.0.1:{theirs.port}" if kind == "tcp" else f"unix://{theirs.socket_path}"
    assert where in line
    r = CliRunner().invoke(state, ["summary", "my private summary"])
    assert r.exit_code == 2 and r.output.startswith("leanctx: Redis at ")  # the store-unavailable exit
    assert f"run by uid {OTHER}" in r.output.splitlines()[0]
    after = _stats(theirs)
    # both of our connections reached it, and not one byte beyond this probe's own command
    assert after["total_connections_received"] == before["total_connections_received"] + 3
    assert after["total_net_input_bytes"] == before["total_net_input_bytes"] + len(_PROBE)


@needs_second_uid
@pytest.mark.parametrize("kind", ["tcp", "unix"])
def test_LEANCTX_REDIS_OWNER_accepts_the_account_that_runs_it(theirs: LocalRedis, kind: str, cks_home: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    url = _url(theirs, kind).replace(":hunter2@", "")
    _use(url, monkeypatch)
    with pytest.raises(StoreNotOurs):
        api.show(user="alice")
    monkeypatch.setenv("LEANCTX_REDIS_OWNER", "no-such-user-here")
    _use(url, monkeypatch)
    with pytest.raises(StoreNotOurs, match=r"LEANCTX_REDIS_OWNER: no user named 'no-such-user-here'"):
        api.show(user="alice")
    monkeypatch.setenv("LEANCTX_REDIS_OWNER", f"root, {OTHER}")
    _use(url, monkeypatch)
    api.inbound("hello", user="alice")
    assert api.show(user="alice")["turn_count"] == 1
    assert _stats(theirs)["total_net_input_bytes"] > 0


@needs_second_uid
def test_doctor_fails_the_conversation_state_check_with_the_refusal_as_the_fix(theirs: LocalRedis, cks_home: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from leanctx.doctor import FAIL, state_checks

    _use(_url(theirs, "tcp"), monkeypatch)
    [check] = state_checks(cks_home.parent)
    assert check["name"] == "conversation state" and check["status"] == FAIL
    assert f"run by uid {OTHER}" in check["fix"] and f"LEANCTX_REDIS_OWNER={OTHER}" in check["fix"]


@needs_second_uid
def test_the_bot_hook_fails_open_and_sends_nothing(theirs: LocalRedis, cks_home: Path, tmp_path: Path) -> None:
    before = _stats(theirs)
    env = {**os.environ, "LEANCTX_STATE_URL": _url(theirs, "tcp"), "CKS_ACTIVE_USER": "alice",
           "LEANCTX_HOME": str(tmp_path / "data")}
    body = (PAYLOADS / "claude" / "UserPromptSubmit.json").read_bytes()
    proc = subprocess.run([sys.executable, "-I", "-c", "import sys; from leanctx.hooks import main; sys.exit(main(sys.argv[1:]))",
                           "claude", "UserPromptSubmit", "--bot"], input=body, capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() in (b"", b"{}"), proc
    after = _stats(theirs)
    assert after["total_connections_received"] == before["total_connections_received"] + 2
    assert after["total_net_input_bytes"] == before["total_net_input_bytes"] + len(_PROBE)
    assert json.loads(body)  # the payload was a real prompt
