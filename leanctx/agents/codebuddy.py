"""CodeBuddy (Tencent): Claude Code's settings shape in `~/.codebuddy/settings.json`.

Tencent documents the hooks as "fully compatible with the Claude Code Hooks specification" with
seven events; subagent events are not documented, so we do not wire them. No CLI installs here,
so this module is checked against the documentation only (hosts.md §7).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import PRE_COMPACT, PROMPT, SESSION_END, SESSION_START, STOP, ClaudeShapeAgent, EventSpec


class CodeBuddy(ClaudeShapeAgent):
    name = "codebuddy"
    display_name = "CodeBuddy"
    binaries = ("codebuddy", "cbc")
    checked_against = "CodeBuddy Code hooks documentation (tencentcloud.com/document/product/1256/77296), not a running host"
    events = (
        EventSpec("SessionStart", SESSION_START),
        EventSpec("UserPromptSubmit", PROMPT),
        EventSpec("PreCompact", PRE_COMPACT),
        EventSpec("Stop", STOP),
        EventSpec("SessionEnd", SESSION_END),
    )

    def config_dir(self, home: Path) -> Path:
        from pathlib import Path  # lazily: the hook path never asks for config paths

        env = os.environ.get("CODEBUDDY_CONFIG_DIR")
        return Path(env) if env else home / ".codebuddy"

    def user_config_path(self, home: Path) -> Path:
        return self.config_dir(home) / "settings.json"

    def project_config_path(self, project: Path) -> Path:
        return project / ".codebuddy" / "settings.local.json"


AGENT = CodeBuddy()
