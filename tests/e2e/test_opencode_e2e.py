"""End to end with the real OpenCode CLI (`opencode run`) and its fork Kilo Code (`kilo run`), offline
against the fake Chat Completions server: init (plugin + MCP entry) -> one scripted run -> the
record names the session the host reported -> the second ctx_read of the session is a stub, a new
session gets content -> doctor passes -> uninstall gives the user's files back byte for byte. Each
test runs on every host of the family (`FAMILY`): the same config, the host's own names.

A tap plugin of the test's own (a foreign plugin beside ours) logs, in the OpenCode process, each
event our plugin forwards and each ctx_read call: the recorded trace for the replay bench.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from leanctx import agents
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
  // "bash" too: Kilo 7.7.7 adds `"bash": "allow"` to a user config whose permission lacks it, once
  "permission": {"*": "allow", "bash": "allow"},
}
"""

# The OpenCode family: agent name -> the prefix of its environment switches (OPENCODE_DISABLE_…)
FAMILY = {"opencode": "OPENCODE", "kilo": "KILO"}


class Host:
    """One host of the family: its module (the names: config folder and file, project folder),
    its CLI, and the environment that keeps it offline."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.agent = agents.get(name)
        self.display = self.agent.display_name
        self.cli = _cli(self.agent.binaries[0])
        self.read = READ

    def config_dir(self, hh):
        return hh.home / ".config" / self.agent.config_folder

    def config_file(self, folder):
        return folder / self.agent.config_files[0]

    def project_plugins(self, hh):
        return hh.proj / self.agent.project_folder / "plugins"


@pytest.fixture(params=list(FAMILY))
def oc_host(request):
    return Host(request.param)


@pytest.fixture
def opencode_cli():
    return _cli("opencode")


def oc_env(hh, lean, host: str = "opencode") -> dict:
    prefix = FAMILY[host]
    return hostcli.base_env(hh.home, {
        **lean.host_env,
        **{f"{prefix}_DISABLE_{switch}": "1" for switch in ("MODELS_FETCH", "AUTOUPDATE", "DEFAULT_PLUGINS", "SHARE", "LSP_DOWNLOAD")},
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


def run_opencode(cli, hh, lean, run_host, prompt: str, *extra: str, host: str = "opencode", env: dict | None = None):
    env = env or oc_env(hh, lean, host)
    cp, _ = run_host([cli, "run", prompt, "--format", "json", *extra], cwd=hh.proj, env=env, timeout=TIMEOUT)
    assert cp.returncode == 0, f"{host} run -> {cp.returncode}\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}"
    return cp


def test_opencode_plugin_publishes_the_session_and_second_read_is_a_stub(oc_host, host_home, lean, run_host):
    hh, host = host_home, oc_host
    content = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
    (hh.proj / "big.py").write_text(content)
    config_dir = host.config_dir(hh)
    plugins = config_dir / "plugins"
    plugins.mkdir(parents=True)
    tap_log = hh.root / "tap.jsonl"
    tap = plugins / "tap.js"
    tap.write_text(TAP_PLUGIN.replace("@LOG@", json.dumps(str(tap_log))).replace("@READ@", READ))
    first, second = function_call(READ, {"path": "big.py"}), function_call(READ, {"path": "big.py"})
    again = function_call(READ, {"path": "big.py"})
    offered, systems = [], []

    def turn(item):
        def build(body: dict):
            offered.append(READ in {(t.get("function") or {}).get("name") for t in body.get("tools") or []})
            systems.append(" ".join(str(m.get("content")) for m in body.get("messages") or [] if m.get("role") == "system"))
            return item
        return build

    with FakeOpenAI(script=[turn(first), turn(second), turn("Read it twice."), turn(again), turn("Read it again.")],
                    model="fake-model") as srv:
        config = host.config_file(config_dir)
        config.write_text(USER_CONFIG.replace("@URL@", srv.base_url))
        before = {p: p.read_bytes() for p in (config, tap)}
        lean.run("init", "--agent", host.name)
        assert (plugins / "leanctx.js").exists()
        assert "// the user's own settings" in config.read_text()
        cp = run_opencode(host.cli, hh, lean, run_host, "read big.py twice", host=host.name)
        reported = hostcli.printed_ids(cp.stdout, "sessionID")
        assert len(reported) == 1, cp.stdout[-2000:]
        out = chat_results(srv)
        assert offered and all(offered), f"{host.display} did not offer leanctx_ctx_read to the model"
        # the read rule init put in the config folder's AGENTS.md reaches the model
        assert all("Read files with the `ctx_read` tool" in text for text in systems), systems[0][-2000:]
        assert "def function_199" in out[first["call_id"]], out
        assert out[second["call_id"]].startswith("[unchanged]"), out[second["call_id"]][:300]
        records = lean.records(host.name)
        rec = lean.only_record(host.name)
        assert rec["conversation_id"] == rec["session_id"] == next(iter(reported)), (records, reported)
        assert rec["cwd"] == str(hh.proj) and rec["last_event"] == "session.idle" and rec["stopped_at"]
        # our plugin's hooks and the MCP server ran under the same host process
        assert rec["host"]["pid"] and rec["host"]["name"], rec["host"]
        lean.assert_no_hook_errors()
        # a second `run` is a new session and a new process: content again
        cp2 = run_opencode(host.cli, hh, lean, run_host, "read big.py again", host=host.name)
        assert hostcli.printed_ids(cp2.stdout, "sessionID") - reported, "the second run reused the session"
        assert "def function_199" in chat_results(srv)[again["call_id"]]
        assert len(lean.records(host.name)) == 2
    # the model's call id is the test's, not the MCP server's: this host sends the server no call id
    # (its `_meta` holds only a progressToken), so the replay must not see one either
    trace = [dict(e, call_id=None) if e["op"] == "read" else e
             for e in tracetap.tap_trace(tap_log, hh.proj, {"big.py": content}, host.name, read_of)]
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], f"{host.name}-two-sessions", host=host.display, source=__file__)
    code, report = lean.doctor(host.name)
    assert code == 0 and report["agents"][0]["ok"], json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", host.name)
    assert {p: p.read_bytes() for p in (config, tap)} == before
    assert sorted(os.listdir(plugins)) == ["tap.js"]
    assert "leanctx" not in config.read_text()
    assert not (config_dir / "AGENTS.md").exists()


def test_opencode_project_install_runs_from_the_project_and_uninstall_restores(oc_host, host_home, lean, run_host):
    """`init --project`: the plugin in <proj>/.opencode/plugins (Kilo: .kilo/plugins), the MCP
    entry in <proj>/opencode.json (kilo.jsonc), calling `leanctx-hook`/`leanctx` from PATH; the
    host loads both from the project."""
    hh, host = host_home, oc_host
    (hh.proj / "a.txt").write_text("hello from the project\n")
    read = function_call(READ, {"path": "a.txt"})
    bindir = os.path.dirname(sys.executable)
    with FakeOpenAI(script=[read, "done"], model="fake-model") as srv:
        config_dir = host.config_dir(hh)
        config_dir.mkdir(parents=True)
        host.config_file(config_dir).write_text(USER_CONFIG.replace("@URL@", srv.base_url))
        project_config = host.config_file(hh.proj)
        # with "$schema" already there: OpenCode adds it to a project opencode.json that lacks it
        project_config.write_text('{\n  "$schema": "https://opencode.ai/config.json",\n  // project settings\n  "share": "disabled"\n}\n')
        before = project_config.read_bytes()
        lean.run("init", "--agent", host.name, "--project", str(hh.proj))
        assert (host.project_plugins(hh) / "leanctx.js").exists()
        env = dict(oc_env(hh, lean, host.name), PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
        cp, _ = run_host([host.cli, "run", "read a.txt", "--format", "json"], cwd=hh.proj, env=env, timeout=TIMEOUT)
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert "hello from the project" in chat_results(srv)[read["call_id"]]
    rec = lean.only_record(host.name)
    assert rec["conversation_id"] in hostcli.printed_ids(cp.stdout, "sessionID")
    lean.run("uninstall", "--agent", host.name, "--project", str(hh.proj))
    assert project_config.read_bytes() == before
    # .opencode/ also holds what OpenCode itself put there (.gitignore, package.json): only our plugin goes
    assert not host.project_plugins(hh).exists() and not (hh.proj / "AGENTS.md").exists()


def test_opencode_after_an_auto_compaction_the_next_read_is_content(oc_host, host_home, lean, run_host):
    """The fake reports a prompt near the model's context limit on the answer after the first
    read: OpenCode 1.18.33 drops that answer's tool call, compacts on its own (awaiting
    `experimental.session.compacting`, which our plugin forwards), continues, and the model's
    next read of the file is content, not the stub; the read after it is the stub. Kilo 7.7.7 the same."""
    hh, host = host_home, oc_host
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

    config_dir = host.config_dir(hh)
    config_dir.mkdir(parents=True)
    with FakeOpenAI(script=[first, dropped, after, again, "done"], model="fake-model", chat_usage=usage) as srv:
        config = USER_CONFIG.replace("@URL@", srv.base_url).replace(
            '"tool_call": true}', '"tool_call": true, "limit": {"context": 20000, "output": 2000}}')
        host.config_file(config_dir).write_text(config)
        lean.run("init", "--agent", host.name)
        run_opencode(host.cli, hh, lean, run_host, "read big.py", host=host.name)
        out = chat_results(srv)
        summaries = [r for r in srv.log if isinstance(r.body, dict) and "context summarization agent" in json.dumps(r.body)]
    assert len(summaries) == 1, f"{host.display} did not compact"
    rec = lean.only_record(host.name)
    # counted twice: experimental.session.compacting (awaited before the summary) and the
    # session.compacted bus event after it
    assert rec["compactions"] == 2, rec
    assert "def function_199" in out[first["call_id"]]
    assert dropped["call_id"] not in out  # the compaction came first
    assert "def function_199" in out[after["call_id"]], out[after["call_id"]][:300]
    assert out[again["call_id"]].startswith("[unchanged]"), out[again["call_id"]][:300]


def test_opencode_guard_refuses_a_read_of_another_users_folder_with_the_reason(oc_host, host_home, lean, run_host, tmp_path):
    """`init --guard`: the plugin's `tool.execute.before` throws the guard's reason for the host's
    own `read` of another user's file; the host skips the tool and hands the model that message
    as the call's result. A read of a file of the project still runs."""
    hh, host = host_home, oc_host
    users = tmp_path / "cks" / "user"
    (users / "bob").mkdir(parents=True)
    (users / "bob" / "notes.md").write_text("bob's secret notes\n")
    (hh.proj / "mine.txt").write_text("the project's own file\n")
    theirs = function_call("read", {"filePath": str(users / "bob" / "notes.md")})
    ours = function_call("read", {"filePath": str(hh.proj / "mine.txt")})
    with FakeOpenAI(script=[theirs, ours, "done"], model="fake-model") as srv:
        config_dir = host.config_dir(hh)
        config_dir.mkdir(parents=True)
        host.config_file(config_dir).write_text(USER_CONFIG.replace("@URL@", srv.base_url))
        lean.run("init", "--agent", host.name, "--guard")
        env = dict(oc_env(hh, lean, host.name), CKS_HOME=str(tmp_path / "cks"), CKS_ACTIVE_USER="ana")
        run_opencode(host.cli, hh, lean, run_host, "read two files", host=host.name, env=env)
        out = chat_results(srv)
    assert "secret" not in out[theirs["call_id"]] and "bob" in out[theirs["call_id"]], out
    assert "the project's own file" in out[ours["call_id"]], out
    lean.assert_no_hook_errors()
    lean.run("uninstall", "--agent", host.name)


