"""Goose (AAIF, ex Block): a plugin folder of ours, `~/.agents/plugins/leanctx/hooks/hooks.json`.

Documentation only: Goose ships no package on the registries reachable here (`goose-ai` on
PyPI is another project), so no Goose ran here. Sources, cited in docs/hosts.md "Goose: verified
vs not":
  [hooks]   aaif-goose/goose crates/goose/src/hooks/mod.rs: hooks come from
            `<plugin>/hooks/hooks.json` of every enabled plugin, Claude Code's shape
            `{hooks: {Event: [{matcher?, hooks: [{type: "command", command, timeout}]}]}}`
            (seconds, default 30); unknown events are ignored; stdin `{event, session_id,
            working_dir?, message?, last_assistant_message?, tool_call_id?, tool_name?,
            tool_input?}`; a PreToolUse hook denies with exit 2 or `{"decision": "block",
            "reason": …}`, allows with exit 0 and empty stdout; other events' stdout is dropped.
  [plugins] crates/goose/src/plugins (discovery): every folder under `~/.agents/plugins/` and a
            project's `.agents/plugins/` is a plugin (no manifest needed), enabled unless a
            settings file or config.yaml's `plugins` map disables it.
  [deja]    vshulcz/deja-vu PR #405 (Goose 1.44.0, run): the user plugin's hooks fire; the
            `extensions:` map of `~/.config/goose/config.yaml` takes a `type: stdio` server.
There is no compaction event, so the cache withholds stubs (cache/scope.py SILENT_COMPACTION).
Goose's MCP servers live in YAML (config.yaml `extensions:`), which init does not edit: see
`mcp_by_hand` and docs/hosts.md (why: no YAML editor here keeps a file byte for byte, and Goose
re-serialises that file itself).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import (MCP_SERVER, PRE_TOOL, PROMPT, SESSION_END, SESSION_START, STOP, ClaudeShapeAgent, EventSpec,
                                 HookEvent, str_field)

PLUGIN = "leanctx"  # our plugin folder's name under .agents/plugins/


class Goose(ClaudeShapeAgent):
    name = "goose"
    display_name = "Goose"
    binaries = ("goose",)
    family = "claude-shaped"
    checked_against = "aaif-goose/goose crates/goose/src/hooks/mod.rs and plugin discovery"
    support = {
        "verified": "documentation only",
        "hooks": "plugin `~/.agents/plugins/leanctx/hooks/hooks.json` / `DIR/.agents/plugins/leanctx/hooks/hooks.json`",
        "mcp": "by hand: `~/.config/goose/config.yaml` `extensions:` (YAML; init prints the entry)",
        "rule": "none",
        "call_id": "yes (`tool_call_id`)",
        "bot": "no",
        "guard": "yes (PreToolUse block)",
    }
    verified_version = ""
    min_version = ""
    version_command = ("goose", "--version")
    events = (  # [hooks]; no compaction or subagent event exists
        EventSpec("SessionStart", SESSION_START),
        EventSpec("UserPromptSubmit", PROMPT),
        EventSpec("Stop", STOP),
        EventSpec("SessionEnd", SESSION_END),
    )
    guard_event = EventSpec("PreToolUse", PRE_TOOL)
    # Goose names an extension's tool `<extension>__<tool>` ([hooks] docs: `developer__shell`);
    # the matcher is a regular expression
    read_gate_event = EventSpec("PreToolUse", PRE_TOOL, matcher=f"{MCP_SERVER}__ctx_read")
    regex_matchers = True  # [hooks]: `Regex::is_match`
    native_deny = "block"  # [hooks]
    context_events = ()  # SessionStart's output cannot carry context [deja]; none can [hooks]
    settings_file = "hooks.json"
    #: Goose's MCP servers are in YAML, which init leaves to the user: what to add, for init and doctor
    # the stdio entry's shape: documentation/docs/guides/config-files.md "Extensions Configuration"
    mcp_by_hand = ("add to `extensions:` in ~/.config/goose/config.yaml:\n"
                   "  @SERVER@:\n    type: stdio\n    name: @SERVER@\n    enabled: true\n    cmd: @COMMAND@\n"
                   "    args: [@ARGS@]\n    envs: @ENVS@\n    timeout: 300")
    mcp_by_hand_file = ".config/goose/config.yaml"  # relative to HOME, where doctor looks for it

    def config_dir(self, home: Path) -> Path:
        return home / ".agents" / "plugins" / PLUGIN / "hooks"  # [plugins]: the home folder's, no override

    def project_config_path(self, project: Path) -> Path:
        return project / ".agents" / "plugins" / PLUGIN / "hooks" / self.settings_file

    def detect(self, home: Path) -> bool:
        import shutil

        return (home / ".config" / "goose").is_dir() or shutil.which("goose") is not None

    def mcp_config(self, home: Path, project: Path | None) -> None:
        return None  # YAML: `mcp_by_hand`

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return None

    def read_tool(self, server: str = MCP_SERVER) -> str:
        return f"{server}__ctx_read"

    def is_read_tool(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name.endswith("__ctx_read")

    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        ev.cwd = str_field(payload, "working_dir")  # [hooks]: no `cwd`
        if ev.kind == PROMPT:
            ev.prompt = str_field(payload, "message")
        ev.tool_use_id = str_field(payload, "tool_call_id")
        return ev

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        payload = {"event": event, "session_id": "20261202_1", "working_dir": cwd}  # [hooks]
        spec = self.event(event)
        kind = spec.kind if spec else ""
        if kind == PROMPT:
            payload["message"] = "leanctx doctor smoke test"
        elif kind == STOP:
            payload["last_assistant_message"] = "leanctx doctor smoke test"
        elif kind == PRE_TOOL:
            payload.update(tool_call_id="call_doctor", tool_name=self.read_tool(),
                           tool_input={"path": os.path.join(cwd, "README.md")}, matcher_context=self.read_tool())
        return payload


AGENT = Goose()
