"""Kiro CLI (`kiro-cli`, formerly Amazon Q Developer CLI): hooks live inside an agent
configuration file, `~/.kiro/agents/<name>.json` (global) or `<workspace>/.kiro/agents/`.

No Kiro CLI installs here, so nothing in this module was seen in a run: every fact is cited where
it is used. Sources:
  [hooks]   https://kiro.dev/docs/cli/hooks (page updated November 24, 2025): events agentSpawn,
            userPromptSubmit, preToolUse, postToolUse, stop; stdin `hook_event_name`, `cwd`,
            `prompt`, `tool_name`, `tool_input`, `tool_response`; exit 0 with stdout added to the
            agent's context on agentSpawn and userPromptSubmit; exit 2 blocks preToolUse only;
            `timeout_ms` (default 30,000), `cache_ttl_seconds` (default 0: no caching)
  [agents]  https://kiro.dev/docs/cli/custom-agents/configuration-reference (fields `name`,
            `description`, `tools`, `hooks`, `includeMcpJson`; local `.kiro/agents/`, global
            `~/.kiro/agents/`); symposium.dev/design/agent-details/kiro.html ("Omitting tools
            means the agent has zero tools")
  [select]  aws/amazon-q-developer-cli docs/default-agent-behavior.md: the agent is the one of
            `--agent`, else the setting `chat.defaultAgent`, else a built-in default that is no file
  [load]    https://kiro.dev/docs/cli/custom-agents/troubleshooting: an agent file that is not
            valid JSON is not loaded (the default agent runs instead)
  [compact] aws/amazon-q-developer-cli docs/compaction.md: `/compact` and automatic compaction,
            which "creates a new session"; no hook event names it [hooks]
  [sid]     third-party pages show `session_id` on every event and `assistant_response` on stop
            (a Chinese copy of the hooks page; an agent-dashboard design note); hook adapters read
            it when present (choutianxius/peon-ping adapters/kiro.ps1); kiro.dev documents neither
  [mcp]     yvgude/lean-ctx rust/src/hooks/agents/kiro.rs (`~/.kiro/settings/mcp.json`); the
            project's `.kiro/settings/mcp.json`, key `mcpServers`
What is verified and what is not: docs/hosts.md, "Kiro CLI: verified vs not".

Which file: an agent of our own, `leanctx.json`. The built-in default agent is no file [select],
and a user's own agents are theirs (which one runs is their choice), so init edits none of them:
it writes `leanctx` (all tools, the MCP servers of `mcp.json`, our hooks), which runs with
`kiro-cli chat --agent leanctx` or once made the default (`kiro-cli settings chat.defaultAgent
leanctx`); uninstall deletes the file when nothing but ours is left in it.

What leanctx publishes: a conversation only under a `session_id` the payload carries [sid]; with
none (as documented) nothing is published, since an id made up from the process would file a
`/clear`ed or compacted conversation under the old one. Kiro CLI compacts with no hook [compact],
so the read cache never answers a Kiro conversation with a stub (cache/scope.py
SILENT_COMPACTION), and no read gate is wired: its preToolUse names no call id, and a refusal is
exit 2, which our hooks never use (so no guard either).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

from leanctx.agents.base import PROMPT, SESSION_START, STOP, EventSpec, HookEvent, as_text
from leanctx.agents.cursorlike import CursorLikeAgent

AGENT_NAME = "leanctx"  # our agent's name, and its file's


class Kiro(CursorLikeAgent):
    name = "kiro"
    display_name = "Kiro CLI"
    binaries = ("kiro-cli",)
    checked_against = "kiro.dev/docs/cli/hooks (updated 2025-11-24) and the agent configuration reference, not a running host"
    support = {
        "verified": "documentation only",
        "hooks": "agent `~/.kiro/agents/leanctx.json` / `DIR/.kiro/agents/leanctx.json` (run `kiro-cli chat --agent leanctx`)",
        "mcp": "`~/.kiro/settings/mcp.json` / `DIR/.kiro/settings/mcp.json`",
        "rule": "none",
        "call_id": "no",
        "bot": "no",
        "guard": "no (it blocks by exit code 2 only)",
    }
    verified_version = ""
    min_version = ""
    version_command = ("kiro-cli", "--version")
    config_home = ".kiro"
    hooks_file = f"agents/{AGENT_NAME}.json"
    project_hooks = f".kiro/agents/{AGENT_NAME}.json"
    # a new agent file: all tools (an agent without `tools` has none) and the servers of the
    # MCP files, so that it works like the default agent plus our hooks [agents]
    new_file_keys = {
        "name": AGENT_NAME,
        "description": "Kiro's tools and MCP servers, with leanctx's hooks",
        "tools": ["*"],
        "includeMcpJson": True,
    }
    init_hint = (f"Kiro CLI runs these hooks only in sessions of the agent `{AGENT_NAME}`: start it with `kiro-cli chat "
                 f"--agent {AGENT_NAME}`, or make it the default: `kiro-cli settings chat.defaultAgent {AGENT_NAME}`")  # [select]
    timeout_key = "timeout_ms"  # [hooks]
    timeout_ms = True
    strict_json = True  # [load]
    events = (
        EventSpec("agentSpawn", SESSION_START),
        EventSpec("userPromptSubmit", PROMPT),
        EventSpec("stop", STOP),
    )

    def detect(self, home: Path) -> bool:
        """The CLI on PATH, or its agents folder: `~/.kiro` alone may be the Kiro IDE's."""
        import shutil

        return bool(shutil.which("kiro-cli")) or (self.config_dir(home) / "agents").is_dir()

    def unparseable_effect(self, path: Path, home: Path) -> str:
        return "Kiro CLI does not load an agent file that is not valid JSON (it runs its default agent instead)"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        base = self.config_dir(home) if project is None else project / ".kiro"
        return base / "settings" / "mcp.json", "json", ("mcpServers",)  # [mcp]

    def normalize(self, event: str, payload: dict) -> HookEvent:
        session = as_text(payload.get("session_id"))  # [sid]; absent: nothing is published
        cwd = as_text(payload.get("cwd"))
        return self.hook_event(
            event,
            conversation_id=session,
            session_id=session,
            cwd=cwd,
            workspace_roots=[cwd] if cwd else [],
            source="startup" if event == "agentSpawn" else None,
            prompt=as_text(payload.get("prompt")),
            reply=as_text(payload.get("assistant_response")),  # [sid]
        )

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        payload: dict[str, Any] = {
            "hook_event_name": event,
            "cwd": cwd,
            "session_id": "leanctx-doctor-00000000-0000-0000-0000-000000000000",
        }
        if event == "userPromptSubmit":
            payload["prompt"] = "leanctx doctor smoke test"
        elif event == "stop":
            payload["assistant_response"] = "leanctx doctor smoke test"
        return payload


AGENT = Kiro()
