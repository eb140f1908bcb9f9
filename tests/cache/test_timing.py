"""Hook events that reach leanctx late, never, or out of order: the replay traces of
bench/traces/*-{late,lost,notes,reused}.jsonl give 0 wrong stubs, and read-gate notes written by
real concurrent hook processes into one conversation record neither replace one another nor close
a subagent's window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bench.support.replay import Engine, NoCache, Oracle, Ours, load_trace
from leanctx.cache.scope import Connection, Resolver
from leanctx.hooks.publish import missed_path, record_path
from tests.conftest import REPO

TIMING_OPS = ("deliver", "note", "resumed", "call_ids", "gate_fails")
NAMES = ("clear-late", "compact-late", "parallel-notes", "subagent-late", "subagent-reused", "prompt-lost")
TRACES = sorted(p for p in (REPO / "bench" / "traces").glob("*.jsonl") if p.stem.split("-", 1)[1] in NAMES)


def _replay(path: Path) -> tuple[Ours, Oracle]:
    with tempfile.TemporaryDirectory() as base:
        ours, oracle = Ours(), Oracle()
        Engine(base, [NoCache(), ours, oracle]).run(load_trace(str(path)))
    return ours, oracle


def test_the_timing_traces_are_there() -> None:
    assert len(TRACES) == 14
    for path in TRACES:
        assert any(f'"{op}"' in path.read_text() for op in TIMING_OPS), path.name


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_a_timing_trace_gives_no_wrong_stub(path: Path) -> None:
    ours, oracle = _replay(path)
    assert ours.wrong == 0, ours.wrong_examples
    assert oracle.wrong == 0
    assert ours.tokens >= oracle.tokens


@pytest.mark.parametrize(("name", "expected"), [
    # the subagent's first read (its note and SubagentStart late) is withheld and credited to
    # nobody, so the parent's later read of that file is content
    ("codex-subagent-late", ["full", "full", "stub", "full", "full", "stub"]),
    # a fresh subagent under a used id gets content; so does a resumed one (its SubagentStart
    # begins a new incarnation: one copy more than needed, never a wrong stub)
    ("codex-subagent-reused", ["full", "stub", "full", "full", "full", "full", "full"]),
    # chat B, whose prompt hook is lost, never gets chat A's stubs; nor A what B read
    ("cursor-prompt-lost", ["full"] * 9),
])
def test_what_each_read_gets(name: str, expected: list[str]) -> None:
    ours, _ = _replay(REPO / "bench" / "traces" / f"{name}.jsonl")
    assert ours.sequence == expected


def _note(data: Path, call_id: str, agent_id: str | None) -> subprocess.Popen:
    payload = {"session_id": "s1", "transcript_path": str(data / "s1.jsonl"), "cwd": str(data),
               "hook_event_name": "PreToolUse", "tool_name": "mcp__leanctx__ctx_read", "tool_input": {"path": "a.py"},
               "tool_use_id": call_id}
    if agent_id:
        payload.update(agent_id=agent_id, agent_type="general-purpose")
    p = subprocess.Popen([sys.executable, "-m", "leanctx", "hook", "claude", "PreToolUse", "--read-gate"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, LEANCTX_HOME=str(data)))
    p.stdin.write(json.dumps(payload).encode())
    p.stdin.close()
    return p


def test_parallel_read_gate_notes_of_real_processes(tmp_path: Path) -> None:
    """Parent and subagent calls in parallel: 12 hook processes write their notes into one record
    at once. Each note is kept under its call id (or, where the record lock stayed busy, counted as
    a missed bump that withholds), and the subagent's window stays open after the parent's later
    notes, until its SubagentStop."""
    data = tmp_path / "data"
    calls = {f"toolu_{i:02d}": ("ag-1" if i % 3 == 0 else None) for i in range(12)}
    procs = [_note(data, cid, agent) for cid, agent in calls.items()]
    for p in procs:
        p.wait(timeout=120)
        assert p.returncode == 0
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    assert _note(data, "toolu_last", None).wait(timeout=120) == 0  # the parent's note comes last
    path = record_path(str(data), "claude", "s1")
    rec = json.loads(Path(path).read_text())
    missed = os.path.getsize(missed_path(path)) if os.path.exists(missed_path(path)) else 0
    noted = {cid: n["agent_id"] for cid, n in rec["read_calls"].items()}
    assert len(noted) + missed == len(calls) + 1
    assert all(noted[cid] == agent for cid, agent in calls.items() if cid in noted)
    assert rec["last_read_call"]["agent_id"] is None and "ag-1" in rec["active_subagents"]
    conn = Connection("c1", {}, rec["host"]["pid"], rec["host"]["start_ticks"], str(tmp_path))
    r = Resolver(str(data))
    assert not r.resolve(conn, fresh=True).stub_ok  # no call id: the subagent's window withholds
    if not missed:
        parent = r.resolve(conn, fresh=True, call_id="toolu_01")
        sub = r.resolve(conn, fresh=True, call_id="toolu_03")
        assert parent.stub_ok and sub.stub_ok and sub.key.startswith(parent.key + "/agent:ag-1@")
    stop = {"session_id": "s1", "transcript_path": str(data / "s1.jsonl"), "cwd": str(data),
            "hook_event_name": "SubagentStop", "agent_id": "ag-1", "agent_type": "general-purpose"}
    subprocess.run([sys.executable, "-m", "leanctx", "hook", "claude", "SubagentStop"], input=json.dumps(stop).encode(),
                   env=dict(os.environ, LEANCTX_HOME=str(data)), capture_output=True, timeout=120, check=True)
    assert "ag-1" not in json.loads(Path(path).read_text())["active_subagents"]
    assert r.resolve(conn, fresh=True).stub_ok == (not missed)