def test_opencode_bot_profile_hands_a_new_session_the_thread(oc_host, host_home, lean, run_host, tmp_path):
    """`init --bot`: each prompt is recorded (the family's plugin events carry no reply), and the
    next `run`, a new session, gets the thread in its system prompt (the plugin's
    `experimental.chat.system.transform`), once."""
    hh, host = host_home, oc_host
    seen = []

    def answer(text):
        def build(body: dict):
            seen.append(body)
            return text
        return build

    with FakeOpenAI(script=[answer("The blue mug, size M."), answer("It is 12 euros.")], model="fake-model") as srv:
        config_dir = host.config_dir(hh)
        config_dir.mkdir(parents=True)
        host.config_file(config_dir).write_text(USER_CONFIG.replace("@URL@", srv.base_url))
        lean.run("init", "--agent", host.name, "--bot")
        env = dict(oc_env(hh, lean, host.name), CKS_HOME=str(tmp_path / "cks"), CKS_ACTIVE_USER="ana")
        for prompt in ("which mug did I pick", "and the price"):
            run_opencode(host.cli, hh, lean, run_host, prompt, host=host.name, env=env)
    first, second = (json.dumps(b["messages"]) for b in seen)
    assert "[leanctx conversation state]" not in first
    assert second.count("[leanctx conversation state]") == 1 and "which mug did I pick" in second, second[-3000:]
    lean.assert_no_hook_errors()
    lean.run("uninstall", "--agent", host.name)


