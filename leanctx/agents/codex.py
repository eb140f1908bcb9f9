"""OpenAI Codex CLI: `$CODEX_HOME/hooks.json` (default `~/.codex`), project `.codex/hooks.json`.

Same three-level shape as Claude Code. Codex runs a non-managed hook only after the user trusts
it in `/hooks`; trust is keyed by the hook's position and a hash of its content, so our command
text and position must never change once written (the wrapper path is stable for that reason).
Codex's output schema rejects unknown keys, so we print nothing at all.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, MCP_BOT_ARGS, ClaudeShapeAgent, EventSpec


class Codex(ClaudeShapeAgent):
    name = "codex"
    display_name = "Codex CLI"
    binaries = ("codex",)
    checked_against = "Codex CLI 0.171.0 (real CLI, end-to-end tests)"
    events = CLAUDE_STYLE_EVENTS
    json_bom_ok = False  # verified on 0.171: a hooks.json starting with a BOM is ignored whole

    config_home, config_env = ".codex", "CODEX_HOME"
    settings_file = "hooks.json"
    project_settings = ".codex/hooks.json"
    rules_file = "AGENTS.md"

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # Codex has no skills folder; AGENTS.md (global in CODEX_HOME, or the project's) is read
        # into every session, so the instructions go there as a marked block.
        return (self.config_dir(home) if project is None else project) / "AGENTS.md", "block"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        base = self.config_dir(home) if project is None else project / ".codex"
        return base / "config.toml", "toml", ("mcp_servers",)

    # The tools Codex may run without asking: they only read (a workspace file; with --bot also
    # the cache's counters, which only the bot profile offers). The state_* tools write the
    # user's conversation thread, so they keep Codex's default: they need approval (refused by
    # `codex exec`, whose approval policy is never).
    auto_approved = ("ctx_read",)
    auto_approved_bot = ("ctx_read", "ctx_stats")

    def mcp_entry(self, command: str, args: list[str]) -> dict:
        # `codex exec` runs an MCP tool only with "approve" (else "requires approval, but approval
        # policy is never"); per tool, verified on 0.171.0: `[mcp_servers.NAME.tools.TOOL]`.
        bot = tuple(args[-len(MCP_BOT_ARGS):]) == MCP_BOT_ARGS
        tools = {tool: {"approval_mode": "approve"} for tool in (self.auto_approved_bot if bot else self.auto_approved)}
        return {"command": command, "args": args, "tools": tools}

    def hook_group(self, command: str, spec: EventSpec) -> dict:
        group = super().hook_group(command, spec)
        if spec.name == "SessionEnd":
            # Codex clamps SessionEnd to 3 s and warns on every run when asked for more.
            group["hooks"][0]["timeout"] = 3
        return group

    def context_output(self, event: str, text: str) -> str:
        # Plain stdout on SessionStart/UserPromptSubmit becomes a developer message (verified on
        # 0.171); the JSON additionalContext form was reported as "Failed" by 0.154 exec.
        return text if event in self.context_events else ""

    def check_output(self, event: str, stdout: str) -> str | None:
        if not stdout.strip() or (event in self.context_events and not stdout.lstrip().startswith("{")):
            return None
        if event == "PreToolUse":
            return super().check_output(event, stdout)
        return f"unexpected stdout on {event}: {stdout[:80]!r}"


AGENT = Codex()
