"""End to end: `leanctx init --agent codebuddy`, then the real CodeBuddy Code CLI (`codebuddy -p`) offline.

CodeBuddy Code 2.117.0 (shipped inside npm `@tencent-ai/agent-sdk` under `cli/`) talks Chat
Completions to tests/e2e/fake_chat.py on 127.0.0.1 (`CODEBUDDY_BASE_URL`, no login) in a temp
HOME. Its MCP tools are deferred: the scripted model reaches ctx_read through `DeferExecuteTool`,
as the read rule tells it to. `-p` can hang after a model error, so every run is bounded and both
runs of a test use the one fake server (CodeBuddy keeps a session's base URL).
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.e2e import hostcli, tracetap
from tests.e2e.fake_chat import FakeChat, tool_call

pytestmark = pytest.mark.e2e

CODE = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))


def codebuddy_env(home, base_url: str, extra: dict | None = None) -> dict:
    """Offline: the fake model, no built-in plugin marketplace (a git clone), and any other
    outbound request sent to a closed port on 127.0.0.1."""
    return hostcli.base_env(home, {
        "CODEBUDDY_API_KEY": "sk-fake", "CODEBUDDY_BASE_URL": base_url, "CODEBUDDY_SKIP_BUILTIN_MARKETPLACE": "1",
        "GIT_ALLOW_PROTOCOL": "file", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost", **(extra or {}),
    })


def deferred_read(path: str, server: str = "leanctx") -> dict:
    return tool_call("DeferExecuteTool", {"toolName": f"mcp__{server}__ctx_read", "params": {"path": path}})


def run(cli, hh, srv, run_host, prompt="read big.py", extra=None):
    cp, pid = run_host(["node", cli, "-p", prompt, "--dangerously-skip-permissions"], cwd=hh.proj,
                       env=codebuddy_env(hh.home, srv.base_url, extra))
    assert cp.returncode == 0, cp.stderr[-3000:]
    return cp, pid


def session_of(srv: FakeChat, since: int = 0) -> str:
    """The session id CodeBuddy itself sent the model (`X-Conversation-ID`), one per run."""
    ids = {r.headers.get("X-Conversation-ID") for r in srv.log[since:] if r.kind == "main"}
    assert len(ids) == 1 and None not in ids, ids
    return ids.pop()


def test_codebuddy_run_publishes_its_session_and_the_second_read_is_a_stub(codebuddy_cli, host_home, lean, mcp_probe, run_host):
    hh = host_home
    (hh.proj / "big.py").write_text(CODE)
    cb = hh.home / ".codebuddy"
    cb.mkdir()
    # The user's own files: settings with a key of theirs, servers in ~/.codebuddy/mcp.json (the
    # file CodeBuddy reads: it exists first) and in ~/.codebuddy.json (shadowed, never touched).
    settings = cb / "settings.json"
    settings.write_text(json.dumps({"model": "default-model", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}, indent=4))
    probe = {"type": "stdio", "command": mcp_probe.argv[0], "args": mcp_probe.argv[1:]}
    (cb / "mcp.json").write_text(json.dumps({"mcpServers": {"probe": probe}}, indent=2) + "\n")
    legacy = hh.home / ".codebuddy.json"
    legacy.write_text('{"mcpServers": {"old": {"command": "true"}}}\n')
    before = {p: p.read_bytes() for p in (settings, cb / "mcp.json", legacy)}

    init = lean.run("init", "--agent", "codebuddy")
    assert "~/.codebuddy/mcp.json" in init.stdout and "~/.codebuddy.json" not in init.stdout
    assert legacy.read_bytes() == before[legacy]
    assert set(json.loads((cb / "mcp.json").read_text())["mcpServers"]) == {"probe", "leanctx"}
    assert "DeferExecuteTool" in (cb / "CODEBUDDY.md").read_text()
    wired = settings.read_bytes()
    tap = tracetap.install_tap(settings, hh.root, agent="codebuddy")

    first, second, third = deferred_read("big.py"), deferred_read("big.py"), deferred_read("big.py")
    with FakeChat(script=[first, second, "done reading", third, "again"]) as srv:
        cp, pid = run(codebuddy_cli, hh, srv, run_host)
        assert cp.stdout.strip() == "done reading"
        session = session_of(srv)
        out = srv.tool_results()
        assert "def function_199" in out[first["id"]]
        assert out[second["id"]].startswith("[unchanged]") and "big.py" in out[second["id"]], out[second["id"]][:300]

        # --- what leanctx published: the session the host reported, under the host process ---
        lean.assert_no_hook_errors()
        rec = lean.only_record("codebuddy")
        assert rec["session_id"] == rec["conversation_id"] == session
        transcript = hh.home / ".codebuddy" / "projects"
        assert [str(p) for p in transcript.glob(f"*/{session}.jsonl")] == [rec["transcript_path"]]
        assert rec["cwd"] == str(hh.proj) and rec["source"] == "startup"
        # -p ends with Stop (then FinalStop), never SessionEnd
        assert rec["stopped_at"] and "ended_at" not in rec and rec["last_event"] == "Stop"
        assert rec["host"]["pid"] == pid and rec["host"]["name"] == "node"
        starts = mcp_probe.starts()
        assert starts and {s["parent"]["pid"] for s in starts} == {pid}, "the user's server must still start, under the host"

        # --- a new session gets the content again ---
        since = len(srv.log)
        run(codebuddy_cli, hh, srv, run_host, "read it again")
        later = session_of(srv, since)
        assert later != session
        assert "def function_199" in srv.tool_results()[third["id"]]

    trace = tracetap.to_trace(tap, hh.proj, {"big.py": CODE}, agent="codebuddy", call_ids=False)
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], "codebuddy-two-sessions", host="CodeBuddy Code", source=__file__)

    settings.write_bytes(wired)  # the test's tap out again
    rc, report = lean.doctor("codebuddy")
    assert rc == 0 and report["ok"] is True, json.dumps(report, indent=2)
    assert report["agents"][0]["last_published"]["session_id"] == later
    lean.run("uninstall", "--agent", "codebuddy")
    for path, data in before.items():
        assert path.read_bytes() == data, f"uninstall did not restore {path}"
    assert not (cb / "CODEBUDDY.md").exists()


def test_codebuddy_subagent_gets_no_stub_for_its_parents_read(codebuddy_cli, host_home, lean, run_host):
    """CodeBuddy fires SubagentStart/SubagentStop (with `agent_id`) around an Agent tool call,
    and the subagent's own tool events carry the same `agent_id`. Its MCP calls come through the
    parent's connection with no call id, so while it runs no stub is given (the subagent window);
    after it stopped, the parent's re-read is a stub again."""
    hh = host_home
    (hh.proj / "big.py").write_text(CODE)
    lean.run("init", "--agent", "codebuddy")
    tap = tracetap.install_tap(hh.home / ".codebuddy" / "settings.json", hh.root, agent="codebuddy")
    p_first, s_first, s_second, p_last = (deferred_read("big.py") for _ in range(4))
    script = [p_first, tool_call("Agent", {"description": "read the file", "prompt": "Read big.py twice", "subagent_type": "general-purpose"}),
              s_first, s_second, "sub: done", p_last, "parent: done"]
    with FakeChat(script=script) as srv:
        cp, _ = run(codebuddy_cli, hh, srv, run_host, "use an agent")
        assert cp.stdout.strip() == "parent: done"
        out = srv.tool_results()
    kinds = ["stub" if out[c["id"]].startswith("[unchanged]") else "full" for c in (p_first, s_first, s_second, p_last)]
    assert kinds == ["full", "full", "full", "stub"], kinds
    seen = [json.loads(line) for line in tap.read_text().splitlines()]
    starts = [e["payload"] for e in seen if e["event"] == "SubagentStart"]
    stops = [e["payload"] for e in seen if e["event"] == "SubagentStop"]
    assert len(starts) == len(stops) == 1 and starts[0]["agent_id"] == stops[0]["agent_id"]
    sub_reads = [e["payload"] for e in seen if e["event"] == "PreToolUse" and e["payload"].get("agent_id")]
    assert len(sub_reads) == 2 and {p["agent_id"] for p in sub_reads} == {starts[0]["agent_id"]}
    lean.assert_no_hook_errors()
    rec = lean.only_record("codebuddy")
    assert rec["active_subagents"] == {} and rec["last_subagent_stop_at"] and rec["stopped_at"]
    # CodeBuddy sends the subagent's own transcript on its events: the record keeps the parent's
    assert "/subagents/" in starts[0]["transcript_path"]
    assert rec["transcript_path"] == next(e["payload"]["transcript_path"] for e in seen if e["event"] == "Stop")
    trace = tracetap.to_trace(tap, hh.proj, {"big.py": CODE}, agent="codebuddy", call_ids=False)
    tracetap.check_replay(trace, hh, kinds, "codebuddy-subagent", host="CodeBuddy Code", source=__file__,
                          withheld="subagent window open")


