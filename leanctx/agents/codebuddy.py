"""CodeBuddy (Tencent): Claude Code's settings shape in `~/.codebuddy/settings.json`.

Tencent documents the hooks as "fully compatible with the Claude Code Hooks specification" with
seven events; subagent events are not documented, so we do not wire them. No CLI installs here,
so this module is checked against the documentation only (hosts.md §7).
"""

from __future__ import annotations

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, ClaudeShapeAgent, SUBAGENT_START, SUBAGENT_STOP


class CodeBuddy(ClaudeShapeAgent):
    name = "codebuddy"
    display_name = "CodeBuddy"
    binaries = ("codebuddy", "cbc")
    checked_against = "CodeBuddy Code hooks documentation (tencentcloud.com/document/product/1256/77296), not a running host"
    events = tuple(e for e in CLAUDE_STYLE_EVENTS if e.kind not in (SUBAGENT_START, SUBAGENT_STOP))
    config_home, config_env = ".codebuddy", "CODEBUDDY_CONFIG_DIR"
    project_settings = ".codebuddy/settings.local.json"
    rules_file = "CODEBUDDY.md"
    # CodeBuddy's CLI docs: user scope ~/.codebuddy.json, project scope .mcp.json
    mcp_user_file = ".codebuddy.json"


AGENT = CodeBuddy()
