"""Copilot CLI's `view` and `bash` under the built-in gate, through the real hook command and a
real daemon. The test process is the host: it writes Copilot's session log as 1.0.102 does
(tests/fixtures/payloads/copilot/builtin/events.jsonl: the response's call, then the preToolUse
hook.start line naming the calls, the postToolUse hook.start line, then the call's completion) and
runs the hooks under `sh -c` with its payloads, which name no call."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from leanctx.agents.copilotlog import iso_ms
from tests.cache.test_service_support import start_daemon, stop_any_daemon, subprocess_env

HOOK = [sys.executable, "-c", "from leanctx.hooks import run; run()"]
SESSION = "5d1c0de1-0000-4000-8000-000000000001"


def run_hook(env: dict, event: str, payload: dict, *flags: str) -> str:
    cmd = " ".join([*(f"'{w}'" for w in HOOK), "copilot", event, *flags])
    proc = subprocess.run(["/bin/sh", "-c", cmd], input=json.dumps(payload).encode(), env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


class Session:
    """A Copilot session as its hooks and session log show it."""

    def __init__(self, env: dict, proj: Path, config: Path, session: str = SESSION) -> None:
        self.env, self.proj, self.session, self.n = env, proj, session, 0
        self.log = config / "session-state" / session / "events.jsonl"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.stamp = int(time.time() * 1000)
        run_hook(env, "sessionStart", self.base(source="new", initialPrompt="go"))
        run_hook(env, "userPromptSubmitted", self.base(prompt="go"))

    def base(self, **more) -> dict:
        self.stamp += 7
        return {"sessionId": self.session, "timestamp": self.stamp, "cwd": str(self.proj), **more}

    def line(self, kind: str, data: dict, stamp: int | None = None, **more) -> None:
        entry = {"type": kind, "data": data, "id": f"e{self.n}", "timestamp": iso_ms(stamp or self.stamp), **more}
        with open(self.log, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def call(self, tool: str, args: dict, output, *, pre_line: bool = True, agent: str | None = None) -> str:
        """One tool call; `output(args)` is what the tool gives when it runs. Returns what the model got."""
        self.n += 1
        call = f"call_{self.n:04d}"
        extra = {"agentId": agent} if agent else {}
        self.line("assistant.message", {"content": "", "toolRequests": [{"toolCallId": call, "name": tool, "arguments": args}]}, **extra)
        self.line("tool.execution_start", {"toolCallId": call, "toolName": tool, "arguments": args}, **extra)
        pre = self.base(toolName=tool, toolArgs=args, **extra)
        if agent:
            pre["sessionId"] = agent
        if pre_line:
            self.line("hook.start", {"hookInvocationId": f"h{self.n}", "hookType": "preToolUse",
                                     "input": {"sessionId": pre["sessionId"], "cwd": str(self.proj),
                                               "toolCalls": [{"id": call, "name": tool, "args": args}]}}, pre["timestamp"], **extra)
        out = run_hook(self.env, "preToolUse", pre, "--builtin-read")
        self.last = out
        if out:
            answer = json.loads(out)
            assert answer["permissionDecision"] == "deny"
            got = "Denied by preToolUse hook: " + answer["permissionDecisionReason"]
            self.line("tool.execution_complete", {"toolCallId": call, "success": False, "error": {"message": got}}, **extra)
            return got
        got = output(args)
        post = self.base(toolName=tool, toolArgs=args, toolResult={"resultType": "success", "textResultForLlm": got}, **extra)
        if agent:
            post["sessionId"] = agent
        self.line("hook.start", {"hookInvocationId": f"p{self.n}", "hookType": "postToolUse", "input": post}, **extra)
        assert run_hook(self.env, "postToolUse", post, "--builtin-read") == ""
        self.line("tool.execution_complete", {"toolCallId": call, "success": True, "result": {"content": got}}, **extra)
        return got


@pytest.fixture
def copilot(home: Path, data_dir: Path, tmp_path: Path):
    config = home / ".copilot"
    env = subprocess_env(home, data_dir, COPILOT_HOME=str(config))
    proc = start_daemon(env, tmp_path / "daemon.log")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "big.py").write_text("".join(f"def f{i}(x):\n    return x * {i}\n" for i in range(150)))
    yield env, proj, config
    proc.terminate()
    proc.wait(20)
    stop_any_daemon(data_dir)


def view(args: dict) -> str:
    text = Path(args["path"]).read_text()
    span = args.get("view_range")
    if not span:
        return text
    lines = text.split("\n")
    return "\n".join(lines[span[0] - 1:None if span[1] == -1 else span[1]])


def sh(proj: Path):
    def run(args: dict) -> str:
        ran = subprocess.run(["bash", "-c", args["command"]], cwd=proj, capture_output=True, text=True, timeout=30)
        return (ran.stdout + ran.stderr).strip() + f"\n<shellId: 0 completed with exit code {ran.returncode}>"
    return run


def test_view_and_bash_re_reads_are_refused_and_asking_again_gives_the_content(copilot, data_dir: Path) -> None:
    env, proj, config = copilot
    s = Session(env, proj, config)
    path = str(proj / "big.py")
    assert "def f149" in s.call("view", {"path": path}, view)
    stub = s.call("view", {"path": path}, view)
    assert stub.startswith("Denied by preToolUse hook: [unchanged] big.py 300 lines") and "read it again right away" in stub
    assert "def f149" in s.call("view", {"path": path}, view), "asking again right after the stub did not give the content"
    assert s.call("view", {"path": path, "view_range": [20, 40]}, view).startswith("Denied by preToolUse hook: [unchanged] big.py L20-40")
    cat = {"command": "cat big.py", "description": "read"}
    assert s.call("bash", cat, sh(proj)).startswith("Denied by preToolUse hook: [unchanged] big.py 300 lines")
    assert "def f149" in s.call("bash", cat, sh(proj))
    record = json.loads(next((data_dir / "conversations").glob("*/*.json")).read_text())
    assert len(record["read_calls"]) == 6, record["read_calls"]
    log = data_dir / "logs" / "hooks.log"
    assert not log.exists() or "Error" not in log.read_text()


def test_a_call_copilot_has_not_logged_is_neither_refused_nor_credited(copilot, data_dir: Path) -> None:
    """Without its own preToolUse line in the log (never written: the hook gives up after its
    wait) the call is nobody's: it runs, and what it delivered is not credited."""
    env, proj, config = copilot
    s = Session(env, proj, config)
    path = str(proj / "big.py")
    assert "def f149" in s.call("view", {"path": path}, view, pre_line=False)
    assert "def f149" in s.call("view", {"path": path}, view), "a stub for bytes no named call delivered"
    assert s.call("view", {"path": path}, view).startswith("Denied by preToolUse hook: [unchanged]")


