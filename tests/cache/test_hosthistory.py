"""Gemini CLI's chat recording as the counter of history replacements (leanctx/cache/hosthistory.py)."""
from __future__ import annotations

import os

from leanctx.cache.hosthistory import history_replacements

START = b'{"sessionId":"s","projectHash":"h","kind":"main"}\n{"$set":{"messages":[{"id":"1","type":"user"}]}}\n'
MSG = b'{"id":"2","type":"user","content":[{"text":"read"}]}\n{"$set":{"lastUpdated":"t"}}\n'
COMPRESSED = b'{"$set":{"messages":[{"id":"3","type":"user","content":[{"text":"<state_snapshot>"}]}]}}\n'


def test_counts_each_replacement_incrementally(tmp_path):
    chat = tmp_path / "session.jsonl"
    chat.write_bytes(START + MSG)
    assert history_replacements(str(chat)) == 1  # the start; messages and metadata are no replacement
    with open(chat, "ab") as f:
        f.write(MSG + COMPRESSED)
    assert history_replacements(str(chat)) == 2  # a compression (or masking, rollback) moves it
    with open(chat, "ab") as f:
        f.write(b'{"$rewindTo":"2"}\n{"$set":{"mess')  # a rewind; a line still being written
    assert history_replacements(str(chat)) == 3
    with open(chat, "ab") as f:
        f.write(b'ages":[]}}\n')
    assert history_replacements(str(chat)) == 4


def test_anything_doubtful_withholds(tmp_path):
    chat = tmp_path / "session.jsonl"
    assert history_replacements(str(chat)) is None  # no recording (switched off, not written yet)
    assert history_replacements(None) is None and history_replacements("session.jsonl") is None
    chat.write_bytes(START + COMPRESSED)
    assert history_replacements(str(chat)) == 2
    link = tmp_path / "link.jsonl"
    os.symlink(chat, link)
    assert history_replacements(str(link)) is None
    chat.write_bytes(START)  # rewritten with fewer: an earlier counter must not come back
    assert history_replacements(str(chat)) is None


def test_a_fifo_at_the_recording_path_never_holds_the_daemon(tmp_path):
    """A FIFO where the chat recording should be: no wait for a writer, no stubs."""
    import threading

    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    result = []
    worker = threading.Thread(target=lambda: result.append(history_replacements(str(fifo))), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        with open(fifo, "wb"):
            pass
        raise AssertionError("opening a FIFO as the chat recording blocked")
    assert result == [None]


def test_a_compression_without_a_hook_gets_no_wrong_stub_in_the_replay() -> None:
    """The recorded Gemini session, with a compression written only into the chat recording
    between the stub and a third read: that read must be content."""
    import tempfile
    from pathlib import Path

    from bench.support.replay import Engine, Oracle, Ours, load_trace

    trace = Path(__file__).resolve().parents[2] / "bench" / "traces" / "gemini-compression.jsonl"
    with tempfile.TemporaryDirectory() as base:
        ours, oracle = Ours(), Oracle()
        Engine(base, [ours, oracle]).run(load_trace(str(trace)))
    assert oracle.wrong == 0
    assert ours.wrong == 0, ours.wrong_examples
    assert ours.kinds["stub"] == 1  # the re-read before the compression still saves


# -- Codex CLI's rollout ------------------------------------------------------------------------

ROLLOUT_START = (b'{"timestamp":"t","ordinal":0,"type":"session_meta","payload":{"id":"s"}}\n'
                 b'{"timestamp":"t","ordinal":1,"type":"response_item","payload":{"type":"function_call_output",'
                 b'"call_id":"c1","output":"a file that says \\"type\\":\\"compacted\\" and thread_rolled_back"}}\n')
# as Codex 0.171.0 wrote it at an automatic compaction (tests/e2e/test_codex_cache_e2e.py)
COMPACTED = b'{"timestamp":"t","ordinal":28,"type":"compacted","payload":{"message":"summary","replacement_history":[]}}\n'
ROLLED_BACK = b'{"timestamp":"t","ordinal":40,"type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}\n'


def test_codex_rollout_counts_compactions_and_rollbacks(tmp_path):
    rollout = tmp_path / "rollout-2026-12-02T00-00-00-s.jsonl"
    rollout.write_bytes(ROLLOUT_START)
    assert history_replacements(str(rollout), "codex") == 0  # the words inside a tool output count for nothing
    with open(rollout, "ab") as f:
        f.write(COMPACTED)
    assert history_replacements(str(rollout), "codex") == 1
    with open(rollout, "ab") as f:
        f.write(ROLLED_BACK + b'{"timestamp":"t","type":"compacted","pay')  # the last line is still being written
    assert history_replacements(str(rollout), "codex") == 2
    with open(rollout, "ab") as f:
        f.write(b'load":{}}\n')
    assert history_replacements(str(rollout), "codex") == 3
    assert history_replacements(str(tmp_path / "missing.jsonl"), "codex") is None
    assert history_replacements(str(rollout), "qwen") is None  # a host whose log this module does not read


def test_a_codex_compaction_whose_hooks_are_late_withholds_the_next_stub(tmp_path):
    """Codex compacts; its PreCompact has not reached leanctx yet, the rollout has the line: the
    conversation's counter moves at once, so what was held before is sent again."""
    from bench.support.oracle import FakeHost, hook
    from leanctx.cache.scope import Connection, Resolver

    data, rollout = tmp_path / "data", tmp_path / "rollout.jsonl"
    rollout.write_bytes(ROLLOUT_START)
    host = FakeHost(7001, 8001, "codex")
    hook(str(data), host, "start", "s1", str(tmp_path), 1_800_000_000.0, transcript_path=str(rollout), source="startup")
    conn = Connection("c", {}, 7001, 8001, str(tmp_path))
    r = Resolver(str(data), clock=lambda: 1_800_000_001.0)
    before = r.resolve(conn, fresh=True)
    assert before.stub_ok
    with open(rollout, "ab") as f:
        f.write(COMPACTED)
    after = r.resolve(conn, fresh=True)
    assert after.key == before.key and after.compactions == before.compactions + 1
    rollout.unlink()  # the log is gone: no stubs
    assert not r.resolve(conn, fresh=True).stub_ok
