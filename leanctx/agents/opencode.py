"""OpenCode (npm `opencode-ai`): no hook commands, JS plugins instead.

OpenCode loads every `*.js` in `~/.config/opencode/plugins/` (project: `.opencode/plugins/`)
into its own process. Our plugin (`templates/opencode-plugin.js`) runs the leanctx hook command
for the events wired here, with the plugin's own arguments as JSON on stdin: bus events as
`{event: {type, properties: {sessionID, info: {id, directory, parentID}}}}`, `chat.message` as
`{input: {sessionID}, output: {parts}}`, `tool.execute.before` as `{input: {tool, sessionID,
callID}, output: {args}}`, `experimental.session.compacting` as `{input: {sessionID}}`, plus `cwd`
(the plugin's ctx.directory) and `hook_event_name`.
Verified on 1.18.33 in real runs (reference hosts-gemini-qwen-copilot-opencode.md §4 and
tests/e2e/test_opencode_e2e.py): session.created, chat.message, session.idle fire in `opencode
run`; the MCP server and the plugin share the `opencode` process (MCP env `OPENCODE_PID`), and
the MCP `tools/call` carries no call id (`_meta: {progressToken}` only). `run --continue` fires
no session.created (chat.message still names the session). The context-loss events (below) are
read from the bundle, not seen in a run. MCP: `opencode.json` `mcp.<name> = {type:
"local", command: [argv], enabled: true, environment}`; OpenCode reads it as JSONC.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

from leanctx import fastjson
from leanctx.agents.base import (
    stdout_answer,
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
CONFIG_FILES = ("opencode.json", "opencode.jsonc")


class OpenCode(FileHookAgent):
    name = "opencode"
    display_name = "OpenCode"
    binaries = ("opencode",)
    checked_against = "OpenCode 1.18.33 (real CLI, end-to-end tests)"
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
    # and shows the reason as its result (verified on 1.18.33).
    guard_event = EventSpec("tool.execute.before", PRE_TOOL)
    context_events = ("session.created", "chat.message")

    def config_dir(self, home: Path) -> Path:
        return env_dir("XDG_CONFIG_HOME", home / ".config") / "opencode"

    def hook_folder(self, home: Path, project: Path | None) -> Path:
        return (project / ".opencode" if project is not None else self.config_dir(home)) / "plugins"

    def hook_file_names(self) -> tuple[str, ...]:
        return (PLUGIN,)

    def hook_files(self, wired: dict[str, str], mark: Callable[[dict[str, str]], str]) -> dict[str, str]:
        import json
        from importlib import resources

        from leanctx import templating

        text = resources.files("leanctx").joinpath("templates/opencode-plugin.js").read_text(encoding="utf-8")
        # one pass, each value JSON (ASCII-only, so no line break can end the comment the mark sits in)
        values = {"MARK": mark(wired), "TIMEOUT_MS": str(self.timeout * 1000),
                  "HOOKS": json.dumps(wired, indent=2, sort_keys=True, ensure_ascii=True),
                  "READ_TOOLS": json.dumps(list(BUILTIN_READ_TOOLS), ensure_ascii=True)}
        return {PLUGIN: templating.fill(text, values, "opencode-plugin.js")}

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # OpenCode reads AGENTS.md from its config folder and from the project into every session.
        return (self.config_dir(home) if project is None else project) / "AGENTS.md", "block"

    instructions_path = rules_path  # the bot profile's instructions: a block in the same AGENTS.md

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        folder = self.config_dir(home) if project is None else project
        # opencode.json, or the user's opencode.jsonc when that is the one they keep
        path = folder / CONFIG_FILES[0]
        if not path.exists() and (folder / CONFIG_FILES[1]).exists():
            path = folder / CONFIG_FILES[1]
        return path, "json", ("mcp",)

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
        return payload


AGENT = OpenCode()
