"""The model's id for a built-in tool call of GitHub Copilot CLI, read from its session log.

Copilot's preToolUse and postToolUse payloads name no call (1.0.102: `sessionId`, `timestamp`,
`cwd`, `toolName`, `toolArgs`, and `toolResult` after the call). Its session log,
`<config dir>/session-state/<sessionId>/events.jsonl`, does: per call a `tool.execution_start`
line (`toolCallId`, `toolName`, `arguments`), and per hook run a `hook.start` line. Verified on
1.0.102 in runs (tests/fixtures/payloads/copilot/builtin/):

- preToolUse runs once per call, but its `hook.start` line is one per model response: its
  `input.toolCalls` lists every call of that response (`id`, `name`, `args`), and the line's own
  `timestamp` (ISO form) is the payload's `timestamp` for the main agent, or a millisecond later
  at times (a subagent's: 5-10 ms later);
- postToolUse runs once per call, after the tool, and its `hook.start` line carries the payload
  itself (`input.timestamp` equal to the payload's); the call's `tool.execution_complete` line
  comes after that hook;
- Copilot writes the log behind its hooks (a hook may start before the lines about its own call
  are on disk), in order: once a line is there, every line written before it is too;
- a subagent's lines sit in its parent's log with their `agentId`, and its hook payloads name
  its own session (and `agentId`), not the parent's: its log is not found here.

So a call's id is the one entry of its own response that has the payload's tool and arguments,
found only once the hook's own `hook.start` line is on disk (waited for, at most ID_WAIT_S).
Anything else (two identical calls in one response, a subagent, no such line, a log that is not
a regular file of ours) gives None: the call is then not the cache's to answer or credit.
Standard library only (the hook path).
"""

from __future__ import annotations

import os
import time

from leanctx import fastjson

ID_WAIT_S = 1.0  # how long a hook waits for Copilot to write its own hook.start line
PRE_SLACK_MS = 50  # how much later than its payload a preToolUse hook.start line may be stamped
TAIL_BYTES = 4 * 1024 * 1024  # how far back from the log's end the lines are looked for
MAX_ID = 200  # as publish.MAX_CALL_ID
_POLL_S = 0.01


def log_path(session_id: object, config_dir: str) -> str | None:
    """`<config dir>/session-state/<session id>/events.jsonl`, for a session id that is a plain name."""
    if not isinstance(session_id, str) or not 0 < len(session_id) <= 200 or session_id in (".", ".."):
        return None
    if any(not (c.isalnum() or c in "-_.") for c in session_id):
        return None
    return os.path.join(config_dir, "session-state", session_id, "events.jsonl")