def test_opencode_first_start_after_init_keeps_the_hosts_permission_defaults(oc_host, host_home, lean, run_host):
    """On a fresh HOME, init creates the host's user config (the MCP entry). Kilo 7.7.7 runs a
    one-time migration on its first start: a user config without a bash permission rule gets
    `"permission": {"bash": "allow"}`, then it writes `~/.config/kilo/.bash-permission-migrated`
    (with no config it writes only that marker). init writes the marker with the config it
    creates, so the first `run` leaves our file as it was (but for the host's "$schema"). The
    fake model's provider is in the project's config, which the migration
    does not read."""
    hh, host = host_home, oc_host
    config_dir = host.config_dir(hh)
    config = host.config_file(config_dir)
    markers = [config_dir / name for name in host.agent.first_start_markers]
    with FakeOpenAI(script=["hello"], model="fake-model") as srv:
        provider = USER_CONFIG.replace("@URL@", srv.base_url).replace(',\n  "permission": {"*": "allow", "bash": "allow"}', "")
        host.config_file(hh.proj).write_text(provider)
        lean.run("init", "--agent", host.name)
        assert config.exists() and all(m.read_bytes() == b"" for m in markers)
        ours = json.loads(config.read_text())
        run_opencode(host.cli, hh, lean, run_host, "say hello", host=host.name)
        assert len(srv.log) >= 1
    # the host adds only its "$schema" (OpenCode 1.18.33 and Kilo 7.7.7 both do); no "permission"
    after = json.loads(config.read_text())
    assert "permission" not in after and {k: v for k, v in after.items() if k != "$schema"} == ours, after
    lean.run("uninstall", "--agent", host.name)
    # the host's "$schema" keeps the file (it is no longer what init wrote), so the marker stays
    # with it: the host's own state for that config, as its first start would have left it
    assert not config.exists() or json.loads(config.read_text()).keys() == {"$schema"}
    assert all(m.exists() == config.exists() for m in markers)
