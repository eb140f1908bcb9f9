"""Each host module behind the one interface: paths, entry shape, payload normalization, output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.base import (
    PRE_COMPACT,
    PROMPT,
    SESSION_END,
    SESSION_START,
    STOP,
    SUBAGENT_START,
    SUBAGENT_STOP,
    HookEvent,
    is_our_command,
)
from leanctx.cache.scope import SILENT_COMPACTION
from tests.conftest import PAYLOADS, REPO

DOCUMENTED = REPO / "tests" / "fixtures" / "documented"
# hosts whose hooks lack a compaction event (and more), docs/hosts.md: a released Crush fires
# PreToolUse alone, Goose has no compaction event, Antigravity CLI no session start or prompt
LIFECYCLE_GAPS = ("crush", "goose", "antigravity")


def test_registry_lists_every_module() -> None:
    assert agents.names() == ["claude", "codex", "cursor", "codebuddy", "gemini", "qwen", "copilot", "opencode", "kilo", "cline", "droid", "pi",
                              "openclaw", "crush", "goose", "antigravity", "windsurf", "kiro", "amp", "auggie", "vscode"]
    for name in agents.names():
        agent = agents.get(name)
        assert agent.name == name and agent.display_name and agent.checked_against
    with pytest.raises(agents.UnknownAgent) as info:
        agents.get("zed")
    assert "known agents: claude, codex, cursor, codebuddy, gemini, qwen, copilot, opencode, kilo, cline, droid" in str(info.value)


@pytest.mark.parametrize("name", agents.names())
def test_every_agent_wires_ids_stop_and_compaction(name: str) -> None:
    """hosts.md §1.1: the id-carrying events, the compaction event, the stop event."""
    kinds = {spec.kind for spec in agents.get(name).events}
    if name in LIFECYCLE_GAPS:
        # documentation-only hosts without these events: the cache withholds every stub there
        assert name in SILENT_COMPACTION and PRE_COMPACT not in kinds
        assert not any("ToolUse" in spec.name for spec in agents.get(name).events)
        return
    assert {PROMPT, STOP} <= kinds
    if PRE_COMPACT not in kinds or SESSION_START not in kinds:
        # Windsurf has neither event, Kiro CLI and Auggie 0.36.0 no compaction event (Auggie's hook
        # events: PreToolUse, PostToolUse, Stop, SessionStart, SessionEnd, Notification,
        # PromptSubmit): a host that cannot say its context was cut never gets a stub (docs/hosts.md)
        assert name in SILENT_COMPACTION and name in ("windsurf", "kiro", "auggie")
        return
    opencode_family = agents.get(name).family == "opencode-plugin"
    # OpenCode's plugin events (and its forks'), Amp's plugin events and VS Code's hooks have no session end
    if not opencode_family and name not in ("amp", "vscode"):
        assert SESSION_END in kinds
    # none at all (Gemini CLI, OpenCode, Cline); Copilot's subagent tool hooks carry the child's own
    # session id, and its read gate names every call; Droid's Task subagents run in its daemon,
    # another process; Pi has no subagents ("No sub-agents" in its README); an Amp subagent is a
    # thread of its own, with its own id in every plugin event (docs/hosts.md)
    if name not in ("gemini", "copilot", "cline", "droid", "pi", "amp", "auggie") and not opencode_family:
        assert {SUBAGENT_START, SUBAGENT_STOP} <= kinds
    names = [spec.name for spec in agents.get(name).events]
    assert not any("ToolUse" in n or "postTool" in n or "Shell" in n for n in names)


@pytest.mark.parametrize(
    ("name", "user", "project"),
    [
        ("claude", ".claude/settings.json", ".claude/settings.local.json"),
        ("codex", ".codex/hooks.json", ".codex/hooks.json"),
        ("cursor", ".cursor/hooks.json", ".cursor/hooks.json"),
        ("codebuddy", ".codebuddy/settings.json", ".codebuddy/settings.local.json"),
        ("gemini", ".gemini/settings.json", ".gemini/settings.json"),
        ("qwen", ".qwen/settings.json", ".qwen/settings.json"),
        ("droid", ".factory/settings.json", ".factory/settings.json"),
        ("windsurf", ".codeium/windsurf/hooks.json", ".windsurf/hooks.json"),
        ("kiro", ".kiro/agents/leanctx.json", ".kiro/agents/leanctx.json"),
    ],
)
def test_config_paths(name: str, user: str, project: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "CODEBUDDY_CONFIG_DIR", "GEMINI_CLI_HOME", "QWEN_HOME", "FACTORY_HOME_OVERRIDE"):
        monkeypatch.delenv(var, raising=False)
    agent = agents.get(name)
    assert agent.user_config_path(tmp_path) == tmp_path / user
    assert agent.project_config_path(tmp_path / "p") == tmp_path / "p" / project


@pytest.mark.parametrize(("name", "var", "file"), [("claude", "CLAUDE_CONFIG_DIR", "settings.json"), ("codex", "CODEX_HOME", "hooks.json"),
                                                   ("codebuddy", "CODEBUDDY_CONFIG_DIR", "settings.json"), ("qwen", "QWEN_HOME", "settings.json"),
                                                   ("gemini", "GEMINI_CLI_HOME", ".gemini/settings.json")])
def test_host_config_dir_override(name: str, var: str, file: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(var, str(tmp_path / "elsewhere"))
    assert agents.get(name).user_config_path(tmp_path / "home") == tmp_path / "elsewhere" / file


def test_claude_shape_entry() -> None:
    claude = agents.get("claude")
    group = claude.hook_group("'/x y/leanctx-hook' claude Stop", claude.event("Stop"))
    assert group == {"hooks": [{"type": "command", "command": "'/x y/leanctx-hook' claude Stop", "timeout": 10}]}
    assert claude.is_our_group(group)
    assert claude.group_commands({"matcher": "", "hooks": [{"type": "command", "command": "a"}, {"type": "prompt"}]}) == ["a"]
    # a group mixing our handler with a foreign one is not ours to remove
    assert not claude.is_our_group({"hooks": [{"type": "command", "command": "/x/leanctx-hook claude Stop"}, {"type": "command", "command": "echo"}]})


def test_codex_session_end_timeout_is_its_cap() -> None:
    codex = agents.get("codex")
    assert codex.hook_group("c", codex.event("SessionEnd"))["hooks"][0]["timeout"] == 3
    assert codex.hook_group("c", codex.event("Stop"))["hooks"][0]["timeout"] == 10


def test_cursor_entry_is_flat() -> None:
    cursor = agents.get("cursor")
    assert cursor.hook_group("/d/leanctx-hook cursor stop", cursor.event("stop")) == {"command": "/d/leanctx-hook cursor stop", "timeout": 10}
    assert cursor.is_our_group({"command": "/d/leanctx-hook cursor stop"})
    assert not cursor.is_our_group({"command": "npx other-tool"})
    assert cursor.new_file_keys == {"version": 1}


@pytest.mark.parametrize(
    ("command", "ours"),
    [
        ("/home/u/.local/share/leanctx/bin/leanctx-hook claude Stop", True),
        ("'/home/u/my data/leanctx/bin/leanctx-hook' claude Stop", True),
        ('"C:\\Users\\u\\leanctx\\bin\\leanctx-hook" cursor stop', True),
        ("leanctx-hook claude Stop", True),
        ("/usr/bin/leanctx-hooker claude Stop", False),
        ("echo leanctx-hook-is-great", False),
        ("/usr/local/bin/lean-ctx hook observe", False),
        ("", False),
        (None, False),
    ],
)
def test_is_our_command(command: object, ours: bool) -> None:
    assert is_our_command(command) is ours


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_claude_normalize_recorded() -> None:
    claude = agents.get("claude")
    body = load(PAYLOADS / "claude" / "Stop.json")
    ev = claude.normalize("Stop", body)
    assert isinstance(ev, HookEvent)
    assert (ev.agent, ev.event, ev.kind) == ("claude", "Stop", STOP)
    assert ev.conversation_id == ev.session_id == body["session_id"]
    assert ev.transcript_path == body["transcript_path"] and ev.cwd == body["cwd"]
    assert ev.reply == "The file says hello." and ev.subagent_id is None
    prompt = claude.normalize("UserPromptSubmit", load(PAYLOADS / "claude" / "UserPromptSubmit.json"))
    assert prompt.prompt == "read a.txt" and prompt.kind == PROMPT
    start = claude.normalize("SessionStart", load(PAYLOADS / "claude" / "SessionStart.json"))
    assert start.source == "startup"


def test_claude_subagent_fields() -> None:
    body = dict(load(PAYLOADS / "claude" / "SessionStart.json"), hook_event_name="SubagentStop", agent_id="a9", agent_type="Explore",
                agent_transcript_path="/t/subagents/agent-a9.jsonl", last_assistant_message="done")
    ev = agents.get("claude").normalize("SubagentStop", body)
    assert (ev.kind, ev.subagent_id, ev.subagent_type, ev.subagent_transcript_path) == (SUBAGENT_STOP, "a9", "Explore", "/t/subagents/agent-a9.jsonl")
    assert ev.conversation_id == body["session_id"]  # the parent's session


def test_codex_normalize_recorded() -> None:
    body = load(PAYLOADS / "codex" / "UserPromptSubmit.json")
    ev = agents.get("codex").normalize("UserPromptSubmit", body)
    assert ev.session_id == body["session_id"] and ev.turn_id == body["turn_id"] and ev.prompt == "hello"
    null_transcript = dict(body, transcript_path=None)
    assert agents.get("codex").normalize("UserPromptSubmit", null_transcript).transcript_path is None


def test_cursor_normalize_documented(monkeypatch: pytest.MonkeyPatch) -> None:
    cursor = agents.get("cursor")
    monkeypatch.delenv("CURSOR_TRANSCRIPT_PATH", raising=False)
    start = cursor.normalize("sessionStart", load(DOCUMENTED / "cursor" / "sessionStart.json"))
    assert start.conversation_id == "6f1c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6"
    assert start.workspace_roots == ["/home/user/proj"] and start.cwd == "/home/user/proj"
    assert start.transcript_path.endswith(".jsonl")
    sub = cursor.normalize("subagentStart", load(DOCUMENTED / "cursor" / "subagentStart.json"))
    assert (sub.kind, sub.subagent_id, sub.subagent_type) == (SUBAGENT_START, "sa-7788", "explore")
    prompt = cursor.normalize("beforeSubmitPrompt", load(DOCUMENTED / "cursor" / "beforeSubmitPrompt.json"))
    assert prompt.transcript_path is None and prompt.turn_id == "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
    monkeypatch.setenv("CURSOR_TRANSCRIPT_PATH", "/env/t.jsonl")
    assert cursor.normalize("beforeSubmitPrompt", load(DOCUMENTED / "cursor" / "beforeSubmitPrompt.json")).transcript_path == "/env/t.jsonl"


@pytest.mark.parametrize("body", [{}, {"session_id": 5}, {"session_id": None, "cwd": ["x"]}, {"workspace_roots": "notalist"}])
@pytest.mark.parametrize("name", agents.names())
def test_normalize_tolerates_wrong_types(name: str, body: dict) -> None:
    agent = agents.get(name)
    ev = agent.normalize((agent.events or (agent.guard_event,))[0].name, body)  # Crush wires PreToolUse alone
    assert ev.conversation_id is None and ev.cwd is None and ev.workspace_roots == []


@pytest.mark.parametrize("name", agents.names())
def test_output_rules(name: str) -> None:
    agent = agents.get(name)
    for spec in agent.events:
        quiet = agent.no_opinion(spec.name)
        assert agent.check_output(spec.name, quiet) is None
        plain_text_is_context = name == "codex" and spec.name in ("SessionStart", "UserPromptSubmit")
        assert (agent.check_output(spec.name, "some banner text") is None) is plain_text_is_context
        payload = agent.synthetic_payload(spec.name, "/tmp/proj")
        ev = agent.normalize(spec.name, payload)
        assert ev.conversation_id and ev.kind == spec.kind
    if name == "antigravity":  # its hooks answer JSON; `{}` is its documented empty answer
        assert all(agent.no_opinion(spec.name) == "{}" for spec in agent.events)
    elif name == "cursor":
        assert agent.no_opinion("beforeSubmitPrompt") == '{"continue": true}'
        assert agent.check_output("beforeSubmitPrompt", "") is not None
        assert agent.check_output("beforeSubmitPrompt", '{"continue": false}') is not None
        assert agent.check_output("sessionStart", "{}") is None
    else:
        assert all(agent.no_opinion(spec.name) == "" for spec in agent.events)


def test_detect(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    assert not agents.get("codex").detect(tmp_path)
    (tmp_path / ".codex").mkdir()
    assert agents.get("codex").detect(tmp_path)
    (tmp_path / "bin").mkdir()
    exe = tmp_path / "bin" / "cursor-agent"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert agents.get("cursor").detect(tmp_path)
