"""OpenClaw: what our plugin sends the hook command, one bot thread per session key through the
real hook command, the plugin's registration in openclaw.json (in place, refusals, byte-identical
uninstall), and the plugin itself run by node with a stand-in for OpenClaw's plugin API (`api.on`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.base import PRE_COMPACT, PRE_TOOL, PROMPT, SESSION_END, SESSION_START, STOP, SUBAGENT_START
from tests.conftest import run_cli

AGENT = agents.get("openclaw")
ANA = "agent:main:telegram:direct:111"
BOB = "agent:main:telegram:direct:222"
CONFIG = """{
  // the gateway of a shop bot
  "gateway": { "mode": "local", "port": 18789 },
  "plugins": {
    "allow": ["telegram"], // only these load
  },
  "channels": { "telegram": { "enabled": true } },
}
"""


def sent(event: str, key: str = ANA, session: str = "s-ana-1", **more: object) -> dict:
    """What the plugin sends for `event` (templates/openclaw-plugin.mjs: fire)."""
    return {"hook_event_name": event, "session_id": session, "session_key": key, "cwd": "/home/u/.openclaw/workspace", **more}


def test_the_plugins_payloads_normalize() -> None:
    prompt = AGENT.normalize("before_prompt_build", sent("before_prompt_build", prompt="hi", message_id="telegram:111:7", trigger="user"))
    assert (prompt.kind, prompt.prompt, prompt.thread_key, prompt.message_id, prompt.session_id) == (
        PROMPT, "hi", ANA, "telegram:111:7", "s-ana-1")
    # a heartbeat's or cron job's prompt is not the person's message
    assert AGENT.normalize("before_prompt_build", sent("before_prompt_build", prompt="tick", trigger="heartbeat")).prompt is None
    recovery = sent("before_prompt_build", prompt="[System] Your previous turn was interrupted", trigger="user", provenance="internal_system")
    assert AGENT.normalize("before_prompt_build", recovery).prompt is None
    assert AGENT.normalize("agent_end", sent("agent_end", last_assistant_message="ok")).reply == "ok"
    assert AGENT.normalize("agent_end", sent("agent_end")).kind == STOP
    assert AGENT.normalize("before_compaction", sent("before_compaction")).kind == PRE_COMPACT
    # after a compaction or a `/new` the model holds nothing of before: a start from a compaction
    for start in ("after_compaction", "session_start"):
        ev = AGENT.normalize(start, sent(start, source="resume"))
        assert (ev.kind, ev.source) == (SESSION_START, "compact")
    # `/new` keeps the session id and empties its transcript: a context loss, not an end
    assert AGENT.normalize("before_reset", sent("before_reset")).kind == PRE_COMPACT
    assert AGENT.normalize("session_end", sent("session_end")).kind == SESSION_END
    sub = AGENT.normalize("subagent_spawned", sent("subagent_spawned", agent_id="agent:main:subagent:1"))
    assert (sub.kind, sub.subagent_id) == (SUBAGENT_START, "agent:main:subagent:1")
    call = AGENT.normalize("before_tool_call", sent("before_tool_call", tool_name="leanctx__ctx_read", tool_input={"path": "a"}))
    assert call.kind == PRE_TOOL and AGENT.is_read_tool(call.tool_name) and not AGENT.is_read_tool("read")
    odd = AGENT.normalize("before_prompt_build", {"session_key": 5, "message_id": ["x"]})
    assert odd.thread_key is None and odd.message_id is None


def test_answers_the_plugin_takes() -> None:
    deny = AGENT.guard_output("before_tool_call", "no")
    assert json.loads(deny) == {"decision": "deny", "reason": "no"} and AGENT.check_output("before_tool_call", deny) is None
    ctx = AGENT.context_output("before_prompt_build", "thread")
    assert json.loads(ctx) == {"context": "thread"} and AGENT.check_output("before_prompt_build", ctx) is None
    assert AGENT.context_output("session_start", "thread") == ""  # an observe hook: nothing reaches the model
    assert AGENT.check_output("agent_end", "") is None and AGENT.check_output("agent_end", '{"x": 1}') is not None


# -- one thread per session key, through the real hook command ---------------------------------
def hook(event: str, env: dict, **payload: object) -> str:
    proc = run_cli("hook", "openclaw", event, "--bot", input=json.dumps(sent(event, **payload)), env=env)
    assert proc.returncode == 0 and proc.stderr == "", proc
    return proc.stdout


def context(out: str) -> str:
    return json.loads(out)["context"] if out else ""


def thread(user_key: str, env: dict) -> dict:
    proc = run_cli("state", "show", "--channel", "openclaw", "--user", user_key, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def bot_env(home: Path, tmp_path: Path) -> dict:
    env = dict(os.environ, CKS_HOME=str(tmp_path / "cks"))
    env.pop("CKS_ACTIVE_USER", None)
    env.pop("LEANCTX_CHANNEL_SENDER", None)
    return env


def test_two_people_keep_two_threads_and_a_redelivered_message_counts_once(bot_env: dict) -> None:
    hook("before_prompt_build", bot_env, prompt="I'd like the blue one", message_id="telegram:111:1", trigger="user")
    hook("before_prompt_build", bot_env, key=BOB, session="s-bob-1", prompt="cancel my order", message_id="telegram:222:1", trigger="user")
    hook("agent_end", bot_env, last_assistant_message="Blue it is. Size?")
    hook("agent_end", bot_env, key=BOB, session="s-bob-1", last_assistant_message="Cancelled.")
    # the gateway was killed mid-turn and re-runs Ana's next message from its queue: same id
    for _ in range(2):
        hook("before_prompt_build", bot_env, prompt="M", message_id="telegram:111:2", trigger="user")
    hook("agent_end", bot_env, last_assistant_message="M noted.")
    ana, bob = thread(ANA, bot_env), thread(BOB, bot_env)
    assert [(t["role"], t["text"]) for t in ana["recent_turns"]] == [
        ("user", "I'd like the blue one"), ("agent", "Blue it is. Size?"), ("user", "M"), ("agent", "M noted.")]
    assert [(t["role"], t["text"]) for t in bob["recent_turns"]] == [("user", "cancel my order"), ("agent", "Cancelled.")]
    assert "cancel" not in json.dumps(ana) and "blue" not in json.dumps(bob)


def test_the_thread_comes_back_in_a_new_session_and_after_compaction_never_stacking(bot_env: dict) -> None:
    assert context(hook("before_prompt_build", bot_env, prompt="first", message_id="m1", trigger="user")) == ""  # nothing yet
    hook("agent_end", bot_env, last_assistant_message="reply one")
    # same session (the gateway restarted: OpenClaw keeps the transcript under the key): no copy
    for n in range(10):
        assert "reply one" not in context(hook("before_prompt_build", bot_env, prompt=f"again {n}", message_id=f"r{n}", trigger="user"))
        hook("agent_end", bot_env, last_assistant_message=f"reply again {n}")
    # `/new` or the daily reset: a new session id under the same key gets the thread
    fresh = context(hook("before_prompt_build", bot_env, session="s-ana-2", prompt="back", message_id="m2", trigger="user"))
    assert "reply again 9" in fresh and fresh.count("reply again 9") == 1
    hook("agent_end", bot_env, session="s-ana-2", last_assistant_message="welcome back")
    assert "welcome back" not in context(hook("before_prompt_build", bot_env, session="s-ana-2", prompt="x", message_id="m3", trigger="user"))
    hook("agent_end", bot_env, session="s-ana-2", last_assistant_message="x done")
    # the first prompt after a compaction carries the thread again
    assert "x done" in context(hook("before_prompt_build", bot_env, session="s-ana-2", prompt="y", message_id="m4", trigger="user", source="compact"))
    # `/new` on OpenClaw 2026.9.6: session_start under the SAME session id, the transcript empty
    hook("agent_end", bot_env, session="s-ana-2", last_assistant_message="y done")
    assert "y done" not in context(hook("before_prompt_build", bot_env, session="s-ana-2", prompt="z", message_id="m5", trigger="user"))
    hook("session_start", bot_env, session="s-ana-2", source="resume")
    handed = context(hook("before_prompt_build", bot_env, session="s-ana-2", prompt="after new", message_id="m6", trigger="user"))
    assert "y done" in handed and handed.count("y done") == 1
    assert "y done" not in context(hook("before_prompt_build", bot_env, session="s-ana-2", prompt="again", message_id="m7", trigger="user"))
    # and Bob's first message never sees Ana's thread
    assert "welcome back" not in context(hook("before_prompt_build", bot_env, key=BOB, session="s-ana-2", prompt="hello", message_id="b1", trigger="user"))


def test_what_records_nothing(bot_env: dict, data_dir: Path) -> None:
    hook("before_prompt_build", bot_env, prompt="heartbeat check", trigger="heartbeat")
    hook("before_prompt_build", bot_env, key="", prompt="who am I", trigger="user")
    hook("before_prompt_build", bot_env, key="   ", prompt="who am I", trigger="user")
    assert run_cli("state", "list", "--json", env=bot_env).stdout.strip() in ("[]", "")
    log = (data_dir / "logs" / "hooks.log").read_text()
    assert "names no session key" in log


def test_a_cks_active_user_never_reaches_a_keyed_thread(bot_env: dict) -> None:
    env = dict(bot_env, CKS_ACTIVE_USER=ANA)
    hook("before_prompt_build", env, prompt="mine", message_id="z1", trigger="user")
    assert run_cli("state", "show", "--user", ANA, "--json", env=bot_env).stdout.count("mine") == 0
    assert [t["text"] for t in thread(ANA, bot_env)["recent_turns"]] == ["mine"]


# -- init / uninstall --------------------------------------------------------------------------
def config_file(home: Path) -> Path:
    return home / ".openclaw" / "openclaw.json"


def test_init_registers_in_place_and_uninstall_gives_back_every_byte(home: Path, data_dir: Path) -> None:
    config_file(home).parent.mkdir()
    config_file(home).write_text(CONFIG)
    proc = run_cli("init", "--agent", "openclaw", "--bot", "--guard")
    assert proc.returncode == 0, proc.stderr
    text = config_file(home).read_text()
    assert "// the gateway of a shop bot" in text and "// only these load" in text
    from leanctx.installer import jsonc

    value = jsonc.loads(text)
    plugin = str(home / ".openclaw" / "leanctx")
    assert value["plugins"]["allow"] == ["telegram", "leanctx"]
    assert value["plugins"]["load"]["paths"] == [plugin]
    assert value["plugins"]["entries"]["leanctx"] == {"enabled": True, "hooks": {"allowConversationAccess": True}}
    assert value["mcp"]["servers"]["leanctx"]["args"][:1] == ["mcp"]
    assert value["gateway"] == {"mode": "local", "port": 18789}
    assert "leanctx-hooks: " in (Path(plugin) / "index.mjs").read_text()
    manifest = jsonc.loads((Path(plugin) / "openclaw.plugin.json").read_text())  # JSON5 to OpenClaw: our marker is a comment
    assert manifest["id"] == "leanctx" and sorted(manifest["contracts"]["tools"]) == [
        "leanctx_state_clear_pending", "leanctx_state_pending", "leanctx_state_show", "leanctx_state_summary"]
    again = run_cli("init", "--agent", "openclaw", "--bot", "--guard")
    assert again.returncode == 0 and config_file(home).read_text() == text
    assert run_cli("uninstall", "--agent", "openclaw").returncode == 0
    assert config_file(home).read_text() == CONFIG and not (home / ".openclaw" / "leanctx").exists()


def test_uninstall_after_the_user_edited_keeps_their_edit(home: Path, data_dir: Path) -> None:
    config_file(home).parent.mkdir()
    config_file(home).write_text(CONFIG)
    assert run_cli("init", "--agent", "openclaw").returncode == 0
    edited = config_file(home).read_text().replace('"port": 18789', '"port": 18790')
    config_file(home).write_text(edited)
    assert run_cli("uninstall", "--agent", "openclaw").returncode == 0
    assert config_file(home).read_text() == CONFIG.replace('"port": 18789', '"port": 18790')


def test_a_fresh_state_dir_is_created_and_removed(home: Path, data_dir: Path, tmp_path: Path) -> None:
    state = tmp_path / "oc-state"
    env = dict(os.environ, OPENCLAW_STATE_DIR=str(state))
    assert run_cli("init", "--agent", "openclaw", env=env).returncode == 0
    assert (state / "openclaw.json").exists() and (state / "leanctx" / "index.mjs").exists()
    assert run_cli("uninstall", "--agent", "openclaw", env=env).returncode == 0
    assert not (state / "openclaw.json").exists() and not (state / "leanctx").exists()


@pytest.mark.parametrize(("config", "said"), [
    ('{"plugins": {"deny": ["leanctx"]}}\n', "plugins.deny lists 'leanctx'"),
    ('{"plugins": {"entries": {"leanctx": {"enabled": false}}}}\n', "plugins.entries.leanctx exists and is not leanctx's"),
    ('{"plugins": {"load": {"paths": "x"}}}\n', "plugins.load.paths is a JSON str, expected a list"),
    ('{"plugins": []}\n', "plugins is not an object"),
    ("{\n  plugins: {},\n}\n", "openclaw.json:2:3: cannot parse"),  # JSON5's unquoted key
    ("{'a': 1}\n", "openclaw.json:1:2: cannot parse"),
])
def test_what_init_refuses_writing_nothing(home: Path, data_dir: Path, config: str, said: str) -> None:
    config_file(home).parent.mkdir()
    config_file(home).write_text(config)
    proc = run_cli("init", "--agent", "openclaw", "--bot")
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert config_file(home).read_text() == config and not (home / ".openclaw" / "leanctx").exists()


def test_doctor_names_settings_that_keep_the_plugin_out(home: Path, data_dir: Path) -> None:
    from leanctx.installer.openclaw_checks import load_problems

    def read(text: str):
        return lambda path: text.encode()

    names = lambda text: sorted(p["name"] for p in load_problems(AGENT, home, None, read(text)))  # noqa: E731
    ok = '{"plugins": {"allow": ["leanctx"], "entries": {"leanctx": {"enabled": true, "hooks": {"allowConversationAccess": true}}}}}'
    assert names(ok) == []
    assert names('{"plugins": {"enabled": false}}') == ["openclaw plugins enabled"]
    assert names('{"plugins": {"allow": ["telegram"], "deny": ["leanctx"]}}') == ["openclaw plugin allowed", "openclaw plugin not denied"]
    assert names('{"plugins": {"entries": {"leanctx": {"enabled": false, "hooks": {"allowPromptInjection": false}}}}}') == [
        "openclaw conversation hooks", "openclaw plugin enabled", "openclaw prompt context"]
    # with the bot profile installed, OpenClaw's default one-session-for-every-DM merges people's threads
    assert run_cli("init", "--agent", "openclaw", "--bot").returncode == 0
    plugin = (home / ".openclaw" / "leanctx" / "index.mjs").read_bytes()
    both = lambda text: (lambda p: plugin if p.name == "index.mjs" else text.encode())  # noqa: E731
    from leanctx.installer.openclaw_checks import session_scope

    shared = session_scope(AGENT, home, both(ok))
    assert shared["status"] == "fail" and 'set session.dmScope to "per-channel-peer"' in shared["fix"]
    per_peer = ok[:-1] + ', "session": {"dmScope": "per-channel-peer"}}'
    assert session_scope(AGENT, home, both(per_peer))["status"] == "ok"
    assert run_cli("init", "--agent", "openclaw").returncode == 0  # the coding profile keeps no threads
    coding = (home / ".openclaw" / "leanctx" / "index.mjs").read_bytes()
    assert session_scope(AGENT, home, lambda p: coding if p.name == "index.mjs" else ok.encode()) is None


# -- the plugin itself, run by node with a stand-in for OpenClaw's plugin API ---------------------
NODE = shutil.which("node")
DRIVER = r"""
import { pathToFileURL } from "node:url";
const [plugin, calls] = [process.argv[2], JSON.parse(process.argv[3])];
const mod = await import(pathToFileURL(plugin).href);
const handlers = {};
mod.default.register({ on: (name, f) => { handlers[name] = f; } });
const out = [{ id: mod.default.id, events: Object.keys(handlers).sort() }];
for (const [name, event, ctx] of calls) {
  try { out.push({ name, result: (await handlers[name](event, ctx)) ?? null }); }
  catch (e) { out.push({ name, threw: String(e && e.message) }); }
}
console.log(JSON.stringify(out));
process.exit(0);
"""


def drive(plugin: Path, calls: list, env: dict, tmp: Path) -> list:
    driver = tmp / "driver.mjs"
    driver.write_text(DRIVER)
    proc = subprocess.run([NODE, str(driver), str(plugin), json.dumps(calls)], capture_output=True, text=True, timeout=90, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def ctx(key: str = ANA, session: str = "s-ana-1", **more: object) -> dict:
    return {"sessionKey": key, "sessionId": session, "workspaceDir": "/tmp", "trigger": "user", **more}


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_plugin_sends_the_channels_message_id_the_reply_and_compaction(home: Path, data_dir: Path, bot_env: dict, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", "openclaw", "--bot", env=bot_env).returncode == 0
    plugin = home / ".openclaw" / "leanctx" / "index.mjs"
    turn = [["message_received", {"from": "111", "content": "hi", "messageId": "7", "sessionKey": ANA}, {"channelId": "telegram", "conversationId": "telegram:111"}],
            ["before_prompt_build", {"prompt": "wrapped hi", "currentUserMessage": "hi", "currentUserMessageId": "adm-1", "messages": []}, ctx()],
            ["agent_end", {"success": True, "messages": [{"role": "user", "content": "hi"},
                                                         {"role": "assistant", "content": [{"type": "text", "text": "Hello Ana"}]}]}, ctx()]]
    out = drive(plugin, turn + turn, bot_env, tmp_path)  # the same message run twice (a redelivery)
    assert out[0]["id"] == "leanctx" and "before_prompt_build" in out[0]["events"] and "message_received" in out[0]["events"]
    assert all("threw" not in r for r in out), out
    turns = thread(ANA, bot_env)["recent_turns"]
    assert [(t["role"], t["text"], t.get("message_id")) for t in turns] == [
        ("user", "hi", "telegram:111:7"), ("agent", "Hello Ana", None), ("agent", "Hello Ana", None)]
    # a failed run records no reply; after a compaction the next prompt gets the thread back
    out = drive(plugin, [["agent_end", {"success": False, "messages": [{"role": "assistant", "content": "half"}]}, ctx()],
                         ["after_compaction", {"messageCount": 3, "compactedCount": 9}, ctx()],
                         ["before_prompt_build", {"prompt": "next", "currentUserMessage": "next", "messages": []}, ctx()]], bot_env, tmp_path)
    assert "half" not in json.dumps(thread(ANA, bot_env))
    assert "Hello Ana" in out[3]["result"]["appendContext"], out


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_plugins_guard_blocks_with_the_reason_and_without_guard_only_ctx_read_is_asked(home: Path, data_dir: Path, bot_env: dict, tmp_path: Path) -> None:
    users = Path(bot_env["CKS_HOME"]) / "user"
    (users / "bob").mkdir(parents=True)
    assert run_cli("init", "--agent", "openclaw", "--bot", "--guard", env=bot_env).returncode == 0
    plugin = home / ".openclaw" / "leanctx" / "index.mjs"
    out = drive(plugin, [["before_tool_call", {"toolName": "read", "params": {"path": str(users / "bob" / "x.md")}, "toolCallId": "c1"}, ctx()],
                         ["before_tool_call", {"toolName": "read", "params": {"path": "/tmp/a.txt"}, "toolCallId": "c2"}, ctx()]], bot_env, tmp_path)
    assert out[1]["result"]["block"] is True and "bob" in out[1]["result"]["blockReason"], out
    assert out[2]["result"] is None
    # leanctx gone (the wrapper removed): every handler still returns, nothing blocked or thrown
    (data_dir / "bin" / "leanctx-hook").unlink()
    out = drive(plugin, [["before_tool_call", {"toolName": "read", "params": {"path": str(users / "bob" / "x.md")}}, ctx()],
                         ["before_prompt_build", {"prompt": "p", "messages": []}, ctx()]], bot_env, tmp_path)
    assert all(r.get("result") is None and "threw" not in r for r in out[1:]), out


def test_the_state_tools_act_on_the_sessions_own_thread(bot_env: dict) -> None:
    def tool(op: str, key: str = ANA, **args: object) -> dict:
        return json.loads(hook("state_tool", bot_env, key=key, tool_name=op, tool_input=args))

    assert tool("pending", question="Blue or red?", options=["blue", "red"]) == {
        "text": "Saved: the person's next message will be recorded as the answer."}
    assert "Blue or red?" in tool("show")["text"] and "Blue or red?" not in tool("show", key=BOB)["text"]
    hook("agent_end", bot_env, last_assistant_message="Blue or red?")  # the reply that asked it arms it
    answered = context(hook("before_prompt_build", bot_env, prompt="red", message_id="m9", trigger="user"))
    assert "Blue or red?" in answered and "red" in answered
    assert tool("summary", text="Wants the red one.") == {"text": "Summary saved."}
    assert "Wants the red one." in tool("show")["text"]
    # bad input: a clear error, nothing written
    before = thread(ANA, bot_env)
    assert "question" in tool("pending", question=7)["error"]
    assert "the question is empty" in tool("pending", question="  ")["error"]
    assert "unknown state tool" in tool("drop_table")["error"]
    assert "no session key" in tool("show", key=" ")["error"]
    assert thread(ANA, bot_env) == before


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_plugin_offers_the_state_tools_only_to_a_session_with_a_key(home: Path, data_dir: Path, bot_env: dict, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", "openclaw", "--bot", env=bot_env).returncode == 0
    plugin = home / ".openclaw" / "leanctx" / "index.mjs"
    driver = tmp_path / "tools.mjs"
    driver.write_text(r"""
