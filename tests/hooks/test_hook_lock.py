"""The record lock under contention: a hook that cannot get it never writes the record unlocked,
and its compaction bump still reaches every reader (real processes, the real wrapper under sh -c)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from leanctx.cache.scope import RecordSnapshot
from leanctx.hooks.publish import read_json, record_path
from tests.hooks.claude_session import seen_record, session
from tests.hooks.test_hook_entry import PAYLOADS, hook_wrapper, run_hook  # noqa: F401 - fixture

HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def _counter(data_dir: Path, sid: str) -> tuple[int, bool]:
    """The compaction counter and stub permission as the cache's record reader sees them."""
    rec = seen_record(data_dir, sid)
    return rec.compactions, not rec.subagents


def test_missed_lock_counts_the_compaction_and_never_writes_unlocked(hook_wrapper: Path, data_dir: Path) -> None:
    base, fire = session(hook_wrapper)
    sid = base["session_id"]
    fire("SessionStart", source="startup")
    path = record_path(data_dir, "claude", sid)
    before = Path(path).read_bytes()
    assert _counter(data_dir, sid) == (0, True)

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(Path(path).parent / ".lock")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        fire("PreCompact", trigger="auto")
        fire("UserPromptSubmit", prompt="hi")
    finally:
        holder.communicate("", timeout=30)
    # nothing written under someone else's lock: the holder's write could not be undone
    assert Path(path).read_bytes() == before
    log = (data_dir / "logs" / "hooks.log").read_text()
    assert log.count("record lock busy") == 2 and "PreCompact" in log
    # both missed events count (over-counting costs a re-send; a lost bump could cost a wrong stub),
    # and stubs stay withheld until a locked writer folds them in
    assert _counter(data_dir, sid) == (2, False)

    fire("Stop", last_assistant_message="ok")  # the lock is free again: folds the pending bumps
    record = read_json(path)
    assert record["compactions"] == 2 and record["last_event"] == "Stop"
    assert _counter(data_dir, sid) == (2, True)  # folded once, not added twice
    fire("PreCompact", trigger="manual")
    assert _counter(data_dir, sid) == (3, True)


def test_counter_seen_by_a_running_reader_never_goes_down(hook_wrapper: Path, data_dir: Path) -> None:
    """One long-lived snapshot (as in the daemon) across missed, appended and folded bumps."""
    base = json.loads((PAYLOADS / "claude" / "SessionStart.json").read_text())
    sid = base["session_id"]
    body = json.dumps(dict(base, hook_event_name="PreCompact", trigger="auto")).encode()
    assert run_hook(hook_wrapper, "claude", "SessionStart", json.dumps(dict(base, source="startup")).encode()).returncode == 0
    snap = RecordSnapshot(str(data_dir), persist=False)
    lock = Path(record_path(data_dir, "claude", sid)).parent / ".lock"
    seen = []

    def look() -> None:
        snap.refresh()
        [rec] = [r for r in snap.records() if r.conversation_id == sid]
        seen.append(rec.compactions)

    look()
    for held in (True, True, False, True, False):
        holder = None
        if held:
            holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert holder.stdout.readline() == "held\n"
        try:
            assert run_hook(hook_wrapper, "claude", "PreCompact", body).returncode == 0
            look()
        finally:
            if holder:
                holder.communicate("", timeout=30)
    assert seen == [0, 1, 2, 3, 4, 5]
