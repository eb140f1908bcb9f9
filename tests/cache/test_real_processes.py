"""Host-process matching with real processes: a host process runs the real hook (under `sh -c`,
as Claude Code and Codex do) and spawns an "MCP server" that captures its Connection; the
resolver must put each MCP connection with its own host's conversation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from leanctx.cache import Connection, ReadCache, Resolver

from .conftest import code

HOST = textwrap.dedent(
    r"""
    import json, os, subprocess, sys
    data, agent, conv, cwd = sys.argv[1:5]
    env = dict(os.environ, LEANCTX_HOME=data)
    if agent == "claude":
        env["CLAUDE_CODE_SESSION_ID"] = conv
    hook = sys.executable + " -c 'from leanctx.hooks import run; run()' " + agent + " "
    transcript = "/t/" + conv + ".jsonl"
    if agent == "codex":  # Codex's rollout exists (the cache counts its compactions)
        transcript = os.path.join(os.path.dirname(cwd), "rollout-" + conv + ".jsonl")
        with open(transcript, "w") as f:
            f.write('{"type":"session_meta","payload":{}}' + chr(10))
    for event, extra in (("SessionStart", {"source": "startup"}), ("UserPromptSubmit", {"prompt": "go"})):
        payload = dict({"session_id": conv, "transcript_path": transcript, "cwd": cwd,
                        "hook_event_name": event}, **extra)
        subprocess.run(["/bin/sh", "-c", hook + event + " ; true"], input=json.dumps(payload).encode(),
                       env=env, check=True)
    out = subprocess.run([sys.executable, "-c",
                          "import json; from leanctx.cache import Connection; "
                          "print(json.dumps(Connection.capture('mcp-" + conv + "').to_dict()))"],
                         env=env, cwd=cwd, capture_output=True, check=True).stdout
    sys.stdout.write(out.decode())
    """
)


def _host(data: str, agent: str, conv: str, cwd: str) -> tuple[Connection, int]:
    p = subprocess.Popen([sys.executable, "-c", HOST, data, agent, conv, cwd], stdout=subprocess.PIPE,
                         env={k: v for k, v in os.environ.items() if k != "CLAUDE_CODE_SESSION_ID"})
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0
    return Connection.from_dict(json.loads(out)), p.pid


def test_concurrent_cli_sessions_match_their_own_host_process(tmp_path) -> None:
    data = str(tmp_path / "data")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.py").write_text(code(100))
    c1, pid1 = _host(data, "claude", "sess-one", str(proj))
    c2, pid2 = _host(data, "codex", "thread-two", str(proj))
    assert c1.host_pid == pid1 and c2.host_pid == pid2
    assert c1.host_start_ticks is not None and c1.env.get("CLAUDE_CODE_SESSION_ID") == "sess-one"
    assert c1.cwd == str(proj)
    recs = [json.loads(Path(data, "conversations", a, f"{i}.json").read_text()) for a, i in
            (("claude", "sess-one"), ("codex", "thread-two"))]
    assert [r["host"]["pid"] for r in recs] == [pid1, pid2]

    resolver, cache = Resolver(data), ReadCache(None)
    s1, s2 = resolver.resolve(c1, fresh=True), resolver.resolve(c2, fresh=True)
    assert s1.key.startswith("claude:sess-one@") and s1.stub_ok
    assert s2.key.startswith("codex:thread-two@") and s2.stub_ok
    assert cache.read(s1, "a.py")["kind"] == "full"
    assert cache.read(s2, "a.py")["kind"] == "full"
    # Claude Code's transcript and Codex's rollout decide (transcript.py, rollout.py): these hosts
    # wrote none, so no stub
    assert s1.verify and cache.read(s1, "a.py")["kind"] == "full"
    assert s2.verify and s2.log == "codex" and cache.read(s2, "a.py")["kind"] == "full"


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_a_host_process_counts_as_exited_only_when_proc_shows_it_gone() -> None:
    from leanctx.cache.readcache import _exited
    from leanctx.hooks.hostproc import process_stat

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        ticks = process_stat(child.pid)[2]
        assert not _exited(child.pid, ticks)  # it runs
        assert _exited(child.pid, ticks + 1)  # that pid, started at another time: another process
    finally:
        child.stdin.close()
    child.wait(30)  # reaped: its /proc entry is gone
    assert _exited(child.pid, ticks)
    assert not _exited(os.getpid(), process_stat(os.getpid())[2])
