"""Kiro CLI (documentation only): our own agent file `leanctx.json` beside the user's agents,
written and removed through the real CLI; the documented payloads (tests/fixtures/documented/kiro)
run through the real wrapper as Kiro runs a hook (`sh -c`, the payload on stdin)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from leanctx import agents
from leanctx.agents.base import PROMPT, SESSION_START, STOP
from leanctx.hooks.publish import record_path
from leanctx.installer import wrapper
from tests.conftest import REPO, run_cli

DOC = REPO / "tests" / "fixtures" / "documented" / "kiro"
AGENT = agents.get("kiro")
MINE = """{
  "name": "mine",
  "tools": ["read", "shell"],
  "hooks": {
    "stop": [ { "command": "notify-send done" } ]
  }
}
"""


def documented(name: str) -> dict:
    return json.loads((DOC / name).read_text())


def run_hook(data_dir: Path, event: str, body: bytes) -> subprocess.CompletedProcess:
    command = wrapper.command(wrapper.wrapper_path(data_dir), "kiro", event)
    return subprocess.run(["/bin/sh", "-c", command], input=body, capture_output=True, timeout=60, env=dict(os.environ))


def test_documented_payloads_carry_no_conversation_to_file() -> None:
    """kiro.dev documents no session id: such a payload names no conversation (nothing is
    published); one that carries `session_id` (as third-party pages show) is filed under it."""
    for name, event in (("agentSpawn.json", "agentSpawn"), ("userPromptSubmit.json", "userPromptSubmit"), ("stop.json", "stop")):
        ev = AGENT.normalize(event, documented(name))
        assert ev.conversation_id is None and ev.cwd == "/current/working/directory"
    prompt = AGENT.normalize("userPromptSubmit", documented("userPromptSubmit.session_id.json"))
    assert (prompt.kind, prompt.conversation_id, prompt.prompt) == (PROMPT, "abc123-def456-789", "user's input prompt")
    stop = AGENT.normalize("stop", documented("stop.session_id.json"))
    assert (stop.kind, stop.reply) == (STOP, "The assistant's last response text...")
    assert AGENT.normalize("agentSpawn", {"session_id": "s", "cwd": "/w"}).kind == SESSION_START


def test_stdout_on_spawn_or_prompt_would_reach_the_model_so_ours_is_empty() -> None:
    """Kiro adds a hook's stdout on agentSpawn and userPromptSubmit to the agent's context."""
    for spec in AGENT.events:
        assert AGENT.no_opinion(spec.name) == "" and AGENT.context_output(spec.name, "x") == ""
        assert AGENT.check_output(spec.name, "banner") is not None
    assert AGENT.guard_event is None and AGENT.read_gate_event is None and AGENT.builtin_read_tools == ()


def test_init_writes_an_agent_of_ours_beside_the_user_s_and_uninstall_deletes_only_it(home: Path, data_dir: Path) -> None:
    agents_dir = home / ".kiro" / "agents"
    agents_dir.mkdir(parents=True)
    (agents_dir / "mine.json").write_text(MINE)
    proc = run_cli("init", "--agent", "kiro")
    assert proc.returncode == 0, proc.stderr
    assert "kiro-cli chat --agent leanctx" in proc.stdout and "NOTE" not in proc.stderr  # the agent has to be picked: init says how
    ours = json.loads((agents_dir / "leanctx.json").read_text())
    assert ours["name"] == "leanctx" and ours["tools"] == ["*"] and ours["includeMcpJson"] is True
    command = wrapper.command(wrapper.wrapper_path(data_dir), "kiro", "agentSpawn")
    assert ours["hooks"]["agentSpawn"] == [{"command": command, "timeout_ms": 10000}]
    assert set(ours["hooks"]) == {"agentSpawn", "userPromptSubmit", "stop"}
    assert (agents_dir / "mine.json").read_text() == MINE
    mcp = json.loads((home / ".kiro" / "settings" / "mcp.json").read_text())
    assert mcp["mcpServers"]["leanctx"]["args"] == ["mcp"]
    assert run_cli("uninstall", "--agent", "kiro").returncode == 0
    assert sorted(p.name for p in agents_dir.iterdir()) == ["mine.json"] and (agents_dir / "mine.json").read_text() == MINE
    assert not (home / ".kiro" / "settings").exists()


def test_uninstall_keeps_what_the_user_added_to_our_agent(home: Path) -> None:
    assert run_cli("init", "--agent", "kiro").returncode == 0
    path = home / ".kiro" / "agents" / "leanctx.json"
    value = json.loads(path.read_text())
    value["model"] = "claude-sonnet-4"
    path.write_text(json.dumps(value, indent=2) + "\n")
    assert run_cli("uninstall", "--agent", "kiro").returncode == 0
    left = json.loads(path.read_text())
    assert left["model"] == "claude-sonnet-4" and "leanctx-hook" not in path.read_text()


def test_an_agent_file_kiro_would_not_load_is_refused_untouched(home: Path) -> None:
    path = home / ".kiro" / "agents" / "leanctx.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"name": "leanctx", "hooks": [')
    proc = run_cli("init", "--agent", "kiro")
    assert proc.returncode != 0 and f"{path}:1" in proc.stderr and "cannot parse" in proc.stderr
    assert path.read_text() == '{"name": "leanctx", "hooks": ['


def test_a_comment_in_our_agent_file_is_kept_and_flagged(home: Path) -> None:
    """Kiro does not load an agent file that is not valid JSON: init keeps the user's comment
    and says so (exit 1); doctor fails the file."""
    path = home / ".kiro" / "agents" / "leanctx.json"
    path.parent.mkdir(parents=True)
    path.write_text('{\n  // my note\n  "name": "leanctx"\n}\n')
    proc = run_cli("init", "--agent", "kiro")
    assert proc.returncode == 1 and "will not load" in proc.stderr and "line 2" in proc.stderr
    assert "// my note" in path.read_text()


def test_project_agent_and_mcp_file(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "repo"
    project.mkdir()
    assert run_cli("init", "--agent", "kiro", "--project", str(project)).returncode == 0
    ours = json.loads((project / ".kiro" / "agents" / "leanctx.json").read_text())
    assert ours["hooks"]["stop"] == [{"command": "leanctx-hook kiro stop", "timeout_ms": 10000}]
    assert json.loads((project / ".kiro" / "settings" / "mcp.json").read_text())["mcpServers"]["leanctx"]["command"] == "leanctx"
    assert run_cli("uninstall", "--agent", "kiro", "--project", str(project)).returncode == 0
    assert list(project.iterdir()) == []


def test_the_wrapper_publishes_only_under_a_session_id(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "kiro").returncode == 0
    for name, event in (("agentSpawn.json", "agentSpawn"), ("userPromptSubmit.json", "userPromptSubmit"), ("stop.json", "stop")):
        proc = run_hook(data_dir, event, (DOC / name).read_bytes())
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert not (data_dir / "conversations" / "kiro").exists()
    for name, event in (("userPromptSubmit.session_id.json", "userPromptSubmit"), ("stop.session_id.json", "stop")):
        proc = run_hook(data_dir, event, (DOC / name).read_bytes())
        assert (proc.returncode, proc.stdout) == (0, b"")
    record = json.loads(Path(record_path(data_dir, "kiro", "abc123-def456-789")).read_text())
    assert record["last_event"] == "stop" and record["cwd"] == "/current/working/directory"
    assert "response" not in json.dumps(record)  # the coding profile records ids only


def test_doctor_passes_and_says_which_agent_runs_the_hooks(home: Path) -> None:
    assert run_cli("init", "--agent", "kiro").returncode == 0
    proc = run_cli("doctor", "--agent", "kiro", "--json")
    assert proc.returncode == 0, proc.stdout
    checks = {c["name"]: c for c in json.loads(proc.stdout)["agents"][0]["checks"]}
    assert checks["kiro runs the leanctx agent"]["status"] == "info"
    assert "kiro-cli chat --agent leanctx" in checks["kiro runs the leanctx agent"]["detail"]
    assert checks["mcp server"]["status"] == "ok" and checks["config"]["status"] == "ok"
