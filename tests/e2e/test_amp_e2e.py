"""End to end with the real Amp CLI (`@ampcode/cli` 0.0.1790142911-g7618fb) where it runs offline.

Amp runs no model session offline: its agent loop is a thread actor on ampcode.com, reached over
a websocket (tests/e2e/amp_harness.py), so there is no `amp -x` run here. What is real:
- `amp mcp list --json` reads our `amp.mcpServers` entry from the settings file init edited
  (comments and a trailing comma kept); with its account API answered on 127.0.0.1,
  `amp tools list` starts our MCP server and offers `mcp__leanctx__ctx_read`, `amp mcp doctor`
  says it is connected and `amp plugins list` loads our plugin with the events it listens to;
- `amp plugins exec` runs our plugin in Amp's plugin runtime under a real Amp process: the record
  names Amp's thread id, its host is that Amp process (the runtime walked past);
- Amp's own plugin runtime runs our plugin with this test in the Amp process's place (the thread's
  events, `thread.messages`), and our MCP server is this test's child as it is Amp's: the read
  gate hands ctx_read its call id, the second read of a thread is the stub, another thread gets
  content, a compaction of the thread's view makes the next read content, the model's own
  `leanctx_call_id` never passes; then doctor passes and uninstall gives every byte back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from leanctx.installer import jsonc
from tests.e2e import hostcli
from tests.e2e.amp_harness import FakeAmpApi, McpClient, PluginHost, runtime_script
from tests.e2e.conftest import _cli

pytestmark = pytest.mark.e2e

T1 = "T-11111111-1111-4111-8111-111111111111"
T2 = "T-22222222-2222-4222-8222-222222222222"
READ = "mcp__leanctx__ctx_read"
SETTINGS = '{\n  // my Amp settings\n  "amp.notifications.enabled": false,\n  "amp.mcpServers": {\n    "other": {"command": "other-mcp", "args": []},\n  },\n}\n'


@pytest.fixture
def amp_cli():
    return _cli("amp")


def amp_env(hh, lean, **more: str) -> dict:
    return hostcli.base_env(hh.home, {**lean.host_env, **more})


def run_amp(amp: str, args: list, hh, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    cp = subprocess.run([amp, *args], cwd=str(hh.proj), env=env, capture_output=True, text=True, timeout=timeout,
                        stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, f"amp {' '.join(args)} -> {cp.returncode}\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}"
    return cp


def user_message(mid: str, text: str) -> dict:
    return {"role": "user", "id": mid, "content": [{"type": "text", "text": text}]}


def read_call(mid: str, call: str, path: str) -> dict:
    return {"role": "assistant", "id": mid, "content": [{"type": "tool_use", "id": call, "name": READ, "input": {"path": path}}]}


def result_of(mid: str, call: str) -> dict:
    return {"role": "user", "id": mid, "content": [{"type": "tool_result", "toolUseID": call, "status": "done"}]}


def test_amp_reads_our_settings_entry_and_loads_our_plugin(amp_cli, host_home, lean):
    hh = host_home
    settings = hh.home / ".config" / "amp" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(SETTINGS)
    lean.run("init", "--agent", "amp")
    env = amp_env(hh, lean)
    listed = json.loads(run_amp(amp_cli, ["mcp", "list", "--json"], hh, env).stdout)
    ours = next(s for s in listed if s["name"] == "leanctx")
    assert ours["source"] == "global" and ours["spec"]["args"] == ["mcp"] and ours["spec"]["command"] == str(lean.wrapper)
    assert {s["name"] for s in listed} == {"leanctx", "other"}
    api = FakeAmpApi()
    try:
        online = dict(env, AMP_URL=api.url, AMP_API_KEY="sgamp_test")
        tools = run_amp(amp_cli, ["tools", "list"], hh, online).stdout
        assert READ in tools, tools
        assert "leanctx (user settings): connected (1 tools: ctx_read)" in run_amp(amp_cli, ["mcp", "doctor", "leanctx"], hh, online).stdout
        plugins = run_amp(amp_cli, ["plugins", "list"], hh, online).stdout
        assert "leanctx.js active" in plugins and "events: session.start, agent.start, agent.end, tool.call" in plugins, plugins
    finally:
        api.close()
    assert not any(p.startswith("/api/thread") for p in api.paths), api.paths  # no thread was asked for


def test_amp_runs_the_plugin_and_the_record_names_its_thread_and_process(amp_cli, host_home, lean):
    hh = host_home
    lean.run("init", "--agent", "amp", "--project", str(hh.proj))
    plugin = hh.proj / ".amp" / "plugins" / "leanctx.js"
    env = amp_env(hh, lean, PATH=f"{lean.wrapper.parent}:{os.environ['PATH']}")  # a project's plugin runs `leanctx-hook` from PATH
    proc = subprocess.Popen([amp_cli, "plugins", "exec", str(plugin), "session.start", "--data", json.dumps({"thread": {"id": T1}})],
                            cwd=str(hh.proj), env=env, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    rec = lean.only_record("amp")
    assert rec["conversation_id"] == rec["session_id"] == T1 and rec["source"] == "startup"
    assert rec["host"]["pid"] == proc.pid, (rec["host"], proc.pid)  # the Amp process, past its plugin runtime
    lean.assert_no_hook_errors()


def test_amp_plugin_runtime_read_gate_stub_new_thread_and_compaction(amp_cli, host_home, lean, tmp_path):
    hh = host_home
    content = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(120))
    (hh.proj / "big.py").write_text(content)
    settings = hh.home / ".config" / "amp" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(SETTINGS)
    agents_md = hh.home / ".config" / "amp" / "AGENTS.md"
    before = {settings: settings.read_bytes()}
    lean.run("init", "--agent", "amp")
    plugin = hh.home / ".config" / "amp" / "plugins" / "leanctx.js"
    env = amp_env(hh, lean)
    runtime = runtime_script(amp_cli, tmp_path, env)
    host = PluginHost(amp_cli, runtime, plugin, env, hh.proj, tmp_path / "plugin-runtime.log")
    entry = jsonc.loads(settings.read_text())["amp.mcpServers"]["leanctx"]
    mcp = McpClient([entry["command"], *entry["args"]], hh.proj, env)
    try:
        host.event("session.start", {"thread": {"id": T1}})
        assert host.request("agent.start", {"thread": {"id": T1}, "message": "read big.py twice", "id": "m1"}) == {}
        host.threads[T1] = [user_message("m1", "read big.py twice"), read_call("m2", "toolu_1", "big.py")]
        # the model's own id under our argument never reaches the server
        got = host.request("tool.call", {"thread": {"id": T1}, "toolUseID": "toolu_1", "tool": READ,
                                         "input": {"path": "big.py", "leanctx_call_id": "toolu_forged"}})
        assert got == {"action": "modify", "input": {"path": "big.py", "leanctx_call_id": "toolu_1"}}, got
        first = mcp.read(got["input"])
        assert "def function_119" in first
        host.threads[T1] += [result_of("m3", "toolu_1"), read_call("m4", "toolu_2", "big.py")]
        got = host.request("tool.call", {"thread": {"id": T1}, "toolUseID": "toolu_2", "tool": READ, "input": {"path": "big.py"}})
        second = mcp.read(got["input"])
        assert second.startswith("[unchanged]"), second[:300]
        # the read gate noted both calls in the thread's record, before they ran
        rec = lean.records("amp")[T1]
        assert set(rec["read_calls"]) == {"toolu_1", "toolu_2"} and rec["cwd"] == str(hh.proj)
        assert rec["host"]["pid"] == os.getpid()  # this process stands for Amp: past the runtime, as the server's parent
        # another thread of the same Amp process: content
        host.event("session.start", {"thread": {"id": T2}})
        host.threads[T2] = [user_message("n1", "read it"), read_call("n2", "toolu_3", "big.py")]
        got = host.request("tool.call", {"thread": {"id": T2}, "toolUseID": "toolu_3", "tool": READ, "input": {"path": "big.py"}})
        assert "def function_119" in mcp.read(got["input"])
        # Amp compacted T1 (no plugin event): its view now opens with the summary, so the next read is content
        host.threads[T1] = [user_message("s1", "Summary of the thread so far"), read_call("m5", "toolu_4", "big.py")]
        got = host.request("tool.call", {"thread": {"id": T1}, "toolUseID": "toolu_4", "tool": READ, "input": {"path": "big.py"}})
        assert "def function_119" in mcp.read(got["input"])
        assert lean.records("amp")[T1]["compactions"] == 2  # its first read in this process, then the compaction
        host.threads[T1] += [result_of("m6", "toolu_4"), read_call("m7", "toolu_5", "big.py")]
        got = host.request("tool.call", {"thread": {"id": T1}, "toolUseID": "toolu_5", "tool": READ, "input": {"path": "big.py"}})
        assert mcp.read(got["input"]).startswith("[unchanged]")
        # an id no read gate noted (the model forging one through a call that skipped the plugin) is no stub
        assert "def function_119" in mcp.read({"path": "big.py", "leanctx_call_id": "toolu_never_noted"})
        # without --guard, other tools pass untouched and run no hook
        assert host.request("tool.call", {"thread": {"id": T1}, "toolUseID": "toolu_6", "tool": "Bash",
                                          "input": {"cmd": "ls"}}) == {"action": "allow"}
        host.request("agent.end", {"thread": {"id": T1}, "message": "read big.py twice", "id": "m1", "status": "done",
                                   "messages": [{"role": "assistant", "id": "m8", "content": [{"type": "text", "text": "Done."}]}]})
        assert lean.records("amp")[T1]["stopped_at"]
        lean.assert_no_hook_errors()
    finally:
        mcp.close()
        host.close()
    code, report = lean.doctor("amp")
    assert code == 0 and report["agents"][0]["ok"], json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", "amp")
    assert {p: p.read_bytes() for p in before} == before
    assert not plugin.exists() and not agents_md.exists()


def test_amp_guard_refuses_with_the_reason_in_amps_runtime(amp_cli, host_home, lean, tmp_path, bobs_secret):
    """`init --guard`: the plugin answers Amp's tool.call for a read of another user's file with
    `reject-and-continue` and the guard's reason; a call of the project's own passes."""
    hh = host_home
    lean.run("init", "--agent", "amp", "--guard")
    plugin = hh.home / ".config" / "amp" / "plugins" / "leanctx.js"
    env = amp_env(hh, lean, CKS_HOME=str(hh.home / ".cks"), CKS_ACTIVE_USER="ana")
    host = PluginHost(amp_cli, runtime_script(amp_cli, tmp_path, env), plugin, env, hh.proj, tmp_path / "plugin-runtime.log")
    try:
        host.event("session.start", {"thread": {"id": T1}})
        theirs = host.request("tool.call", {"thread": {"id": T1}, "toolUseID": "toolu_1", "tool": "Read",
                                            "input": {"path": str(hh.home / ".cks" / "user" / "bob" / "profile.md")}})
        assert theirs["action"] == "reject-and-continue" and "bob" in theirs["message"] and bobs_secret not in theirs["message"], theirs
        assert host.request("tool.call", {"thread": {"id": T1}, "toolUseID": "toolu_2", "tool": "Read",
                                          "input": {"path": str(hh.proj / "a.txt")}}) == {"action": "allow"}
    finally:
        host.close()
    lean.run("uninstall", "--agent", "amp")


def test_amp_bot_profile_records_the_turns_and_hands_the_thread_to_a_new_threads_first_prompt(amp_cli, host_home, lean, tmp_path):
    """`init --bot`: in Amp's runtime the plugin records the person's prompt and the turn's reply,
    and a new thread's first prompt gets the thread back as the `agent.start` message Amp appends
    to the user's message (not shown); the thread's next prompt gets nothing more."""
    hh = host_home
    lean.run("init", "--agent", "amp", "--bot")
    plugin = hh.home / ".config" / "amp" / "plugins" / "leanctx.js"
    env = amp_env(hh, lean, CKS_HOME=str(hh.home / ".cks"), CKS_ACTIVE_USER="ana")
    host = PluginHost(amp_cli, runtime_script(amp_cli, tmp_path, env), plugin, env, hh.proj, tmp_path / "plugin-runtime.log")
    try:
        host.event("session.start", {"thread": {"id": T1}})
        host.request("agent.start", {"thread": {"id": T1}, "message": "which mug?", "id": "m1"})
        host.request("agent.end", {"thread": {"id": T1}, "message": "which mug?", "id": "m1", "status": "done",
                                   "messages": [user_message("m1", "which mug?"),
                                                {"role": "assistant", "id": "m2", "content": [{"type": "text", "text": "Blue, size M."}]}]})
        host.event("session.start", {"thread": {"id": T2}})
        first = host.request("agent.start", {"thread": {"id": T2}, "message": "hello again", "id": "n1"})
        assert first["message"]["display"] is False and "Blue, size M." in first["message"]["content"], first
        assert host.request("agent.start", {"thread": {"id": T2}, "message": "one more", "id": "n3"}) == {}
    finally:
        host.close()
    cp = subprocess.run([sys.executable, "-m", "leanctx", "state", "show", "--json"], env=lean.env({"CKS_HOME": str(hh.home / ".cks"), "CKS_ACTIVE_USER": "ana"}),
                        capture_output=True, text=True, timeout=60)
    turns = [(t["role"], t["text"]) for t in json.loads(cp.stdout)["recent_turns"]]
    assert turns[:2] == [("user", "which mug?"), ("agent", "Blue, size M.")] and ("user", "hello again") in turns, turns
    lean.run("uninstall", "--agent", "amp")
