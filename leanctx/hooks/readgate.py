"""The built-in reader gate: Claude Code's own `Read` tool under the read cache's rules.

Before a `Read` runs (PreToolUse, matcher `Read`), the hook notes who is reading (the same note
the ctx_read gate writes, under the call's `tool_use_id`) and asks the cache daemon, over its
Unix socket, op "gate": does this context provably hold this file (range) unchanged? The daemon
identifies the hook's process from the kernel, exactly as it does an MCP connection, and answers
with ctx_read's own decision: a stub, a pointer with only the new lines, or a diff against a copy
still in context; the hook then refuses the call with that text as the reason, which Claude Code
(2.1.197, verified) hands the model as the call's tool result. Any other answer, or no daemon, or
any doubt: no output, the Read runs.

After a `Read` (PostToolUse), op "credit" hands the daemon what the model received
(`tool_response.file.content`, its `startLine` and `numLines`); the daemon credits it under the
call's id only when it equals the file's lines on disk at that moment. Claude Code's own
"file unchanged" answer (`tool_response.type` "file_unchanged") carries no content and is never
credited.

Asking for the same file again right after its stub returns the content (the daemon remembers
which names the gate refused). `LEANCTX_BUILTIN_GATE=0` lets every built-in read through and
credits nothing. Standard library only; never starts the daemon; every failure is silence.
"""

from __future__ import annotations

import os

from leanctx import fastjson

ENV = "LEANCTX_BUILTIN_GATE"
TOOL = "Read"
CONNECT_TIMEOUT_S = 0.3
# the daemon may wait up to 0.5 s for the host's transcript to show the call (cache/transcript.py)
ANSWER_TIMEOUT_S = 2.0  # a hung daemon delays a Read by at most this much; a slow answer: no opinion
DEFAULT_LIMIT = 2000  # lines Claude Code's Read returns when the call names no limit
MAX_LINE = 10**9
MAX_PATH_CHARS = 4096
REFUSALS = ("stub", "pointer", "diff")
# the daemon's socket and wire format (cache/client.py: SOCKET_NAME, PROTOCOL; a test pins that
# they agree): not imported from there, which would cost every Read the import of json and re
SOCKET_NAME = "leanctx.sock"
PROTOCOL = 1


def switched_off() -> bool:
    """LEANCTX_BUILTIN_GATE read as every cache switch is (cache/switches.py, a small module)."""
    from leanctx.cache.switches import switched_off as off

    return off(os.environ.get(ENV))


