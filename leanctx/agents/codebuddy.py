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
text the model received. CodeBuddy has no "file unchanged" answer of its own: a re-read after a
refusal simply runs.

`Bash`'s PostToolUse carries no output (exit code and flags only), and CodeBuddy writes the call's
result to the session transcript (`transcript_path`) only after that hook returns (it waits for the
hook: waiting there never shows it). The model's next call does see it there: its pre-tool hook
credits the shell reads of the calls before it (`earlier_shell_reads`), from the transcript entry
that is the very text the model received (`Command: C\nStdout: OUT\nStderr: (empty)\nExit Code:
0\nSignal: (none)`; equal to the request's tool message in every run, 2.117.0). Each foreground
command starts in a new shell in the session's folder (`workspaceFolders[0] || process.cwd()`;
`cd` never carries over, whatever the tool's description says): a relative path is read from the
payload's `cwd` when that is the CodeBuddy process's own working directory. A subagent's calls
are in its own transcript (`transcript_of`).

Its automatic compaction fires SessionStart(source "compact") without waiting for it, and no
PreCompact (2.117.0, `-p`); the summary entry it writes to the transcript is counted as a
compaction by the next read's hook (`context_losses`), so that read is answered after it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

import os

from leanctx import fastjson
from leanctx.agents.base import CLAUDE_STYLE_EVENTS, POST_TOOL, ClaudeShapeAgent, EventSpec, claude_bash_command


class CodeBuddy(ClaudeShapeAgent):
    name = "codebuddy"
    display_name = "CodeBuddy"
    binaries = ("codebuddy", "cbc")
    checked_against = "CodeBuddy Code 2.117.0 (real CLI from @tencent-ai/agent-sdk 0.3.201, end-to-end tests)"
    family = "claude-shaped"
    verified_version = "2.117.0"
    min_version = "2.117.0"
    version_command = ("codebuddy", "--version")
    support = {
        "verified": "run, 2.117.0",
        "hooks": "`~/.codebuddy/settings.json` / `DIR/.codebuddy/settings.local.json`",
        "mcp": "first existing of its 3 user files / `DIR/.mcp.json`",
        "rule": "`CODEBUDDY.md` block (+ `DeferExecuteTool`)",
        "call_id": "no",
        "bot": "yes",
        "guard": "yes",
    }
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
        command = claude_bash_command(event.tool_input)
        return readers.shell_ask(command, shell_cwd(event.cwd)) if command else None

    def builtin_read_delivery(self, event, payload: dict):  # noqa: ANN001, ANN201
        if event.tool_name == "Read":
            return read_delivery(event.tool_input, payload.get("tool_response"))
        return None  # Bash's PostToolUse has no stdout: the next call credits it (builtin_read_earlier)

    def builtin_read_earlier(self, event) -> list:  # noqa: ANN001 - HookEvent
        if not isinstance(event.tool_use_id, str):
            return []
        return earlier_shell_reads(transcript_of(event), event.tool_use_id, shell_cwd(event.cwd))

    def context_losses(self, event) -> list:  # noqa: ANN001 - HookEvent
        return compactions_in(transcript_of(event))

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


# Bash in CodeBuddy Code 2.117.0 (dist/codebuddy-headless.js, `buildForegroundResult`): the model
# gets these lines joined with "\n"; stdout "(empty)" when there was none. An output over
# MAX_SHELL_OUTPUT_LENGTH (30,000 characters; BASH_MAX_OUTPUT_LENGTH moves it) is kept as a
# `<persisted-output>` preview instead, and sandbox notes add lines after `Signal:`: neither has
# this shape, and only a clean exit counts.
BASH_HEAD = "Command: {command}\nStdout: "
BASH_TAIL = "\nStderr: (empty)\nExit Code: 0\nSignal: (none)"
EMPTY = "(empty)"
CREDITS_EARLIER = ("Read", "Bash")  # the tools whose pre-tool hook credits the calls before it
TRANSCRIPT_TAIL_BYTES = 2 << 20  # the calls before this one sit near the end (one output <= ~60 KB of JSON)
RESPONSE_TYPES = ("function_call", "message", "reasoning")  # what one model response writes, all under its id


def transcript_of(event) -> str | None:  # noqa: ANN001 - HookEvent
    """The transcript that holds this call: the session's (`transcript_path`), or for a
    subagent's call `<that folder>/<session id>/subagents/<agent_id>.jsonl` (2.117.0: its tool
    payloads name a `transcript_path` that is never written)."""
    path, session, agent = event.transcript_path, event.session_id, event.subagent_id
    if not isinstance(path, str) or not os.path.isabs(path):
        return None
    if agent is None:
        return path
    names = (session, agent)
    if not all(isinstance(n, str) and 0 < len(n) <= 200 and n not in (".", "..") and "/" not in n and "\x00" not in n for n in names):
        return None
    return os.path.join(os.path.dirname(path), session, "subagents", agent + ".jsonl")


COMPACTED = (b'"isCompacted":true', b'"isSummary":true')  # the summary entry a compaction writes
COMPACTION_TAIL_BYTES = 512 << 10  # a summary matters to the first reads after it, near the end


def compactions_in(transcript: object) -> list:
    """The ids of the compaction summaries near the transcript's end. An automatic compaction
    (2.117.0, emergency-auto) writes a user message with `providerData.isCompacted` and
    `isSummary` true (the new context's root) and fires SessionStart(source "compact") without
    waiting for it, and no PreCompact: the next read may come first."""
    from leanctx.agents.logtail import tail

    if not isinstance(transcript, str) or not os.path.isabs(transcript):
        return []
    lines = tail(transcript, COMPACTION_TAIL_BYTES)
    found = []
    for raw in lines or ():
        if not any(m in raw for m in COMPACTED):
            continue
        try:
            entry = fastjson.loads(raw.decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            continue  # a line still being written: the next call sees it whole
        data = entry.get("providerData") if isinstance(entry, dict) else None
        if isinstance(data, dict) and entry.get("type") == "message" and (data.get("isCompacted") is True or data.get("isSummary") is True) \
                and isinstance(entry.get("id"), str):
            found.append(entry["id"])
    return found


def shell_cwd(cwd: object) -> str | None:
    """The payload's `cwd` when it is where CodeBuddy's Bash runs a command: the host process's
    own working directory (the payload's may also be a sandbox's or a worktree's); else None."""
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        return None
    here = host_cwd()
    try:
        return cwd if here is not None and os.path.realpath(cwd) == here else None
    except (OSError, ValueError):
        return None


SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "busybox", "env", "leanctx-hook", "timeout"})


