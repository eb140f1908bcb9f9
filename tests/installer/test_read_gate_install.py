"""Claude Code's ctx_read gate is a command hook; an old http gate entry is upgraded, removed, flagged.

Through the real CLI on real files. An older leanctx wrote the gate as a `type: "http"` hook to a
127.0.0.1 port that any local account can bind while the daemon is down (and the host obeys what
answers). Now: init writes a command hook through the wrapper and replaces the old entry in place
(deleting its port-and-secret file), uninstall still takes an old entry out, and doctor reports an
old entry as a failure whose fix works, without ever connecting to its port (or any TCP port).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx.installer import wrapper
from tests.conftest import run_cli

READ = "mcp__leanctx__ctx_read"

USER_SETTINGS = """{
  "model": "opus",
  "hooks": {
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "/usr/local/bin/guard" } ] }
    ]
  }
}
"""


def old_http_settings(port: int) -> str:
    """The user's settings with the read gate an older init wrote: an http hook with a secret."""
    user_line = '{ "matcher": "Bash", "hooks": [ { "type": "command", "command": "/usr/local/bin/guard" } ] }\n'
    old_gate = (f'{{ "matcher": "{READ}", "hooks": [ {{ "type": "http", "url": "http://127.0.0.1:{port}/leanctx/read-gate", '
                f'"headers": {{ "X-Leanctx-Secret": "{"a" * 64}" }}, "timeout": 2 }} ] }}\n')
    text = USER_SETTINGS.replace(user_line, user_line[:-1] + ",\n      " + old_gate)
    assert json.loads(text)["hooks"]["PreToolUse"][1]["hooks"][0]["type"] == "http"
    return text


def settings(home: Path) -> Path:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


GATE_MATCHER = f"{READ}|Read|Bash"  # the same entry answers Claude Code's built-in Read (hooks/readgate.py)


def gate_groups(value: dict) -> list:
    return [g for g in value["hooks"]["PreToolUse"] if g.get("matcher") in (READ, GATE_MATCHER)]


def command_gate(data_dir: Path) -> dict:
    return {"matcher": GATE_MATCHER, "hooks": [{"type": "command", "timeout": 10, "command": wrapper.command(
        wrapper.wrapper_path(data_dir), "claude", "PreToolUse", ("--read-gate", "--builtin-read"))}]}


def old_gate_file(data_dir: Path, port: int) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir / "read_gate.json"
    path.write_text(json.dumps({"port": port, "secret": "a" * 64}))
    path.chmod(0o600)
    return path


def test_init_writes_the_read_gate_as_a_command_hook_and_no_http_entry(home: Path, data_dir: Path) -> None:
    path = settings(home)
    assert run_cli("init", "--agent", "claude").returncode == 0
    value = json.loads(path.read_text())
    assert gate_groups(value) == [command_gate(data_dir)]
    assert all(h["type"] == "command" for gs in value["hooks"].values() for g in gs for h in g["hooks"])
    assert not (data_dir / "read_gate.json").exists()


def test_init_replaces_an_old_http_gate_in_place_and_deletes_its_secret_file(home: Path, data_dir: Path) -> None:
    path = settings(home)
    old = old_http_settings(23456)
    path.write_text(old)
    gate_file = old_gate_file(data_dir, 23456)
    assert run_cli("init", "--agent", "claude").returncode == 0
    text = path.read_text()
    value = json.loads(text)
    pre = value["hooks"]["PreToolUse"]
    assert pre[0] == json.loads(USER_SETTINGS)["hooks"]["PreToolUse"][0]  # the user's, untouched
    assert pre[1:] == [command_gate(data_dir)]  # same place, now a command
    assert '{ "matcher": "Bash", "hooks": [ { "type": "command", "command": "/usr/local/bin/guard" } ] }' in text
    assert "127.0.0.1" not in text and "X-Leanctx-Secret" not in text and not gate_file.exists()
    # uninstall takes our entry out and never restores the old one (the file as it was before this init)
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    text = path.read_text()
    assert json.loads(text) == json.loads(USER_SETTINGS) and "read-gate" not in text


def test_uninstall_takes_an_old_http_gate_out(home: Path, data_dir: Path) -> None:
    path = settings(home)
    path.write_text(old_http_settings(23456))
    gate_file = old_gate_file(data_dir, 23456)
    cp = run_cli("uninstall", "--agent", "claude")
    assert cp.returncode == 0, cp.stderr
    text = path.read_text()
    assert json.loads(text) == json.loads(USER_SETTINGS) and "read-gate" not in text
    assert '{ "matcher": "Bash", "hooks": [ { "type": "command", "command": "/usr/local/bin/guard" } ] }' in text
    assert not gate_file.exists()


