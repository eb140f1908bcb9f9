"""Per-call identity: the read gate notes each ctx_read under the host's id for that call
(Claude Code's tool_use_id, also sent to the MCP server as `_meta["claudecode/toolUseId"]`), and
the scope uses the note to tell the conversation from its subagents exactly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from leanctx.agents.base import PRE_TOOL, SESSION_END, SESSION_START, SUBAGENT_START, HookEvent
from leanctx.cache import ReadCache
from leanctx.cache.scope import Connection, Resolver
from leanctx.hooks import publish as pub


class Host:
    """A fake host process (pid + start ticks) whose hooks write real records."""

    def __init__(self, data: Path, cwd: Path, pid: int) -> None:
        self.data, self.cwd, self.info = data, cwd, {"pid": pid, "name": "claude", "start_ticks": 1000 + pid}
        self.tips: dict[str, str] = {}

    def transcript(self, conv: str, agent_id: str | None = None) -> str:
        base = self.data.parent / "transcripts" / conv
        return str(base / "subagents" / f"agent-{agent_id}.jsonl") if agent_id else f"{base}.jsonl"

    def said(self, conv: str, call_id: str, agent_id: str | None = None) -> None:
        """The host writes the call and its result to the (sub)agent's transcript, as Claude Code does."""
        path = self.transcript(conv, agent_id)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            for kind, part in (("assistant", {"type": "tool_use", "id": call_id}),
                               ("user", {"type": "tool_result", "tool_use_id": call_id, "content": "..."})):
                uid = f"{call_id}-{kind}"
                f.write(json.dumps({"parentUuid": self.tips.get(path), "uuid": uid, "type": kind,
                                    "message": {"content": [part]}}) + "\n")
                self.tips[path] = uid

    def event(self, kind: str, event: str, conv: str, **fields: object) -> None:
        original = pub.host_process  # publish() takes its host from the process tree
        pub.host_process = lambda: self.info
        try:
            pub.publish(str(self.data), HookEvent("claude", event, kind, conversation_id=conv, session_id=conv,
                                                  cwd=str(self.cwd), transcript_path=self.transcript(conv), **fields))
        finally:
            pub.host_process = original

    def start(self, conv: str) -> None:
        self.event(SESSION_START, "SessionStart", conv, source="startup")

    def gate(self, conv: str, call_id: str | None, agent_id: str | None = None) -> None:
        pub.note_read_call(str(self.data), HookEvent("claude", "PreToolUse", PRE_TOOL, conversation_id=conv, session_id=conv,
                                                     subagent_id=agent_id, tool_use_id=call_id,
                                                     tool_name="mcp__leanctx__ctx_read"), host=self.info)
        if call_id:
            self.said(conv, call_id, agent_id)

    def conn(self, cid: str = "c1", **env: str) -> Connection:
        return Connection(cid, dict(env), self.info["pid"], self.info["start_ticks"], str(self.cwd))


@pytest.fixture
def world(tmp_path: Path):
    data, proj = tmp_path / "data", tmp_path / "proj"
    proj.mkdir()
    (proj / "a.py").write_text("".join(f"line {i}\n" for i in range(200)))
    (proj / "b.py").write_text("".join(f"other {i}\n" for i in range(200)))
    return data, proj


def solo(world, pid: int, conv: str = "s1") -> tuple[Host, Resolver]:
    """One host process with one started conversation, and a resolver over its records."""
    data, proj = world
    h = Host(data, proj, pid)
    h.start(conv)
    return h, Resolver(str(data))


