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

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import (
    MCP_SERVER,
    NOTICE,
    POST_TOOL,
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
from leanctx.agents.geminishape import (GeminiShapeAgent, count, disabled_ours, file_path, ranged_delivery, settings_mention,
                                        shell_dir)


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
    return ranged_delivery(asked, tool_response.get("llmContent"), RANGE_HEAD, RANGE_BODY)


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


def call_key(conversation: object, tool: object, tool_input: object) -> str:
    """An id for a tool call the host names no id for, from what it asks: BeforeTool and AfterTool
    of one call agree; two identical calls share it (nothing but the conversation is noted under
    it, and Gemini names no subagent: agents/gemini.py's subagent window decides that)."""
    import hashlib

    text = fastjson.dumps([conversation, tool, tool_input if isinstance(tool_input, dict) else None])
    return "gemini-call:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def context_managed(cwd: object, env=os.environ) -> bool:  # noqa: ANN001 - a mapping
    """Does a settings file turn on (or may it turn on) Gemini's context management? With it the
    scheduler rewrites any tool's output after AfterTool (ToolOutputDistillationService, 0.61.0
    source; off by default), so what AfterTool shows may not be what the model gets."""
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME") or os.path.expanduser("~")
    system = env.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json"
    paths = [os.path.join(home, ".gemini", "settings.json"), system,
             env.get("GEMINI_CLI_SYSTEM_DEFAULTS_PATH") or os.path.join(os.path.dirname(system), "system-defaults.json")]
    if isinstance(cwd, str) and cwd:
        paths.append(os.path.join(cwd, ".gemini", "settings.json"))
    return settings_mention(paths, b"contextManagement")


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
    family = "gemini-shaped"
    verified_version = "0.61.0"
    min_version = "0.61.0"
    version_command = ("gemini", "--version")
    support = {
        "verified": "run, 0.61.0",
        "hooks": "`~/.gemini/settings.json` / `DIR/.gemini/settings.json` (hooks and MCP, ms timeouts)",
        "mcp": "same file",
        "rule": "`GEMINI.md` block",
        "call_id": "no",
        "bot": "yes",
        "guard": "yes",
    }
    events = (
        EventSpec("SessionStart", SESSION_START),
        EventSpec("BeforeAgent", PROMPT),
        EventSpec("PreCompress", PRE_COMPACT),
        EventSpec("AfterAgent", STOP),
        EventSpec("SessionEnd", SESSION_END),
    )
    guard_event = EventSpec("BeforeTool", PRE_TOOL)
    read_gate_event = EventSpec("BeforeTool", PRE_TOOL, matcher=f"mcp_{MCP_SERVER}_ctx_read")
    # read_file and plain shell reads, gated like ctx_read (hooks/readgate.py, readers.py;
    # tests/e2e/test_gemini_builtin_read_e2e.py); AfterTool also closes a subagent's window
    builtin_read_tools = (READ_TOOL, SHELL_TOOL)
    builtin_read_post_event = EventSpec("AfterTool", POST_TOOL, matcher="|".join((READ_TOOL, SHELL_TOOL, *SUBAGENT_TOOLS)))
    context_events = ("SessionStart", "BeforeAgent")
    config_home = ".gemini"
    rules_file = "GEMINI.md"
    stderr_is_output = True
    broken_settings_effect = "it refuses to start (exit 52) until this file is fixed"

    def config_dir(self, home: Path) -> Path:
        # GEMINI_CLI_HOME stands for the home folder, not the config folder
        return env_dir("GEMINI_CLI_HOME", home) / self.config_home

    def hooks_switched_off(self, settings: dict) -> tuple[str, str, str] | None:
        # `hooksConfig.enabled: false` runs no hook (verified on 0.61); `hooksConfig.disabled`
        # lists hooks by name or command that are skipped (bundle source)
        config = settings.get("hooksConfig")
        if not isinstance(config, dict):
            return None
        if config.get("enabled") is False:
            return ('"hooksConfig": {"enabled": false} turns off every hook, leanctx\'s included',
                    'remove "enabled": false from "hooksConfig"', "hooksConfig")
        off = disabled_ours(config.get("disabled"))
        if not off:
            return None
        return (f'"hooksConfig.disabled" lists leanctx\'s hook(s): {", ".join(off)}',
                f'take {", ".join(chr(34) + n + chr(34) for n in off)} out of "hooksConfig.disabled"', "hooksConfig")

    def profile_events(self, bot: bool = False, guard: bool = False, read_gate: bool = False, mcp_name: str = MCP_SERVER,
                       builtin_read: bool = False) -> list[tuple[EventSpec, tuple[str, ...]]]:
        wired = super().profile_events(bot, guard, read_gate, mcp_name, builtin_read)
        if not any(spec is self.builtin_read_post_event for spec, _ in wired):
            if any(spec.name == "BeforeTool" and spec.matcher is None for spec, _ in wired):
                # the guard's BeforeTool sees invoke_agent too, and opens a subagent's window
                # (normalize): its AfterTool closes it
                wired.append((EventSpec("AfterTool", POST_TOOL, matcher="|".join(SUBAGENT_TOOLS)), ("--guard",)))
            return wired
        # the gated reads' BeforeTool also opens a subagent's window (normalize)
        out = []
        for spec, flags in wired:
            if spec.name == "BeforeTool" and spec.matcher is not None and "--builtin-read" in flags:
                spec = EventSpec(spec.name, spec.kind, matcher="|".join((spec.matcher, *SUBAGENT_TOOLS)))
            out.append((spec, flags))
        return out

    def builtin_read_ask(self, event: HookEvent):  # -> readers.Ask | None
        from leanctx import readers

        if context_managed(event.cwd):
            return None
        if event.tool_name == READ_TOOL:
            got = read_window(event.tool_input, event.cwd)
            return readers.Ask(got[0], got[1], got[2]) if got else None
        call = shell_call(event.tool_input, event.cwd)
        return readers.shell_ask(call[0], call[1]) if call else None

    def builtin_read_delivery(self, event: HookEvent, payload: dict):  # -> tuple[readers.Ask, str] | None
        from leanctx import readers

        if context_managed(event.cwd):
            return None
        response = payload.get("tool_response")
        if event.tool_name == READ_TOOL:
            got = read_delivered(event.tool_input, event.cwd, response)
            return (readers.Ask(got[0], got[1], got[2]), got[3]) if got else None
        call, output = shell_call(event.tool_input, event.cwd), shell_output(response)
        ask = readers.shell_ask(call[0], call[1]) if call else None
        if ask is None or output is None:
            return None
        if ask.numbered and output[:1].isdigit():
            # the output is trimmed: the first line's number lost its padding (`1\t…`)
            number, tab, rest = output.partition("\t")
            output = f"{number:>6}{tab}{rest}" if tab and number.isdigit() else output
        content = readers.shell_content(ask, output)
        return (ask, content) if content else None

    def read_tool(self, server: str = MCP_SERVER) -> str:
        return f"mcp_{server}_ctx_read"

    def is_read_tool(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name.startswith("mcp_") and tool_name.endswith("_ctx_read")

    def read_rule_note(self, server: str = MCP_SERVER) -> str:
        return f"In Gemini CLI the tool is named `{self.read_tool(server)}`."

    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        if event in ("BeforeTool", "AfterTool") and ev.tool_name in self.builtin_read_tools and ev.tool_use_id is None:
            # no call id anywhere (0.61.0): the call's own words name it, the same before and after
            ev.tool_use_id = call_key(ev.conversation_id, ev.tool_name, ev.tool_input)
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
