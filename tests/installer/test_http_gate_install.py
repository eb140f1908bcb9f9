"""`leanctx init --agent claude` writes the ctx_read gate as an http hook; uninstall takes it out.

Through the real CLI on real files: the entry names this install's port and secret, an older
install's command-hook gate is upgraded in place, uninstall restores the bytes, and every other
case (project files, the bot and guard profiles, other hosts) keeps command hooks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

READ = "mcp__leanctx__ctx_read"

# An older install: the read gate as a command hook, beside the user's own pre-tool hook.
OLD_SETTINGS = """{
  "model": "opus",
  "hooks": {
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "/usr/local/bin/guard" } ] },
      { "matcher": "mcp__leanctx__ctx_read", "hooks": [ { "type": "command", "command": "'/old/data/bin/leanctx-hook' claude PreToolUse --read-gate", "timeout": 10 } ] }
    ]
  }
}
"""
USER_SETTINGS = """{
  "model": "opus",
  "hooks": {
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "/usr/local/bin/guard" } ] }
    ]
  }
}
"""


def settings(home: Path) -> Path:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def gate_groups(value: dict) -> list:
    return [g for g in value["hooks"]["PreToolUse"] if g.get("matcher") == READ]


def expected_handler(data_dir: Path) -> dict:
    config = json.loads((data_dir / "read_gate.json").read_text())
    return {"type": "http", "url": f"http://127.0.0.1:{config['port']}/leanctx/read-gate",
            "headers": {"X-Leanctx-Secret": config["secret"]}, "timeout": 2}


def test_init_writes_the_http_gate_with_a_private_per_install_secret(home: Path, data_dir: Path) -> None:
    path = settings(home)
    assert run_cli("init", "--agent", "claude").returncode == 0
    value = json.loads(path.read_text())
    assert gate_groups(value) == [{"matcher": READ, "hooks": [expected_handler(data_dir)]}]
    assert (data_dir / "read_gate.json").stat().st_mode & 0o777 == 0o600
    # the other events stay command hooks (the bot's turns are never left to an http hook)
    assert all(h["type"] == "command" for e, gs in value["hooks"].items() if e != "PreToolUse" for g in gs for h in g["hooks"])
    before = path.read_bytes()
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert path.read_bytes() == before  # the same port and secret again


def test_an_old_command_gate_is_upgraded_in_place_and_uninstall_restores_the_users_file(home: Path, data_dir: Path) -> None:
    path = settings(home)
    path.write_text(OLD_SETTINGS)
    assert run_cli("init", "--agent", "claude").returncode == 0
    value = json.loads(path.read_text())
    pre = value["hooks"]["PreToolUse"]
    assert pre[0] == json.loads(OLD_SETTINGS)["hooks"]["PreToolUse"][0]  # the user's, untouched
    assert pre[1:] == [{"matcher": READ, "hooks": [expected_handler(data_dir)]}]  # same place, now http
    assert "leanctx-hook' claude PreToolUse" not in path.read_text()
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert json.loads(path.read_text())["hooks"]["PreToolUse"] == json.loads(USER_SETTINGS)["hooks"]["PreToolUse"]


def test_uninstall_takes_the_http_gate_out_byte_for_byte(home: Path, data_dir: Path) -> None:
    path = settings(home)
    path.write_text(USER_SETTINGS)
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert "read-gate" in path.read_text()
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert path.read_text() == USER_SETTINGS


def test_a_gate_of_another_data_dir_is_recognised_as_ours(home: Path, data_dir: Path) -> None:
    path = settings(home)
    foreign = json.loads(USER_SETTINGS)
    foreign["hooks"]["PreToolUse"].append({"matcher": READ, "hooks": [{"type": "http", "url": "http://127.0.0.1:23456/leanctx/read-gate",
                                                                      "headers": {"X-Leanctx-Secret": "a" * 64}, "timeout": 2}]})
    path.write_text(json.dumps(foreign, indent=2))
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert gate_groups(json.loads(path.read_text())) == [{"matcher": READ, "hooks": [expected_handler(data_dir)]}]


def test_a_users_own_http_hook_is_not_taken_for_ours(home: Path, data_dir: Path) -> None:
    path = settings(home)
    mine = json.loads(USER_SETTINGS)
    mine["hooks"]["PreToolUse"].append({"matcher": READ, "hooks": [{"type": "http", "url": "http://127.0.0.1:8080/audit"}]})
    path.write_text(json.dumps(mine, indent=2))
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert json.loads(path.read_text()) == mine


@pytest.mark.parametrize("extra", [["--bot"], ["--guard"]])
def test_the_bot_and_guard_profiles_keep_command_hooks(home: Path, data_dir: Path, extra: list) -> None:
    path = settings(home)
    assert run_cli("init", "--agent", "claude", *extra).returncode == 0
    value = json.loads(path.read_text())
    handlers = [h for gs in value["hooks"].values() for g in gs for h in g["hooks"]]
    assert handlers and all(h["type"] == "command" for h in handlers)
    assert any("--read-gate" in h["command"] for h in handlers)


def test_project_files_keep_the_command_gate(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    assert run_cli("init", "--agent", "claude", "--project", str(project)).returncode == 0
    text = (project / ".claude" / "settings.local.json").read_text()
    assert "--read-gate" in text and '"http"' not in text and not (data_dir / "read_gate.json").exists()


@pytest.mark.parametrize("agent", ["codex", "codebuddy"])
def test_other_hosts_keep_the_command_gate(home: Path, data_dir: Path, agent: str) -> None:
    (home / f".{agent}").mkdir()
    cp = run_cli("init", "--agent", agent)
    assert cp.returncode == 0, cp.stderr
    assert not (data_dir / "read_gate.json").exists()


def test_doctor_checks_the_gate_entry_and_the_endpoint(home: Path, data_dir: Path) -> None:
    path = settings(home)
    assert run_cli("init", "--agent", "claude").returncode == 0

    def checks() -> dict:
        report = json.loads(run_cli("doctor", "--agent", "claude", "--json").stdout)
        (agent,) = [a for a in report["agents"] if a["agent"] == "claude"]
        return {c["name"]: c for c in agent["checks"]}

    found = checks()
    assert found["event PreToolUse"]["status"] == "ok"
    assert found["read gate"]["status"] == "info"  # no daemon running: nothing to ask yet
    assert run_cli("serve", "--detach").returncode == 0
    try:
        assert checks()["read gate"]["status"] == "ok"
        value = json.loads(path.read_text())
        gate_groups(value)[0]["hooks"][0]["headers"]["X-Leanctx-Secret"] = "b" * 64  # a stale secret
        path.write_text(json.dumps(value, indent=2))
        assert checks()["event PreToolUse"]["status"] == "fail"
    finally:
        run_cli("stop")


@pytest.mark.parametrize("kind", ["folder", "fifo", "garbage"])
def test_a_hostile_gate_file_is_refused_or_replaced_never_a_traceback(home: Path, data_dir: Path, kind: str) -> None:
    import os

    path = settings(home)
    data_dir.mkdir(parents=True, exist_ok=True)
    gate = data_dir / "read_gate.json"
    if kind == "folder":
        gate.mkdir()
    elif kind == "fifo":
        os.mkfifo(gate)
    else:
        gate.write_text('{"port": "80", "secret": 1}')
    cp = run_cli("init", "--agent", "claude")
    if kind == "garbage":  # a broken file of ours: replaced by new settings
        assert cp.returncode == 0, cp.stderr
        assert gate_groups(json.loads(path.read_text())) == [{"matcher": READ, "hooks": [expected_handler(data_dir)]}]
        return
    assert cp.returncode == 2 and "read_gate.json is not a regular file" in cp.stderr and "Traceback" not in cp.stderr
    assert not path.exists()  # nothing half-written
    # doctor on an install whose gate file went bad afterwards: a failed check, no traceback
    gate.rmdir() if kind == "folder" else gate.unlink()
    assert run_cli("init", "--agent", "claude").returncode == 0
    gate.unlink()
    gate.mkdir() if kind == "folder" else os.mkfifo(gate)
    cp = run_cli("doctor", "--agent", "claude")
    assert cp.returncode == 1 and "read_gate.json is not a regular file" in cp.stdout and "Traceback" not in cp.stderr
