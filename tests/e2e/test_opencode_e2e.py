"""End to end with the real OpenCode CLI (`opencode run`), offline against the fake Chat Completions
server: init (plugin + MCP entry) -> one scripted run -> the record names the session OpenCode
reported -> the second ctx_read of the session is a stub, a new session gets content -> doctor
passes -> uninstall gives the user's files back byte for byte.

A tap plugin of the test's own (a foreign plugin beside ours) logs, in the OpenCode process, each
event our plugin forwards and each ctx_read call: the recorded trace for the replay bench.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.e2e import hostcli, tracetap
from tests.e2e.conftest import _cli
from tests.e2e.fake_openai import FakeOpenAI, chat_results, function_call

pytestmark = pytest.mark.e2e

READ = "leanctx_ctx_read"  # OpenCode names an MCP tool <server>_<tool>
TIMEOUT = 150.0

TAP_PLUGIN = r'''
import fs from "node:fs";
const LOG = @LOG@;
const EVENTS = new Set(["session.created", "session.idle", "session.compacted"]);
function log(event, payload) {
  fs.appendFileSync(LOG, JSON.stringify({ t: Date.now() / 1000, event, host: process.pid, payload }) + "\n");
}
export const Tap = async (ctx) => ({
  event: async ({ event }) => { if (EVENTS.has(event.type)) log(event.type, { hook_event_name: event.type, cwd: ctx.directory, event }); },
  "chat.message": async (input) => log("chat.message", { hook_event_name: "chat.message", cwd: ctx.directory, input }),
  "tool.execute.before": async (input, output) => {
    if (input.tool === "@READ@") log("read", { input, args: output.args });
  },
});
'''

USER_CONFIG = """{
  // the user's own settings: comments and keys must survive init and uninstall
  "$schema": "https://opencode.ai/config.json",
  "provider": {
    "fake": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "Fake",
      "options": {"baseURL": "@URL@", "apiKey": "sk-fake"},
      "models": {"fake-model": {"name": "Fake Model", "tool_call": true}},
    },
  },
  "model": "fake/fake-model",
  "autoupdate": false,
  "share": "disabled",
  "permission": {"*": "allow"},
}
"""


@pytest.fixture
def opencode_cli():
    return _cli("opencode")


def oc_env(hh, lean) -> dict:
    return hostcli.base_env(hh.home, {
        **lean.host_env,
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        # OpenCode npm-installs @opencode-ai/plugin into every folder it loads plugins from, in the
        # background (verified on 1.18.33); offline mode and a closed port on 127.0.0.1 make that fail
        # at once instead of reaching the registry (or retrying for minutes), and
        # the plugins load all the same
        "npm_config_registry": "http://127.0.0.1:9/",
        "npm_config_offline": "true",
    })


def read_of(entry: dict):
    """A tap entry that is a ctx_read, in OpenCode's words (the tool call's sessionID and callID)."""
    if entry["event"] != "read":
        return None
    p = entry["payload"]
    return {"conv": p["input"]["sessionID"], "args": p.get("args") or {}, "call_id": p["input"].get("callID")}


def run_opencode(cli, hh, lean, run_host, prompt: str, *extra: str):
    cp, _ = run_host([cli, "run", prompt, "--format", "json", *extra], cwd=hh.proj, env=oc_env(hh, lean), timeout=TIMEOUT)
    assert cp.returncode == 0, f"opencode run -> {cp.returncode}\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}"
    return cp


def test_opencode_plugin_publishes_the_session_and_second_read_is_a_stub(opencode_cli, host_home, lean, run_host):
    hh = host_home
    content = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
    (hh.proj / "big.py").write_text(content)
    config_dir = hh.home / ".config" / "opencode"
    plugins = config_dir / "plugins"
    plugins.mkdir(parents=True)
    tap_log = hh.root / "tap.jsonl"
    tap = plugins / "tap.js"
    tap.write_text(TAP_PLUGIN.replace("@LOG@", json.dumps(str(tap_log))).replace("@READ@", READ))
    first, second = function_call(READ, {"path": "big.py"}), function_call(READ, {"path": "big.py"})
    again = function_call(READ, {"path": "big.py"})
    offered = []

    def turn(item):
        def build(body: dict):
            offered.append(READ in {(t.get("function") or {}).get("name") for t in body.get("tools") or []})
            return item
        return build

    with FakeOpenAI(script=[turn(first), turn(second), turn("Read it twice."), turn(again), turn("Read it again.")],
                    model="fake-model") as srv:
        config = config_dir / "opencode.json"
        config.write_text(USER_CONFIG.replace("@URL@", srv.base_url))
        before = {p: p.read_bytes() for p in (config, tap)}
        lean.run("init", "--agent", "opencode")
        assert (plugins / "leanctx.js").exists()
        assert "// the user's own settings" in config.read_text()
        cp = run_opencode(opencode_cli, hh, lean, run_host, "read big.py twice")
        reported = hostcli.printed_ids(cp.stdout, "sessionID")
        assert len(reported) == 1, cp.stdout[-2000:]
        out = chat_results(srv)
        assert offered and all(offered), "OpenCode did not offer leanctx_ctx_read to the model"
        assert "def function_199" in out[first["call_id"]], out
        assert out[second["call_id"]].startswith("[unchanged]"), out[second["call_id"]][:300]
        records = lean.records("opencode")
        rec = lean.only_record("opencode")
        assert rec["conversation_id"] == rec["session_id"] == next(iter(reported)), (records, reported)
        assert rec["cwd"] == str(hh.proj) and rec["last_event"] == "session.idle" and rec["stopped_at"]
        # our plugin's hooks and the MCP server ran under the same OpenCode process
        assert rec["host"]["pid"] and rec["host"]["name"], rec["host"]
        lean.assert_no_hook_errors()
        # a second `opencode run` is a new session and a new process: content again
        cp2 = run_opencode(opencode_cli, hh, lean, run_host, "read big.py again")
        assert hostcli.printed_ids(cp2.stdout, "sessionID") - reported, "the second run reused the session"
        assert "def function_199" in chat_results(srv)[again["call_id"]]
        assert len(lean.records("opencode")) == 2
    # the model's call id is the test's, not the MCP server's: this host sends the server no call id
    # (its `_meta` holds only a progressToken), so the replay must not see one either
    trace = [dict(e, call_id=None) if e["op"] == "read" else e
             for e in tracetap.tap_trace(tap_log, hh.proj, {"big.py": content}, "opencode", read_of)]
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], "opencode-two-sessions", host="OpenCode", source=__file__)
    code, report = lean.doctor("opencode")
    assert code == 0 and report["agents"][0]["ok"], json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", "opencode")
    assert {p: p.read_bytes() for p in (config, tap)} == before
    assert sorted(os.listdir(plugins)) == ["tap.js"]
    assert "leanctx" not in (config_dir / "opencode.json").read_text()
    assert not (config_dir / "AGENTS.md").exists()


def test_opencode_project_install_runs_from_the_project_and_uninstall_restores(opencode_cli, host_home, lean, run_host):
    """`init --project`: the plugin in <proj>/.opencode/plugins, the MCP entry in <proj>/opencode.json,
    calling `leanctx-hook`/`leanctx` from PATH; OpenCode loads both from the project."""
    hh = host_home
    (hh.proj / "a.txt").write_text("hello from the project\n")
    read = function_call(READ, {"path": "a.txt"})
    bindir = os.path.dirname(sys.executable)
    with FakeOpenAI(script=[read, "done"], model="fake-model") as srv:
        config_dir = hh.home / ".config" / "opencode"
        config_dir.mkdir(parents=True)
        (config_dir / "opencode.json").write_text(USER_CONFIG.replace("@URL@", srv.base_url))
        project_config = hh.proj / "opencode.json"
        # with "$schema" already there: OpenCode adds it to a project opencode.json that lacks it
        project_config.write_text('{\n  "$schema": "https://opencode.ai/config.json",\n  // project settings\n  "share": "disabled"\n}\n')
        before = project_config.read_bytes()
        lean.run("init", "--agent", "opencode", "--project", str(hh.proj))
        assert (hh.proj / ".opencode" / "plugins" / "leanctx.js").exists()
        env = dict(oc_env(hh, lean), PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
        cp, _ = run_host([opencode_cli, "run", "read a.txt", "--format", "json"], cwd=hh.proj, env=env, timeout=TIMEOUT)
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert "hello from the project" in chat_results(srv)[read["call_id"]]
    rec = lean.only_record("opencode")
    assert rec["conversation_id"] in hostcli.printed_ids(cp.stdout, "sessionID")
    lean.run("uninstall", "--agent", "opencode", "--project", str(hh.proj))
    assert project_config.read_bytes() == before
    # .opencode/ also holds what OpenCode itself put there (.gitignore, package.json): only our plugin goes
    assert not (hh.proj / ".opencode" / "plugins").exists() and not (hh.proj / "AGENTS.md").exists()


def test_opencode_after_an_auto_compaction_the_next_read_is_content(opencode_cli, host_home, lean, run_host):
    """The fake reports a prompt near the model's context limit on the answer after the first
    read: OpenCode 1.18.33 drops that answer's tool call, compacts on its own (awaiting
    `experimental.session.compacting`, which our plugin forwards), continues, and the model's
    next read of the file is content, not the stub; the read after it is the stub."""
    hh = host_home
    content = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
    (hh.proj / "big.py").write_text(content)
    first, dropped, after, again = (function_call(READ, {"path": "big.py"}) for _ in range(4))
    mains = []

    def usage(kind: str, body: dict):
        if kind != "main":
            return None
        mains.append(1)
        if len(mains) == 2:  # the answer after the first read: the window is full
            return {"prompt_tokens": 19000, "completion_tokens": 5, "total_tokens": 19005}
        return None

    config_dir = hh.home / ".config" / "opencode"
    config_dir.mkdir(parents=True)
    with FakeOpenAI(script=[first, dropped, after, again, "done"], model="fake-model", chat_usage=usage) as srv:
        config = USER_CONFIG.replace("@URL@", srv.base_url).replace(
            '"tool_call": true}', '"tool_call": true, "limit": {"context": 20000, "output": 2000}}')
        (config_dir / "opencode.json").write_text(config)
        lean.run("init", "--agent", "opencode")
        run_opencode(opencode_cli, hh, lean, run_host, "read big.py")
        out = chat_results(srv)
        summaries = [r for r in srv.log if isinstance(r.body, dict) and "context summarization agent" in json.dumps(r.body)]
    assert len(summaries) == 1, "OpenCode did not compact"
    rec = lean.only_record("opencode")
    # counted twice: experimental.session.compacting (awaited before the summary) and the
    # session.compacted bus event after it
    assert rec["compactions"] == 2, rec
    assert "def function_199" in out[first["call_id"]]
    assert dropped["call_id"] not in out  # the compaction came first
    assert "def function_199" in out[after["call_id"]], out[after["call_id"]][:300]
    assert out[again["call_id"]].startswith("[unchanged]"), out[again["call_id"]][:300]
