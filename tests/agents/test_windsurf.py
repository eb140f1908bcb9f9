"""Windsurf (documentation only): the documented payloads (tests/fixtures/documented/windsurf) run
through the real wrapper as Windsurf runs a hook (`sh -c`, the payload on stdin), init/uninstall
of its hooks.json through the real CLI, and the cache's rule that a Windsurf conversation never
gets a stub (it has no compaction event)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.base import PROMPT, STOP
from leanctx.hooks.publish import record_path
from leanctx.installer import wrapper
from tests.conftest import REPO, run_cli

DOC = REPO / "tests" / "fixtures" / "documented" / "windsurf"
AGENT = agents.get("windsurf")
TRAJECTORY = "3f2b9c1e-5d7a-4e21-9b0c-8a6f4d2e1c77"

USER_HOOKS = """{
  "hooks": {
    "pre_read_code": [
      {
        "command": "python3 /Users/me/hooks/block_read_access.py",
        "show_output": true
      }
    ],
    "post_cascade_response": [
      { "command": "python3 /Users/me/hooks/log_cascade_response.py" }
    ]
  }
}
"""


def documented(name: str) -> dict:
    return json.loads((DOC / name).read_text())


def run_hook(data_dir: Path, event: str, body: bytes, cwd: Path) -> subprocess.CompletedProcess:
    command = wrapper.command(wrapper.wrapper_path(data_dir), "windsurf", event)
    return subprocess.run(["/bin/sh", "-c", command], input=body, capture_output=True, cwd=cwd, timeout=60, env=dict(os.environ))


def test_documented_payloads_normalize_to_the_trajectory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a hook runs in the workspace root
    prompt = AGENT.normalize("pre_user_prompt", documented("pre_user_prompt.json"))
    assert (prompt.kind, prompt.conversation_id, prompt.session_id) == (PROMPT, TRAJECTORY, TRAJECTORY)
    assert prompt.prompt == "can you run the echo hello command" and prompt.turn_id == "exec-0001"
    assert prompt.cwd == str(tmp_path) and prompt.workspace_roots == [str(tmp_path)]
    done = AGENT.normalize("post_cascade_response", documented("post_cascade_response.json"))
    assert (done.kind, done.conversation_id) == (STOP, TRAJECTORY) and done.reply.startswith("### Planner Response")
    # the older revision's pre_user_prompt names no conversation: nothing to file it under
    empty = AGENT.normalize("pre_user_prompt", documented("pre_user_prompt.old-empty-id.json"))
    assert empty.conversation_id is None and empty.cwd is None


def test_only_ids_are_wired_no_gate_no_guard() -> None:
    """pre_read_code names a path, no range, and post_read_code no content: no read is refused
    or credited on it (agents/windsurf.py); a refusal is exit 2, which our hooks never use."""
    assert [s.name for s in AGENT.events] == ["pre_user_prompt", "post_cascade_response"]
    assert AGENT.guard_event is None and AGENT.read_gate_event is None and AGENT.builtin_read_tools == ()
    wired = {spec.name for spec, _ in AGENT.profile_events(bot=True, guard=True, read_gate=True, builtin_read=True)}
    assert wired == {"pre_user_prompt", "post_cascade_response"}
    assert AGENT.family == "cursor-like" and AGENT.verified_version == "" and set(AGENT.support) == {
        "verified", "hooks", "mcp", "rule", "call_id", "bot", "guard"}


def test_init_keeps_the_user_s_hooks_and_uninstall_restores_the_bytes(home: Path, data_dir: Path) -> None:
    path = home / ".codeium" / "windsurf" / "hooks.json"
    path.parent.mkdir(parents=True)
    path.write_text(USER_HOOKS)
    assert run_cli("init", "--agent", "windsurf").returncode == 0
    value = json.loads(path.read_text())
    assert value["hooks"]["pre_read_code"] == json.loads(USER_HOOKS)["hooks"]["pre_read_code"]  # not ours: untouched
    first, ours = value["hooks"]["post_cascade_response"]
    assert first == {"command": "python3 /Users/me/hooks/log_cascade_response.py"}  # the user's stays first
    command = wrapper.command(wrapper.wrapper_path(data_dir), "windsurf", "post_cascade_response")
    assert ours == {"command": command, "show_output": False}  # no timeout key: Windsurf documents none
    assert value["hooks"]["pre_user_prompt"] == [{"command": wrapper.command(wrapper.wrapper_path(data_dir), "windsurf", "pre_user_prompt"),
                                                   "show_output": False}]
    mcp = json.loads((home / ".codeium" / "windsurf" / "mcp_config.json").read_text())
    assert mcp["mcpServers"]["leanctx"]["args"] == ["mcp"]
    assert run_cli("uninstall", "--agent", "windsurf").returncode == 0
    assert path.read_text() == USER_HOOKS
    assert not (home / ".codeium" / "windsurf" / "mcp_config.json").exists()


def test_a_hooks_file_init_cannot_read_is_refused_untouched(home: Path) -> None:
    path = home / ".codeium" / "windsurf" / "hooks.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"hooks": {"pre_user_prompt": {')
    proc = run_cli("init", "--agent", "windsurf")
    assert proc.returncode != 0 and f"{path}:1" in proc.stderr and "cannot parse" in proc.stderr
    assert path.read_text() == '{"hooks": {"pre_user_prompt": {'


def test_project_level_hooks_and_the_rule_but_no_mcp_file(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    proc = run_cli("init", "--agent", "windsurf", "--project", str(project))
    assert proc.returncode == 0, proc.stderr
    value = json.loads((project / ".windsurf" / "hooks.json").read_text())
    assert value["hooks"]["pre_user_prompt"] == [{"command": "leanctx-hook windsurf pre_user_prompt", "show_output": False}]
    assert "ctx_read" in (project / "AGENTS.md").read_text()  # the workspace's root AGENTS.md is always on
    assert not (project / ".windsurf" / "mcp_config.json").exists()  # Windsurf has no project MCP file
    assert run_cli("uninstall", "--agent", "windsurf", "--project", str(project)).returncode == 0
    assert sorted(p.name for p in project.iterdir()) == []


def test_the_wrapper_publishes_the_trajectory_and_prints_nothing(home: Path, data_dir: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", "windsurf").returncode == 0
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for event, name in (("pre_user_prompt", "pre_user_prompt.json"), ("post_cascade_response", "post_cascade_response.json")):
        proc = run_hook(data_dir, event, (DOC / name).read_bytes(), workspace)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    record = json.loads(Path(record_path(data_dir, "windsurf", TRAJECTORY)).read_text())
    assert record["conversation_id"] == TRAJECTORY and record["last_event"] == "post_cascade_response"
    assert record["turn_id"] == "exec-0001" and record["cwd"] == str(workspace)
    assert "prompt" not in json.dumps(record)  # the coding profile records ids only


def test_an_empty_trajectory_id_publishes_nothing_and_lets_the_prompt_run(home: Path, data_dir: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", "windsurf").returncode == 0
    proc = run_hook(data_dir, "pre_user_prompt", (DOC / "pre_user_prompt.old-empty-id.json").read_bytes(), tmp_path)
    assert (proc.returncode, proc.stdout) == (0, b"")  # exit 2 would block the prompt
    assert not (data_dir / "conversations" / "windsurf").exists()


def test_the_response_digest_is_never_recorded_as_a_reply() -> None:
    done = AGENT.normalize("post_cascade_response", documented("post_cascade_response.json"))
    assert done.reply and AGENT.reply_text(done) is None