import { pathToFileURL } from "node:url";
const mod = await import(pathToFileURL(process.argv[2]).href);
let factory = null;
let opts = null;
mod.default.register({ on: () => {}, registerTool: (f, o) => { factory = f; opts = o; } });
const none = factory({});
const tools = factory({ sessionKey: process.argv[3], sessionId: "s1", workspaceDir: "/tmp" });
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
const saved = await byName.leanctx_state_pending.execute("c1", { question: "Size?", options: ["S", "M"] });
let refused = null;
try { await byName.leanctx_state_pending.execute("c2", { question: "" }); } catch (e) { refused = e.message; }
const shown = await byName.leanctx_state_show.execute("c3", {});
console.log(JSON.stringify({ none, declared: opts.names.slice().sort(), names: Object.keys(byName).sort(), saved: saved.content[0].text, refused, shown: shown.content[0].text }));
""")
    proc = subprocess.run([NODE, str(driver), str(plugin), BOB], capture_output=True, text=True, timeout=90, env=bot_env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["none"] is None
    assert out["names"] == out["declared"] == ["leanctx_state_clear_pending", "leanctx_state_pending", "leanctx_state_show", "leanctx_state_summary"]
    assert out["saved"].startswith("Saved") and "empty" in out["refused"] and "Size?" in out["shown"]
    assert thread(BOB, bot_env)["pending"]["question"] == "Size?" and thread(ANA, bot_env).get("pending") is None


def test_a_reset_voids_the_read_credits_of_that_conversation_only(home: Path, data_dir: Path, bot_env: dict) -> None:
    """`/new` on 2026.9.6 keeps the session id: the read cache's key stays, so the reset must move
    the compaction counter (what the cache held for it is re-sent once), and only that one's."""
    def record(session: str) -> dict:
        return json.loads((data_dir / "conversations" / "openclaw" / f"{session}.json").read_text())

    env = dict(bot_env, LEANCTX_HOME=str(data_dir))
    for key, session in ((ANA, "s-ana-1"), (BOB, "s-bob-1")):
        proc = run_cli("hook", "openclaw", "before_prompt_build", input=json.dumps(
            sent("before_prompt_build", key=key, session=session, prompt="hi", trigger="user")), env=env)
        assert proc.returncode == 0, proc
    assert record("s-ana-1")["compactions"] == 0
    for event in ("session_end", "session_start", "before_reset"):  # the order OpenClaw fires them on `/new`
        proc = run_cli("hook", "openclaw", event, input=json.dumps(sent(event, reason="new")), env=env)
        assert proc.returncode == 0 and proc.stdout == "", proc
    ana = record("s-ana-1")
    assert ana["compactions"] >= 1 and "ended_at" not in ana
    assert record("s-bob-1")["compactions"] == 0
    # before_reset alone (session_start's hook lost) is enough
    proc = run_cli("hook", "openclaw", "before_reset", input=json.dumps(sent("before_reset", reason="reset")), env=env)
    assert proc.returncode == 0 and record("s-ana-1")["compactions"] == ana["compactions"] + 1


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_plugin_hands_ctx_read_its_call_id_and_nothing_the_model_put_there(home: Path, data_dir: Path, bot_env: dict, tmp_path: Path) -> None:
    """OpenClaw sends its MCP servers no id for a call: the plugin puts the id its read gate noted
    into ctx_read's arguments (mcpserver.CALL_ID_ARG), replacing whatever the model wrote there."""
    assert run_cli("init", "--agent", "openclaw", env=bot_env).returncode == 0
    plugin = home / ".openclaw" / "leanctx" / "index.mjs"
    read = "leanctx__ctx_read"
    out = drive(plugin, [
        ["before_tool_call", {"toolName": read, "params": {"path": "a.md"}, "toolCallId": "tool_search_code:c1:leanctx__ctx_read:1"}, ctx()],
        ["before_tool_call", {"toolName": read, "params": {"path": "a.md", "leanctx_call_id": "someone-elses"}, "toolCallId": "c2"}, ctx()],
        ["before_tool_call", {"toolName": read, "params": {"path": "a.md", "leanctx_call_id": "someone-elses"}}, ctx()],
        ["before_tool_call", {"toolName": "read", "params": {"path": "a.md"}, "toolCallId": "c3"}, ctx()],
    ], bot_env, tmp_path)
    assert [r["result"] for r in out[1:]] == [
        {"params": {"path": "a.md", "leanctx_call_id": "tool_search_code:c1:leanctx__ctx_read:1"}},
        {"params": {"path": "a.md", "leanctx_call_id": "c2"}},
        {"params": {"path": "a.md"}},
        None]
    # the read gate noted each named call in Ana's conversation record, before the call ran
    calls = json.loads((data_dir / "conversations" / "openclaw" / "s-ana-1.json").read_text())["read_calls"]
    assert set(calls) == {"tool_search_code:c1:leanctx__ctx_read:1", "c2"}


