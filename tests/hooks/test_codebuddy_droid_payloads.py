"""CodeBuddy's and Droid's recorded payloads (tests/fixtures/payloads/{codebuddy,droid}/, from the
offline runs of CodeBuddy Code 2.117.0 and Droid 0.215.0) through the installed hook wrapper."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from leanctx.hooks.publish import read_json, record_path
from leanctx.installer import wrapper
from tests.conftest import PAYLOADS
from tests.hooks.test_hook_entry import hook_wrapper, run_hook  # noqa: F401 - the fixture

CB = PAYLOADS / "codebuddy"
DROID = PAYLOADS / "droid"


def test_codebuddy_async_session_start_after_the_prompt_keeps_one_record(hook_wrapper: Path, data_dir: Path) -> None:
    """CodeBuddy fires SessionStart async: it usually lands after UserPromptSubmit, and it has
    no `cwd`. The record is the same either way, with the prompt's cwd kept; `-p` then ends
    with Stop (FinalStop is not wired) and no SessionEnd, so the conversation stays open."""
    for event in ("UserPromptSubmit", "SessionStart", "Stop"):
        cp = run_hook(hook_wrapper, "codebuddy", event, (CB / f"{event}.json").read_bytes())
        assert cp.returncode == 0 and cp.stdout == b"" and cp.stderr == b"", cp.stderr
    sid = json.loads((CB / "SessionStart.json").read_text())["session_id"]
    record = read_json(record_path(data_dir, "codebuddy", sid))
    assert record["cwd"] == "/home/user/work/proj" and record["source"] == "startup"
    assert record["stopped_at"] and "ended_at" not in record and record["last_event"] == "Stop"
    assert not (data_dir / "logs" / "hooks.log").exists()


def test_codebuddy_unwired_events_publish_nothing(hook_wrapper: Path, data_dir: Path) -> None:
    """FinalStop, Notification (no session id) and Setup are not ours: exit 0, silent, nothing
    published (a host never calls them, but a hand-made entry must not fake a record)."""
    for event in ("FinalStop", "Notification", "Setup"):
        cp = run_hook(hook_wrapper, "codebuddy", event, (CB / f"{event}.json").read_bytes())
        assert cp.returncode == 0 and cp.stdout == b""
    assert not (data_dir / "conversations").exists()


def _gate(hook: Path, agent: str, payload: dict) -> None:
    command = wrapper.command(hook, agent, "PreToolUse", ("--read-gate",))
    cp = subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload).encode(), capture_output=True, timeout=30)
    assert cp.returncode == 0 and cp.stdout == b"" and cp.stderr == b"", cp.stderr


def test_codebuddy_read_gate_sees_the_inner_deferred_call(hook_wrapper: Path, data_dir: Path) -> None:
    """Through DeferExecuteTool CodeBuddy fires PreToolUse twice; the inner one names our tool
    (with a fresh UUID, not the model's call id): that one is noted, the wrapper call is not."""
    outer = json.loads((CB / "PreToolUse.2.json").read_text())
    outer["tool_input"] = {"toolName": "mcp__leanctx__ctx_read", "params": {"path": "a.txt"}}
    inner = dict(outer, tool_name="mcp__leanctx__ctx_read", tool_input={"path": "a.txt"},
                 tool_use_id="04c8e222-1f6e-4b95-b93b-d0b738867ce0", call_id="04c8e222-1f6e-4b95-b93b-d0b738867ce0")
    _gate(hook_wrapper, "codebuddy", outer)
    assert not (data_dir / "conversations").exists()
    _gate(hook_wrapper, "codebuddy", inner)
    record = read_json(record_path(data_dir, "codebuddy", outer["session_id"]))
    assert list(record["read_calls"]) == [inner["tool_use_id"]]


def test_droid_read_gate_knows_its_three_underscore_tool_name(hook_wrapper: Path, data_dir: Path) -> None:
    """Droid names MCP tools `<server>___<tool>` and sends no tool_use_id: the gate notes the
    read (who, when) for `leanctx___ctx_read`, and nothing for the Claude spelling."""
    payload = json.loads((DROID / "PreToolUse.3.json").read_text())
    _gate(hook_wrapper, "droid", dict(payload, tool_name="mcp__leanctx__ctx_read", tool_input={"path": "a.txt"}))
    assert not (data_dir / "conversations").exists()
    _gate(hook_wrapper, "droid", dict(payload, tool_name="leanctx___ctx_read", tool_input={"path": "a.txt"}))
    record = read_json(record_path(data_dir, "droid", payload["session_id"]))
    assert record["last_read_call"]["agent_id"] is None and "read_calls" not in record
    assert record["transcript_path"] == payload["transcript_path"]