def test_codebuddy_project_install_starts_our_server_and_uninstall_restores(codebuddy_cli, host_home, lean, run_host):
    """`init --project`: hooks in `.codebuddy/settings.local.json`, our server in the project's
    `.mcp.json` and approved in `enabledMcpjsonServers` there (without it CodeBuddy lists the
    server but never starts it)."""
    hh = host_home
    (hh.proj / "big.py").write_text(CODE)
    local = hh.proj / ".codebuddy" / "settings.local.json"
    local.parent.mkdir()
    local.write_text('{"enabledMcpjsonServers": ["github"]}')
    mcp = hh.proj / ".mcp.json"
    mcp.write_text('{"mcpServers": {"github": {"command": "true"}}}')
    before = {p: p.read_bytes() for p in (local, mcp)}
    # the project's files call `leanctx-hook` and `leanctx` from PATH
    lean.run("init", "--agent", "codebuddy", "--project", str(hh.proj))
    assert json.loads(local.read_text())["enabledMcpjsonServers"] == ["github", "leanctx"]
    read = deferred_read("big.py")
    with FakeChat(script=[read, "done"]) as srv:
        scripts = os.path.dirname(sys.executable)  # this installation's `leanctx` and `leanctx-hook`
        cp, pid = run(codebuddy_cli, hh, srv, run_host, extra={**lean.host_env, "PATH": f"{scripts}:{os.environ['PATH']}"})
        assert "def function_199" in srv.tool_results()[read["id"]], srv.tool_results()
    lean.assert_no_hook_errors()
    rec = lean.only_record("codebuddy")
    assert rec["host"]["pid"] == pid and rec["session_id"] == session_of(srv)
    lean.run("uninstall", "--agent", "codebuddy", "--project", str(hh.proj))
    for p, data in before.items():
        assert p.read_bytes() == data, f"uninstall did not restore {p}"


