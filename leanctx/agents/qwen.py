"""Qwen Code (a Gemini CLI fork with Claude Code's event names): `~/.qwen/settings.json` (or
`$QWEN_HOME/settings.json`), project `.qwen/settings.json`.

Verified on 0.15.10 in real runs (hosts-gemini-qwen-copilot-opencode.md §2, tests/e2e/test_qwen_e2e.py):
- `qwen -p` fires no SessionStart/SessionEnd: the first event with the ids is a Notification
  (`auth_success`), which we wire so the record exists before the first tool call;
- UserPromptSubmit fires once per model request, with `prompt: ""` on the continuations after a
  tool result: published, but only a non-empty prompt is a user turn for the bot profile;
- answers are Claude Code's (`hookSpecificOutput.additionalContext`, `permissionDecision: deny`);
- MCP tools are deferred behind `tool_search`: the model sees ctx_read only after
  `tool_search {"query": "select:mcp__leanctx__ctx_read"}`, so the read rule says so;
- an invalid settings.json is renamed to `settings.json.corrupted.<ms>` and the CLI runs without
  it; a valid one without `"$version"` is rewritten on first start (comments kept).
"""

from __future__ import annotations

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, MCP_SERVER, NOTICE, EventSpec
from leanctx.agents.geminishape import GeminiShapeAgent


class Qwen(GeminiShapeAgent):
    name = "qwen"
    display_name = "Qwen Code"
    binaries = ("qwen",)
    checked_against = "Qwen Code 0.15.10 (real CLI, end-to-end tests)"
    events = CLAUDE_STYLE_EVENTS + (EventSpec("Notification", NOTICE),)
    config_home, config_env = ".qwen", "QWEN_HOME"
    rules_file = "QWEN.md"
    broken_settings_effect = "it renames this file to settings.json.corrupted.<ms> and starts without any of its settings"

    def hooks_switched_off(self, settings: dict) -> str | None:
        # Claude Code's switch, which Qwen reads too (bundle source); `--bare` does the same per run
        if settings.get("disableAllHooks") is True:
            return '"disableAllHooks": true turns off every hook, leanctx\'s included'
        return None

    def read_rule_note(self, server: str = MCP_SERVER) -> str:
        tool = self.read_tool(server)
        return (
            f"In Qwen Code MCP tools are loaded on demand: call `tool_search` with "
            f"`{{\"query\": \"select:{tool}\"}}` once, then call `{tool}`."
        )


AGENT = Qwen()
