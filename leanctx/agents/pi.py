"""Pi coding agent (npm `@mariozechner/pi-coding-agent`): no hook commands and no MCP client,
TypeScript/JS extensions instead.

Pi loads every `*.js`/`*.ts` in `<agent dir>/extensions/` (`~/.pi/agent`, or `$PI_CODING_AGENT_DIR`;
project: `.pi/extensions/`) into its own process (its docs/extensions.md, 0.73.1). Pi has no MCP
client ("No MCP" in its README), so our extension (`templates/pi-extension.js`) itself starts
leanctx's MCP server (`leanctx-hook mcp`, a child of the Pi process: the server's parent is the host
process the hooks' records name), registers the server's `ctx_read` as a Pi tool, and sends each
call's `tools/call` with Pi's tool call id in `_meta["leanctx/callId"]`. On Pi's events it runs
the leanctx hook command with a Claude-shaped JSON payload on stdin: `session_id` and
`transcript_path` from Pi's own session (`sessionManager.getSessionId()`, `getSessionFile()`),
`cwd`, `prompt` (before_agent_start), `tool_name`/`tool_input`/`tool_use_id` (tool_call).
A `tool_call` handler answering `{block: true, reason}` skips the tool and hands the model the
reason as the call's error result (verified on 0.73.1).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

from leanctx import fastjson
from leanctx.agents.base import (
    PRE_COMPACT,
    PRE_TOOL,
    PROMPT,
    SESSION_END,
    SESSION_START,
    STOP,
    EventSpec,
    FileHookAgent,
    env_dir,
    stdout_answer,
)

EXTENSION = "leanctx.js"
READ_TOOL = "ctx_read"  # the name the extension registers leanctx's ctx_read under in Pi


class Pi(FileHookAgent):
    name = "pi"
    display_name = "Pi"
    binaries = ("pi",)
    checked_against = "Pi 0.73.1 (real CLI, end-to-end tests)"
    hook_file_mode = 0o644
    #: no MCP config file: the extension starts the server itself (doctor_mcp skips the file checks)
    mcp_in_extension = True
    events = (
        EventSpec("session_start", SESSION_START),
        EventSpec("before_agent_start", PROMPT),
        # Pi awaits its extension handlers: session_before_compact runs before it summarises
        EventSpec("session_before_compact", PRE_COMPACT),
        EventSpec("session_compact", PRE_COMPACT),
        # `/tree` navigation moves the session to another point of its tree: what the model holds
        # is then that branch's, so it counts as a context loss like a compaction (its docs)
        EventSpec("session_before_tree", PRE_COMPACT),
        EventSpec("session_tree", PRE_COMPACT),
        EventSpec("agent_end", STOP),
        EventSpec("session_shutdown", SESSION_END),
    )
    guard_event = EventSpec("tool_call", PRE_TOOL)
    read_gate_event = EventSpec("tool_call", PRE_TOOL, matcher=READ_TOOL)

    def config_dir(self, home: Path) -> Path:
        return env_dir("PI_CODING_AGENT_DIR", home / ".pi" / "agent")

    def hook_folder(self, home: Path, project: Path | None) -> Path:
        return (project / ".pi" if project is not None else self.config_dir(home)) / "extensions"

    def hook_file_names(self) -> tuple[str, ...]:
        return (EXTENSION,)

    def read_tool(self, server: str = "leanctx") -> str:
        return READ_TOOL

    def is_read_tool(self, tool_name: object) -> bool:
        return tool_name == READ_TOOL

    def hook_files(self, wired: dict[str, str], mark: Callable[[dict[str, str]], str]) -> dict[str, str]:
        import json
        import shlex
        from importlib import resources

        from leanctx import templating

        # the MCP server: the same wrapper the hooks run (at project level `leanctx-hook` on PATH)
        any_command = next(iter(wired.values()), "leanctx-hook")
        bot = any("--bot" in c.split() for c in wired.values())
        server = [shlex.split(any_command)[0], "mcp", *(("--profile", "bot") if bot else ())]
        text = resources.files("leanctx").joinpath("templates/pi-extension.js").read_text(encoding="utf-8")
        values = {"MARK": mark(wired), "TIMEOUT_MS": str(self.timeout * 1000),
                  "HOOKS": json.dumps(wired, indent=2, sort_keys=True, ensure_ascii=True),
                  "SERVER": json.dumps(server, ensure_ascii=True), "READ_TOOL": json.dumps(READ_TOOL),
                  "PRE_READS_ONLY": json.dumps("--guard" not in wired.get("tool_call", "").split()), "HOOK_RUNNER": templating.js_hook_runner()}
        return {EXTENSION: templating.fill(text, values, "pi-extension.js")}

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # Pi reads AGENTS.md from its agent dir and from the project into every session
        return (self.config_dir(home) if project is None else project) / "AGENTS.md", "block"

    instructions_path = rules_path

    def mcp_config(self, home: Path, project: Path | None):
        return None  # no MCP client: the extension runs the server

    def context_output(self, event: str, text: str) -> str:
        return ""

    def guard_output(self, event: str, reason: str) -> str:
        return fastjson.dumps({"decision": "deny", "reason": reason})

    def check_output(self, event: str, stdout: str) -> str | None:
        value = stdout_answer(stdout)
        if not isinstance(value, dict):
            return value
        if event == "tool_call" and value.get("decision") == "deny" and isinstance(value.get("reason"), str):
            return None
        return f"not an answer the leanctx extension takes for {event}: {stdout[:80]!r}"

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        import os

        session = "leanctx-doctor-0000-0000-0000-000000000000"
        payload: dict[str, Any] = {"hook_event_name": event, "session_id": session, "cwd": cwd,
                                   "transcript_path": os.path.join(cwd, f"{session}.jsonl")}
        if event == "session_start":
            payload["source"] = "startup"
        elif event == "before_agent_start":
            payload["prompt"] = "leanctx doctor smoke test"
        elif event == "tool_call":
            payload.update(tool_name=READ_TOOL, tool_input={"path": "README.md"}, tool_use_id="call_doctor")
        return payload


AGENT = Pi()
