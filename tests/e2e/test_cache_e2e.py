"""End to end: the read cache through the real Claude Code CLI and its real MCP connection.

`leanctx init --agent claude` wires the hooks and registers `leanctx mcp`; Claude spawns that
server itself (with CLAUDE_CODE_SESSION_ID in its environment, as its child), the scripted model
calls `mcp__leanctx__ctx_read`, and the tool results are read back from the requests the fake
model server receives. The daemon the MCP server starts is stopped after each test.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from tests.e2e import hostcli, tracetap
from tests.e2e.conftest import CLI_TIMEOUT
from tests.e2e.fake_anthropic import FakeAnthropic, is_subagent, tool_use

pytestmark = pytest.mark.e2e

READ = "mcp__leanctx__ctx_read"
TOOLS = f"{READ},Agent"


def tool_results(body: dict) -> list[str]:
    """The text of every tool_result block in the latest message that has any (Claude may append
    system-role reminders after it)."""
    out: list[str] = []
    for message in reversed(body["messages"]):
        blocks = [b for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(message["content"], list) else []
        if blocks:
            break
    else:
        return out
    for block in blocks:
        if block.get("type") == "tool_result":
            content = block.get("content")
            if isinstance(content, list):
                out.append("".join(c.get("text", "") for c in content if isinstance(c, dict)))
            else:
                out.append(str(content))
    return out


@pytest.fixture
def wired(host_home, lean):
    lean.run("init", "--agent", "claude")
    big = host_home.proj / "big.py"
    big.write_text("".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200)))
    yield host_home
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def run(claude_cli, hh, lean, run_host, script, *extra, prompt="read big.py"):
    with FakeAnthropic(script=script) as srv:
        # No MCP_CONNECTION_NONBLOCKING: Claude Code 2.1.197 sends the first turn of `claude -p`
        # without waiting for a slow MCP server; ours answers its handshake in tens of ms, so the
        # first request the model gets already offers ctx_read.
        env = hostcli.claude_env(hh.home, srv.base_url)
        assert "MCP_CONNECTION_NONBLOCKING" not in env
        cp, _ = run_host([claude_cli, "-p", prompt, "--allowedTools", TOOLS, *extra], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        first = next((r.body for r in srv.log if r.kind in ("main", "tool_search")), None)
        if first is not None:  # `/compact` sends no turn of the main conversation
            assert offers(first, READ), f"the first turn did not offer {READ}: {offered_tools(first)}"
        return srv.main_requests


def offered_tools(body: dict) -> list[str]:
    """The names of the tools a request to the model offers."""
    return [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]


def offers(body: dict, name: str) -> bool:
    """The request offers the tool: in `tools`, or (Claude Code 2.1.332's tool search) by name in
    the system message listing the deferred tools, with ToolSearch offered to load it."""
    tools = offered_tools(body)
    if name in tools:
        return True
    if "ToolSearch" not in tools:
        return False
    for message in [{"content": body.get("system")}, *(body.get("messages") or [])]:
        content = message.get("content")
        for block in content if isinstance(content, list) else [{"text": content}]:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and "deferred tools" in text and name in text.splitlines():
                return True
    return False


def test_second_read_in_a_session_is_the_stub_and_a_new_session_gets_content(claude_cli, wired, lean, run_host):
    hh = wired
    content = (hh.proj / "big.py").read_text()
    tap = tracetap.install_tap(hh.claude_dir / "settings.json", hh.root)
    bodies = run(claude_cli, hh, lean, run_host, [tool_use(READ, {"path": "big.py"}), tool_use(READ, {"path": "big.py"}), "done"])
    first, second = tool_results(bodies[1])[0], tool_results(bodies[2])[0]
    assert "def function_199" in first and len(first) >= len(content) - 10
    assert second.startswith("[unchanged]") and "big.py" in second and "fresh=true" in second
    assert len(second) < len(content) / 20
    lean.assert_no_hook_errors()
    # a new session (a new claude process) never inherits the stub
    bodies = run(claude_cli, hh, lean, run_host, [tool_use(READ, {"path": "big.py"}), "done"])
    assert "def function_199" in tool_results(bodies[1])[0]
    # `leanctx stats`: each claude process is one context, charged once for our tool definition and
    # rule (its MCP server's tools/list and its reads are the same context); net of that charge
    st = json.loads(lean.run("stats", "--json").stdout)
    assert (st["reads"], st["stubs"], st["contexts"]) == (3, 1, 2), st
    assert st["tokens_saved"] == st["tokens_raw"] - st["tokens_sent"] - st["tokens_reread"] - st["tokens_overhead"]
    assert st["by_reader"]["ctx_read"]["reads"] == 3 and st["by_agent"]["claude"]["contexts"] == 2
    assert sum(b["contexts"] for b in st["by_conversation"].values()) == 2
    tracetap.check_replay(tracetap.to_trace(tap, hh.proj, {"big.py": content}), hh, ["full", "stub", "full"], "claude-two-sessions", host="Claude Code", source=__file__)


def test_after_compaction_the_next_read_is_full(claude_cli, wired, lean, run_host):
    hh = wired
    tap = tracetap.install_tap(hh.claude_dir / "settings.json", hh.root)
    run(claude_cli, hh, lean, run_host, [tool_use(READ, {"path": "big.py"}), tool_use(READ, {"path": "big.py"}), "done"])
    run(claude_cli, hh, lean, run_host, ["summary of the conversation"], "--continue", prompt="/compact")
    assert lean.only_record("claude")["compactions"] >= 1
    bodies = run(claude_cli, hh, lean, run_host, [tool_use(READ, {"path": "big.py"}), "done"], "--continue", prompt="read it again")
    assert "def function_199" in tool_results(bodies[-1])[0], "a stub was served after the context was compacted"
    files = {"big.py": (hh.proj / "big.py").read_text()}
    tracetap.check_replay(tracetap.to_trace(tap, hh.proj, files), hh, ["full", "stub", "full"], "claude-compaction", host="Claude Code", source=__file__)


def test_two_concurrent_sessions_each_keep_their_own_stubs(claude_cli, wired, lean, run_host):
    hh = wired
    tap = tracetap.install_tap(hh.claude_dir / "settings.json", hh.root)
    results: dict[int, list] = {}

    def session(n: int) -> None:
        results[n] = run(claude_cli, hh, lean, run_host,
                         [tool_use(READ, {"path": "big.py"}), tool_use(READ, {"path": "big.py"}), "done"], prompt=f"session {n}")

    threads = [threading.Thread(target=session, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(CLI_TIMEOUT * 2)
    assert sorted(results) == [1, 2]
    for bodies in results.values():
        assert "def function_199" in tool_results(bodies[1])[0], "a session got a stub for its first read"
        assert tool_results(bodies[2])[0].startswith("[unchanged]"), "a session lost its own stub to the other one"
    assert len(lean.records("claude")) == 2
    files = {"big.py": (hh.proj / "big.py").read_text()}
    tracetap.check_replay(tracetap.to_trace(tap, hh.proj, files), hh, ["full", "full", "stub", "stub"], "claude-concurrent",
                          host="Claude Code", source=__file__, ordered=False)


def test_a_subagent_gets_no_stub_for_its_parents_bytes_but_keeps_its_own(claude_cli, wired, lean, run_host):
    """Claude Code sends each call's tool_use_id in `_meta`; the read gate noted, just before,
    whether the parent or the subagent makes it. The subagent's first read is content (only its
    parent held it), its re-read is its own stub, and the parent keeps its stub afterwards."""
    hh = wired
    files = {"big.py": (hh.proj / "big.py").read_text()}
    tap = tracetap.install_tap(hh.claude_dir / "settings.json", hh.root)
    lean.run("serve", "--detach")  # the read gate is the daemon's: up before the fake model's instant first call
    script = [
        tool_use(READ, {"path": "big.py"}),                                   # parent reads: full
        tool_use("Agent", {"description": "read big.py", "prompt": "Read big.py with ctx_read, twice.",
                           "subagent_type": "general-purpose",
                           # and waits for it (2.1.332 runs agents in the background by default,
                           # and the parent's turns would take the subagent's scripted answers)
                           "run_in_background": False}),                     # parent spawns a subagent
        tool_use(READ, {"path": "big.py"}),                                   # the subagent reads: full
        tool_use(READ, {"path": "big.py"}),                                   # ...and again: its own stub
        "sub: done",
        tool_use(READ, {"path": "big.py"}),                                   # the parent again: its stub
        "done",
    ]
    bodies = run(claude_cli, hh, lean, run_host, script)
    sub = [b for b in bodies if is_subagent(b)]
    parent = [b for b in bodies if not is_subagent(b)]
    assert len(sub) == 3 and len(parent) == 4, (len(sub), len(parent))
    assert "def function_199" in tool_results(sub[1])[0], "the subagent was served a stub for content only its parent holds"
    assert tool_results(sub[2])[0].startswith("[unchanged]"), "the subagent lost the stub for its own re-read"
    assert "def function_199" in tool_results(parent[1])[0]
    assert tool_results(parent[3])[0].startswith("[unchanged]"), "the parent lost its stub after the subagent ran"
    notes = lean.only_record("claude")["read_calls"]
    assert len(notes) == 4 and sum(1 for n in notes.values() if n["agent_id"]) == 2, notes
    lean.assert_no_hook_errors()
    # The run, replayed from what the host itself sent (bench/cache_replay.py's engine), gives the
    # same answers the real run gave, with 0 wrong stubs; LEANCTX_RECORD_TRACES keeps the trace.
    tracetap.check_replay(tracetap.to_trace(tap, hh.proj, files), hh, ["full", "full", "stub", "stub"], "claude-subagent", host="Claude Code", source=__file__)


def test_claude_mcp_list_shows_leanctx(claude_cli, wired, lean):
    env = hostcli.claude_env(wired.home, "http://127.0.0.1:9")
    cp = subprocess.run([claude_cli, "mcp", "list"], cwd=wired.proj, env=env, capture_output=True, text=True,
                        timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
    assert cp.returncode == 0, cp.stderr
    line = next((ln for ln in cp.stdout.splitlines() if ln.startswith("leanctx")), "")
    assert line, cp.stdout
    assert "leanctx-hook mcp" in line and "Connected" in line, line


def test_after_a_rewind_the_lost_read_is_full_again(claude_cli, wired, lean, run_host):
    """`--resume <session> --resume-session-at <message id>` continues the session from an earlier
    assistant message (a rewind, headless): the read made after that point is no longer in the
    context, under the same session id and with no hook event saying so. The transcript shows it,
    and the next read of the file is the content again, not a stub."""
    import json

    hh = wired
    run(claude_cli, hh, lean, run_host, ["hello"], prompt="say hello")
    run(claude_cli, hh, lean, run_host, [tool_use(READ, {"path": "big.py"}), tool_use(READ, {"path": "big.py"}), "done"],
        "--continue")
    transcripts = list((hh.home / ".claude" / "projects").rglob("*.jsonl"))
    (transcript,) = [t for t in transcripts if "subagents" not in t.parts]
    entries = [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()]
    hello = next(e for e in entries if e.get("type") == "assistant"
                 and any(b.get("type") == "text" and b.get("text") == "hello" for b in e["message"]["content"]))
    session = transcript.stem
    bodies = run(claude_cli, hh, lean, run_host, [tool_use(READ, {"path": "big.py"}), "done"],
                 "--resume", session, "--resume-session-at", hello["uuid"], prompt="read big.py again")
    assert not any("def function_199" in r for b in bodies[:1] for r in tool_results(b)), "the rewind kept the read"
    assert "def function_199" in tool_results(bodies[-1])[0], "a stub for content the rewound context lost"
    record = lean.only_record("claude")
    assert record["conversation_id"] == session and record.get("compactions", 0) == 0  # no hook told us


def test_a_result_too_large_for_claude_code_is_never_held(claude_cli, wired, lean, run_host):
    """Claude Code keeps only a preview of an MCP result over its size limit (50,000 characters in
    2.1.197): the model gets `<persisted-output>`, a 2 KB preview and the path of a file holding the
    rest. The bytes never reached the context, so the re-read must not be the `[unchanged]` stub."""
    hh = wired
    (hh.proj / "huge.py").write_text("".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(3000)))
    bodies = run(claude_cli, hh, lean, run_host, [tool_use(READ, {"path": "huge.py"}), tool_use(READ, {"path": "huge.py"}), "done"],
                 prompt="read huge.py")
    first, second = tool_results(bodies[1])[0], tool_results(bodies[2])[0]
    assert first.startswith("<persisted-output>") and "def function_2999" not in first, first[:300]
    assert not second.startswith("[unchanged]"), "a stub for bytes the host kept only a preview of"
