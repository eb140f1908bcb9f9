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
from leanctx.agents.geminishape import GeminiShapeAgent, count, disabled_ours, file_path, shell_dir


READ_TOOL, SHELL_TOOL = "read_file", "run_shell_command"
DEFAULT_LINES = 2000  # lines read_file gives when the call names no end (DEFAULT_MAX_LINES_TEXT_FILE)
# what read_file puts before a part of a file (0.61.0: a range, or a file past 2000 lines or with a
# line past 2000 characters, which it cuts with "... [truncated]": never the file's bytes then)
RANGE_HEAD = "\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines "
RANGE_BODY = "\n\n--- FILE CONTENT (truncated) ---\n"
# run_shell_command's answer when the command ran and exited 0 (0.61.0): its output, trimmed
SHELL_HEAD, SHELL_PGID, SHELL_TAIL = "<untrusted_context>\nOutput: ", "\nProcess Group PGID: ", "\n</untrusted_context>"


def read_window(tool_input: object, cwd: object) -> tuple[str, int, int] | None:
    """(path, first line, last line) a read_file call asks for: `start_line`/`end_line` are
    1-based and inclusive, 2000 lines from the start when no end is named; a relative path is the
    project's (the hooks' `cwd`, the folder read_file resolves it against)."""
    if not isinstance(tool_input, dict) or set(tool_input) - {"file_path", "start_line", "end_line"}:
        return None
    path = file_path(tool_input.get("file_path"), cwd, relative_ok=True)
    first, last = tool_input.get("start_line"), tool_input.get("end_line")
    start = 1 if first is None else count(first)
    end = (start or 1) + DEFAULT_LINES - 1 if last is None else count(last)
    if path is None or start is None or end is None or end < start:
        return None
    return path, start, end


def read_delivered(tool_input: object, cwd: object, tool_response: object) -> tuple[str, int, int | None, str] | None:
    """(path, first line, last line or None for the end, text) a read_file call gave the model:
    AfterTool's `llmContent` is what the model receives (0.61.0, verified; the scheduler cuts
    only shell and MCP output after the hook)."""
    asked = read_window(tool_input, cwd)
    if asked is None or not isinstance(tool_response, dict) or tool_response.get("error"):
        return None
    text = tool_response.get("llmContent")
    if not isinstance(text, str) or not text:
        return None
    if not text.startswith(RANGE_HEAD):
        # the whole file, as it is: only when it starts at line 1 (any other start has the head)
        return (asked[0], 1, None, text) if asked[1] == 1 else None
    status, sep, body = text[len(RANGE_HEAD):].partition(RANGE_BODY)
    lines, _, _rest = status.partition(" of ")
    first, dash, last = lines.partition("-")
    start, end = count(int(first)) if first.isdigit() else None, count(int(last)) if last.isdigit() else None
    if not sep or not dash or start != asked[1] or end is None or end < start or not body:
        return None
    return asked[0], start, end, body


def shell_output(tool_response: object) -> str | None:
    """The output a run_shell_command answer shows, when the command exited 0 with nothing else
    to say (no error, signal, exit code or background process line)."""
    if not isinstance(tool_response, dict) or tool_response.get("error"):
        return None
    text = tool_response.get("llmContent")
    if not isinstance(text, str) or not text.startswith(SHELL_HEAD) or not text.endswith(SHELL_TAIL):
        return None
    body = text[len(SHELL_HEAD):-len(SHELL_TAIL)]
    output, sep, pgid = body.rpartition(SHELL_PGID)
    if not sep or not pgid.isdigit() or output == "(empty)":
        return None
    return output


def shell_call(tool_input: object, cwd: object) -> tuple[str, str] | None:
    """(command, folder) of a run_shell_command call in the foreground."""
    if not isinstance(tool_input, dict) or set(tool_input) - {"command", "description", "dir_path", "is_background"}:
        return None
    command, folder = tool_input.get("command"), shell_dir(tool_input.get("dir_path"), cwd, relative_ok=True)
    if not isinstance(command, str) or folder is None or tool_input.get("is_background") not in (None, False):
        return None
    return command, folder


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
