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
    from leanctx.hooks.hostproc import process_stat

    kinds = {"SessionStart": SESSION_START, "UserPromptSubmit": PROMPT, "PreCompact": PRE_COMPACT,
             "SubagentStart": SUBAGENT_START, "SubagentStop": SUBAGENT_STOP}
    pid = host_pid or os.getpid()
    stat = process_stat(pid)
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
    from tests.cache.conftest import host_transcript

    host_transcript(str(cwd / f"{conversation_id}.jsonl"))
    return Path(path)


CALLER = r"""
import json, sys
from leanctx.cache import client
c = client.ServiceClient(sys.argv[1])
for line in sys.stdin:
    req = json.loads(line)
    try:
        out = {"ok": True, "result": c.request(req["op"], req.get("facts"), req.get("args"))}
    except client.RemoteError as exc:
        out = {"ok": False, "code": exc.code, "error": str(exc)}
    print(json.dumps(out), flush=True)
"""


HOST = r"""
import json, os, subprocess, sys
data, agent, conv, cwd = sys.argv[1:5]
env = dict(os.environ, LEANCTX_HOME=data)
env["CLAUDE_CODE_SESSION_ID" if agent == "claude" else "CODEX_THREAD_ID"] = conv
hook = sys.executable + " -c 'from leanctx.hooks import run; run()' " + agent + " "
for event, extra in (("SessionStart", {"source": "startup"}), ("UserPromptSubmit", {"prompt": "go"})):
    payload = dict({"session_id": conv, "transcript_path": cwd + "/" + conv + ".jsonl", "cwd": cwd,
                    "hook_event_name": event}, **extra)
    subprocess.run(["/bin/sh", "-c", hook + event], input=json.dumps(payload).encode(), env=env, check=True)
sys.exit(subprocess.call(sys.argv[6:], env=env, cwd=cwd))
"""


class Caller:
    """A real process talking to the daemon the way an MCP server does. The daemon takes who is
    asking from the kernel (cache/peer.py): this process's parent is the test process, so the
    daemon sees the test process as its host, as for an MCP server a host spawned. With
    `stranger=True` it runs under an extra (non-shell) process instead: a caller from another
    host, whatever facts it sends. With `host=(agent, conversation id)` it runs under a host
    process of its own that first fires the real hooks (SessionStart, UserPromptSubmit, under
    `sh -c` as the CLIs do) with the host's session variable set, as a Claude Code or Codex
    session would."""

    def __init__(self, data_dir: Path, cwd: Path, env: dict[str, str] | None = None, stranger: bool = False,
                 host: tuple[str, str] | None = None) -> None:
        cmd = [sys.executable, "-c", CALLER, str(data_dir)]
        if host:
            cmd = [sys.executable, "-c", HOST, str(data_dir), host[0], host[1], str(cwd), "--", *cmd]
            from tests.cache.conftest import host_transcript

            host_transcript(str(cwd) + "/" + host[1] + ".jsonl", host[0])  # the transcript its hooks name
        elif stranger:
            cmd = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))", *cmd]
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if host:
            self.request("hello")  # answered once the host's hooks have run and it spawned us

    def request(self, op: str, args: dict | None = None, facts: dict | None = None) -> dict:
        """The daemon's answer: {"ok": True, "result": ...} or {"ok": False, "code", "error"}."""
        import json

        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"op": op, "args": args, "facts": facts}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"caller process exited ({self.proc.poll()})"
        return json.loads(line)

    def read(self, path: Path | str, facts: dict | None = None, **args: object) -> dict:
        """A read's result (asserting the daemon answered it). Made as Claude Code makes it: under
        its own call id, written to the sessions' transcripts (tests/cache/conftest.py)."""
        if "call_id" not in args:
            import uuid

            from tests.cache.conftest import host_said

            args["call_id"] = f"toolu_{uuid.uuid4().hex[:16]}"
            host_said(str(args["call_id"]))
        answer = self.request("read", {"path": str(path), **args}, facts or {"connection_id": "caller"})
        assert answer["ok"], answer
        return answer["result"]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(10)

    def __enter__(self) -> Caller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_until(predicate, timeout: float = 10.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
