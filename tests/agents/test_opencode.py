"""OpenCode: the payloads recorded from OpenCode 1.18.33 (tests/fixtures/payloads/opencode), our
plugin run by node exactly as OpenCode loads it (an ES module whose export is called with ctx),
and init/uninstall of the plugin file through the real CLI. Its fork Kilo Code (agents/kilo.py)
differs only in names: the tests of the plugin and of init/uninstall run for both (`FAMILY`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.base import PRE_TOOL, PROMPT, SESSION_START, STOP
from tests.conftest import PAYLOADS, run_cli

OC = PAYLOADS / "opencode"
AGENT = agents.get("opencode")
SESSION = "ses_dcfd7595cffeiCf5GupRd7u1rq"
FAMILY = ("opencode", "kilo")
family = pytest.mark.parametrize("name", FAMILY)


def folder(home: Path, name: str) -> Path:
    """The host's user config folder (XDG_CONFIG_HOME is unset in these tests)."""
    return home / ".config" / agents.get(name).config_folder


def config_name(name: str) -> str:
    return agents.get(name).config_files[0]


def recorded(name: str) -> dict:
    return json.loads((OC / name).read_text())


def forwarded(event: str, cwd: str = "/home/user/work/proj") -> dict:
    """What our plugin sends for `event`, built from the arguments OpenCode gave the logger plugin."""
    if event.startswith("session."):
        return {"hook_event_name": event, "cwd": cwd, "event": recorded(f"event.{event}.json")}
    hook = recorded(f"{event}.json")
    if event == "chat.message":
        return {"hook_event_name": event, "cwd": cwd, "input": hook["input"], "output": {"parts": hook["output"]["parts"]}}
    return {"hook_event_name": event, "cwd": cwd, **hook}


def test_recorded_payloads_normalize_to_the_session_opencode_named() -> None:
    created = AGENT.normalize("session.created", forwarded("session.created"))
    assert (created.kind, created.conversation_id, created.session_id, created.source) == (SESSION_START, SESSION, SESSION, "startup")
    assert created.cwd == "/home/user/work/proj" and created.workspace_roots == ["/home/user/work/proj"]
    prompt = AGENT.normalize("chat.message", forwarded("chat.message"))
    assert (prompt.kind, prompt.conversation_id, prompt.prompt) == (PROMPT, SESSION, '"read a.txt"')
    idle = AGENT.normalize("session.idle", forwarded("session.idle"))
    assert (idle.kind, idle.conversation_id) == (STOP, SESSION)
    tool = AGENT.normalize("tool.execute.before", forwarded("tool.execute.before.2"))
    assert (tool.kind, tool.tool_name, tool.tool_use_id, tool.tool_input) == (PRE_TOOL, "logsrv_ping", "call_fake00003", {"x": "hi"})
    # without the plugin's cwd, the session's own folder
    assert AGENT.normalize("session.created", {"event": recorded("event.session.created.json")}).cwd == "/home/user/work/proj"


@pytest.mark.parametrize("body", [{}, {"event": "x"}, {"event": {"properties": []}}, {"input": {"sessionID": 5}}, {"output": {"parts": "x"}}])
def test_ill_typed_payloads_name_nothing(body: dict) -> None:
    for spec in AGENT.events:
        ev = AGENT.normalize(spec.name, body)
        assert ev.conversation_id is None and ev.prompt is None


def test_hook_command_publishes_the_recorded_session(home: Path, data_dir: Path) -> None:
    for event in ("session.created", "chat.message", "session.idle"):
        proc = run_cli("hook", "opencode", event, input=json.dumps(forwarded(event)))
        assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc
    record = json.loads(next((data_dir / "conversations" / "opencode").glob("*.json")).read_text())
    assert record["conversation_id"] == record["session_id"] == SESSION
    assert record["last_event"] == "session.idle" and record["cwd"] == "/home/user/work/proj"


def test_answers_the_plugin_understands() -> None:
    assert json.loads(AGENT.guard_output("tool.execute.before", "no")) == {"decision": "deny", "reason": "no"}
    assert AGENT.check_output("tool.execute.before", AGENT.guard_output("tool.execute.before", "no")) is None
    assert json.loads(AGENT.context_output("session.created", "ctx")) == {"additionalContext": "ctx"}
    assert AGENT.context_output("session.idle", "ctx") == ""
    assert AGENT.check_output("session.idle", '{"additionalContext": "x"}') is not None
    assert AGENT.check_output("chat.message", "plain text") is not None