def test_the_mcp_server_takes_the_call_id_argument_and_refuses_other_unknown_ones() -> None:
    from leanctx.cache.mcpserver import ToolFailure, call_tool

    class Backend:
        def read(self, path, start, end, fresh, call_id=None):  # noqa: ANN001, ANN202
            self.got = (path, call_id)
            return {"kind": "full", "text": "x"}

    b = Backend()
    assert call_tool(b, "coding", "ctx_read", {"path": "a.md", "leanctx_call_id": "c1"}, None) == ("x", False)
    assert b.got == ("a.md", "arg:c1")  # marked: it counts only where the plugin writes it (scope.CALL_ID_IN_ARGS)
    call_tool(b, "coding", "ctx_read", {"path": "a.md", "leanctx_call_id": "c1"}, {"callId": "meta-1"})
    assert b.got == ("a.md", "meta-1")  # an id the host sends in _meta wins
    call_tool(b, "coding", "ctx_read", {"path": "a.md", "leanctx_call_id": 5}, None)
    assert b.got == ("a.md", None)
    with pytest.raises(ToolFailure, match="other"):
        call_tool(b, "coding", "ctx_read", {"path": "a.md", "other": 1}, None)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_host_of_a_process_openclaws_supervisor_started_is_the_gateway(tmp_path: Path) -> None:
    """OpenClaw 2026.9.6 starts MCP servers through node relays of its own (spawn broker, relay,
    anchor): walked past, the server's host is the process that started them, as for the hooks."""
    import sys

    from leanctx.hooks.hostproc import process_stat

    sup = tmp_path / "openclaw" / "dist" / "process" / "supervisor"
    sup.mkdir(parents=True)
    (sup / "service-child-relay.js").write_text(
        "const { spawnSync } = require('node:child_process');\n"
        "const r = spawnSync(process.argv[2], ['-c', 'import json, sys; from leanctx.hooks.hostproc import host_process; "
        "print(json.dumps(host_process()))'], { stdio: ['ignore', 'pipe', 'inherit'] });\n"
        "process.stdout.write(r.stdout);\n")
    (tmp_path / "other.js").write_text((sup / "service-child-relay.js").read_text())
    me = {"pid": os.getpid(), "name": process_stat(os.getpid())[0], "start_ticks": process_stat(os.getpid())[2]}
    relayed = subprocess.run([NODE, str(sup / "service-child-relay.js"), sys.executable], capture_output=True, text=True, timeout=60)
    assert json.loads(relayed.stdout) == me, relayed.stderr
    other = subprocess.run([NODE, str(tmp_path / "other.js"), sys.executable], capture_output=True, text=True, timeout=60)
    assert json.loads(other.stdout)["pid"] not in (None, os.getpid())  # any other node program is a host