def test_a_users_own_http_hook_is_not_taken_for_ours(home: Path, data_dir: Path) -> None:
    path = settings(home)
    mine = json.loads(USER_SETTINGS)
    mine["hooks"]["PreToolUse"].append({"matcher": READ, "hooks": [{"type": "http", "url": "http://127.0.0.1:8080/audit"}]})
    path.write_text(json.dumps(mine, indent=2))
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert {"type": "http", "url": "http://127.0.0.1:8080/audit"} in [h for g in gate_groups(json.loads(path.read_text())) for h in g["hooks"]]
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert json.loads(path.read_text()) == mine


# Run doctor with an audit hook that records every connect() to a TCP/UDP address (any port).
_AUDITED = """
import json, os, runpy, socket, sys
seen = []
def hook(event, args):
    if event == "socket.connect" and args[0].family in (socket.AF_INET, socket.AF_INET6):
        seen.append(repr(args[1]))
sys.addaudithook(hook)
sys.argv = ["leanctx"] + sys.argv[1:]
try:
    runpy.run_module("leanctx", run_name="__main__")
finally:
    with open(os.environ["CONNECTS_OUT"], "w") as f:
        json.dump(seen, f)
"""


def doctor_audited(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list]:
    out = tmp_path / "connects.json"
    cp = subprocess.run([sys.executable, "-c", _AUDITED, "doctor", "--agent", "claude", *args], capture_output=True, text=True,
                        env={**os.environ, "CONNECTS_OUT": str(out)}, timeout=120)
    return cp, json.loads(out.read_text())


def test_doctor_fails_an_old_http_gate_without_connecting_and_its_fix_works(home: Path, data_dir: Path, tmp_path: Path) -> None:
    """A listener holds the old entry's port (as a squatter would) while our daemon runs: doctor
    reports the entry, with a fix that works, and neither doctor nor anything it runs connects
    to that port; doctor's own process connects to no TCP/UDP address at all."""
    path = settings(home)
    assert run_cli("init", "--agent", "claude").returncode == 0
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(16)
    squatter.setblocking(False)
    port = squatter.getsockname()[1]
    try:
        value = json.loads(path.read_text())
        gate_groups(value)[0]["hooks"] = [{"type": "http", "url": f"http://127.0.0.1:{port}/leanctx/read-gate",
                                           "headers": {"X-Leanctx-Secret": "a" * 64}, "timeout": 2}]
        path.write_text(json.dumps(value, indent=2))
        old_gate_file(data_dir, port)
        assert run_cli("serve", "--detach").returncode == 0
        cp, connects = doctor_audited(tmp_path, "--json")
        assert cp.returncode == 1, cp.stderr
        (agent,) = [a for a in json.loads(cp.stdout)["agents"] if a["agent"] == "claude"]
        gate = {c["name"]: c for c in agent["checks"]}["event PreToolUse"]
        assert gate["status"] == "fail" and f"old http read gate http://127.0.0.1:{port}/" in gate["detail"]
        assert gate["fix"].startswith("leanctx init --agent claude")
        assert "a" * 64 not in cp.stdout  # the secret is never repeated
        cp, connects_text = doctor_audited(tmp_path)
        assert "[FAIL] event PreToolUse" in cp.stdout and "fix: leanctx init --agent claude" in cp.stdout
        assert connects == [] and connects_text == []
        with pytest.raises(BlockingIOError):  # nothing ever connected to the squatted port
            squatter.accept()
        # the fix as printed
        assert run_cli("init", "--agent", "claude").returncode == 0
        assert gate_groups(json.loads(path.read_text())) == [command_gate(data_dir)]
        cp, connects = doctor_audited(tmp_path, "--json")
        assert cp.returncode == 0, cp.stdout
        assert connects == []
        with pytest.raises(BlockingIOError):
            squatter.accept()
    finally:
        squatter.close()
        run_cli("stop")


def read_gate_checks(home: Path) -> dict:
    cp = run_cli("doctor", "--agent", "claude", "--json")
    (agent,) = [a for a in json.loads(cp.stdout)["agents"] if a["agent"] == "claude"]
    return {"exit": cp.returncode, **{c["name"]: c for c in agent["checks"]}}


def test_the_built_in_read_gate_is_wired_checked_switched_off_and_uninstalled_byte_identically(home: Path, data_dir: Path) -> None:
    path = settings(home)
    path.write_text(USER_SETTINGS)
    original = path.read_bytes()
    assert run_cli("init", "--agent", "claude").returncode == 0
    value = json.loads(path.read_text())
    assert gate_groups(value) == [command_gate(data_dir)]
    post = value["hooks"]["PostToolUse"]
    assert post == [{"matcher": "Read|Bash", "hooks": [{"type": "command", "timeout": 10, "command": wrapper.command(
        wrapper.wrapper_path(data_dir), "claude", "PostToolUse", ("--builtin-read",))}]}]
    checks = read_gate_checks(home)
    assert checks["exit"] == 0
    assert checks["event PostToolUse"]["status"] == "ok" and checks["smoke PostToolUse"]["status"] == "ok"
    assert "Read and Bash gated like ctx_read" in checks["built-in reader gate"]["detail"]
    # switched off at init: the pre-tool entry answers ctx_read alone, no post-tool entry
    assert run_cli("init", "--agent", "claude", "--no-builtin-gate").returncode == 0
    value = json.loads(path.read_text())
    assert [g["matcher"] for g in gate_groups(value)] == [READ] and "PostToolUse" not in value["hooks"]
    assert "--builtin-read" not in path.read_text()
    checks = read_gate_checks(home)
    assert checks["exit"] == 0 and "not gated" in checks["built-in reader gate"]["detail"]
    assert "event PostToolUse" not in checks
    # doctor --fix keeps the install as it was made (no gate)
    assert run_cli("doctor", "--agent", "claude", "--fix").returncode == 0
    assert "--builtin-read" not in path.read_text()
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert gate_groups(json.loads(path.read_text())) == [command_gate(data_dir)]
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert path.read_bytes() == original


