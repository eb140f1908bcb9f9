"""Old conversation records leave the data dir (the daemon prunes at start and hourly)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import time
from pathlib import Path

import pytest

from leanctx.cache import client
from leanctx.cache.prune import KEEP_S, keep_seconds, prune_records

_spec = importlib.util.spec_from_file_location("leanctx_test_service_support", Path(__file__).with_name("test_service_support.py"))
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

DAY = 86400.0


def record(folder: Path, name: str, age_s: float, now: float, updated_age_s: float | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"{name}.json"
    updated = now - (age_s if updated_age_s is None else updated_age_s)
    p.write_text(json.dumps({"conversation_id": name, "updated_ts": updated}))
    os.utime(p, (now - age_s, now - age_s))
    return p


def test_old_records_go_recent_ones_and_foreign_files_stay(tmp_path: Path) -> None:
    now = time.time()
    claude, cursor = tmp_path / "conversations" / "claude", tmp_path / "conversations" / "cursor"
    old = record(claude, "old", 8 * DAY, now)
    fresh = record(claude, "fresh", 2 * 3600, now)
    touched = record(claude, "touched-late", 8 * DAY, now, updated_age_s=DAY)  # updated_ts decides too
    old_cursor = record(cursor, "old-chat", 30 * DAY, now)
    mine_not = claude / "notes.txt"
    mine_not.write_text("a user's file")
    os.utime(mine_not, (now - 90 * DAY, now - 90 * DAY))
    stale_tmp = claude / ".x.json.4242.tmp"
    stale_tmp.write_text("{")
    os.utime(stale_tmp, (now - 2 * DAY, now - 2 * DAY))
    live_tmp = claude / ".y.json.4243.tmp"
    live_tmp.write_text("{")
    outside = tmp_path / "elsewhere"
    record(outside, "linked-old", 40 * DAY, now)
    (tmp_path / "conversations" / "linked").symlink_to(outside, target_is_directory=True)

    assert prune_records(tmp_path, KEEP_S, now) == 3
    assert not old.exists() and not old_cursor.exists() and not stale_tmp.exists()
    assert fresh.exists() and touched.exists() and mine_not.exists() and live_tmp.exists()
    assert (outside / "linked-old.json").exists(), "followed a symlinked folder"
    assert prune_records(tmp_path, KEEP_S, now) == 0
    assert prune_records(tmp_path / "missing", KEEP_S, now) == 0


def test_a_folder_whose_lock_a_hook_holds_is_left_for_the_next_round(tmp_path: Path) -> None:
    import fcntl

    now = time.time()
    folder = tmp_path / "conversations" / "codex"
    old = record(folder, "old", 9 * DAY, now)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert prune_records(tmp_path, KEEP_S, now) == 0 and old.exists()
    finally:
        os.close(fd)
    assert prune_records(tmp_path, KEEP_S, now) == 1 and not old.exists()


@pytest.mark.parametrize(("raw", "days"), [("", 7), ("3", 3), ("1.5", 1.5), ("0.5", 7), ("0", 7), ("-2", 7),
                                           ("nan", 7), ("inf", 7), ("seven", 7)])
def test_keep_days_from_the_environment(raw: str, days: float) -> None:
    assert keep_seconds({"LEANCTX_RECORD_KEEP_DAYS": raw}) == days * DAY


def test_the_daemon_prunes_at_start_and_reports_it(home: Path, data_dir: Path, tmp_path: Path) -> None:
    now = time.time()
    old = record(data_dir / "conversations" / "claude", "old", 3 * DAY, now)
    fresh = record(data_dir / "conversations" / "claude", "fresh", 600, now)
    env = S.subprocess_env(home, data_dir, LEANCTX_RECORD_KEEP_DAYS="2")
    proc = S.start_daemon(env, tmp_path / "daemon.log")
    try:
        deadline = time.monotonic() + 20
        while old.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not old.exists() and fresh.exists()
        status = client.ServiceClient(data_dir).request("status")
        assert status["records_pruned"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
