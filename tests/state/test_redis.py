"""What only the Redis store has: URLs, passwords, databases, a dead or restarted server, the client."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from leanctx.state import api
from leanctx.state import backend as backend_mod
from leanctx.state.cli import state
from leanctx.state.errors import StateError, StoreUnavailable
from bench.support.localredis import LocalRedis
from leanctx.state.resp import Address, Client, RespError

from .conftest import use_redis


@pytest.mark.parametrize(("url", "expected"), [
    ("redis://127.0.0.1:6380/3", ("redis", "127.0.0.1", 6380, "", 3, None, None)),
    ("redis://localhost", ("redis", "localhost", 6379, "", 0, None, None)),
    ("redis://:s%40cret@h:1/0", ("redis", "h", 1, "", 0, None, "s@cret")),
    ("redis://bot:pw@h", ("redis", "h", 6379, "", 0, "bot", "pw")),
    ("rediss://[::1]:6390/2", ("rediss", "::1", 6390, "", 2, None, None)),
    ("unix:///run/redis.sock?db=5", ("unix", "", 6379, "/run/redis.sock", 5, None, None)),
])
def test_urls(url: str, expected: tuple) -> None:
    a = Address(url)
    assert (a.scheme, a.host, a.port, a.path, a.db, a.username, a.password) == expected


def test_unsupported_urls_are_refused(cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEANCTX_STATE_URL", "postgres://u:secret@db/x")
    with pytest.raises(StateError, match=r"not supported") as info:
        api.show()
    assert "secret" not in str(info.value)


def test_a_dead_server_is_a_clear_error_and_exit_2(redis_server: str, cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = LocalRedis(redis_server)
    url = server.start()
    server.stop()  # nothing listens there any more
    monkeypatch.setenv("LEANCTX_STATE_URL", url.replace("redis://", "redis://:hunter2@"))
    backend_mod._redis_backends.clear()
    with pytest.raises(StoreUnavailable, match="cannot connect") as info:
        api.inbound("hello")
    assert "hunter2" not in str(info.value) and "***@" in str(info.value)
    r = CliRunner().invoke(state, ["pending", "--question", "q?"])
    assert r.exit_code == 2 and r.output.startswith("leanctx: Redis at redis://***@127.0.0.1:")


def test_password_and_database(redis_server: str, cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LocalRedis(redis_server, extra_args=("--requirepass", "p@ss word")) as url:
        good = url.replace("redis://", "redis://:p%40ss%20word@").replace("/0", "/7")
        monkeypatch.setenv("LEANCTX_STATE_URL", good)
        backend_mod._redis_backends.clear()
        api.inbound("hello", user="alice")
        assert Client(good).call("EXISTS", "cks:user:alice:conversation-state") == 1
        assert Client(good.replace("/7", "/0")).call("EXISTS", "cks:user:alice:conversation-state") == 0
        monkeypatch.setenv("LEANCTX_STATE_URL", url.replace("redis://", "redis://:wrong@"))
        backend_mod._redis_backends.clear()
        with pytest.raises(StoreUnavailable, match="set-up refused"):
            api.show(user="alice")


def test_a_dropped_connection_is_redialled(redis_url: str, cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_redis(redis_url, monkeypatch)
    api.inbound("one", user="alice")
    Client(redis_url).call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")  # e.g. an idle timeout
    assert api.reply("two", user="alice")["revision"] == 2
    Client(redis_url).call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
    assert api.show(user="alice")["turn_count"] == 2


def test_key_prefix_and_layout(redis_url: str, cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_redis(redis_url, monkeypatch)
    monkeypatch.setenv("LEANCTX_STATE_PREFIX", "bot1")
    backend_mod._redis_backends.clear()
    api.inbound("hi", user="alice")
    api.end_thread(user="alice")
    c = Client(redis_url)
    assert sorted(c.call("KEYS", "*")) == [b"bot1:user:alice:conversation-state", b"bot1:user:alice:history"]
    assert c.call("TYPE", "bot1:user:alice:history") == "list"
    assert not cks_home.exists()  # nothing on disk with Redis


def test_the_client_speaks_resp(redis_url: str) -> None:
    c = Client(redis_url)
    c.call("FLUSHDB")
    assert c.call("PING") == "PONG"
    assert c.call("SET", "k", b"\x00\r\nbinary") == "OK" and c.call("GET", "k") == b"\x00\r\nbinary"
    assert c.call("GET", "missing") is None
    assert c.pipeline([("DEL", "l"), ("RPUSH", "l", "a", "b"), ("LRANGE", "l", 0, -1)]) == [0, 2, [b"a", b"b"]]
    assert isinstance(c.call("INCR", "l"), RespError)
    big = b"x" * 300_000
    c.call("SET", "big", big)
    assert c.call("GET", "big") == big