def test_parent_and_subagent_calls_are_told_apart_while_the_window_is_open(world) -> None:
    data, proj = world
    h = Host(data, proj, 4242)
    h.start("s1")
    h.event(SUBAGENT_START, "SubagentStart", "s1", subagent_id="ag-1", subagent_type="general-purpose")
    r = Resolver(str(data))
    assert not r.resolve(h.conn(), fresh=True).stub_ok  # no call id: the window withholds
    h.gate("s1", "toolu_parent", None)
    h.gate("s1", "toolu_sub", "ag-1")
    parent = r.resolve(h.conn(), fresh=True, call_id="toolu_parent")
    sub = r.resolve(h.conn(), fresh=True, call_id="toolu_sub")
    assert parent.stub_ok and sub.stub_ok
    assert sub.key.startswith(f"{parent.key}/agent:ag-1@")  # the subagent's incarnation follows
    assert parent.compactions == sub.compactions == 0
    # a call the gate never noted (the hook failed) while the gate runs for this host: withheld
    scope = r.resolve(h.conn(), fresh=True, call_id="toolu_unknown")
    assert not scope.stub_ok and scope.reason == "read gate note missing for this call"
    h.event("subagent_stop", "SubagentStop", "s1", subagent_id="ag-1")
    h.gate("s1", "toolu_after", None)
    assert not r.resolve(h.conn(), fresh=True, call_id="toolu_unknown").stub_ok, "even with no window open"


def test_a_subagent_gets_stubs_only_for_what_it_read_itself(world) -> None:
    data, proj = world
    h = Host(data, proj, 4243)
    h.start("s1")
    r, cache = Resolver(str(data)), ReadCache(None)

    def read(call: str, agent: str | None, path: str) -> str:
        h.gate("s1", call, agent)
        return cache.read(r.resolve(h.conn(), fresh=True, call_id=call), path)["kind"]

    assert read("t1", None, "a.py") == "full"
    h.event(SUBAGENT_START, "SubagentStart", "s1", subagent_id="ag-1")
    assert read("t2", "ag-1", "a.py") == "full", "the subagent never received what its parent read"
    assert read("t3", "ag-1", "a.py") == "stub", "its own re-read"
    assert read("t4", None, "a.py") == "stub", "the parent's re-read beside the running subagent"
    assert read("t5", "ag-1", "b.py") == "full"
    assert read("t6", None, "b.py") == "full", "the parent never received what the subagent read"
    h.event("subagent_stop", "SubagentStop", "s1", subagent_id="ag-1")
    assert read("t7", None, "b.py") == "stub"
    # a compaction anywhere in the session (the host reports a subagent's under the session id)
    h.event("pre_compact", "PreCompact", "s1")
    assert read("t8", None, "a.py") == "full"
    assert read("t9", "ag-2", "b.py") == "full"


def test_the_call_decides_between_chats_of_one_host_process(world) -> None:
    """Two chats active on one host process withhold without a call id; the note settles it."""
    data, proj = world
    h = Host(data, proj, 4244)
    h.start("chat-a")
    h.start("chat-b")
    r, cache = Resolver(str(data)), ReadCache(None)
    scope = r.resolve(h.conn(), fresh=True)
    assert not scope.stub_ok and "conversations active" in scope.reason
    h.gate("chat-a", "ta1")
    assert cache.read(r.resolve(h.conn(), fresh=True, call_id="ta1"), "a.py")["kind"] == "full"
    h.gate("chat-b", "tb1")
    assert cache.read(r.resolve(h.conn(), fresh=True, call_id="tb1"), "a.py")["kind"] == "full"
    h.gate("chat-a", "ta2")
    assert cache.read(r.resolve(h.conn(), fresh=True, call_id="ta2"), "a.py")["kind"] == "stub"


def test_a_note_of_another_host_process_or_an_ambiguous_id_is_not_used(world) -> None:
    data, proj = world
    mine, other = Host(data, proj, 5001), Host(data, proj, 5002)
    mine.start("s-mine")
    mine.event(SUBAGENT_START, "SubagentStart", "s-mine", subagent_id="ag")
    other.start("s-other")
    other.gate("s-other", "toolu_x")
    r = Resolver(str(data))
    scope = r.resolve(mine.conn(), fresh=True, call_id="toolu_x")
    assert not scope.stub_ok and "subagent" in scope.reason  # the usual rules for my connection
    # the same id noted in two records of my host (a fake model reusing ids): ambiguous
    mine.start("s-mine-2")
    mine.gate("s-mine", "toolu_dup")
    mine.gate("s-mine-2", "toolu_dup")
    scope = r.resolve(mine.conn(), fresh=True, call_id="toolu_dup")
    assert not scope.stub_ok and scope.reason == "read gate note missing for this call"


