"""The hook fast path, run the way a host runs it: the real wrapper script under `sh -c`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leanctx import agents, hooks
from leanctx.hooks.publish import read_json, record_path
from leanctx.installer import wrapper
from tests.conftest import PAYLOADS, REPO

DOCUMENTED = REPO / "tests" / "fixtures" / "documented"
RECORDED = [
    ("claude", p.stem, p) for p in sorted((PAYLOADS / "claude").glob("*.json")) if p.stem not in ("PreToolUse", "PostToolUse")
] + [("codex", p.stem, p) for p in sorted((PAYLOADS / "codex").glob("*.json"))] + [
    # recorded from Gemini CLI 0.61.0 and Qwen Code 0.15.10: every event we wire, its variants too
    (host, p.stem.split(".")[0], p) for host in ("gemini", "qwen") for p in sorted((PAYLOADS / host).glob("*.json"))
    if agents.get(host).event(p.stem.split(".")[0]) in agents.get(host).events
] + [
    # recorded by the offline runs (CodeBuddy Code 2.117.0, Factory Droid 0.215.0): the events we wire
    (host, p.stem.split(".")[0], p) for host in ("codebuddy", "droid") for p in sorted((PAYLOADS / host).glob("*.json"))
    if p.stem.split(".")[0] in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")
]
DOCUMENTED_CASES = [("cursor", p.stem, p) for p in sorted((DOCUMENTED / "cursor").glob("*.json"))]


@pytest.fixture
def hook_wrapper(data_dir: Path) -> Path:
    path = wrapper.wrapper_path(data_dir)
    path.parent.mkdir(parents=True)
    path.write_text(wrapper.render(data_dir))
    path.chmod(0o755)
    return path


def run_hook(wrapper_path: Path, agent: str, event: str, stdin: bytes, env: dict | None = None) -> subprocess.CompletedProcess:
    command = wrapper.command(wrapper_path, agent, event)
    return subprocess.run(["/bin/sh", "-c", command], input=stdin, capture_output=True, env=env or dict(os.environ), timeout=30)


@pytest.mark.parametrize(("agent", "event", "path"), RECORDED + DOCUMENTED_CASES, ids=lambda v: str(v) if not isinstance(v, Path) else "")
def test_real_payload_is_published(hook_wrapper: Path, data_dir: Path, agent: str, event: str, path: Path) -> None:
    body = json.loads(path.read_text())
    proc = run_hook(hook_wrapper, agent, event, path.read_bytes())
    assert proc.returncode == 0, proc.stderr
    expected_out = '{"continue": true}' if event == "beforeSubmitPrompt" else ""
    assert proc.stdout.decode() == expected_out
    conversation = body.get("parent_conversation_id") or body.get("conversation_id") or body["session_id"]
    record = read_json(record_path(data_dir, agent, conversation))
    assert record is not None, (data_dir / "logs" / "hooks.log").read_text() if (data_dir / "logs" / "hooks.log").exists() else ""
    assert record["agent"] == agent
    assert record["conversation_id"] == conversation
    assert record["last_event"] == event
    if body.get("transcript_path"):
        assert record["transcript_path"] == body["transcript_path"]
    if agent in ("claude", "codex", "codebuddy", "droid"):
        assert record["session_id"] == body["session_id"]
    slot = read_json(data_dir / "active_transcript.json")
    assert slot["conversation_id"] == conversation
    assert set(slot) >= {"transcript_path", "conversation_id", "session_id", "updated_at"}
    # the host process is the nearest non-shell ancestor: here, this pytest process
    assert record["host"]["pid"] == os.getpid()


def test_claude_session_lifecycle_record(hook_wrapper: Path, data_dir: Path) -> None:
    base = json.loads((PAYLOADS / "claude" / "SessionStart.json").read_text())
    sid = base["session_id"]

    def fire(event: str, **extra: object) -> None:
        body = dict(base, hook_event_name=event, **extra)
        assert run_hook(hook_wrapper, "claude", event, json.dumps(body).encode()).returncode == 0

    fire("SessionStart", source="startup")
    fire("SubagentStart", agent_id="a1", agent_type="Explore")
    fire("SubagentStart", agent_id="a2", agent_type="Plan")
    record = read_json(record_path(data_dir, "claude", sid))
    assert sorted(record["active_subagents"]) == ["a1", "a2"]
    assert record["active_subagents"]["a1"]["type"] == "Explore"
    fire("SubagentStop", agent_id="a1", agent_type="Explore", agent_transcript_path="/x/agent-a1.jsonl")
    fire("PreCompact", trigger="manual")
    fire("SessionStart", source="compact")
    record = read_json(record_path(data_dir, "claude", sid))
    assert sorted(record["active_subagents"]) == ["a2"]
    # PreCompact and SessionStart(compact) both count: over-counting is the safe direction
    assert record["compactions"] == 2
    assert record["last_compaction_at"]
    # the subagent's events must not replace the parent's transcript path
    assert record["transcript_path"] == base["transcript_path"]
    fire("Stop", last_assistant_message="ok")
    fire("SessionEnd", reason="other")
    record = read_json(record_path(data_dir, "claude", sid))
    assert record["stopped_at"] and record["ended_at"]
    assert record["active_subagents"] == {}


def test_cursor_subagent_is_recorded_under_parent(hook_wrapper: Path, data_dir: Path) -> None:
    for event in ("sessionStart", "subagentStart"):
        assert run_hook(hook_wrapper, "cursor", event, (DOCUMENTED / "cursor" / f"{event}.json").read_bytes()).returncode == 0
    record = read_json(record_path(data_dir, "cursor", "6f1c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6"))
    assert record["active_subagents"]["sa-7788"]["type"] == "explore"
    assert record["workspace_roots"] == ["/home/user/proj"]
    assert run_hook(hook_wrapper, "cursor", "subagentStop", (DOCUMENTED / "cursor" / "subagentStop.json").read_bytes()).returncode == 0
    assert read_json(record_path(data_dir, "cursor", "6f1c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6"))["active_subagents"] == {}


def test_cursor_transcript_from_env(hook_wrapper: Path, data_dir: Path) -> None:
    env = dict(os.environ, CURSOR_TRANSCRIPT_PATH="/t/x.jsonl")
    proc = run_hook(hook_wrapper, "cursor", "beforeSubmitPrompt", (DOCUMENTED / "cursor" / "beforeSubmitPrompt.json").read_bytes(), env)
    assert proc.returncode == 0
    assert read_json(record_path(data_dir, "cursor", "6f1c2a4e-1b2c-4d3e-8f90-a1b2c3d4e5f6"))["transcript_path"] == "/t/x.jsonl"


BAD_STDIN = {
    "empty": b"",
    "not json": b"hello, world",
    "json array": b"[1, 2, 3]",
    "json string": b'"x"',
    "binary": bytes(range(256)) * 40,
    "invalid utf-8": b'{"session_id": "\xff\xfe"}',
    "ten megabytes": b'{"session_id": "' + b"a" * (10 * 1024 * 1024) + b'"}',
    "truncated": b'{"session_id": "abc", "transcript_',
}


@pytest.mark.parametrize("name", list(BAD_STDIN))
@pytest.mark.parametrize(("agent", "event"), [("claude", "SessionStart"), ("cursor", "beforeSubmitPrompt"), ("codex", "UserPromptSubmit")])
def test_bad_stdin_exits_0_with_no_opinion(hook_wrapper: Path, data_dir: Path, name: str, agent: str, event: str) -> None:
    proc = run_hook(hook_wrapper, agent, event, BAD_STDIN[name])
    assert proc.returncode == 0
    assert proc.stdout.decode() == ('{"continue": true}' if agent == "cursor" else "")
    assert proc.stderr == b""
    log = (data_dir / "logs" / "hooks.log").read_text()
    assert log.count("\n") == 1 and f"{agent} {event}:" in log
    assert not (data_dir / "conversations").exists()


@pytest.mark.parametrize(("agent", "event"), [("nosuchhost", "SessionStart"), ("claude", "NoSuchEvent"), ("claude", "PreToolUse")])
def test_unknown_agent_or_event_exits_0_silently(hook_wrapper: Path, data_dir: Path, agent: str, event: str) -> None:
    proc = run_hook(hook_wrapper, agent, event, (PAYLOADS / "claude" / "SessionStart.json").read_bytes())
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert "hooks.log" in os.listdir(data_dir / "logs")
    assert not (data_dir / "conversations").exists()


def test_wrong_argument_count(hook_wrapper: Path, data_dir: Path) -> None:
    proc = subprocess.run([str(hook_wrapper), "claude"], input=b"{}", capture_output=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert "expected AGENT EVENT [FLAGS]" in (data_dir / "logs" / "hooks.log").read_text()


def test_stdin_left_open_does_not_hang(hook_wrapper: Path, data_dir: Path) -> None:
    """A host that never closes the pipe: the hook gives up after its read timeout."""
    proc = subprocess.Popen(["/bin/sh", "-c", wrapper.command(hook_wrapper, "claude", "SessionStart")], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write(b'{"session_id": "open-pipe", "hook_event_name": "SessionStart"}')
    proc.stdin.flush()
    try:
        assert proc.wait(timeout=20) == 0
    finally:
        proc.stdin.close()
    assert read_json(record_path(data_dir, "claude", "open-pipe")) is not None


def test_disabled_kill_switch(hook_wrapper: Path, data_dir: Path) -> None:
    env = dict(os.environ, LEANCTX_DISABLED="1")
    proc = run_hook(hook_wrapper, "cursor", "beforeSubmitPrompt", (DOCUMENTED / "cursor" / "beforeSubmitPrompt.json").read_bytes(), env)
    assert (proc.returncode, proc.stdout) == (0, b'{"continue": true}')
    assert not (data_dir / "conversations").exists()


def test_interpreter_gone(data_dir: Path) -> None:
    path = wrapper.wrapper_path(data_dir)
    path.parent.mkdir(parents=True)
    path.write_text(wrapper.render(data_dir, python="/nonexistent/venv/bin/python3"))
    path.chmod(0o755)
    proc = run_hook(path, "claude", "SessionStart", (PAYLOADS / "claude" / "SessionStart.json").read_bytes())
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert b"the Python that installed leanctx is gone" in proc.stderr


def test_package_gone(data_dir: Path, tmp_path: Path) -> None:
    path = wrapper.wrapper_path(data_dir)
    path.parent.mkdir(parents=True)
    path.write_text(wrapper.render(data_dir, src=tmp_path / "empty"))
    path.chmod(0o755)
    proc = run_hook(path, "claude", "SessionStart", (PAYLOADS / "claude" / "SessionStart.json").read_bytes())
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert b"cannot import leanctx" in proc.stderr


def test_unwritable_data_dir_still_exits_0(hook_wrapper: Path, data_dir: Path) -> None:
    if os.geteuid() == 0:
        # root ignores permission bits: make the data dir path unusable instead
        env = dict(os.environ, LEANCTX_HOME=str(hook_wrapper))  # a file, not a folder
    else:
        data_dir.chmod(0o500)
        env = dict(os.environ)
    try:
        proc = run_hook(hook_wrapper, "claude", "Stop", (PAYLOADS / "claude" / "Stop.json").read_bytes(), env)
    finally:
        data_dir.chmod(0o700)
    assert (proc.returncode, proc.stdout) == (0, b"")


def test_leanctx_hook_command_same_behaviour(home: Path, data_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "leanctx", "hook", "claude", "SessionStart"],
        input=(PAYLOADS / "claude" / "SessionStart.json").read_bytes(),
        capture_output=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (0, b"")
    assert read_json(record_path(data_dir, "claude", "b2fc16b1-a97b-483b-a92c-3cdcadcb7a86"))["last_event"] == "SessionStart"
    bad = subprocess.run([sys.executable, "-m", "leanctx", "hook", "claude", "SessionStart"], input=b"\x00\x01", capture_output=True, timeout=60)
    assert (bad.returncode, bad.stdout) == (0, b"")


HEAVY = ("click", "jsonschema", "tiktoken", "psutil", "mcp", "platformdirs", "tomlkit")


@pytest.mark.parametrize(("agent", "event"), [("claude", "SessionStart"), ("cursor", "beforeSubmitPrompt"), ("codex", "UserPromptSubmit"),
                                           ("windsurf", "pre_user_prompt"), ("kiro", "userPromptSubmit")])
def test_hook_path_imports_only_stdlib(hook_wrapper: Path, data_dir: Path, agent: str, event: str) -> None:
    """`python -X importtime` on the real wrapper: nothing heavy, nothing third-party."""
    env = dict(os.environ, PYTHONPROFILEIMPORTTIME="1")
    stdin = (PAYLOADS / "claude" / "SessionStart.json").read_bytes()
    # -I ignores PYTHON* variables, so pass -X importtime through the wrapper's own command line
    script = hook_wrapper.read_text().replace('-I -S -c', '-I -S -X importtime -c')
    hook_wrapper.write_text(script)
    proc = run_hook(hook_wrapper, agent, event, stdin, env)
    assert proc.returncode == 0
    imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if line.startswith("import time:")} - {"imported package"}
    assert "leanctx.hooks" in imported  # the measurement really saw our imports
    top_level = {name.split(".")[0] for name in imported}
    assert not top_level & set(HEAVY), top_level & set(HEAVY)
    ours = {n for n in imported if n.startswith("leanctx")}
    allowed = {"leanctx", "leanctx.hooks", "leanctx.hooks.stdin", "leanctx.hooks.publish", "leanctx.hooks.hostproc",
               "leanctx.fastjson", "leanctx.safedir", "leanctx.agents", "leanctx.agents.base", f"leanctx.agents.{agent}"}
    if agent == "claude":  # Cursor runs Claude Code's hooks too: its module tells its payloads apart
        allowed.add("leanctx.agents.cursor")
    if agent in ("claude", "cursor", "windsurf", "kiro"):  # the cursor-like family's shared code
        allowed.add("leanctx.agents.cursorlike")
    assert ours <= allowed, ours
    # not even the json package: its re/enum imports cost more than the interpreter start-up
    assert not top_level & {"json", "re", "pathlib", "dataclasses", "typing"}, top_level
    stdlib = set(sys.stdlib_module_names)
    assert all(name in stdlib or name.startswith("_") for name in top_level - {"leanctx"}), top_level - stdlib


def test_gated_read_path_imports_no_socket_module(hook_wrapper: Path, data_dir: Path, tmp_path: Path) -> None:
    """A built-in read gated through the daemon: the hook speaks to its socket through `_socket`.
    `socket` would pull in enum and selectors, which cost a gated call more than the daemon's whole
    answer. A listener in this test plays the daemon and answers with a stub, which the hook
    must hand Codex as its refusal (so the measurement saw the socket path really run)."""
    import socket
    import threading

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(data_dir / "leanctx.sock"))
    listener.listen(1)
    asked: list[dict] = []

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            buf = b""
            while not buf.endswith(b"\n"):
                buf += conn.recv(65536)
            asked.append(json.loads(buf))
            conn.sendall(json.dumps({"ok": True, "result": {"kind": "stub", "text": "[unchanged] a.txt 1 line"}}).encode() + b"\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    script = hook_wrapper.read_text().replace('-I -S -c', '-I -S -X importtime -c')
    hook_wrapper.write_text(script)
    (tmp_path / "a.txt").write_text("hello\n")
    payload = {"session_id": "s-1", "turn_id": "t-1", "transcript_path": str(tmp_path / "rollout.jsonl"), "cwd": str(tmp_path),
               "hook_event_name": "PreToolUse", "model": "gpt-5", "permission_mode": "bypassPermissions",
               "tool_name": "Bash", "tool_input": {"command": "cat a.txt"}, "tool_use_id": "call_1"}
    cmd = wrapper.command(hook_wrapper, "codex", "PreToolUse", ("--read-gate", "--builtin-read"))
    proc = subprocess.run(["/bin/sh", "-c", cmd], input=json.dumps(payload).encode(), capture_output=True, timeout=30)
    thread.join(10)
    listener.close()
    assert proc.returncode == 0
    assert asked and asked[0]["op"] == "gate" and asked[0]["args"]["call_id"] == "call_1"
    assert "[unchanged] a.txt" in proc.stdout.decode()
    imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "_socket" in imported and "leanctx.hooks.readgate" in imported
    assert not imported & {"socket", "enum", "selectors", "json", "re"}, imported & {"socket", "enum", "selectors", "json", "re"}


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(agent=st.sampled_from(["claude", "codex", "cursor", "codebuddy", "other"]),
       event=st.sampled_from(["SessionStart", "Stop", "beforeSubmitPrompt", "stop", "SubagentStart", "x"]),
       raw=st.one_of(st.binary(max_size=2000), st.text(max_size=500).map(str.encode),
                     st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                  lambda c: st.lists(c, max_size=4) | st.dictionaries(st.sampled_from(
                                      ["session_id", "conversation_id", "transcript_path", "cwd", "agent_id", "subagent_id",
                                       "workspace_roots", "source", "prompt", "parent_conversation_id", "x"]), c, max_size=6),
                                  max_leaves=12).map(lambda v: json.dumps(v).encode())))
def test_any_stdin_exits_0_with_valid_output(home: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                                             agent: str, event: str, raw: bytes) -> None:
    monkeypatch.setattr("leanctx.hooks.stdin.read_stdin", lambda: raw)
    assert hooks.main([agent, event]) == 0
    out = capsys.readouterr().out
    if agent == "cursor":
        assert out == ('{"continue": true}' if event == "beforeSubmitPrompt" else "")
    else:
        assert out == ""


def test_read_gate_notes_each_call_under_the_hosts_call_id(hook_wrapper: Path, data_dir: Path) -> None:
    """The installed read gate, fed Claude Code's recorded PreToolUse payload for our tool, notes
    which context makes each call under its tool_use_id (what the cache matches `_meta` against)."""
    payload = json.loads((PAYLOADS / "claude" / "PreToolUse.json").read_text())
    payload.update(tool_name="mcp__leanctx__ctx_read", tool_input={"path": "a.txt"})
    command = wrapper.command(hook_wrapper, "claude", "PreToolUse", ("--read-gate",))

    def gate(**fields: object) -> None:
        cp = subprocess.run(["/bin/sh", "-c", command], input=json.dumps({**payload, **fields}).encode(),
                            capture_output=True, timeout=30)
        assert cp.returncode == 0 and cp.stderr == b"", cp.stderr

    gate(tool_use_id="toolu_parent")
    gate(tool_use_id="toolu_sub", agent_id="a1b2", agent_type="general-purpose")
    record = read_json(record_path(data_dir, "claude", payload["session_id"]))
    assert record["read_calls"]["toolu_parent"]["agent_id"] is None
    assert record["read_calls"]["toolu_sub"]["agent_id"] == "a1b2"
    assert record["last_read_call"]["agent_id"] == "a1b2"


# -- `leanctx hook` by hand ---------------------------------------------------------------------


def test_hook_help_lists_every_agent_event_and_flag_without_reading_stdin(home: Path) -> None:
    from leanctx import agents

    read_end, write_end = os.pipe()  # stdin left open: a command waiting for a payload would hang
    try:
        proc = subprocess.run([sys.executable, "-m", "leanctx", "hook", "--help"], stdin=read_end, capture_output=True,
                              text=True, timeout=60)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())  # help text is wrapped to the terminal width
    assert "Usage: leanctx hook [OPTIONS] AGENT EVENT [FLAGS]..." in text
    for agent in agents.all_agents():
        assert f"{agent.name} {agent.display_name}: {', '.join(s.name for s in agent.events)}" in text
        if agent.bot_events:
            assert f"with --bot also: {', '.join(s.name for s in agent.bot_events)}" in text
        if agent.guard_event is not None:
            assert f"with --guard: {agent.guard_event.name}" in text
        if agent.read_gate_event is not None:
            gate = agent.read_gate_event
            assert f"with --read-gate: {gate.name}" + (f" (matcher {gate.matcher})" if gate.matcher else "") in text
            assert "matcher None" not in text
    for flag, meaning in hooks.FLAGS.items():
        assert f"{flag} {meaning}" in text


def test_hook_by_hand_takes_the_flags_the_wrapper_passes(home: Path, tmp_path: Path) -> None:
    """`leanctx hook claude PreToolUse --guard` was a usage error (exit 2): flags were not accepted."""
    cks = home / ".cks"
    (cks / "user" / "bob").mkdir(parents=True)
    (cks / "user" / "bob" / "profile.md").write_text("bob's phone number")
    payload = json.loads((PAYLOADS / "claude" / "PreToolUse.json").read_text())
    payload.update(tool_name="Read", tool_input={"file_path": str(cks / "user" / "bob" / "profile.md")}, cwd=str(tmp_path))
    env = dict(os.environ, CKS_HOME=str(cks), CKS_ACTIVE_USER="alice")
    proc = subprocess.run([sys.executable, "-m", "leanctx", "hook", "claude", "PreToolUse", "--guard"], input=json.dumps(payload),
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
