"""Cursor and Continue CLI also run the hooks in Claude Code's settings files, with their own
payloads (hosts-codebuddy-cline-droid-more.md §4, §7; Continue: src/hooks/hookConfig.ts and
hookRunner.ts of @continuedev/cli 1.5.47). Our Claude hook must file a Cursor conversation under
Cursor, publish nothing for Continue, and fold one Cursor event once when our Cursor hooks fire
too. Each case runs the command `leanctx init` wrote, the way the host does (`/bin/sh -c`,
payload on stdin), with the environment that host gives its hooks.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from leanctx.hooks.publish import read_json, record_path
from tests.conftest import PAYLOADS, REPO, run_cli

CURSOR = REPO / "tests" / "fixtures" / "documented" / "cursor"
CLAUDE_RECORDED = REPO / "tests" / "e2e" / "recorded_payloads" / "claude"
# what each host puts in its hooks' environment (Claude Code: HOSTS_VERIFIED.md d; Cursor:
# hosts.md §4 "Env for hooks"; Continue: hookRunner.ts executeCommandHook)
HOST_VARS = ("CLAUDE_CODE_SESSION_ID", "CLAUDECODE", "CLAUDE_PROJECT_DIR", "CURSOR_VERSION", "CURSOR_PROJECT_DIR",
             "CURSOR_TRANSCRIPT_PATH", "CONTINUE_PROJECT_DIR", "COPILOT_CLI", "COPILOT_PROJECT_DIR")


def cursor_payload(event: str, project: Path) -> dict:
    body = json.loads((CURSOR / f"{event}.json").read_text())
    body["workspace_roots"] = [str(project)]
    return body


def cursor_env(project: Path) -> dict:
    return {"CURSOR_VERSION": "2.5.0", "CURSOR_PROJECT_DIR": str(project), "CLAUDE_PROJECT_DIR": str(project)}


def wired_command(config: Path, event: str, agent: str) -> str:
    """Our command for `event` in a host config init wrote (Claude's groups or Cursor's entries)."""
    entries = json.loads(config.read_text())["hooks"][event]
    commands = [h["command"] for e in entries for h in e.get("hooks", [e])]
    (ours,) = [c for c in commands if f" {agent} {event}" in c]
    return ours


def run_as_host(command: str, payload: dict, host_env: dict, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in HOST_VARS}
    env.update(host_env)
    return subprocess.run(["/bin/sh", "-c", command], input=json.dumps(payload).encode(), capture_output=True,
                          env=env, cwd=cwd, timeout=60)


def records(data_dir: Path) -> list[str]:
    base = data_dir / "conversations"
    return sorted(str(p.relative_to(base)) for p in base.glob("*/*.json")) if base.is_dir() else []


@pytest.fixture
def project(home: Path) -> Path:
    p = home / "proj"
    p.mkdir()
    return p


@pytest.fixture
def claude_settings(home: Path, project: Path) -> Path:
    proc = run_cli("init", "--agent", "claude", "--no-mcp")
    assert proc.returncode == 0, proc.stderr
    return home / ".claude" / "settings.json"


@pytest.mark.parametrize(("claude_event", "cursor_event", "answer"), [
    ("SessionStart", "sessionStart", ""),
    ("UserPromptSubmit", "beforeSubmitPrompt", '{"continue": true}'),
    ("PreCompact", "preCompact", ""),
    ("Stop", "stop", ""),
])
def test_cursor_running_our_claude_hook_files_it_under_cursor(claude_settings: Path, data_dir: Path, project: Path,
                                                              claude_event: str, cursor_event: str, answer: str) -> None:
    payload = cursor_payload(cursor_event, project)
    proc = run_as_host(wired_command(claude_settings, claude_event, "claude"), payload, cursor_env(project), project)
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout.decode() == answer  # Cursor's own answer for its event (one JSON object or nothing)
    conversation = payload["conversation_id"]
    assert records(data_dir) == [f"cursor/{conversation}.json"]
    record = read_json(record_path(data_dir, "cursor", conversation))
    assert record["agent"] == "cursor" and record["last_event"] == cursor_event
    assert record["workspace_roots"] == [str(project)]


def test_cursor_payload_named_with_claude_event_names_is_still_cursor(claude_settings: Path, data_dir: Path, project: Path) -> None:
    """Whatever name Cursor gives the event it maps, its payload gives it away (cursor_version)."""
    payload = cursor_payload("sessionStart", project) | {"hook_event_name": "SessionStart"}
    proc = run_as_host(wired_command(claude_settings, "SessionStart", "claude"), payload, {}, project)
    assert proc.returncode == 0
    assert records(data_dir) == [f"cursor/{payload['conversation_id']}.json"]


@pytest.mark.parametrize("level", ["user", "project"])
def test_our_cursor_and_claude_hooks_both_firing_fold_one_event_once(claude_settings: Path, home: Path, data_dir: Path,
                                                                     project: Path, level: str) -> None:
    args = ["init", "--agent", "cursor", "--no-mcp"] + (["--project", str(project)] if level == "project" else [])
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    cursor_hooks = (home if level == "user" else project) / ".cursor" / "hooks.json"
    for cursor_event, claude_event in (("sessionStart", "SessionStart"), ("preCompact", "PreCompact")):
        payload = cursor_payload(cursor_event, project)
        for command in (wired_command(claude_settings, claude_event, "claude"), wired_command(cursor_hooks, cursor_event, "cursor")):
            assert run_as_host(command, payload, cursor_env(project), project).returncode == 0
    conversation = payload["conversation_id"]
    assert records(data_dir) == [f"cursor/{conversation}.json"]
    assert read_json(record_path(data_dir, "cursor", conversation))["compactions"] == 1


def test_our_cursor_hook_for_another_event_or_an_odd_cursor_file_does_not_silence_the_claude_hook(
        claude_settings: Path, home: Path, data_dir: Path, project: Path) -> None:
    """Only our Cursor hook for the same event stands in; a FIFO where Cursor's hooks.json would
    be, a workspace root with a NUL, a missing one or a file, read as no hooks, at once (never a
    hang, never an error)."""
    proc = run_cli("init", "--agent", "cursor", "--no-mcp")
    assert proc.returncode == 0, proc.stderr
    user_hooks = home / ".cursor" / "hooks.json"
    config = json.loads(user_hooks.read_text())
    del config["hooks"]["preCompact"]
    user_hooks.write_text(json.dumps(config))
    (project / ".cursor").mkdir()
    os.mkfifo(project / ".cursor" / "hooks.json")
    payload = cursor_payload("preCompact", project)
    payload["workspace_roots"] += ["bad\u0000root", str(project / "missing"), str(home / ".cursor" / "hooks.json")]
    proc = run_as_host(wired_command(claude_settings, "PreCompact", "claude"), payload, cursor_env(project), project)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert read_json(record_path(data_dir, "cursor", payload["conversation_id"]))["compactions"] == 1
    assert not (data_dir / "logs" / "hooks.log").exists()


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"])
def test_continue_running_our_claude_hook_publishes_nothing(claude_settings: Path, data_dir: Path, project: Path, event: str) -> None:
    """Continue's payload is Claude's shape (getCommonFields: session_id, transcript_path, cwd,
    permission_mode, hook_event_name); its runner sets CONTINUE_PROJECT_DIR and CLAUDE_PROJECT_DIR."""
    payload = {"session_id": "5f0c3b1e-continue-session", "transcript_path": str(Path.home() / ".continue" / "sessions" / "5f0c3b1e.json"),
               "cwd": str(project), "permission_mode": "default", "hook_event_name": event}
    env = {"CONTINUE_PROJECT_DIR": str(project), "CLAUDE_PROJECT_DIR": str(project)}
    proc = run_as_host(wired_command(claude_settings, event, "claude"), payload, env, project)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert records(data_dir) == []


def test_copilot_running_our_claude_hook_publishes_nothing(claude_settings: Path, data_dir: Path, project: Path) -> None:
    """Copilot CLI runs a trusted project's .claude/settings.json hooks with snake_case payloads
    (recorded from 1.0.102: shared/fixtures/payloads/copilot/SessionStart.pascal.json) and sets
    COPILOT_CLI=1; its sessions are published by our Copilot hooks, not filed as Claude's."""
    payload = {"hook_event_name": "SessionStart", "session_id": "c941eb44-b512-433c-9a9a-6066be53110a",
               "timestamp": "2026-12-01T05:49:44.906Z", "cwd": str(project), "source": "new", "initial_prompt": "read a.txt"}
    env = {"COPILOT_CLI": "1", "COPILOT_PROJECT_DIR": str(project), "CLAUDE_PROJECT_DIR": str(project)}
    proc = run_as_host(wired_command(claude_settings, "SessionStart", "claude"), payload, env, project)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert records(data_dir) == []


