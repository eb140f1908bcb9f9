"""Cursor (IDE and `agent` CLI): `~/.cursor/hooks.json` (user), `<repo>/.cursor/hooks.json`.

Format `{"version": 1, "hooks": {"<event>": [{"command": …, "timeout": …}]}}`. Every event
carries `conversation_id`; `transcript_path` may be null (then `CURSOR_TRANSCRIPT_PATH`).
Cursor parses stdout as one JSON object, and has appended hook stdout to edited files on
post-tool events, so we wire none of those and print nothing except where an event expects an
answer (`beforeSubmitPrompt` -> `{"continue": true}`). No Cursor CLI installs here: checked
against the documented format only (hosts.md §4).
"""

from __future__ import annotations

import os

from leanctx import fastjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

from leanctx.agents.base import (
    PRE_COMPACT,
    PRE_TOOL,
    PROMPT,
    REPLY,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    Agent,
    EventSpec,
    HookEvent,
)

_CONTINUE = '{"continue": true}'


class Cursor(Agent):
    name = "cursor"
    display_name = "Cursor"
    binaries = ("cursor", "cursor-agent")
    new_file_keys = {"version": 1}
    strict_json = False  # not verified against a running Cursor either way
    checked_against = "cursor.com/docs/hooks (hooks.json version 1, Cursor 2.5-3.12 payload captures), not a running host"
    events = (
        EventSpec("sessionStart", SESSION_START),
        EventSpec("beforeSubmitPrompt", PROMPT),
        EventSpec("preCompact", PRE_COMPACT),
        EventSpec("subagentStart", SUBAGENT_START),
        EventSpec("subagentStop", SUBAGENT_STOP),
        EventSpec("stop", STOP),
        EventSpec("sessionEnd", SESSION_END),
    )
    # The reply text arrives only on afterAgentResponse (stop carries none); we print nothing there.
    bot_events = (EventSpec("afterAgentResponse", REPLY),)
    guard_event = EventSpec("preToolUse", PRE_TOOL)

    def config_dir(self, home: Path) -> Path:
        return home / ".cursor"

    def user_config_path(self, home: Path) -> Path:
        return self.config_dir(home) / "hooks.json"

    def project_config_path(self, project: Path) -> Path:
        return project / ".cursor" / "hooks.json"

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # Cursor keeps user-level rules in its settings UI, not in a file: project level only.
        return (project / ".cursor" / "rules" / "leanctx-conversation-state.mdc", "file") if project else None

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return (project / ".cursor" / "rules" / "leanctx-ctx-read.mdc", "file") if project else None

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        return (project if project is not None else home) / ".cursor" / "mcp.json", "json", ("mcpServers",)

    def hook_group(self, command: str, spec: EventSpec) -> dict:
        entry: dict[str, Any] = {"command": command, "timeout": self.timeout}
        if spec.matcher is not None:
            entry["matcher"] = spec.matcher
        return entry

    def group_commands(self, group: object) -> list[str]:
        if isinstance(group, dict) and isinstance(group.get("command"), str):
            return [group["command"]]
        return []

    def normalize(self, event: str, payload: dict) -> HookEvent:
        normalized = super().normalize(event, payload)
        # A subagent's events name the parent conversation; the subagent is its own window.
        parent = payload.get("parent_conversation_id")
        if isinstance(parent, str) and parent:
            normalized.conversation_id = parent
        normalized.subagent_id = payload.get("subagent_id") if isinstance(payload.get("subagent_id"), str) else None
        if not normalized.transcript_path:
            normalized.transcript_path = os.environ.get("CURSOR_TRANSCRIPT_PATH") or None
        normalized.turn_id = payload.get("generation_id") if isinstance(payload.get("generation_id"), str) else None
        if not normalized.cwd and normalized.workspace_roots:
            normalized.cwd = normalized.workspace_roots[0]
        if event == "afterAgentResponse" and isinstance(payload.get("text"), str):
            normalized.reply = payload["text"]
        return normalized

    def no_opinion(self, event: str) -> str:
        return _CONTINUE if event == "beforeSubmitPrompt" else ""

    def context_output(self, event: str, text: str) -> str:
        if event == "sessionStart":
            return fastjson.dumps({"additional_context": text})
        if event == "beforeSubmitPrompt":
            # additional_context here is undocumented (seen working same-turn in a public probe);
            # an older Cursor ignores the key and still continues.
            return fastjson.dumps({"continue": True, "additional_context": text})
        return ""

    def guard_output(self, event: str, reason: str) -> str:
        return fastjson.dumps({"permission": "deny", "user_message": reason, "agent_message": reason})

    def check_output(self, event: str, stdout: str) -> str | None:
        import json

        text = stdout.strip()
        if not text:
            return None if event != "beforeSubmitPrompt" else "beforeSubmitPrompt needs {\"continue\": true}"
        try:
            value = json.loads(text)
        except ValueError:
            return f"stdout is not one JSON object: {text[:80]!r}"
        if not isinstance(value, dict):
            return "stdout JSON is not an object"
        if event == "beforeSubmitPrompt" and value.get("continue") is not True:
            return "beforeSubmitPrompt answer does not let the prompt continue"
        if event == "preToolUse" and value.get("permission") not in ("allow", "deny", "ask"):
            return "preToolUse answer has no valid permission"
        if event not in ("sessionStart", "beforeSubmitPrompt", "preToolUse"):
            return f"{event} must print nothing (Cursor has appended such output to files)"
        return None

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        conversation = "leanctx-doctor-00000000-0000-0000-0000-000000000000"
        payload: dict[str, Any] = {
            "conversation_id": conversation,
            "generation_id": "leanctx-doctor-generation",
            "hook_event_name": event,
            "cursor_version": "doctor",
            "workspace_roots": [cwd],
            "transcript_path": None,
        }
        spec = self.event(event)
        kind = spec.kind if spec else ""
        if kind == SESSION_START:
            payload["session_id"] = conversation
            payload["is_background_agent"] = False
        elif kind == PROMPT:
            payload["prompt"] = "leanctx doctor smoke test"
        elif kind in (SUBAGENT_START, SUBAGENT_STOP):
            payload["subagent_id"] = "leanctx-doctor-subagent"
            payload["subagent_type"] = "generalPurpose"
            payload["parent_conversation_id"] = conversation
        elif kind == STOP:
            payload["status"] = "completed"
            payload["loop_count"] = 0
        elif kind == REPLY:
            payload["text"] = "leanctx doctor smoke test"
        elif kind == PRE_TOOL:
            payload.update(tool_name="Read", tool_input={"path": os.path.join(cwd, "README.md")}, tool_use_id="doctor", cwd=cwd)
        return payload


AGENT = Cursor()
