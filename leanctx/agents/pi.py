"""Pi coding agent (npm `@mariozechner/pi-coding-agent`): no hook commands and no MCP client,
TypeScript/JS extensions instead.

Pi loads every `*.js`/`*.ts` in `<agent dir>/extensions/` (`~/.pi/agent`, or `$PI_CODING_AGENT_DIR`;
project: `.pi/extensions/`) into its own process (its docs/extensions.md, 0.73.1). Pi has no MCP
client ("No MCP" in its README), so our extension (`templates/pi-extension.js`) itself starts
leanctx's MCP server (`leanctx-hook mcp`, a child of the Pi process: the server's parent is the host
process the hooks' records name), registers the server's `ctx_read` as a Pi tool, and sends each
call's `tools/call` with Pi's tool call id in `_meta["leanctx/callId"]`. On Pi's events it runs
the leanctx hook command with a Claude-shaped JSON payload on stdin: `session_id` and
`transcript_path` from Pi's own session (`sessionManager.getSessionId()`, `getSessionFile()`),
`cwd`, `prompt` (before_agent_start), `tool_name`/`tool_input`/`tool_use_id` (tool_call).
A `tool_call` handler answering `{block: true, reason}` skips the tool and hands the model the
reason as the call's error result (verified on 0.73.1).

Pi's own `read` and plain shell reads through its `bash` are gated like ctx_read (hooks/readgate.py,
readers.py; tests/e2e/test_pi_builtin_read_e2e.py): the pre-tool answer is the same block. What
they delivered comes from `tool_result` (the tool's `content` after the handlers before ours), which
the extension hands on only once the next model request of the session (Pi's `context` event)
carries that very text as the call's result (templates/pi-extension.js). Pi runs one model
message's calls together (every `tool_call` first): the extension sends a built-in read's call id
only when every other call of its message only reads, so a read beside an edit is never answered
(no id: nothing named, the read runs). Pi's `read` (0.73.1,
dist/core/tools/read.js) returns the file's text as it is, no line numbers: from line `offset`
(1-based, 0 or none: line 1), `limit` lines, ending in a note when more follows
(`[N more lines in file. Use offset=K to continue.]`) or when it cut the text at 2,000 lines or
50 KB (`[Showing lines A-B of T. Use offset=K to continue.]`, `… of T (50.0KB limit). …`). Its
`bash` returns stdout and stderr together; a run that exits non-zero is an error result, a cut
output carries `details.truncation` and a note: only a whole, successful run counts.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

import posixpath

from leanctx import fastjson
from leanctx.agents.base import (
    POST_TOOL,
    PRE_COMPACT,
    PRE_TOOL,
    PROMPT,
    SESSION_END,
    SESSION_START,
    STOP,
    EventSpec,
    HookEvent,
    as_dict,
    env_dir,
)
from leanctx.agents.jsplugin import JsPluginAgent

EXTENSION = "leanctx.js"
READ_TOOL = "ctx_read"  # the name the extension registers leanctx's ctx_read under in Pi
OWN_READ = "read"  # Pi's own reader: {path, offset, limit}
SHELL_TOOL = "bash"  # its shell: {command, timeout}
BUILTIN_READ_TOOLS = (OWN_READ, SHELL_TOOL)
MAX_LINE = 10**9
MAX_PATH_CHARS = 4096
MAX_CALL_ID = 256


def _whole(value: object, least: int) -> int | None:
    """A whole number of at least `least` from a tool call's JSON (a bool or 2.5 is none)."""
    if isinstance(value, int) and not isinstance(value, bool) and least <= value <= MAX_LINE:
        return value
    return None


