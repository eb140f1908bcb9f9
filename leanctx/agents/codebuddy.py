"""CodeBuddy (Tencent): Claude Code's settings shape in `~/.codebuddy/settings.json`.

Tencent documents the hooks as "fully compatible with the Claude Code Hooks specification" with
seven events; subagent events are not documented, so we do not wire them. No CLI installs here,
so this module is checked against the documentation only (hosts.md §7).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, ClaudeShapeAgent, SUBAGENT_START, SUBAGENT_STOP, env_dir


class CodeBuddy(ClaudeShapeAgent):
    name = "codebuddy"
    display_name = "CodeBuddy"
    binaries = ("codebuddy", "cbc")
    checked_against = "CodeBuddy Code hooks documentation (tencentcloud.com/document/product/1256/77296), not a running host"
    events = tuple(e for e in CLAUDE_STYLE_EVENTS if e.kind not in (SUBAGENT_START, SUBAGENT_STOP))

    def config_dir(self, home: Path) -> Path:
        return env_dir("CODEBUDDY_CONFIG_DIR", home / ".codebuddy")

    def user_config_path(self, home: Path) -> Path:
        return self.config_dir(home) / "settings.json"

    def project_config_path(self, project: Path) -> Path:
        return project / ".codebuddy" / "settings.local.json"


    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str]:
        return (self.config_dir(home) if project is None else project) / "CODEBUDDY.md", "block"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        # CodeBuddy's CLI docs: user scope ~/.codebuddy.json, project scope .mcp.json (another tool
        # writes ~/.codebuddy/mcp.json instead; the documentation wins until a host says otherwise)
        if project is not None:
            return project / ".mcp.json", "json", ("mcpServers",)
        return home / ".codebuddy.json", "json", ("mcpServers",)

    def mcp_entry(self, command: str, args: list[str]) -> dict:
        return {"type": "stdio", "command": command, "args": args}


AGENT = CodeBuddy()