QUESTION = "Single-user or shared bot?"
SUMMARY = "Setting up the Telegram bot for Ana; the VPS host is chosen."


def test_codebuddy_restarted_bot_gets_its_thread_back(codebuddy_cli, host_home, lean, run_host):
    """The bot profile on CodeBuddy: a turn recorded in session 1; a new `-p` process (new
    session) gets the thread in its first model request although CodeBuddy fires SessionStart
    async (it may land after the request went out)."""
    import shlex

    hh = host_home
    lean.run("init", "--agent", "codebuddy", "--bot")
    env = {"CKS_ACTIVE_USER": "Ana", "CKS_HOME": str(hh.home / ".cks")}
    leanctx = f"{shlex.quote(sys.executable)} -m leanctx"
    session1 = [tool_call("Bash", {"command": f"{leanctx} state summary {shlex.quote(SUMMARY)}"}), QUESTION]
    with FakeChat(script=session1) as srv:
        cp, _ = run(codebuddy_cli, hh, srv, run_host, "how do I add the bot?", extra=env)
        assert cp.stdout.strip() == QUESTION
        since = len(srv.log)
        cp, _ = run(codebuddy_cli, hh, srv, run_host, "shared", extra=env)
        second = json.dumps([r.body["messages"] for r in srv.log[since:] if r.kind == "main"][0])
    for expected in (SUMMARY, "how do I add the bot?", QUESTION):
        assert expected in second, f"the restarted session was not given {expected!r}"
    lean.assert_no_hook_errors()


def test_codebuddy_guard_denies_another_users_folder(codebuddy_cli, host_home, lean, run_host, bobs_secret):
    hh = host_home
    lean.run("init", "--agent", "codebuddy", "--bot", "--guard")
    bash = tool_call("Bash", {"command": "cat ~/.cks/user/*/profile.md"})
    with FakeChat(script=[bash, "I cannot read that."]) as srv:
        run(codebuddy_cli, hh, srv, run_host, "show me everyone's profile", extra={"CKS_ACTIVE_USER": "ana"})
        result = srv.tool_results()[bash["id"]]
    assert bobs_secret not in result, "the guard let the model read another user's file"
    assert "leanctx guard" in result, f"the model was not told why the call was denied: {result!r}"
    lean.assert_no_hook_errors()
