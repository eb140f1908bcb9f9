"""Auggie: the payloads recorded from Auggie 0.36.0 (tests/fixtures/payloads/auggie, an offline
`auggie --print` calling ctx_read), run through the installed hook wrapper; what init writes into
its settings file; what doctor's JSON check accepts. The real CLI runs in
tests/e2e/test_auggie_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

from leanctx import agents
from leanctx.agents.base import PRE_TOOL, PROMPT, SESSION_END, SESSION_START, STOP
from leanctx.hooks.publish import read_json, record_path
from leanctx.installer import hookconfig, hostload, jsonc
from leanctx.installer.install import Profile, hook_commands
from tests.conftest import PAYLOADS
from tests.hooks.test_hook_entry import hook_wrapper, run_hook  # noqa: F401 - the fixture

AUG = PAYLOADS / "auggie"
AGENT = agents.get("auggie")
SESSION = "87172b0d-ceba-4bbc-a93d-d0a33d9e1940"
PROJ = "/home/user/work/proj"


def recorded(event: str) -> dict:
    return json.loads((AUG / f"{event}.json").read_text())


def test_recorded_payloads_normalize_to_auggie_s_session() -> None:
    """Auggie names the session `conversation_id` (its session file's name), sends no cwd (the
    hook runs in the first workspace root), the prompt as `user_prompt`, the reply inside `_exchange`."""
    start = AGENT.normalize("SessionStart", recorded("SessionStart"))
    assert (start.kind, start.conversation_id, start.session_id, start.cwd) == (SESSION_START, SESSION, SESSION, PROJ)
    assert start.workspace_roots == [PROJ] and start.transcript_path is None
    prompt = AGENT.normalize("PromptSubmit", recorded("PromptSubmit"))
    assert (prompt.kind, prompt.session_id, prompt.prompt) == (PROMPT, SESSION, "read a.txt")
    stop = AGENT.normalize("Stop", recorded("Stop"))
    assert (stop.kind, stop.session_id, stop.reply) == (STOP, SESSION, "done")
    # with `metadata.includeConversationData` the reply comes in `conversation` too
    other = {k: v for k, v in recorded("Stop").items() if k != "_exchange"}
    assert AGENT.normalize("Stop", {**other, "conversation": {"agentTextResponse": "hi"}}).reply == "hi"
    assert AGENT.normalize("SessionEnd", recorded("SessionEnd")).kind == SESSION_END
    pre = AGENT.normalize("PreToolUse", recorded("PreToolUse"))
    assert (pre.kind, pre.tool_name, pre.tool_input, pre.tool_use_id) == (PRE_TOOL, "ctx_read_leanctx", {"path": "a.txt"}, None)
    assert AGENT.is_read_tool(pre.tool_name) and not AGENT.is_read_tool("ctx_read_") and not AGENT.is_read_tool("view")


def test_recorded_session_is_published_by_the_wrapper(hook_wrapper: Path, data_dir: Path) -> None:  # noqa: F811
    for event in ("SessionStart", "PromptSubmit", "Stop", "SessionEnd"):
        cp = run_hook(hook_wrapper, "auggie", event, (AUG / f"{event}.json").read_bytes())
        assert cp.returncode == 0 and cp.stdout == b"" and cp.stderr == b"", cp.stderr
    record = read_json(record_path(data_dir, "auggie", SESSION))
    assert record["session_id"] == record["conversation_id"] == SESSION and record["cwd"] == PROJ
    assert record["stopped_at"] and record["ended_at"] and record["last_event"] == "SessionEnd"
    assert "prompt" not in json.dumps(record)  # the coding profile records ids, no text
    assert not (data_dir / "logs" / "hooks.log").exists()


def test_read_gate_pre_tool_hook_answers_nothing(hook_wrapper: Path, data_dir: Path) -> None:  # noqa: F811
    """The read gate notes the call (no call id to hand on) and prints nothing: Auggie would show
    any stdout or stderr of a hook that exits 0."""
    cp = run_hook(hook_wrapper, "auggie", "PreToolUse --read-gate", (AUG / "PreToolUse.json").read_bytes())
    assert cp.returncode == 0 and cp.stdout == b"" and cp.stderr == b"", cp.stderr


def test_init_writes_claude_shaped_groups_with_ms_timeouts_and_an_mcp_matcher(tmp_path: Path) -> None:
    """Session events: a group without a matcher (Auggie's schema for them has none); the read
    gate: `mcp:<regex>` (a plain regex never matches an MCP tool in Auggie), under another server
    name too; every timeout in milliseconds."""
    path = tmp_path / ".augment" / "settings.json"
    commands = hook_commands(tmp_path / "data", AGENT)
    text, created = hookconfig.add_hooks(AGENT, path, None, commands, Profile().events(AGENT))
    hooks = jsonc.loads(text)["hooks"]
    assert created and sorted(hooks) == ["PreToolUse", "PromptSubmit", "SessionEnd", "SessionStart", "Stop"]
    assert hooks["SessionStart"] == [{"hooks": [{"type": "command", "command": commands("SessionStart", ()), "timeout": 10_000}]}]
    assert hooks["PreToolUse"][0]["matcher"] == "mcp:^ctx_read_leanctx$"
    assert hooks["PreToolUse"][0]["hooks"][0]["command"].endswith("leanctx-hook auggie PreToolUse --read-gate")
    renamed = dict(AGENT.profile_events(read_gate=True, mcp_name="lc2"))
    assert [s.matcher for s in renamed if s.name == "PreToolUse"] == ["mcp:^ctx_read_lc2$"]
    guarded = [s for s, flags in AGENT.profile_events(read_gate=True, guard=True) if s.name == "PreToolUse"]
    assert [s.matcher for s in guarded] == [None]  # the guard sees every tool: one entry, Auggie's default ".*"


def test_where_auggie_reads_each_part(tmp_path: Path) -> None:
    home, proj = tmp_path / "h", tmp_path / "p"
    assert AGENT.user_config_path(home) == home / ".augment" / "settings.json"
    assert AGENT.mcp_config(home, None) == (home / ".augment" / "settings.json", "json", ("mcpServers",))
    assert AGENT.project_config_path(proj) == proj / ".augment" / "settings.local.json"
    assert AGENT.mcp_config(home, proj)[0] == proj / ".augment" / "settings.local.json"
    assert AGENT.rules_path(home, None) == (home / ".augment" / "rules" / "leanctx-ctx-read.md", "file")
    assert AGENT.rules_path(home, proj) == (proj / ".augment" / "rules" / "leanctx-ctx-read.md", "file")
    assert AGENT.instructions_path(home, None) == (home / ".augment" / "rules" / "leanctx-conversation-state.md", "file")
    assert AGENT.mcp_entry("/x/python", ["-m", "leanctx", "mcp"]) == {"type": "stdio", "command": "/x/python", "args": ["-m", "leanctx", "mcp"]}


def test_answers_auggie_takes() -> None:
    """No event's context reaches its model (Auggie drops SessionStart's and PromptSubmit's
    answers): nothing is printed for it. The guard's deny is Claude's PreToolUse form."""
    assert all(AGENT.context_output(e, "thread") == "" for e in ("SessionStart", "PromptSubmit", "Stop"))
    deny = json.loads(AGENT.guard_output("PreToolUse", "leanctx guard: no"))
    assert deny == {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": "leanctx guard: no"}}
    assert AGENT.check_output("PreToolUse", json.dumps(deny)) is None and AGENT.check_output("Stop", "") is None


def test_doctor_flags_only_the_byte_order_mark(tmp_path: Path) -> None:
    """Auggie reads its settings as JSON5: comments and trailing commas pass; a byte order mark
    loses the file's MCP servers (0.36.0, `auggie mcp list`)."""
    path = tmp_path / "settings.json"
    json5 = b'// mine\n{"mcpServers": {},}\n'
    assert hostload.strict_json_problem(AGENT, tmp_path, path, json5) is None
    problem = hostload.strict_json_problem(AGENT, tmp_path, path, b"\xef\xbb\xbf" + json5)
    assert problem is not None and "byte order mark" in problem.reason and "comment" not in problem.reason
    assert "MCP servers" in problem.reason


def test_doctor_smoke_payloads_are_auggie_shaped(tmp_path: Path) -> None:
    for spec, _flags in AGENT.profile_events(read_gate=True, guard=True):
        payload = AGENT.synthetic_payload(spec.name, str(tmp_path))
        ev = AGENT.normalize(spec.name, payload)
        assert ev.session_id and ev.cwd == str(tmp_path) and ev.kind == spec.kind
        assert "session_id" not in payload and "cwd" not in payload
