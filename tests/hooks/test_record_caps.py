"""A hostile payload cannot make a conversation record grow without bound (real wrapper, sh -c)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from leanctx.hooks.publish import MAX_RECORD_BYTES, MAX_SUBAGENTS, MAX_TEXT, read_json, record_path
from tests.hooks.claude_session import seen_record, session
from tests.hooks.test_hook_entry import PAYLOADS, hook_wrapper, run_hook  # noqa: F401 - fixture


def test_hostile_payload_is_capped(hook_wrapper: Path, data_dir: Path) -> None:
    base, fire = session(hook_wrapper)
    sid = base["session_id"]
    fire("SessionStart", source="startup")
    huge = "x" * (MAX_TEXT + 1)
    fire("UserPromptSubmit", prompt="hi", cwd="/" + huge, transcript_path="/t/" + huge)
    long_id = "a" * 100_000
    fire("SubagentStart", agent_id=long_id, agent_type="T" * 100_000)
    for i in range(MAX_SUBAGENTS + 5):
        fire("SubagentStart", agent_id=f"s{i}", agent_type="Explore")
    path = record_path(data_dir, "claude", sid)
    record = read_json(path)
    assert record["cwd"] == base["cwd"] and record["transcript_path"] == base["transcript_path"]  # kept, not replaced
    assert len(record["active_subagents"]) == MAX_SUBAGENTS
    assert "s0" not in record["active_subagents"] and f"s{MAX_SUBAGENTS + 4}" in record["active_subagents"]
    assert os.path.getsize(path) < 64 * 1024
    # every subagent stops, but the ones dropped for room may still run: stubs stay withheld
    for i in range(MAX_SUBAGENTS + 5):
        fire("SubagentStop", agent_id=f"s{i}", agent_type="Explore")
    assert read_json(path)["active_subagents"] == {}
    assert seen_record(data_dir, sid).subagents  # the overflow window
    fire("SessionEnd", reason="other")
    fire("SessionStart", source="resume")
    assert not seen_record(data_dir, sid).subagents


def test_long_subagent_id_start_and_stop_still_match(hook_wrapper: Path, data_dir: Path) -> None:
    base = json.loads((PAYLOADS / "claude" / "SessionStart.json").read_text())
    long_id = "b" * 50_000
    for event in ("SessionStart", "SubagentStart"):
        body = dict(base, hook_event_name=event, source="startup", agent_id=long_id, agent_type="Plan")
        assert run_hook(hook_wrapper, "claude", event, json.dumps(body).encode()).returncode == 0
    record = read_json(record_path(data_dir, "claude", base["session_id"]))
    [key] = record["active_subagents"]
    assert len(key) < 100
    body = dict(base, hook_event_name="SubagentStop", agent_id=long_id, agent_type="Plan")
    assert run_hook(hook_wrapper, "claude", "SubagentStop", json.dumps(body).encode()).returncode == 0
    assert read_json(record_path(data_dir, "claude", base["session_id"]))["active_subagents"] == {}


def test_overlong_conversation_id_writes_no_record(hook_wrapper: Path, data_dir: Path) -> None:
    base = json.loads((PAYLOADS / "claude" / "SessionStart.json").read_text())
    body = dict(base, session_id="c" * (MAX_TEXT + 1), source="startup")
    assert run_hook(hook_wrapper, "claude", "SessionStart", json.dumps(body).encode()).returncode == 0
    assert not list((data_dir / "conversations").glob("*/*.json")) if (data_dir / "conversations").exists() else True


def test_oversized_record_reads_as_absent_and_is_rewritten(hook_wrapper: Path, data_dir: Path) -> None:
    base = json.loads((PAYLOADS / "claude" / "SessionStart.json").read_text())
    sid = base["session_id"]
    path = Path(record_path(data_dir, "claude", sid))
    path.parent.mkdir(parents=True)
    bloat = {"conversation_id": sid, "updated_ts": 1.0, "compactions": 0, "junk": "z" * MAX_RECORD_BYTES}
    path.write_text(json.dumps(bloat))
    assert read_json(path) is None
    assert run_hook(hook_wrapper, "claude", "SessionStart", json.dumps(dict(base, source="startup")).encode()).returncode == 0
    record = read_json(path)
    assert record is not None and "junk" not in record


def test_read_gate_keeps_the_newest_call_notes_and_hashes_long_agent_ids(hook_wrapper: Path, data_dir: Path) -> None:
    """Records are written with sorted keys: the cap must drop the oldest notes by time, not the
    first in sort order ("toolu_9" is older than "toolu_10" but sorts after it)."""
    from leanctx.installer import wrapper
    from leanctx.hooks.publish import MAX_READ_CALLS

    payload = json.loads((PAYLOADS / "claude" / "PreToolUse.json").read_text())
    payload.update(tool_name="mcp__leanctx__ctx_read", tool_input={"path": "a.txt"})
    command = wrapper.command(hook_wrapper, "claude", "PreToolUse", ("--read-gate",))
    import subprocess

    def gate(**fields: object) -> None:
        cp = subprocess.run(["/bin/sh", "-c", command], input=json.dumps({**payload, **fields}).encode(), capture_output=True, timeout=30)
        assert cp.returncode == 0 and cp.stderr == b"", cp.stderr

    n = MAX_READ_CALLS + 3
    for i in range(n):
        gate(tool_use_id=f"toolu_{i}")
    gate(tool_use_id="toolu_sub", agent_id="q" * 100_000, agent_type="general-purpose")
    calls = read_json(record_path(data_dir, "claude", payload["session_id"]))["read_calls"]
    assert len(calls) == MAX_READ_CALLS
    assert set(calls) == {f"toolu_{i}" for i in range(n - MAX_READ_CALLS + 1, n)} | {"toolu_sub"}
    assert len(calls["toolu_sub"]["agent_id"]) < 100
