"""Antigravity CLI (`agy`, Google): our named hook set in `~/.gemini/config/hooks.json`.

Documentation only: no Antigravity package is on the registries reachable here, so no `agy` ran
here, and the IDE is not covered (its hooks and MCP file differ). Sources, cited in docs/hosts.md
"Antigravity CLI: verified vs not":
  [docs]   https://antigravity.google/docs/hooks (as summarised in third-party research notes,
           read through the code index): hook files `~/.gemini/config/hooks.json` and a
           workspace's `.agents/hooks.json`; events PreToolUse, PostToolUse, PreInvocation,
           PostInvocation, Stop (no prompt-submit, no compaction); camelCase payloads
           `conversationId`, `workspacePaths`, `transcriptPath`, tool events `toolCall`, `stepIdx`.
  [shape]  aoagents/agent-orchestrator backend/internal/adapters/agent/agy (hooks.go): the file
           maps a hook set's NAME to its events, `{"<name>": {"PreInvocation": [{type, command,
           timeout}], "PostToolUse": [{matcher, hooks: [...]}], "Stop": [...]}}`: lifecycle events
           take flat entries, tool events matcher groups; other names are left alone. A
           siltpoke test writes the same (flat `Stop` under the set's name).
  [mcp]    https://antigravity.google/docs/cli/mcp/ and third-party installers:
           `~/.gemini/antigravity-cli/mcp_config.json`, `mcpServers.<name> = {command, args}`.
Gemini CLI's module owns `~/.gemini/settings.json` and `GEMINI.md`: nothing here touches them
(no read rule: the rule file Antigravity reads is Gemini's `GEMINI.md`). Whether a hook's refusal
reaches the model, and what `agy` names an MCP tool, are not known: no guard, no read gate, and
no compaction hook, so the cache withholds stubs (cache/scope.py SILENT_COMPACTION).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

from leanctx.agents.base import (NOTICE, STOP, ClaudeShapeAgent, EventSpec, HookEvent, as_dict, str_field,
                                 stdout_answer)

HOOK_SET = "leanctx"  # the name our entries live under in hooks.json [shape]
NO_OPINION = "{}"  # hooks answer JSON on stdout; `{}` is the documented empty answer [docs]


class Antigravity(ClaudeShapeAgent):
    name = "antigravity"
    display_name = "Antigravity CLI"
    binaries = ("agy",)
    family = "claude-shaped"
    checked_against = "antigravity.google/docs/hooks and third-party agy adapters"
    support = {
        "verified": "documentation only (CLI `agy`; not the IDE)",
        "hooks": "`~/.gemini/config/hooks.json` / `DIR/.agents/hooks.json` (hook set `leanctx`)",
        "mcp": "`~/.gemini/antigravity-cli/mcp_config.json` / —",
        "rule": "none (its `GEMINI.md` is Gemini CLI's)",
        "call_id": "no",
        "bot": "no",
        "guard": "no (deny answer unknown)",
    }
    verified_version = ""
    min_version = ""
    version_command = ("agy", "--version")
    events = (  # [docs]: no session start, prompt or compaction event
        EventSpec("PreInvocation", NOTICE),  # before each agent invocation: carries the ids
        EventSpec("Stop", STOP),
    )
    guard_event = None
    read_gate_event = None
    context_events = ()
    hooks_key = (HOOK_SET,)
    flat_entries = True  # [shape]: lifecycle events; tool events would take matcher groups
    mcp_type = None  # [mcp]
    config_home = ".gemini/config"
    settings_file = "hooks.json"

    def project_config_path(self, project: Path) -> Path:
        return project / ".agents" / "hooks.json"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]] | None:
        if project is not None:
            return None  # no project MCP file is documented for the CLI
        return home / ".gemini" / "antigravity-cli" / "mcp_config.json", "json", ("mcpServers",)

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return None

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return None

    def detect(self, home: Path) -> bool:
        # ~/.gemini alone is Gemini CLI's: only agy's own folder or binary says Antigravity is here
        import shutil

        return (home / ".gemini" / "antigravity-cli").is_dir() or shutil.which("agy") is not None

    def hook_group(self, command: str, spec: EventSpec) -> dict:
        entry: dict[str, Any] = {"type": "command", "command": command, "timeout": self.timeout}
        return entry if spec.kind in (NOTICE, STOP) else {"matcher": spec.matcher or "*", "hooks": [entry]}

    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        conversation = str_field(payload, "conversationId")  # [docs]
        ev.conversation_id = ev.session_id = conversation
        roots = payload.get("workspacePaths")
        ev.workspace_roots = [r for r in roots if isinstance(r, str) and r] if isinstance(roots, list) else []
        ev.cwd = ev.workspace_roots[0] if ev.workspace_roots else None
        ev.transcript_path = str_field(payload, "transcriptPath")
        call = as_dict(payload.get("toolCall"))
        ev.tool_name = str_field(call, "name")
        ev.tool_input = as_dict(call.get("args")) or None
        return ev

    def no_opinion(self, event: str) -> str:
        return NO_OPINION

    def check_output(self, event: str, stdout: str) -> str | None:
        value = stdout_answer(stdout)
        if value is None or isinstance(value, str):
            return value
        return None if value == {} else f"not an answer leanctx gives on {event}: {stdout[:80]!r}"

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        payload: dict[str, Any] = {"conversationId": "leanctx-doctor-agy", "workspacePaths": [cwd]}  # [docs]
        if event == "PreInvocation":
            payload["invocationNum"] = 0
        elif event == "Stop":
            payload.update(executionNum=0, terminationReason="completed", fullyIdle=True)
        return payload


AGENT = Antigravity()
