"""Gemini CLI and Qwen Code: a subagent's tool calls whose hooks do not say it is a subagent, and
Qwen Code's clearing of old tool results after an idle spell.

Recorded from the real CLIs (tests/fixtures/payloads/{gemini,qwen}/builtin/): Qwen Code 0.15.10
sends a subagent's PreToolUse without `agent_id` (0.24.4 names it), between SubagentStart and
SubagentStop; Gemini CLI 0.61.0 has no subagent event and names no subagent anywhere: its
subagent runs inside the `invoke_agent` call, whose BeforeTool and AfterTool are its window.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leanctx.agents import gemini, qwen
from leanctx.agents.base import SUBAGENT_START, SUBAGENT_STOP
from leanctx.cache import ReadCache
from leanctx.cache.scope import Connection, Resolver
from leanctx.hooks import publish as pub

BIG = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "payloads"


def recorded(host: str, name: str) -> dict:
    return json.loads((FIXTURES / host / "builtin" / f"{name}.json").read_text())


class Host:
    """A fake host process whose hooks fold the recorded payloads into real records."""

    def __init__(self, agent, data: Path, proj: Path, pid: int) -> None:  # noqa: ANN001
        self.agent, self.data, self.proj = agent, data, proj
        self.info = {"pid": pid, "name": agent.name, "start_ticks": 1000 + pid}
        self.chat = data.parent / f"{agent.name}-chat.jsonl"  # the host's chat recording (nothing replaced)
        self.chat.parent.mkdir(parents=True, exist_ok=True)
        self.chat.write_text("")

    def payload(self, base: dict, **extra: object) -> dict:
        return {**base, "session_id": "s1", "transcript_path": str(self.chat), "cwd": str(self.proj), **extra}

    def event(self, name: str, payload: dict, ts: float | None = None) -> None:
        ev = self.agent.normalize(name, self.payload(payload))
        original_host, original_time = pub.host_process, pub.time.time
        pub.host_process = lambda: self.info
        if ts is not None:
            pub.time.time = lambda: ts
        try:
            pub.publish(str(self.data), ev)
        finally:
            pub.host_process, pub.time.time = original_host, original_time

    def note(self, payload: dict) -> str | None:
        """The read gate's note before a built-in read (its call id, if the host sends one)."""
        ev = self.agent.normalize("PreToolUse" if self.agent.name == "qwen" else "BeforeTool", self.payload(payload))
        pub.note_read_call(str(self.data), ev, host=self.info)
        return ev.tool_use_id

    def conn(self) -> Connection:
        return Connection("c1", {}, self.info["pid"], self.info["start_ticks"], str(self.proj))

    def record(self) -> dict:
        return json.loads(Path(pub.record_path(str(self.data), self.agent.name, "s1")).read_text())


@pytest.fixture
def world(tmp_path: Path):
    data, proj = tmp_path / "data", tmp_path / "proj"
    proj.mkdir()
    (proj / "small.txt").write_text(BIG)
    return data, proj


def test_qwen_a_subagent_call_without_agent_id_is_never_credited_to_the_conversation(world) -> None:
    data, proj = world
    h = Host(qwen.AGENT, data, proj, 5101)
    h.event("Notification", {"hook_event_name": "Notification", "notification_type": "auth_success"})
    r, cache = Resolver(str(data)), ReadCache(None)
    read = recorded("qwen", "0.15.10.PreToolUse.read_file.4")  # small.txt, no agent_id
    path = str(proj / "small.txt")

    def gate_and_credit(tag: str) -> str:
        call = h.note({**read, "tool_use_id": f"toolu_{tag}"})
        scope = r.resolve(h.conn(), fresh=True, call_id=call)
        kind = cache.read(scope, path, start_line=1, mode="gate")["kind"]
        cache.read(scope, path, start_line=1, mode="credit", delivered=BIG)
        return kind

    h.event("SubagentStart", recorded("qwen", "0.15.10.SubagentStart.none.1"))
    assert h.record()["active_subagents"]
    call = h.note({**read, "tool_use_id": "toolu_sub"})
    scope = r.resolve(h.conn(), fresh=True, call_id=call)
    assert not scope.stub_ok and scope.reason.startswith("subagent window open")
    assert gate_and_credit("sub1") == "full"
    assert gate_and_credit("sub2") == "full", "a call inside the window may be the subagent's: never credited"
    h.event("SubagentStop", recorded("qwen", "0.15.10.SubagentStop.none.1"))
    assert not h.record()["active_subagents"]
    assert gate_and_credit("main1") == "full", "what the subagent read was never credited to the conversation"
    assert gate_and_credit("main2") == "stub"


