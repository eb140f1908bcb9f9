"""Factory Droid: Claude Code's hooks shape in `~/.factory/settings.json` (`<project>/.factory/settings.json`).

Verified on the real CLI (npm `droid` 0.215.0, `droid exec` with a BYOK custom model; see
docs/hosts.md and tests/e2e/test_droid_e2e.py): SessionStart, Stop and SessionEnd fire with
`session_id`, `transcript_path` and `cwd`; `exec` fires no UserPromptSubmit (wired for the
interactive mode, from the source). Tool hook payloads carry no `tool_use_id`. Read from the CLI
(not run): hooks come from `settings.json` (never `settings.local.json`) and from a `hooks.json`
beside it whose events replace the same events of `settings.json`, which doctor reports;
FACTORY_HOME_OVERRIDE moves the home folder; instructions are read from `.factory/AGENTS.md` in
the home folder and in the project.

MCP servers live in `.factory/mcp.json`. Droid names an MCP tool `<server>___<tool>` (three
underscores) and defers it behind `ToolSearch`, which the read rule says; each tools/call
carries the session id in `_meta.assemblySessionId`.

The built-in `Read` and plain shell reads through `Execute` are gated like ctx_read
(hooks/readgate.py, readers.py; tests/e2e/test_droid_builtin_read_e2e.py). Verified on 0.215.0 and
0.225.2: a PreToolUse `permissionDecision: "deny"` reaches the model as the tool result
`Error: <reason>`; the PostToolUse `tool_response` of `Read` and `Execute` is exactly the text the
model received. Droid's tool hooks carry no call id, but before a tool runs Droid has written the
model's call (id, name, input) to the session's transcript (`transcript_path`, named after
`session_id`): the one call of the latest assistant message with this name and input and no result
yet is this one (`call_id_from_transcript`); none, or two alike: not gated, not credited. Droid has
no "file unchanged" answer of its own: a re-read after a refusal simply runs.

Verified on 0.215.0: the automatic compaction fires no hook (PreCompact is the manual one's
only), but writes a `compaction_state` line to the transcript, which the cache counts
(cache/hosthistory.py). A `Task` subagent is another droid process with a session of its own
(offline only with FACTORY_AIRGAP_ENABLED=1: without a login Droid's daemon will not start one).
"""

from __future__ import annotations

import os

from leanctx import fastjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import (MCP_SERVER, POST_TOOL, PRE_TOOL, CLAUDE_STYLE_EVENTS, ClaudeShapeAgent, EventSpec, HookEvent,
                                 SUBAGENT_START, SUBAGENT_STOP)


