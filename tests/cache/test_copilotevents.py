"""Copilot CLI's session log as the judge of what a call delivered (leanctx/cache/copilotevents.py):
lines shaped as 1.0.102 writes them (tests/e2e/test_copilot_builtin_read_e2e.py runs the real CLI)."""
from __future__ import annotations

import json
import os

from leanctx.cache.copilotevents import CopilotEventsIndex


def line(kind: str, **data) -> str:
    return json.dumps({"type": kind, "data": data, "id": "x", "timestamp": "2026-12-02T09:25:15.175Z"}) + "\n"


def start(cid: str) -> str:
    return line("tool.execution_start", toolCallId=cid, toolName="view", arguments={"path": "/p/big.py"})


def complete(cid: str, ok: bool = True) -> str:
    return line("tool.execution_complete", toolCallId=cid, success=ok, result={"content": "text"})


def post_end(**output) -> str:
    return line("hook.end", hookInvocationId="h", hookType="postToolUse", success=True, **({"output": output} if output else {}))


def test_a_call_completed_untouched_holds_a_replaced_one_does_not(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text(start("a") + post_end() + complete("a")
                   + start("b") + post_end(modifiedResult=True) + complete("b")
                   + start("c") + line("hook.end", hookType="preToolUse", success=True, output={"c": "Denied"}) + post_end() + complete("c"))
    ix = CopilotEventsIndex()
    assert ix.holds(str(log), ["a"]) and ix.holds(str(log), ["c"])
    assert not ix.holds(str(log), ["b"]) and not ix.holds(str(log), ["a", "b"])


def test_calls_side_by_side_a_change_between_counts_for_each(tmp_path):
    """Which call a hook.end belongs to is not written: a change inside a call's span withholds it."""
    log = tmp_path / "events.jsonl"
    log.write_text(start("a") + start("b") + post_end(modifiedResult=True) + complete("b") + post_end() + complete("a")
                   + start("c") + post_end(suppressOutput=True) + complete("c"))
    ix = CopilotEventsIndex()
    assert not ix.holds(str(log), ["a"]) and not ix.holds(str(log), ["b"]) and not ix.holds(str(log), ["c"])


def test_any_doubt_is_no(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text(start("a") + post_end() + complete("a", ok=False) + complete("nostart") + start("open")
                   + start("d") + '{"type":"hook.end", broken\n' + complete("d"))
    ix = CopilotEventsIndex()
    assert not ix.holds(str(log), ["a"])  # not a success
    assert not ix.holds(str(log), ["nostart"])  # its start never seen
    assert not ix.holds(str(log), ["open"])  # not completed (waited for, briefly)
    assert not ix.holds(str(log), ["d"])  # an unreadable hook line in its span
    assert not ix.holds(str(tmp_path / "missing.jsonl"), ["a"]) and not ix.holds(None, ["a"]) and not ix.holds(str(log), [])
    link = tmp_path / "link.jsonl"
    os.symlink(log, link)
    good = tmp_path / "good.jsonl"
    good.write_text(start("e") + complete("e"))
    os.symlink(good, tmp_path / "goodlink.jsonl")
    assert ix.holds(str(good), ["e"]) and not ix.holds(str(tmp_path / "goodlink.jsonl"), ["e"])
