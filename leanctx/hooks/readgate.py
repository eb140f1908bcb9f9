"""The built-in reader gate: a host's own file reader and shell reads under the read cache's rules.

Each host module says which of its tool calls read a file and what they delivered
(`Agent.builtin_read_ask` / `builtin_read_delivery`; shell commands: leanctx/readers.py). Below,
Claude Code's `Read` as the example. Before a `Read` runs (PreToolUse, matcher `Read`), the hook notes who is reading (the same note
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

A host whose edit tool accepts only a file its own reader read (Qwen Code: "has not been read in
this session") would refuse every edit after a refused read, so there the refusal comes after the
call ran (`Agent.builtin_refuse_after_run`): the pre-tool hook keeps the cache's text under the
call's id, with the file's stat, and lets the reader run (the host registers the read); the
post-tool hook hands the model that text instead of what the reader returned when the file's stat
did not move in between (else the content stands and is credited as any other). Asked again right
after a refusal, the reader runs as well, and its own "unchanged" note, if that is what it
returned, is replaced by the file's text where that is sure (`Agent.builtin_again_text`).
"""

from __future__ import annotations

import os

from leanctx import fastjson

ENV = "LEANCTX_BUILTIN_GATE"
CONNECT_TIMEOUT_S = 0.3
# the daemon may wait up to 0.5 s for the host's transcript to show the call (cache/transcript.py)
ANSWER_TIMEOUT_S = 2.0  # a hung daemon delays a Read by at most this much; a slow answer: no opinion
REFUSALS = ("stub", "pointer", "diff")
AFTER_DIR = "gate-after"  # the refusals kept for a post-tool hook, one small file per call
AFTER_KEEP_S = 3600.0  # a call whose post-tool hook never came (an error): its file goes after this
MAX_AFTER_ID = 128
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
# the daemon's socket and wire format (cache/client.py: SOCKET_NAME, PROTOCOL; a test pins that
# they agree): not imported from there, which would cost every Read the import of json and re
SOCKET_NAME = "leanctx.sock"
PROTOCOL = 1


def switched_off() -> bool:
    """LEANCTX_BUILTIN_GATE read as every cache switch is (cache/switches.py, a small module)."""
    from leanctx.cache.switches import switched_off as off

    return off(os.environ.get(ENV))


