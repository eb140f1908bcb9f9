"""One Claude Code session driven through the real hook wrapper, and its record as the cache's
reader sees it (shared by the record-cap and hook-lock tests)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from leanctx.cache.scope import RecordSnapshot
from tests.hooks.test_hook_entry import PAYLOADS, run_hook


def session(hook_wrapper: Path) -> tuple[dict, Callable[..., None]]:
    """(the recorded SessionStart payload, fire(event, **payload fields)): each event runs the real
    wrapper with that payload updated, which must exit 0 and print nothing (PreCompact: only the
    summariser's instruction, hooks/compaction.py)."""
    base = json.loads((PAYLOADS / "claude" / "SessionStart.json").read_text())

    def fire(event: str, **extra: object) -> None:
        proc = run_hook(hook_wrapper, "claude", event, json.dumps(dict(base, hook_event_name=event, **extra)).encode())
        quiet = proc.stdout == b"" or (event == "PreCompact" and proc.stdout.startswith(b"leanctx: "))
        assert proc.returncode == 0 and quiet, (proc.stdout, proc.stderr)

    return base, fire


def seen_record(data_dir: Path, sid: str):
    """The conversation's record as a fresh cache reader parses it."""
    snap = RecordSnapshot(str(data_dir), persist=False)
    snap.refresh()
    [rec] = [r for r in snap.records() if r.conversation_id == sid]
    return rec