def test_a_host_without_read_notes_keeps_the_usual_rules(world) -> None:
    """Claude Code without the read gate: a call id alone decides nothing (its transcript checks
    every credit: a subagent's call is not on its parent's chain)."""
    h, r = solo(world, 5005)
    with_id = r.resolve(h.conn(), fresh=True, call_id="toolu_1")
    assert dataclasses.replace(with_id, call_id=None) == r.resolve(h.conn(), fresh=True)
    assert with_id.call_id == "toolu_1"  # only to find the call's own entry in the transcript
    assert r.resolve(h.conn(), fresh=True, call_id="toolu_1").stub_ok


def test_explicit_scope_and_ended_conversations_win_over_the_note(world) -> None:
    h, r = solo(world, 5003)
    h.gate("s1", "t1")
    assert r.resolve(h.conn(LEANCTX_SCOPE="mine"), fresh=True, call_id="t1").key.startswith("custom:mine")
    assert r.resolve(h.conn(LEANCTX_CONVERSATION_SCOPE="0"), fresh=True, call_id="t1").key.startswith("conn:")
    h.event(SESSION_END, "SessionEnd", "s1")
    scope = r.resolve(h.conn(), fresh=True, call_id="t1")
    assert not scope.stub_ok and scope.reason == "conversation ended"


def test_notes_are_bounded_and_damaged_notes_are_ignored(world) -> None:
    data, proj = world
    h = Host(data, proj, 5004)
    h.start("s1")
    for i in range(pub.MAX_READ_CALLS + 6):
        h.gate("s1", f"t{i}", "ag" if i % 2 else None)
    path = data / "conversations" / "claude" / "s1.json"
    rec = json.loads(path.read_text())
    assert len(rec["read_calls"]) == pub.MAX_READ_CALLS
    assert "t0" not in rec["read_calls"] and f"t{pub.MAX_READ_CALLS + 5}" in rec["read_calls"]
    h.gate("s1", None)  # a host that names no call: nothing added, nothing lost
    assert json.loads(path.read_text())["read_calls"] == rec["read_calls"]
    r = Resolver(str(data))
    for damaged in ([1, 2], {"t1": "not a note", "": {"agent_id": None}}, {"t1": {"agent_id": 7}}):
        rec["read_calls"] = damaged
        path.write_text(json.dumps(rec))
        scope = r.resolve(h.conn(), fresh=True, call_id="t1")  # no crash; the usual rules decide
        assert scope.key == r.resolve(h.conn(), fresh=True).key


@pytest.mark.parametrize(("meta", "expected"), [
    ({"claudecode/toolUseId": "toolu_1"}, "toolu_1"),
    ({"callId": "call_1", "threadId": "t"}, "call_1"),
    ({"claudecode/toolUseId": 7, "callId": "call_2"}, "call_2"),
    ({"claudecode/toolUseId": ""}, None),
    ({"progress_token": 1}, None),
    (None, None),
    ("toolu_1", None),
    ([("callId", "x")], None),
])
def test_the_call_id_is_taken_only_from_a_well_formed_meta(meta: object, expected: str | None) -> None:
    from leanctx.cache.mcpserver import call_id_of

    assert call_id_of(meta) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("toolu_1", "toolu_1"), ("x" * 200, "x" * 200), ("x" * 201, None), ("", None), (7, None), (None, None), (["a"], None),
])
def test_a_bad_call_id_in_a_daemon_request_only_loses_per_call_identity(value: object, expected: str | None) -> None:
    from leanctx.cache.service import call_id_arg, read_args

    args = {"path": "a.py", "call_id": value}
    assert call_id_arg(args) == expected
    assert read_args(args) == ("a.py", None, None, False)  # the read itself is not refused



def test_per_call_identity_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from leanctx.cache.mcpserver import call_id_of

    monkeypatch.setenv("LEANCTX_PER_CALL_IDENTITY", "0")
    assert call_id_of({"claudecode/toolUseId": "toolu_1"}) is None
    monkeypatch.setenv("LEANCTX_PER_CALL_IDENTITY", "1")
    assert call_id_of({"claudecode/toolUseId": "toolu_1"}) == "toolu_1"
