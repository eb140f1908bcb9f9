"""The replay engine and bench/cache_replay.py accept recorded traces (`--trace FILE.jsonl`)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile

import pytest

from bench.support.replay import Engine, NoCache, Oracle, Ours, load_trace
from tests.conftest import PAYLOADS, REPO

from .conftest import code


def _trace(tmp_path) -> str:  # noqa: ANN001
    start = json.loads((PAYLOADS / "claude" / "SessionStart.json").read_text())
    prompt = json.loads((PAYLOADS / "claude" / "UserPromptSubmit.json").read_text())
    sid = start["session_id"]
    events = [
        {"op": "root", "path": "/home/user/proj"},
        {"op": "write", "path": "a.txt", "text": code(80)},
        {"op": "host", "host": "claude-1", "agent": "claude"},
        {"op": "hook", "host": "claude-1", "event": "SessionStart", "payload": start},
        {"op": "hook", "host": "claude-1", "event": "UserPromptSubmit", "payload": prompt},
        {"op": "read", "host": "claude-1", "conv": sid, "path": "/home/user/proj/a.txt"},
        {"op": "tick", "s": 2},
        {"op": "read", "host": "claude-1", "conv": sid, "path": "a.txt"},
        {"op": "hook", "host": "claude-1", "event": "compact", "conv": sid},
        {"op": "read", "host": "claude-1", "conv": sid, "path": "a.txt", "start": 1, "end": 30},
        {"op": "restart", "graceful": True},
        {"op": "read", "host": "claude-1", "conv": sid, "path": "a.txt", "start": 5, "end": 20},
    ]
    path = tmp_path / "run.jsonl"
    path.write_text("# a recorded e2e run\n" + "\n".join(json.dumps(e) for e in events) + "\n")
    return str(path)


def test_a_recorded_trace_replays_through_the_policies(tmp_path) -> None:  # noqa: ANN001
    events = load_trace(_trace(tmp_path))
    with tempfile.TemporaryDirectory() as base:
        ours, oracle, none = Ours(), Oracle(), NoCache()
        Engine(base, [none, ours, oracle]).run(events)
    assert ours.wrong == 0 and oracle.wrong == 0
    assert ours.kinds["stub"] == 2 and ours.kinds["full"] == 2  # re-read, cold window stub; full after compaction
    assert none.kinds["full"] == 4


def test_the_bench_accepts_trace_files(tmp_path) -> None:  # noqa: ANN001
    out = subprocess.run([sys.executable, str(REPO / "bench" / "cache_replay.py"), "--scale", "0.1", "--json",
                          "--trace", _trace(tmp_path)], capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    row = doc["rows"][-1]
    assert row["scenario"] == "recorded: run" and row["wrong"]["ours"] == 0
    assert doc["total_wrong"]["ours"] == 0
    # the traces recorded from the real Claude Code e2e runs are replayed by default
    recorded = {r["scenario"] for r in doc["rows"] if r["scenario"].startswith("recorded: claude-")}
    assert {"recorded: claude-subagent", "recorded: claude-concurrent"} <= recorded


TRACES = sorted((REPO / "bench" / "traces").glob("*.jsonl"))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_every_trace_gets_no_wrong_answer(path) -> None:  # noqa: ANN001
    """Every trace in bench/traces, recorded or adversarial, through our cache and the oracle:
    no stub, pointer or diff for bytes the context does not hold under the name it speaks of."""
    with tempfile.TemporaryDirectory() as base:
        ours, oracle = Ours(), Oracle()
        Engine(base, [ours, oracle]).run(load_trace(str(path)))
    assert oracle.wrong == 0, oracle.wrong_examples
    assert ours.wrong == 0, ours.wrong_examples
    assert ours.reads == oracle.reads > 0


def test_the_name_and_identity_traces_are_all_there() -> None:
    names = {p.stem for p in TRACES}
    assert {"claude-symlink-retarget", "claude-symlink-alias", "claude-hardlink-rename", "cursor-two-roots",
            "claude-cwd-two-roots", "codex-two-roots-two-sessions", "claude-carry-attached", "claude-carry-edited",
            "claude-mcp-reconnect", "codex-mcp-reconnect"} <= names
