"""GitHub Copilot CLI: a hooks file of ours, `~/.copilot/hooks/leanctx.json` (user), or
`<project>/.github/hooks/leanctx.json`; MCP in `~/.copilot/mcp-config.json` / `.github/mcp.json`.

Copilot loads every `*.json` in its hooks folders: `{"version": 1, "hooks": {"<event>":
[{"type": "command", "bash": "<cmd>", "timeoutSec": N}]}}`; a broken file is skipped alone, the
others still run. We write the camelCase dialect deliberately: only it has `preMcpToolCall` (our
per-call identity, below), `agentStop` carries `transcriptPath`, and the payloads are Copilot's
own. (The PascalCase/Claude dialect gives snake_case payloads but no MCP hook, and its
PermissionRequest payload stays camelCase anyway.) Copilot's config folder is `$COPILOT_HOME`
or `~/.copilot` (its bundled JS: `configDir ?? COPILOT_HOME ?? ~/.copilot`).

Facts we rely on, verified on 1.0.102 in runs (shared/reference/hosts-gemini-qwen-copilot-
opencode.md §3, tests/e2e/test_copilot_e2e.py; payloads in tests/fixtures/payloads/copilot/):
- events: sessionStart(`source` new|resume) → userPromptSubmitted → preToolUse →
  preMcpToolCall → agentStop(`transcriptPath`) → sessionEnd; every payload has `sessionId`
  and `cwd`, none an event name; pre/postToolUse carry no call id: for the built-in `view` and
  `bash` reads the gate takes it from Copilot's session log (copilotlog.py);
- a preToolUse deny reaches the model as `Denied by preToolUse hook: <reason>`, the call's
  result; postToolUse's `toolResult.textResultForLlm` is what the model gets, unless a
  postToolUse hook answers `modifiedResult` (then the last such hook's text; the session log shows
  it, which the cache reads before a stub: cache/copilotevents.py, so every main-agent event is
  published with that log's path, the one agentStop names);
- any non-zero exit of preToolUse denies the tool, and plain stdout on permissionRequest
  denies it too: our runner always exits 0, we wire no permissionRequest, and on preToolUse
  and preMcpToolCall we print nothing or one JSON object;
- agentStop carries no reply: the bot profile (only it) takes the last main-agent `assistant.message`
  from the tail of the transcript it names (`~/.copilot/session-state/<id>/events.jsonl`),
  which Copilot may not have written yet when the hook starts;
- `{"additionalContext": X}` on sessionStart / userPromptSubmitted reaches the model;
  `{"permissionDecision": "deny", "permissionDecisionReason": R}` on preToolUse denies;
- preMcpToolCall gets the model's `toolCallId` with `serverName`/`toolName`, and its
  `{"metaToUse": {...}}` is merged into the MCP request's `_meta` (Copilot keeps its own
  progressToken): our read gate notes the call and hands its id to our MCP server there,
  the exact per-call identity Claude Code gives with `claudecode/toolUseId`;
- the MCP server is a child of the same native `copilot` process as the hooks, with
  `COPILOT_AGENT_SESSION_ID` in its environment;
- a subagent (`task` tool) runs in the same process and MCP connection, but its hooks
  (userPromptSubmitted, preMcpToolCall, agentStop) carry its own `sessionId` and an `agentId`:
  the call id keeps its reads apart from its parent's;
- a hooks file with a comment or trailing comma never runs; mcp-config.json with both works;
- project hooks (`.github/hooks/*.json`) run only in a trusted folder (`--trust-folder`, or
  trusted once interactively), silently skipped otherwise (doctor says so for project installs);
  trusted, `.github/mcp.json` starts our server and `.github/copilot-instructions.md` reaches
  the model, as `~/.copilot/copilot-instructions.md` does at user level.
- `/compact` in a resumed session (`copilot -p /compact --continue`) fires preCompact
  (`sessionId`, `transcriptPath`, `trigger: "manual"`); a resumed session without it keeps its
  history, so its reads may be stubs.
- automatic (background) compaction fires preCompact as it starts (a BYOK model's limit is
  `COPILOT_PROVIDER_MAX_PROMPT_TOKENS`; tests/e2e/test_copilot_builtin_read_e2e.py).
From the CLI's docs only: the project skills folder `.github/skills` (`~/.copilot/skills` is verified).
VS Code loads the same hooks folders and runs this file too (`real_caller`, agents/vscode.py).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

from leanctx import fastjson
from leanctx.agents.base import (
    POST_TOOL,
    PRE_COMPACT,
    PRE_TOOL,
    PROMPT,
    SESSION_END,
    SESSION_START,
    STOP,
    Agent,
    EventSpec,
    HookEvent,
    stdout_answer,
    str_field,
    env_dir,
)

#: the `_meta` key our read gate hands the call id to the MCP server under (mcpserver.CALL_ID_META_KEYS)
CALL_ID_META = "leanctx/callId"
_MAX_CALL_ID = 200  # as publish.MAX_CALL_ID: a longer id is never noted, so never handed on
_CONTEXT_EVENTS = ("sessionStart", "userPromptSubmitted")
_SOURCES = {"new": "startup"}  # Copilot's fresh session is Claude's "startup"
_TAIL_BYTES = 256 * 1024  # how far back from the transcript's end the last reply is looked for
REPLY_WAIT_S = 2.0  # how long agentStop waits for Copilot to write the turn to its transcript


class Copilot(Agent):
    name = "copilot"
    display_name = "GitHub Copilot CLI"
    binaries = ("copilot",)
    checked_against = "GitHub Copilot CLI 1.0.102 (real CLI, end-to-end tests)"
    family = "cursor-like"
    verified_version = "1.0.102"
    min_version = "1.0.102"
    version_command = ("copilot", "--version")
    support = {
        "verified": "run, 1.0.102",
        "hooks": "`~/.copilot/hooks/leanctx.json` / `DIR/.github/hooks/leanctx.json` (trusted folders)",
        "mcp": "`~/.copilot/mcp-config.json` / `DIR/.github/mcp.json`",
        "rule": "`copilot-instructions.md`",
        "call_id": "yes (preMcpToolCall)",
        "bot": "yes",
        "guard": "yes",
    }
    new_file_keys = {"version": 1}
    events = (
        EventSpec("sessionStart", SESSION_START),
        EventSpec("userPromptSubmitted", PROMPT),
        EventSpec("preCompact", PRE_COMPACT),
        EventSpec("agentStop", STOP),
        EventSpec("sessionEnd", SESSION_END),
    )
    guard_event = EventSpec("preToolUse", PRE_TOOL)
    # no matchers in this dialect: the gate sees every MCP call and notes only our ctx_read
    read_gate_event = EventSpec("preMcpToolCall", PRE_TOOL)
    hooks_file = "leanctx.json"
    # the built-in `view` and plain `bash` reads, gated like ctx_read (hooks/readgate.py,
    # readers.py; tests/e2e/test_copilot_builtin_read_e2e.py). They pass preToolUse, not
    # preMcpToolCall, and this dialect has no matchers: both entries see every tool call
    builtin_read_tools = ("view", "bash")
    builtin_read_pre_event = EventSpec("preToolUse", PRE_TOOL)
    builtin_read_post_event = EventSpec("postToolUse", POST_TOOL)
    # verified on 1.0.102: a hooks file with a comment and trailing commas never runs, while
    # mcp-config.json with both still starts its servers
    mcp_jsonc_ok = True

    # -- where ---------------------------------------------------------------------------
    def config_dir(self, home: Path) -> Path:
        return env_dir("COPILOT_HOME", home / ".copilot")

    def user_config_path(self, home: Path) -> Path:
        return self.config_dir(home) / "hooks" / self.hooks_file

    def project_config_path(self, project: Path) -> Path:
        return project / ".github" / "hooks" / self.hooks_file

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        if project is None:
            return self.config_dir(home) / "copilot-instructions.md", "block"
        return project / ".github" / "copilot-instructions.md", "block"

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        base = self.config_dir(home) if project is None else project / ".github"
        return base / "skills" / "leanctx-conversation-state" / "SKILL.md", "file"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        if project is not None:
            # the CLI's own migration note: "migrate to .mcp.json or .github/mcp.json"; .github/
            # keeps Claude Code's `.mcp.json` entry (another shape) out of the way
            return project / ".github" / "mcp.json", "json", ("mcpServers",)
        return self.config_dir(home) / "mcp-config.json", "json", ("mcpServers",)

    def mcp_entry(self, command: str, args: list[str]) -> dict:
        return {"type": "local", "command": command, "args": args, "tools": ["*"]}

    def unparseable_effect(self, path: Path, home: Path) -> str:
        # verified on 1.0.102: a broken hooks file or mcp-config.json is skipped without a word
        return "it silently skips this whole file"

    # -- what ----------------------------------------------------------------------------
    def hook_group(self, command: str, spec: EventSpec) -> dict:
        return {"type": "command", "bash": command, "timeoutSec": self.timeout}

    def group_commands(self, group: object) -> list[str]:
        if not isinstance(group, dict):
            return []
        return [group[k] for k in ("bash", "powershell", "command") if isinstance(group.get(k), str)]

    # -- payloads ------------------------------------------------------------------------
    def real_caller(self, event: str, payload: dict) -> tuple[Agent, str] | None:
        """VS Code also loads every `*.json` in `~/.copilot/hooks` and `.github/hooks` and runs
        this file's sessionStart, userPromptSubmitted, preToolUse, postToolUse and agentStop
        (as Stop) with its own payloads (agents/vscode.py [compat]): those are filed under VS
        Code, ids only, and its tool calls pass untouched. Copilot's own payloads carry epoch
        milliseconds, VS Code's an ISO string."""
        if isinstance(payload.get("timestamp"), str):
            from leanctx.agents import vscode

            if vscode.is_vscode_call(payload):
                return vscode.AGENT.handover(event, payload)
        return self, event

    def normalize(self, event: str, payload: dict) -> HookEvent:
        normalized = super().normalize(event, payload)
        if not normalized.cwd:
            normalized.cwd = str_field(payload, "workingDirectory")
        if normalized.source in _SOURCES:
            normalized.source = _SOURCES[normalized.source]
        normalized.prompt = str_field(payload, "prompt") if event == "userPromptSubmitted" else None
        if event == "preMcpToolCall":
            # preToolUse calls our tool `leanctx-ctx_read`; here server and tool come apart
            server, tool = str_field(payload, "serverName"), str_field(payload, "toolName")
            normalized.tool_name = f"mcp__{server}__{tool}" if server and tool else None
            normalized.tool_input = payload.get("arguments") if isinstance(payload.get("arguments"), dict) else None
            normalized.tool_use_id = str_field(payload, "toolCallId")
        stamp = payload.get("timestamp")
        normalized.timestamp = stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else None
        if not normalized.transcript_path and not normalized.subagent_id:
            # the session log agentStop names (only it and preCompact carry the path): the cache
            # reads there whether a delivering call's result reached the model unchanged
            from leanctx.agents import copilotlog

            normalized.transcript_path = copilotlog.log_path(normalized.session_id, _config_dir())
        return normalized

    # -- built-in readers -------------------------------------------------------------------
    def builtin_read_ask(self, event: HookEvent):  # -> readers.Ask | None
        if event.event != "preToolUse" or event.subagent_id:
            return None  # a subagent's calls sit in its parent's log, which its payloads do not name
        ask = _builtin_ask(event.tool_name, event.tool_input, event.cwd)
        if ask is None or not os.path.isfile(ask.path):
            return None
        event.tool_use_id = self._call_id(event)
        return ask if event.tool_use_id else None

    def builtin_read_delivery(self, event: HookEvent, payload: dict):  # -> tuple[readers.Ask, str] | None
        if event.event != "postToolUse" or event.subagent_id:
            return None
        ask = _builtin_ask(event.tool_name, event.tool_input, event.cwd)
        result = payload.get("toolResult")
        if ask is None or not isinstance(result, dict) or result.get("resultType") != "success":
            return None
        text = result.get("textResultForLlm")
        content = view_content(text) if event.tool_name == "view" else shell_output_content(ask, text)
        if not content:
            return None
        # a call the log cannot name still delivered these bytes: the gate hands them on unnamed
        event.tool_use_id = self._call_id(event)
        return ask, content

    def _call_id(self, event: HookEvent) -> str | None:
        """The model's id for this call, from Copilot's session log (its payloads name none)."""
        from leanctx.agents import copilotlog

        config = _config_dir()
        payload = {"sessionId": event.session_id, "timestamp": event.timestamp, "toolName": event.tool_name,
                   "toolArgs": event.tool_input}
        return copilotlog.call_id(event.event, payload, config)

    def reply_text(self, event: HookEvent) -> str | None:
        if event.event != "agentStop" or event.subagent_id or not event.transcript_path:
            return None
        return last_reply(event.transcript_path, event.timestamp)

    def context_output(self, event: str, text: str) -> str:
        if event not in _CONTEXT_EVENTS:
            return ""
        return fastjson.dumps({"additionalContext": text})

    def guard_output(self, event: str, reason: str) -> str:
        return fastjson.dumps({"permissionDecision": "deny", "permissionDecisionReason": reason})

    def read_gate_output(self, event: HookEvent) -> str:
        call_id = event.tool_use_id
        if event.event != "preMcpToolCall" or not isinstance(call_id, str) or not 0 < len(call_id) <= _MAX_CALL_ID:
            return self.no_opinion(event.event)
        return fastjson.dumps({"metaToUse": {CALL_ID_META: call_id}})

    def check_output(self, event: str, stdout: str) -> str | None:
        value = stdout_answer(stdout)
        if not isinstance(value, dict):
            return value  # plain text: on permissionRequest Copilot would deny the tool
        if event in _CONTEXT_EVENTS and set(value) == {"additionalContext"} and isinstance(value["additionalContext"], str):
            return None
        if event == "preToolUse" and value.get("permissionDecision") == "deny" and isinstance(value.get("permissionDecisionReason"), str):
            return None
        meta = value.get("metaToUse")
        if event == "preMcpToolCall" and set(value) == {"metaToUse"} and isinstance(meta, dict) and set(meta) == {CALL_ID_META}:
            return None
        return f"not an answer {self.display_name} takes for {event}: {stdout[:80]!r}"

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        session = "leanctx-doctor-00000000-0000-0000-0000-000000000000"
        payload: dict[str, Any] = {"sessionId": session, "timestamp": 1796104220622, "cwd": cwd}
        spec = self.event(event)
        kind = spec.kind if spec else ""
        if kind == SESSION_START:
            payload.update(source="new", initialPrompt="leanctx doctor smoke test")
        elif kind == PROMPT:
            payload["prompt"] = "leanctx doctor smoke test"
        elif kind == STOP:
            home = os.path.expanduser("~")
            payload.update(transcriptPath=os.path.join(home, ".copilot", "session-state", session, "events.jsonl"),
                           stopReason="end_turn", stop_hook_active=False)
        elif kind == SESSION_END:
            payload["reason"] = "complete"
        elif kind == PRE_COMPACT:
            payload["trigger"] = "manual"
        elif event == "preMcpToolCall":
            payload.update(toolCallId="call_leanctx_doctor", serverName="leanctx", toolName="ctx_read",
                           arguments={"path": os.path.join(cwd, "README.md")})
        elif kind == PRE_TOOL:
            payload.update(toolName="view", toolArgs={"path": os.path.join(cwd, "README.md")})
        return payload