# -- the plugin itself, run by node as OpenCode runs it ----------------------------------------
NODE = shutil.which("node")
DRIVER = r"""
const [plugin, calls] = [process.argv[2], JSON.parse(process.argv[3])];
const mod = await import(plugin);
const hooks = await mod.LeanctxPlugin({ directory: process.argv[4] });
const out = [];
for (const [name, args] of calls) {
  const started = Date.now();
  try {
    const system = [];
    if (name === "experimental.chat.system.transform") { await hooks[name](args[0], { system }); out.push({ name, system }); continue; }
    await hooks[name](...args);
    out.push({ name, ok: true, ms: Date.now() - started });
  } catch (e) {
    out.push({ name, threw: String(e && e.message) });
  }
}
console.log(JSON.stringify(out));
"""


def drive(plugin: Path, calls: list, cwd: Path, env: dict | None = None) -> list:
    driver = plugin.parent / "driver.mjs"
    driver.write_text(DRIVER)
    proc = subprocess.run([NODE, str(driver), str(plugin), json.dumps(calls), str(cwd)], capture_output=True, text=True,
                          timeout=60, env=env or dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def plugin_calls(session: str = SESSION) -> list:
    created = recorded("event.session.created.json")
    chat = recorded("chat.message.json")
    return [
        ["event", [{"event": created}]],
        ["chat.message", [chat["input"], chat["output"]]],
        ["event", [{"event": recorded("event.message.updated.json")}]],  # not wired: ignored
        ["event", [{"event": recorded("event.session.idle.json")}]],
    ]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@family
def test_plugin_publishes_through_the_hook_and_a_missing_leanctx_is_a_no_op(name: str, home: Path, data_dir: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", name).returncode == 0
    plugin = folder(home, name) / "plugins" / "leanctx.js"
    out = drive(plugin, plugin_calls(), tmp_path)
    assert all(r.get("ok") for r in out), out
    record = json.loads(next((data_dir / "conversations" / name).glob("*.json")).read_text())
    assert record["session_id"] == SESSION and record["last_event"] == "session.idle" and record["cwd"] == str(tmp_path)
    # leanctx gone (the wrapper removed): every hook still returns, nothing thrown
    (data_dir / "bin" / "leanctx-hook").unlink()
    out = drive(plugin, plugin_calls() + [["tool.execute.before", [{"tool": "read", "sessionID": SESSION, "callID": "c"}, {"args": {}}]]], tmp_path)
    assert all(r.get("ok") for r in out), out


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@family
def test_plugin_turns_the_guard_deny_into_a_thrown_reason_and_hangs_never(name: str, home: Path, data_dir: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", name, "--guard").returncode == 0
    plugin = folder(home, name) / "plugins" / "leanctx.js"
    users = tmp_path / "cks" / "user"
    (users / "bob").mkdir(parents=True)
    env = dict(os.environ, CKS_HOME=str(tmp_path / "cks"), CKS_ACTIVE_USER="ana")
    touching = [{"tool": "read", "sessionID": SESSION, "callID": "c1"}, {"args": {"filePath": str(users / "bob" / "notes.md")}}]
    harmless = [{"tool": "read", "sessionID": SESSION, "callID": "c2"}, {"args": {"filePath": str(tmp_path / "a.txt")}}]
    out = drive(plugin, [["tool.execute.before", touching], ["tool.execute.before", harmless]], tmp_path, env)
    assert "threw" in out[0] and "bob" in out[0]["threw"], out
    assert out[1].get("ok"), out
    # a hook that never answers is cut off at the plugin's timeout: OpenCode goes on
    text = plugin.read_text()
    slow = plugin.with_name("slow.js")
    slow.write_text(text.replace("const TIMEOUT_MS = 10000;", "const TIMEOUT_MS = 300;").replace(
        json.dumps(str(data_dir / "bin" / "leanctx-hook") + f" {name} session.created")[1:-1], "sleep 30"))
    out = drive(slow, plugin_calls()[:1], tmp_path)
    assert out[0].get("ok") and out[0]["ms"] < 5000, out


# -- init / uninstall of the plugin file ---------------------------------------------------------
@family
def test_init_twice_is_once_and_uninstall_is_byte_identical(name: str, home: Path, data_dir: Path) -> None:
    config_dir = folder(home, name)
    config_dir.mkdir(parents=True)
    config = config_dir / config_name(name)
    config.write_text('{\n  // mine\n  "mcp": {"other": {"type": "local", "command": ["x"]}},\n  "model": "a/b",\n}\n')
    before = config.read_bytes()
    first = run_cli("init", "--agent", name)
    assert first.returncode == 0 and "wired 10 events" in first.stdout and "plugins/leanctx.js" in first.stdout, first
    plugin = config_dir / "plugins" / "leanctx.js"
    snapshot = {p: p.read_bytes() for p in (config, plugin)}
    assert "// mine" in config.read_text() and '"other"' in config.read_text()
    second = run_cli("init", "--agent", name)
    assert second.returncode == 0 and "already wired" in second.stdout
    assert {p: p.read_bytes() for p in (config, plugin)} == snapshot
    doctor = run_cli("doctor", "--agent", name, "--json")
    report = json.loads(doctor.stdout)["agents"][0]
    assert doctor.returncode == 0 and report["ok"], report
    assert run_cli("uninstall", "--agent", name).returncode == 0
    assert config.read_bytes() == before
    assert not (config_dir / "plugins").exists() and sorted(os.listdir(config_dir)) == [config_name(name)]


@family
def test_a_plugin_file_of_the_users_under_our_name_is_refused_and_kept(name: str, home: Path, data_dir: Path) -> None:
    plugins = folder(home, name) / "plugins"
    plugins.mkdir(parents=True)
    mine = plugins / "leanctx.js"
    mine.write_text("export const Mine = async () => ({});\n")
    proc = run_cli("init", "--agent", name)
    assert proc.returncode == 2 and "is not leanctx's" in proc.stderr and str(mine) in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(os.listdir(folder(home, name))) == ["plugins"] and mine.read_text().startswith("export const Mine")
    assert run_cli("uninstall", "--agent", name).returncode == 0
    assert mine.read_text().startswith("export const Mine")


@family
def test_unparseable_opencode_json_is_refused_before_the_plugin_is_written(name: str, home: Path, data_dir: Path) -> None:
    config = folder(home, name) / config_name(name)
    config.parent.mkdir(parents=True)
    config.write_text('{"mcp": {')
    proc = run_cli("init", "--agent", name)
    assert proc.returncode == 2 and str(config) in proc.stderr and "cannot parse" in proc.stderr
    assert config.read_text() == '{"mcp": {' and not (config.parent / "plugins").exists()


@family
def test_profile_change_rewrites_the_plugin_and_a_replaced_plugin_stays(name: str, home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", name, "--guard").returncode == 0
    plugin = folder(home, name) / "plugins" / "leanctx.js"
    hooks = lambda: plugin.read_text().split("const HOOKS", 1)[1].split("};", 1)[0]  # noqa: E731
    # the guard's entry also gates the built-in readers, and the hook runs for every tool
    assert f"{name} tool.execute.before --guard --builtin-read" in hooks()
    assert "const PRE_READS_ONLY = false;" in plugin.read_text()
    assert run_cli("init", "--agent", name).returncode == 0
    # no guard: the entry gates the readers alone, and runs for those tools only
    assert "--guard" not in hooks() and f"{name} tool.execute.before --builtin-read" in hooks()
    assert "const PRE_READS_ONLY = true;" in plugin.read_text()
    assert run_cli("init", "--agent", name, "--no-builtin-gate").returncode == 0
    assert "tool.execute" not in hooks()
    # the user replaced our plugin with their own: uninstall leaves it
    plugin.write_text("export const Theirs = async () => ({});\n")
    assert run_cli("uninstall", "--agent", name).returncode == 0
    assert plugin.read_text() == "export const Theirs = async () => ({});\n"


@family
def test_an_opencode_jsonc_is_where_the_server_goes_when_it_is_the_users_file(name: str, home: Path, data_dir: Path) -> None:
    where = folder(home, name)
    where.mkdir(parents=True)
    jsonc = where / "opencode.jsonc"  # Kilo reads it too (its legacy name)
    jsonc.write_text("{\n  // only this one\n}\n")
    assert run_cli("init", "--agent", name).returncode == 0
    assert '"leanctx"' in jsonc.read_text() and sorted(os.listdir(where)) == ["AGENTS.md", "opencode.jsonc", "plugins"]
    assert run_cli("uninstall", "--agent", name).returncode == 0
    assert jsonc.read_text() == "{\n  // only this one\n}\n"


def test_kilo_takes_its_own_file_first_and_its_own_folders(home: Path, data_dir: Path, tmp_path: Path) -> None:
    """Kilo reads kilo.jsonc, kilo.json, opencode.jsonc and opencode.json in ~/.config/kilo (and
    in a project); the server goes into the first of them the user keeps (the order of Kilo's own
    writer), a new kilo.jsonc when none. Its project plugins are in .kilo/plugins (Kilo does not
    read a project's .opencode/)."""
    kilo = agents.get("kilo")
    where = folder(home, "kilo")
    where.mkdir(parents=True)
    assert kilo.mcp_config(home, None)[0] == where / "kilo.jsonc"
    (where / "opencode.json").write_text('{"model": "a/b"}\n')
    assert kilo.mcp_config(home, None)[0] == where / "opencode.json"
    (where / "kilo.json").write_text("{\n  // mine\n}\n")
    assert kilo.mcp_config(home, None) == (where / "kilo.json", "json", ("mcp",))
    assert run_cli("init", "--agent", "kilo").returncode == 0
    assert '"leanctx"' in (where / "kilo.json").read_text() and "leanctx" not in (where / "opencode.json").read_text()
    assert (where / "plugins" / "leanctx.js").read_text().startswith(
        "// leanctx plugin for Kilo Code: written by `leanctx init --agent kilo`")
    assert run_cli("uninstall", "--agent", "kilo").returncode == 0
    assert (where / "kilo.json").read_text() == "{\n  // mine\n}\n"
    # the user then makes a kilo.jsonc, which comes first: init moves our entry there
    assert run_cli("init", "--agent", "kilo").returncode == 0
    (where / "kilo.jsonc").write_text("{}\n")
    assert run_cli("init", "--agent", "kilo").returncode == 0
    assert "leanctx" not in (where / "kilo.json").read_text() and '"leanctx"' in (where / "kilo.jsonc").read_text()
    assert run_cli("uninstall", "--agent", "kilo").returncode == 0
    assert (where / "kilo.json").read_text() == "{\n  // mine\n}\n" and "leanctx" not in (where / "kilo.jsonc").read_text()
    proj = tmp_path / "proj"
    assert kilo.mcp_config(home, proj)[0] == proj / "kilo.jsonc"
    assert kilo.hook_folder(home, proj) == proj / ".kilo" / "plugins"
    assert kilo.rules_path(home, None) == (where / "AGENTS.md", "block")


MARKER = ".bash-permission-migrated"


def files_under(root: Path) -> dict:
    """Every file and folder under `root` (leanctx's data dir and the folders it is in aside):
    path -> bytes (None: a folder)."""
    data = Path(os.environ["LEANCTX_HOME"])
    return {p: None if p.is_dir() else p.read_bytes() for p in root.rglob("*")
            if p != data and data not in p.parents and p not in data.parents}


def test_kilo_gets_its_first_start_marker_with_a_config_init_creates(home: Path, data_dir: Path) -> None:
    """On its first start Kilo 7.7.7 adds `"permission": {"bash": "allow"}` to a user config with
    no bash rule, then writes the empty marker; with no config it writes only the marker. init
    on a HOME with no Kilo config creates kilo.jsonc and the marker with it (the dry run shows
    it); uninstall gives the HOME back as it was. OpenCode has no such migration: no marker."""
    where = folder(home, "kilo")
    before = files_under(home)
    dry = run_cli("init", "--agent", "kilo", "--dry-run")
    assert dry.returncode == 0 and f"--- /dev/null\n+++ b/~/.config/kilo/{MARKER}\n" in dry.stdout, dry.stdout
    assert files_under(home) == before
    first = run_cli("init", "--agent", "kilo")
    assert first.returncode == 0 and f"created ~/.config/kilo/{MARKER} with the host's first-start marker" in first.stdout, first
    assert (where / MARKER).read_bytes() == b"" and (where / MARKER).stat().st_mode & 0o777 == 0o644
    assert '"leanctx"' in (where / "kilo.jsonc").read_text() and "permission" not in (where / "kilo.jsonc").read_text()
    assert run_cli("init", "--agent", "kilo").returncode == 0 and (where / MARKER).read_bytes() == b""
    assert run_cli("uninstall", "--agent", "kilo").returncode == 0
    assert files_under(home) == before
    assert run_cli("init", "--agent", "opencode").returncode == 0
    assert not any(p.name == MARKER for p in home.rglob("*"))


@pytest.mark.parametrize("existing", ["kilo.json", "opencode.jsonc", "config.json"])
def test_kilo_config_of_the_users_gets_no_marker(existing: str, home: Path, data_dir: Path) -> None:
    """A config file Kilo reads is there already: Kilo's first start would migrate it with or
    without leanctx, so init writes no marker."""
    where = folder(home, "kilo")
    where.mkdir(parents=True)
    (where / existing).write_text("{\n  // mine\n  \"model\": \"a/b\"\n}\n")
    before = files_under(home)
    assert run_cli("init", "--agent", "kilo").returncode == 0
    assert not (where / MARKER).exists()
    assert run_cli("uninstall", "--agent", "kilo").returncode == 0
    assert files_under(home) == before


def test_kilo_marker_that_exists_is_never_touched(home: Path, data_dir: Path) -> None:
    """Kilo already ran once with no config (it wrote only the marker): init creates kilo.jsonc
    and leaves the marker; uninstall keeps it."""
    where = folder(home, "kilo")
    where.mkdir(parents=True)
    (where / MARKER).write_bytes(b"")
    os.chmod(where / MARKER, 0o600)
    stamp = (where / MARKER).stat().st_mtime_ns
    assert run_cli("init", "--agent", "kilo").returncode == 0
    assert (where / "kilo.jsonc").exists()
    assert run_cli("uninstall", "--agent", "kilo").returncode == 0
    assert not (where / "kilo.jsonc").exists()
    assert (where / MARKER).read_bytes() == b"" and (where / MARKER).stat().st_mode & 0o777 == 0o600
    assert (where / MARKER).stat().st_mtime_ns == stamp


def test_kilo_marker_stays_when_the_config_init_created_stays(home: Path, data_dir: Path) -> None:
    """The user put a setting of theirs into the kilo.jsonc init created: uninstall takes our
    entry out and keeps the file, so the marker stays too (Kilo's state for that config), and
    leanctx keeps no record of it."""
    where = folder(home, "kilo")
    assert run_cli("init", "--agent", "kilo").returncode == 0
    config = where / "kilo.jsonc"
    config.write_text(config.read_text().replace('"mcp": {', '"model": "a/b",\n  "mcp": {', 1))
    assert run_cli("uninstall", "--agent", "kilo").returncode == 0
    assert '"model": "a/b"' in config.read_text() and "leanctx" not in config.read_text()
    assert (where / MARKER).read_bytes() == b""
    assert not list((data_dir / "installed").glob("*.json"))
    assert run_cli("init", "--agent", "kilo").returncode == 0 and run_cli("uninstall", "--agent", "kilo").returncode == 0
    assert (where / MARKER).exists() and '"model": "a/b"' in config.read_text()


# -- context losses: every tool call waits until leanctx has them on record ---------------------
LOSS_DRIVER = r"""
import fs from "node:fs";
import path from "node:path";
const [plugin, calls, records] = [process.argv[2], JSON.parse(process.argv[3]), process.argv[5]];
const mod = await import(plugin);
const hooks = await mod.LeanctxPlugin({ directory: process.argv[4] });
function compactions() {  // what the record says right now
  try {
    const f = fs.readdirSync(records).filter((n) => n.endsWith(".json"))[0];
    return f ? JSON.parse(fs.readFileSync(path.join(records, f), "utf8")).compactions : null;
  } catch (e) { return null; }
}
const out = [];
for (const [name, args] of calls) {
  if (name === "later:event") { hooks.event(...args); continue; }  // as OpenCode publishes a bus event: not awaited
  await hooks[name](...args);
  out.push({ name, compactions: compactions() });
}
console.log(JSON.stringify(out));
"""


def loss_drive(home: Path, data_dir: Path, tmp_path: Path, calls: list) -> list:
    plugin = home / ".config" / "opencode" / "plugins" / "leanctx.js"
    driver = tmp_path / "loss-driver.mjs"
    driver.write_text(LOSS_DRIVER)
    records = data_dir / "conversations" / "opencode"
    proc = subprocess.run([NODE, str(driver), str(plugin), json.dumps(calls), str(tmp_path), str(records)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def bus(kind: str, **props: object) -> list:
    return ["later:event", [{"event": {"type": kind, "properties": {"sessionID": SESSION, **props}}}]]


def tool(call_id: str) -> list:
    return ["tool.execute.before", [{"tool": "leanctx_ctx_read", "sessionID": SESSION, "callID": call_id}, {"args": {"path": "a"}}]]


def part(cleared: bool, part_id: str = "prt_1") -> dict:
    time = {"start": 1, "end": 2, **({"compacted": 3} if cleared else {})}
    return {"id": part_id, "sessionID": SESSION, "type": "tool", "tool": "leanctx_ctx_read", "state": {"status": "completed", "time": time}}


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_context_loss_is_on_record_before_the_next_tool_call_runs(home: Path, data_dir: Path, tmp_path: Path) -> None:
    """OpenCode 1.18.33 publishes bus events to plugins without waiting for them: an undo's
    removed messages, a finished compaction, the tool outputs `compaction.prune` clears. The
    next ctx_read must not run before leanctx has counted the loss."""
    assert run_cli("init", "--agent", "opencode").returncode == 0
    chat = recorded("chat.message.json")
    start = [["event", [{"event": recorded("event.session.created.json")}]], ["chat.message", [chat["input"], chat["output"]]]]
    out = loss_drive(home, data_dir, tmp_path, start + [
        bus("message.removed", messageID="msg_1"), tool("c1"),  # an undo, then the next prompt's first tool call
        bus("message.part.removed", messageID="msg_2", partID="prt_9"), tool("c2"),
        bus("session.compacted"), tool("c3"),
        bus("message.part.updated", part=part(False)), tool("c4"),  # an ordinary part update: no loss
        bus("message.part.updated", part=part(True)), tool("c5"),  # a tool output cleared by prune
        bus("message.part.updated", part=part(True)), tool("c6"),  # the same part again: counted once
        ["experimental.session.compacting", [{"sessionID": SESSION}, {"context": [], "prompt": None}]],
    ])
    assert [r["compactions"] for r in out] == [0, 0, 1, 2, 3, 3, 4, 4, 5], out


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_loss_events_publish_through_the_hook_command(home: Path, data_dir: Path) -> None:
    for event in ("experimental.session.compacting", "message.removed", "message.part.removed", "message.part.updated"):
        spec = AGENT.event(event)
        assert spec is not None and spec.kind == "pre_compact", event
        payload = AGENT.synthetic_payload(event, "/home/user/work/proj")
        assert AGENT.normalize(event, payload).conversation_id, event
    proc = run_cli("doctor", "--agent", "opencode", "--json")
    assert run_cli("init", "--agent", "opencode").returncode == 0
    proc = run_cli("doctor", "--agent", "opencode", "--json")
    smokes = {c["name"]: c["status"] for a in json.loads(proc.stdout)["agents"] for c in a["checks"] if c["name"].startswith("smoke")}
    assert {f"smoke {e}" for e in ("experimental.session.compacting", "message.removed", "message.part.updated")} <= set(smokes), smokes
    assert set(smokes.values()) == {"ok"}, smokes


# -- the built-in readers: `read` and plain `bash` reads ---------------------------------------
A_TXT = "".join(f"line {i}\tx  \n" for i in range(1, 31))  # the file the recorded reads read


def after(name: str, cwd: str = "/home/user/work/proj") -> tuple:
    """(event, payload) of a recorded tool.execute.after, as our plugin forwards it."""
    payload = {"hook_event_name": "tool.execute.after", "cwd": cwd, **recorded(name)}
    return AGENT.normalize("tool.execute.after", payload), payload


def test_read_asks_are_named_as_opencode_reads_them() -> None:
    from leanctx.agents.opencode import read_request

    assert read_request({"filePath": "/p/a.txt"}, None) == ("/p/a.txt", 1, 2000)
    assert read_request({"filePath": "/p/a.txt", "offset": 5, "limit": 3}, None) == ("/p/a.txt", 5, 7)  # 1-based
    assert read_request({"filePath": "/p/a.txt", "offset": 0, "limit": 3}, None) == ("/p/a.txt", 1, 3)  # `offset || 1`
    assert read_request({"filePath": "sub/../a.txt"}, "/p") == ("/p/a.txt", 1, 2000)  # path.resolve
    for args, cwd in (({"filePath": "a.txt"}, None), ({"filePath": "a.txt"}, "rel"), ({"filePath": "/a", "limit": 0}, None),
                      ({"filePath": "/a", "offset": -1}, None), ({"filePath": "/a", "limit": True}, None),
                      ({"filePath": "/a", "pages": "1"}, None), ({"filePath": ""}, None), ({}, None)):
        assert read_request(args, cwd) is None, args


def test_the_recorded_read_results_give_back_the_files_lines_exactly() -> None:
    from leanctx.agents.opencode import read_delivered

    event, payload = after("tool.execute.after.json")  # the whole file, "(End of file - total 1 lines)"
    ask, content = AGENT.builtin_read_delivery(event, payload)
    assert (ask.path, ask.start, ask.end, ask.reader, content) == ("/home/user/work/proj/a.txt", 1, 1, "builtin", "hello world file")
    event, payload = after("tool.execute.after.read-window.json")  # "(Showing lines 5-7 of 30. ...)"
    ask, content = AGENT.builtin_read_delivery(event, payload)
    assert (ask.start, ask.end) == (5, 7) and content == "".join(A_TXT.splitlines(keepends=True)[4:7])[:-1]
    shown = "/p/a.txt"
    head = f"<path>{shown}</path>\n<type>file</type>\n<content>\n"
    capped = head + "1: a\n2: b\n\n(Output capped at 50 KB. Showing lines 1-2. Use offset=3 to continue.)\n</content>"
    assert read_delivered(capped, shown, 1) == (1, 2, "a\nb")
    # any other shape withholds: a reminder after the content, a number out of step, an empty
    # file, another path, an offset hint that does not follow, a window not starting where asked
    whole = head + "1: a\n2: b\n\n(End of file - total 2 lines)\n</content>"
    assert read_delivered(whole, shown, 1) == (1, 2, "a\nb")
    for bad, start in ((whole + "\n<system-reminder>\nx\n</system-reminder>", 1), (whole.replace("2: b", "3: b"), 1),
                       (head + "\n\n(End of file - total 0 lines)\n</content>", 1), (whole, 2),
                       (whole.replace(shown, "/p/b.txt"), 1), (whole.replace("2: b\n", "2: b\n3: c\n"), 1),
                       (head + "1: a\n\n(Showing lines 1-1 of 9. Use offset=3 to continue.)\n</content>", 1),
                       ("Image read successfully", 1)):
        assert read_delivered(bad, shown, start) is None, bad


def test_bash_reads_count_only_whole_clean_runs() -> None:
    event, payload = after("tool.execute.after.bash.json")  # `cat a.txt`, exit 0, not cut
    ask, content = AGENT.builtin_read_delivery(event, payload)
    assert (ask.path, ask.start, ask.end, ask.reader, content) == ("/home/user/work/proj/a.txt", 1, None, "shell", A_TXT[:-1])
    event, payload = after("tool.execute.after.bash-numbered.json")  # `cat -n a.txt`: the numbers come off
    ask, content = AGENT.builtin_read_delivery(event, payload)
    assert ask.numbered and content == A_TXT[:-1]
    for meta in ({"exit": 1, "truncated": False}, {"exit": 0, "truncated": True}, {"exit": None, "truncated": False},
                 {"exit": 0, "truncated": False, "outputPath": "/home/user/tool-output/x"}, {}):
        event, payload = after("tool.execute.after.bash.json")
        payload["output"]["metadata"] = meta
        assert AGENT.builtin_read_delivery(event, payload) is None, meta


def test_what_is_not_a_gated_read() -> None:
    def ask(tool: str, args: dict, call: str = "call_1", cwd: str = "/p"):
        payload = {"hook_event_name": "tool.execute.before", "cwd": cwd, "input": {"tool": tool, "sessionID": SESSION, "callID": call},
                   "output": {"args": args}}
        return AGENT.builtin_read_ask(AGENT.normalize("tool.execute.before", payload))

    assert ask("read", {"filePath": "a.txt"}).path == "/p/a.txt"
    assert ask("bash", {"command": "cat a.txt", "description": "d", "workdir": "sub"}).path == "/p/sub/a.txt"
    assert ask("bash", {"command": "cat a.txt", "workdir": "/q"}).path == "/q/a.txt"
    assert ask("read", {"filePath": "/p/a.txt"}, call="call_1/1") is None  # code mode: the result goes to a script
    assert ask("bash", {"command": "cat a.txt | head"}) is None
    assert ask("bash", {"command": "cat a.txt", "env": {}}) is None
    assert ask("edit", {"filePath": "/p/a.txt"}) is None
    assert ask("read", {"filePath": "/p/a.txt"}, call="") is None


CREDIT_DRIVER = r"""
const [plugin, calls] = [process.argv[2], JSON.parse(process.argv[3])];
const mod = await import(plugin);
const hooks = await mod.LeanctxPlugin({ directory: process.argv[4] });
for (const [name, args] of calls) await hooks[name](...args);
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@family
def test_a_read_is_credited_only_when_the_next_request_carries_that_very_result(name: str, home: Path, data_dir: Path, tmp_path: Path) -> None:
    """The plugin holds a reader's result from tool.execute.after and hands it to the hook when
    the next request of its session carries it unchanged as the call's completed result: a
    plugin after ours that changed it, a result pruned by compaction, a result the compaction's
    own pass over the history carries, another tool, a failed call: never."""
    assert run_cli("init", "--agent", name).returncode == 0
    plugin = folder(home, name) / "plugins" / "leanctx.js"
    log = tmp_path / "credited"  # one file per hand-over: the plugin runs them at once
    log.mkdir()
    command = str(data_dir / "bin" / "leanctx-hook") + f" {name} tool.execute.after --builtin-read"
    text = plugin.read_text()
    assert json.dumps(command) in text
    tapped = plugin.with_name("tapped.js")
    asked = tmp_path / "asked"
    asked.mkdir()
    before = command.replace("tool.execute.after", "tool.execute.before")
    assert json.dumps(before) in text
    tapped.write_text(text.replace(json.dumps(command), json.dumps(f"cat > $(mktemp -p {log})"))
                      .replace(json.dumps(before), json.dumps(f"cat > $(mktemp -p {asked})")))

    def done(call: str, tool: str = "read", output: str = "X", session: str = SESSION, args: dict | None = None) -> list:
        return ["tool.execute.after", [{"tool": tool, "sessionID": session, "callID": call, "args": args or {"filePath": "/p/a"}},
                                       {"title": "a", "output": output, "metadata": {"truncated": False}}]]

    def part(call: str, output: str = "X", status: str = "completed", compacted: bool = False, tool: str = "read") -> dict:
        time = {"start": 1, "end": 2, **({"compacted": 3} if compacted else {})}
        return {"type": "tool", "tool": tool, "callID": call, "state": {"status": status, "output": output, "time": time}}

    def request(parts: list, session: str = SESSION) -> list:
        return ["experimental.chat.messages.transform", [{}, {"messages": [
            {"info": {"role": "user", "sessionID": session}, "parts": [{"type": "text", "text": "go"}]},
            {"info": {"role": "assistant", "sessionID": session}, "parts": parts}]}]]

    other = "ses_other"
    def call(call: str, tool: str, args: dict) -> list:
        return ["tool.execute.before", [{"tool": tool, "sessionID": SESSION, "callID": call}, {"args": args}]]

    # without the guard, the pre-tool hook runs for reads only: `read`, a shell command that may be one
    calls = [call("c1", "read", {"filePath": "/p/a"}), call("c8", "bash", {"command": "cat a"}),
             call("c7", "bash", {"command": "ls"}), call("c3", "edit", {"filePath": "/p/a"})]
    calls += [done("c1"), done("c2"), done("c3", tool="edit"), done("c4"), done("c5"), done("c6", session=other),
             done("c7", tool="bash", args={"command": "ls"}), done("c8", tool="bash", args={"command": "cat a"}),
             request([part("c1"), part("c2", output="X, changed by a plugin after ours"), part("c3", tool="edit"),
                      part("c4", compacted=True), part("c5", status="error"), part("c7", tool="bash"), part("c8", tool="bash")]),
             request([part("c1")]),  # already handed on: once
             request([part("c6")], session=other),
             # a compaction of the session before the next request: OpenCode hands the history it
             # summarises to the same transform, which is not what the model keeps; another
             # session's read is still handed on
             done("c9"), done("c10", session=other),
             ["experimental.session.compacting", [{"sessionID": SESSION}, {"context": [], "prompt": None}]],
             request([part("c9")]), request([part("c10")], session=other)]
    driver = tmp_path / "credit-driver.mjs"
    driver.write_text(CREDIT_DRIVER)
    proc = subprocess.run([NODE, str(driver), str(tapped), json.dumps(calls), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(f.read_text())["input"]["callID"] for f in asked.iterdir()) == ["c1", "c8"]
    sent = sorted((json.loads(f.read_text()) for f in log.iterdir()), key=lambda s: s["input"]["callID"])
    assert [(s["input"]["callID"], s["input"]["sessionID"]) for s in sent] == [("c1", SESSION), ("c10", other), ("c6", other), ("c8", SESSION)], sent
    assert sent[0] == {"hook_event_name": "tool.execute.after", "cwd": str(tmp_path),
                       "input": {"tool": "read", "sessionID": SESSION, "callID": "c1", "args": {"filePath": "/p/a"}},
                       "output": {"output": "X", "metadata": {"truncated": False}}}
