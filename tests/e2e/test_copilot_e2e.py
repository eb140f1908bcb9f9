"""End to end: `leanctx init --agent copilot`, then the real GitHub Copilot CLI (`copilot -p`) offline.

Copilot runs with BYOK against tests/e2e/fake_openai.py on 127.0.0.1 (`COPILOT_OFFLINE=true`,
`COPILOT_PROVIDER_BASE_URL`, the Responses wire) in a temp HOME; no GitHub login is needed. The
model calls our MCP tool by Copilot's name for it, `leanctx-ctx_read`; the tool results are read
back from the requests the fake server receives. The "user" already has a hooks file of their own
in ~/.copilot/hooks (a tap that logs every payload Copilot sends: the ground truth for the trace),
an MCP server of their own and a JSONC settings.json: uninstall must give all of them back byte for
byte.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.e2e import hostcli, tracetap
from tests.e2e.conftest import _cli
from tests.e2e.fake_openai import FakeOpenAI, function_call
from tests.e2e.test_codex_cache_e2e import outputs_by_call

pytestmark = pytest.mark.e2e

TOOL = "leanctx-ctx_read"  # Copilot's name for <server>/<tool> towards the model
TAP_EVENTS = ("sessionStart", "userPromptSubmitted", "preCompact", "agentStop", "sessionEnd", "preMcpToolCall", "preToolUse")
USER_SETTINGS = '// my Copilot settings\n{\n  "banner": "never", // keep it quiet\n}\n'


@pytest.fixture
def copilot_cli():
    return _cli("copilot")


@pytest.fixture
def copilot_home(host_home, mcp_probe):
    """A HOME where the user already has Copilot config of their own (and a big file to read)."""
    hh = host_home
    (hh.proj / "big.py").write_text("".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200)))
    cdir = hh.home / ".copilot"
    (cdir / "hooks").mkdir(parents=True)
    tap = hh.root / "tap.py"
    tap.write_text(tracetap.TAP_SRC)
    log = hh.root / "tap.jsonl"
    hooks = {"version": 1, "hooks": {e: [{"type": "command", "bash": f"{sys.executable} {tap} {e} {log}", "timeoutSec": 10}]
                                     for e in TAP_EVENTS}}
    (cdir / "hooks" / "user.json").write_text(json.dumps(hooks, indent=2) + "\n")
    (cdir / "mcp-config.json").write_text(json.dumps({"mcpServers": {"probe": {
        "type": "local", "command": mcp_probe.argv[0], "args": mcp_probe.argv[1:], "tools": ["*"]}}}, indent=2) + "\n")
    (cdir / "settings.json").write_text(USER_SETTINGS)
    hh.tap_log = log
    return hh


def user_files(hh) -> dict:
    cdir = hh.home / ".copilot"
    return {p: (cdir / p).read_bytes() for p in ("hooks/user.json", "mcp-config.json", "settings.json")}


def copilot_env(hh, base_url: str, extra: dict | None = None) -> dict:
    env = hostcli.base_env(hh.home, {
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": base_url,
        "COPILOT_PROVIDER_API_KEY": "sk-fake-key-for-tests",
        "COPILOT_PROVIDER_WIRE_API": "responses",
        "COPILOT_MODEL": "gpt-4.1",
    })
    env.update(extra or {})
    return env


def run_copilot(cli, hh, run_host, script, *args, prompt="read big.py", env_extra=None):
    """One `copilot -p` turn; returns (CompletedProcess, every request body, the session id Copilot reported)."""
    with FakeOpenAI(script=script) as srv:
        cp, _ = run_host([cli, "-p", prompt, "--allow-all-tools", "--allow-all-paths", "--disable-client-telemetry", *args],
                         cwd=hh.proj, env=copilot_env(hh, srv.base_url, env_extra))
        bodies = srv.requests
    assert cp.returncode == 0, cp.stdout + cp.stderr
    resumed = re.findall(r"copilot --resume=([0-9a-f-]{36})", cp.stderr)
    assert resumed, f"Copilot reported no session id:\n{cp.stderr}"
    return cp, bodies, resumed[-1]


def read_call(path: str = "big.py") -> dict:
    return function_call(TOOL, {"path": path})


def copilot_trace(log: Path, proj: Path, files: dict[str, str]) -> list[dict]:
    """The tap's log as a replay trace: Copilot's own payloads as hook events, each ctx_read
    (its preMcpToolCall payload: session, subagent, arguments, the model's call id) as a read.
    The MCP server Copilot starts has the session in COPILOT_AGENT_SESSION_ID."""
    def read_of(e: dict) -> dict | None:
        p = e["payload"]
        if e["event"] != "preMcpToolCall" or p.get("serverName") != "leanctx" or p.get("toolName") != "ctx_read":
            return None
        return {"conv": p["sessionId"], "sub": p.get("agentId"), "args": p.get("arguments") or {}, "call_id": p.get("toolCallId")}

    return tracetap.tap_trace(log, proj, files, "copilot", read_of, hook_too=True,
                              host_env=lambda p: {"COPILOT_AGENT_SESSION_ID": p["sessionId"]},
                              keep=lambda e: e["event"] != "preToolUse")  # only the tap's own view of what the model ran


def test_copilot_publishes_its_session_stubs_the_second_read_and_uninstalls_byte_for_byte(
        copilot_cli, copilot_home, lean, mcp_probe, run_host):
    hh = copilot_home
    before = user_files(hh)
    content = (hh.proj / "big.py").read_text()
    lean.run("init", "--agent", "copilot")
    assert (hh.home / ".copilot" / "hooks" / "leanctx.json").is_file()

    first, second = read_call(), read_call()
    cp, bodies, session = run_copilot(copilot_cli, hh, run_host, [first, second, "The file defines 200 functions."])
    out = outputs_by_call(bodies)
    assert "def function_199" in out[first["call_id"]] and len(out[first["call_id"]]) >= len(content), out[first["call_id"]][:300]
    assert out[second["call_id"]].startswith("[unchanged]") and "big.py" in out[second["call_id"]], out[second["call_id"]][:300]
    assert "Read files with the `ctx_read` tool" in json.dumps(bodies[0]), "~/.copilot/copilot-instructions.md unread"
    lean.assert_no_hook_errors()

    # the record names the session Copilot itself reported, its transcript (agentStop) and workspace
    rec = lean.only_record("copilot")
    assert rec["conversation_id"] == rec["session_id"] == session
    transcript = hh.home / ".copilot" / "session-state" / session / "events.jsonl"
    assert rec["transcript_path"] == str(transcript) and transcript.is_file()
    assert rec["cwd"] == str(hh.proj) and rec["last_event"] == "sessionEnd"
    # the read gate noted both calls under the model's own call ids (preMcpToolCall toolCallId) ...
    assert {first["call_id"], second["call_id"]} <= set(rec["read_calls"]), rec.get("read_calls")
    # Copilot took the gate's answer as `metaToUse` (merged into the tools/call `_meta`; its log redacts the value)
    logged = [json.loads(line) for line in transcript.read_text().splitlines()]
    gate_outputs = [e["data"].get("output") for e in logged if e.get("type") == "hook.end" and e["data"].get("hookType") == "preMcpToolCall"]
    assert any(isinstance(o, dict) and "metaToUse" in o for o in gate_outputs), gate_outputs
    # ... and the hooks and the MCP servers hang off one and the same Copilot process
    probe_hosts = {s["parent"]["pid"] for s in mcp_probe.starts()}
    assert probe_hosts == {rec["host"]["pid"]}, (probe_hosts, rec["host"])
    events = [e["payload"].get("sessionId") for e in map(json.loads, hh.tap_log.read_text().splitlines())]
    assert set(events) == {session}

    # a new `copilot -p` is a new session in a new process: content again
    again = read_call()
    _, bodies, session2 = run_copilot(copilot_cli, hh, run_host, [again, "done"])
    assert session2 != session
    assert "def function_199" in outputs_by_call(bodies)[again["call_id"]]
    assert set(lean.records("copilot")) and len(lean.records("copilot")) == 2

    # both runs replayed from what Copilot itself sent: the same answers, 0 wrong, ours == oracle
    trace = copilot_trace(hh.tap_log, hh.proj, {"big.py": content})
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], "copilot-two-sessions", host="GitHub Copilot CLI", source=__file__)

    rc, report = lean.doctor("copilot")
    assert rc == 0, json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", "copilot")
    assert user_files(hh) == before
    assert not (hh.home / ".copilot" / "hooks" / "leanctx.json").exists()
    assert not (hh.home / ".copilot" / "copilot-instructions.md").exists()


def test_copilot_guard_denies_in_copilots_own_form_and_bot_context_reaches_the_model(
        copilot_cli, copilot_home, lean, run_host):
    """--bot --guard: the guard denies a `view` of another user's folder with Copilot's deny form
    (the model sees "Denied by preToolUse hook: <our reason>"), the bot's rehydrated thread reaches the
    model as sessionStart additionalContext, and the prompt is recorded in the user's thread."""
    hh = copilot_home
    cks = hh.root / "cks"
    other = cks / "user" / "bob"
    other.mkdir(parents=True)
    (other / "profile.md").write_text("bob's secret\n")
    lean.run("init", "--agent", "copilot", "--bot", "--guard")
    env = {"CKS_HOME": str(cks), "CKS_ACTIVE_USER": "ana"}
    peek = function_call("view", {"path": str(other / "profile.md")})
    run_copilot(copilot_cli, hh, run_host, ["first turn done"], prompt="remember: my name is Ana", env_extra=env)
    _, bodies, _ = run_copilot(copilot_cli, hh, run_host, [peek, "done"], prompt="what is in bob's profile?", env_extra=env)
    out = outputs_by_call(bodies)[peek["call_id"]]
    assert "Denied by preToolUse hook" in out and "bob's secret" not in out, out
    assert "my name is Ana" in json.dumps(bodies[0]), "the bot's rehydrated thread did not reach the model at session start"
    assert "first turn done" in json.dumps(bodies[0]), "the reply (from Copilot's transcript) was not recorded"
    assert "leanctx-conversation-state" in json.dumps(bodies[0]), "Copilot does not offer the skill in ~/.copilot/skills"
    lean.assert_no_hook_errors()


SUB_MARK = "SUBAGENT-TASK: read big.py with ctx_read, twice."


def is_subagent(body: dict) -> bool:
    """A request of the subagent: its conversation starts with the task prompt as a user message
    (the parent's holds the prompt only inside its `task` call's arguments)."""
    return any(isinstance(i, dict) and i.get("role") == "user" and SUB_MARK in json.dumps(i) for i in body.get("input") or [])


def test_copilot_subagent_gets_only_its_own_stubs_through_per_call_identity(copilot_cli, copilot_home, lean, run_host):
    """The subagent runs in the same Copilot process and MCP connection as its parent. Its
    preMcpToolCall hook names its own session and the model's call id, which our gate hands on
    in `_meta`: so it gets content for what only the parent read, then a stub for what it read
    itself, and the parent keeps its own stub. (Without the id both sub reads would be withheld.)"""
    hh = copilot_home
    content = (hh.proj / "big.py").read_text()
    lean.run("init", "--agent", "copilot")
    p_first, p_last, s_first, s_second = read_call(), read_call(), read_call(), read_call()
    spawn = function_call("task", {"name": "reader", "description": "read big file", "agent_type": "general-purpose",
                                   "prompt": SUB_MARK, "mode": "sync"})
    parent = iter([p_first, spawn, p_last, "done"])
    sub = iter([s_first, s_second, "sub: done"])

    def route(body: dict):
        return next(sub, "sub: done") if is_subagent(body) else next(parent, "done")

    _, bodies, session = run_copilot(copilot_cli, hh, run_host, [route] * 12)
    out = outputs_by_call(bodies)
    assert set(out) >= {p_first["call_id"], s_first["call_id"], s_second["call_id"], p_last["call_id"]}, sorted(out)
    assert "def function_199" in out[p_first["call_id"]]
    assert "def function_199" in out[s_first["call_id"]], "the subagent got a stub for bytes only its parent holds"
    assert out[s_second["call_id"]].startswith("[unchanged]"), out[s_second["call_id"]][:200]
    assert out[p_last["call_id"]].startswith("[unchanged]"), out[p_last["call_id"]][:200]
    lean.assert_no_hook_errors()
    trace = copilot_trace(hh.tap_log, hh.proj, {"big.py": content})
    tracetap.check_replay(trace, hh, ["full", "full", "stub", "stub"], "copilot-subagent", host="GitHub Copilot CLI", source=__file__)


def test_copilot_project_install_runs_only_in_a_trusted_folder(copilot_cli, host_home, lean, run_host):
    """`init --project`: `.github/hooks/leanctx.json`, `.github/mcp.json` and the read rule in
    `.github/copilot-instructions.md`. Copilot skips project hooks in a folder it does not trust
    (nothing published, as doctor's note says); trusted (`--trust-folder`), the hooks publish, the
    MCP server serves and the rule reaches the model. Uninstall leaves the project as it was."""
    hh = host_home
    (hh.proj / "big.py").write_text("".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(50)))
    before = {p: p.read_bytes() for p in hh.proj.rglob("*") if p.is_file()}
    init = lean.run("init", "--agent", "copilot", "--project", str(hh.proj))
    assert "trusted" in init.stderr
    assert (hh.proj / ".github" / "hooks" / "leanctx.json").is_file() and (hh.proj / ".github" / "mcp.json").is_file()
    # project files name the console script found on PATH (and its default data dir), never a path of this machine
    path = {"PATH": f"{Path(sys.executable).parent}:{hostcli.base_env(hh.home)['PATH']}", **lean.host_env}
    run_copilot(copilot_cli, hh, run_host, ["done"], prompt="hi", env_extra=path)
    assert lean.records("copilot") == {}, "Copilot ran project hooks in a folder it does not trust"

    first, second = read_call(), read_call()
    _, bodies, session = run_copilot(copilot_cli, hh, run_host, [first, second, "done"], "--trust-folder", env_extra=path)
    out = outputs_by_call(bodies)
    assert "def function_49" in out[first["call_id"]] and out[second["call_id"]].startswith("[unchanged]"), out
    assert lean.only_record("copilot")["conversation_id"] == session
    assert "Read files with the `ctx_read` tool" in json.dumps(bodies[0]), \
        "the read rule in .github/copilot-instructions.md did not reach the model"
    lean.assert_no_hook_errors()
    lean.run("uninstall", "--agent", "copilot", "--project", str(hh.proj))
    assert {p: p.read_bytes() for p in hh.proj.rglob("*") if p.is_file()} == before
    assert not (hh.proj / ".github").exists()


