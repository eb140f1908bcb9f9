"""Pi: what our extension sends the hook command, the answers it takes back, init/uninstall of the
extension file, and the extension itself run by node with a stand-in for Pi's extension API
(`on`, `registerTool`), starting leanctx's real MCP server as it does inside Pi."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.base import POST_TOOL, PRE_COMPACT, PRE_TOOL, PROMPT, SESSION_END, SESSION_START, STOP
from tests.conftest import run_cli

AGENT = agents.get("pi")
SESSION = "01a2364e-7be2-74c0-8277-a16fee9afe3b"  # the id shape Pi 0.73.1 writes in its session header


def sent(event: str, cwd: str = "/home/user/work/proj", **more: object) -> dict:
    """What the extension sends for `event` (templates/pi-extension.js: fire)."""
    return {"hook_event_name": event, "session_id": SESSION, "cwd": cwd,
            "transcript_path": f"/home/user/.pi/agent/sessions/--home-user-work-proj--/x_{SESSION}.jsonl", **more}


def test_the_extensions_payloads_normalize_to_pis_session() -> None:
    start = AGENT.normalize("session_start", sent("session_start", source="startup"))
    assert (start.kind, start.session_id, start.conversation_id, start.source) == (SESSION_START, SESSION, SESSION, "startup")
    assert start.transcript_path.endswith(f"x_{SESSION}.jsonl") and start.cwd == "/home/user/work/proj"
    prompt = AGENT.normalize("before_agent_start", sent("before_agent_start", prompt="read big.py"))
    assert (prompt.kind, prompt.prompt) == (PROMPT, "read big.py")
    call = AGENT.normalize("tool_call", sent("tool_call", tool_name="ctx_read", tool_input={"path": "a.txt"}, tool_use_id="call_1"))
    assert (call.kind, call.tool_name, call.tool_input, call.tool_use_id) == (PRE_TOOL, "ctx_read", {"path": "a.txt"}, "call_1")
    assert AGENT.is_read_tool(call.tool_name) and not AGENT.is_read_tool("read")
    assert AGENT.normalize("agent_end", sent("agent_end")).kind == STOP
    for loss in ("session_before_compact", "session_compact", "session_before_tree", "session_tree"):
        assert AGENT.normalize(loss, sent(loss)).kind == PRE_COMPACT
    assert AGENT.normalize("session_shutdown", sent("session_shutdown")).kind == SESSION_END
    odd = AGENT.normalize("session_start", {"session_id": 5, "cwd": None})
    assert odd.session_id is None and odd.cwd is None


def test_answers_the_extension_takes() -> None:
    deny = AGENT.guard_output("tool_call", "no")
    assert json.loads(deny) == {"decision": "deny", "reason": "no"} and AGENT.check_output("tool_call", deny) is None
    assert AGENT.check_output("session_start", "") is None
    assert AGENT.check_output("session_start", '{"x": 1}') is not None
    assert json.loads(AGENT.context_output("before_agent_start", "text")) == {"context": "text"}
    assert AGENT.check_output("before_agent_start", AGENT.context_output("before_agent_start", "text")) is None
    assert AGENT.context_output("session_start", "text") == ""  # Pi's session_start cannot add context


def test_hook_command_publishes_the_session(home: Path, data_dir: Path) -> None:
    for event, more in (("session_start", {"source": "startup"}), ("before_agent_start", {"prompt": "hi"}), ("agent_end", {})):
        proc = run_cli("hook", "pi", event, input=json.dumps(sent(event, **more)))
        assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc
    record = json.loads(next((data_dir / "conversations" / "pi").glob("*.json")).read_text())
    assert record["conversation_id"] == record["session_id"] == SESSION
    assert record["last_event"] == "agent_end" and record["cwd"] == "/home/user/work/proj"
    assert record["transcript_path"].endswith(f"x_{SESSION}.jsonl")


# -- init / uninstall of the extension file --------------------------------------------------------
def test_init_twice_is_once_and_uninstall_is_byte_identical(home: Path, data_dir: Path) -> None:
    agent_dir = home / ".pi" / "agent"
    (agent_dir / "extensions").mkdir(parents=True)
    mine = agent_dir / "extensions" / "mine.ts"
    mine.write_text("export default function (pi) {}\n")
    agents_md = agent_dir / "AGENTS.md"
    agents_md.write_text("# my rules\n\nbe brief\n")
    models = agent_dir / "models.json"
    models.write_text('{"providers": {}}\n')
    before = {p: p.read_bytes() for p in (mine, agents_md, models)}
    first = run_cli("init", "--agent", "pi")
    assert first.returncode == 0 and "extensions/leanctx.js" in first.stdout, first
    ext = agent_dir / "extensions" / "leanctx.js"
    text = ext.read_text()
    assert "leanctx-hooks: " in text and str(data_dir / "bin" / "leanctx-hook") in text and '"mcp"' in text
    assert "be brief" in agents_md.read_text() and "ctx_read" in agents_md.read_text()
    snapshot = {p: p.read_bytes() for p in (ext, agents_md, models, mine)}
    second = run_cli("init", "--agent", "pi")
    assert second.returncode == 0 and "already wired" in second.stdout, second
    assert {p: p.read_bytes() for p in snapshot} == snapshot
    doctor = run_cli("doctor", "--agent", "pi", "--json")
    report = json.loads(doctor.stdout)["agents"][0]
    assert doctor.returncode == 0 and report["ok"], report
    names = {c["name"]: c for c in report["checks"]}
    assert names["mcp server"]["status"] == "ok" and names["mcp round trip"]["status"] == "ok", names
    assert run_cli("uninstall", "--agent", "pi").returncode == 0
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(os.listdir(agent_dir / "extensions")) == ["mine.ts"]


def test_an_extension_file_of_the_users_under_our_name_is_refused_and_kept(home: Path, data_dir: Path) -> None:
    extensions = home / ".pi" / "agent" / "extensions"
    extensions.mkdir(parents=True)
    mine = extensions / "leanctx.js"
    mine.write_text("export default function (pi) {}\n")
    proc = run_cli("init", "--agent", "pi")
    assert proc.returncode == 2 and "is not leanctx's" in proc.stderr and str(mine) in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(os.listdir(home / ".pi" / "agent")) == ["extensions"] and mine.read_text() == "export default function (pi) {}\n"
    assert run_cli("uninstall", "--agent", "pi").returncode == 0
    assert mine.read_text() == "export default function (pi) {}\n"


def test_an_agents_md_that_is_not_utf8_is_refused_before_the_extension_is_written(home: Path, data_dir: Path) -> None:
    agents_md = home / ".pi" / "agent" / "AGENTS.md"
    agents_md.parent.mkdir(parents=True)
    agents_md.write_bytes(b"\xff\xfe not text\n")
    proc = run_cli("init", "--agent", "pi")
    assert proc.returncode == 2 and str(agents_md) in proc.stderr and "Traceback" not in proc.stderr, proc
    assert agents_md.read_bytes() == b"\xff\xfe not text\n" and not (agents_md.parent / "extensions").exists()


def test_pi_coding_agent_dir_is_where_the_extension_goes(home: Path, data_dir: Path, tmp_path: Path, monkeypatch) -> None:
    other = tmp_path / "pi-agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(other))
    assert run_cli("init", "--agent", "pi").returncode == 0
    assert (other / "extensions" / "leanctx.js").exists() and not (home / ".pi").exists()
    assert run_cli("uninstall", "--agent", "pi").returncode == 0
    assert not (other / "extensions").exists()


def test_project_install_calls_leanctx_hook_from_path(home: Path, data_dir: Path, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    assert run_cli("init", "--agent", "pi", "--project", str(proj)).returncode == 0
    text = (proj / ".pi" / "extensions" / "leanctx.js").read_text()
    assert 'const SERVER = ["leanctx-hook", "mcp"]' in text and str(data_dir) not in text
    assert run_cli("uninstall", "--agent", "pi", "--project", str(proj)).returncode == 0
    assert not (proj / ".pi" / "extensions").exists()


# -- the extension itself, run by node as Pi runs it ------------------------------------------------
NODE = shutil.which("node")
DRIVER = r"""
import { pathToFileURL } from "node:url";
const [ext, calls, cwd] = [process.argv[2], JSON.parse(process.argv[3]), process.argv[4]];
const mod = await import(pathToFileURL(ext).href);
const handlers = {};
const tools = {};
const pi = { on: (name, f) => { (handlers[name] = handlers[name] || []).push(f); }, registerTool: (t) => { tools[t.name] = t; } };
await mod.default(pi);
// the session as Pi keeps it for tool_call: the model's message with the call and its siblings
// (`batch`: the other calls of that message, none by default)
let leaf = null;
const ctx = { cwd, sessionManager: { getSessionId: () => process.env.SID, getSessionFile: () => process.env.SFILE,
  getLeafEntry: () => leaf, getEntry: () => null } };