def test_the_built_in_read_gate_rides_on_the_guard_entry_on_the_hosts_that_have_it() -> None:
    from leanctx import agents

    claude = agents.get("claude")
    wired = {(spec.name, spec.matcher): flags for spec, flags in claude.profile_events(guard=True, read_gate=True, builtin_read=True)}
    assert wired[("PreToolUse", None)] == ("--guard", "--read-gate", "--builtin-read")
    assert wired[("PostToolUse", "Read|Bash")] == ("--builtin-read",)
    assert not any(name == "PreToolUse" and matcher for name, matcher in wired)
    # no read gate (init --no-mcp): no daemon to ask, so no built-in gate either
    assert all("--builtin-read" not in flags for _, flags in claude.profile_events(read_gate=False, builtin_read=True))
    # Codex: its shell tool (`Bash` in its hooks) on the read gate's own entry, and a post-tool entry
    codex = agents.get("codex")
    wired = {(spec.name, spec.matcher): flags for spec, flags in codex.profile_events(read_gate=True, builtin_read=True)}
    assert wired[("PreToolUse", "mcp__leanctx__ctx_read|Bash")] == ("--read-gate", "--builtin-read")
    assert wired[("PostToolUse", "Bash")] == ("--builtin-read",)
    assert ("PreToolUse", "mcp__leanctx__ctx_read") in dict(((s.name, s.matcher), f) for s, f in codex.profile_events(read_gate=True))
    # Copilot's built-in tools pass preToolUse (no matchers there), its read gate preMcpToolCall
    copilot = [(s.name, f) for s, f in agents.get("copilot").profile_events(read_gate=True, builtin_read=True)]
    assert ("preToolUse", ("--builtin-read",)) in copilot and ("preMcpToolCall", ("--read-gate",)) in copilot
    # CodeBuddy's Read and Bash, Droid's Read and Execute: on the ctx_read gate's entry and a post-tool one
    for name, tools, read in (("codebuddy", "Read|Bash", "mcp__leanctx__ctx_read"), ("droid", "Read|Execute", "leanctx___ctx_read")):
        wired = {(spec.name, spec.matcher): flags for spec, flags in agents.get(name).profile_events(read_gate=True, builtin_read=True)}
        assert wired[("PreToolUse", f"{read}|{tools}")] == ("--read-gate", "--builtin-read"), name
        assert wired[("PostToolUse", tools)] == ("--builtin-read",), name
    # Gemini CLI: read_file and run_shell_command, and invoke_agent (a subagent's window) on both events
    gemini = {(spec.name, spec.matcher): flags for spec, flags in agents.get("gemini").profile_events(read_gate=True, builtin_read=True)}
    assert gemini[("BeforeTool", "mcp_leanctx_ctx_read|read_file|run_shell_command|invoke_agent")] == ("--read-gate", "--builtin-read")
    assert gemini[("AfterTool", "read_file|run_shell_command|invoke_agent")] == ("--builtin-read",)
    guarded = {(spec.name, spec.matcher): flags for spec, flags in agents.get("gemini").profile_events(guard=True, read_gate=True, builtin_read=True)}
    assert guarded[("BeforeTool", None)] == ("--guard", "--read-gate", "--builtin-read")
    # the guard alone sees invoke_agent on BeforeTool too (a subagent's window): AfterTool closes it
    guard_only = {(spec.name, spec.matcher): flags for spec, flags in agents.get("gemini").profile_events(guard=True, read_gate=True)}
    assert guard_only[("AfterTool", "invoke_agent")] == ("--guard",)
    qwen = {(spec.name, spec.matcher): flags for spec, flags in agents.get("qwen").profile_events(read_gate=True, builtin_read=True)}
    assert qwen[("PreToolUse", "mcp__leanctx__ctx_read|read_file|run_shell_command")] == ("--read-gate", "--builtin-read")
    assert qwen[("PostToolUse", "read_file|run_shell_command")] == ("--builtin-read",)
    for name in ("gemini", "qwen"):  # without the read gate (init --no-mcp): neither
        assert all("--builtin-read" not in flags for _, flags in agents.get(name).profile_events(read_gate=False, builtin_read=True))
