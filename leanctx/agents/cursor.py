"""Cursor (IDE and `agent` CLI): `~/.cursor/hooks.json` (user), `<repo>/.cursor/hooks.json`.

No Cursor CLI installs here (no npm package ships it), so nothing in this module was seen in a
run: every fact is cited where it is used, from the docs or the reference below. Sources:
  [docs]      https://cursor.com/docs/hooks (as quoted verbatim in pcomans/caruso
              reference/cursor_hooks.md) — hosts.md §4 "Config files", "Format", "Common stdin",
              "stdout contract"
  [docs-mcp]  https://cursor.com/docs/mcp — hosts.md §4 "MCP registration"
  [docs-rules] https://cursor.com/docs/context/rules (project rules are `.cursor/rules/*.mdc`;
              user rules live in the settings UI, not a file)
  [trellis]   https://github.com/mindfold-ai/Trellis/issues/18 (Cursor 2.5 sessionStart capture:
              session_id == conversation_id; plain-text stdout -> "JSON Parse Error")
  [entire]    https://github.com/entireio/cli agent/cursor/AGENT.md (event list, subagent fields,
              transcript_path null in CLI mode)
  [exo]       third-party probe, Cursor 3.9.16 (hosts.md §4 "stdin encoding", "additional_context":
              UTF-8 BOM on Windows stdin; beforeSubmitPrompt additional_context works, undocumented)
  [lc1200]    lean-ctx hooks/agents/cursor.rs "#1200" (hosts.md §4 "stdout contract": Cursor
              appended post-tool hook stdout to edited files)
  [env]       https://github.com/DietrichGebert/ponytail/issues/869 and
              https://github.com/vectorize-io/hindsight/issues/3492 (CURSOR_VERSION only in hook
              processes, CURSOR_PROJECT_DIR, the transcript path in CURSOR_TRANSCRIPT_PATH)
  [claude-hooks] https://github.com/git-ai-project/git-ai/issues/604 ("Loaded Claude user hooks")
              and https://github.com/vshulcz/deja-vu/issues/3052 (Claude's events mapped onto
              Cursor's, PreToolUse -> preToolUse): Cursor also runs the hooks in Claude Code's
              settings files (hosts-codebuddy-cline-droid-more.md §7)
What is verified and what is not: docs/hosts.md, "Cursor: verified vs not".
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
    EventSpec,
    HookEvent,
    json_object,
)
from leanctx.agents.cursorlike import CursorLikeAgent

_CONTINUE = '{"continue": true}'  # beforeSubmitPrompt's answer {"continue": bool} [docs]

# Claude Code's event names -> Cursor's, for Claude hooks Cursor runs [claude-hooks]: only
# PreToolUse -> preToolUse is quoted; the others follow Cursor's event list [docs] by meaning.
CLAUDE_EVENTS = {
    "SessionStart": "sessionStart",
    "UserPromptSubmit": "beforeSubmitPrompt",
    "PreToolUse": "preToolUse",
    "PreCompact": "preCompact",
    "SubagentStart": "subagentStart",
    "SubagentStop": "subagentStop",
    "Stop": "stop",
    "SessionEnd": "sessionEnd",
}


def is_cursor_call(payload: dict) -> bool:
    """Cursor is running this hook: every Cursor payload carries `cursor_version` and
    `conversation_id` + `generation_id` [docs], Claude Code's and Continue's carry none of
    them; Cursor sets CURSOR_VERSION for hook processes only [env]."""
    if isinstance(payload.get("cursor_version"), str):
        return True
    if isinstance(payload.get("conversation_id"), str) and isinstance(payload.get("generation_id"), str):
        return True
    return bool(os.environ.get("CURSOR_VERSION"))


def event_for_claude_hook(claude_event: str, payload: dict) -> str | None:
    """The Cursor event behind a Claude Code hook Cursor ran: the payload's own
    `hook_event_name` when it is one of Cursor's, else the mapped Claude name; None when
    Cursor has no such event."""
    named = payload.get("hook_event_name")
    if isinstance(named, str) and named in CLAUDE_EVENTS.values():
        return named
    return CLAUDE_EVENTS.get(claude_event)


class Cursor(CursorLikeAgent):
    name = "cursor"
    display_name = "Cursor"
    binaries = ("cursor", "cursor-agent")
    new_file_keys = {"version": 1}  # {"version": 1, "hooks": {event: [entry]}} [docs]
    # ~/.cursor/hooks.json, <repo>/.cursor/hooks.json [docs]; an entry is only command/timeout/
    # matcher: extra keys may fail Cursor's schema (hosts.md §4 "Entry fields", unconfirmed);
    # timeout in seconds is assumed (unit unconfirmed, default ~60 s)
    config_home = ".cursor"
    project_hooks = ".cursor/hooks.json"
    strict_json = False  # not verified against a running Cursor either way
    checked_against = "cursor.com/docs/hooks (hooks.json version 1, Cursor 2.5-3.12 payload captures), not a running host"
    family = "cursor-like"
    verified_version = ""
    min_version = ""
    version_command = ()
    support = {
        "verified": "documentation only",
        "hooks": "`~/.cursor/hooks.json` / `DIR/.cursor/hooks.json`",
        "mcp": "`~/.cursor/mcp.json` / `DIR/.cursor/mcp.json`",
        "rule": "`DIR/.cursor/rules/*.mdc`",
        "call_id": "`CURSOR_TASK_ID`",
        "bot": "yes",
        "guard": "yes",
    }
    # Agent events [docs][entire]; in CLI -p only sessionStart/sessionEnd/pre/postToolUse fire [entire].
    # No post-tool event: Cursor has appended hook stdout to edited files there [lc1200].
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
    guard_event = EventSpec("preToolUse", PRE_TOOL)  # permission "deny" blocks the call [docs]
    # Its own Read is not gated (builtin_read_tools stays empty): whether a refusal's message reaches
    # the model is unconfirmed [exo], and a ReadFile call was seen with no preToolUse at all
    # (https://github.com/perplexityai/numbat/issues/21); docs/cache.md "Left ungated".

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # Cursor keeps user-level rules in its settings UI, not in a file: project level only [docs-rules].
        return (project / ".cursor" / "rules" / "leanctx-conversation-state.mdc", "file") if project else None

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # a project rule file `.cursor/rules/*.mdc` [docs-rules]
        return (project / ".cursor" / "rules" / "leanctx-ctx-read.mdc", "file") if project else None

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        # ~/.cursor/mcp.json and <repo>/.cursor/mcp.json, key mcpServers [docs-mcp]
        return (project if project is not None else home) / ".cursor" / "mcp.json", "json", ("mcpServers",)

    def normalize(self, event: str, payload: dict) -> HookEvent:
        normalized = super().normalize(event, payload)
        # `conversation_id` on every event, stable per chat; `generation_id` per prompt [docs]
        # [trellis]. A subagent's events name the parent conversation (`parent_conversation_id`,
        # `subagent_id` [entire]); the subagent is its own window.
        parent = payload.get("parent_conversation_id")
        if isinstance(parent, str) and parent:
            normalized.conversation_id = parent
        normalized.subagent_id = payload.get("subagent_id") if isinstance(payload.get("subagent_id"), str) else None
        if not normalized.transcript_path:  # null in CLI mode [entire]; then the env [env]
            normalized.transcript_path = os.environ.get("CURSOR_TRANSCRIPT_PATH") or None
        normalized.turn_id = payload.get("generation_id") if isinstance(payload.get("generation_id"), str) else None
        if not normalized.cwd and normalized.workspace_roots:  # `workspace_roots` [docs]
            normalized.cwd = normalized.workspace_roots[0]
        if event == "afterAgentResponse" and isinstance(payload.get("text"), str):  # its `text` [entire]
            normalized.reply = payload["text"]
        return normalized

    def no_opinion(self, event: str) -> str:
        return _CONTINUE if event == "beforeSubmitPrompt" else ""

    def context_output(self, event: str, text: str) -> str:
        if event == "sessionStart":  # `additional_context` [docs] (IDE 3.12 may drop it: hosts.md §4)
            return fastjson.dumps({"additional_context": text})
        if event == "beforeSubmitPrompt":
            # additional_context here is undocumented (seen working same-turn [exo]; the docs'
            # schema has only continue/user_message: hosts-codebuddy-cline-droid-more.md §7);
            # an older Cursor ignores the key and still continues.
            return fastjson.dumps({"continue": True, "additional_context": text})
        return ""

    def guard_output(self, event: str, reason: str) -> str:
        # permission/user_message/agent_message [docs]; agent_message may not reach the model [exo]
        return fastjson.dumps({"permission": "deny", "user_message": reason, "agent_message": reason})

    def check_output(self, event: str, stdout: str) -> str | None:
        """Cursor parses stdout as one JSON object [docs][trellis]."""
        text = stdout.strip()
        if not text:
            return None if event != "beforeSubmitPrompt" else "beforeSubmitPrompt needs {\"continue\": true}"
        value = json_object(text)
        if isinstance(value, str):
            return value
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
