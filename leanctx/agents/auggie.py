"""Auggie (Augment Code's CLI): Claude Code's hooks shape in `~/.augment/settings.json`.

Verified on the real CLI (npm `@augmentcode/auggie` 0.36.0, `auggie --print` offline against
tests/e2e/fake_augment.py; see docs/hosts.md and tests/e2e/test_auggie_e2e.py):

- hooks are read from `/etc/augment/settings.json`, `~/.augment/settings.json` (its folder moves
  with `--augment-cache-dir`), `<workspace>/.augment/settings.local.json` and `settings.json`,
  parsed as JSON5 (comments and trailing commas pass); a file starting with a byte order mark
  loses its MCP servers. They run only when Augment's backend turns the `enable_hooks` feature
  flag on (the fake model server sends it);
- SessionStart, PromptSubmit (Auggie's prompt event, with `user_prompt`), PreToolUse,
  PostToolUse, Stop and SessionEnd fire, each with `conversation_id` (= the session id: the
  session is saved as `~/.augment/sessions/<id>.json`; `--resume <id>` takes it, per its help) and
  `workspace_roots`; no `cwd` (the hook runs in the workspace root), no call id. A handler's
  `timeout` is in milliseconds (60,000 by default);
- the command is spawned without a shell: split on spaces (quotes kept together) into the
  program and its arguments, or run by `bash -c` when it holds `$ ; | & < > \\``. The docs ask for
  a `.sh` file; the CLI looks at the extension only on Windows (to run it through bash.exe), so
  the wrapper, a `#!/bin/sh` script without one, runs as it is (verified);
- an MCP tool is named `<tool>_<server>` (`ctx_read_leanctx`) and a PreToolUse matcher reaches it
  only in the form `mcp:<regex>`: a plain regex never matches an MCP tool, `.*` matches all;
- SessionStart's and PromptSubmit's answers are dropped, context included (the bot profile
  records turns, from PromptSubmit's `user_prompt` and Stop's `_exchange`, but cannot hand a
  thread back); a PreToolUse `permissionDecision: "deny"` reaches the model with its reason;
- MCP servers are `mcpServers` of the same settings files (`auggie mcp add --local` writes the
  project's `settings.local.json`); instructions are every `.md` under `~/.augment/rules/` and
  `<workspace>/.augment/rules/`.

Auggie summarizes its history without running a hook (verified: with its backend's summary flags
on and a large reported prompt, it started the history over between two tool calls of one turn;
a `history_summary_node` in the session file): the cache gives an Auggie conversation no stub at
all (cache/scope.py SILENT_COMPACTION), only content.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import (MCP_SERVER, PRE_TOOL, PROMPT, SESSION_END, SESSION_START, STOP, ClaudeShapeAgent, EventSpec,
                                 HookEvent, as_dict, str_field)


class Auggie(ClaudeShapeAgent):
    name = "auggie"
    display_name = "Auggie"
    binaries = ("auggie",)
    checked_against = "Auggie CLI 0.36.0 (real CLI, npm @augmentcode/auggie, end-to-end tests)"
    family = "claude-shaped"
    support = {
        "verified": "run, 0.36.0 (no stubs: it summarizes its history without a hook)",
        "hooks": "`~/.augment/settings.json` / `DIR/.augment/settings.local.json` (hooks and MCP, ms timeouts)",
        "mcp": "same file",
        "rule": "`~/.augment/rules/`",
        "call_id": "no",
        "bot": "turns; no hand-back (its hooks cannot add context)",
        "guard": "yes",
    }
    verified_version = "0.36.0"
    version_command = ("auggie", "--version")
    events = (
        EventSpec("SessionStart", SESSION_START),
        EventSpec("PromptSubmit", PROMPT),
        EventSpec("Stop", STOP),
        EventSpec("SessionEnd", SESSION_END),
    )
    config_home = ".augment"
    project_settings = ".augment/settings.local.json"  # personal, CLI only; git-ignored by Auggie itself
    timeout_unit_ms = True
    json_comments_ok = True
    json_trailing_commas_ok = True
    json_bom_ok = False  # verified on 0.36.0: `auggie mcp list` then lists no server of the file
    # both places that run SessionStart drop its answer, and PromptSubmit's too (0.36.0, from its
    # bundle; a bot's thread in SessionStart's additionalContext never reached the model in a run)
    context_events = ()
    read_gate_event = EventSpec("PreToolUse", PRE_TOOL, matcher=f"mcp:^ctx_read_{MCP_SERVER}$")

    # -- where ---------------------------------------------------------------------------
    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        # the servers live in the same settings file as the hooks
        path = self.user_config_path(home) if project is None else self.project_config_path(project)
        return path, "json", ("mcpServers",)

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return self._rules_dir(home, project) / "leanctx-ctx-read.md", "file"

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        return self._rules_dir(home, project) / "leanctx-conversation-state.md", "file"

    def _rules_dir(self, home: Path, project: Path | None) -> Path:
        return (self.config_dir(home) if project is None else project / self.config_home) / "rules"

    def unparseable_effect(self, path: Path, home: Path) -> str:
        return "it ignores this whole file: its hooks and its MCP servers"

    # -- what ----------------------------------------------------------------------------
    def read_tool(self, server: str = MCP_SERVER) -> str:
        return f"ctx_read_{server}"

    def read_gate_matcher(self, server: str = MCP_SERVER) -> str:
        return f"mcp:^ctx_read_{server}$"

    def is_read_tool(self, tool_name: object) -> bool:
        return isinstance(tool_name, str) and tool_name.startswith("ctx_read_") and len(tool_name) > len("ctx_read_")

    def normalize(self, event: str, payload: dict) -> HookEvent:
        ev = super().normalize(event, payload)
        # Auggie's conversation id is its session id; the hook runs in the first workspace root
        ev.session_id = ev.session_id or ev.conversation_id
        ev.cwd = ev.cwd or (ev.workspace_roots[0] if ev.workspace_roots else None)
        ev.prompt = ev.prompt or str_field(payload, "user_prompt")
        if ev.kind == STOP and ev.reply is None:
            exchange = as_dict(as_dict(payload.get("_exchange")).get("exchange"))
            ev.reply = str_field(exchange, "response_text") or str_field(as_dict(payload.get("conversation")), "agentTextResponse")
        return ev

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        payload: dict = {"hook_event_name": event, "conversation_id": "leanctx-doctor-00000000-0000-0000-0000-000000000000",
                         "workspace_roots": [cwd]}
        kind = self.event(event).kind if self.event(event) else ""
        if kind == PROMPT:
            payload["user_prompt"] = "leanctx doctor smoke test"
        elif kind == STOP:
            payload["agent_stop_cause"] = "end_turn"
        elif kind == PRE_TOOL:
            payload.update(tool_name="view", tool_input={"path": os.path.join(cwd, "README.md")}, tool_output=None,
                           tool_error=None, is_mcp_tool=False)
        return payload


AGENT = Auggie()
