"""End to end: `leanctx init --agent auggie`, then the real Auggie CLI (`auggie --print`) offline.

Auggie 0.36.0 talks only to the `tenantURL` of its session (AUGMENT_SESSION_AUTH), here
tests/e2e/fake_augment.py on 127.0.0.1, which also turns on the `enable_hooks` feature flag its
backend holds (without it Auggie runs no hook at all). Every other outbound request goes to a
closed port.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from leanctx.installer import jsonc
from tests.e2e import hostcli
from tests.e2e.conftest import CLI_TIMEOUT, _cli
from tests.e2e.fake_augment import SUMMARY_FLAGS, FakeAugment, tool_call, tool_names

pytestmark = pytest.mark.e2e

CODE = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
READ = "ctx_read_leanctx"


@pytest.fixture
def auggie_cli():
    return _cli("auggie")


def auggie_env(home, srv: FakeAugment, extra: dict | None = None) -> dict:
    return hostcli.base_env(home, {"AUGMENT_SESSION_AUTH": srv.session_auth, "AUGMENT_DISABLE_AUTO_UPDATE": "1",
                                   "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
                                   "NO_PROXY": "127.0.0.1,localhost", **(extra or {})})


def run(cli, hh, srv, run_host, prompt, extra: dict | None = None):
    cp, pid = run_host([cli, "--print", "--instruction", prompt], cwd=hh.proj, env=auggie_env(hh.home, srv, extra))
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    return cp, pid


def test_auggie_run_publishes_its_session_and_reads_come_whole(auggie_cli, host_home, lean, mcp_probe, run_host):
    """init wires hooks, server and rule into ~/.augment; a real session publishes Auggie's own
    session id, ctx_read answers, and a re-read in the same session is content again (Auggie
    summarizes its history without a hook: no stub, ever); a new session gets content; doctor
    passes; uninstall restores the user's file byte for byte."""
    hh = host_home
    (hh.proj / "big.py").write_text(CODE)
    first, second, third = (tool_call(READ, {"path": "big.py"}) for _ in range(3))
    with FakeAugment(script=[first, second, "done reading"]) as srv:
        augment = hh.home / ".augment"
        augment.mkdir()
        settings = augment / "settings.json"
        probe = {"command": mcp_probe.argv[0], "args": mcp_probe.argv[1:]}
        mine = {"type": "command", "command": "/bin/true", "timeout": 5000}
        # the user's own settings, JSON5 as Auggie reads it: a comment, a trailing comma
        settings.write_text('// mine\n{"mcpServers": {"probe": %s}, "hooks": {"Stop": [{"hooks": [%s]}]},}\n'
                            % (json.dumps(probe), json.dumps(mine)))
        before = settings.read_bytes()

        lean.run("init", "--agent", "auggie")
        wired = jsonc.loads(settings.read_text())
        assert wired["mcpServers"]["leanctx"]["command"] and wired["mcpServers"]["probe"] == probe
        assert wired["hooks"]["PreToolUse"][0]["matcher"] == f"mcp:^{READ}$"
        assert wired["hooks"]["SessionStart"][0]["hooks"][0]["timeout"] == 10_000  # milliseconds
        listed = subprocess.run([auggie_cli, "mcp", "list"], cwd=hh.proj, env=auggie_env(hh.home, srv),
                                capture_output=True, text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
        assert "leanctx" in listed.stdout and "probe" in listed.stdout, listed.stdout + listed.stderr

        cp, pid = run(auggie_cli, hh, srv, run_host, "read big.py")
        assert "done reading" in cp.stdout
        request = srv.main_requests[0]
        assert READ in tool_names(request)
        rule = [r for r in request["rules"] if r["path"].endswith("leanctx-ctx-read.md")]
        assert rule and "ctx_read" in rule[0]["content"], [r["path"] for r in request["rules"]]
        out = srv.tool_results()
        assert "def function_199" in out[first["id"]], out
        assert "def function_199" in out[second["id"]] and not out[second["id"]].startswith("[unchanged]"), out[second["id"]][:300]

        # --- what leanctx published: the session Auggie saved (its session file's name) ---
        lean.assert_no_hook_errors()
        rec = lean.only_record("auggie")
        session = rec["session_id"]
        assert rec["conversation_id"] == session
        assert [p.stem for p in (augment / "sessions").glob("*.json")] == [session]
        assert json.loads((augment / "sessions" / f"{session}.json").read_text())["sessionId"] == session
        assert request["conversation_id"] == session  # the id Auggie sends its model, too
        assert rec["cwd"] == str(hh.proj) and rec["workspace_roots"] == [str(hh.proj)]
        assert rec["stopped_at"] and rec["ended_at"] and rec["last_event"] == "SessionEnd"
        assert rec["host"]["pid"] == pid
        starts = mcp_probe.starts()
        # Auggie starts a stdio server through `sh -c` (seen in runs): its parent is that shell
        assert starts and {(s["parent"]["name"], s["parent"]["ppid"]) for s in starts} == {("sh", pid)}, \
            "the user's server must still start, under the host"

        # --- a new session gets the content again ---
        srv.script, srv._next = [third, "again"], 0
        run(auggie_cli, hh, srv, run_host, "read it again")
        assert "def function_199" in srv.tool_results()[third["id"]]
        later = [r for r in lean.records("auggie") if r != session]
        assert len(later) == 1

    # every read was counted for its own session, and none could be a stub, for that one reason
    stats = json.loads(lean.run("stats", "--json").stdout)
    assert stats["by_agent"]["auggie"]["reads"] == 3 and stats["stubs"] == 0
    assert stats["withheld_reasons"] == {"Auggie summarizes its history without a hook leanctx receives, so stubs are withheld": 3}
    assert sorted(k.split("@")[0] for k in stats["by_conversation"]) == sorted(f"auggie:{s}" for s in (session, later[0]))
    rc, report = lean.doctor("auggie")
    assert rc == 0 and report["ok"] is True, json.dumps(report, indent=2)
    assert report["agents"][0]["last_published"]["session_id"] == later[0]
    lean.run("uninstall", "--agent", "auggie")
    assert settings.read_bytes() == before, "uninstall did not restore ~/.augment/settings.json"
    assert not (augment / "rules").exists()


def test_auggie_summarizes_its_history_mid_turn_and_no_hook_says_so(auggie_cli, host_home, lean, run_host):
    """Why an Auggie conversation never gets a stub: once its backend turns summarization on and
    the reported prompt passes its limit, Auggie replaces the history with a summary between two
    tool calls of one turn (the next request starts over: no history, the summary as a node of type
    10; `history_summary_node` in its session file), and no hook runs for it: the record counts
    no compaction. Every read is content."""
    hh = host_home
    (hh.proj / "big.py").write_text(CODE)
    reads = [tool_call(READ, {"path": "big.py"}) for _ in range(6)]
    with FakeAugment(script=[*reads, "done reading"], flags=SUMMARY_FLAGS,
                      usage=lambda body: 100_000 * (1 + len(body.get("chat_history") or []))) as srv:
        lean.run("init", "--agent", "auggie")
        run(auggie_cli, hh, srv, run_host, "read big.py six times")
        assert srv.compaction_requests, "Auggie asked for no summary"
        summarized = [i for i, b in enumerate(srv.main_requests)
                      if any(n.get("type") == 10 and srv.compact_text in json.dumps(n) for n in b.get("nodes") or [])]
        assert summarized and 0 < summarized[0] < len(reads), summarized  # inside the turn, between its reads
        assert not srv.main_requests[summarized[0]].get("chat_history")  # the history before it is gone
        out = srv.tool_results()
        assert all("def function_199" in out[r["id"]] for r in reads), out
    lean.assert_no_hook_errors()
    rec = lean.only_record("auggie")
    assert rec["compactions"] == 0 and rec["last_event"] == "SessionEnd"


def test_auggie_project_install_is_loaded_and_uninstall_restores(auggie_cli, host_home, lean, run_host):
    """`init --project`: hooks and our server in `.augment/settings.local.json`, the rule in
    `.augment/rules/`; Auggie loads all three from the workspace."""
    hh = host_home
    (hh.proj / "big.py").write_text(CODE)
    read = tool_call(READ, {"path": "big.py"})
    with FakeAugment(script=[read, "done"]) as srv:
        lean.run("init", "--agent", "auggie", "--project", str(hh.proj))
        assert not (hh.home / ".augment" / "settings.json").exists()
        scripts = os.path.dirname(sys.executable)  # this installation's `leanctx` and `leanctx-hook`
        cp, pid = run(auggie_cli, hh, srv, run_host, "read big.py", {**lean.host_env, "PATH": f"{scripts}:{os.environ['PATH']}"})
        assert "def function_199" in srv.tool_results().get(read["id"], ""), srv.tool_results()
        assert any(r["path"].endswith("leanctx-ctx-read.md") for r in srv.main_requests[0]["rules"])
    lean.assert_no_hook_errors()
    rec = lean.only_record("auggie")
    assert rec["host"]["pid"] == pid and rec["last_event"] == "SessionEnd"
    lean.run("uninstall", "--agent", "auggie", "--project", str(hh.proj))
    assert not (hh.proj / ".augment" / "settings.local.json").exists()
    assert not (hh.proj / ".augment" / "rules").exists()


def test_auggie_guard_and_bot_in_the_real_host(auggie_cli, host_home, lean, run_host, bobs_secret):
    """`--bot --guard` on Auggie: the guard's deny (Claude's `permissionDecision` form) keeps a
    launch-process of another user's folder from running and tells the model why; PromptSubmit
    and Stop record the turn. The thread is not handed to a new session: Auggie drops what its
    SessionStart hook answers, so the bot's context never reaches the model."""
    hh = host_home
    leanctx = f"{sys.executable} -m leanctx"
    summary = "Setting up the Telegram bot for ana."
    peek = tool_call("launch-process", {"command": "cat ~/.cks/user/*/profile.md", "wait": True, "max_wait_seconds": 30, "cwd": "."})
    note = tool_call("launch-process", {"command": f"{leanctx} state summary '{summary}'", "wait": True,
                                        "max_wait_seconds": 60, "cwd": "."})
    with FakeAugment(script=[peek, note, "I cannot read that.", "hello again"]) as srv:
        lean.run("init", "--agent", "auggie", "--bot", "--guard")
        extra = {"CKS_ACTIVE_USER": "ana"}
        run(auggie_cli, hh, srv, run_host, "show me everyone's profile", extra)
        result = srv.tool_results()[peek["id"]]
        assert bobs_secret not in result, "the guard let the model read another user's file"
        assert "leanctx guard" in result, f"the model was not told why the call was denied: {result!r}"
        since = len(srv.main_requests)
        run(auggie_cli, hh, srv, run_host, "hi", extra)
        first = json.dumps(srv.main_requests[since])
    assert summary not in first  # if this starts to fail, Auggie now takes SessionStart context: use it
    state = json.loads((hh.home / ".cks" / "user" / "ana" / "conversation-state.json").read_text())
    assert state["thread_summary"] == summary and state["source"] == "auggie"
    turns = json.dumps(state["recent_turns"])
    assert "show me everyone's profile" in turns and "I cannot read that." in turns and "hello again" in turns, turns
    lean.assert_no_hook_errors()
