"""Codex's rollout as the authority on what a conversation's context holds (leanctx/cache/rollout.py).

The lines are shaped as Codex 0.171.0 writes them (tests/e2e/test_codex_cache_e2e.py observes the
real CLI)."""
from __future__ import annotations

import json
import os
import threading

from leanctx.cache import rollout
from leanctx.cache.rollout import RolloutIndex, subagent_rollout


def line(kind: str, payload: dict) -> bytes:
    return (json.dumps({"timestamp": "2026-12-01T00:00:00.000Z", "ordinal": 0, "type": kind, "payload": payload},
                       ensure_ascii=False) + "\n").encode()


def call(cid: str) -> bytes:
    return line("response_item", {"type": "function_call", "name": "ctx_read", "namespace": "mcp__leanctx",
                                  "arguments": "{}", "call_id": cid})


def output(cid: str, text: str = "def f(): pass\n") -> bytes:
    return line("response_item", {"type": "function_call_output", "call_id": cid,
                                  "output": [{"type": "input_text", "text": "Wall time: 0.1 seconds\nOutput:"},
                                             {"type": "input_text", "text": text}]})


COMPACTED = line("compacted", {"message": "summary", "replacement_history": [{"type": "message", "role": "user"}]})
ROLLED_BACK = line("event_msg", {"type": "thread_rolled_back", "num_turns": 1})
META = line("session_meta", {"id": "t1", "cwd": "/p"})


def test_a_delivery_holds_until_the_context_loses_it(tmp_path, monkeypatch):
    monkeypatch.setattr(rollout, "WAIT_S", 0.05)
    f = tmp_path / "rollout-2026-12-01T00-00-00-t1.jsonl"
    f.write_bytes(META + call("c1") + output("c1") + call("c2"))
    ix = RolloutIndex()
    assert ix.holds(str(f), ("c1",), "c2")
    with open(f, "ab") as w:
        w.write(output("c2") + COMPACTED + call("c3"))
    assert not ix.holds(str(f), ("c1",), "c3")  # compacted between the delivery and this call
    assert ix.holds(str(f), ("c1",), "c2")  # as seen from a call made before it
    with open(f, "ab") as w:
        w.write(output("c3") + call("c4"))
    assert ix.holds(str(f), ("c3",), "c4")
    with open(f, "ab") as w:
        w.write(output("c4") + ROLLED_BACK + call("c5"))
    assert not ix.holds(str(f), ("c3",), "c5")  # a rollback: whatever it dropped counts as lost
    assert not ix.holds(str(f), ("c3", "c9"), "c4")  # a delivery never written
    assert not ix.holds(str(f), ("c3",), "c9")  # the asking call not written (waited for, then doubt)
    assert not ix.holds(str(f), ("c3",), None) and not ix.holds(str(f), (), "c4")


def test_a_cut_output_never_holds(tmp_path):
    """Codex cuts a tool output over its budget in the middle; the model never had the rest."""
    f = tmp_path / "r.jsonl"
    cut = "def f_0(): pass\n…405813 chars truncated… def f_5999(): pass\n"
    f.write_bytes(META + call("c1") + output("c1", cut) + call("c2") + output("c2", "x…12 tokens truncated…y")
                  + call("c3") + output("c3") + call("c4"))
    ix = RolloutIndex()
    assert not ix.holds(str(f), ("c1",), "c4")
    assert not ix.holds(str(f), ("c2",), "c4")
    assert ix.holds(str(f), ("c3",), "c4")
    assert not ix.holds(str(f), ("c3", "c1"), "c4")


def test_lines_are_read_incrementally_and_a_half_written_line_waits(tmp_path):
    f = tmp_path / "r.jsonl"
    whole = output("c1")
    f.write_bytes(META + call("c1") + whole[:20])
    ix = RolloutIndex()
    assert not ix.holds(str(f), ("c1",), "c1")  # its output is still being written
    with open(f, "ab") as w:
        w.write(whole[20:] + COMPACTED[:10])
    assert ix.holds(str(f), ("c1",), "c1")
    with open(f, "ab") as w:
        w.write(COMPACTED[10:] + call("c2"))
    assert not ix.holds(str(f), ("c1",), "c2")


def test_anything_doubtful_withholds(tmp_path, monkeypatch):
    monkeypatch.setattr(rollout, "WAIT_S", 0.0)
    f = tmp_path / "r.jsonl"
    ix = RolloutIndex()
    assert not ix.holds(str(f), ("c1",), "c2")  # no rollout
    assert not ix.holds(None, ("c1",), "c2")
    f.write_bytes(META + call("c1") + output("c1") + call("c2"))
    assert ix.holds(str(f), ("c1",), "c2")
    link = tmp_path / "link.jsonl"
    os.symlink(f, link)
    assert not ix.holds(str(link), ("c1",), "c2")  # a symlink is not followed
    # rewritten in place with a compaction in it: indexed again from the start
    f.write_bytes(META + call("c1") + output("c1") + COMPACTED + call("c2"))
    assert not ix.holds(str(f), ("c1",), "c2")
    # an unreadable line that may be a compaction counts as one
    g = tmp_path / "g.jsonl"
    g.write_bytes(META + call("c1") + output("c1") + b'{"type":"compacted","payload":{"mess\n' + call("c2"))
    assert not ix.holds(str(g), ("c1",), "c2")
    # an output in a shape we do not know cannot be said to be whole
    h = tmp_path / "h.jsonl"
    h.write_bytes(META + call("c1") + line("response_item", {"type": "function_call_output", "call_id": "c1",
                                                             "output": 7}) + call("c2"))
    assert not ix.holds(str(h), ("c1",), "c2")


