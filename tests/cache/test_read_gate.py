"""The read gate: a subagent's ctx_read, noted by the pre-tool hook before it runs, never gets a stub."""

from __future__ import annotations

import json
from pathlib import Path

from leanctx.agents.base import HookEvent
from leanctx.cache.scope import Connection, Resolver
from leanctx.hooks.publish import note_read_call, publish


def _gate(data: Path, agent_id: str | None) -> None:
    note_read_call(str(data), HookEvent("claude", "PreToolUse", "pre_tool", conversation_id="s1", session_id="s1",
                                        subagent_id=agent_id, tool_name="mcp__leanctx__ctx_read"))


def test_subagent_read_note_withholds_until_its_subagent_stops(tmp_path: Path) -> None:
    """A subagent's note opens its window; the parent's next note does not close it (the two may
    run in parallel, the subagent's call still on its way), its SubagentStop does."""
    data = tmp_path / "data"
    publish(str(data), HookEvent("claude", "SessionStart", "session_start", conversation_id="s1", session_id="s1",
                                 cwd=str(tmp_path), source="startup"))
    host = json.loads((data / "conversations" / "claude" / "s1.json").read_text())["host"]
    conn = Connection(connection_id="c1", env={"CLAUDE_CODE_SESSION_ID": "s1"}, host_pid=host["pid"],
                      host_start_ticks=host["start_ticks"])
    resolver = Resolver(str(data))
    assert resolver.resolve(conn, fresh=True).stub_ok
    _gate(data, "agent-7")  # the subagent is about to call ctx_read: SubagentStart not seen yet
    scope = resolver.resolve(conn, fresh=True)
    assert not scope.stub_ok and "subagent" in scope.reason
    _gate(data, None)  # the conversation itself reads next, in parallel
    assert not resolver.resolve(conn, fresh=True).stub_ok
    publish(str(data), HookEvent("claude", "SubagentStop", "subagent_stop", conversation_id="s1", session_id="s1",
                                 subagent_id="agent-7"))
    assert resolver.resolve(conn, fresh=True).stub_ok


def test_read_note_alone_creates_a_record_for_an_unseen_conversation(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _gate(data, "agent-1")
    record = json.loads((data / "conversations" / "claude" / "s1.json").read_text())
    assert record["last_read_call"]["agent_id"] == "agent-1" and record["last_read_call"]["ts"] > 0