def test_an_id_in_the_arguments_names_the_call_only_on_a_host_whose_plugin_writes_it(tmp_path: Path) -> None:
    """The read gate's note decides for an OpenClaw call whose id came in its arguments; the same
    argument on another host (a model can write it) is no id at all: there a Copilot call without
    its gate's id stays withheld and credited to nobody."""
    from leanctx.cache.scope import Connection, Resolver
    from leanctx.hooks.hostproc import process_stat
    from leanctx.hooks.publish import write_json_atomic

    me = os.getpid()
    ticks = process_stat(me)[2]
    conn = Connection("c1", {}, me, ticks, str(tmp_path))

    def rec(agent: str, session: str, calls: dict) -> None:
        now = __import__("time").time()
        write_json_atomic(str(tmp_path / "conversations" / agent / f"{session}.json"), {
            "schema": 1, "agent": agent, "conversation_id": session, "session_id": session, "created_at": "2026-12-02T00:00:00.000Z",
            "compactions": 0, "active_subagents": {}, "workspace_roots": [str(tmp_path)], "cwd": str(tmp_path),
            "host": {"pid": me, "name": "x", "start_ticks": ticks}, "last_event": "before_prompt_build", "updated_ts": now,
            "read_calls": {c: {"agent_id": None, "ts": now, "compactions": 0} for c in calls}})

    rec("openclaw", "s-ana", {"call-ana"})
    rec("openclaw", "s-bob", {"call-bob"})
    r = Resolver(str(tmp_path))
    ana, bob = r.resolve(conn, fresh=True, call_id="arg:call-ana"), r.resolve(conn, fresh=True, call_id="arg:call-bob")
    assert ana.stub_ok and bob.stub_ok and ana.key != bob.key and "s-ana" in ana.key and "s-bob" in bob.key
    assert not r.resolve(conn, fresh=True, call_id="arg:unnoted").stub_ok
    assert not r.resolve(conn, fresh=True).stub_ok  # no id: the gate did not run, nobody is picked
    for f in (tmp_path / "conversations" / "openclaw").glob("*.json"):
        f.unlink()
    rec("copilot", "s-cop", {"call-cop"})
    r = Resolver(str(tmp_path))
    got = r.resolve(conn, fresh=True, call_id="arg:call-cop")
    assert not got.stub_ok and got.reason == "read gate did not run for this call"
    assert r.resolve(conn, fresh=True, call_id="call-cop").stub_ok  # its own id, as its gate hands it in _meta


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_gateway_whose_venv_is_gone_keeps_running_and_doctor_says_how_to_fix_it(home: Path, data_dir: Path, bot_env: dict, tmp_path: Path) -> None:
    """The gateway's plugin calls the wrapper, which names the interpreter init ran from: with that
    venv deleted, every handler still returns (the turn goes on, nothing recorded), and doctor
    fails "wrapper interpreter" with a fix that works when followed (no gateway restart needed: the
    plugin keeps calling the same wrapper path)."""
    from leanctx.installer import wrapper

    assert run_cli("init", "--agent", "openclaw", "--bot", env=bot_env).returncode == 0
    wrapper.wrapper_path(data_dir).write_text(wrapper.render(data_dir, python="/gone/venv/bin/python3"))
    plugin = home / ".openclaw" / "leanctx" / "index.mjs"
    out = drive(plugin, [["before_prompt_build", {"prompt": "hi", "messages": []}, ctx()],
                         ["agent_end", {"success": True, "messages": [{"role": "assistant", "content": "yo"}]}, ctx()]], bot_env, tmp_path)
    assert all(r.get("result") is None and "threw" not in r for r in out[1:]), out
    assert json.loads(run_cli("state", "list", "--json", env=bot_env).stdout or "[]") == []
    proc = run_cli("doctor", "--agent", "openclaw", "--json", env=dict(bot_env, PATH="/usr/bin:/bin"))
    report = json.loads(proc.stdout)
    check = next(c for c in report["checks"] if c["name"] == "wrapper interpreter")
    assert proc.returncode == 1 and check["status"] == "fail" and "/gone/venv/bin/python3" in check["detail"]
    assert check["fix"].startswith("leanctx doctor --agent openclaw --fix")  # re-runs init with the bot profile
    run_cli("doctor", "--agent", "openclaw", "--fix", env=bot_env)  # the fix, followed
    drive(plugin, [["before_prompt_build", {"prompt": "hi again", "messages": []}, ctx()]], bot_env, tmp_path)
    assert [t["text"] for t in thread(ANA, bot_env)["recent_turns"]] == ["hi again"]
