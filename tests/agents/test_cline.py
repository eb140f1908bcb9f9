"""Cline CLI: the payloads recorded from Cline 3.0.65 (tests/fixtures/payloads/cline), our hook
files run exactly as Cline runs them (an executable, the payload on stdin), and init/uninstall of
those files through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.base import SESSION_END, SESSION_START, STOP
from tests.conftest import PAYLOADS, run_cli

CL = PAYLOADS / "cline"
AGENT = agents.get("cline")
ROOT = "1796104789737_lkowb"


def recorded(name: str) -> dict:
    return json.loads((CL / name).read_text())


def test_recorded_payloads_normalize_to_cline_s_session() -> None:
    start = AGENT.normalize("TaskStart", recorded("TaskStart.json"))
    assert (start.kind, start.conversation_id, start.session_id, start.source) == (SESSION_START, ROOT, ROOT, "startup")
    assert start.turn_id == "conv_1796104790689_ibhvf4r" and start.cwd == "/home/user/work/proj"
    assert start.transcript_path is None and start.subagent_id is None  # Cline has no transcript path
    done = AGENT.normalize("TaskComplete", recorded("TaskComplete.json"))
    assert (done.kind, done.conversation_id, done.reply) == (STOP, ROOT, "The file says hello. DONE.")
    shutdown = AGENT.normalize("SessionShutdown", recorded("SessionShutdown.cancel.json"))
    assert (shutdown.kind, shutdown.conversation_id) == (SESSION_END, "1796104816155_yz825")
    spawned = AGENT.normalize("TaskStart", dict(recorded("TaskStart.json"), parent_agent_id="agent_parent"))
    assert spawned.conversation_id == ROOT and spawned.subagent_id == "agent_1796104790601_2ngpta"
    # the replay bench hands a recorded payload's roots over as workspace_roots
    assert AGENT.normalize("TaskStart", {"workspace_roots": ["/r"], "sessionContext": {"rootSessionId": "x"}}).cwd == "/r"


@pytest.mark.parametrize("body", [{}, {"sessionContext": "x"}, {"sessionContext": {"rootSessionId": 5}}, {"workspaceRoots": "x"},
                                  {"turn": [], "workspaceInfo": 3}])
def test_ill_typed_payloads_name_nothing(body: dict) -> None:
    for spec in AGENT.events:
        ev = AGENT.normalize(spec.name, body)
        assert ev.conversation_id is None and ev.cwd is None and ev.workspace_roots == []


def test_cline_never_gets_an_answer_it_could_read_as_cancel() -> None:
    for spec in AGENT.events:
        assert AGENT.no_opinion(spec.name) == "" and AGENT.context_output(spec.name, "ctx") == ""
        assert AGENT.check_output(spec.name, '{"cancel": true}') is not None
    assert AGENT.guard_event is None and AGENT.read_gate_event is None


def run_hook_file(path: Path, payload: dict, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(path)], input=json.dumps(payload), capture_output=True, text=True, timeout=60,
                          env=env or dict(os.environ))


def test_hook_files_publish_the_recorded_session_and_print_nothing(home: Path, data_dir: Path) -> None:
    proc = run_cli("init", "--agent", "cline", "--bot")  # the bot profile would answer if Cline could read it
    assert proc.returncode == 0 and "wired 6 events" in proc.stdout and "~/.cline/hooks" in proc.stdout, proc
    hooks = home / ".cline" / "hooks"
    for event, fixture in (("TaskStart", "TaskStart.json"), ("TaskComplete", "TaskComplete.json")):
        ran = run_hook_file(hooks / event, recorded(fixture))
        assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", ""), ran
    record = json.loads(next((data_dir / "conversations" / "cline").glob("*.json")).read_text())
    assert record["conversation_id"] == ROOT and record["last_event"] == "TaskComplete" and record["turn_id"].startswith("conv_")
    # leanctx gone: the hook file still exits 0 and prints nothing (Cline goes on)
    (data_dir / "bin" / "leanctx-hook").unlink()
    ran = run_hook_file(hooks / "TaskStart", recorded("TaskStart.json"))
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


def test_init_twice_is_once_and_uninstall_keeps_the_users_hooks_and_servers(home: Path, data_dir: Path) -> None:
    hooks = home / ".cline" / "hooks"
    hooks.mkdir(parents=True)
    theirs = hooks / "PostToolUse"
    theirs.write_text("#!/bin/sh\nexit 0\n")
    theirs.chmod(0o755)
    settings = home / ".cline" / "data" / "settings" / "cline_mcp_settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{\n  "mcpServers": {\n    "mine": {"command": "x", "args": [], "disabled": false}\n  }\n}\n')
    before = {p: p.read_bytes() for p in (theirs, settings)}
    assert run_cli("init", "--agent", "cline").returncode == 0
    snapshot = {p: p.read_bytes() for p in sorted(hooks.iterdir())} | {settings: settings.read_bytes()}
    assert all(os.access(p, os.X_OK) for p in snapshot if p.parent == hooks)
    again = run_cli("init", "--agent", "cline")
    assert again.returncode == 0 and "already wired" in again.stdout
    assert {p: p.read_bytes() for p in sorted(hooks.iterdir())} | {settings: settings.read_bytes()} == snapshot
    assert run_cli("uninstall", "--agent", "cline").returncode == 0
    assert {p: p.read_bytes() for p in (theirs, settings)} == before
    assert sorted(os.listdir(hooks)) == ["PostToolUse"]


def test_a_hook_file_of_the_users_under_an_event_name_is_refused_untouched(home: Path, data_dir: Path) -> None:
    hooks = home / ".cline" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "TaskComplete").write_text("#!/bin/sh\necho mine\n")
    proc = run_cli("init", "--agent", "cline")
    assert proc.returncode == 2 and "TaskComplete: exists and is not leanctx's" in proc.stderr and "Traceback" not in proc.stderr
    assert os.listdir(hooks) == ["TaskComplete"] and not (home / ".cline" / "data").exists()


def test_a_hook_file_that_lost_its_exec_bit_fails_doctor_and_init_repairs_it(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "cline").returncode == 0
    hook = home / ".cline" / "hooks" / "TaskComplete"
    hook.chmod(0o644)
    report = json.loads(run_cli("doctor", "--agent", "cline", "--json").stdout)["agents"][0]
    assert not report["ok"] and any("not executable" in c["detail"] for c in report["checks"])
    assert run_cli("init", "--agent", "cline").returncode == 0 and os.access(hook, os.X_OK)


def test_project_install_writes_no_mcp_entry_and_guard_says_it_cannot_deny(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    proc = run_cli("init", "--agent", "cline", "--project", str(project), "--guard")
    assert proc.returncode == 0 and "cannot deny a single tool call" in proc.stderr, proc
    assert sorted(os.listdir(project / ".cline")) == ["hooks", "rules"]
    assert "leanctx-hook cline TaskStart" in (project / ".cline" / "hooks" / "TaskStart").read_text()
    assert not (home / ".cline").exists()
    assert run_cli("uninstall", "--agent", "cline", "--project", str(project)).returncode == 0
    assert os.listdir(project) == []
