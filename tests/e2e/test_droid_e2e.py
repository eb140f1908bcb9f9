"""End to end: `leanctx init --agent droid`, then the real Factory Droid CLI (`droid exec`) offline.

Droid 0.215.0 runs with a BYOK custom model (`customModels` in ~/.factory/settings.json, the
user's own key, kept by init and uninstall) against tests/e2e/fake_chat.py on 127.0.0.1. Its MCP
tools are deferred and named `<server>___<tool>`: the scripted model loads ctx_read with
`ToolSearch` (as the read rule says), waiting with a shell `sleep` while our server still starts
(Droid does not wait for MCP servers).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.e2e import hostcli, tracetap
from tests.e2e.conftest import CLI_TIMEOUT
from tests.e2e.fake_chat import FakeChat, tool_call, tool_names

pytestmark = pytest.mark.e2e

CODE = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
READ = "leanctx___ctx_read"


def droid_env(home, extra: dict | None = None) -> dict:
    """Offline: every outbound request but the fake model's (127.0.0.1) goes to a closed port."""
    return hostcli.base_env(home, {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
                                   "NO_PROXY": "127.0.0.1,localhost", **(extra or {})})


def byok_settings(base_url: str) -> dict:
    return {"customModels": [{"model": "fake-model", "displayName": "fake", "baseUrl": base_url + "/v1", "apiKey": "sk-fake",
                              "provider": "generic-chat-completion-api", "maxOutputTokens": 4096}]}


class WhenLoaded:
    """Loads ctx_read with ToolSearch (after a short shell sleep while Droid reports it not found:
    our server is still starting), then plays `script`, one item per request."""

    def __init__(self, script: list) -> None:
        self.script, self.i, self.tries = script, 0, 0

    def __call__(self, body: dict):
        if READ not in tool_names(body) and self.tries < 12:
            self.tries += 1
            if self.tries % 2:
                return tool_call("ToolSearch", {"query": f"select:{READ}"})
            return tool_call("Execute", {"summary": "Wait for servers to start", "command": "sleep 1",
                                         "riskLevel": {"value": "low", "reason": "only waits"}})
        item = self.script[self.i] if self.i < len(self.script) else "done"
        self.i += 1
        return item


def run(cli, hh, run_host, prompt="read big.py"):
    cp, pid = run_host([cli, "exec", "-m", "custom:fake-0", "--skip-permissions-unsafe", prompt], cwd=hh.proj,
                       env=droid_env(hh.home))
    assert cp.returncode == 0, cp.stderr[-3000:]
    return cp, pid


def test_droid_run_publishes_its_session_and_the_second_read_is_a_stub(droid_cli, host_home, lean, mcp_probe, run_host):
    hh = host_home
    (hh.proj / "big.py").write_text(CODE)
    first, second, third = (tool_call(READ, {"path": "big.py"}) for _ in range(3))
    with FakeChat(script=[WhenLoaded([first, second, "done reading"])] * 30) as srv:
        factory = hh.home / ".factory"
        factory.mkdir()
        settings = factory / "settings.json"
        settings.write_text(json.dumps(byok_settings(srv.base_url), indent=4))
        probe = {"type": "stdio", "command": mcp_probe.argv[0], "args": mcp_probe.argv[1:]}
        (factory / "mcp.json").write_text(json.dumps({"mcpServers": {"probe": probe}}) + "\n")
        before = {p: p.read_bytes() for p in (settings, factory / "mcp.json")}

        lean.run("init", "--agent", "droid")
        assert "ToolSearch" in (factory / "AGENTS.md").read_text()
        wired = settings.read_bytes()
        tap = tracetap.install_tap(settings, hh.root, agent="droid")
        cp, pid = run(droid_cli, hh, run_host)
        assert cp.stdout.strip() == "done reading"
        out = srv.tool_results()
        assert "def function_199" in out[first["id"]], out
        assert out[second["id"]].startswith("[unchanged]") and "big.py" in out[second["id"]], out[second["id"]][:300]

        # --- what leanctx published: the session Droid reported (its transcript file's name) ---
        lean.assert_no_hook_errors()
        rec = lean.only_record("droid")
        session = rec["session_id"]
        assert rec["conversation_id"] == session
        assert [str(p) for p in (factory / "sessions").glob(f"*/{session}.jsonl")] == [rec["transcript_path"]]
        assert rec["cwd"] == str(hh.proj) and rec["source"] == "startup"
        assert rec["stopped_at"] and rec["ended_at"] and rec["last_event"] == "SessionEnd"
        assert rec["host"]["pid"] == pid and rec["host"]["name"] == "droid"
        starts = mcp_probe.starts()
        assert starts and {s["parent"]["pid"] for s in starts} == {pid}, "the user's server must still start, under the host"

        # --- a new session gets the content again ---
        srv.script = [WhenLoaded([third, "again"])] * 30
        srv._next = 0
        run(droid_cli, hh, run_host, "read it again")
        assert "def function_199" in srv.tool_results()[third["id"]]
        later = [r for r in lean.records("droid") if r != session]
        assert len(later) == 1

    trace = tracetap.to_trace(tap, hh.proj, {"big.py": CODE}, agent="droid", call_ids=False)
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], "droid-two-sessions", host="Factory Droid", source=__file__)

    settings.write_bytes(wired)  # the test's tap out again
    rc, report = lean.doctor("droid")
    assert rc == 0 and report["ok"] is True, json.dumps(report, indent=2)
    assert report["agents"][0]["last_published"]["session_id"] == later[0]
    lean.run("uninstall", "--agent", "droid")
    for path, data in before.items():
        assert path.read_bytes() == data, f"uninstall did not restore {path}"
    assert not (factory / "AGENTS.md").exists()


