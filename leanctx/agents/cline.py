"""Cline CLI 3.x (npm `cline`): hooks are executable files named after the event.

Cline runs every executable file called `TaskStart`, `TaskComplete`, … it finds in
`~/Documents/Cline/Hooks/`, `$CLINE_DIR/hooks/` (default `~/.cline/hooks/`),
`<workspace>/.clinerules/hooks/` and `<workspace>/.cline/hooks/`, with a JSON payload on stdin:
`taskId` ("conv_…"), `sessionContext.rootSessionId` (its session folder under
`~/.cline/data/sessions/`), `workspaceRoots`, `workspaceInfo.rootPath`, `agent_id` /
`parent_agent_id`, `hookName`; no transcript path and no `cwd`. A hook's stdout
`{"cancel": true}` aborts the whole task, so ours print nothing at all, and there is no per-call
deny: no guard on Cline, and its own `read_files` is not gated (nor credited: Cline gets no
stubs, docs/cache.md "Left ungated"). MCP servers: `$CLINE_DIR/data/settings/cline_mcp_settings.json`
(`CLINE_MCP_SETTINGS_PATH`) `mcpServers`, user level only; `tools/call` carries no `_meta`.
Verified on 3.0.65 in real runs (reference hosts-codebuddy-cline-droid-more.md §2 and
tests/e2e/test_cline_e2e.py): TaskStart, TaskComplete fire in `cline --json`; hooks and MCP
server are children of the same `cline` process. TaskResume, UserPromptSubmit, PreCompact and
SessionShutdown are from Cline's hook list (source), the last seen only when a task aborts.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

from leanctx.agents.base import (
    PRE_COMPACT,
    PROMPT,
    SESSION_END,
    SESSION_START,
    STOP,
    EventSpec,
    FileHookAgent,
    HookEvent,
    as_dict,
    as_text,
    workspace_roots_of,
    env_dir,
)

HOOK_FILE = """#!/bin/sh
# leanctx hook for Cline: written by `leanctx init --agent cline`, removed by `leanctx uninstall`.
# {mark}
# It prints nothing, ever: Cline aborts the whole task on {{"cancel": true}}.
{command} 2>/dev/null
exit 0
"""


class Cline(FileHookAgent):
    name = "cline"
    display_name = "Cline CLI"
    binaries = ("cline",)
    checked_against = "Cline CLI 3.0.65 (real CLI, end-to-end tests)"
    family = "hook-files"
    verified_version = "3.0.65"
    min_version = "3.0.65"
    version_command = ("cline", "--version")
    support = {
        "verified": "run, 3.0.65 (no stubs: it compacts without a hook)",
        "hooks": "executable files `~/.cline/hooks/<Event>` / `DIR/.cline/hooks/`",
        "mcp": "`~/.cline/data/settings/cline_mcp_settings.json` / —",
        "rule": "`~/.cline/rules/`",
        "call_id": "no",
        "bot": "turns, no context",
        "guard": "no (its deny aborts the task)",
    }
    hook_file_mode = 0o755
    mcp_type = "stdio"
    events = (
        EventSpec("TaskStart", SESSION_START),
        EventSpec("TaskResume", SESSION_START),
        EventSpec("UserPromptSubmit", PROMPT),
        EventSpec("PreCompact", PRE_COMPACT),
        EventSpec("TaskComplete", STOP),
        EventSpec("SessionShutdown", SESSION_END),
    )

    def config_dir(self, home: Path) -> Path:
        return env_dir("CLINE_DIR", home / ".cline")

    def hook_folder(self, home: Path, project: Path | None) -> Path:
        # a project's `.cline/hooks` rather than `.clinerules/hooks`: `.clinerules` may be a file
        return project / ".cline" / "hooks" if project is not None else self.config_dir(home) / "hooks"

    def hook_file_names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.events)

    def hook_files(self, wired: dict[str, str], mark: Callable[[dict[str, str]], str]) -> dict[str, str]:
        return {event: HOOK_FILE.format(mark=mark({event: command}), command=command) for event, command in wired.items()}

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # Cline reads every file in `$CLINE_DIR/rules/` and `<workspace>/.cline/rules/`
        base = self.config_dir(home) if project is None else project / ".cline"
        return base / "rules" / "leanctx-ctx-read.md", "file"

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        base = self.config_dir(home) if project is None else project / ".cline"
        return base / "rules" / "leanctx-conversation-state.md", "file"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]] | None:
        if project is not None:
            return None  # Cline reads MCP servers from its user-level settings file only
        from pathlib import Path

        override = os.environ.get("CLINE_MCP_SETTINGS_PATH")
        path = Path(override) if override else self.config_dir(home) / "data" / "settings" / "cline_mcp_settings.json"
        return path, "json", ("mcpServers",)

    def mcp_entry(self, command: str, args: list[str]) -> dict:
        return {"type": "stdio", "command": command, "args": args, "disabled": False}

    def normalize(self, event: str, payload: dict) -> HookEvent:
        root = as_text(as_dict(payload.get("sessionContext")).get("rootSessionId"))
        roots = workspace_roots_of(payload)
        cwd = roots[0] if roots else as_text(as_dict(payload.get("workspaceInfo")).get("rootPath"))
        agent_id = as_text(payload.get("agent_id"))
        parent = as_text(payload.get("parent_agent_id"))
        turn = as_dict(payload.get("turn"))
        prompt = as_dict(payload.get("userPromptSubmit")).get("prompt")
        return self.hook_event(
            event,
            conversation_id=root,
            session_id=root,
            cwd=cwd,
            workspace_roots=roots or ([cwd] if cwd else []),
            subagent_id=agent_id if parent else None,  # a spawned agent runs inside the root session
            source="resume" if event == "TaskResume" else "startup" if event == "TaskStart" else None,
            turn_id=as_text(payload.get("taskId")),
            prompt=as_text(prompt) or as_text(payload.get("prompt")),
            reply=as_text(turn.get("outputText")),
        )

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        payload: dict[str, Any] = {
            "clineVersion": "",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "taskId": "conv_leanctx_doctor",
            "sessionContext": {"rootSessionId": "leanctx_doctor"},
            "workspaceRoots": [cwd],
            "workspaceInfo": {"rootPath": cwd, "hint": os.path.basename(cwd)},
            "userId": "unknown",
            "agent_id": "agent_leanctx_doctor",
            "parent_agent_id": None,
        }
        spec = self.event(event)
        if spec is not None and spec.kind == STOP:
            payload.update(hookName="agent_end", turn={"outputText": "leanctx doctor smoke test", "status": "completed"})
        elif spec is not None and spec.kind == PROMPT:
            payload.update(hookName="prompt_submit", userPromptSubmit={"prompt": "leanctx doctor smoke test"})
        return payload


AGENT = Cline()
