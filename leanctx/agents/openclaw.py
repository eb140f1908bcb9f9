"""OpenClaw (npm `openclaw`): a multi-channel chat gateway (Telegram, WhatsApp, Discord, Slack, …)
that runs every conversation through the Pi agent runtime. No hook commands: native JS plugins.

What leanctx installs (checked against 2026.9.6's docs, typings and real runs):
- a plugin folder, `<state dir>/leanctx/` (state dir: `~/.openclaw` or `$OPENCLAW_STATE_DIR`),
  listed in `openclaw.json` `plugins.load.paths` (docs gateway/config-extensions.md): its manifest
  `openclaw.plugin.json` (read as JSON5, so our marker rides in a comment) names the id `leanctx`
  and declares the tools it registers (`contracts.tools`: without it OpenClaw refuses a plugin's
  agent tools, seen in a run; a standalone file, which has no manifest, cannot declare them), and
  `index.mjs` is the code (the default entry of a folder without package.json);
- `plugins.entries.leanctx = {enabled: true, hooks: {allowConversationAccess: true}}`: a plugin
  not bundled with OpenClaw gets `before_prompt_build` and `agent_end` only with that grant
  (docs plugins/hooks.md, "Permissions and scope"); `leanctx` is added to `plugins.allow` when the
  user keeps an allowlist (only listed plugins load);
- the MCP server under `mcp.servers.leanctx` (2026.6.1 and later refuse a top-level `mcpServers`);
  OpenClaw names its tools `<server>__<tool>`, so the model calls `leanctx__ctx_read`.
The installer part that edits `plugins.*` is installer/pluginreg.py.

One gateway process serves every person on every channel, so neither CKS_ACTIVE_USER nor the
process says whose conversation an event is: OpenClaw's session key does (`agent:<id>:<channel>:
…:<peer>`, one per person and channel, stable across gateway restarts and `/new`). The plugin
sends it as `session_key`; the bot profile keeps one thread per key (hooks/bot.py: `thread_key`).
The plugin runs the hook command with a JSON payload on stdin for:
- `session_start` ({sessionId, sessionKey, resumedFrom}; 2026.9.6 fires it only on `/new` and
  `/reset`): ids published, a start after a context loss (normalize);
- `before_prompt_build` (awaited; its `appendContext` reaches the model): the person's message
  (`currentUserMessage`, else `prompt`: 2026.9.6 sends only `prompt`, the raw text), its id (the
  channel's message id the plugin saw in `message_received` for that key; OpenClaw's
  `currentUserMessageId` where it sends one), `trigger` and the input's provenance (only a `user`
  turn of no `internal_*` provenance is the person's words), and `source: "compact"` on the first
  prompt after a compaction;
- `agent_end` (awaited): the last assistant text of the run as `last_assistant_message`, when the
  run succeeded;
- `before_compaction`/`after_compaction`, `before_reset`: context losses (`/new` and `/reset` keep
  the session id and empty its transcript: `before_reset` voids what the read cache credited, as
  `session_start` does, so either hook alone is enough); `session_end`;
- `before_tool_call` (a gate: `{block: true, blockReason}` skips the tool and hands the model the
  reason): the multi-user guard and the read gate on `leanctx__ctx_read`. The gateway calls MCP
  tools with no `_meta`, so the plugin hands ctx_read the call's id, under which the gate noted
  the person's session, as the argument `leanctx_call_id` (`{params}`; the model's value never
  passes); the cache credits an OpenClaw read only through that note (docs/cache.md, "OpenClaw's
  ctx_read").
One session key's hooks run in the order OpenClaw fired them (on `/new` three fire at once).
Every handler fails open: a missing leanctx, an error or a slow hook never stops a turn.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

from leanctx.agents.base import (
    PRE_COMPACT,
    PRE_TOOL,
    PROMPT,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    EventSpec,
    HookEvent,
    env_dir,
    str_field,
)
from leanctx.agents.jsplugin import JsPluginAgent

PLUGIN_ID = "leanctx"
PLUGIN_FILE = "index.mjs"
MANIFEST_FILE = "openclaw.plugin.json"
PLUGIN_FOLDER = "leanctx"  # ours, inside the state dir (not `extensions/`: OpenClaw manages that one)
STATE_TOOLS = ("leanctx_state_pending", "leanctx_state_clear_pending", "leanctx_state_summary", "leanctx_state_show")
CONFIG_FILE = "openclaw.json"


class OpenClaw(JsPluginAgent):
    name = "openclaw"
    display_name = "OpenClaw"
    binaries = ("openclaw",)
    checked_against = "OpenClaw 2026.9.6 (real gateway, end-to-end tests)"
    family = "js-plugin"
    verified_version = "2026.9.6"
    min_version = "2026.9.6"
    version_command = ("openclaw", "--version")
    support = {
        "verified": "run, 2026.9.6 gateway with Telegram (init, session id, two people kept apart, kill -9 between and mid-turn, `/new`, ten restarts, doctor, uninstall)",
        "hooks": "plugin folder `~/.openclaw/leanctx/` listed in `openclaw.json` `plugins` / — (one gateway per account)",
        "mcp": "`openclaw.json` `mcp.servers` / —",
        "rule": "none (the workspace `AGENTS.md` is the bot's persona)",
        "call_id": "no",
        "bot": "yes: one thread per OpenClaw session key, hand-back after `/new`, compaction",
        "guard": "yes",
    }
    plugin_template = "openclaw-plugin.mjs"
    plugin_file = PLUGIN_FILE
    prompt_event = "before_prompt_build"
    tool_event = "before_tool_call"
    strict_json = False  # OpenClaw reads JSON5: comments and trailing commas are fine
    #: one process serves many people: the thread is the session key's, not CKS_ACTIVE_USER's
    thread_key_source = "openclaw"
    events = (
        EventSpec("session_start", SESSION_START),
        EventSpec("before_prompt_build", PROMPT),
        EventSpec("before_compaction", PRE_COMPACT),
        # the session goes on from the summary: like Claude Code's SessionStart(compact) (normalize)
        EventSpec("after_compaction", SESSION_START),
        # `/new` and `/reset`: 2026.9.6 keeps the session id and empties its transcript; the
        # context is gone, so every read credited to it is void (counted as a compaction, as its
        # session_start is: either hook alone is enough)
        EventSpec("before_reset", PRE_COMPACT),
        EventSpec("agent_end", STOP),
        # a subagent runs in a child session with its own key and id: its reads are its own
        EventSpec("subagent_spawned", SUBAGENT_START),
        EventSpec("subagent_ended", SUBAGENT_STOP),
        EventSpec("session_end", SESSION_END),
    )
    #: the bot profile's state tools for the model (plugin tools whose factory OpenClaw hands the
    #: session key): `leanctx_state_pending`, `_clear_pending`, `_summary`, `_show` (hooks/bot.py)
    bot_events = (EventSpec("state_tool", "state_tool"),)
    guard_event = EventSpec("before_tool_call", PRE_TOOL)
    read_gate_event = EventSpec("before_tool_call", PRE_TOOL, matcher="leanctx__ctx_read")

    # -- where ---------------------------------------------------------------------------
    def config_dir(self, home: Path) -> Path:
        return env_dir("OPENCLAW_STATE_DIR", home / ".openclaw")

    def openclaw_config(self, home: Path) -> Path:
        """`openclaw.json` as the gateway reads it (`OPENCLAW_CONFIG_PATH` overrides the place)."""
        import os
        from pathlib import Path as P

        override = os.environ.get("OPENCLAW_CONFIG_PATH", "").strip()
        return P(override).expanduser() if override else self.config_dir(home) / CONFIG_FILE

    def hook_folder(self, home: Path, project: Path | None) -> Path:
        return self.config_dir(home) / PLUGIN_FOLDER

    def project_config_path(self, project: Path) -> Path | None:
        return None  # a gateway is one per account: no project level

    def hook_file_names(self) -> tuple[str, ...]:
        return (PLUGIN_FILE, MANIFEST_FILE)

    def plugin_registration(self, home: Path) -> tuple[Path, Path]:
        """(the config that must list the plugin, the plugin folder it lists): installer/pluginreg.py"""
        return self.openclaw_config(home), self.hook_folder(home, None)

    def mcp_config(self, home: Path, project: Path | None):
        if project is not None:
            return None
        return self.openclaw_config(home), "json", ("mcp", "servers")

    def unparseable_effect(self, path: Path, home: Path) -> str:
        return "it reads JSON5, which leanctx does not edit in place"

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return None  # the agent's workspace AGENTS.md is the user's persona file: not touched

    def read_tool(self, server: str = "leanctx") -> str:
        return f"{server}__ctx_read"

    def is_read_tool(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name.endswith("__ctx_read")

    def plugin_values(self, wired: dict[str, str]) -> dict[str, str]:
        import json

        return {"PLUGIN_ID": json.dumps(PLUGIN_ID), "READS_ONLY": json.dumps("--guard" not in wired.get("before_tool_call", "").split())}

    def hook_files(self, wired: dict[str, str], mark: Callable[[dict[str, str]], str]) -> dict[str, str]:
        import json

        manifest = {"id": PLUGIN_ID, "name": "leanctx",
                     "description": "leanctx: per-person conversation state, session ids published, read cache gate",
                     "activation": {"onStartup": True}, "configSchema": {"type": "object", "additionalProperties": False},
                     "contracts": {"tools": list(STATE_TOOLS)}}
        head = ("// leanctx plugin manifest: written by `leanctx init --agent openclaw`, removed by `leanctx uninstall`.\n"
                f"// {mark({})}\n")
        return {PLUGIN_FILE: self.plugin_text(wired, mark), MANIFEST_FILE: head + json.dumps(manifest, indent=2) + "\n"}

    # -- payloads ------------------------------------------------------------------------
    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        if ev.kind == SESSION_START:
            # OpenClaw 2026.9.6 fires session_start only when `/new` or `/reset` empties the key's
            # transcript under the same session id (never for a first message or after a restart),
            # and after_compaction when a summary replaced it: either way the model holds none of
            # what came before, as after a compaction (the read cache drops the conversation's
            # credit; the bot profile hands the thread to the next prompt)
            ev.source = "compact"
        ev.thread_key = str_field(payload, "session_key")
        ev.message_id = str_field(payload, "message_id")
        trigger = str_field(payload, "trigger")
        provenance = str_field(payload, "provenance") or ""
        if ev.kind == PROMPT and (trigger not in (None, "user") or provenance.startswith("internal")):
            # not the person's message: a heartbeat's or cron job's prompt, or OpenClaw's own
            # (after a gateway restart cut a turn, it re-runs it with an `internal_system` prompt
            # "[System] Your previous turn was interrupted…", seen on 2026.9.6); that turn's reply
            # is still the answer the person gets, and is recorded
            ev.prompt = None
        return ev

    def check_extra(self, event: str, value: dict) -> bool:
        return event == "state_tool" and (isinstance(value.get("text"), str) or isinstance(value.get("error"), str))

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        session = "leanctx-doctor-0000-0000-0000-000000000000"
        payload: dict[str, Any] = {"hook_event_name": event, "session_id": session, "cwd": cwd,
                                   "session_key": "agent:main:leanctx-doctor:direct:0"}
        if event == "before_prompt_build":
            payload.update(prompt="leanctx doctor smoke test", trigger="user", message_id="leanctx-doctor-0")
        elif event == "before_tool_call":
            payload.update(tool_name=self.read_tool(), tool_input={"path": "README.md"}, tool_use_id="call_doctor")
        elif event == "state_tool":
            payload.update(tool_name="show", tool_input={})
        elif event == "agent_end":
            payload["last_assistant_message"] = "leanctx doctor smoke test reply"
        return payload


AGENT = OpenClaw()
