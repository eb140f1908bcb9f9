"""Shared harness for the service and MCP tests (no tests here): environments for real
subprocesses, a real daemon process, real hook records.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path



def subprocess_env(home: Path, data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment for a real `leanctx` subprocess (daemon, MCP server)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX", "CURSOR", "LEANCTX_"))}
    env.update(HOME=str(home), LEANCTX_HOME=str(data_dir), CKS_HOME=str(home / ".cks"), PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def leanctx_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "leanctx.cache.cli", *args]


def start_daemon(env: dict[str, str], log: Path) -> subprocess.Popen:
    """`serve` in the foreground as a child of the test, ready when it accepts connections."""
    from leanctx.cache import client

    out = open(log, "ab")
    proc = subprocess.Popen(leanctx_cmd("serve"), env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    out.close()
    if not client.wait_for_socket(env["LEANCTX_HOME"], 20.0):
        proc.kill()
        raise AssertionError(f"daemon did not come up: {log.read_text()}")
    return proc


def stop_any_daemon(data_dir: Path) -> None:
    """Tear-down: whatever daemon serves this data dir (ours or one an MCP server started) goes."""
    from leanctx.cache import client

    proc = client.daemon_process(data_dir)
    if proc is None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
    except Exception:
        try:
            proc.kill()
        except Exception:
            pass


def publish_conversation(data_dir: Path, conversation_id: str, cwd: Path, host_pid: int | None = None,
                         event: str = "SessionStart", **fields: object) -> Path:
    """A real hook record (leanctx.hooks.publish) naming `host_pid` (default: this test process)
    as the host: the MCP servers the test spawns are its children, as under a real host."""
    from leanctx.agents.base import PRE_COMPACT, PROMPT, SESSION_START, SUBAGENT_START, SUBAGENT_STOP, HookEvent
    from leanctx.hooks import publish
    from leanctx.hooks.hostproc import _stat

    kinds = {"SessionStart": SESSION_START, "UserPromptSubmit": PROMPT, "PreCompact": PRE_COMPACT,
             "SubagentStart": SUBAGENT_START, "SubagentStop": SUBAGENT_STOP}
    pid = host_pid or os.getpid()
    stat = _stat(pid)
    host = {"pid": pid, "name": stat[0] if stat else None, "start_ticks": stat[2] if stat else None}
    fields.setdefault("source", "startup" if event == "SessionStart" else None)
    ev = HookEvent("claude", event, kinds[event], conversation_id=conversation_id, session_id=conversation_id,
                   cwd=str(cwd), transcript_path=str(cwd / f"{conversation_id}.jsonl"), **fields)
    original = publish.host_process
    publish.host_process = lambda: host
    try:
        path = publish.publish(str(data_dir), ev)
    finally:
        publish.host_process = original
    assert path
    return Path(path)


def wait_until(predicate, timeout: float = 10.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
