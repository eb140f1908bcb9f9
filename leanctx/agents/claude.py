"""Claude Code: `~/.claude/settings.json` (user), `.claude/settings.local.json` (project).

The project file is the personal, git-ignored one: our hook commands hold an absolute path on
this machine, which must not be committed for teammates. Every event carries `session_id` and
`transcript_path`; subagent events add `agent_id`/`agent_type` with the parent's session id.
Plain stdout on SessionStart/UserPromptSubmit becomes model context, so we print nothing.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, POST_TOOL, Agent, ClaudeShapeAgent, EventSpec


# Other hosts that run the hooks in Claude Code's settings files with a Claude-shaped payload, by
# the variable each sets for its hooks. Their sessions are not Claude's: the hook files nothing.
FOREIGN_RUNNERS = {
    # src/hooks/hookRunner.ts of @continuedev/cli 1.5.47 (which fires none of them yet)
    "CONTINUE_PROJECT_DIR": "Continue CLI",
    # runs <project>/.claude/settings.json hooks in a trusted folder, verified on 1.0.102
    # (hosts-gemini-qwen-copilot-opencode.md §3.2); our Copilot hooks publish its sessions
    "COPILOT_CLI": "GitHub Copilot CLI",
}


class Claude(ClaudeShapeAgent):
    name = "claude"
    display_name = "Claude Code"
    binaries = ("claude",)
    checked_against = "Claude Code 2.1.197 (real CLI, end-to-end tests)"
    events = CLAUDE_STYLE_EVENTS
    config_home, config_env = ".claude", "CLAUDE_CONFIG_DIR"
    project_settings = ".claude/settings.local.json"
    rules_file = "CLAUDE.md"
    mcp_user_file = ".claude.json"
    compaction_notes = True  # verified on 2.1.197 (tests/e2e/test_compaction_carry_e2e.py)
    # the built-in Read, gated like ctx_read (hooks/readgate.py; tests/e2e/test_builtin_read_e2e.py)
    builtin_read_tool = "Read"
    builtin_read_post_event = EventSpec("PostToolUse", POST_TOOL, matcher="Read")

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        # user scope lives in ~/.claude.json (beside ~/.claude, or inside CLAUDE_CONFIG_DIR)
        config_dir = self.config_dir(home)
        if project is None and config_dir != home / ".claude":
            return config_dir / ".claude.json", "json", ("mcpServers",)
        return super().mcp_config(home, project)

    def real_caller(self, event: str, payload: dict) -> tuple[Agent, str] | None:
        """Cursor, Continue CLI and Copilot CLI also run the hooks in Claude Code's settings
        files, with their own payloads; a Cursor conversation is filed under Cursor, the others'
        under nobody (FOREIGN_RUNNERS).
        Claude Code (verified on 2.1.197) gives its hooks CLAUDE_CODE_SESSION_ID = the payload's
        session_id: that settles it without looking further (a host started from a Claude Code
        session inherits the variable, but with another session's id)."""
        session = payload.get("session_id")
        if isinstance(session, str) and session and os.environ.get("CLAUDE_CODE_SESSION_ID") == session:
            return self, event
        from leanctx.agents import cursor

        if cursor.is_cursor_call(payload):
            cursor_event = cursor.event_for_claude_hook(event, payload)
            return (cursor.AGENT, cursor_event) if cursor_event else None
        if any(os.environ.get(var) for var in FOREIGN_RUNNERS):
            return None
        return self, event

    def check_output(self, event: str, stdout: str) -> str | None:
        # PreCompact's plain stdout is our instruction to the summariser (hooks/compaction.py)
        if event == "PreCompact" and stdout.startswith("leanctx:"):
            return None
        return super().check_output(event, stdout)

    def unparseable_effect(self, path: Path, home: Path) -> str:
        if path == self.mcp_config(home, None)[0]:
            # verified on 2.1.197: exit 1 "Configuration error", the file replaced with defaults
            return "it stops with a configuration error and replaces this file with its defaults (every MCP server in it is lost)"
        return super().unparseable_effect(path, home)


AGENT = Claude()
