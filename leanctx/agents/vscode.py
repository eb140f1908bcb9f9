"""VS Code (GitHub Copilot Chat's agent hooks, Preview): a hooks file of ours in a folder VS Code
loads, `~/.copilot/hooks/leanctx-vscode.json` (user) or `<project>/.github/hooks/leanctx-vscode.json`;
MCP in VS Code's user `mcp.json` or `<project>/.vscode/mcp.json`, under `servers`.

No VS Code runs here, so nothing in this module was seen in a run; every fact is cited where it
is used. Sources:
  [docs]    microsoft/vscode-docs docs/copilot/customization/hooks.md (code.visualstudio.com/docs/
            copilot/customization/hooks): events, file locations, the entry and answer formats,
            "VS Code ignores matcher values" (also microsoft/vscode#332988)
  [mcpdocs] microsoft/vscode-docs docs/copilot/reference/mcp-configuration.md: `.vscode/mcp.json`
            or the user profile's `mcp.json`, `"servers"`, `{"type": "stdio", "command", "args"}`
  [locs]    microsoft/vscode src/vs/workbench/contrib/chat/common/promptSyntax/config/
            promptFileLocations.ts DEFAULT_HOOK_FILE_PATHS (`.github/hooks`, `.claude/settings.local.json`,
            `.claude/settings.json`, `~/.copilot/hooks`, `~/.claude/settings.json`); every `.json` in a
            hooks folder is a hooks file; older builds listed only `.github/hooks/hooks.json`
  [compat]  microsoft/vscode .../promptSyntax/hookCompatibility.ts, hookSchema.ts, hookTypes.ts: a
            file outside `.claude/` is read flat (`{"type": "command", "command"|"bash"|"linux", "cwd",
            "env", "timeout"|"timeoutSec"}`); Copilot CLI's camelCase names are mapped (sessionStart,
            sessionEnd, userPromptSubmitted, preToolUse, postToolUse, agentStop -> Stop, subagentStop,
            errorOccurred), others (preCompact, preMcpToolCall) dropped; `cwd` defaults to the workspace root
  [chat]    microsoft/vscode-copilot-chat src/extension/chat/vscode-node/chatHookService.ts (the payload
            builder: `timestamp` = new Date().toISOString(), `hook_event_name`, `session_id`,
            `transcript_path`, plus `cwd`; release/0.37 and older sent `hookEventName`/`sessionId`;
            PreToolUse reads `hookSpecificOutput.permissionDecision`, exit code 2 denies),
            src/platform/chat/node/hookExecutor.ts (spawned through the shell with VS Code's own
            environment plus the entry's `env`: no variable of its own), src/extension/tools/common/
            toolNames.ts (the tool names hooks see: `read_file`, `run_in_terminal`, ...)
What is verified and what is not: docs/hosts.md, "VS Code: verified vs not".
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import (
    CLAUDE_STYLE_EVENTS,
    POST_TOOL,
    PRE_COMPACT,
    PRE_TOOL,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    Agent,
    ClaudeShapeAgent,
    EventSpec,
    HookEvent,
)

_SOURCES = {"new": "startup"}  # VS Code's SessionStart `source` is always "new" [chat]
# Copilot CLI's event names as VS Code runs them from a Copilot CLI hooks file [compat]
_FROM_COPILOT_CLI = {"sessionStart": "SessionStart", "userPromptSubmitted": "UserPromptSubmit", "preToolUse": "PreToolUse",
                     "postToolUse": "PostToolUse", "agentStop": "Stop", "subagentStop": "SubagentStop", "sessionEnd": "SessionEnd"}


def is_vscode_call(payload: dict) -> bool:
    """VS Code is running this hook: its payloads carry `timestamp` as an ISO-8601 string
    (`new Date().toISOString()`) and the event's name, `hook_event_name` (Copilot Chat 0.38 and
    later) or `hookEventName` with `sessionId` (0.37 and older) [chat]. Claude Code and Continue
    send no `timestamp`; Copilot CLI's camelCase payloads carry epoch milliseconds. Copilot CLI's
    Claude-style dialect sends this very shape, but it sets COPILOT_CLI=1 for its hooks (verified
    on 1.0.102), which VS Code never does: VS Code sets no variable of its own for hooks [chat]."""
    if os.environ.get("COPILOT_CLI"):
        return False
    if not iso_timestamp(payload.get("timestamp")):
        return False
    if isinstance(payload.get("hook_event_name"), str):
        return True
    return isinstance(payload.get("hookEventName"), str) and isinstance(payload.get("sessionId"), str)


def iso_timestamp(value: object) -> bool:
    """`2026-02-09T10:30:00.000Z`, the only form `Date.prototype.toISOString` gives for this era."""
    return (isinstance(value, str) and len(value) == 24 and value[4] == value[7] == "-" and value[10] == "T"
            and value[13] == value[16] == ":" and value[19] == "." and value[23] == "Z")


def user_data_dir(home: Path) -> Path:
    """VS Code's user folder: `$XDG_CONFIG_HOME/Code/User` (else `~/.config`) on Linux,
    `~/Library/Application Support/Code/User` on macOS; its `mcp.json` lives there [mcpdocs]."""
    from pathlib import Path  # lazily: the hook path never asks for config paths

    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "Code" / "User"
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else home / ".config") / "Code" / "User"


class VSCode(ClaudeShapeAgent):
    """Claude Code's event names, payload fields and answers (`hookSpecificOutput`), in a flat
    hooks file of its own. VS Code ignores matchers [docs], so every entry sees every tool call:
    we wire no pre-tool entry but `--guard`'s, and gate none of its readers."""

    name = "vscode"
    display_name = "VS Code"
    binaries = ("code",)
    family = "claude-shaped"
    checked_against = "VS Code agent hooks (Preview) from its docs and source (Copilot Chat 0.37-0.42), not a running host"
    support = {
        "verified": "documentation and source only",
        "hooks": "`~/.copilot/hooks/leanctx-vscode.json` / `DIR/.github/hooks/leanctx-vscode.json`",
        "mcp": "VS Code's user `mcp.json` / `DIR/.vscode/mcp.json` (`servers`)",
        "rule": "none (no stubs on VS Code)",
        "call_id": "no",
        "bot": "context on SessionStart/UserPromptSubmit; Stop carries no reply",
        "guard": "yes (documented deny form, not run)",
    }
    verified_version = ""
    min_version = ""
    version_command = ("code", "--version")
    # eight events [docs]; no SessionEnd (Copilot Chat runs none [chat]); PreToolUse/PostToolUse only
    # for --guard: without matchers they would run on every tool call
    events = tuple(spec for spec in CLAUDE_STYLE_EVENTS if spec.kind != SESSION_END)
    read_gate_event = None  # stubs are withheld on VS Code (cache/scope.py SILENT_COMPACTION): no per-call notes
    hooks_file = "leanctx-vscode.json"  # beside Copilot CLI's `leanctx.json` in the same folders
    rules_file = ""
    mcp_jsonc_ok = True  # mcp.json is a standalone configuration file, read as JSONC like tasks.json [mcpdocs]
    #: when VS Code runs Claude Code's or Copilot CLI's entries of ours, their flags are not its
    foreign_flags = False

    # -- where ---------------------------------------------------------------------------
    def config_dir(self, home: Path) -> Path:
        return user_data_dir(home)

    def user_config_path(self, home: Path) -> Path:
        # `~/.copilot/hooks` as VS Code spells it: not $COPILOT_HOME [locs]
        return home / ".copilot" / "hooks" / self.hooks_file

    def project_config_path(self, project: Path) -> Path:
        return project / ".github" / "hooks" / self.hooks_file

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        path = project / ".vscode" / "mcp.json" if project is not None else user_data_dir(home) / "mcp.json"
        return path, "json", ("servers",)

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return None  # ctx_read never answers VS Code with a stub: a rule steering reads to it saves nothing

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # the skill folders VS Code reads [locs]; Copilot CLI's skill is the same file, shared
        base = home / ".copilot" if project is None else project / ".github"
        return base / "skills" / "leanctx-conversation-state" / "SKILL.md", "file"

    def detect(self, home: Path) -> bool:
        import shutil

        return self.config_dir(home).is_dir() or any(shutil.which(b) for b in self.binaries)

    # -- the file: flat entries [compat] ---------------------------------------------------
    def hook_group(self, command: str, spec: EventSpec) -> dict:
        return {"type": "command", "command": command, "timeout": self.timeout}

    def group_commands(self, group: object) -> list[str]:
        if not isinstance(group, dict):
            return []
        return [group[k] for k in ("command", "linux", "osx", "bash") if isinstance(group.get(k), str)]

    def is_our_group(self, group: object) -> bool:
        return Agent.is_our_group(self, group)

    def mixed_handlers(self, group: object) -> list[int]:
        return []

    # -- payloads ------------------------------------------------------------------------
    def real_caller(self, event: str, payload: dict) -> tuple[Agent, str] | None:
        """Copilot CLI also loads every `*.json` in `~/.copilot/hooks` and `.github/hooks`; its
        sessions are published by our Copilot hooks, so this file does nothing there."""
        return None if os.environ.get("COPILOT_CLI") else (self, event)

    def handover(self, event: str, payload: dict) -> tuple[Agent, str] | None:
        """(this host, its event) for a hook of ours written for Claude Code or Copilot CLI that
        VS Code runs (agents/claude.py, agents/copilot.py `real_caller`); None for an event we do
        not publish: a tool call (VS Code runs those entries on every one, matchers ignored), an
        event VS Code has no name for."""
        named = payload.get("hook_event_name", payload.get("hookEventName"))
        name = named if isinstance(named, str) and self.event(named) is not None else _FROM_COPILOT_CLI.get(event, event)
        spec = self.event(name)
        if spec is None or spec.kind in (PRE_TOOL, POST_TOOL):
            return None
        return self, name

    def normalize(self, event: str, payload: dict) -> HookEvent:
        normalized = super().normalize(event, payload)
        if normalized.source in _SOURCES:
            normalized.source = _SOURCES[normalized.source]
        return normalized

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        """Claude Code's smoke payload in VS Code's dialect: an ISO `timestamp` (what tells its
        payloads apart), its own source, compaction trigger, subagent type and tool names."""
        payload = super().synthetic_payload(event, cwd)
        payload["timestamp"] = "2026-12-02T12:00:00.000Z"
        payload.pop("last_assistant_message", None)  # VS Code's Stop carries no reply
        spec = self.event(event)
        kind = spec.kind if spec else ""
        if kind == SESSION_START:
            payload["source"] = "new"
        elif kind in (SUBAGENT_START, SUBAGENT_STOP):
            payload["agent_type"] = "Plan"
        if kind == SUBAGENT_STOP:
            payload["stop_hook_active"] = False
        elif kind == PRE_COMPACT:
            payload["trigger"] = "auto"
        elif kind == PRE_TOOL:
            payload.update(tool_name="read_file", tool_input={"filePath": os.path.join(cwd, "README.md"), "startLine": 1, "endLine": 50},
                           tool_use_id="call_doctor")
        return payload


AGENT = VSCode()