def _config_dir() -> str:
    """Copilot's config folder as the hook sees it (hooks inherit Copilot's environment)."""
    return os.environ.get("COPILOT_HOME") or os.path.join(os.path.expanduser("~"), ".copilot")


_VIEW_ARGS = frozenset(("path", "view_range", "forceReadLargeFiles"))
# `bash` runs in the session's working directory unless a `shellId` reuses a shell (then the one
# it was made in); `async`/`detach` return before the output: only a plain synchronous run counts
_BASH_ARGS = frozenset(("command", "description", "mode", "initial_wait"))
_VIEW_REFUSED = "File too large to read at once"  # view's answer for a file over 20 KB (no range)
_VIEW_CUT = "\n\n[Output truncated."  # a range over 20 KB: the lines up to there, then this note
_SHELL_SAVED = "Output too large to read at once"  # bash's answer over 20 KB: a file and a preview
_SHELL_DONE = "\n<shellId: "
_SHELL_OK = " completed with exit code 0>"


def _builtin_ask(tool: object, args: object, cwd: str | None):  # -> readers.Ask | None
    """The span a `view` or `bash` call reads (1.0.102's arguments), or None."""
    from leanctx import readers

    if not isinstance(args, dict):
        return None
    if tool == "view":
        path = readers.abs_path(args.get("path"))  # view also takes a relative path: not named here
        # `..` after a symlink leads where the kernel says, not where the name says: not named here
        if path is None or ".." in path.split("/") or set(args) - _VIEW_ARGS or args.get("forceReadLargeFiles") not in (None, True, False):
            return None
        span = args.get("view_range")
        if span is None:
            return readers.Ask(os.path.normpath(path))
        # [start, end] inclusive, 1-based; end -1 reads through the end of the file (view's own
        # description); any other shape (one number, 0, end before start) is an error in view
        if not isinstance(span, list) or len(span) != 2:
            return None
        start, last = readers.line_number(span[0]), span[1]
        if start is None or isinstance(last, bool) or not isinstance(last, int):
            return None
        end = None if last == -1 else readers.line_number(last)
        if last != -1 and (end is None or end < start):
            return None
        return readers.Ask(os.path.normpath(path), start, end)
    if tool == "bash":
        command = args.get("command")
        if not isinstance(command, str) or set(args) - _BASH_ARGS or args.get("mode") not in (None, "sync"):
            return None
        return readers.shell_ask(command, cwd)
    return None


