"""Amp (Sourcegraph; npm `@ampcode/cli`, formerly `@sourcegraph/amp`): no hook commands, a
JavaScript/TypeScript plugin API instead, and an MCP client configured in its settings file.

What leanctx installs (checked against 0.0.1790142911-g7618fb: `amp plugins show-docs`, its bundled
code, and runs of the real binary, docs/hosts.md "Amp"):
- the plugin `leanctx.js` in `~/.config/amp/plugins/` (`$XDG_CONFIG_HOME/amp/plugins/`; project:
  `.amp/plugins/`). Amp loads every root-level `*.ts`/`*.js` there (not `*.test.*`, no symlinks)
  and runs each in a process of its own, `amp run <runtime>.ts <plugin>` under Bun, speaking
  JSON lines on stdio (`templates/amp-plugin.js`);
- the MCP server under the settings key `"amp.mcpServers"`: one flat key with a dot in it, in
  `~/.config/amp/settings.json` (`settings.jsonc` when only that exists; `$AMP_SETTINGS_FILE`
  overrides the place) or the project's `.amp/settings.json`. Amp reads these files as JSONC and
  names the tool `mcp__<server>__ctx_read`. A project's servers run only once approved
  (`amp mcp approve leanctx`, kept by hash in the user settings: init does not approve for you);
- the read rule as a block in `~/.config/amp/AGENTS.md` or the project's guidance file (Amp
  reads the first of AGENTS.md, Agents.md, agents.md, AGENT.md, Agent.md, agent.md, CLAUDE.md in
  a folder: the block goes into the one it reads).

The plugin runs the hook command on Amp's plugin events, with Amp's thread id (`T-<uuid>`) as
the session id and the workspace root (`amp.system.workspaceRoot`) as `cwd`:
- `session.start` (a thread starts running in this Amp process), `agent.start` (a prompt: its
  answer's `message` is appended to the user's message, so the bot profile's context reaches the
  model), `agent.end` (the turn's last assistant text);
- `tool.call` (awaited; `{action: "reject-and-continue", message}` refuses the call): the guard,
  and the read gate on `mcp__leanctx__ctx_read`. Amp's MCP client sends no `_meta`, so the plugin
  hands ctx_read the call's id (`toolUseID`) as the argument `leanctx_call_id`
  (`{action: "modify", input}`), replacing whatever the model wrote there, as OpenClaw's does;
- `context.lost` is ours: Amp compacts a thread by itself (at 90 % of the window by default) and
  lets a user edit an earlier message, with no plugin event for either. Before each ctx_read the
  plugin reads the thread as the next model request will see it (`ctx.thread.messages()`, which
  after a compaction starts with its summary); when the messages it saw at the previous read are
  no longer the start of that view, the view cannot be read, or the plugin process has not seen
  the thread before, it sends `context.lost` first, counted as a compaction: what was read before
  is sent again.
One Amp process can run several threads at once, each with its own plugin events, so as for
OpenClaw only a call the read gate named counts (cache/scope.py: CALL_ID_FROM_GATE).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

from leanctx.agents.base import PRE_COMPACT, PRE_TOOL, PROMPT, SESSION_START, STOP, EventSpec, HookEvent, str_field
from leanctx.agents.jsplugin import JsPluginAgent

#: the names Amp looks for in a folder, in its order; it reads only the first one there
GUIDANCE_FILES = ("AGENTS.md", "Agents.md", "agents.md", "AGENT.md", "Agent.md", "agent.md", "CLAUDE.md")
MCP_KEY = "amp.mcpServers"  # one key, dot included: Amp's settings are flat `amp.*` keys
CALL_ID_ARG = "leanctx_call_id"  # the argument our MCP server takes a call's id from (cache/mcpserver.py)


def tool_server_name(server: str) -> str:
    """Amp's form of a server name inside a tool name (its bundle: runs of spaces and `-` become
    `_`, anything else but letters, digits, `_` and `-` too, then `_` runs collapse and trim)."""
    import re

    name = re.sub(r"[\s-]+", "_", server)
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", name)
    return re.sub(r"_+", "_", name).strip("_") or "server"


def _settings(folder: Path) -> Path:
    """`settings.json`, or `settings.jsonc` when only that one exists (Amp's fallback)."""
    json_file, jsonc_file = folder / "settings.json", folder / "settings.jsonc"
    return jsonc_file if not json_file.exists() and jsonc_file.exists() else json_file


class Amp(JsPluginAgent):
    name = "amp"
    display_name = "Amp"
    binaries = ("amp",)
    checked_against = "Amp 0.0.1790142911-g7618fb (real binary: plugin runtime, MCP settings; no model session offline)"
    support = {
        "verified": "partly run, 0.0.1790142911-g7618fb: its plugin runtime runs our plugin (ids, read gate, guard, "
                    "stub, new thread, compacted view, `--bot`), `amp mcp list`/`tools list`/`plugins list` read our "
                    "files, doctor, uninstall; no model session (its agent loop runs on ampcode.com)",
        "hooks": "plugin `~/.config/amp/plugins/leanctx.js` / `DIR/.amp/plugins/`",
        "mcp": "`~/.config/amp/settings.json` `amp.mcpServers` / `DIR/.amp/settings.json` (after `amp mcp approve`)",
        "rule": "`AGENTS.md` block",
        "call_id": "yes (Amp's `toolUseID`, handed over as an argument)",
        "bot": "yes: turns and replies; the thread rides on a new thread's first prompt (`agent.start` message)",
        "guard": "yes",
    }
    verified_version = "0.0.1790142911-g7618fb"
    version_command = ("amp", "--version")
    strict_json = False  # Amp reads its settings as JSONC: comments and trailing commas are fine
    #: `session.start` cannot add to the model's context: the bot profile's thread rides on a
    #: thread's first prompt (`agent.start`) instead
    thread_on_first_prompt = True
    plugin_template = "amp-plugin.js"
    plugin_file = "leanctx.js"
    prompt_event = "agent.start"
    tool_event = "tool.call"
    events = (
        EventSpec("session.start", SESSION_START),
        EventSpec("agent.start", PROMPT),
        # ours: the plugin saw the thread's view lose what it held at the previous read
        # (a compaction, an edited earlier message)
        EventSpec("context.lost", PRE_COMPACT),
        EventSpec("agent.end", STOP),
    )
    guard_event = EventSpec("tool.call", PRE_TOOL)
    read_gate_event = EventSpec("tool.call", PRE_TOOL, matcher="mcp__leanctx__ctx_read")

    # -- where ---------------------------------------------------------------------------
    def config_dir(self, home: Path) -> Path:
        import os
        from pathlib import Path as P

        xdg = os.environ.get("XDG_CONFIG_HOME")
        return (P(xdg) if xdg else home / ".config") / "amp"

    def hook_folder(self, home: Path, project: Path | None) -> Path:
        return (project / ".amp" if project is not None else self.config_dir(home)) / "plugins"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        import os
        from pathlib import Path as P

        if project is not None:
            return _settings(project / ".amp"), "json", (MCP_KEY,)
        override = os.environ.get("AMP_SETTINGS_FILE")
        return (P(override).expanduser() if override else _settings(self.config_dir(home))), "json", (MCP_KEY,)

    def mcp_config_files(self, home: Path, project: Path | None) -> list[Path]:
        folder = project / ".amp" if project is not None else self.config_dir(home)
        chosen = self.mcp_config(home, project)[0]
        return [chosen] + [p for p in (folder / "settings.json", folder / "settings.jsonc") if p != chosen]

    def unparseable_effect(self, path: Path, home: Path) -> str:
        return "it cannot read this settings file"

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        folder = self.config_dir(home) if project is None else project
        found = next((folder / n for n in GUIDANCE_FILES if (folder / n).is_file()), None)
        return found or folder / GUIDANCE_FILES[0], "block"

    instructions_path = rules_path

    # -- what ----------------------------------------------------------------------------
    def read_tool(self, server: str = "leanctx") -> str:
        return f"mcp__{tool_server_name(server)}__ctx_read"

    def plugin_values(self, wired: dict[str, str]) -> dict[str, str]:
        import json

        return {"READS_ONLY": json.dumps("--guard" not in wired.get("tool.call", "").split()),
                "CALL_ID_ARG": json.dumps(CALL_ID_ARG)}

    # -- payloads ------------------------------------------------------------------------
    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        ev.message_id = str_field(payload, "message_id")
        return ev

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        payload: dict[str, Any] = {"hook_event_name": event, "session_id": "T-00000000-0000-4000-8000-leanctxdoctor",
                                   "cwd": cwd}
        if event == "session.start":
            payload["source"] = "startup"
        elif event == "agent.start":
            payload.update(prompt="leanctx doctor smoke test", message_id="leanctx-doctor-0")
        elif event == "agent.end":
            payload["last_assistant_message"] = "leanctx doctor smoke test"
        elif event == "tool.call":
            payload.update(tool_name=self.read_tool(), tool_input={"path": "README.md"}, tool_use_id="toolu_doctor")
        return payload


AGENT = Amp()