@pytest.mark.parametrize("leaked", [{}, {"CONTINUE_PROJECT_DIR": "/elsewhere"}, {"CURSOR_VERSION": "3.1.0"}, {"COPILOT_CLI": "1"}])
def test_claude_code_itself_is_still_claude(claude_settings: Path, data_dir: Path, project: Path, leaked: dict) -> None:
    """A recorded Claude Code payload with the env Claude Code gives its hooks is Claude's,
    whatever a parent host left in the environment."""
    payload = json.loads((CLAUDE_RECORDED / "SessionStart.resume.json").read_text())
    env = {"CLAUDE_CODE_SESSION_ID": payload["session_id"], "CLAUDECODE": "1", "CLAUDE_PROJECT_DIR": str(project), **leaked}
    proc = run_as_host(wired_command(claude_settings, "SessionStart", "claude"), payload, env, project)
    assert proc.returncode == 0
    assert records(data_dir) == [f"claude/{payload['session_id']}.json"]


def test_claude_payload_without_the_session_variable_is_claude(claude_settings: Path, data_dir: Path, project: Path) -> None:
    """An older Claude Code that sets no CLAUDE_CODE_SESSION_ID: nothing else claims it."""
    payload = json.loads((PAYLOADS / "claude" / "UserPromptSubmit.json").read_text())
    proc = run_as_host(wired_command(claude_settings, "UserPromptSubmit", "claude"), payload, {}, project)
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert records(data_dir) == [f"claude/{payload['session_id']}.json"]
