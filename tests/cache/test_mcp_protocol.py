"""`leanctx mcp` on the wire, as a real subprocess fed raw lines: the handshake it answers itself
(version negotiation), JSON-RPC errors with the right codes, a malformed line that does not end
it, what its start-up path imports, and what the tool definitions cost the model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.cache import tokens
from leanctx.cache.mcpserver import PROTOCOL_VERSIONS, tools_for
from leanctx.installer import instructions

if sys.platform != "linux":
    pytestmark = pytest.mark.skip("Linux-only process checks")

REGISTERED = [sys.executable, "-m", "leanctx", "mcp"]  # the module the registered wrapper (mcpreg.server_command) runs


def initialize(version: object = "2025-06-18", msg_id: object = 1) -> dict:
    params = {"capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    if version is not None:
        params["protocolVersion"] = version
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params}


class Wire:
    """The host's end of the pipes: lines in, lines out."""

    def __init__(self, env: dict, cwd: Path, *args: str) -> None:
        self.proc = subprocess.Popen([*REGISTERED, *args], env=env, cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(self, message: object) -> None:
        self.raw(json.dumps(message).encode() + b"\n")

    def raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answer(self) -> object:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"the server exited: {self.proc.stderr.read().decode() if self.proc.stderr else ''}"
        return json.loads(line)

    def ask(self, message: object) -> object:
        self.send(message)
        return self.answer()

    def close(self) -> tuple[int, bytes]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        code = self.proc.wait(30)
        rest = self.proc.stdout.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code, rest


@pytest.fixture
def local_env(env: dict) -> dict:
    return dict(env, LEANCTX_DAEMON="0")


@pytest.mark.parametrize(("asked", "agreed"), [
    ("2025-06-18", "2025-06-18"), ("2024-11-05", "2024-11-05"), ("2025-11-25", "2025-11-25"),
    ("2026-07-28", PROTOCOL_VERSIONS[0]), ("1999-01-01", PROTOCOL_VERSIONS[0]), (None, PROTOCOL_VERSIONS[0]),
    (17, PROTOCOL_VERSIONS[0]),
])
def test_initialize_answers_the_clients_version_when_spoken_else_the_latest(local_env: dict, tmp_path: Path,
                                                                           asked: object, agreed: str) -> None:
    wire = Wire(local_env, tmp_path)
    answer = wire.ask(initialize(asked))
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == agreed
    assert answer["result"]["serverInfo"]["name"] == "leanctx" and answer["result"]["capabilities"] == {"tools": {"listChanged": False}}
    assert wire.close() == (0, b"")


def test_errors_have_their_json_rpc_codes_and_never_end_the_server(local_env: dict, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    wire = Wire(local_env, tmp_path)
    # before initialize: only ping is served
    assert wire.ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["error"]["code"] == -32002
    assert wire.ask({"jsonrpc": "2.0", "id": 2, "method": "ping"}) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    assert wire.ask(initialize(msg_id="init"))["id"] == "init"
    wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})  # a notification: no answer
    wire.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}})
    wire.send({"jsonrpc": "2.0", "id": 99, "result": {}})  # a response to nothing we asked: ignored
    # malformed lines, each answered -32700 with a null id, and the server carries on
    for bad in (b"{not json\n", b"\xff\xfe\x00garbage\n", b'{"jsonrpc": "2.0", "id": 3, "method": \n', b"[" * 100000 + b"\n"):
        wire.raw(bad)
        assert wire.answer() == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error: not a JSON message"}}
    assert wire.ask({"id": 4, "method": "ping"})["error"]["code"] == -32600  # no "jsonrpc": "2.0"
    assert wire.ask([])["error"]["code"] == -32600
    assert wire.ask({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}) == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "id must be a string or an integer"}}
    assert wire.ask({"jsonrpc": "2.0", "id": 5, "method": 7})["error"]["code"] == -32600
    assert wire.ask({"jsonrpc": "2.0", "id": 6, "method": "resources/list"})["error"]["code"] == -32601
    wire.raw(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "nope"}\n')  # a lone surrogate, echoed as valid JSON
    assert wire.answer()["error"]["code"] == -32601
    assert wire.ask({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": [1]})["error"]["code"] == -32602
    for params in ({}, {"name": 3}, {"name": "ctx_read", "arguments": ["a.txt"]}, {"name": "state_show"}, {"name": "nope"}):
        answer = wire.ask({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": params})
        assert answer["id"] == 8 and answer["error"]["code"] == -32602, (params, answer)
    # a bad argument is the model's to fix: a tool error it sees, not a protocol error
    answer = wire.ask({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "ctx_read", "arguments": {"path": 5}}})
    assert answer["result"]["isError"] is True and "path must be a non-empty string" in answer["result"]["content"][0]["text"]
    answer = wire.ask({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                       "params": {"name": "ctx_read", "arguments": {"path": "a.txt", "mode": "x"}}})
    assert answer["result"]["isError"] is True and "unexpected argument(s): mode" in answer["result"]["content"][0]["text"]
    for odd in ("²", "9" * 5000, "-1", 0, 2.5, True, None, [1]):  # never an internal error, never a read of line 0
        answer = wire.ask({"jsonrpc": "2.0", "id": 15, "method": "tools/call",
                           "params": {"name": "ctx_read", "arguments": {"path": "a.txt", "start_line": odd, "end_line": odd}}})
        result = answer["result"]
        assert result["content"][0]["text"] == "alpha\n" if odd is None else result["isError"] is True, (odd, answer)
    # a line over the limit is skipped whole, then the next one is served
    wire.raw(b'{"jsonrpc": "2.0", "id": 11, "method": "ping", "params": {"pad": "' + b"x" * (5 << 20) + b'"}}\n')
    assert wire.answer()["error"]["code"] == -32700
    answer = wire.ask({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "ctx_read", "arguments": {"path": "a.txt"}}})
    assert answer == {"jsonrpc": "2.0", "id": 12, "result": {"content": [{"type": "text", "text": "alpha\n"}], "isError": False}}
    # a batch (protocol 2025-03-26) is answered as one array, notifications left out
    batch = wire.ask([{"jsonrpc": "2.0", "id": 13, "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/x"},
                      {"jsonrpc": "2.0", "id": 14, "method": "tools/list"}])
    assert [a["id"] for a in batch] == [13, 14] and [t["name"] for t in batch[1]["result"]["tools"]] == ["ctx_read"]
    assert wire.close() == (0, b"")


def test_tool_calls_are_served_concurrently_and_answered_by_id(local_env: dict, tmp_path: Path) -> None:
    for i in range(8):
        (tmp_path / f"f{i}.txt").write_text(f"file {i}\n")
    wire = Wire(local_env, tmp_path)
    wire.ask(initialize())
    for i in range(8):
        wire.send({"jsonrpc": "2.0", "id": f"c{i}", "method": "tools/call", "params": {"name": "ctx_read", "arguments": {"path": f"f{i}.txt"}}})
    answers = {a["id"]: a["result"]["content"][0]["text"] for a in (wire.answer() for _ in range(8))}
    assert answers == {f"c{i}": f"file {i}\n" for i in range(8)}
    assert wire.close() == (0, b"")


FORBIDDEN = ("mcp", "pydantic", "anyio", "click", "tiktoken", "psutil", "httpx", "starlette")


@pytest.mark.parametrize("how", ["python -m leanctx", "leanctx console script"])
def test_the_handshake_path_imports_no_sdk_and_no_cli(local_env: dict, tmp_path: Path, how: str) -> None:
    """`python -X importtime` of the registered command through a whole handshake: none of the
    heavy packages the SDK server imported (that cost 0.6-1.8 s before hosts saw our tools)."""
    script = Path(sys.executable).with_name("leanctx")
    if how != "python -m leanctx" and not script.exists():
        pytest.skip("no console script in this environment")
    cmd = REGISTERED if how == "python -m leanctx" else [str(script), "mcp"]
    proc = subprocess.run(cmd, env=dict(local_env, PYTHONPROFILEIMPORTTIME="1"), cwd=tmp_path, capture_output=True, timeout=60,
                          input=(json.dumps(initialize()) + "\n" + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + "\n").encode())
    assert proc.returncode == 0
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "leanctx.cache.mcpserver" in imported
    heavy = sorted(m for m in imported if m.split(".")[0] in FORBIDDEN)
    assert heavy == [], heavy


@pytest.mark.parametrize("agent", [a for a in agents.all_agents() if a.rules_path(Path.home(), None) or a.rules_path(Path.home(), Path.cwd())],
                         ids=lambda a: a.name)
def test_the_coding_profile_costs_the_model_at_most_300_tokens(agent) -> None:  # noqa: ANN001
    """tools/list plus the read rule init installs, counted with the real tokenizer (cl100k_base);
    the ctx_read description still says exactly what a stub means."""
    assert tokens.report()["tokens_exact"], "count with the real tokenizer, not an estimate"
    path, kind = agent.rules_path(Path.home(), None) or agent.rules_path(Path.home(), Path.cwd())
    rule = instructions.render(instructions.CTX_READ, path, kind, None, "leanctx", agent.read_rule_note("leanctx"))
    listed = json.dumps({"tools": tools_for("coding")}, separators=(",", ":"))
    assert tokens.count(listed) + tokens.count(rule) <= 300
    assert [t["name"] for t in tools_for("coding")] == ["ctx_read"]
    description = tools_for("coding")[0]["description"]
    assert "`[unchanged]` stub: you already hold this text" in description and "fresh=true" in description
    assert "`[unchanged]` stub means you already hold" in " ".join(rule.split())


def test_the_bot_profile_adds_the_counters_and_the_state_tools(local_env: dict, tmp_path: Path) -> None:
    wire = Wire(local_env, tmp_path, "--profile", "bot")
    wire.ask(initialize())
    names = [t["name"] for t in wire.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]]
    assert names == ["ctx_read", "ctx_stats", "state_show", "state_set_pending", "state_clear_pending",
                     "state_set_summary", "state_end_thread"]
    assert wire.close() == (0, b"")


@pytest.mark.parametrize("args", [["--profile", "nope"], ["--profile"], ["--bogus"]])
def test_a_bad_mcp_command_line_is_refused_by_the_cli(local_env: dict, tmp_path: Path, args: list[str]) -> None:
    proc = subprocess.run([*REGISTERED, *args], env=local_env, cwd=tmp_path, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr and proc.stdout == b""
    assert b"--profile" in proc.stderr or b"--bogus" in proc.stderr