def iso_ms(stamp: int) -> str:
    """Epoch milliseconds as Copilot writes a log line's `timestamp` (`2026-12-02T05:31:02.887Z`)."""
    secs, ms = divmod(stamp, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + ".%03dZ" % ms


def call_id(event: str, payload: dict, config_dir: str, wait_s: float = ID_WAIT_S) -> str | None:
    """The id of the built-in call a `preToolUse` / `postToolUse` payload stands for, or None."""
    if event not in ("preToolUse", "postToolUse") or not isinstance(payload, dict) or payload.get("agentId") is not None:
        return None
    stamp, tool, args, session = payload.get("timestamp"), payload.get("toolName"), payload.get("toolArgs"), payload.get("sessionId")
    if isinstance(stamp, bool) or not isinstance(stamp, int) or stamp <= 0 or not isinstance(tool, str) or not isinstance(args, dict):
        return None
    path = log_path(session, config_dir)
    if path is None:
        return None
    find = _pre_id if event == "preToolUse" else _post_id
    deadline = time.monotonic() + wait_s
    while True:
        lines = _tail(path)
        if lines is None or (not lines and not os.path.isdir(os.path.dirname(path))):
            return None  # not a log of ours, or no such session (doctor's smoke run): nothing to wait for
        found = find(lines, session, stamp, tool, args)
        if found is not _NOT_YET:
            return found if isinstance(found, str) and 0 < len(found) <= MAX_ID else None
        if time.monotonic() >= deadline:
            return None
        time.sleep(_POLL_S)


_NOT_YET = object()  # the hook's own line is not on disk yet


def _entries(lines: list, marker: bytes):
    """(index, entry) of every line holding `marker` that parses as a JSON object."""
    for i, line in enumerate(lines):
        if marker not in line:
            continue
        try:
            entry = fastjson.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(entry, dict) and isinstance(entry.get("data"), dict):
            yield i, entry


def _own_hook(entry: dict, hook: str, session: str) -> dict | None:
    """The `input` of a main-agent `hook.start` line of `hook` in `session`."""
    data = entry["data"]
    if entry.get("type") != "hook.start" or data.get("hookType") != hook or "agentId" in entry:
        return None
    given = data.get("input")
    if not isinstance(given, dict) or given.get("sessionId") != session:
        return None
    return given


def _pre_id(lines: list, session: str, stamp: int, tool: str, args: dict):
    # the line is stamped a moment after the payload (the same millisecond mostly, one later at
    # times): a main-agent preToolUse line stamped from the payload's time on is this run's, as
    # the main agent's next response cannot come before this hook has ended
    low, high = iso_ms(stamp), iso_ms(stamp + PRE_SLACK_MS)  # one fixed width: ordered as strings
    mine = [given for _, entry in _entries(lines, b'"preToolUse"')
            if isinstance(entry.get("timestamp"), str) and low <= entry["timestamp"] <= high
            and (given := _own_hook(entry, "preToolUse", session)) is not None]
    if not mine:
        return _NOT_YET
    ids = [c.get("id") for given in mine for c in (given.get("toolCalls") if isinstance(given.get("toolCalls"), list) else [])
           if isinstance(c, dict) and c.get("name") == tool and c.get("args") == args]
    return ids[0] if len(ids) == 1 else None


def _post_id(lines: list, session: str, stamp: int, tool: str, args: dict):
    mine = [i for i, entry in _entries(lines, b'"postToolUse"')
            if (given := _own_hook(entry, "postToolUse", session)) is not None and given.get("timestamp") == stamp
            and given.get("toolName") == tool and given.get("toolArgs") == args]
    if not mine:
        return _NOT_YET
    if len(mine) > 1:
        return None
    before = lines[: mine[0]]
    pending: dict = {}
    for _, entry in _entries(before, b'"tool.execution_'):
        data = entry["data"]
        if "agentId" in entry or not isinstance(data.get("toolCallId"), str):
            continue
        if entry.get("type") == "tool.execution_start" and data.get("toolName") == tool and data.get("arguments") == args:
            pending[data["toolCallId"]] = True
        elif entry.get("type") == "tool.execution_complete":
            pending.pop(data["toolCallId"], None)
    if len(pending) != 1:
        return None
    (found,) = pending
    # the response that asked for it must be there, and ask for it once: two identical calls of
    # one response cannot be told apart
    for _, entry in _entries(before, b'"assistant.message"'):
        requests = entry["data"].get("toolRequests")
        if entry.get("type") != "assistant.message" or "agentId" in entry or not isinstance(requests, list):
            continue
        if any(isinstance(r, dict) and r.get("toolCallId") == found for r in requests):
            same = [r for r in requests if isinstance(r, dict) and r.get("name") == tool and r.get("arguments") == args]
            return found if len(same) == 1 else None
    return None


def _tail(path: str) -> list | None:
    """The complete lines of the log's last TAIL_BYTES; None when it is not a regular file of
    this user's (a symlink included). A missing file is no lines yet."""
    from leanctx.agents.logtail import tail

    lines = tail(path, TAIL_BYTES, own_only=True, missing_ok=True)
    return None if lines is None else lines[:-1]  # the last one is not complete until its newline is written