def test_a_fifo_at_the_rollout_path_never_holds_the_daemon(tmp_path):
    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    result = []
    worker = threading.Thread(target=lambda: result.append(RolloutIndex().holds(str(fifo), ("c1",), "c2")), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        with open(fifo, "wb"):
            pass
        raise AssertionError("opening a FIFO as the rollout blocked")
    assert result == [False]


def test_a_subagents_rollout_is_found_beside_its_parents(tmp_path):
    parent = tmp_path / "rollout-2026-12-01T00-00-00-t1.jsonl"
    parent.write_bytes(META)
    assert subagent_rollout(str(parent), "t2") is None  # not there (another day's folder): nothing credited
    sub = tmp_path / "rollout-2026-12-01T00-00-05-t2.jsonl"
    sub.write_bytes(META)
    assert subagent_rollout(str(parent), "t2") == str(sub)
    (tmp_path / "rollout-2026-12-01T00-00-09-t2.jsonl").write_bytes(META)
    assert subagent_rollout(str(parent), "t2") is None  # two candidates: doubt
    assert subagent_rollout(str(parent), "../t2") is None and subagent_rollout(None, "t2") is None


def test_a_compaction_without_a_hook_gets_no_wrong_stub(world):
    """A Codex conversation compacts and its PreCompact hook never arrives: the rollout's
    compacted line alone makes the next read content."""
    from tests.cache.conftest import code

    world.write("a.py", code(300))
    h = world.host("codex")
    c = world.conn(h)
    world.session(h, "t1")
    assert world.read(c, "a.py")["kind"] == "full"
    assert world.read(c, "a.py")["kind"] == "stub"
    world.rollout_line(world.rollout_of("t1"), "compacted", {"message": "summary", "replacement_history": []})
    assert world.read(c, "a.py")["kind"] == "full"
    assert world.read(c, "a.py")["kind"] == "stub"  # held again in the new context


RECORDED = os.path.join(os.path.dirname(__file__), os.pardir, "e2e", "recorded_payloads", "codex", "shell_reads.json")


def test_a_shell_call_that_yielded_before_its_process_exited_never_holds(tmp_path):
    """Codex 0.171.0's rollout lines of real shell calls (exec_command): a call whose process was
    still running when it returned ("Process running with session ID N") gave the model none of
    the output its post-tool hook carries (that came under a later write_stdin call); a call
    whose process exited holds; one cut by its token budget does not."""
    lines = json.loads(open(RECORDED, encoding="utf-8").read())["rollout_lines"]
    f = tmp_path / "rollout-2026-12-01T00-00-00-t1.jsonl"
    f.write_bytes(META + b"".join((json.dumps(v, ensure_ascii=False) + "\n").encode() for v in lines) + call("asking"))
    outputs = {v["payload"]["call_id"]: v["payload"]["output"] for v in lines
               if v["payload"]["type"] in ("function_call_output", "custom_tool_call_output")}
    assert "Process running with session ID" in outputs["call_yield"]  # the recorded shapes
    assert "Process exited with code 0" in outputs["call_poll"] and "alpha\nbeta" in outputs["call_poll"]
    ix = RolloutIndex()
    assert ix.holds(str(f), ("call_cat",), "asking") and ix.holds(str(f), ("call_sed", "call_workdir"), "asking")
    assert not ix.holds(str(f), ("call_yield",), "asking")
    assert not ix.holds(str(f), ("call_cut",), "asking")  # "Warning: truncated output (original token count: …)"
    assert not ix.holds(str(f), ("call_cat", "call_yield"), "asking")


def test_an_exec_output_header_without_its_exit_line_is_not_whole():
    assert not rollout._truncated("Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 1\nOriginal token count: 1\nOutput:\nx")
    assert not rollout._truncated("Chunk ID: a\nWall time: 0.1 seconds\nProcess exited with code 0\nOriginal token count: 1\nOutput:\nx")
    assert rollout._truncated("Chunk ID: a\nWall time: 0.2 seconds\nProcess running with session ID 7\nOriginal token count: 0\nOutput:\n")
    assert rollout._truncated("Chunk ID: a\nWall time: 0.2 seconds\nsomething else\nOutput:\nProcess exited with code 0\n")
    assert rollout._truncated("Chunk ID: a\nProcess exited with code 0")  # no Output: line at all
    # other tools' outputs are not read as exec headers: a file that says so is only text
    assert not rollout._truncated("Exit code: 0\nWall time: 0.1 seconds\nOutput:\nProcess running with session ID 1\n")