def test_qwen_0_24_names_the_subagent_on_its_calls(world) -> None:
    data, proj = world
    h = Host(qwen.AGENT, data, proj, 5102)
    h.event("Notification", {"hook_event_name": "Notification", "notification_type": "auth_success"})
    h.event("SubagentStart", recorded("qwen", "0.24.4.SubagentStart.none.1"))
    call = h.note(recorded("qwen", "0.24.4.PreToolUse.read_file.6"))  # the subagent's read_file
    scope = Resolver(str(data)).resolve(h.conn(), fresh=True, call_id=call)
    assert scope.stub_ok and "/agent:general-purpose-call_00010@" in scope.key, scope.reason  # its own context


def test_gemini_invoke_agent_is_the_subagent_window(world) -> None:
    data, proj = world
    h = Host(gemini.AGENT, data, proj, 5103)
    h.event("SessionStart", {"hook_event_name": "SessionStart", "source": "startup"})
    before, after = recorded("gemini", "0.61.0.BeforeTool.invoke_agent.1"), recorded("gemini", "0.61.0.AfterTool.invoke_agent.1")
    start, stop = gemini.AGENT.normalize("BeforeTool", before), gemini.AGENT.normalize("AfterTool", after)
    assert (start.kind, stop.kind) == (SUBAGENT_START, SUBAGENT_STOP)
    assert start.subagent_id == stop.subagent_id and start.subagent_type == "generalist"
    r = Resolver(str(data))
    assert r.resolve(h.conn(), fresh=True).stub_ok
    h.event("BeforeTool", before)
    h.event("BeforeTool", before)  # the same call twice at once: one id, two runs
    assert not r.resolve(h.conn(), fresh=True).stub_ok
    h.event("AfterTool", after)
    assert not r.resolve(h.conn(), fresh=True).stub_ok, "the other run is still going"
    h.event("AfterTool", after)
    assert r.resolve(h.conn(), fresh=True).stub_ok


def test_claude_subagent_ids_are_not_counted(world) -> None:
    """A SubagentStart for an id still open starts a new incarnation (Claude Code's ids are its own)."""
    data, proj = world
    from leanctx.agents.base import HookEvent

    h = Host(qwen.AGENT, data, proj, 5104)
    for ts in (1000.0, 2000.0):
        ev = HookEvent("qwen", "SubagentStart", SUBAGENT_START, conversation_id="s1", session_id="s1", subagent_id="ag-1")
        pub.time.time, original = (lambda t=ts: t), pub.time.time
        try:
            pub.publish(str(data), ev)
        finally:
            pub.time.time = original
    assert h.record()["active_subagents"]["ag-1"]["started_ts"] == 2000.0


def prompt(h: Host, ts: float, text: str = "go on") -> int:
    h.event("UserPromptSubmit", {**recorded("qwen", "0.15.10.PreToolUse.read_file.1"), "hook_event_name": "UserPromptSubmit",
                                 "prompt": text}, ts=ts)
    return h.record()["compactions"]


def test_qwen_a_prompt_after_an_idle_hour_counts_as_a_compaction(world, monkeypatch) -> None:
    data, proj = world
    home = data.parent / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("QWEN_HOME", raising=False)
    monkeypatch.setenv("QWEN_CODE_SYSTEM_SETTINGS_PATH", str(data.parent / "no-system-settings.json"))
    h = Host(qwen.AGENT, data, proj, 5105)
    t = 1_000_000.0
    assert prompt(h, t) == 0
    assert prompt(h, t + 30, "") == 0  # the request after a tool result
    assert prompt(h, t + 30 + 58 * 60) == 0
    assert prompt(h, t + 30 + 58 * 60 + 59 * 60) == 1, "59 minutes after the last request: may be cleared"
    # a settings file that names the setting (any value): every prompt
    (home / ".qwen").mkdir(parents=True)
    (home / ".qwen" / "settings.json").write_text('{"context": {"clearContextOnIdle": {"toolResultsThresholdMinutes": 5}}}')
    assert prompt(h, t + 10_000) == 2
    assert prompt(h, t + 10_001) == 3
