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

import os

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, MCP_SERVER, NOTICE, PROMPT, EventSpec, HookEvent
from leanctx.agents.geminishape import GeminiShapeAgent

# Qwen Code clears old tool results (read_file, run_shell_command, grep, glob, web_fetch, edit,
# write_file: all but the last 5) from its context when a user's prompt comes at least
# `context.clearContextOnIdle.toolResultsThresholdMinutes` (default 60; 0: every prompt) after
# its last model answer (0.15.10 and 0.24.4, bundle source: microcompactHistory), in memory
# only: no hook fires and its chat recording says nothing. Such a prompt counts as a compaction
# (hooks/publish.py). A settings file that names the setting, or one we cannot read: every prompt.
IDLE_CLEAR_DEFAULT_S = 60 * 60
IDLE_MARGIN_S = 60  # the hook runs a moment before or after the host's own check
SETTING = b"clearContextOnIdle"


def idle_clear_s(cwd: str | None, env=os.environ) -> float:  # noqa: ANN001 - a mapping
    """Seconds of idleness after which the next prompt may find old tool results cleared."""
    home = env.get("HOME") or os.path.expanduser("~")
    qwen_home = env.get("QWEN_HOME")
    system = env.get("QWEN_CODE_SYSTEM_SETTINGS_PATH") or "/etc/qwen-code/settings.json"
    paths = [os.path.join(qwen_home, "settings.json") if qwen_home else os.path.join(home, ".qwen", "settings.json"),
             system, env.get("QWEN_CODE_SYSTEM_DEFAULTS_PATH") or os.path.join(os.path.dirname(system), "system-defaults.json")]
    if cwd:
        paths.append(os.path.join(cwd, ".qwen", "settings.json"))
    for path in paths:
        try:
            with open(path, "rb") as f:
                if SETTING in f.read(1 << 22):
                    return 0.0
        except FileNotFoundError:
            continue
        except OSError:
            return 0.0
    return float(IDLE_CLEAR_DEFAULT_S - IDLE_MARGIN_S)


class Qwen(GeminiShapeAgent):
    name = "qwen"
    display_name = "Qwen Code"
    binaries = ("qwen",)
    checked_against = "Qwen Code 0.15.10 (real CLI, end-to-end tests)"
    events = CLAUDE_STYLE_EVENTS + (EventSpec("Notification", NOTICE),)
    config_home, config_env = ".qwen", "QWEN_HOME"
    rules_file = "QWEN.md"
    broken_settings_effect = "it renames this file to settings.json.corrupted.<ms> and starts without any of its settings"

    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        if ev.kind == PROMPT:
            ev.idle_clear_s = idle_clear_s(ev.cwd)
        return ev

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