def _connect(path: str):  # -> _socket.socket
    """Connect to the daemon's Unix socket; a path too long for sun_path goes through
    /proc/self/fd/<folder fd>/<name> as the daemon's own clients do (cache/client.py).
    The C module `_socket`, not `socket`: `socket` imports enum and selectors, which cost a
    gated call more time than the daemon's whole answer (python -X importtime: ~4 ms of ~6)."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
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
    """The pre-tool answer for a host's built-in read: a refusal carrying the cache's text, or ''."""
    if switched_off():
        return ""
    note_losses(data_dir, agent, event)
    credit_earlier(data_dir, agent, event)
    ask_ = agent.builtin_read_ask(event)  # may set the call's id (a host whose payloads name none)
    if ask_ is None or not isinstance(event.tool_use_id, str):
        return ""
    from leanctx.hooks.publish import note_read_call

    if note_read_call(data_dir, event) is None:
        return ""
    after = event.tool_name in agent.builtin_refuse_after_run
    keep = _after_path(data_dir, event) if after else None
    seen = _stat(ask_.path) if keep else None  # before the daemon looks: any change after it shows
    if after and seen is None:
        return ""  # no refusal that would stop the host's edit tool: the reader runs
    result = ask(data_dir, "gate", {**ask_.args(), "call_id": event.tool_use_id})
    if result is None:
        return ""
    if result.get("kind") == "full" and result.get("again") is True:
        if after:
            _keep(keep, {"again": True, "path": ask_.path, "stat": seen})
            return ""
        return agent.builtin_again_output(event, ask_)
    if result.get("kind") not in REFUSALS:
        return ""
    text = result.get("text")
    if not isinstance(text, str) or not text:
        return ""
    if after:
        _keep(keep, {"text": text, "path": ask_.path, "stat": seen})
        return ""  # the reader runs; what it returns is replaced after it (after_read)
    return agent.builtin_refusal_output(event, text)


def note_losses(data_dir: str, agent, event) -> None:  # noqa: ANN001 - Agent, HookEvent
    """Count the compactions the host's own log shows before any read is answered (a host whose
    compaction hook may come after this call: Agent.context_losses)."""
    lost = agent.context_losses(event)
    if lost:
        from leanctx.hooks import publish

        publish.note_losses(data_dir, event, lost)


def credit_earlier(data_dir: str, agent, event) -> None:  # noqa: ANN001 - Agent, HookEvent
    """Before this call is gated: hand the daemon what earlier calls delivered that showed only
    after their post-tool hook (Agent.builtin_read_earlier), each under its own id, and only a
    call our gate noted with no compaction since (its content then still stands in the context)."""
    earlier = agent.builtin_read_earlier(event)
    if not earlier:
        return
    from leanctx.hooks.publish import earlier_notes

    notes = earlier_notes(data_dir, event)
    for call_id, ask_, content in earlier:
        if call_id in notes:
            ask(data_dir, "credit", {**ask_.args(), "content": content, "call_id": call_id})


def after_read(data_dir: str, payload: dict, agent, event) -> str:  # noqa: ANN001 - Agent, HookEvent
    """Hand the daemon what a built-in read delivered, to credit when it matches the disk; for a
    call whose refusal comes after it ran, the post-tool answer that hands the model the cache's
    text instead ('' otherwise). A call the host module cannot name (Copilot's log or Droid's
    transcript cannot tell which call it was) is handed on as `unnamed`: credited to no one, but
    whichever context got those bytes no longer holds an older version as its latest copy, so no
    diff or stub is made against that one."""
    if switched_off():
        return ""
    kept = _take(_after_path(data_dir, event)) if event.tool_name in agent.builtin_refuse_after_run else None
    if kept is not None:
        path = kept.get("path")
        same = isinstance(path, str) and kept.get("stat") == _stat(path)
        text = kept.get("text")
        if same and isinstance(text, str) and text:
            out = agent.builtin_replace_output(event, text)
            if out:
                return out  # the model gets the refusal: nothing it received to credit
        elif kept.get("again") is True and isinstance(path, str):
            again = agent.builtin_again_text(event, payload, path)
            out = agent.builtin_replace_output(event, again) if again else ""
            if out:
                return out
    got = agent.builtin_read_delivery(event, payload)  # may set the call's id, as builtin_read_ask
    if got is None:
        return ""
    ask_, content = got
    named = {"call_id": event.tool_use_id} if isinstance(event.tool_use_id, str) else {"unnamed": True}
    ask(data_dir, "credit", {**ask_.args(), "content": content, **named})
    return ""


def _stat(path: str | None) -> list | None:
    """What tells one version of a regular file from another, as JSON keeps it; None: no file."""
    import stat as stat_

    try:
        st = os.stat(path) if path else None
    except (OSError, ValueError):
        return None
    if st is None or not stat_.S_ISREG(st.st_mode):
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _after_path(data_dir: str, event) -> str | None:  # noqa: ANN001 - HookEvent
    """The file that keeps this call's refusal until its post-tool hook: named by conversation
    and call id (None when either is missing or odd)."""
    from leanctx.hooks.publish import conversation_key

    call, conv = event.tool_use_id, event.conversation_id
    if not isinstance(call, str) or not 0 < len(call) <= MAX_AFTER_ID or not _ID_CHARS.issuperset(call):
        return None
    if not isinstance(conv, str) or not conv:
        return None
    return os.path.join(data_dir, AFTER_DIR, f"{conversation_key(conv)}.{call}.json")


def _keep(path: str, value: dict) -> None:
    """Write `value` for the post-tool hook; drop files of calls that never got one."""
    from leanctx import safedir
    from leanctx.hooks.publish import write_json_atomic

    folder = os.path.dirname(path)
    try:
        safedir.make_private(folder)
        write_json_atomic(path, value)
        import time

        old = time.time() - AFTER_KEEP_S
        with os.scandir(folder) as it:
            for entry in it:
                if entry.name.endswith(".json") and entry.stat(follow_symlinks=False).st_mtime < old:
                    os.unlink(entry.path)
    except OSError:
        pass


def _take(path: str | None) -> dict | None:
    """Read and remove what the pre-tool hook kept for this call (None: nothing, or unreadable)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 22)
        os.unlink(path)
        value = fastjson.loads(data.decode("utf-8", "surrogatepass"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