def view_content(text: object) -> str | None:
    """The file text a successful `view` gave the model: its output as it is (1.0.102 adds no
    line numbers, and keeps the file's final newline only when the span reaches it). None for
    its own notes (a file too large, a cut range)."""
    if not isinstance(text, str) or not text or text.startswith(_VIEW_REFUSED) or _VIEW_CUT in text:
        return None
    return text


def shell_output_content(ask, text: object) -> str | None:  # noqa: ANN001 - readers.Ask
    """The file text a `bash` read gave the model. Copilot 1.0.102 hands the model the command's
    output trimmed of blank space at both ends, then `\n<shellId: N completed with exit code C>`:
    only exit code 0 counts. Trimmed text that was not the file's (leading spaces) never equals
    it, so the daemon does not credit it; a file's trailing blank lines trimmed off leave its
    first lines exact, which the daemon credits as those lines (readcache.delivered_prefix). The trim takes the
    padding of `cat -n`'s first number too: that prefix is put back before the numbers are
    stripped (they are not the file's text). None for any other shape (a failure, a run still
    going, output over 20 KB saved to a file)."""
    from leanctx import readers

    if not isinstance(text, str) or not text.endswith(_SHELL_OK):
        return None
    cut = text.rfind(_SHELL_DONE)
    if cut < 0 or "\n" in text[cut + 1:] or ">" in text[cut + len(_SHELL_DONE):-len(_SHELL_OK)]:
        return None
    body = text[:cut]
    if not body or body.startswith(_SHELL_SAVED):
        return None
    if ask.numbered:
        number, tab, _rest = body.partition("\t")
        if tab and number.isdigit() and len(number) < 6:
            body = " " * (6 - len(number)) + body
    return readers.shell_content(ask, body)


