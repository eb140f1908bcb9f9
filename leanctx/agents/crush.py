"""Crush (Charm): `hooks` and `mcp` in `~/.config/crush/crush.json`, project `crush.json`.

Documentation only: npm `@charmland/crush` 0.96.1 carries no binary (its postinstall downloads
one from GitHub releases; no optionalDependencies), so no Crush ran here. Every fact below is
read from charmbracelet/crush at tag v0.90.0 (the newest release tag in the snapshot read) and
cited in docs/hosts.md, "Crush: verified vs not":
  [docs]    docs/hooks/README.md and internal/skills/builtin/crush-hooks/SKILL.md: entries are flat
            `{name?, matcher?, command, timeout?}` (seconds, default 30) under `hooks.<Event>`;
            stdin `{event, session_id, cwd, tool_name, tool_input}`; exit 0 with empty stdout is
            no opinion, `{"decision": "deny", "reason": …}` denies, Claude's `hookSpecificOutput`
            is accepted too; hooks run for the top-level agent only.
  [events]  internal/hooks/hooks.go and internal/config/load.go `normalizeHookEvent`: released
            Crush knows one event, PreToolUse (since v0.63.0, PR #2598); another event name is
            kept but never fired. The `hooks-galore` branch adds SessionStart … PostCompact,
            unreleased when read: not wired until a release has them.
  [config]  internal/config/load.go: `GlobalConfig()` is `$CRUSH_GLOBAL_CONFIG/crush.json`, else
            `$XDG_CONFIG_HOME/crush/crush.json` (`~/.config`); a project's `.crush.json` and
            `crush.json` (and shell-form `crushrc`) are merged; a JSON file that is not strict
            JSON (`json.Valid`) stops Crush with "invalid JSON in config file".
  [mcp]     schema.json `mcp.<name>`: `{type: "stdio", command, args, env}`; MCP tools are named
            `mcp_<server>_<tool>` (internal/agent/tools/mcp-tools.go).
With PreToolUse alone there is no session start, prompt or compaction hook: the read gate on our
ctx_read publishes the session when it is first called, and the cache withholds stubs (Crush
summarises its context with no hook we receive: cache/scope.py SILENT_COMPACTION).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import MCP_SERVER, PRE_TOOL, ClaudeShapeAgent, EventSpec


class Crush(ClaudeShapeAgent):
    name = "crush"
    display_name = "Crush"
    binaries = ("crush",)
    family = "claude-shaped"
    checked_against = "charmbracelet/crush v0.90.0 source and docs (npm 0.96.1 ships no binary)"
    support = {
        "verified": "documentation only",
        "hooks": "`~/.config/crush/crush.json` / `DIR/crush.json` (PreToolUse only: all a release fires)",
        "mcp": "same file, `mcp` key",
        "rule": "none",
        "call_id": "no",
        "bot": "no",
        "guard": "yes (PreToolUse deny)",
    }
    verified_version = ""
    min_version = "0.63.0"  # the first release with hooks [events]
    version_command = ("crush", "--version")
    events = ()  # [events]: a release fires PreToolUse only, our read gate and guard listen there
    guard_event = EventSpec("PreToolUse", PRE_TOOL)
    read_gate_event = EventSpec("PreToolUse", PRE_TOOL, matcher=f"mcp_{MCP_SERVER}_ctx_read")
    context_events = ()
    flat_entries = True  # [docs]
    regex_matchers = True  # [docs]: `matcher` is a Go regular expression
    native_deny = "deny"  # [docs]
    settings_file = "crush.json"
    json_bom_ok = False  # Go's json.Valid refuses a byte order mark [config]

    def config_dir(self, home: Path) -> Path:
        from pathlib import Path

        override = os.environ.get("CRUSH_GLOBAL_CONFIG")
        if override:
            return Path(override)
        xdg = os.environ.get("XDG_CONFIG_HOME")
        return (Path(xdg) if xdg else home / ".config") / "crush"

    def project_config_path(self, project: Path) -> Path:
        # the dotted file when the project has one (it wins over crush.json on a clash), else crush.json
        dotted = project / ".crush.json"
        return dotted if os.path.lexists(dotted) else project / "crush.json"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        path = self.user_config_path(home) if project is None else self.project_config_path(project)
        return path, "json", ("mcp",)

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return None  # no bot profile: Crush has no prompt or stop hook in a release

    def read_tool(self, server: str = MCP_SERVER) -> str:
        return f"mcp_{server}_ctx_read"

    def is_read_tool(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name.startswith("mcp_") and tool_name.endswith("_ctx_read")

    def unparseable_effect(self, path: Path, home: Path) -> str:
        return "it refuses to start (\"invalid JSON in config file\") until this file is fixed"

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        payload = {"event": event, "session_id": "leanctx-doctor-crush", "cwd": cwd}  # [docs]
        if event == "PreToolUse":
            payload.update(tool_name=self.read_tool(), tool_input={"path": os.path.join(cwd, "README.md")})
        return payload


AGENT = Crush()
