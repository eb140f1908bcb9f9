"""Gemini CLI and Qwen Code payloads through the real wrapper: what each event means and answers.

Payloads are the ones recorded from Gemini CLI 0.61.0 and Qwen Code 0.15.10
(tests/fixtures/payloads/{gemini,qwen}); the host facts are in leanctx/agents/gemini.py and qwen.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.base import NOTICE, PRE_COMPACT, PROMPT, STOP
from leanctx.hooks.publish import read_json, record_path
from leanctx.installer import wrapper
from tests.conftest import payload
from tests.hooks.test_hook_entry import hook_wrapper, run_hook  # noqa: F401 - the fixture

GEMINI_SID = payload("gemini", "SessionStart")["session_id"]
QWEN_SID = payload("qwen", "Notification")["session_id"]


def test_gemini_normalizes_its_recorded_events() -> None:
    gemini = agents.get("gemini")
    for event in ("SessionStart", "BeforeAgent", "PreCompress", "AfterAgent", "SessionEnd", "BeforeTool"):
        body = payload("gemini", event)
        ev = gemini.normalize(event, body)
        assert (ev.session_id, ev.conversation_id, ev.transcript_path, ev.cwd) == (
            GEMINI_SID, GEMINI_SID, body["transcript_path"], body["cwd"])
    assert gemini.normalize("BeforeAgent", payload("gemini", "BeforeAgent")).kind == PROMPT
    after = gemini.normalize("AfterAgent", payload("gemini", "AfterAgent"))
    assert after.kind == STOP and after.reply == "The file says hello world."  # `prompt_response`, not Claude's field
    assert gemini.normalize("PreCompress", payload("gemini", "PreCompress")).kind == NOTICE  # trigger auto
    assert gemini.normalize("PreCompress", dict(payload("gemini", "PreCompress"), trigger="manual")).kind == PRE_COMPACT
    tool = gemini.normalize("BeforeTool", payload("gemini", "BeforeTool.2"))
    assert tool.tool_name == "mcp_logsrv_ping" and tool.tool_input == {"x": "hi"}
    assert gemini.is_read_tool("mcp_leanctx_ctx_read") and gemini.is_read_tool("mcp_mine_ctx_read")
    assert not gemini.is_read_tool("read_file") and not gemini.is_read_tool("mcp_leanctx_ctx_stats")


def test_qwen_normalizes_its_recorded_events() -> None:
    qwen = agents.get("qwen")
    for name in ("Notification", "UserPromptSubmit", "UserPromptSubmit.2", "PreToolUse.3", "Stop"):
        event = name.split(".")[0]
        ev = qwen.normalize(event, payload("qwen", name))
        assert ev.conversation_id == QWEN_SID and ev.transcript_path.endswith(f"/{QWEN_SID}.jsonl")
    assert qwen.normalize("Notification", payload("qwen", "Notification")).kind == NOTICE
    assert qwen.normalize("UserPromptSubmit", payload("qwen", "UserPromptSubmit")).prompt == "read a.txt"
    assert qwen.normalize("UserPromptSubmit", payload("qwen", "UserPromptSubmit.2")).prompt is None  # a continuation
    assert qwen.normalize("Stop", payload("qwen", "Stop")).reply == "The file says hello world."
    assert qwen.is_read_tool("mcp__leanctx__ctx_read")


def test_gemini_routine_precompress_is_no_compaction(hook_wrapper: Path, data_dir: Path) -> None:  # noqa: F811
    """Gemini fires PreCompress(auto) before every model request without compressing: counting it
    would withhold every stub of the session. `/compress` (trigger manual) always compresses."""
    for name in ("SessionStart", "BeforeAgent", "PreCompress", "PreCompress.2", "PreCompress.3"):
        assert run_hook(hook_wrapper, "gemini", name.split(".")[0], json.dumps(payload("gemini", name)).encode()).returncode == 0
    record = read_json(record_path(data_dir, "gemini", GEMINI_SID))
    assert record["compactions"] == 0 and record["last_event"] == "PreCompress"
    manual = dict(payload("gemini", "PreCompress"), trigger="manual")
    assert run_hook(hook_wrapper, "gemini", "PreCompress", json.dumps(manual).encode()).returncode == 0
    assert read_json(record_path(data_dir, "gemini", GEMINI_SID))["compactions"] == 1


def test_qwen_first_event_in_print_mode_publishes(hook_wrapper: Path, data_dir: Path) -> None:  # noqa: F811
    """`qwen -p` fires no SessionStart: the Notification(auth_success) must make the record."""
    proc = run_hook(hook_wrapper, "qwen", "Notification", json.dumps(payload("qwen", "Notification")).encode())
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""
    record = read_json(record_path(data_dir, "qwen", QWEN_SID))
    assert record["session_id"] == QWEN_SID and record["cwd"] == "/home/user/work/proj" and record["compactions"] == 0


def _gone_python_wrapper(data_dir: Path, **render: object) -> Path:
    path = wrapper.wrapper_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(wrapper.render(data_dir, **render))  # type: ignore[arg-type]
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("broken", ["python gone", "package gone"])
def test_gemini_hook_never_writes_stderr(data_dir: Path, tmp_path: Path, broken: str) -> None:
    """Gemini parses stderr as the hook's answer when stdout is empty: the wrapper's own messages
    (interpreter or package gone) go to the hook log for Gemini, still to stderr for the others."""
    render = {"python": str(tmp_path / "no-python")} if broken == "python gone" else {"src": tmp_path / "empty"}
    if broken == "package gone":
        (tmp_path / "empty").mkdir()
        render["python"] = sys.executable
    path = _gone_python_wrapper(data_dir, **render)
    body = json.dumps(payload("gemini", "BeforeAgent")).encode()
    env = dict(os.environ, PYTHONPATH="")  # the package must come from the wrapper's source path only
    proc = subprocess.run(["/bin/sh", "-c", wrapper.command(path, "gemini", "BeforeAgent")], input=body, capture_output=True,
                          env=env, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert "leanctx: hook skipped" in (data_dir / "logs" / "hooks.log").read_text()
    claude = subprocess.run(["/bin/sh", "-c", wrapper.command(path, "claude", "SessionStart")], input=b"{}", capture_output=True,
                            env=env, timeout=30)
    assert claude.returncode == 0 and b"leanctx: hook skipped" in claude.stderr


def _hook(agent: str, event: str, body: dict, *flags: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "leanctx", "hook", agent, event, *flags], input=json.dumps(body),
                          capture_output=True, text=True, env=env or dict(os.environ), timeout=60)


def test_guard_answers_in_each_hosts_deny_form(home: Path, data_dir: Path, tmp_path: Path) -> None:
    cks = home / ".cks"
    (cks / "user" / "bob").mkdir(parents=True)
    secret = cks / "user" / "bob" / "profile.md"
    secret.write_text("bob's phone number")
    env = dict(os.environ, CKS_HOME=str(cks), CKS_ACTIVE_USER="alice")
    gem = dict(payload("gemini", "BeforeTool"), tool_name="read_file", tool_input={"file_path": str(secret)}, cwd=str(tmp_path))
    out = json.loads(_hook("gemini", "BeforeTool", gem, "--guard", env=env).stdout)
    assert out["decision"] == "deny" and str(secret.parent.parent) in out["reason"]
    assert agents.get("gemini").check_output("BeforeTool", json.dumps(out)) is None
    shell = dict(gem, tool_name="run_shell_command", tool_input={"command": f"cat {secret}"})
    assert json.loads(_hook("gemini", "BeforeTool", shell, "--guard", env=env).stdout)["decision"] == "deny"
    qw = dict(payload("qwen", "PreToolUse"), tool_name="read_file", tool_input={"file_path": str(secret)}, cwd=str(tmp_path))
    answer = json.loads(_hook("qwen", "PreToolUse", qw, "--guard", env=env).stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny" and answer["hookEventName"] == "PreToolUse"
    mine = dict(gem, tool_input={"file_path": str(tmp_path / "a.txt")})
    assert _hook("gemini", "BeforeTool", mine, "--guard", env=env).stdout == ""


def test_gemini_read_gate_knows_its_tool_name(home: Path, data_dir: Path) -> None:
    """Gemini names MCP tools `mcp_<server>_<tool>`: the gate must note its ctx_read calls."""
    body = dict(payload("gemini", "BeforeTool.2"), tool_name="mcp_leanctx_ctx_read", tool_input={"path": "a.txt"})
    assert _hook("gemini", "BeforeTool", body, "--read-gate").stdout == ""
    record = read_json(record_path(data_dir, "gemini", GEMINI_SID))
    assert record["last_read_call"]["agent_id"] is None
    spec = dict(agents.get("gemini").profile_events(read_gate=True, mcp_name="mine"))
    assert [s.matcher for s in spec if s.name == "BeforeTool"] == ["mcp_mine_ctx_read"]


def test_qwen_bot_records_one_turn_per_prompt(home: Path, data_dir: Path) -> None:
    """Qwen fires UserPromptSubmit once per model request (`prompt: ""` after each tool result):
    only the user's real prompt is a turn; the continuations publish ids and record nothing."""
    env = dict(os.environ, CKS_HOME=str(home / ".cks"), CKS_ACTIVE_USER="ana")
    for name in ("UserPromptSubmit", "UserPromptSubmit.2", "UserPromptSubmit.3", "UserPromptSubmit.4"):
        proc = _hook("qwen", "UserPromptSubmit", payload("qwen", name), "--bot", env=env)
        assert proc.returncode == 0 and proc.stdout == ""
    assert _hook("qwen", "Stop", payload("qwen", "Stop"), "--bot", env=env).returncode == 0
    state = json.loads(subprocess.run([sys.executable, "-m", "leanctx", "state", "show", "--json"], capture_output=True,
                                      text=True, env=env, timeout=60).stdout)
    assert [(t["role"], t["text"]) for t in state["recent_turns"]] == [("user", "read a.txt"), ("agent", "The file says hello world.")]
    assert read_json(record_path(data_dir, "qwen", QWEN_SID))["last_event"] == "Stop"


def test_gemini_bot_answers_in_its_context_form() -> None:
    gemini = agents.get("gemini")
    out = gemini.context_output("BeforeAgent", "THREAD")
    assert json.loads(out) == {"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext": "THREAD"}}
    assert gemini.check_output("BeforeAgent", out) is None and gemini.check_output("SessionStart", "banner") is not None
    assert gemini.context_output("AfterAgent", "x") == ""
