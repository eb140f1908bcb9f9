"""CodeBuddy Code (Tencent): Claude Code's settings shape in `~/.codebuddy/settings.json`.

Verified on the real CLI (2.117.0, shipped inside npm `@tencent-ai/agent-sdk` under `cli/`; see
docs/hosts.md and tests/e2e/test_codebuddy_e2e.py): all Claude events we wire fire, subagents
included (SubagentStart/SubagentStop carry `agent_id`, the subagent's tool events too).
`-p` ends a turn with Stop then FinalStop and never fires SessionEnd; SessionStart is fired
async, so UserPromptSubmit (which carries the same ids) often arrives first: nothing we do
depends on their order or on SessionEnd. SessionStart has no `cwd`; every other event has.

MCP servers are read from the FIRST EXISTING of `~/.codebuddy/.mcp.json`, `~/.codebuddy/mcp.json`
and `~/.codebuddy.json` (the last always in the home folder, the others move with
CODEBUDDY_CONFIG_DIR), and at project level of `.mcp.json`, `mcp.json`: we write into that one
and create the last candidate only when none exists, so no file of ours ever hides the user's
servers. A project server starts only when `.codebuddy/settings.local.json` approves it
(`enabledMcpjsonServers`). MCP tools are deferred: the model reaches them through
`DeferExecuteTool`, which the read rule says.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, ClaudeShapeAgent


class CodeBuddy(ClaudeShapeAgent):
    name = "codebuddy"
    display_name = "CodeBuddy"
    binaries = ("codebuddy", "cbc")
    checked_against = "CodeBuddy Code 2.117.0 (real CLI from @tencent-ai/agent-sdk 0.3.201, end-to-end tests)"
    events = CLAUDE_STYLE_EVENTS
    config_home, config_env = ".codebuddy", "CODEBUDDY_CONFIG_DIR"
    project_settings = ".codebuddy/settings.local.json"
    rules_file = "CODEBUDDY.md"
    mcp_user_file = ".codebuddy.json"
    read_rule_hint = ("In CodeBuddy MCP tools are deferred: call `DeferExecuteTool` with "
                      "`{\"toolName\": \"mcp__@SERVER@__ctx_read\", \"params\": {\"path\": ...}}`.")

    def mcp_approval(self, project: Path) -> tuple[Path, str] | None:
        return self.project_config_path(project), "enabledMcpjsonServers"

    def mcp_config_files(self, home: Path, project: Path | None) -> list[Path]:
        if project is not None:
            return [project / ".mcp.json", project / "mcp.json"]
        return [self.config_dir(home) / ".mcp.json", self.config_dir(home) / "mcp.json", home / self.mcp_user_file]

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        candidates = self.mcp_config_files(home, project)
        # the host's own test (Node's existsSync): a folder or a live symlink counts, a dangling one not
        import os

        first = next((p for p in candidates if os.path.exists(p)), candidates[0] if project is not None else candidates[-1])
        return first, "json", ("mcpServers",)


AGENT = CodeBuddy()
