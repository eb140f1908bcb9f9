"""Codex's shell reads through the real hook and daemon processes, with a rollout written the way
Codex 0.171.0 writes it (tests/e2e/recorded_payloads/codex/shell_reads.json holds real lines).

The test process is the host: it runs each hook under `sh -c` as Codex does, and writes the
rollout lines Codex would write around each call (the call before its PreToolUse, the output
after). The rollout is what the daemon asks whether the model still holds a delivery."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cache.test_service_support import start_daemon, stop_any_daemon, subprocess_env

HOOK = [sys.executable, "-c", "from leanctx.hooks import run; run()"]
FLAGS = {"PreToolUse": ("--read-gate", "--builtin-read"), "PostToolUse": ("--builtin-read",)}
HEAD = "Chunk ID: 1f260d\nWall time: 0.0000 seconds\n{state}\nOriginal token count: 10\nOutput:\n"


def run_hook(env: dict, event: str, payload: dict) -> str:
    cmd = " ".join([*(f"'{w}'" for w in HOOK), "codex", event, *FLAGS.get(event, ())])
    proc = subprocess.run(["/bin/sh", "-c", cmd], input=json.dumps(payload).encode(), env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


class CodexSession:
    def __init__(self, env: dict, proj: Path, sid: str = "01a227a3-45a0-7000-ac19-222dce0f51db") -> None:
        self.env, self.proj, self.n = env, proj, 0
        self.rollout = proj.parent / f"rollout-2026-12-01T00-00-00-{sid}.jsonl"
        self.base = {"session_id": sid, "transcript_path": str(self.rollout), "cwd": str(proj), "model": "gpt-5.5",
                     "permission_mode": "bypassPermissions"}
        self.line("session_meta", {"id": sid, "cwd": str(proj)})
        run_hook(env, "SessionStart", {**self.base, "hook_event_name": "SessionStart", "source": "startup"})
        run_hook(env, "UserPromptSubmit", {**self.base, "hook_event_name": "UserPromptSubmit", "turn_id": "t1", "prompt": "go"})

    def line(self, kind: str, payload: dict) -> None:
        with open(self.rollout, "a", encoding="utf-8") as f:
            f.write(json.dumps({"timestamp": "2026-12-01T00:00:00.000Z", "ordinal": 0, "type": kind, "payload": payload}) + "\n")

    def call(self, cid: str, name: str, args: dict) -> None:
        self.line("response_item", {"type": "function_call", "name": name, "arguments": json.dumps(args), "call_id": cid})

    def output(self, cid: str, text: str) -> None:
        self.line("response_item", {"type": "function_call_output", "call_id": cid, "output": text})

    def shell(self, command: str, yielded: bool = False) -> str:
        """One exec_command call; returns what the model got for it (`yielded`: the process was
        still running when the call returned, the output came under a write_stdin poll)."""
        self.n += 1
        cid = f"call_{self.n:04d}"
        self.call(cid, "exec_command", {"cmd": command})
        payload = {**self.base, "turn_id": "t1", "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": cid}
        out = run_hook(self.env, "PreToolUse", {**payload, "hook_event_name": "PreToolUse"})
        if out:
            answer = json.loads(out)["hookSpecificOutput"]
            assert answer["permissionDecision"] == "deny"
            got = f"Command blocked by PreToolUse hook: {answer['permissionDecisionReason']}. Command: {command}"
            self.output(cid, got)
            return answer["permissionDecisionReason"]
        ran = subprocess.run(["bash", "-c", command], cwd=self.proj, capture_output=True, text=True, timeout=30)
        text = ran.stdout + ran.stderr
        if yielded:
            self.output(cid, HEAD.format(state="Process running with session ID 41726"))
            self.call(cid + "_poll", "write_stdin", {"session_id": 41726})
            self.output(cid + "_poll", HEAD.format(state=f"Process exited with code {ran.returncode}") + text)
        else:
            self.output(cid, HEAD.format(state=f"Process exited with code {ran.returncode}") + text)
        assert run_hook(self.env, "PostToolUse", {**payload, "hook_event_name": "PostToolUse", "tool_response": text}) == ""
        return text


@pytest.fixture
def daemon_env(home: Path, data_dir: Path, tmp_path: Path):
    env = subprocess_env(home, data_dir)
    proc = start_daemon(env, tmp_path / "daemon.log")
    yield env
    proc.terminate()
    proc.wait(20)
    stop_any_daemon(data_dir)


def test_a_codex_shell_re_read_is_the_stub_and_a_yielded_call_is_never_credited(daemon_env: dict, tmp_path: Path,
                                                                                  data_dir: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "big.py").write_text("".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(150)))
    (proj / "slow.py").write_text("".join(f"s_{i} = {i}\n" for i in range(300)))
    s = CodexSession(daemon_env, proj)
    assert "def f149" in s.shell("cat big.py")
    stub = s.shell("cat big.py")
    assert stub.startswith("[unchanged] big.py 450 lines") and "run the same command again" in stub, stub
    assert "def f149" in s.shell("cat big.py"), "running the command again right after its stub gave no output"
    assert s.shell("sed -n '10,20p' big.py").startswith("[unchanged] big.py L10-20 of 450 lines")
    assert s.shell("bash -lc 'head -n 30 big.py'").startswith("[unchanged] big.py L1-30 of 450 lines")
    # the call returned before `cat` finished ("Process running …"); Codex's post-tool hook still
    # hands the whole output over under that call's id, but its own output in the context is empty
    assert s.shell("cat slow.py", yielded=True).startswith("s_0 = 0")
    assert s.shell("cat slow.py").startswith("s_0 = 0"), "a stub for output the call itself never carried"
    assert s.shell("cat slow.py").startswith("[unchanged] slow.py 300 lines"), "a plain run was not credited"
    log = data_dir / "logs" / "hooks.log"
    assert not log.exists() or "Error" not in log.read_text()
