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


QWEN_START = (b'{"uuid":"u1","parentUuid":null,"sessionId":"s","type":"user","message":{"role":"user","parts":[{"text":"read"}]}}\n'
              b'{"uuid":"u2","parentUuid":"u1","type":"system","subtype":"ui_telemetry","systemPayload":{}}\n')
QWEN_RESULT = b'{"uuid":"u3","parentUuid":"u2","type":"tool_result","message":{"parts":[{"text":"a rewind of chat_compression"}]}}\n'
QWEN_COMPRESSED = b'{"uuid":"u4","parentUuid":"u3","type":"system","subtype":"chat_compression","systemPayload":{"info":{}}}\n'
QWEN_REWIND = b'{"uuid":"u5","parentUuid":"u1","type":"system","subtype":"rewind","systemPayload":{"truncatedCount":4}}\n'


def test_qwen_counts_compressions_and_rewinds_only(tmp_path):
    """Qwen Code's recording: a start is no replacement; tool output that merely names one is not
    either; a chat_compression or rewind system record is, and an unreadable line naming one counts."""
    chat = tmp_path / "s.jsonl"
    chat.write_bytes(QWEN_START + QWEN_RESULT)
    assert history_replacements(str(chat), "qwen") == 0
    with open(chat, "ab") as f:
        f.write(QWEN_COMPRESSED + QWEN_REWIND[:30])
    assert history_replacements(str(chat), "qwen") == 1
    with open(chat, "ab") as f:
        f.write(QWEN_REWIND[30:] + b'{"type":"system","subtype":"chat_compression",\n')
    assert history_replacements(str(chat), "qwen") == 3
    # the same file read as another host's recording counts that host's lines, apart
    assert history_replacements(str(chat), "gemini") == 0
    assert history_replacements(str(chat), "codex") is None  # not a host this module reads
    chat.write_bytes(QWEN_START)  # rewritten with fewer: an earlier counter must not come back
    assert history_replacements(str(chat), "qwen") is None


def test_a_qwen_compression_without_a_hook_gets_no_wrong_stub(world):
    """A Qwen Code conversation whose PreCompact hook never arrives: the chat recording's
    chat_compression record alone makes the next read content."""
    from tests.cache.conftest import code

    world.write("a.py", code(400))
    h = world.host("qwen")
    c = world.conn(h)
    chat = world.tmp / "qwen-chats" / "q1.jsonl"
    chat.parent.mkdir()
    chat.write_bytes(QWEN_START)
    from bench.support.oracle import publish_event

    for event in ("Notification", "UserPromptSubmit"):  # `qwen -p` starts with a Notification
        publish_event(str(world.data), "qwen", event, {"session_id": "q1", "transcript_path": str(chat),
                                                       "cwd": str(world.root), "hook_event_name": event,
                                                       "prompt": "read", "notification_type": "auth_success"},
                      h.as_host(), world.t)
    assert world.read(c, "a.py")["kind"] == "full"
    assert world.read(c, "a.py")["kind"] == "stub"
    with open(chat, "ab") as f:
        f.write(QWEN_COMPRESSED)
    assert world.read(c, "a.py")["kind"] == "full"
    assert world.read(c, "a.py")["kind"] == "stub"
    chat.unlink()  # no recording: no stub
    assert world.read(c, "a.py")["kind"] == "full"


DROID_MSG = (b'{"type":"message","id":"m1","message":{"role":"user","content":[{"type":"tool_result",'
             b'"tool_use_id":"c1","content":"a file that says {\\"type\\":\\"compaction_state\\"}"}]}}\n')
DROID_COMPACTED = b'{"type":"compaction_state","id":"s1","summaryText":"Fake","removedCount":1}\n'


def test_droid_counts_its_compaction_state_lines_only(tmp_path):
    """Factory Droid's session log: a message (even one whose text names a compaction_state) is no
    replacement; each compaction_state line is one (its automatic compaction runs no hook)."""
    log = tmp_path / "s.jsonl"
    log.write_bytes(b'{"type":"session_start","id":"s"}\n' + DROID_MSG)
    assert history_replacements(str(log), "droid") == 0
    with open(log, "ab") as f:
        f.write(DROID_COMPACTED + DROID_MSG + DROID_COMPACTED[:20])
    assert history_replacements(str(log), "droid") == 1
    with open(log, "ab") as f:
        f.write(DROID_COMPACTED[20:])
    assert history_replacements(str(log), "droid") == 2
    log.write_bytes(DROID_MSG)  # rewritten with fewer: an earlier counter must not come back
    assert history_replacements(str(log), "droid") is None
