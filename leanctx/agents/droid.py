"""Factory Droid: Claude Code's hooks shape in `~/.factory/settings.json` (`<project>/.factory/settings.json`).

Verified on the real CLI (npm `droid` 0.215.0, `droid exec` with a BYOK custom model; see
docs/hosts.md and tests/e2e/test_droid_e2e.py): SessionStart, Stop and SessionEnd fire with
`session_id`, `transcript_path` and `cwd`; `exec` fires no UserPromptSubmit (wired for the
interactive mode, from the source). Tool hook payloads carry no `tool_use_id`. Read from the CLI
(not run): hooks come from `settings.json` (never `settings.local.json`) and from a `hooks.json`
beside it whose events replace the same events of `settings.json`, which doctor reports;
FACTORY_HOME_OVERRIDE moves the home folder; instructions are read from `.factory/AGENTS.md` in
the home folder and in the project.

MCP servers live in `.factory/mcp.json`. Droid names an MCP tool `<server>___<tool>` (three
underscores) and defers it behind `ToolSearch`, which the read rule says; each tools/call
carries the session id in `_meta.assemblySessionId`.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import MCP_SERVER, PRE_TOOL, CLAUDE_STYLE_EVENTS, ClaudeShapeAgent, EventSpec, SUBAGENT_START, SUBAGENT_STOP


class Droid(ClaudeShapeAgent):
    name = "droid"
    display_name = "Factory Droid"
    binaries = ("droid",)
    checked_against = "Factory Droid 0.215.0 (real CLI, npm droid, end-to-end tests)"
    events = tuple(e for e in CLAUDE_STYLE_EVENTS if e.kind not in (SUBAGENT_START, SUBAGENT_STOP))
    config_home = ".factory"
    json_bom_ok = False  # verified on 0.215: a settings.json or mcp.json starting with a BOM is ignored whole
    project_settings = ".factory/settings.json"
    rules_file = "AGENTS.md"
    read_gate_event = EventSpec("PreToolUse", PRE_TOOL, matcher=f"{MCP_SERVER}___ctx_read")
    read_rule_hint = ("In Droid MCP tools are deferred and named `@SERVER@___ctx_read`: load it once with "
                      "`ToolSearch` `{\"query\": \"select:@SERVER@___ctx_read\"}`, then call it.")

    def config_dir(self, home: Path) -> Path:
        from pathlib import Path

        override = os.environ.get("FACTORY_HOME_OVERRIDE")
        return (Path(override) if override else home) / self.config_home

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        base = self.config_dir(home) if project is None else project / self.config_home
        return base / self.rules_file, "block"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        base = self.config_dir(home) if project is None else project / self.config_home
        return base / "mcp.json", "json", ("mcpServers",)

    def read_tool(self, server: str = MCP_SERVER) -> str:
        return f"{server}___ctx_read"

    def is_read_tool(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name.endswith("___ctx_read")


AGENT = Droid()