def host_cwd() -> str | None:
    """The working directory of the process that ran this hook: the nearest ancestor that is
    not a shell (hooks run under `sh -c`; the walk of hooks/hostproc.py, whose SHELLS these
    are). None without /proc."""
    pid = os.getppid()
    for _ in range(6):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                raw = f.read().decode("utf-8", "replace")
            name = raw[raw.find("(") + 1:raw.rfind(")")]
            parent = int(raw[raw.rfind(")") + 2:].split()[1])
            if name not in SHELLS or parent <= 1:
                return os.readlink(f"/proc/{pid}/cwd")
        except (OSError, ValueError, IndexError):
            return None
        pid = parent
    return None


def bash_output(command: str, output: object) -> str | None:
    """The stdout of a clean foreground Bash run, from the text the model received; None for any
    other shape (an error, a cut output, a note after it, stderr)."""
    if isinstance(output, dict) and output.get("type") == "text":
        output = output.get("text")
    head = BASH_HEAD.format(command=command)
    if not isinstance(output, str) or not output.startswith(head) or not output.endswith(BASH_TAIL):
        return None
    stdout = output[len(head):len(output) - len(BASH_TAIL)]
    # no output at all shows as "(empty)", so that word alone (a file holding just it) is not known
    return None if stdout == EMPTY else stdout


def earlier_shell_reads(transcript: object, call_id: str, cwd: str | None) -> list:
    """`_earlier_shell_reads`; a transcript of a shape we do not know (an id that is a list, ...): []."""
    try:
        return _earlier_shell_reads(transcript, call_id, cwd)
    except (TypeError, ValueError, AttributeError, RecursionError):
        return []


