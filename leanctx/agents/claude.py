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

from leanctx.agents.base import (
    PRE_COMPACT,
    PROMPT,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    ClaudeShapeAgent,
    EventSpec,
)


class Claude(ClaudeShapeAgent):
    name = "claude"
    display_name = "Claude Code"
    binaries = ("claude",)
    checked_against = "Claude Code 2.1.197 (real CLI, end-to-end tests)"
    events = (
        EventSpec("SessionStart", SESSION_START),
        EventSpec("UserPromptSubmit", PROMPT),
        EventSpec("PreCompact", PRE_COMPACT),
        EventSpec("SubagentStart", SUBAGENT_START),
        EventSpec("SubagentStop", SUBAGENT_STOP),
        EventSpec("Stop", STOP),
        EventSpec("SessionEnd", SESSION_END),
    )

    def config_dir(self, home: Path) -> Path:
        # CLAUDE_CONFIG_DIR relocates ~/.claude (settings, projects) for the real CLI too.
        from pathlib import Path  # lazily: the hook path never asks for config paths

        env = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(env) if env else home / ".claude"

    def user_config_path(self, home: Path) -> Path:
        return self.config_dir(home) / "settings.json"

    def project_config_path(self, project: Path) -> Path:
        return project / ".claude" / "settings.local.json"


AGENT = Claude()
