"""OpenCode (npm `opencode-ai`): no hook commands, JS plugins instead.

OpenCode loads every `*.js` in `~/.config/opencode/plugins/` (project: `.opencode/plugins/`)
into its own process. Our plugin (`templates/opencode-plugin.js`) runs the leanctx hook command
for the events wired here, with the plugin's own arguments as JSON on stdin: bus events as
`{event: {type, properties: {sessionID, info: {id, directory, parentID}}}}`, `chat.message` as
`{input: {sessionID}, output: {parts}}`, `tool.execute.before` as `{input: {tool, sessionID,
callID}, output: {args}}`, `tool.execute.after` (the built-in readers only, handed on once the next
request carries its result) as `{input: {tool, sessionID, callID, args}, output: {output, metadata:
{exit, truncated, outputPath}}}`, `experimental.session.compacting` as `{input: {sessionID}}`, plus
`cwd` (the plugin's ctx.directory) and `hook_event_name`.
Verified on 1.18.33 in real runs (reference hosts-gemini-qwen-copilot-opencode.md §4 and
tests/e2e/test_opencode_e2e.py): session.created, chat.message, session.idle fire in `opencode
run`; the MCP server and the plugin share the `opencode` process (MCP env `OPENCODE_PID`), and
the MCP `tools/call` carries no call id (`_meta: {progressToken}` only). `run --continue` fires
no session.created (chat.message still names the session). The context-loss events (below):
an automatic compaction's `experimental.session.compacting` and `session.compacted`, and the
`message.part.updated` of outputs `compaction.prune` cleared (in `opencode serve`), seen in runs
(tests/e2e/test_opencode_compaction_subagent_e2e.py); the undo's removals read from the bundle.
A `task` subagent is a child session with its own id: its reads are its own conversation.
MCP: `opencode.json` `mcp.<name> = {type: "local", command: [argv], enabled: true, environment}`;
OpenCode reads it as JSONC.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, ClassVar

import posixpath
import re

from leanctx import fastjson
from leanctx.agents.base import (
    stdout_answer,
    POST_TOOL,
    PRE_COMPACT,
    PRE_TOOL,
    PROMPT,
    SESSION_START,
    STOP,
    EventSpec,
    FileHookAgent,
    HookEvent,
    as_dict,
    as_text,
    env_dir,
)

PLUGIN = "leanctx.js"
READ_TOOL = "read"  # OpenCode's own file reader: {filePath, offset (1-based), limit}
SHELL_TOOL = "bash"  # its shell: {command, description, timeout, workdir}
BUILTIN_READ_TOOLS = (READ_TOOL, SHELL_TOOL)
READ_DEFAULT_LIMIT = 2000  # lines `read` returns when the call names no limit
MAX_LINE = 10**9
MAX_PATH_CHARS = 4096
# How `read` ends what it returns (1.18.33's bundle, each seen in a run): the whole rest of the
# file, a window with more after it, or a window cut at 50 KB. Anything after `</content>` (the
# `<system-reminder>` of instruction files it loads on the way) is another shape: not credited.
_READ_FOOTER = re.compile(
    r"\n\n\((?:End of file - total (?P<total>\d+) lines"
    r"|Showing lines (?P<a>\d+)-(?P<b>\d+) of \d+\. Use offset=(?P<next>\d+) to continue\."
    r"|Output capped at 50 KB\. Showing lines (?P<ca>\d+)-(?P<cb>\d+)\. Use offset=(?P<cnext>\d+) to continue\.)\)"
    r"\n</content>\Z")


def _count(value: object, default: int, least: int) -> int | None:
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and least <= value <= MAX_LINE:
        return value
    return None


def _resolve(path: object, cwd: object) -> str | None:
    """A path as OpenCode's tools take it: absolute as given, relative against the instance's
    folder (node's `path.resolve`); None when there is no absolute folder to resolve it in."""
    if not isinstance(path, str) or not path or "\x00" in path or len(path) > MAX_PATH_CHARS:
        return None
    if posixpath.isabs(path):
        return path
    if not isinstance(cwd, str) or not posixpath.isabs(cwd):
        return None
    resolved = posixpath.normpath(posixpath.join(cwd, path))
    return "/" + resolved.lstrip("/")


def read_request(args: object, cwd: object) -> tuple[str, int, int] | None:
    """(the path as `read` shows it, first line, last line) a `read` call asks for; None when we
    cannot say for sure. `offset` is 1-based and `offset || 1` (0 reads from line 1, verified),
    no `limit` is 2,000 lines."""
    if not isinstance(args, dict) or set(args) - {"filePath", "offset", "limit"}:
        return None
    path = _resolve(args.get("filePath"), cwd)
    offset = _count(args.get("offset"), 1, 0)
    limit = _count(args.get("limit"), READ_DEFAULT_LIMIT, 1)
    if path is None or offset is None or limit is None:
        return None
    start = offset or 1
    return path, start, start + limit - 1


def read_delivered(output: object, shown: str, start: int) -> tuple[int, int, str] | None:
    """(first line, last line, file text) a `read` result carries, its `N: ` line numbers taken
    off exactly as `read` put them on; None for any other shape (an image, a directory listing,
    an empty file, a reminder after the content, a line number out of step)."""
    if not isinstance(output, str):
        return None
    head = f"<path>{shown}</path>\n<type>file</type>\n<content>\n"
    if not output.startswith(head):
        return None
    m = _READ_FOOTER.search(output, len(head))
    if m is None:
        return None
    if m.group("total") is not None:
        first, last = start, int(m.group("total"))
    elif m.group("a") is not None:
        first, last, after = int(m.group("a")), int(m.group("b")), int(m.group("next"))
        if after != last + 1:
            return None
    else:
        first, last, after = int(m.group("ca")), int(m.group("cb")), int(m.group("cnext"))
        if after != last + 1:
            return None
    if first != start or last < first:
        return None
    rows = output[len(head):m.start()].split("\n")
    if len(rows) != last - first + 1:
        return None
    lines = []
    for number, row in enumerate(rows, first):
        prefix = f"{number}: "
        if not row.startswith(prefix):
            return None
        lines.append(row[len(prefix):])
    return first, last, "\n".join(lines)


def shell_call(args: dict, cwd: object) -> tuple[str | None, str | None]:
    """(command, the folder it runs in) of a `bash` call with no argument we do not know: its
    `workdir` resolved like a path, else the instance's folder."""
    command = args.get("command")
    if set(args) - {"command", "description", "timeout", "workdir"} or not isinstance(command, str):
        return None, None
    workdir = args.get("workdir")
    if workdir is None:
        return command, (cwd if isinstance(cwd, str) and posixpath.isabs(cwd) else None)
    return command, _resolve(workdir, cwd)


class OpenCode(FileHookAgent):
    """OpenCode and the family of its forks (Kilo Code: agents/kilo.py). A fork keeps the plugin
    API, the tools and the `mcp` table; what differs is data: the class attributes up to
    `plugin_template`, which a fork's module sets."""

    name = "opencode"
    display_name = "OpenCode"
    binaries = ("opencode",)
    checked_against = "OpenCode 1.18.33 (real CLI, end-to-end tests)"
    family = "opencode-plugin"
    verified_version = "1.18.33"
    min_version = "1.18.33"
    version_command = ("opencode", "--version")
    support = {
        "verified": "run, 1.18.33",
        "hooks": "plugin `~/.config/opencode/plugins/leanctx.js` / `DIR/.opencode/plugins/`",
        "mcp": "`opencode.json` `mcp`",
        "rule": "`AGENTS.md` block",
        "call_id": "no",
        "bot": "prompts only",
        "guard": "yes",
    }
    #: the user config folder's name under $XDG_CONFIG_HOME (default ~/.config)
    config_folder: ClassVar[str] = "opencode"
    #: the project's folder whose `plugins/` the host loads
    project_folder: ClassVar[str] = ".opencode"
    #: the config files the host reads in a config folder or the project, ours first: the server
    #: goes into the first that exists, else the first
    config_files: ClassVar[tuple[str, ...]] = ("opencode.json", "opencode.jsonc")
    #: other config files in the user config folder the host still reads (legacy names)
    legacy_config_files: ClassVar[tuple[str, ...]] = ()
    #: empty files the host writes in its user config folder on its first start when it finds no
    #: config file there, to record that a one-time migration of that config is done; init writes
    #: them with a config it creates, so that migration never runs on our file
    #: (installer/markers.py)
    first_start_markers: ClassVar[tuple[str, ...]] = ()
    #: the plugin's template (templates/), filled with this host's names
    plugin_template: ClassVar[str] = "opencode-plugin.js"
    strict_json = False  # opencode.json is read as JSONC
    hook_file_mode = 0o644
    mcp_env_key = "environment"
    events = (
        EventSpec("session.created", SESSION_START),
        EventSpec("chat.message", PROMPT),
        # Context losses (read in 1.18.33's bundle): the compaction (the plugin hook OpenCode
        # awaits before summarising, and the bus event after it), the messages and parts an
        # undo removes (`SessionRevert.cleanup`, before the next prompt runs) or a client
        # deletes, and the tool outputs `SessionCompaction.prune` clears (`compaction.prune`
        # on): the plugin forwards a `message.part.updated` only for a tool part it marked
        # `time.compacted`. Bus events reach plugins without being awaited, so the plugin makes
        # every tool call wait until the hooks for the session's losses are done.
        EventSpec("experimental.session.compacting", PRE_COMPACT),
        EventSpec("session.compacted", PRE_COMPACT),
        EventSpec("message.removed", PRE_COMPACT),
        EventSpec("message.part.removed", PRE_COMPACT),
        EventSpec("message.part.updated", PRE_COMPACT),
        EventSpec("session.idle", STOP),
    )
    # The plugin turns the hook's deny answer into a thrown error: OpenCode then skips the tool
    # and hands the model the error's message, verbatim, as the call's result (verified on 1.18.33).
    guard_event = EventSpec("tool.execute.before", PRE_TOOL)
    # Its own reader and plain shell reads, gated like ctx_read (hooks/readgate.py, readers.py;
    # tests/e2e/test_opencode_builtin_read_e2e.py) on the same pre-tool event (the refusal: the
    # guard's thrown error, so the model gets the cache's text as the result). The credit comes
    # from `tool.execute.after`, which the plugin hands on only once the next request of the
    # session carries that result as it was (templates/opencode-plugin.js).
    builtin_read_tools = BUILTIN_READ_TOOLS
    builtin_read_post_event = EventSpec("tool.execute.after", POST_TOOL)
    context_events = ("session.created", "chat.message")

    def config_dir(self, home: Path) -> Path:
        return env_dir("XDG_CONFIG_HOME", home / ".config") / self.config_folder

    def hook_folder(self, home: Path, project: Path | None) -> Path:
        return (project / self.project_folder if project is not None else self.config_dir(home)) / "plugins"

    def hook_file_names(self) -> tuple[str, ...]:
        return (PLUGIN,)

    def hook_files(self, wired: dict[str, str], mark: Callable[[dict[str, str]], str]) -> dict[str, str]:
        import json
        from importlib import resources

        from leanctx import templating

        text = resources.files("leanctx").joinpath(f"templates/{self.plugin_template}").read_text(encoding="utf-8")
        # one pass, each value JSON (ASCII-only, so no line break can end the comment the mark sits in)
        values = {"MARK": mark(wired), "TIMEOUT_MS": str(self.timeout * 1000),
                  "HOST": json.dumps(self.display_name, ensure_ascii=True)[1:-1], "AGENT": self.name,
                  "HOOKS": json.dumps(wired, indent=2, sort_keys=True, ensure_ascii=True),
                  "READ_TOOLS": json.dumps(list(BUILTIN_READ_TOOLS), ensure_ascii=True), "SHELL_TOOL": json.dumps(SHELL_TOOL),
                  # without the guard, the pre-tool hook has nothing to say about other tools:
                  # the plugin spares them the hook's process
                  "PRE_READS_ONLY": json.dumps("--guard" not in wired.get("tool.execute.before", "").split()), "HOOK_RUNNER": templating.js_hook_runner()}
        return {PLUGIN: templating.fill(text, values, self.plugin_template)}

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # OpenCode (and Kilo) read AGENTS.md from the config folder and the project into every session.
        return (self.config_dir(home) if project is None else project) / "AGENTS.md", "block"

    instructions_path = rules_path  # the bot profile's instructions: a block in the same AGENTS.md

    def mcp_config_files(self, home: Path, project: Path | None) -> list[Path]:
        folder = self.config_dir(home) if project is None else project
        return [folder / n for n in self.config_files]

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        # opencode.json, or the user's opencode.jsonc when that is the one they keep; an entry of
        # ours left in another of them (the user made one that comes first) is taken out
        candidates = self.mcp_config_files(home, project)
        return next((p for p in candidates if p.exists()), candidates[0]), "json", ("mcp",)

    def mcp_entry(self, command: str, args: list[str]) -> dict:
        return {"type": "local", "command": [command, *args], "enabled": True}

    def normalize(self, event: str, payload: dict) -> HookEvent:
        bus = as_dict(payload.get("event"))
        props = as_dict(bus.get("properties"))
        info = as_dict(props.get("info"))
        hook_input = as_dict(payload.get("input"))
        part = as_dict(props.get("part"))
        session = (as_text(props.get("sessionID")) or as_text(info.get("id")) or as_text(part.get("sessionID"))
                   or as_text(hook_input.get("sessionID")))
        cwd = as_text(payload.get("cwd")) or as_text(info.get("directory"))  # the plugin's ctx.directory
        parts = as_dict(payload.get("output")).get("parts")
        texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)] if isinstance(parts, list) else []
        args = as_dict(payload.get("output")).get("args")
        if args is None:  # tool.execute.after carries the call's arguments in its input
            args = hook_input.get("args")
        return self.hook_event(
            event,
            conversation_id=session,
            session_id=session,
            cwd=cwd,
            workspace_roots=[cwd] if cwd else [],
            source="startup" if event == "session.created" else None,
            prompt="\n".join(texts) or None,
            tool_name=as_text(hook_input.get("tool")),
            tool_input=args if isinstance(args, dict) else None,
            tool_use_id=as_text(hook_input.get("callID")),
        )

    def builtin_read_ask(self, event: HookEvent):  # -> readers.Ask | None
        from leanctx import readers

        args = event.tool_input
        call = event.tool_use_id
        # code mode's tools run inside the model's script, as `<call id>/<n>`: their results go
        # to the script, not to the model
        if not isinstance(args, dict) or not isinstance(call, str) or not call or "/" in call:
            return None
        if event.tool_name == READ_TOOL:
            asked = read_request(args, event.cwd)
            return readers.Ask(posixpath.normpath(asked[0]), asked[1], asked[2]) if asked else None
        if event.tool_name == SHELL_TOOL:
            command, cwd = shell_call(args, event.cwd)
            return readers.shell_ask(command, cwd) if command and cwd else None
        return None

    def builtin_read_delivery(self, event: HookEvent, payload: dict):  # -> tuple[readers.Ask, str] | None
        from leanctx import readers

        ask = self.builtin_read_ask(event)
        result = as_dict(payload.get("output"))
        output = result.get("output")
        if ask is None or not isinstance(output, str):
            return None
        if event.tool_name == READ_TOOL:
            shown = read_request(event.tool_input, event.cwd)
            got = read_delivered(output, shown[0], shown[1]) if shown else None
            if got is None:
                return None
            first, last, content = got
            return readers.Ask(ask.path, first, last), content
        # bash hands the model stdout and stderr together, a cut output with a note before it, a
        # timeout with a note after it: only a whole run that exited 0 counts
        meta = as_dict(result.get("metadata"))
        if meta.get("exit") != 0 or meta.get("truncated") is not False or meta.get("outputPath") is not None:
            return None
        content = readers.shell_content(ask, output)
        return (ask, content) if content else None

    def context_output(self, event: str, text: str) -> str:
        if event not in self.context_events:
            return ""
        return fastjson.dumps({"additionalContext": text})

    def guard_output(self, event: str, reason: str) -> str:
        return fastjson.dumps({"decision": "deny", "reason": reason})

    def check_output(self, event: str, stdout: str) -> str | None:
        value = stdout_answer(stdout)
        if not isinstance(value, dict):
            return value
        if event in self.context_events and isinstance(value.get("additionalContext"), str):
            return None
        if event == "tool.execute.before" and value.get("decision") == "deny" and isinstance(value.get("reason"), str):
            return None
        if event == "tool.execute.after" and not stdout.strip():
            return None
        return f"not an answer the leanctx plugin takes for {event}: {stdout[:80]!r}"

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        session = "ses_leanctxdoctor0000000000000"
        payload: dict[str, Any] = {"hook_event_name": event, "cwd": cwd}
        if event.startswith(("session.", "message.")):
            props: dict[str, Any] = {"sessionID": session}
            if event == "session.created":
                props["info"] = {"id": session, "directory": cwd, "title": "leanctx doctor"}
            elif event.startswith("message."):
                props["messageID"] = "msg_leanctxdoctor00000000000"
            if event == "message.part.updated":
                props["part"] = {"id": "prt_leanctxdoctor00000000000", "sessionID": session, "type": "tool", "tool": "read",
                                 "state": {"status": "completed", "time": {"start": 1, "end": 2, "compacted": 3}}}
            payload["event"] = {"type": event, "properties": props}
        elif event == "experimental.session.compacting":
            payload["input"] = {"sessionID": session}
        elif event == "chat.message":
            payload.update(input={"sessionID": session}, output={"parts": [{"type": "text", "text": "leanctx doctor smoke test"}]})
        elif event == "tool.execute.before":
            payload.update(input={"tool": "read", "sessionID": session, "callID": "call_doctor"},
                           output={"args": {"filePath": f"{cwd}/README.md"}})
        elif event == "tool.execute.after":
            path = f"{cwd}/leanctx-doctor-missing.txt"  # a file that is not there: nothing to credit
            payload.update(input={"tool": "read", "sessionID": session, "callID": "call_doctor", "args": {"filePath": path}},
                           output={"output": f"<path>{path}</path>\n<type>file</type>\n<content>\n1: doctor\n\n"
                                             "(End of file - total 1 lines)\n</content>", "metadata": {}})
        return payload


AGENT = OpenCode()
