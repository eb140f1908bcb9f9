"""A small world for cache tests: a project on disk, a data dir with real hook records (written
by leanctx.hooks.publish's own apply_event), host processes with pid + start ticks, a virtual
clock shared by the records, the resolver and the cache."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import signal
from pathlib import Path

import pytest

from leanctx.cache import Connection, ReadCache, Resolver
from bench.support.oracle import FakeHost, hook

T0 = 1_800_000_000.0


class World:
    def __init__(self, tmp: Path, **cache_kw: object) -> None:
        self.tmp = tmp
        self.root = tmp / "proj"
        self.root.mkdir(parents=True, exist_ok=True)
        self.data = tmp / "data"
        self.state = tmp / "state"
        self.t = T0
        self._mtime = int(T0 * 1e9)
        self._pid = 40000
        self.cache_kw = dict(cache_kw)
        self.gone: set[tuple[int, int]] = set()  # (pid, ticks) of the host processes that exited
        self.cache_kw.setdefault("exited", lambda pid, ticks: (pid, ticks) in self.gone)
        self.resolver = Resolver(str(self.data), clock=self.clock)
        self.cache = ReadCache(str(self.state), clock=self.clock, **self.cache_kw)

    def exit(self, host: FakeHost) -> None:
        """The host process ends (its hook records stay as they are)."""
        self.gone.add((host.pid, host.ticks))

    def clock(self) -> float:
        return self.t

    def tick(self, seconds: float) -> None:
        self.t += seconds

    # files ------------------------------------------------------------------------------------
    def path(self, rel: str) -> Path:
        return self.root / rel

    def write(self, rel: str, text: str | bytes, mtime_ns: int | None = None) -> Path:
        p = self.path(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, str):
            p.write_text(text, encoding="utf-8")
        else:
            p.write_bytes(text)
        if mtime_ns is None:
            self._mtime += 1_000_003
            mtime_ns = self._mtime
        os.utime(p, ns=(mtime_ns, mtime_ns))
        return p

    def mtime_ns(self, rel: str) -> int:
        return self.path(rel).stat().st_mtime_ns

    # hosts --------------------------------------------------------------------------------------
    def host(self, agent: str = "claude", pid: int | None = None, ticks: int = 777) -> FakeHost:
        if pid is None:
            self._pid += 1
            pid = self._pid
        return FakeHost(pid, ticks, agent)

    def hook(self, host: FakeHost, meaning: str, conv: str, cwd: str | None = None, **extra: object) -> str | None:
        if host.agent == "claude":
            extra.setdefault("transcript_path", str(self.tmp / "transcripts" / f"{conv}.jsonl"))
        elif host.agent == "codex":
            extra.setdefault("transcript_path", self.rollout_of(conv))
        return hook(str(self.data), host, meaning, conv, cwd or str(self.root), self.t, **extra)

    def session(self, host: FakeHost, conv: str, **extra: object) -> None:
        """A session that has started and is inside a turn."""
        extra.setdefault("source", "startup")
        self.hook(host, "start", conv, **extra)
        self.hook(host, "prompt", conv, prompt="go")

    def conn(self, host: FakeHost | None, cid: str | None = None, env: dict | None = None, cwd: str | None = None) -> Connection:
        return Connection(
            connection_id=cid or f"conn-{host.pid if host else 'none'}",
            env=dict(env or {}),
            host_pid=host.pid if host else None,
            host_start_ticks=host.ticks if host else None,
            cwd=cwd if cwd is not None else str(self.root),
        )

    def scope(self, conn: Connection):
        return self.resolver.resolve(conn, fresh=True)

    def rollout_of(self, thread: str) -> str:
        """Where Codex writes a thread's rollout (a subagent's beside its parent's)."""
        return str(self.tmp / "sessions" / f"rollout-2026-12-01T00-00-00-{thread}.jsonl")

    def rollout_line(self, path: str, kind: str, payload: dict) -> None:
        """Append one line to a Codex rollout."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path) and not os.path.isfile(path):
            return
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"timestamp": "t", "type": kind, "payload": payload}) + "\n")

    def read(self, conn: Connection, path: str, start: int | None = None, end: int | None = None, fresh: bool = False) -> dict:
        """One ctx_read call. For Claude Code the host sends the call's id and writes the call and
        its result to the session transcript, as the real CLI does; Codex writes them to its rollout."""
        scope = self.scope(conn)
        if not (scope.verify and scope.transcript):
            return self.cache.read(scope, path, start, end, fresh)
        self._calls = getattr(self, "_calls", 0) + 1
        if scope.log == "codex":
            call = f"call_world{self._calls:06d}"
            self.rollout_line(scope.transcript, "response_item", {"type": "function_call", "name": "ctx_read",
                                                                   "namespace": "mcp__leanctx", "call_id": call})
            res = self.cache.read(dataclasses.replace(scope, call_id=call), path, start, end, fresh)
            self.rollout_line(scope.transcript, "response_item", {"type": "function_call_output", "call_id": call,
                                                                   "output": [{"type": "input_text", "text": "..."}]})
            return res
        call = f"toolu_world{self._calls:06d}"
        self.transcript_entry(scope.transcript, {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": call, "name": "mcp__leanctx__ctx_read", "input": {"path": path}}]}})
        res = self.cache.read(dataclasses.replace(scope, call_id=call), path, start, end, fresh)
        self.transcript_entry(scope.transcript, {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": call, "content": "..."}]}})
        return res

    def transcript_entry(self, path: str, body: dict, parent: object = "tip") -> str:
        """Append one entry to a Claude Code transcript, chained to the last one written."""
        tips = self.__dict__.setdefault("_tips", {})
        sizes = self.__dict__.setdefault("_sizes", {})
        if os.path.isfile(path) and (path not in tips or sizes.get(path) != os.path.getsize(path)):
            # written (or appended to) by the test itself: go on from its last entry
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        uid = json.loads(line).get("uuid")
                    except (ValueError, AttributeError):
                        continue
                    if isinstance(uid, str):
                        tips[path] = uid
        self._entries = getattr(self, "_entries", 0) + 1
        uid = f"e{self._entries:06d}"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path) and not os.path.isfile(path):
            return uid  # a test's fifo or dangling link stands there: the host could not write it either
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"parentUuid": tips.get(path) if parent == "tip" else parent, "uuid": uid, **body}) + "\n")
        tips[path] = uid
        sizes[path] = os.path.getsize(path)
        return uid

    def restart(self, graceful: bool = True) -> None:
        if graceful:
            self.cache.save()
        self.resolver = Resolver(str(self.data), clock=self.clock)
        self.cache = ReadCache(str(self.state), clock=self.clock, **self.cache_kw)


# The transcripts of the Claude Code sessions a real-process test plays (the test process is their
# host): every ctx_read it makes is written to them as Claude Code writes each call, its tool_use
# and its tool_result, so the daemon's transcript check finds the deliveries (transcript.py).
HOST_TRANSCRIPTS: dict[str, str | None] = {}
HOST_ROLLOUTS: set[str] = set()  # the same for Codex sessions: their rollouts (rollout.py)


def host_transcript(path: str, agent: str = "claude") -> None:
    if agent == "codex":
        HOST_ROLLOUTS.add(str(path))
    else:
        HOST_TRANSCRIPTS.setdefault(str(path), None)


def host_said(call_id: str, only: str | None = None) -> None:
    if only is not None:
        os.makedirs(os.path.dirname(only), exist_ok=True)
        host_transcript(only)
    for path, tip in list(HOST_TRANSCRIPTS.items()):
        if only is not None and path != only:
            continue
        if not os.path.isdir(os.path.dirname(path)) or (os.path.lexists(path) and not os.path.isfile(path)):
            continue
        with open(path, "a", encoding="utf-8") as f:
            for kind, part in (("assistant", {"type": "tool_use", "id": call_id, "name": "mcp__leanctx__ctx_read"}),
                               ("user", {"type": "tool_result", "tool_use_id": call_id, "content": "..."})):
                uid = f"{call_id}-{kind}"
                f.write(json.dumps({"parentUuid": tip, "uuid": uid, "type": kind, "message": {"content": [part]}}) + "\n")
                tip = uid
        HOST_TRANSCRIPTS[path] = tip
    for path in HOST_ROLLOUTS if only is None else ():
        if os.path.isdir(os.path.dirname(path)) and not (os.path.lexists(path) and not os.path.isfile(path)):
            with open(path, "a", encoding="utf-8") as f:
                for kind in ("function_call", "function_call_output"):
                    f.write(json.dumps({"type": "response_item", "payload": {"type": kind, "call_id": call_id,
                                                                             "output": "..."}}) + "\n")


@pytest.fixture(autouse=True)
def _host_transcripts():
    HOST_TRANSCRIPTS.clear()
    HOST_ROLLOUTS.clear()
    yield
    HOST_TRANSCRIPTS.clear()
    HOST_ROLLOUTS.clear()


def code(n: int, tag: str = "x") -> str:
    return "".join(f"def {tag}_{i}(a, b):  # line {i}\n    return a + b * {i}\n" for i in range(1, n // 2 + 1))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    for name in ("LEANCTX_DEDUP", "LEANCTX_SCOPE", "LEANCTX_CONVERSATION_SCOPE", "CURSOR_TASK_ID", "CLAUDE_CODE_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)
    return World(tmp_path)


# -- a real daemon for the service and MCP tests ----------------------------------------------

_spec = importlib.util.spec_from_file_location("leanctx_test_service_support", Path(__file__).with_name("test_service_support.py"))
_support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_support)


@pytest.fixture
def env(home: Path, data_dir: Path):
    """The environment for real `leanctx` subprocesses; whatever daemon serves the data dir at the
    end (one the test started, or one an MCP server started) is stopped."""
    e = _support.subprocess_env(home, data_dir)
    yield e
    _support.stop_any_daemon(data_dir)


@pytest.fixture
def daemon(env: dict, tmp_path: Path):
    """`leanctx serve` in the foreground, as a child of the test."""
    proc = _support.start_daemon(env, tmp_path / "daemon.log")
    yield proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
