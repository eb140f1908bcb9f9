"""Fixtures for the conversation-state tests: a private CKS_HOME, and a real redis-server.

`store` runs a test against both backends. The Redis variants skip when redis-server (Debian
package) is missing, unless LEANCTX_REQUIRE_REDIS=1, which makes that a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from leanctx.state import backend as backend_mod
from leanctx.state import validate
from bench.support.localredis import LocalRedis, server_path
from leanctx.state.resp import Client

STATE_ENV = ("CKS_HOME", "CKS_ACTIVE_USER", "LEANCTX_STATE_URL", "LEANCTX_FAST_PATH", "LEANCTX_STATE_PREFIX",
             "LEANCTX_STATE_LOCK_TIMEOUT")


def _missing_redis(reason: str) -> None:
    if os.environ.get("LEANCTX_REQUIRE_REDIS") == "1":
        pytest.fail(f"LEANCTX_REQUIRE_REDIS=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_server() -> str:
    """The redis-server executable (skip, or fail under LEANCTX_REQUIRE_REDIS=1, when absent)."""
    exe = server_path()
    if exe is None:
        _missing_redis("redis-server is not installed (apt-get install redis-server)")
    return exe  # type: ignore[return-value]


@pytest.fixture(scope="session")
def redis_url(redis_server: str):
    """A redis-server of our own on a free 127.0.0.1 port, no persistence; stopped after the run."""
    server = LocalRedis(redis_server)
    url = server.start()
    yield url
    server.stop()


@pytest.fixture
def cks_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME and CKS_HOME; no state-related variables from the outside."""
    for name in STATE_ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CKS_HOME", str(home / ".cks"))
    monkeypatch.setattr(validate, "FAST", None)
    return home / ".cks"


def use_redis(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Client(url).call("FLUSHDB")
    monkeypatch.setenv("LEANCTX_STATE_URL", url)
    backend_mod._redis_backends.clear()


@pytest.fixture(params=["file", "redis"])
def store(request: pytest.FixtureRequest, cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> backend_mod.Backend:
    """The backend under test (file or Redis), selected through LEANCTX_STATE_URL like in production."""
    if request.param == "redis":
        use_redis(request.getfixturevalue("redis_url"), monkeypatch)
    b = backend_mod.get_backend()
    assert b.name == request.param
    return b


def raw_value(store: backend_mod.Backend, slug: str) -> bytes | None:
    """The stored bytes of a user's state, read behind the store's back."""
    if store.name == "file":
        path = Path(store.location(slug))
        return path.read_bytes() if path.exists() else None
    return store.client.call("GET", store.key(slug))  # type: ignore[attr-defined]


def put_raw(store: backend_mod.Backend, slug: str, data: bytes) -> None:
    """Plant bytes as a user's state, behind the store's back (damage, a foreign writer)."""
    if store.name == "file":
        path = Path(store.location(slug))
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
    else:
        store.client.call("SET", store.key(slug), data)  # type: ignore[attr-defined]