def read_path(path: object, cwd: object) -> str | None:
    """The file Pi's `read` opens for `path`, when that is sure: absolute as given, relative
    against the session's folder. Pi also strips a leading `@`, expands `~`, turns Unicode spaces
    into plain ones and, when the file is not there, tries macOS variants of the name (NFD, a
    curly apostrophe, a narrow space before AM/PM): a path any of that could touch is not named."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS or "\x00" in path:
        return None
    if path[0] in "@~" or "'" in path or not path.isascii() or " AM." in path.upper() or " PM." in path.upper():
        return None
    if not posixpath.isabs(path):
        if not isinstance(cwd, str) or not posixpath.isabs(cwd):
            return None
        path = posixpath.join(cwd, path)
    return "/" + posixpath.normpath(path).lstrip("/")


def read_request(args: object, cwd: object) -> tuple[str, int, int | None] | None:
    """(file, first line, last line or None: to the end) a `read` call asks for; None when we
    cannot say for sure. Pi reads from `offset` (1-based; 0 or none: the first line) and, without
    a `limit`, as far as its 2,000-line / 50 KB cut."""
    if not isinstance(args, dict) or set(args) - {"path", "offset", "limit"}:
        return None
    path = read_path(args.get("path"), cwd)
    offset = 0 if args.get("offset") is None else _whole(args.get("offset"), 0)
    limit = None if args.get("limit") is None else _whole(args.get("limit"), 1)
    if path is None or offset is None or (limit is None and args.get("limit") is not None):
        return None
    start = max(offset, 1)
    return path, start, (start + limit - 1 if limit is not None else None)


def _more(text: str) -> tuple[int, int] | None:
    """`…\n\n[N more lines in file. Use offset=K to continue.]` at the end: (where the note
    starts, K)."""
    if not text.endswith(" to continue.]"):
        return None
    at = text.rfind("\n\n[")
    if at < 0:
        return None
    count, sep, nxt = text[at + 3:-len(" to continue.]")].partition(" more lines in file. Use offset=")
    if not sep or not count.isdigit() or not nxt.isdigit():
        return None
    return at, int(nxt)


_SHOWING = "Showing lines "


def _showing(text: str) -> tuple[int, int, int, int] | None:
    """`…\n\n[Showing lines A-B of T. Use offset=K to continue.]` (or `of T (50.0KB limit).`):
    (where the note starts, A, B, K)."""
    if not text.endswith(" to continue.]"):
        return None
    at = text.rfind("\n\n[" + _SHOWING)
    if at < 0:
        return None
    note = text[at + 3 + len(_SHOWING):-len(" to continue.]")]
    span, sep, rest = note.partition(" of ")
    a, dash, b = span.partition("-")
    total, sep2, nxt = rest.partition(". Use offset=")
    if total.endswith(" (50.0KB limit)"):
        total = total[:-len(" (50.0KB limit)")]
    if not (sep and dash and sep2) or not all(x.isdigit() for x in (a, b, total, nxt)):
        return None
    return at, int(a), int(b), int(nxt)


def read_delivered(text: object, start: int, end: int | None) -> tuple[int, int | None, str] | None:
    """(first line, last line or None: to the end of the file, file text) a `read` result holds
    for a call asking from `start` to `end`; None for any other shape. Its notes are taken off
    only where their numbers agree with the call and with the lines before them; whatever is
    left is checked against the file on disk by the daemon before anything is credited."""
    if not isinstance(text, str) or not text:
        return None
    shown = _showing(text)
    if shown is not None:
        at, a, b, nxt = shown
        content = text[:at]
        if a != start or b < a or nxt != b + 1 or (end is not None and b > end) or content.count("\n") != b - a:
            return None
        return a, b, content
    if end is not None:
        more = _more(text)
        if more is not None:
            at, nxt = more
            content = text[:at]
            if nxt != end + 1 or content.count("\n") != end - start:
                return None
            return start, end, content
        if text.count("\n") > end - start:
            return None
    return start, None, text  # the rest of the file, as it is


def _shell_prefixed(cwd: object) -> bool:
    """Pi's `shellCommandPrefix` setting runs before every command (a `cd` there moves a relative
    name): set, or a settings file we cannot read, and a shell read is not named."""
    import os

    agent_dir = os.environ.get("PI_CODING_AGENT_DIR") or os.path.join(os.path.expanduser("~"), ".pi", "agent")
    files = [os.path.join(agent_dir, "settings.json")]
    if isinstance(cwd, str):
        files.append(os.path.join(cwd, ".pi", "settings.json"))
    for name in files:
        try:
            with open(name, "rb") as f:
                data = f.read(1 << 20)
        except FileNotFoundError:
            continue
        except OSError:
            return True
        try:
            value = fastjson.loads(data.decode("utf-8"))
        except ValueError:
            return True
        if not isinstance(value, dict) or value.get("shellCommandPrefix") or value.get("shellPath"):
            return True
    return False


class Pi(JsPluginAgent):
    name = "pi"
    display_name = "Pi"
    binaries = ("pi",)
    checked_against = "Pi 0.73.1 (real CLI, end-to-end tests)"
    family = "js-plugin"
    verified_version = "0.73.1"
    min_version = "0.73.1"
    version_command = ("pi", "--version")
    version_env = {"PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1"}  # no update check online
    support = {
        "verified": "run, 0.73.1 (init, session id, stub, new session, compaction in `--mode rpc`, doctor, uninstall, `--guard`, its `read` and `bash` gated, `--bot`)",
        "hooks": "extension `~/.pi/agent/extensions/leanctx.js` / `DIR/.pi/extensions/`",
        "mcp": "none: Pi has no MCP client, the extension starts the server and offers `ctx_read` as a Pi tool",
        "rule": "`AGENTS.md` block",
        "call_id": "yes (Pi's tool call id)",
        "bot": "yes: turns and replies; the thread rides on a new session's first prompt (Pi's session start cannot add context)",
        "guard": "yes",
    }
    plugin_template = "pi-extension.js"
    plugin_file = EXTENSION
    # only before_agent_start can add to what the model gets (a message stored in the session)
    prompt_event = "before_agent_start"
    tool_event = "tool_call"
    #: no MCP config file: the extension starts the server itself (doctor_mcp skips the file checks)
    mcp_in_extension = True
    #: Pi's session_start cannot add to the model's context: the thread rides on a session's
    #: first prompt instead (hooks/bot.py)
    thread_on_first_prompt = True
    events = (
        EventSpec("session_start", SESSION_START),
        EventSpec("before_agent_start", PROMPT),
        # Pi awaits its extension handlers: session_before_compact runs before it summarises
        EventSpec("session_before_compact", PRE_COMPACT),
        EventSpec("session_compact", PRE_COMPACT),
        # `/tree` navigation moves the session to another point of its tree: what the model holds
        # is then that branch's, so it counts as a context loss like a compaction (its docs)
        EventSpec("session_before_tree", PRE_COMPACT),
        EventSpec("session_tree", PRE_COMPACT),
        EventSpec("agent_end", STOP),
        EventSpec("session_shutdown", SESSION_END),
    )
    guard_event = EventSpec("tool_call", PRE_TOOL)
    read_gate_event = EventSpec("tool_call", PRE_TOOL, matcher=READ_TOOL)
    # Its own reader and plain shell reads, on the same pre-tool event (the refusal: the block,
    # so the model gets the cache's text as the call's result). Pi's edit tool does not ask for a
    # read before it (0.73.1), so the refusal comes before the call runs. The credit comes from
    # `tool_result`, handed on by the extension once the next request carries that result as it was.
    builtin_read_tools = BUILTIN_READ_TOOLS
    builtin_read_post_event = EventSpec("tool_result", POST_TOOL)

    def config_dir(self, home: Path) -> Path:
        return env_dir("PI_CODING_AGENT_DIR", home / ".pi" / "agent")

    def hook_folder(self, home: Path, project: Path | None) -> Path:
        return (project / ".pi" if project is not None else self.config_dir(home)) / "extensions"

    def read_tool(self, server: str = "leanctx") -> str:
        return READ_TOOL

    def is_read_tool(self, tool_name: object) -> bool:
        return tool_name == READ_TOOL

    def plugin_values(self, wired: dict[str, str]) -> dict[str, str]:
        import json
        import shlex

        # the MCP server: the same wrapper the hooks run (at project level `leanctx-hook` on PATH)
        any_command = next(iter(wired.values()), "leanctx-hook")
        bot = any("--bot" in c.split() for c in wired.values())
        server = [shlex.split(any_command)[0], "mcp", *(("--profile", "bot") if bot else ())]
        return {"SERVER": json.dumps(server, ensure_ascii=True), "READ_TOOL": json.dumps(READ_TOOL),
                "PRE_READS_ONLY": json.dumps("--guard" not in wired.get("tool_call", "").split()),
                "READ_TOOLS": json.dumps(list(BUILTIN_READ_TOOLS), ensure_ascii=True), "SHELL_TOOL": json.dumps(SHELL_TOOL)}

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # Pi reads AGENTS.md from its agent dir and from the project into every session
        return (self.config_dir(home) if project is None else project) / "AGENTS.md", "block"

    instructions_path = rules_path

    def mcp_config(self, home: Path, project: Path | None):
        return None  # no MCP client: the extension runs the server

    def builtin_read_ask(self, event: HookEvent):  # -> readers.Ask | None
        from leanctx import readers

        args = event.tool_input
        call = event.tool_use_id
        if not isinstance(args, dict) or not isinstance(call, str) or not call or len(call) > MAX_CALL_ID:
            return None
        if event.tool_name == OWN_READ:
            asked = read_request(args, event.cwd)
            return readers.Ask(asked[0], asked[1], asked[2]) if asked else None
        if event.tool_name == SHELL_TOOL:
            command = args.get("command")
            if set(args) - {"command", "timeout"} or not isinstance(command, str):
                return None
            cwd = event.cwd if isinstance(event.cwd, str) and posixpath.isabs(event.cwd) else None
            if cwd is None or _shell_prefixed(cwd):
                return None
            return readers.shell_ask(command, cwd)
        return None

    def builtin_read_delivery(self, event: HookEvent, payload: dict):  # -> tuple[readers.Ask, str] | None
        from leanctx import readers

        ask = self.builtin_read_ask(event)
        result = as_dict(payload.get("tool_response"))
        parts = result.get("content")
        # one text part and nothing else (an image, a second part: another shape), no error
        if ask is None or result.get("isError") is not False or not isinstance(parts, list) or len(parts) != 1:
            return None
        part = as_dict(parts[0])
        text = part.get("text")
        if part.get("type") != "text" or not isinstance(text, str):
            return None
        if event.tool_name == OWN_READ:
            got = read_delivered(text, ask.start, ask.end)
            if got is None:
                return None
            first, last, content = got
            return readers.Ask(ask.path, first, last), content
        # bash: a cut output (details.truncation, a full-output file) is another shape
        if result.get("truncated") is not False or result.get("fullOutputPath") is not None:
            return None
        content = readers.shell_content(ask, text)
        return (ask, content) if content else None

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        import os

        session = "leanctx-doctor-0000-0000-0000-000000000000"
        payload: dict[str, Any] = {"hook_event_name": event, "session_id": session, "cwd": cwd,
                                   "transcript_path": os.path.join(cwd, f"{session}.jsonl")}
        if event == "session_start":
            payload["source"] = "startup"
        elif event == "before_agent_start":
            payload["prompt"] = "leanctx doctor smoke test"
        elif event == "tool_call":
            payload.update(tool_name=READ_TOOL, tool_input={"path": "README.md"}, tool_use_id="call_doctor")
        elif event == "tool_result":
            path = os.path.join(cwd, "leanctx-doctor-missing.txt")  # a file that is not there: nothing to credit
            payload.update(tool_name=OWN_READ, tool_input={"path": path}, tool_use_id="call_doctor",
                           tool_response={"content": [{"type": "text", "text": "doctor\n"}], "isError": False})
        return payload


AGENT = Pi()