def _line(value: object) -> int | None:
    """A positive line number or count, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_LINE:
        return value
    return None


def _path(value: object) -> str | None:
    if isinstance(value, str) and 0 < len(value) <= MAX_PATH_CHARS and "\x00" not in value and os.path.isabs(value):
        return value
    return None


def requested(tool_input: object) -> tuple[str, int, int] | None:
    """(path, first line, last line) a `Read` call asks for; None when we cannot say for sure
    (an offset or limit that is not a positive number, pages of a PDF, a relative path)."""
    if not isinstance(tool_input, dict):
        return None
    path = _path(tool_input.get("file_path"))
    if path is None or set(tool_input) - {"file_path", "offset", "limit"}:
        return None
    offset, limit = tool_input.get("offset"), tool_input.get("limit")
    start = 1 if offset is None else _line(offset)
    count = DEFAULT_LIMIT if limit is None else _line(limit)
    if start is None or count is None:
        return None
    return path, start, start + count - 1


def delivered(tool_input: object, tool_response: object) -> tuple[str, int, int, str] | None:
    """(path, first line, last line, content) a `Read` gave the model as text; None for anything
    else (an image, a notebook, a PDF, Claude Code's own "file unchanged" answer, an odd shape)."""
    asked = requested(tool_input)
    if asked is None or not isinstance(tool_response, dict) or tool_response.get("type") != "text":
        return None
    file = tool_response.get("file")
    if not isinstance(file, dict) or file.get("filePath") != asked[0]:
        return None
    content, start, count = file.get("content"), _line(file.get("startLine")), _line(file.get("numLines"))
    if not isinstance(content, str) or not content or start is None or count is None or start != asked[1]:
        return None
    return asked[0], start, start + count - 1, content


def _connect(path: str):  # -> socket.socket
    """Connect to the daemon's Unix socket; a path too long for sun_path goes through
    /proc/self/fd/<folder fd>/<name> as the daemon's own clients do (cache/client.py)."""
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    fd = None
    try:
        addr = path
        if len(os.fsencode(path)) >= 100 and os.path.isdir("/proc/self/fd"):
            folder, name = os.path.split(path)
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            addr = f"/proc/self/fd/{fd}/{name}"
        sock.connect(addr)
    except OSError:
        sock.close()
        raise
    finally:
        if fd is not None:
            os.close(fd)
    return sock


def ask(data_dir: str, op: str, args: dict) -> dict | None:
    """One request to the running daemon; None when there is none or it does not answer well."""
    path = os.path.join(data_dir, SOCKET_NAME)
    if not os.path.exists(path):
        return None  # not running: never started from here
    try:
        sock = _connect(path)
    except OSError:
        return None
    try:
        sock.settimeout(ANSWER_TIMEOUT_S)
        conn = {"connection_id": f"hook-{os.getpid()}", "env": {}, "host_pid": None, "host_start_ticks": None, "cwd": None}
        line = fastjson.dumps({"v": PROTOCOL, "op": op, "conn": conn, "args": args}) + "\n"
        sock.sendall(line.encode("utf-8", "surrogatepass"))
        buf = b""
        while not buf.endswith(b"\n") and len(buf) < (1 << 22):
            chunk = sock.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
    except OSError:  # socket.timeout is an OSError
        return None
    finally:
        sock.close()
    try:
        answer = fastjson.loads(buf.decode("utf-8", "surrogatepass"))
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("ok") is not True or not isinstance(answer.get("result"), dict):
        return None
    return answer["result"]


def before_read(data_dir: str, agent, event) -> str:  # noqa: ANN001 - Agent, HookEvent
    """The PreToolUse answer for a built-in read: a refusal carrying the cache's text, or ''."""
    asked = requested(event.tool_input)
    if asked is None or switched_off() or not isinstance(event.tool_use_id, str):
        return ""
    from leanctx.hooks.publish import note_read_call

    if note_read_call(data_dir, event) is None:
        return ""
    path, start, end = asked
    result = ask(data_dir, "gate", {"path": path, "start_line": start, "end_line": end, "call_id": event.tool_use_id})
    if result is None:
        return ""
    if result.get("kind") == "full" and result.get("again") is True:
        return again_output(agent, event)
    if result.get("kind") not in REFUSALS:
        return ""
    text = result.get("text")
    if not isinstance(text, str) or not text:
        return ""
    return agent.guard_output(event.event, text)


def again_output(agent, event) -> str:  # noqa: ANN001 - Agent, HookEvent
    """Asked again right after a refusal: the content must come. Claude Code's Read answers a
    re-read of the same range of a file whose mtime did not move with its own "file unchanged"
    note instead of the content (2.1.197, verified); one more line in `limit` makes it another
    range, so the host reads and sends the file. The call's input is changed, not its permission:
    the host still decides whether it may run."""
    tool_input = dict(event.tool_input)
    limit = tool_input.get("limit")
    tool_input["limit"] = (limit if isinstance(limit, int) and not isinstance(limit, bool) else DEFAULT_LIMIT) + 1
    return fastjson.dumps({"hookSpecificOutput": {"hookEventName": event.event, "updatedInput": tool_input}})


def after_read(data_dir: str, payload: dict, event) -> None:  # noqa: ANN001 - HookEvent
    """Hand the daemon what a built-in read delivered, to credit when it matches the disk."""
    got = delivered(event.tool_input, payload.get("tool_response"))
    if got is None or switched_off() or not isinstance(event.tool_use_id, str):
        return
    path, start, end, content = got
    ask(data_dir, "credit", {"path": path, "start_line": start, "end_line": end, "content": content,
                             "call_id": event.tool_use_id})