const out = [{ tools: Object.keys(tools), events: Object.keys(handlers).sort() }];
for (const [kind, name, arg] of calls) {
  try {
    if (kind === "event" && name === "tool_call") {
      const own = { type: "toolCall", id: arg.toolCallId, name: arg.toolName, arguments: arg.input };
      leaf = { type: "message", id: "m", parentId: null, message: { role: "assistant", content: [own, ...(arg.batch || [])] } };
      delete arg.batch;
    }
    if (kind === "event") out.push({ name, result: (await handlers[name][0](arg, ctx)) ?? null });
    else out.push({ name, text: (await tools[name].execute(arg.id, arg.params, undefined, undefined, ctx)).content[0].text });
  } catch (e) {
    out.push({ name, threw: String(e && e.message) });
  }
}
console.log(JSON.stringify(out));
process.exit(0);
"""


def drive(ext: Path, calls: list, cwd: Path, env: dict | None = None) -> list:
    copy = ext.parent.parent / "leanctx-under-test.mjs"  # node 20 takes `import` only from an .mjs
    copy.write_text(ext.read_text())
    driver = ext.parent.parent / "driver.mjs"
    driver.write_text(DRIVER)
    env = dict(env or os.environ)
    env.setdefault("SID", SESSION)
    env.setdefault("SFILE", str(cwd / "session.jsonl"))
    proc = subprocess.run([NODE, str(driver), str(copy), json.dumps(calls), str(cwd)], capture_output=True, text=True,
                          timeout=90, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def read_calls(call_id: str) -> list:
    return [["event", "tool_call", {"toolName": "ctx_read", "toolCallId": call_id, "input": {"path": "a.txt"}}],
            ["tool", "ctx_read", {"id": call_id, "params": {"path": "a.txt"}}]]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_extension_offers_ctx_read_and_a_second_read_of_the_session_is_the_stub(home: Path, data_dir: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", "pi").returncode == 0
    ext = home / ".pi" / "agent" / "extensions" / "leanctx.js"
    cwd = tmp_path / "proj"
    cwd.mkdir()
    # long enough that the stub is shorter than the file
    (cwd / "a.txt").write_text("hello from a file\n" + "".join(f"line {i} of the file\n" for i in range(300)))
    calls = [["event", "session_start", {"reason": "startup"}], ["event", "before_agent_start", {"prompt": "read a.txt"}],
             *read_calls("call_1"), *read_calls("call_2"), ["event", "agent_end", {}], ["event", "session_shutdown", {"reason": "quit"}]]
    out = drive(ext, calls, cwd)
    assert out[0]["tools"] == ["ctx_read"], out
    assert out[0]["events"] == sorted(["session_start", "before_agent_start", "session_before_compact", "session_compact",
                                       "session_before_tree", "session_tree", "agent_end", "session_shutdown", "tool_call",
                                       "tool_result", "context"])
    texts = [r["text"] for r in out[1:] if "text" in r]
    assert "hello from a file" in texts[0] and texts[1].startswith("[unchanged]"), out
    assert all(r.get("result") is None for r in out[1:] if "result" in r), out  # no guard: nothing blocked
    record = json.loads(next((data_dir / "conversations" / "pi").glob("*.json")).read_text())
    assert record["session_id"] == SESSION and record["cwd"] == str(cwd) and record["ended_at"]


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_guards_deny_blocks_the_call_and_a_missing_leanctx_is_a_no_op(home: Path, data_dir: Path, tmp_path: Path) -> None:
    assert run_cli("init", "--agent", "pi", "--guard").returncode == 0
    ext = home / ".pi" / "agent" / "extensions" / "leanctx.js"
    users = tmp_path / "cks" / "user"
    (users / "bob").mkdir(parents=True)
    env = dict(os.environ, CKS_HOME=str(tmp_path / "cks"), CKS_ACTIVE_USER="ana")
    cwd = tmp_path / "proj"
    cwd.mkdir()
    out = drive(ext, [["event", "session_start", {"reason": "startup"}],
                      ["event", "tool_call", {"toolName": "read", "toolCallId": "c1", "input": {"path": str(users / "bob" / "notes.md")}}],
                      ["event", "tool_call", {"toolName": "read", "toolCallId": "c2", "input": {"path": str(cwd / "a.txt")}}]], cwd, env)
    blocked, let_through = out[2]["result"], out[3]["result"]
    assert blocked["block"] is True and "bob" in blocked["reason"], out
    assert let_through is None, out
    # leanctx gone (the wrapper removed): no tool, every handler still returns, nothing thrown
    (data_dir / "bin" / "leanctx-hook").unlink()
    out = drive(ext, [["event", "session_start", {"reason": "startup"}], *read_calls("c2")[:1], ["event", "agent_end", {}]], cwd)
    assert out[0]["tools"] == [] and all("threw" not in r for r in out), out


# -- Pi's own read and bash under the read cache ----------------------------------------------------
from leanctx import readers  # noqa: E402
from leanctx.agents import pi as pi_mod  # noqa: E402

CWD = "/home/user/work/proj"


def test_read_calls_name_a_file_and_span_only_when_sure() -> None:
    ask = lambda args, cwd=CWD: pi_mod.read_request(args, cwd)  # noqa: E731
    assert ask({"path": "a.txt"}) == (f"{CWD}/a.txt", 1, None)
    assert ask({"path": "/etc/../srv/a.txt", "offset": 0}) == ("/srv/a.txt", 1, None)  # offset 0 reads from line 1
    assert ask({"path": "src/a.py", "offset": 5, "limit": 10}) == (f"{CWD}/src/a.py", 5, 14)
    assert ask({"path": "a.txt", "limit": 3}) == (f"{CWD}/a.txt", 1, 3)
    # Pi would read something else, or we cannot say which lines: not named
    for args in ({"path": "a.txt", "offset": -1}, {"path": "a.txt", "offset": 2.5}, {"path": "a.txt", "limit": 0},
                 {"path": "a.txt", "limit": True}, {"path": "a.txt", "encoding": "latin1"}, {"path": "@a.txt"},
                 {"path": "~/a.txt"}, {"path": "it's.txt"}, {"path": "Shot 1.02.03 PM.png"}, {"path": "caf\u00e9.txt"},
                 {"path": "a\u00a0b.txt"}, {"path": ""}, {"path": 5}, {}, "a.txt"):
        assert ask(args) is None, args
    assert ask({"path": "a.txt"}, cwd=None) is None and ask({"path": "a.txt"}, cwd="rel") is None


def test_what_a_read_result_stands_for() -> None:
    lines = [f"row {i}" for i in range(1, 11)]
    whole = "\n".join(lines) + "\n"
    assert pi_mod.read_delivered(whole, 1, None) == (1, None, whole)  # the file as it is
    assert pi_mod.read_delivered("\n".join(lines[4:]) + "\n", 5, None) == (5, None, "\n".join(lines[4:]) + "\n")
    # cut by Pi (lines, or 50 KB): the lines before the note, numbered from the call's offset
    cut = "\n".join(lines[:3]) + "\n\n[Showing lines 1-3 of 11. Use offset=4 to continue.]"
    assert pi_mod.read_delivered(cut, 1, None) == (1, 3, "\n".join(lines[:3]))
    kb = "\n".join(lines[2:5]) + "\n\n[Showing lines 3-5 of 11 (50.0KB limit). Use offset=6 to continue.]"
    assert pi_mod.read_delivered(kb, 3, None) == (3, 5, "\n".join(lines[2:5]))
    # a limit that stops before the end: its note
    more = "\n".join(lines[1:4]) + "\n\n[7 more lines in file. Use offset=5 to continue.]"
    assert pi_mod.read_delivered(more, 2, 4) == (2, 4, "\n".join(lines[1:4]))
    # a limit past the end: the rest of the file, as it is
    assert pi_mod.read_delivered("\n".join(lines[7:]) + "\n", 8, 20) == (8, None, "\n".join(lines[7:]) + "\n")
    # numbers that do not agree with the call or with the lines before them: nothing
    assert pi_mod.read_delivered(cut, 2, None) is None
    assert pi_mod.read_delivered(cut.replace("offset=4", "offset=9"), 1, None) is None
    assert pi_mod.read_delivered(cut.replace("1-3", "1-4"), 1, None) is None
    assert pi_mod.read_delivered(more, 2, 5) is None
    assert pi_mod.read_delivered("\n".join(lines[1:6]), 2, 4) is None  # more lines than the limit, no note
    # a file whose own last lines look like the note, read with a limit: the count gives it away
    assert pi_mod.read_delivered("x\n\n[3 more lines in file. Use offset=11 to continue.]", 1, 10) is None
    assert pi_mod.read_delivered("", 1, None) is None and pi_mod.read_delivered(None, 1, None) is None


def read_event(event: str, tool: str, args: dict, call: str = "call_1", **more: object):
    payload = sent(event, cwd=CWD, tool_name=tool, tool_input=args, tool_use_id=call, **more)
    return AGENT.normalize(event, payload), payload


def result(text: str, **over: object) -> dict:
    return {"tool_response": {"content": [{"type": "text", "text": text}], "isError": False, "truncated": False,
                              "fullOutputPath": None, **over}}


def test_the_gate_names_pis_read_and_plain_shell_reads(home: Path) -> None:
    event, _ = read_event("tool_call", "read", {"path": "a.txt", "offset": 3, "limit": 4})
    assert event.kind == PRE_TOOL and AGENT.builtin_read_ask(event) == readers.Ask(f"{CWD}/a.txt", 3, 6)
    event, _ = read_event("tool_call", "bash", {"command": "sed -n '2,9p' a.txt", "timeout": 30})
    assert AGENT.builtin_read_ask(event) == readers.Ask(f"{CWD}/a.txt", 2, 9, reader="shell")
    for tool, args in (("bash", {"command": "cat a.txt | head"}), ("bash", {"command": "cat a.txt", "cwd": "/x"}),
                       ("write", {"path": "a.txt", "content": "x"}), ("ctx_read", {"path": "a.txt"})):
        assert AGENT.builtin_read_ask(read_event("tool_call", tool, args)[0]) is None, (tool, args)
    assert AGENT.builtin_read_ask(read_event("tool_call", "read", {"path": "a.txt"}, call="")[0]) is None


@pytest.mark.parametrize("settings", ['{"shellCommandPrefix": "cd /elsewhere"}', '{"shellPath": "/bin/fish"}', "{not json", "[]"])
def test_a_shell_prefix_or_an_unreadable_setting_leaves_shell_reads_ungated(home: Path, tmp_path: Path, settings: str) -> None:
    """Pi's shellCommandPrefix runs before every bash command (a `cd` there moves a relative name):
    with it set, in the agent dir's or the project's settings, or either unreadable, bash is not gated."""
    proj = tmp_path / "proj"
    (proj / ".pi").mkdir(parents=True)
    event = AGENT.normalize("tool_call", sent("tool_call", cwd=str(proj), tool_name="bash", tool_input={"command": "cat a.txt"},
                                              tool_use_id="c1"))
    assert AGENT.builtin_read_ask(event) == readers.Ask(str(proj / "a.txt"), reader="shell")
    (proj / ".pi" / "settings.json").write_text(settings)
    assert AGENT.builtin_read_ask(event) is None
    (proj / ".pi" / "settings.json").unlink()
    agent_dir = home / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    (agent_dir / "settings.json").write_text(settings)
    assert AGENT.builtin_read_ask(event) is None
    (agent_dir / "settings.json").write_text('{"theme": "dark"}')
    assert AGENT.builtin_read_ask(event) == readers.Ask(str(proj / "a.txt"), reader="shell")


def test_what_a_delivery_credits_and_what_it_refuses(home: Path) -> None:
    event, payload = read_event("tool_result", "read", {"path": "a.txt", "offset": 2, "limit": 2})
    assert event.kind == POST_TOOL
    text = "two\nthree\n\n[5 more lines in file. Use offset=4 to continue.]"
    assert AGENT.builtin_read_delivery(event, {**payload, **result(text)}) == (readers.Ask(f"{CWD}/a.txt", 2, 3), "two\nthree")
    event, payload = read_event("tool_result", "bash", {"command": "cat -n a.txt"})
    assert AGENT.builtin_read_delivery(event, {**payload, **result("     1\tone\n     2\ttwo\n")}) == (
        readers.Ask(f"{CWD}/a.txt", numbered=True, reader="shell"), "one\ntwo")
    refused = [
        result("x", isError=True),                    # an error result (bash: a non-zero exit)
        result("x", isError=None),
        result("x", truncated=True),                  # bash cut the output
        result("x", fullOutputPath="pi-bash-0123abcd.log"),
        {"tool_response": {"content": [{"type": "text", "text": "x"}, {"type": "image"}], "isError": False, "truncated": False}},
        {"tool_response": {"content": [], "isError": False, "truncated": False}},
        {"tool_response": {"content": "x", "isError": False, "truncated": False}},
        {},
        result("     1\tone\n     3\ttwo\n"),           # numbers out of step
    ]
    for more in refused:
        assert AGENT.builtin_read_delivery(event, {**payload, **more}) is None, more
    # Pi's read of an image: a note and the picture, never file text
    event, payload = read_event("tool_result", "read", {"path": "a.png"})
    image = {"tool_response": {"content": [{"type": "text", "text": "Read image file [image/png]"}, {"type": "image"}],
                               "isError": False, "truncated": False}}
    assert AGENT.builtin_read_delivery(event, {**payload, **image}) is None


def wired_hooks(home: Path) -> dict:
    """The extension's HOOKS: event -> the hook command's arguments after the wrapper."""
    text = (home / ".pi" / "agent" / "extensions" / "leanctx.js").read_text()
    hooks = json.loads(text[text.index("const HOOKS = ") + len("const HOOKS = "):text.index("};") + 1])
    return {event: command.split(" ", 1)[1] for event, command in hooks.items()}


def test_init_wires_the_built_in_gate_and_no_builtin_gate_takes_it_out(home: Path, data_dir: Path) -> None:
    assert run_cli("init", "--agent", "pi").returncode == 0
    hooks = wired_hooks(home)
    assert hooks["tool_call"] == "pi tool_call --read-gate --builtin-read" and hooks["tool_result"] == "pi tool_result --builtin-read"
    assert 'const READ_TOOLS = new Set(["read", "bash"])' in (home / ".pi" / "agent" / "extensions" / "leanctx.js").read_text()
    assert run_cli("init", "--agent", "pi", "--no-builtin-gate").returncode == 0
    hooks = wired_hooks(home)
    assert hooks["tool_call"] == "pi tool_call --read-gate" and "tool_result" not in hooks
    assert run_cli("init", "--agent", "pi", "--guard").returncode == 0
    assert wired_hooks(home)["tool_call"] == "pi tool_call --guard --read-gate --builtin-read"


def daemon_up() -> list:
    """A ctx_read first: the MCP server has the cache daemon up once it answers (the read gate's
    hooks never start it; without it they credit nothing and refuse nothing)."""
    return [["tool", "ctx_read", {"id": "c0", "params": {"path": "b.txt"}}]]


def builtin_calls(call: str, seen: str, **context: object) -> list:
    """A read of a.txt by Pi's own tool, its result, and the next request's messages."""
    message = {"role": "toolResult", "toolCallId": call, "toolName": "read", "isError": False,
               "content": [{"type": "text", "text": context.get("sent", seen)}]}
    calls = [["event", "tool_call", {"toolName": "read", "toolCallId": call, "input": {"path": "a.txt"}}],
             ["event", "tool_result", {"toolName": "read", "toolCallId": call, "input": {"path": "a.txt"}, "isError": False,
                                       "content": [{"type": "text", "text": seen}]}]]
    if context.get("compact"):
        calls.append(["event", "session_before_compact", {}])
    calls.append(["event", "context", {"messages": [message] if context.get("carried", True) else []}])
    return calls


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("case", ["carried", "changed by a later handler", "not carried", "compacted before the request"])
def test_the_extension_credits_pis_read_only_once_the_next_request_carries_it(home: Path, data_dir: Path, tmp_path: Path, case: str) -> None:
    assert run_cli("init", "--agent", "pi").returncode == 0
    ext = home / ".pi" / "agent" / "extensions" / "leanctx.js"
    cwd = tmp_path / "proj"
    cwd.mkdir()
    text = "hello from a file\n" + "".join(f"line {i} of the file\n" for i in range(300))
    (cwd / "a.txt").write_text(text)
    more = {"carried": {}, "changed by a later handler": {"sent": text + "(a note another extension added)"},
            "not carried": {"carried": False}, "compacted before the request": {"compact": True}}[case]
    again = ["event", "tool_call", {"toolName": "read", "toolCallId": "c2", "input": {"path": "a.txt"}}]
    (cwd / "b.txt").write_text("another file\n")
    out = drive(ext, [["event", "session_start", {"reason": "startup"}], *daemon_up(), *builtin_calls("c1", text, **more), again], cwd)
    assert out[3]["result"] is None and out[4]["result"] is None, out  # the first read runs, its result is left as it is
    last = out[-1]["result"]
    if case == "carried":
        assert last["block"] is True and last["reason"].startswith("[unchanged] a.txt 301 lines"), out
    else:
        assert last is None, out


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_a_read_beside_a_call_that_may_write_is_not_answered_by_the_cache(home: Path, data_dir: Path, tmp_path: Path) -> None:
    """Pi runs one message's calls together (each tool_call first): a stub beside an edit, a
    write or a shell command could say "unchanged" of a file that changes under it. Beside reads
    only (read, grep, ls, a plain cat), the stub; beside anything else, the read runs."""
    assert run_cli("init", "--agent", "pi").returncode == 0
    ext = home / ".pi" / "agent" / "extensions" / "leanctx.js"
    cwd = tmp_path / "proj"
    cwd.mkdir()
    text = "hello from a file\n" + "".join(f"line {i} of the file\n" for i in range(300))
    (cwd / "a.txt").write_text(text)
    sibling = lambda name, args: {"type": "toolCall", "id": f"s_{name}", "name": name, "arguments": args}  # noqa: E731
    batches = {
        "reads": [sibling("grep", {"pattern": "x"}), sibling("ls", {}), sibling("bash", {"command": "cat b.txt"}),
                  sibling("ctx_read", {"path": "b.txt"})],
        "edit": [sibling("edit", {"path": "a.txt", "edits": []})],
        "write": [sibling("write", {"path": "a.txt", "content": "x"})],
        "shell": [sibling("bash", {"command": "cat b.txt > a.txt"})],
        "sed": [sibling("bash", {"command": "sed -i 's/a/b/' a.txt"})],
        "other tool": [sibling("deploy", {})],
    }
    (cwd / "b.txt").write_text("another file\n")
    calls = [["event", "session_start", {"reason": "startup"}], *daemon_up(), *builtin_calls("c1", text)]
    for name, batch in batches.items():
        calls.append(["event", "tool_call", {"toolName": "bash", "toolCallId": f"c_{name}", "input": {"command": "cat a.txt"}, "batch": batch}])
    out = drive(ext, calls, cwd)
    answers = dict(zip(batches, [r["result"] for r in out[-len(batches):]]))
    assert answers["reads"]["block"] is True and answers["reads"]["reason"].startswith("[unchanged] a.txt"), answers
    assert all(answers[name] is None for name in batches if name != "reads"), answers


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_bot_profile_records_the_reply_and_hands_the_thread_to_a_new_sessions_first_prompt(home: Path, data_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ, CKS_HOME=str(tmp_path / "cks"), CKS_ACTIVE_USER="ana")
    assert run_cli("init", "--agent", "pi", "--bot", env=env).returncode == 0
    ext = home / ".pi" / "agent" / "extensions" / "leanctx.js"
    cwd = tmp_path / "proj"
    cwd.mkdir()
    reply = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": [{"type": "text", "text": "Blue, size M."}]}]}
    out = drive(ext, [["event", "session_start", {"reason": "startup"}],
                      ["event", "before_agent_start", {"prompt": "which mug?"}],
                      ["event", "agent_end", reply],
                      ["event", "before_agent_start", {"prompt": "and the price?"}]], cwd, env)
    assert out[2]["result"] is None and out[4]["result"] is None, out  # nothing to hand back yet; same session after
    state = json.loads(run_cli("state", "show", "--json", env=env).stdout)
    assert [(t["role"], t["text"]) for t in state["recent_turns"]] == [
        ("user", "which mug?"), ("agent", "Blue, size M."), ("user", "and the price?")]
    # a new Pi session (another id): its first prompt carries the thread, as a message Pi keeps
    out = drive(ext, [["event", "session_start", {"reason": "new"}], ["event", "before_agent_start", {"prompt": "hello again"}],
                      ["event", "before_agent_start", {"prompt": "one more"}]], cwd, dict(env, SID="01b-new-session"))
    message = out[2]["result"]["message"]
    assert message["customType"] == "leanctx" and "Blue, size M." in message["content"] and message["display"] is False
    assert out[3]["result"] is None, out  # once per session
