"""Gemini CLI: `~/.gemini/settings.json` (or `$GEMINI_CLI_HOME/.gemini`), project `.gemini/settings.json`.

Verified on 0.61.0 in real runs (hosts-gemini-qwen-copilot-opencode.md §1, tests/e2e/test_gemini_e2e.py):
- every event carries `session_id`, `transcript_path` and `cwd`; AfterAgent has the reply as
  `prompt_response`; there is no tool call id anywhere;
- `PreCompress` fires (`trigger: "auto"`) before *every* model request, before the CLI checks
  whether history is big enough to compress, and no event says whether it did: it is no
  compaction. Only `/compress` (`trigger: "manual"`) always compresses, so only that one counts;
- `hookSpecificOutput.additionalContext` reaches the model on SessionStart and BeforeAgent; a
  BeforeTool hook denies with `{"decision": "deny", "reason": …}`;
- when stdout is empty the CLI parses **stderr** as the hook's answer (plain text becomes a
  "Hook system message"), so our hook never writes to stderr for this host;
- MCP tools are named `mcp_<server>_<tool>`; hook matchers are regular expressions;
- settings.json may hold comments, but a trailing comma (or any invalid JSON) stops the CLI
  (exit 52); hooks only run in a trusted folder (`GEMINI_CLI_TRUST_WORKSPACE=true` headless).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import (
    MCP_SERVER,
    NOTICE,
    PRE_COMPACT,
    PRE_TOOL,
    PROMPT,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    EventSpec,
    HookEvent,
    json_object,
    str_field,
    env_dir,
)
from leanctx import fastjson
from leanctx.agents.geminishape import GeminiShapeAgent, disabled_ours


# the tools that run a subagent inside this process (0.61.0: `invoke_agent {agent_name, prompt}`)
SUBAGENT_TOOLS = ("invoke_agent",)


def subagent_run_id(tool: str, tool_input: object) -> str:
    """The id a subagent's window is kept under: made from the call that runs it, the same on its
    BeforeTool and AfterTool (two identical calls at once share it: publish.py counts them)."""
    import hashlib

    text = fastjson.dumps(tool_input if isinstance(tool_input, dict) else {})
    return f"invoke_agent:{tool}:{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:24]}"


class Gemini(GeminiShapeAgent):
    name = "gemini"
    display_name = "Gemini CLI"
    binaries = ("gemini",)
    checked_against = "Gemini CLI 0.61.0 (real CLI, end-to-end tests)"
    events = (
        EventSpec("SessionStart", SESSION_START),
        EventSpec("BeforeAgent", PROMPT),
        EventSpec("PreCompress", PRE_COMPACT),
        EventSpec("AfterAgent", STOP),
        EventSpec("SessionEnd", SESSION_END),
    )
    guard_event = EventSpec("BeforeTool", PRE_TOOL)
    read_gate_event = EventSpec("BeforeTool", PRE_TOOL, matcher=f"mcp_{MCP_SERVER}_ctx_read")
    context_events = ("SessionStart", "BeforeAgent")
    config_home = ".gemini"
    rules_file = "GEMINI.md"
    stderr_is_output = True
    broken_settings_effect = "it refuses to start (exit 52) until this file is fixed"

    def config_dir(self, home: Path) -> Path:
        # GEMINI_CLI_HOME stands for the home folder, not the config folder
        return env_dir("GEMINI_CLI_HOME", home) / self.config_home

    def hooks_switched_off(self, settings: dict) -> str | None:
        # `hooksConfig.enabled: false` runs no hook (verified on 0.61); `hooksConfig.disabled`
        # lists hooks by name or command that are skipped (bundle source)
        config = settings.get("hooksConfig")
        if not isinstance(config, dict):
            return None
        if config.get("enabled") is False:
            return '"hooksConfig": {"enabled": false} turns off every hook, leanctx\'s included'
        off = disabled_ours(config.get("disabled"))
        return f'"hooksConfig.disabled" lists leanctx\'s hook(s): {", ".join(off)}' if off else None

    def read_tool(self, server: str = MCP_SERVER) -> str:
        return f"mcp_{server}_ctx_read"

    def is_read_tool(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name.startswith("mcp_") and tool_name.endswith("_ctx_read")

    def read_rule_note(self, server: str = MCP_SERVER) -> str:
        return f"In Gemini CLI the tool is named `{self.read_tool(server)}`."

    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        if event in ("BeforeTool", "AfterTool") and ev.tool_name in SUBAGENT_TOOLS:
            # no hook names a subagent, and its tool calls' hooks look like the conversation's
            # own (0.61.0, verified): the call that runs it is its window
            ev.kind = SUBAGENT_START if event == "BeforeTool" else SUBAGENT_STOP
            ev.subagent_id = subagent_run_id(ev.tool_name, ev.tool_input)
            name = ev.tool_input.get("agent_name") if isinstance(ev.tool_input, dict) else None
            ev.subagent_type = name if isinstance(name, str) else None
            return ev
        if event == "AfterAgent":
            ev.reply = str_field(payload, "prompt_response")
        if ev.kind == PRE_COMPACT and payload.get("trigger") != "manual":
            ev.kind = NOTICE  # the routine check before each request, not a compaction
        return ev

    def guard_output(self, event: str, reason: str) -> str:
        return fastjson.dumps({"decision": "deny", "reason": reason})

    def check_output(self, event: str, stdout: str) -> str | None:
        value = json_object(stdout) if event == self.guard_event.name and stdout.strip() else None
        if isinstance(value, dict) and value.get("decision") == "deny" and isinstance(value.get("reason"), str):
            return None
        return super().check_output(event, stdout)  # the context answers are Claude Code's


AGENT = Gemini()
