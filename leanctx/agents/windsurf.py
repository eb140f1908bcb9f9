"""Windsurf (Cascade, also shipped as "Devin Desktop"): `~/.codeium/windsurf/hooks.json` (user),
`<workspace>/.windsurf/hooks.json`.

Windsurf is an IDE with no CLI that installs here, so nothing in this module was seen in a run:
every fact is cited where it is used. Sources:
  [docs]     https://docs.windsurf.com/windsurf/cascade/hooks (the twelve-event revision: file
             locations, {"hooks": {event: [{command, show_output, working_directory?}]}}, the
             common fields, each event's `tool_info`, exit codes)
  [docs-old] the same page's ten-event revision: "The trajectory_id field is always empty for
             this hook" (pre_user_prompt); the newer revision no longer says so
  [hookshot] CorridorSecurity/hookshot docs/reference-cascade.md (BaseInput: agent_action_name,
             trajectory_id "Session identifier", execution_id, timestamp)
  [mcp]      https://docs.windsurf.com/windsurf/cascade/mcp via third-party guides
             (alivemcp.com "mcp-server-windsurf"): `~/.codeium/windsurf/mcp_config.json`,
             key `mcpServers`, {command, args}; no project MCP file
  [rules]    https://docs.windsurf.com/windsurf/cascade/memories: a root AGENTS.md is an
             always-on rule of the workspace
What is verified and what is not: docs/hosts.md, "Windsurf: verified vs not".

What leanctx publishes: the conversation (`trajectory_id`) on each prompt and each finished
response, nothing more. Windsurf has no session-start, compaction or session-end event [docs], so
the read cache never answers a Windsurf conversation with a stub (cache/scope.py
SILENT_COMPACTION). `pre_read_code` could refuse a read with a message the agent sees (exit 2,
stderr [docs]), but it names only a path (no line range; it may be a directory) and
`post_read_code` carries no content [docs]: nothing proves what the model holds, so the read gate
does not use it. Every hook here exits 0 and prints nothing: with no exit 2 there is no guard.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

from leanctx.agents.base import PROMPT, STOP, EventSpec, HookEvent, as_dict, as_text
from leanctx.agents.cursorlike import CursorLikeAgent


def _workdir() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the folder went away under the hook: no cwd rather than no record
        return None


class Windsurf(CursorLikeAgent):
    name = "windsurf"
    display_name = "Windsurf"
    binaries = ("windsurf",)
    checked_against = "docs.windsurf.com/windsurf/cascade/hooks (twelve hook events), not a running host"
    support = {
        "verified": "documentation only",
        "hooks": "`~/.codeium/windsurf/hooks.json` / `DIR/.windsurf/hooks.json`",
        "mcp": "`~/.codeium/windsurf/mcp_config.json` / —",
        "rule": "`DIR/AGENTS.md` block",
        "call_id": "no",
        "bot": "no",
        "guard": "no (it blocks by exit code 2 only)",
    }
    verified_version = ""
    min_version = ""
    version_command = ("windsurf", "--version")
    config_home = ".codeium/windsurf"  # user level [docs] (the JetBrains plugin's ~/.codeium/hooks.json is not written)
    project_hooks = ".windsurf/hooks.json"  # workspace level, merged after system and user [docs]
    # an entry is {command, show_output, working_directory?}: no timeout key is documented [docs];
    # show_output false keeps our (empty) output out of the Cascade panel
    timeout_key = None
    entry_keys = {"show_output": False}
    strict_json = False  # what Windsurf does with comments in hooks.json is not documented
    events = (
        EventSpec("pre_user_prompt", PROMPT),  # may carry an empty trajectory_id [docs-old]
        EventSpec("post_cascade_response", STOP),  # run asynchronously after the response [docs]
    )

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # the workspace's root AGENTS.md is always on [rules]; the global rules file is edited
        # through Windsurf's UI and its path is not documented: none at user level
        return (project / "AGENTS.md", "block") if project is not None else None

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]] | None:
        if project is not None:
            return None  # Windsurf reads MCP servers from its user-level file only [mcp]
        return self.config_dir(home) / "mcp_config.json", "json", ("mcpServers",)

    def normalize(self, event: str, payload: dict) -> HookEvent:
        info = as_dict(payload.get("tool_info"))
        trajectory = as_text(payload.get("trajectory_id"))  # "the overall Cascade conversation" [docs]
        # no cwd in the envelope; a hook runs in the workspace root (the repo worked on in a
        # multi-repo workspace) unless `working_directory` says otherwise, and ours does not [docs]
        cwd = as_text(info.get("cwd")) or (_workdir() if trajectory else None)
        return self.hook_event(
            event,
            conversation_id=trajectory,
            session_id=trajectory,
            cwd=cwd,
            workspace_roots=[cwd] if cwd else [],
            turn_id=as_text(payload.get("execution_id")),  # "the single agent turn" [docs]
            timestamp=as_text(payload.get("timestamp")),
            prompt=as_text(info.get("user_prompt")),
            reply=as_text(info.get("response")),  # a markdown digest of the steps, not the reply alone [docs]
        )

    def reply_text(self, event: HookEvent) -> str | None:
        """None: `tool_info.response` is a digest of every step since the prompt (reads, writes,
        commands, rules triggered), not the reply; the bot profile records no reply from it."""
        return None

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        info: dict[str, Any] = {"user_prompt": "leanctx doctor smoke test"} if event == "pre_user_prompt" else {
            "response": "### Planner Response\n\nleanctx doctor smoke test"}
        return {
            "agent_action_name": event,
            "trajectory_id": "leanctx-doctor-00000000-0000-0000-0000-000000000000",
            "execution_id": "leanctx-doctor-execution",
            "timestamp": "2026-01-01T00:00:00Z",
            "tool_info": info,
        }


AGENT = Windsurf()
