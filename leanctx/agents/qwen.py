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

from leanctx import fastjson
from leanctx.agents.base import CLAUDE_STYLE_EVENTS, MCP_SERVER, NOTICE, POST_TOOL, PROMPT, EventSpec, HookEvent
from leanctx.agents.geminishape import GeminiShapeAgent, count, file_path, ranged_delivery, settings_mention, shell_dir

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
    return 0.0 if settings_mention(paths, SETTING) else float(IDLE_CLEAR_DEFAULT_S - IDLE_MARGIN_S)


READ_TOOL, SHELL_TOOL = "read_file", "run_shell_command"
DEFAULT_LINES = 1000  # lines read_file gives when the call names no limit (truncateToolOutputLines)
RANGE_HEAD, RANGE_BODY = "Showing lines ", " total lines.\n\n---\n\n"
# its own answer to a whole-file re-read it thinks the model still holds (0.15.10, 0.24.4)
UNCHANGED_HEAD, UNCHANGED_MARK = "[File ", " unchanged since last read in this session"


def read_window(tool_input: object) -> tuple[str, int, int] | None:
    """(path, first line, last line) a read_file call asks for: `offset` is 0-based (the first
    line is offset + 1), `limit` a count, 1000 lines when none is named; the path must be
    absolute (Qwen refuses a relative one before any hook runs)."""
    if not isinstance(tool_input, dict) or set(tool_input) - {"file_path", "offset", "limit"}:
        return None
    path = file_path(tool_input.get("file_path"), None, relative_ok=False)
    offset, limit = tool_input.get("offset"), tool_input.get("limit")
    skip = 0 if offset is None else count(offset, low=0)
    lines = DEFAULT_LINES if limit is None else count(limit)
    if path is None or skip is None or lines is None:
        return None
    return path, skip + 1, skip + lines


def read_delivered(tool_input: object, tool_response: object) -> tuple[str, int, int | None, str] | None:
    """(path, first line, last line or None for the end, text) a read_file call gave the model
    (PostToolUse's `llmContent`, exactly what the model receives: 0.15.10 and 0.24.4, verified).
    Its own "unchanged since last read" note is no content."""
    asked = read_window(tool_input)
    if asked is None or not isinstance(tool_response, dict) or tool_response.get("error"):
        return None
    text = tool_response.get("llmContent")
    if not isinstance(text, str) or not text or (text.startswith(UNCHANGED_HEAD) and UNCHANGED_MARK in text[:MAX_HEAD]):
        return None
    return ranged_delivery(asked, text, RANGE_HEAD, RANGE_BODY)


def shell_output(command: str, tool_response: object) -> str | None:
    """The output a run_shell_command answer shows when the command exited 0 with nothing else
    to say: `Command: …\nDirectory: …\nOutput: …\nError: (none)\nExit Code: 0\nSignal: …`."""
    if not isinstance(tool_response, dict) or tool_response.get("error"):
        return None
    text = tool_response.get("llmContent")
    head = f"Command: {command}\nDirectory: "
    if not isinstance(text, str) or not text.startswith(head):
        return None
    _folder, sep, rest = text[len(head):].partition("\nOutput: ")
    if not sep:
        return None
    output, sep, tail = rest.rpartition("\nError: (none)\nExit Code: 0\nSignal: ")
    signal, _, pgid = tail.partition("\nProcess Group PGID: ")
    if not sep or signal not in ("0", "(none)") or not (pgid.isdigit() or pgid == "(none)") or output == "(empty)":
        return None
    return output


def shell_call(tool_input: object, cwd: object) -> tuple[str, str] | None:
    """(command, folder) of a run_shell_command call in the foreground (`directory` must be absolute)."""
    if not isinstance(tool_input, dict) or set(tool_input) - {"command", "description", "directory", "is_background", "timeout"}:
        return None
    command, folder = tool_input.get("command"), shell_dir(tool_input.get("directory"), cwd, relative_ok=False)
    if not isinstance(command, str) or folder is None or tool_input.get("is_background") not in (None, False):
        return None
    return command, folder


MAX_HEAD = 4096
MAX_AGAIN_CHARS = 20_000  # below read_file's own cut (truncateToolOutputThreshold, 25,000)


