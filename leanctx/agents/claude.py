"""Claude Code: `~/.claude/settings.json` (user), `.claude/settings.local.json` (project).

The project file is the personal, git-ignored one: our hook commands hold an absolute path on
this machine, which must not be committed for teammates. Every event carries `session_id` and
`transcript_path`; subagent events add `agent_id`/`agent_type` with the parent's session id.
Plain stdout on SessionStart/UserPromptSubmit becomes model context, so we print nothing.
"""

from __future__ import annotations

import os

from leanctx import fastjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, POST_TOOL, Agent, ClaudeShapeAgent, EventSpec, claude_bash_command


# Other hosts that run the hooks in Claude Code's settings files with a Claude-shaped payload, by
# the variable each sets for its hooks. Their sessions are not Claude's: the hook files nothing.
FOREIGN_RUNNERS = {
    # src/hooks/hookRunner.ts of @continuedev/cli 1.5.47 (which fires none of them yet)
    "CONTINUE_PROJECT_DIR": "Continue CLI",
    # runs <project>/.claude/settings.json hooks in a trusted folder, verified on 1.0.102
    # (hosts-gemini-qwen-copilot-opencode.md §3.2); our Copilot hooks publish its sessions
    "COPILOT_CLI": "GitHub Copilot CLI",
}


class Claude(ClaudeShapeAgent):
    name = "claude"
    display_name = "Claude Code"
    binaries = ("claude",)
    checked_against = "Claude Code 2.1.197 (real CLI, end-to-end tests)"
    family = "claude-shaped"
    verified_version = "2.1.332"
    min_version = "2.1.197"
    version_command = ("claude", "--version")
    support = {
        "verified": "run, 2.1.197 and 2.1.332",
        "hooks": "`~/.claude/settings.json` / `DIR/.claude/settings.local.json`",
        "mcp": "`~/.claude.json` / `DIR/.mcp.json`",
        "rule": "`CLAUDE.md` block",
        "call_id": "yes (`_meta` toolUseId)",
        "bot": "yes",
        "guard": "yes",
    }
    events = CLAUDE_STYLE_EVENTS
    config_home, config_env = ".claude", "CLAUDE_CONFIG_DIR"
    project_settings = ".claude/settings.local.json"
    rules_file = "CLAUDE.md"
    mcp_user_file = ".claude.json"
    compaction_notes = True  # verified on 2.1.197 (tests/e2e/test_compaction_carry_e2e.py)
    # the built-in Read and plain shell reads, gated like ctx_read (hooks/readgate.py, readers.py;
    # tests/e2e/test_builtin_read_e2e.py)
    builtin_read_tools = ("Read", "Bash")
    builtin_read_post_event = EventSpec("PostToolUse", POST_TOOL, matcher="Read|Bash")

    def builtin_read_ask(self, event):  # noqa: ANN001, ANN201 - HookEvent -> Ask | None
        from leanctx import readers

        if event.tool_name == "Read":
            return read_request(event.tool_input)
        command = claude_bash_command(event.tool_input)
        return readers.shell_ask(command, event.cwd) if command else None

    def builtin_read_delivery(self, event, payload: dict):  # noqa: ANN001, ANN201
        from leanctx import readers

        if event.tool_name == "Read":
            return read_delivery(event.tool_input, payload.get("tool_response"))
        command = claude_bash_command(event.tool_input)
        response = payload.get("tool_response")
        if not command or not isinstance(response, dict):
            return None
        # the model gets stdout and stderr together; only a clean, whole, textual run counts
        if response.get("interrupted") is not False or response.get("isImage") or response.get("stderr") != "" \
                or response.get("backgroundTaskId") or response.get("returnCodeInterpretation"):
            return None
        stdout = response.get("stdout")
        ask = readers.shell_ask(command, event.cwd)
        if ask is None or not isinstance(stdout, str) or stdout != stdout.strip("\n") + ("\n" if stdout.endswith("\n") else ""):
            return None  # leading or trailing blank lines: the host may trim them before the model sees them
        content = readers.shell_content(ask, stdout)
        return (ask, content) if content else None

    def builtin_again_output(self, event, ask) -> str:  # noqa: ANN001
        if event.tool_name != "Read":
            return self.no_opinion(event.event)  # a shell command has no "unchanged" answer of its own
        # Claude Code's Read answers a re-read of the same range of a file whose mtime did not
        # move with its own "file unchanged" note instead of the content (2.1.197, verified): one
        # more line in `limit` makes it another range, so the host reads and sends the file. The
        # call's input is changed, not its permission: the host still decides whether it may run.
        tool_input = dict(event.tool_input)
        limit = tool_input.get("limit")
        tool_input["limit"] = (limit if isinstance(limit, int) and not isinstance(limit, bool) else READ_DEFAULT_LIMIT) + 1
        return fastjson.dumps({"hookSpecificOutput": {"hookEventName": event.event, "updatedInput": tool_input}})

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        # user scope lives in ~/.claude.json (beside ~/.claude, or inside CLAUDE_CONFIG_DIR)
        config_dir = self.config_dir(home)
        if project is None and config_dir != home / ".claude":
            return config_dir / ".claude.json", "json", ("mcpServers",)
        return super().mcp_config(home, project)

    def real_caller(self, event: str, payload: dict) -> tuple[Agent, str] | None:
        """Cursor, Continue CLI, Copilot CLI and VS Code also run the hooks in Claude Code's
        settings files, with their own payloads; a Cursor conversation is filed under Cursor, a VS
        Code one under VS Code (its ids only: VS Code ignores our matchers, so an entry written for
        `Read|Bash` reaches it on every tool call, and none of it is gated), the others' under
        nobody (FOREIGN_RUNNERS).
        Claude Code (verified on 2.1.197) gives its hooks CLAUDE_CODE_SESSION_ID = the payload's
        session_id: that settles it without looking further (a host started from a Claude Code
        session inherits the variable, but with another session's id)."""
        session = payload.get("session_id")
        if isinstance(session, str) and session and os.environ.get("CLAUDE_CODE_SESSION_ID") == session:
            return self, event
        from leanctx.agents import cursor

        if cursor.is_cursor_call(payload):
            cursor_event = cursor.event_for_claude_hook(event, payload)
            return (cursor.AGENT, cursor_event) if cursor_event else None
        if any(os.environ.get(var) for var in FOREIGN_RUNNERS):
            return None
        if isinstance(payload.get("timestamp"), str):  # Claude Code's payloads carry no timestamp
            from leanctx.agents import vscode

            if vscode.is_vscode_call(payload):  # ignoring our matchers: only its sessions' ids are filed
                return vscode.AGENT.handover(event, payload)
        return self, event

    def check_output(self, event: str, stdout: str) -> str | None:
        # PreCompact's plain stdout is our instruction to the summariser (hooks/compaction.py)
        if event == "PreCompact" and stdout.startswith("leanctx:"):
            return None
        return super().check_output(event, stdout)

    def unparseable_effect(self, path: Path, home: Path) -> str:
        if path == self.mcp_config(home, None)[0]:
            # verified on 2.1.197: exit 1 "Configuration error", the file replaced with defaults
            return "it stops with a configuration error and replaces this file with its defaults (every MCP server in it is lost)"
        return super().unparseable_effect(path, home)