def test_a_subagent_is_never_answered_from_its_parents_holdings(copilot) -> None:
    """A subagent's payloads name its own session, not the log its calls are in: its reads run and
    are credited to nobody (its parent keeps its own stubs)."""
    env, proj, config = copilot
    s = Session(env, proj, config)
    path = str(proj / "big.py")
    assert "def f149" in s.call("view", {"path": path}, view)
    assert "def f149" in s.call("view", {"path": path}, view, agent="sub-7")
    assert "def f149" in s.call("view", {"path": path}, view, agent="sub-7")
    assert s.call("view", {"path": path}, view).startswith("Denied by preToolUse hook: [unchanged]")


def twin_views(s: Session, args: dict) -> list[str]:
    """Two identical `view` calls in one response, as Copilot logs them (one preToolUse hook.start
    line naming both): both run, and the log cannot tell their ids apart."""
    ids = [f"call_twin{s.n}a", f"call_twin{s.n}b"]
    s.n += 1
    s.line("assistant.message", {"content": "", "toolRequests": [{"toolCallId": i, "name": "view", "arguments": args} for i in ids]})
    for i in ids:
        s.line("tool.execution_start", {"toolCallId": i, "toolName": "view", "arguments": args})
    pre = s.base(toolName="view", toolArgs=args)
    s.line("hook.start", {"hookInvocationId": f"h{s.n}", "hookType": "preToolUse", "input": {
        "sessionId": s.session, "cwd": str(s.proj), "toolCalls": [{"id": i, "name": "view", "args": args} for i in ids]}}, pre["timestamp"])
    assert run_hook(s.env, "preToolUse", pre, "--builtin-read") == ""
    assert run_hook(s.env, "preToolUse", pre, "--builtin-read") == ""
    got = []
    for i in ids:
        text = view(args)
        post = s.base(toolName="view", toolArgs=args, toolResult={"resultType": "success", "textResultForLlm": text})
        s.line("hook.start", {"hookInvocationId": f"p{i}", "hookType": "postToolUse", "input": post})
        assert run_hook(s.env, "postToolUse", post, "--builtin-read") == ""
        s.line("tool.execution_complete", {"toolCallId": i, "success": True, "result": {"content": text}})
        got.append(text)
    return got


def test_content_delivered_to_calls_the_log_cannot_name_leaves_no_older_copy_to_diff_against(copilot) -> None:
    """Found by the replay (bench/traces/copilot-builtin-log-ids.jsonl): the model read big.py,
    another program changed it, then two identical views in one response gave the model the new
    text. Neither call can be named, so neither is credited; but the model's latest copy is now
    the new text, and the next view must not be a diff (or a stub) against the copy it read before."""
    env, proj, config = copilot
    s = Session(env, proj, config)
    path = str(proj / "big.py")
    assert "def f149" in s.call("view", {"path": path}, view)
    (proj / "big.py").write_text((proj / "big.py").read_text().replace("return x * 7\n", "return x * 70\n"))
    assert all("x * 70" in got for got in twin_views(s, {"path": path}))
    again = s.call("view", {"path": path}, view)
    assert not again.startswith("Denied by preToolUse hook"), again
