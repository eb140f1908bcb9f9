"""End to end: one Claude Code session open in two processes at once.

`claude -p --session-id S` runs; while it is still inside its turn (its model request is held by
the fake server), a second `claude -p --resume S` starts in another "terminal" and reads other.py.
Both processes share the session id, its transcript and its one hook record (whichever process
wrote it last is named in it); each is its own context. The first process then writes the record
again (its subagent's SubagentStart/SubagentStop) and reads other.py: only the second process
holds it, so the first must get content, never the `[unchanged]` stub.
"""
from __future__ import annotations

import subprocess
import sys
import threading
import uuid

import pytest

from tests.e2e import hostcli
from tests.e2e.conftest import CLI_TIMEOUT
from tests.e2e.fake_anthropic import FakeAnthropic, is_subagent, tool_use
from tests.e2e.test_cache_e2e import READ, TOOLS, tool_results

pytestmark = pytest.mark.e2e


@pytest.fixture
def wired(host_home, lean):
    lean.run("init", "--agent", "claude")
    (host_home.proj / "big.py").write_text("".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200)))
    (host_home.proj / "other.py").write_text("".join(f"def helper_{i}(y):\n    return y + {i}\n\n" for i in range(200)))
    yield host_home
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def test_a_session_open_in_two_processes_is_two_contexts(claude_cli, wired, lean, run_host):
    hh = wired
    lean.run("serve", "--detach")  # the read gate is the daemon's: up before the fake model's instant first call
    sid = str(uuid.uuid4())
    first_waiting, second_read_other, first_done = threading.Event(), threading.Event(), threading.Event()

    def first_turn_2(body):  # the first process has read big.py; it waits, inside its turn
        first_waiting.set()
        assert second_read_other.wait(CLI_TIMEOUT), "the second process never read other.py"
        return tool_use("Agent", {"description": "say done", "prompt": "Say done.", "subagent_type": "general-purpose",
                                   "run_in_background": False})

    def first_last(body):
        first_done.set()
        return "done"

    def second_last(body):  # the second process has read other.py; it stays open until the first is done
        second_read_other.set()
        assert first_done.wait(CLI_TIMEOUT), "the first process never finished"
        return "done"

    out: dict[str, tuple] = {}

    def run(name, script, *args):
        with FakeAnthropic(script=script) as srv:
            env = hostcli.claude_env(hh.home, srv.base_url)
            cp, pid = run_host([claude_cli, "-p", f"{name} process", "--allowedTools", TOOLS, *args], cwd=hh.proj, env=env)
            out[name] = (cp, pid, srv.main_requests)

    first = threading.Thread(target=run, args=("first", [
        tool_use(READ, {"path": "big.py"}), first_turn_2, "sub: done", tool_use(READ, {"path": "other.py"}), first_last,
    ], "--session-id", sid))
    first.start()
    assert first_waiting.wait(CLI_TIMEOUT), "the first process never read big.py"
    second = threading.Thread(target=run, args=("second", [tool_use(READ, {"path": "other.py"}), second_last], "--resume", sid))
    second.start()
    for t in (first, second):
        t.join(CLI_TIMEOUT * 2)
    assert sorted(out) == ["first", "second"]
    for name in ("first", "second"):
        assert out[name][0].returncode == 0, f"{name}: {out[name][0].stderr}"
    parent = [b for b in out["first"][2] if not is_subagent(b)]
    second_bodies = out["second"][2]
    assert "def function_199" in tool_results(parent[1])[0]
    assert "def helper_199" in tool_results(second_bodies[1])[0]
    # one session, one record, written by both processes (the second resumed the first's session)
    rec = lean.only_record("claude")
    assert rec["session_id"] == sid and rec["source"] == "resume"
    got = tool_results(parent[-1])[0]
    assert "def helper_199" in got and not got.startswith("[unchanged]"), \
        f"the first process got the second process's stub for other.py: {got[:200]}"
    lean.assert_no_hook_errors()


def test_a_session_resumed_after_its_process_exited_keeps_what_its_transcript_holds(claude_cli, wired, lean, run_host):
    """The process that read big.py exits; `--resume <id>` and `--continue` open the session in new
    processes, whose context is the transcript's chain and holds that read: the re-read is the
    `[unchanged]` stub (before, a new process re-sent every file once). Resumed at a message
    before the read (`--resume-session-at`), the context does not hold it: content."""
    import json

    hh = wired

    def run(script, *args, prompt="read big.py"):
        with FakeAnthropic(script=script) as srv:
            cp, _ = run_host([claude_cli, "-p", prompt, "--allowedTools", TOOLS, *args], cwd=hh.proj,
                             env=hostcli.claude_env(hh.home, srv.base_url))
            assert cp.returncode == 0, cp.stderr
            return srv.main_requests

    run(["hello"], prompt="say hello")
    first = run([tool_use(READ, {"path": "big.py"}), "done"], "--continue")
    assert "def function_199" in tool_results(first[1])[0]
    (transcript,) = [t for t in (hh.home / ".claude" / "projects").rglob("*.jsonl") if "subagents" not in t.parts]
    sid = transcript.stem
    resumed = run([tool_use(READ, {"path": "big.py"}), "done"], "--resume", sid, prompt="read it again")
    assert tool_results(resumed[1])[0].startswith("[unchanged]"), tool_results(resumed[1])[0][:200]
    continued = run([tool_use(READ, {"path": "big.py"}), "done"], "--continue", prompt="and again")
    assert tool_results(continued[1])[0].startswith("[unchanged]"), tool_results(continued[1])[0][:200]
    entries = [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()]
    hello = next(e for e in entries if e.get("type") == "assistant"
                 and any(b.get("type") == "text" and b.get("text") == "hello" for b in e["message"]["content"]))
    rewound = run([tool_use(READ, {"path": "big.py"}), "done"], "--resume", sid, "--resume-session-at", hello["uuid"],
                  prompt="read big.py once more")
    assert "def function_199" in tool_results(rewound[-1])[0], "a stub for a read the resumed context does not hold"
    assert lean.only_record("claude")["conversation_id"] == sid
    lean.assert_no_hook_errors()