class Droid(ClaudeShapeAgent):
    name = "droid"
    display_name = "Factory Droid"
    binaries = ("droid",)
    checked_against = "Factory Droid 0.215.0 (real CLI, npm droid, end-to-end tests)"
    family = "claude-shaped"
    verified_version = "0.225.2"
    min_version = "0.215.0"
    version_command = ("droid", "--version")
    support = {
        "verified": "run, 0.215.0 and 0.225.2",
        "hooks": "`~/.factory/settings.json` / `DIR/.factory/settings.json`",
        "mcp": "`.factory/mcp.json`",
        "rule": "`.factory/AGENTS.md` block (+ `ToolSearch`)",
        "call_id": "no",
        "bot": "hand-back; no turns in `exec`",
        "guard": "yes",
    }
    events = tuple(e for e in CLAUDE_STYLE_EVENTS if e.kind not in (SUBAGENT_START, SUBAGENT_STOP))
    config_home = ".factory"
    json_bom_ok = False  # verified on 0.215: a settings.json or mcp.json starting with a BOM is ignored whole
    project_settings = ".factory/settings.json"
    rules_file = "AGENTS.md"
    read_gate_event = EventSpec("PreToolUse", PRE_TOOL, matcher=f"{MCP_SERVER}___ctx_read")
    read_rule_hint = ("In Droid MCP tools are deferred and named `@SERVER@___ctx_read`: load it once with "
                      "`ToolSearch` `{\"query\": \"select:@SERVER@___ctx_read\"}`, then call it.")

    builtin_read_tools = ("Read", "Execute")
    builtin_read_post_event = EventSpec("PostToolUse", POST_TOOL, matcher="Read|Execute")

    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        if ev.kind in (PRE_TOOL, POST_TOOL) and ev.tool_use_id is None and ev.tool_name in self.builtin_read_tools \
                and self.builtin_read_ask(ev) is not None:
            # Droid writes the model's call to the transcript about when it runs the pre-tool hook,
            # not always before: a read waits a little for it. After the call its result may be
            # written already: the post-tool hook takes the call of the latest message, answered or not
            pre = ev.kind == PRE_TOOL
            ev.tool_use_id = call_id_from_transcript(ev.transcript_path, ev.session_id, ev.tool_name, ev.tool_input,
                                                     TRANSCRIPT_WAIT_S if pre else 0.0, pending=pre)
        return ev

    def builtin_read_ask(self, event):  # noqa: ANN001, ANN201 - HookEvent -> Ask | None
        from leanctx import readers

        if event.tool_name == "Read":
            return read_request(event.tool_input)
        command = execute_command(event.tool_input)
        # each Execute runs in a new shell in the session's working directory, the payload's cwd
        return readers.shell_ask(command, event.cwd) if command else None

    def builtin_read_delivery(self, event, payload: dict):  # noqa: ANN001, ANN201
        from leanctx import readers

        response = payload.get("tool_response")
        if event.tool_name == "Read":
            return read_delivery(event.tool_input, response)
        command = execute_command(event.tool_input)
        if not command or not isinstance(response, str) or not response.endswith(EXIT_0):
            return None
        ask = readers.shell_ask(command, event.cwd)
        output = response[:-len(EXIT_0)]
        if ask is None or not output:
            return None
        # blank lines at either end came through as they were (0.215.0, 0.225.2); were some
        # trimmed, the text would no longer fill the span asked for and the daemon would not credit it
        content = readers.shell_content(ask, output)
        return (ask, content) if content else None

    def config_dir(self, home: Path) -> Path:
        from pathlib import Path

        override = os.environ.get("FACTORY_HOME_OVERRIDE")
        return (Path(override) if override else home) / self.config_home

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        base = self.config_dir(home) if project is None else project / self.config_home
        return base / self.rules_file, "block"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        base = self.config_dir(home) if project is None else project / self.config_home
        return base / "mcp.json", "json", ("mcpServers",)

    def read_tool(self, server: str = MCP_SERVER) -> str:
        return f"{server}___ctx_read"

    def is_read_tool(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name.endswith("___ctx_read")


AGENT = Droid()


# `Read` in Droid 0.215.0 (read from the binary, `yYL`): the file's text (CRLF and a BOM removed)
# is split on "\n", pieces `offset-1` .. `offset-1+limit` (default 2,400) are joined with "\n", cut
# to 60,000 characters; unless that is the whole file, "\n\n<system-reminder>[Showing lines A-B of
# N total lines]</system-reminder>" follows (", truncated to 60k characters" inside when cut). A
# negative offset reads the last pieces. Text changed any other way (secrets masked, a note
# added) never equals the disk and is not credited.
READ_DEFAULT_LIMIT = 2400
EXIT_0 = "\n\n[Process exited with code 0]"  # what Execute puts after a clean run's output
SHOWING_HEAD = "\n\n<system-reminder>[Showing lines "
SHOWING_TAIL = " total lines]</system-reminder>"
TRANSCRIPT_TAIL_BYTES = 1 << 20  # the latest assistant message is near the end of the transcript
TRANSCRIPT_WAIT_S = 0.5  # how long a read's pre-tool hook waits for its call to reach the transcript


def execute_command(tool_input: object) -> str | None:
    """The command of a foreground Execute call with no argument we do not know."""
    if not isinstance(tool_input, dict) or set(tool_input) - {"command", "summary", "timeout", "riskLevel", "riskLevelReason"}:
        return None  # fireAndForget and anything newer: not a plain read
    command = tool_input.get("command")
    return command if isinstance(command, str) else None


def read_request(tool_input: object):  # -> readers.Ask | None
    """The span a `Read` call asks for; None when we cannot say for sure (a relative path, an
    offset or limit that is not a positive whole number, an image's quality)."""
    from leanctx import readers

    return readers.offset_limit_ask(tool_input, READ_DEFAULT_LIMIT)


def read_delivery(tool_input: object, tool_response: object):  # -> tuple[readers.Ask, str] | None
    """(span, file text) a `Read` gave the model: `tool_response` is that very text (verified on
    0.215.0 and 0.225.2): the whole file, or lines A-B with the "Showing lines" note after them.
    None for anything else (an image, a PDF, an error, text cut to 60,000 characters)."""
    from leanctx import readers

    asked = read_request(tool_input)
    if asked is None or not isinstance(tool_response, str) or not tool_response:
        return None
    text, start = tool_response, 1
    if text.endswith(" characters]</system-reminder>") and SHOWING_HEAD in text:
        return None  # ", truncated to 60k characters": the last line is cut
    if text.endswith(SHOWING_TAIL):
        at = text.rfind(SHOWING_HEAD)
        if at < 0:
            return None
        span, _, total = text[at + len(SHOWING_HEAD):-len(SHOWING_TAIL)].partition(" of ")
        first, _, last = span.partition("-")
        a, b = readers.line_number(_int(first)), readers.line_number(_int(last))
        if a is None or b is None or readers.line_number(_int(total)) is None:
            return None
        text, start = text[:at], a
        if text.count("\n") != b - a:
            return None
    if start != asked.start:
        return None
    text = text[:-1] if text.endswith("\n") else text
    if not text:
        return None
    end = start + text.count("\n")
    if end > asked.end:
        return None
    return readers.Ask(asked.path, start, end), text


def _int(word: str) -> int | None:
    return int(word) if word.isdigit() and len(word) <= 9 else None


def call_id_from_transcript(transcript: str | None, session: str | None, tool: str | None, tool_input: object,
                            wait: float = 0.0, pending: bool = True) -> str | None:
    """The model's id for this tool call, from the session's transcript: the one `tool_use` of
    the latest assistant message with this name and input that has no `tool_result` yet. None
    when the transcript is not the session's own file, or no call or several match (after
    looking again for up to `wait` seconds). `pending` False: answered calls count too."""
    import time

    deadline = time.monotonic() + wait
    while True:
        found = _pending_call(transcript, session, tool, tool_input, pending)
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(0.02)


def _pending_call(transcript: str | None, session: str | None, tool: str | None, tool_input: object,
                  pending: bool = True) -> str | None:
    if not (transcript and session and tool and isinstance(tool_input, dict)) or not os.path.isabs(transcript) \
            or os.path.basename(transcript) != session + ".jsonl":
        return None
    from leanctx.agents.logtail import tail

    lines = tail(transcript, TRANSCRIPT_TAIL_BYTES)
    if lines is None:
        return None
    answered: set = set()
    for raw in reversed(lines):
        if not raw.strip():
            continue
        try:
            entry = fastjson.loads(raw.decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            return None
        message = entry.get("message") if isinstance(entry, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        blocks = [b for b in content if isinstance(b, dict)]
        if message.get("role") == "user" and pending:
            answered.update(b["tool_use_id"] for b in blocks if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str))
            continue
        if message.get("role") != "assistant":
            continue
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        ids = [b.get("id") for b in uses if b.get("name") == tool and b.get("input") == tool_input]
        ids = [i for i in ids if not isinstance(i, str) or i not in answered]
        return ids[0] if len(ids) == 1 and isinstance(ids[0], str) and 0 < len(ids[0]) <= 256 else None
    return None