def test_copilot_after_compact_the_next_read_is_full(copilot_cli, copilot_home, lean, run_host):
    """`/compact` in a resumed session fires preCompact (sessionId, transcriptPath, trigger
    "manual"): the conversation's counter moves and the next read of a file it held is full again."""
    hh = copilot_home
    content = (hh.proj / "big.py").read_text()
    lean.run("init", "--agent", "copilot")
    first, second, third = read_call(), read_call(), read_call()
    _, bodies, session = run_copilot(copilot_cli, hh, run_host, [first, second, "done"])
    out = outputs_by_call(bodies)
    assert "def function_199" in out[first["call_id"]] and out[second["call_id"]].startswith("[unchanged]")
    cp, _, again = run_copilot(copilot_cli, hh, run_host, ["Summary: big.py was read."], "--continue", prompt="/compact")
    assert again == session and "Compacted" in cp.stdout, cp.stdout
    rec = lean.only_record("copilot")
    assert rec["compactions"] >= 1 and rec["last_event"] == "preCompact", rec
    _, bodies, _ = run_copilot(copilot_cli, hh, run_host, [third, "done"], "--continue", prompt="read big.py again")
    assert "def function_199" in outputs_by_call(bodies)[third["call_id"]], "a stub was served after Copilot compacted"
    lean.assert_no_hook_errors()
    trace = copilot_trace(hh.tap_log, hh.proj, {"big.py": content})
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], "copilot-compaction", host="GitHub Copilot CLI", source=__file__)
