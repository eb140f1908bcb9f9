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

The built-in `Read` and plain shell reads through `Bash` are gated like ctx_read (hooks/readgate.py,
readers.py; tests/e2e/test_codebuddy_builtin_read_e2e.py). Verified on 2.117.0: tool hook payloads
carry the model's call id (`tool_use_id`), a PreToolUse `permissionDecision: "deny"` reaches the
model as the tool result `Error: <reason>`, and `Read`'s PostToolUse `tool_response` is exactly the
text the model received. `Bash`'s PostToolUse carries no output at all (exit code and flags only),
so shell reads are refused when held but never credited. CodeBuddy has no "file unchanged" answer
of its own: a re-read after a refusal simply runs.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, POST_TOOL, ClaudeShapeAgent, EventSpec


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

    builtin_read_tools = ("Read", "Bash")
    builtin_read_post_event = EventSpec("PostToolUse", POST_TOOL, matcher="Read|Bash")

    def builtin_read_ask(self, event):  # noqa: ANN001, ANN201 - HookEvent -> Ask | None
        from leanctx import readers

        if event.tool_name == "Read":
            return read_request(event.tool_input)
        command = bash_command(event.tool_input)
        # Bash's description says its working directory persists between calls (in `-p` on
        # 2.117.0 it did not), so the payload's `cwd` may not be the shell's: absolute paths only
        return readers.shell_ask(command, None) if command else None

    def builtin_read_delivery(self, event, payload: dict):  # noqa: ANN001, ANN201
        if event.tool_name == "Read":
            return read_delivery(event.tool_input, payload.get("tool_response"))
        return None  # Bash's PostToolUse has no stdout: what the model got is unknown

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


# `Read` in CodeBuddy Code 2.117.0 (dist/codebuddy-headless.js, `readFileContent`): without offset
# and limit a file up to 256 KB is split on /\r?\n/ and its first 2,000 pieces are joined with
# "\n"; with either, it is streamed line by line, each line keeping its "\n", from `offset` for
# `limit` lines (default 2,000). Either text is then split on /\r?\n/ again and every piece gets
# its number, `String(n).padStart(4) + "→"`: so a final "\n" shows as one more, empty, numbered
# line. Lines over 2,000 characters are cut ("... [truncated]"), CRLF loses its CR: such text
# never equals the disk and is not credited.
READ_DEFAULT_LIMIT = 2000
ARROW = "\u2192"


def bash_command(tool_input: object) -> str | None:
    """The command of a foreground Bash call with no argument we do not know."""
    if not isinstance(tool_input, dict) or set(tool_input) - {"command", "description", "timeout"}:
        return None  # run_in_background and anything newer: not a plain read
    command = tool_input.get("command")
    return command if isinstance(command, str) else None


def read_request(tool_input: object):  # -> readers.Ask | None
    """The span a `Read` call asks for; None when we cannot say for sure (a relative path, an
    offset or limit that is not a positive whole number, an argument we do not know)."""
    from leanctx import readers

    return readers.offset_limit_ask(tool_input, READ_DEFAULT_LIMIT)


def numbered_text(output: str, start: int) -> str | None:
    """The text a numbered listing stands for (`   7→line`, numbered from `start`), one final
    newline dropped; None for any other shape."""
    lines = output.split("\n")
    plain = []
    for n, line in enumerate(lines, start=start):
        prefix = str(n).rjust(4) + ARROW
        if not line.startswith(prefix):
            return None
        plain.append(line[len(prefix):])
    text = "\n".join(plain)
    return text[:-1] if text.endswith("\n") else text


def read_delivery(tool_input: object, tool_response: object):  # -> tuple[readers.Ask, str] | None
    """(span, file text) a `Read` gave the model: `tool_response` is that very text (verified on
    2.117.0), numbered from the asked line. None for anything else (an error, an image, a
    notebook, a PDF, the "shorter than the offset" note)."""
    from leanctx import readers

    asked = read_request(tool_input)
    if asked is None or not isinstance(tool_response, str) or not tool_response:
        return None
    text = numbered_text(tool_response, asked.start)
    if not text:
        return None
    end = asked.start + text.count("\n")
    if asked.end is not None and end > asked.end:
        return None  # more lines than were asked for: not the shape we know
    return readers.Ask(asked.path, asked.start, end), text