def _earlier_shell_reads(transcript: object, call_id: str, cwd: str | None) -> list:
    """[(call id, readers.Ask, file text)] of the shell reads whose output the model received
    just before it made call `call_id`, read from the session transcript. CodeBuddy writes each
    model response as entries under one id (its text, its calls), then each call's result,
    chained by `parentId`; the walk goes up that chain from this call's response through
    results and earlier responses only (a user message, a compaction's prompt or summary, any
    other entry ends it). So every result taken is in the context the model answered from.
    A response gets its results credited once: by the first of its calls whose pre-tool hook
    does this (CREDITS_EARLIER); the walk goes on past a response with no such call. Anything
    not as expected: [] (nothing credited)."""
    from leanctx import readers
    from leanctx.agents.logtail import tail

    if not isinstance(transcript, str) or not os.path.isabs(transcript) or not transcript.endswith(".jsonl"):
        return []
    lines = tail(transcript, TRANSCRIPT_TAIL_BYTES)
    if not lines:
        return []
    entries = _Entries(lines)
    mine = entries.find_call(call_id)
    if mine is None:
        return []
    response = entries.response(mine.get("id"))
    firsts = [e for e in response if e.get("type") == "function_call" and e.get("name") in CREDITS_EARLIER]
    if not firsts or firsts[0].get("callId") != call_id:
        return []
    found: list = []
    node = mine.get("parentId")
    while True:
        results: list = []
        entry = entries.get(node)
        while entry is not None and entry.get("type") == "function_call_result":
            results.append(entry)
            node = entry.get("parentId")
            entry = entries.get(node)
        if entry is None or entry.get("type") not in RESPONSE_TYPES or (entry.get("type") == "message" and entry.get("role") != "assistant"):
            return found[::-1]  # a user message, the transcript's start, anything else: the chain ends here
        response = entries.response(node)
        calls = {e.get("callId"): e for e in response if e.get("type") == "function_call"}
        for result in results:
            call = calls.get(result.get("callId"))
            if call is None:
                return found[::-1]  # a result of no call of this response: not the shape we know
            if result.get("name") != "Bash" or call.get("name") != "Bash" or result.get("status") != "completed":
                continue
            try:
                args = fastjson.loads(call.get("arguments"))
            except (TypeError, ValueError, RecursionError):
                continue
            command = claude_bash_command(args)
            ask = readers.shell_ask(command, cwd) if command else None
            out = bash_output(command, result.get("output")) if ask is not None else None
            content = readers.shell_content(ask, out) if out else None
            if content and isinstance(result.get("callId"), str):
                found.append((result["callId"], ask, content))
        if any(e.get("name") in CREDITS_EARLIER for e in calls.values()):
            return found[::-1]  # that response's first such call credited what came before it
        parents = {e.get("parentId") for e in response}
        if len(parents) != 1:
            return found[::-1]
        node = parents.pop()


class _Entries:
    """A transcript tail's entries, parsed from the end only as far as a lookup needs."""

    def __init__(self, lines: list) -> None:
        self.lines = lines
        self.next = len(lines) - 1  # the next line to parse, going up
        self.by_id: dict = {}  # id -> entries under it, newest first
        self.calls: dict = {}  # callId -> function_call entry

    def _more(self) -> dict | None:
        """Parse the next line up: its entry ({} for a line that is not one); None at the top."""
        while self.next >= 0:
            raw = self.lines[self.next]
            self.next -= 1
            if not raw.strip():
                continue
            try:
                entry = fastjson.loads(raw.decode("utf-8", "surrogatepass"))
            except (ValueError, RecursionError):
                self.next = -1  # a line we cannot read: nothing above it is trusted
                return None
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                return {}
            self.by_id.setdefault(entry["id"], []).append(entry)
            if entry.get("type") == "function_call" and isinstance(entry.get("callId"), str):
                self.calls.setdefault(entry["callId"], entry)
            return entry
        return None

    def find_call(self, call_id: str) -> dict | None:
        while call_id not in self.calls:
            if self._more() is None:
                return None
        return self.calls[call_id]

    def get(self, entry_id: object) -> dict | None:
        """The entry with this id (a response's newest); None when not in the tail, or when the
        id names two entries that are not one response's."""
        if not isinstance(entry_id, str):
            return None
        while entry_id not in self.by_id:
            if self._more() is None:
                return None
        found = self.by_id[entry_id]
        return found[0] if len(found) == 1 or all(e.get("type") in RESPONSE_TYPES for e in found) else None

    def response(self, entry_id: object) -> list:
        """Every entry written under a response's id, oldest first: they sit together, so the
        lines above them are parsed until one of another id."""
        if self.get(entry_id) is None:
            return []
        while True:
            entry = self._more()
            if entry is None or entry.get("id") != entry_id:
                break
        return self.by_id.get(entry_id, [])[::-1]