AGENT = Claude()


READ_DEFAULT_LIMIT = 2000  # lines Claude Code's Read returns when the call names no limit


def read_request(tool_input: object):  # -> readers.Ask | None
    """The span a `Read` call asks for; None when we cannot say for sure (an offset or limit
    that is not a positive number, pages of a PDF, a relative path)."""
    from leanctx import readers

    return readers.offset_limit_ask(tool_input, READ_DEFAULT_LIMIT)


def read_delivery(tool_input: object, tool_response: object):  # -> tuple[readers.Ask, str] | None
    """(span, content) a `Read` gave the model as text (2.1.197: `tool_response.file`); None for
    anything else (an image, a notebook, a PDF, Claude Code's own "file unchanged" answer)."""
    from leanctx import readers

    asked = read_request(tool_input)
    if asked is None or not isinstance(tool_response, dict) or tool_response.get("type") != "text":
        return None
    file = tool_response.get("file")
    if not isinstance(file, dict) or file.get("filePath") != asked.path:
        return None
    content, start = file.get("content"), readers.line_number(file.get("startLine"))
    count = readers.line_number(file.get("numLines"))
    if not isinstance(content, str) or not content or start is None or count is None or start != asked.start:
        return None
    return readers.Ask(asked.path, start, start + count - 1), content
