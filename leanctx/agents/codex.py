"""OpenAI Codex CLI: `$CODEX_HOME/hooks.json` (default `~/.codex`), project `.codex/hooks.json`.

Same three-level shape as Claude Code. Codex runs a non-managed hook only after the user trusts
it in `/hooks`; trust is keyed by the hook's position and a hash of its content, so our command
text and position must never change once written (the wrapper path is stable for that reason).
Codex's output schema rejects unknown keys, so we print nothing at all.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import CLAUDE_STYLE_EVENTS, MCP_BOT_ARGS, POST_TOOL, ClaudeShapeAgent, EventSpec


REFUSAL_END = "[end]"  # the last line of a several-line refusal (Codex appends ". Command: <cmd>" to it)


class Codex(ClaudeShapeAgent):
    name = "codex"
    display_name = "Codex CLI"
    binaries = ("codex",)
    checked_against = "Codex CLI 0.171.0 (real CLI, end-to-end tests)"
    family = "claude-shaped"
    verified_version = "0.171.0"
    min_version = "0.171.0"
    version_command = ("codex", "--version")
    support = {
        "verified": "run, 0.171.0",
        "hooks": "`~/.codex/hooks.json` / `DIR/.codex/hooks.json`",
        "mcp": "`config.toml` `[mcp_servers]`",
        "rule": "`AGENTS.md` block",
        "call_id": "yes (`_meta` callId)",
        "bot": "yes",
        "guard": "yes",
    }
    events = CLAUDE_STYLE_EVENTS
    json_bom_ok = False  # verified on 0.171: a hooks.json starting with a BOM is ignored whole

    config_home, config_env = ".codex", "CODEX_HOME"
    settings_file = "hooks.json"
    project_settings = ".codex/hooks.json"
    rules_file = "AGENTS.md"

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # Codex has no skills folder; AGENTS.md (global in CODEX_HOME, or the project's) is read
        # into every session, so the instructions go there as a marked block.
        return (self.config_dir(home) if project is None else project) / "AGENTS.md", "block"

    # Plain shell reads (`cat F`, `sed -n 'A,Bp' F`, ...: readers.py), gated like ctx_read. Codex
    # 0.171.0 offers no file-reading tool of its own (exec_command, write_stdin, apply_patch,
    # view_image for images); its hooks name the shell tool `Bash`, whatever the model called
    # (tests/e2e/recorded_payloads/codex/shell_reads.json; tests/e2e/test_codex_shell_read_e2e.py).
    builtin_read_tools = ("Bash",)
    builtin_read_post_event = EventSpec("PostToolUse", POST_TOOL, matcher="Bash")

    def builtin_read_ask(self, event):  # noqa: ANN001, ANN201 - HookEvent -> readers.Ask | None
        from leanctx import readers

        command = shell_command(event.tool_input)
        return readers.shell_ask(command, event.cwd) if command else None

    def builtin_read_delivery(self, event, payload: dict):  # noqa: ANN001, ANN201
        """0.171.0 hands the post-tool hook the command's output as one string (stdout and stderr
        together, no exit code), the same text the model gets after exec_command's header
        ("Chunk ID: …\nProcess exited with code 0\n…\nOutput:\n"), verified byte for byte,
        blank lines, CRs and all. A cut output starts with "Warning: truncated output", which no
        file's lines equal; a call that yielded before its process exited hands over output the
        model got under later write_stdin calls: the rollout check (cache/rollout.py) withholds it."""
        from leanctx import readers

        command = shell_command(event.tool_input)
        response = payload.get("tool_response")
        if not command or not isinstance(response, str):
            return None
        ask = readers.shell_ask(command, event.cwd)
        if ask is None:
            return None
        content = readers.shell_content(ask, response)
        return (ask, content) if content else None

    def builtin_refusal_output(self, event, text: str) -> str:  # noqa: ANN001
        # 0.171.0 hands the model "Command blocked by PreToolUse hook: <reason>. Command: <cmd>",
        # trailing newlines of the reason trimmed (verified: a JSON deny and exit 2 alike). A
        # reason that ends in a line of the file (a diff, a pointer's new lines) would get
        # ". Command: …" glued onto that line, so it ends with a line of its own.
        if "\n" in text.rstrip("\n"):
            text = text.rstrip("\n") + "\n" + REFUSAL_END
        return self.guard_output(event.event, text)

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        base = self.config_dir(home) if project is None else project / ".codex"
        return base / "config.toml", "toml", ("mcp_servers",)

    # The tools Codex may run without asking: they only read (a workspace file; with --bot also
    # the cache's counters, which only the bot profile offers). The state_* tools write the
    # user's conversation thread, so they keep Codex's default: they need approval (refused by
    # `codex exec`, whose approval policy is never).
    auto_approved = ("ctx_read",)
    auto_approved_bot = ("ctx_read", "ctx_stats")

    def mcp_entry(self, command: str, args: list[str]) -> dict:
        # `codex exec` runs an MCP tool only with "approve" (else "requires approval, but approval
        # policy is never"); per tool, verified on 0.171.0: `[mcp_servers.NAME.tools.TOOL]`.
        bot = tuple(args[-len(MCP_BOT_ARGS):]) == MCP_BOT_ARGS
        tools = {tool: {"approval_mode": "approve"} for tool in (self.auto_approved_bot if bot else self.auto_approved)}
        return {"command": command, "args": args, "tools": tools}

    def hook_group(self, command: str, spec: EventSpec) -> dict:
        group = super().hook_group(command, spec)
        if spec.name == "SessionEnd":
            # Codex clamps SessionEnd to 3 s and warns on every run when asked for more.
            group["hooks"][0]["timeout"] = 3
        return group

    def context_output(self, event: str, text: str) -> str:
        # Plain stdout on SessionStart/UserPromptSubmit becomes a developer message (verified on
        # 0.171); the JSON additionalContext form was reported as "Failed" by 0.154 exec.
        return text if event in self.context_events else ""

    def check_output(self, event: str, stdout: str) -> str | None:
        if not stdout.strip() or (event in self.context_events and not stdout.lstrip().startswith("{")):
            return None
        if event == "PreToolUse":
            return super().check_output(event, stdout)
        return f"unexpected stdout on {event}: {stdout[:80]!r}"


AGENT = Codex()


def shell_command(tool_input: object) -> str | None:
    """The command of a shell call as Codex's hooks name it (0.171.0: `{"command": "<what the
    model wrote>"}`, whatever else the call set: workdir shows as the payload's cwd). An argv list
    (`["bash", "-lc", "<script>"]`, the shape of Codex's older `shell` tool) is taken only in that
    exact form; any other key or shape: None."""
    if not isinstance(tool_input, dict) or set(tool_input) != {"command"}:
        return None
    command = tool_input["command"]
    if isinstance(command, list) and len(command) == 3 and all(isinstance(w, str) for w in command) \
            and command[0] in ("bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash", "/usr/bin/zsh") \
            and command[1] in ("-c", "-lc"):
        return command[2]
    return command if isinstance(command, str) else None