def last_reply(path: str, stamp: object) -> str | None:
    """The main agent's last reply text from Copilot's transcript (`events.jsonl`, one event a
    line; agentStop carries no reply of its own). Copilot writes the transcript behind its
    hooks (verified: a hook may run before the reply, or the file, is on disk), so the reply counts only once
    the line announcing this very agentStop (`hook.start` with the payload's `timestamp`) is
    there: what precedes it is this turn's. Waited for up to REPLY_WAIT_S, else None (never an
    older turn's reply). Only a regular file is read, without blocking, and only its tail."""
    import stat
    import time

    if isinstance(stamp, bool) or not isinstance(stamp, int):
        return None
    stamp_text = b"%d" % stamp
    deadline = time.monotonic() + REPLY_WAIT_S
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            # the session's folder is there, its transcript not yet (Copilot writes it lazily)
            if not os.path.isdir(os.path.dirname(path)) or time.monotonic() >= deadline:
                return None
            time.sleep(0.02)
            continue
        except (OSError, ValueError, TypeError):
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None
            os.lseek(fd, max(0, info.st_size - _TAIL_BYTES), os.SEEK_SET)
            tail = os.read(fd, _TAIL_BYTES)
        except OSError:
            return None
        finally:
            os.close(fd)
        lines = tail.split(b"\n")
        mine = [i for i, line in enumerate(lines) if b"hook.start" in line and b'"agentStop"' in line and stamp_text in line]
        if mine:
            return _reply_before(lines[: mine[-1]])
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def _reply_before(lines: list) -> str | None:
    for line in reversed(lines):
        if b'"assistant.message"' not in line:
            continue
        try:
            entry = fastjson.loads(line.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(entry, dict) or entry.get("type") != "assistant.message" or entry.get("agentId"):
            continue  # a subagent's messages sit in its parent's transcript with their agentId
        data = entry.get("data")
        if isinstance(data, dict) and not data.get("parentToolCallId") and isinstance(data.get("content"), str) and data["content"].strip():
            return data["content"]
    return None


AGENT = Copilot()