def whole_text(path: str) -> str | None:
    """The text read_file gives for the whole file at `path` when it is the file as it is (see
    Qwen.builtin_again_text); None when it may not be."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_AGAIN_CHARS * 4 + 1)
    except OSError:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or len(text) > MAX_AGAIN_CHARS or "\r" in text or "\ufeff" in text or "\x00" in text:
        return None
    lines = text.split("\n")
    if len(lines) > DEFAULT_LINES or any(line != line.rstrip() for line in lines):
        return None
    return text


class Qwen(GeminiShapeAgent):
    name = "qwen"
    display_name = "Qwen Code"
    binaries = ("qwen",)
    checked_against = "Qwen Code 0.15.10 (real CLI, end-to-end tests)"
    family = "gemini-shaped"
    verified_version = "0.24.4"
    min_version = "0.15.10"
    version_command = ("qwen", "--version")
    support = {
        "verified": "run, 0.15.10 and 0.24.4",
        "hooks": "`~/.qwen/settings.json` / `DIR/.qwen/settings.json` (hooks and MCP, ms timeouts)",
        "mcp": "same file",
        "rule": "`QWEN.md` block (+ `tool_search`)",
        "call_id": "no",
        "bot": "turns; no hand-back in `-p`",
        "guard": "yes",
    }
    events = CLAUDE_STYLE_EVENTS + (EventSpec("Notification", NOTICE),)
    config_home, config_env = ".qwen", "QWEN_HOME"
    rules_file = "QWEN.md"
    broken_settings_effect = "it renames this file to settings.json.corrupted.<ms> and starts without any of its settings"

    # read_file and plain shell reads, gated like ctx_read (hooks/readgate.py, readers.py;
    # tests/e2e/test_qwen_builtin_read_e2e.py). Its own read_file answers a whole-file re-read of a
    # file it read whole in this process, unchanged by its stat, with its own "unchanged" note.
    builtin_read_tools = (READ_TOOL, SHELL_TOOL)
    builtin_read_post_event = EventSpec("PostToolUse", POST_TOOL, matcher=f"{READ_TOOL}|{SHELL_TOOL}")
    # its edit and write_file refuse a file its own read_file did not read in this process, at
    # this mtime and size ("has not been read in this session", "has been modified since you
    # last read it": 0.15.10 bundle source, checkPriorRead, FileReadCache), and a denied read_file
    # never runs: so read_file runs and its PostToolUse hands the model the cache's text instead
    builtin_refuse_after_run = (READ_TOOL,)

    def builtin_read_ask(self, event: HookEvent):  # -> readers.Ask | None
        from leanctx import readers

        if event.tool_name == READ_TOOL:
            got = read_window(event.tool_input)
            return readers.Ask(got[0], got[1], got[2]) if got else None
        call = shell_call(event.tool_input, event.cwd)
        return readers.shell_ask(call[0], call[1]) if call else None

    def builtin_read_delivery(self, event: HookEvent, payload: dict):  # -> tuple[readers.Ask, str] | None
        from leanctx import readers

        response = payload.get("tool_response")
        if event.tool_name == READ_TOOL:
            got = read_delivered(event.tool_input, response)
            return (readers.Ask(got[0], got[1], got[2]), got[3]) if got else None
        call = shell_call(event.tool_input, event.cwd)
        ask = readers.shell_ask(call[0], call[1]) if call else None
        output = shell_output(call[0], response) if call else None
        if ask is None or output is None:
            return None
        if ask.numbered and output[:1].isdigit():
            # the output is trimmed (0.24.4): the first line's number lost its padding (`1\t…`)
            number, tab, rest = output.partition("\t")
            output = f"{number:>6}{tab}{rest}" if tab and number.isdigit() else output
        content = readers.shell_content(ask, output)
        return (ask, content) if content else None

    def builtin_replace_output(self, event: HookEvent, text: str) -> str:
        """PostToolUse's `continue: false` with `stopReason`: Qwen (0.15.10, bundle source:
        firePostToolUseHook) then hands the model that text as the call's result, in the same
        error response a PreToolUse denial gets, and the turn goes on (verified end to end)."""
        return fastjson.dumps({"continue": False, "stopReason": text})

    def builtin_again_text(self, event: HookEvent, payload: dict, path: str) -> str | None:
        """Asked again right after a refusal, a whole-file read_file ran: when Qwen answered with
        its own "unchanged" note (it read the file whole in this process; 0.15.10, 0.24.4: its
        PreToolUse takes no `updatedInput`), the model gets the file's text itself, exactly as
        read_file gives it, when that is sure: a small UTF-8 file with no trailing blanks on a
        line (read_file trims them). Else what it returned stands (content, or its note)."""
        tool_input = event.tool_input if isinstance(event.tool_input, dict) else {}
        response = payload.get("tool_response")
        text = response.get("llmContent") if isinstance(response, dict) else None
        if set(tool_input) != {"file_path"} or not isinstance(text, str) or not text.startswith(UNCHANGED_HEAD) \
                or UNCHANGED_MARK not in text[:MAX_HEAD]:
            return None
        return whole_text(path)

    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        if ev.kind == PROMPT:
            ev.idle_clear_s = idle_clear_s(ev.cwd)
        return ev

    def hooks_switched_off(self, settings: dict) -> tuple[str, str, str] | None:
        # Claude Code's switch, which Qwen reads too (bundle source); `--bare` does the same per run
        if settings.get("disableAllHooks") is True:
            return ('"disableAllHooks": true turns off every hook, leanctx\'s included', 'remove "disableAllHooks": true',
                    "disableAllHooks")
        return None

    def read_rule_note(self, server: str = MCP_SERVER) -> str:
        tool = self.read_tool(server)
        return (
            f"In Qwen Code MCP tools are loaded on demand: call `tool_search` with "
            f"`{{\"query\": \"select:{tool}\"}}` once, then call `{tool}`."
        )


AGENT = Qwen()