def test_droid_project_install_is_loaded_and_uninstall_restores(droid_cli, host_home, lean, run_host):
    """`init --project`: hooks in `.factory/settings.json`, our server in `.factory/mcp.json`,
    the rule in `.factory/AGENTS.md`; Droid loads all three from the project folder."""
    hh = host_home
    (hh.proj / "big.py").write_text(CODE)
    read = tool_call(READ, {"path": "big.py"})
    with FakeChat(script=[WhenLoaded([read, "done"])] * 30) as srv:
        factory = hh.home / ".factory"
        factory.mkdir()
        (factory / "settings.json").write_text(json.dumps(byok_settings(srv.base_url)))
        project_settings = hh.proj / ".factory" / "settings.json"
        project_settings.parent.mkdir()
        project_settings.write_text('{"model": "custom:fake-0"}\n')
        before = project_settings.read_bytes()
        lean.run("init", "--agent", "droid", "--project", str(hh.proj))
        assert not (factory / "mcp.json").exists() and "hooks" not in json.loads((factory / "settings.json").read_text())
        scripts = os.path.dirname(sys.executable)  # this installation's `leanctx` and `leanctx-hook`
        cp, pid = run_host([droid_cli, "exec", "-m", "custom:fake-0", "--skip-permissions-unsafe", "read big.py"], cwd=hh.proj,
                           env=droid_env(hh.home, {**lean.host_env, "PATH": f"{scripts}:{os.environ['PATH']}"}))
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert "def function_199" in srv.tool_results().get(read["id"], ""), srv.tool_results()
    lean.assert_no_hook_errors()
    rec = lean.only_record("droid")
    assert rec["host"]["pid"] == pid and rec["last_event"] == "SessionEnd"
    lean.run("uninstall", "--agent", "droid", "--project", str(hh.proj))
    assert project_settings.read_bytes() == before
    assert sorted(p.name for p in (hh.proj / ".factory").iterdir()) == ["settings.json"]


def test_droid_guard_and_bot_in_the_real_host(droid_cli, host_home, lean, run_host, bobs_secret):
    """`--bot --guard` on Droid: the guard's deny (Claude's `permissionDecision` form) keeps an
    Execute of another user's folder from running and tells the model why; the bot's SessionStart
    context (`hookSpecificOutput.additionalContext`) reaches the next session's first request."""
    hh = host_home
    leanctx = f"{sys.executable} -m leanctx"
    summary = "Setting up the Telegram bot for ana."
    peek = tool_call("Execute", {"summary": "Show every user profile", "command": "cat ~/.cks/user/*/profile.md",
                                 "riskLevel": {"value": "low", "reason": "reads files"}})
    note = tool_call("Execute", {"summary": "Save the thread summary", "command": f"{leanctx} state summary '{summary}'",
                                 "riskLevel": {"value": "low", "reason": "writes a note"}})
    with FakeChat(script=[peek, note, "I cannot read that.", "hello again"]) as srv:
        factory = hh.home / ".factory"
        factory.mkdir()
        (factory / "settings.json").write_text(json.dumps(byok_settings(srv.base_url)))
        lean.run("init", "--agent", "droid", "--bot", "--guard")
        env = droid_env(hh.home, {"CKS_ACTIVE_USER": "ana"})
        cp, _ = run_host([droid_cli, "exec", "-m", "custom:fake-0", "--skip-permissions-unsafe", "show me everyone's profile"],
                         cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr[-3000:]
        result = srv.tool_results()[peek["id"]]
        assert bobs_secret not in result, "the guard let the model read another user's file"
        assert "leanctx guard" in result, f"the model was not told why the call was denied: {result!r}"
        since = len(srv.log)
        cp, _ = run_host([droid_cli, "exec", "-m", "custom:fake-0", "--skip-permissions-unsafe", "hi"], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr[-3000:]
        first = json.dumps([r.body["messages"] for r in srv.log[since:] if r.kind == "main"][0])
    assert summary in first, "the new session was not given the thread"
    # `droid exec` fires no UserPromptSubmit and its Stop carries no reply text: no turn is recorded
    state = json.loads((hh.home / ".cks" / "user" / "ana" / "conversation-state.json").read_text())
    assert state["recent_turns"] == []
    lean.assert_no_hook_errors()


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"], ids=["plain", "bom"])
def test_droid_ignores_a_settings_or_mcp_file_that_starts_with_a_byte_order_mark(droid_cli, host_home, run_host, bom):
    """Why Droid's json_bom_ok is False (and init warns about such a file): with the mark, Droid
    0.215 sees neither the custom model of settings.json nor the servers of mcp.json."""
    hh = host_home
    factory = hh.home / ".factory"
    factory.mkdir()
    (factory / "mcp.json").write_bytes(bom + b'{"mcpServers": {"docs": {"type": "stdio", "command": "docs-mcp", "args": []}}}\n')
    listed = subprocess.run([droid_cli, "mcp", "list"], cwd=hh.proj, env=droid_env(hh.home), capture_output=True,
                            text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
    assert ("docs" in listed.stdout) is not bool(bom), listed.stdout + listed.stderr
    with FakeChat(script=["hello"] * 3) as srv:
        (factory / "settings.json").write_bytes(bom + json.dumps(byok_settings(srv.base_url)).encode())
        cp, _ = run_host([droid_cli, "exec", "-m", "custom:fake-0", "--skip-permissions-unsafe", "hi"], cwd=hh.proj,
                         env=droid_env(hh.home))
    assert (cp.returncode == 0 and "hello" in cp.stdout) is not bool(bom), cp.stdout[-500:] + cp.stderr[-500:]
