"""End to end: CodeBuddy Code's own `Read` and shell reads (`Bash`) under the read cache's rules, on
the real CLI (`codebuddy -p`, offline, CodeBuddy Code 2.117.0 from npm @tencent-ai/agent-sdk).

`leanctx init --agent codebuddy` wires the read gate's pre-tool entry for `Read` and `Bash` too,
and a post-tool entry that credits what `Read` delivered. CodeBuddy's Bash post-tool payload
carries no output: what a shell read delivered is credited by the next call's pre-tool hook, from
the session transcript (agents/codebuddy.py, `earlier_shell_reads`). The scripted model uses only CodeBuddy's built-in tools; what it receives is read
back from the requests the fake model server gets. Both runs of a test use one fake server
(CodeBuddy keeps a session's base URL).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e.fake_chat import FakeChat, tool_call
from tests.e2e.test_codebuddy_e2e import codebuddy_env

pytestmark = pytest.mark.e2e

LINES = 600
REFUSED = "Error: "  # CodeBuddy hands the model a PreToolUse deny's reason after this


def source(n: int = 200) -> str:
    return "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(n))


def is_content(text: str, last: str = "def function_199") -> bool:
    return last in text and not text.startswith(REFUSED)


def refusal(text: str) -> str:
    assert text.startswith(REFUSED), text[:300]
    return text[len(REFUSED):]


@pytest.fixture
def wired(host_home, lean):
    (host_home.proj / "big.py").write_text(source())
    cb = host_home.home / ".codebuddy"
    cb.mkdir()
    settings = cb / "settings.json"
    settings.write_text(json.dumps({"model": "default-model"}, indent=4))
    before = settings.read_bytes()
    lean.run("init", "--agent", "codebuddy")
    lean.run("serve", "--detach")  # up before the fake model's instant first call
    yield host_home, settings, before
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def run(cli, hh, srv, run_host, prompt="work on big.py"):
    cp, _ = run_host(["node", cli, "-p", prompt, "--dangerously-skip-permissions"], cwd=hh.proj,
                     env=codebuddy_env(hh.home, srv.base_url))
    assert cp.returncode == 0, cp.stderr[-3000:]


def test_read_only_model_stub_edit_right_after_ask_again_changes_and_new_session(codebuddy_cli, wired, lean, run_host):
    hh, settings, before = wired
    big = hh.proj / "big.py"
    path = str(big)
    read = lambda **kw: tool_call("Read", {"file_path": path, **kw})  # noqa: E731
    edit = lambda old, new: tool_call("Edit", {"file_path": path, "old_string": old, "new_string": new})  # noqa: E731

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return calls[6]

    calls = [read(), read(), edit("return x * 7\n", "return x * 70\n"), read(), read(), read(offset=100, limit=30),
             read(), read(), edit("return x * 11\n", "return x * 110\n")]
    again = read()
    with FakeChat(script=[*calls[:6], change_by_another_program, *calls[7:], "done", again, "done"]) as srv:
        run(codebuddy_cli, hh, srv, run_host)
        got = [srv.tool_results().get(c["id"], "") for c in calls]
        assert is_content(got[0])
        stub = refusal(got[1])
        assert stub.startswith(f"[unchanged] big.py {LINES} lines") and "read it again right away" in stub, stub
        assert "Successfully edited" in got[2], f"Edit right after a refused re-read failed: {got[2]}"
        diff = refusal(got[3])
        assert diff.startswith("[changed] big.py") and "+    return x * 70" in diff, diff[:400]
        assert is_content(got[4]) and "x * 70" in got[4], "asking again right after a diff gave no content"
        assert refusal(got[5]).startswith(f"[unchanged] big.py L100-129 of {LINES} lines")
        after_change = refusal(got[6])
        assert after_change.startswith("[changed] big.py") and "+    return x * 9 + 0" in after_change, after_change[:300]
        assert is_content(got[7]) and "x * 9 + 0" in got[7], "asking again right after a diff gave no content"
        assert "Successfully edited" in got[8], got[8]
        assert "return x * 110\n" in big.read_text()

        # a new session (a new codebuddy process) never inherits the stub
        run(codebuddy_cli, hh, srv, run_host, "read it again")
        assert is_content(srv.tool_results()[again["id"]]), "a new session got a stub"
    lean.assert_no_hook_errors()

    rc, report = lean.doctor("codebuddy")
    assert rc == 0 and report["ok"] is True, json.dumps(report, indent=2)
    gate = [c for c in report["agents"][0]["checks"] if c["name"] == "built-in reader gate"]
    assert gate and "Read and Bash gated" in gate[0]["detail"], gate
    lean.run("stop")
    lean.run("uninstall", "--agent", "codebuddy")
    assert settings.read_bytes() == before, "uninstall did not restore settings.json"


def test_shell_only_model_stub_again_edit_changes_and_cut_output(codebuddy_cli, wired, lean, run_host):
    """A model reading only through Bash: CodeBuddy's Bash post-tool payload has no output, and the
    result reaches the transcript after that hook, so the next call's pre-tool hook credits what
    `cat` delivered. An unchanged re-read (absolute or relative path) gets the stub; running the
    command again right after (or reading through `Read`) gets the output; an Edit right after a
    stub works (CodeBuddy edits only a file its own `Read` gave once: the model read it so);
    its own edit and another program's change give a diff, a held window a stub; an output
    CodeBuddy keeps only as a preview (over 30,000 characters) is never credited."""
    hh, _settings, _before = wired
    big = hh.proj / "big.py"
    path = str(big)
    huge = hh.proj / "huge.txt"
    huge.write_text("".join(f"line {i:05d} " + "x" * 60 + "\n" for i in range(600)))  # 40,800 characters
    bash = lambda command: tool_call("Bash", {"command": command, "description": "Show the file"})  # noqa: E731
    read = lambda: tool_call("Read", {"file_path": path})  # noqa: E731

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return calls[10]

    calls = [bash(f"cat {path}"), bash(f"cat {path}"), bash(f"cat {path}"), bash("cat big.py"), read(), bash("cat big.py"),
             tool_call("Edit", {"file_path": path, "old_string": "return x * 7\n", "new_string": "return x * 70\n"}),
             bash(f"cat {path}"), bash(f"cat {path}"), bash(f"sed -n '100,129p' {path}"), bash(f"cat {path}"),
             bash("cat big.py"), bash("head -n 40 big.py"), bash("cat huge.txt"), bash("cat huge.txt")]
    with FakeChat(script=[*calls[:10], change_by_another_program, *calls[11:], "done"]) as srv:
        run(codebuddy_cli, hh, srv, run_host, "look at big.py")
        got = [srv.tool_results().get(c["id"], "") for c in calls]
    assert is_content(got[0])
    stub = refusal(got[1])
    assert stub.startswith(f"[unchanged] big.py {LINES} lines") and "run the same command again right away" in stub, stub
    assert is_content(got[2]), "running the command again right after a stub gave no output"
    assert refusal(got[3]).startswith(f"[unchanged] big.py {LINES} lines"), got[3][:300]  # relative: the session's folder
    assert is_content(got[4]), "asking again right after a stub (through Read) gave no content"
    assert refusal(got[5]).startswith(f"[unchanged] big.py {LINES} lines"), got[5][:300]
    assert "Successfully edited" in got[6], f"Edit right after a refused shell read failed: {got[6]}"
    diff = refusal(got[7])
    assert diff.startswith("[changed] big.py") and "+    return x * 70" in diff, diff[:400]
    assert is_content(got[8]) and "x * 70" in got[8], "running the command again right after a diff gave no output"
    assert refusal(got[9]).startswith(f"[unchanged] big.py L100-129 of {LINES} lines"), got[9][:300]
    after_change = refusal(got[10])
    assert after_change.startswith("[changed] big.py") and "+    return x * 9 + 0" in after_change, after_change[:300]
    assert is_content(got[11]) and "x * 9 + 0" in got[11], "running the command again right after a diff gave no output"
    assert refusal(got[12]).startswith(f"[unchanged] big.py L1-40 of {LINES} lines"), got[12][:300]
    assert "<persisted-output>" in got[13] and not got[13].startswith(REFUSED), got[13][:300]
    assert "<persisted-output>" in got[14], f"an output CodeBuddy cut was credited: {got[14][:300]}"
    lean.assert_no_hook_errors()


def test_shell_reads_and_read_share_one_holding(codebuddy_cli, wired, lean, run_host):
    """What `Read` delivered holds for `cat -n`, `tail -n` and a window, what `cat` delivered for
    `Read`; a command that is not a plain read (a pipe) runs untouched."""
    hh, _settings, _before = wired
    big = hh.proj / "big.py"
    path = str(big)
    small = hh.proj / "small.py"
    small.write_text(source(3))
    bash = lambda command: tool_call("Bash", {"command": command, "description": "Show the file"})  # noqa: E731
    calls = [tool_call("Read", {"file_path": path}), bash(f"cat -n {path}"), bash("cat big.py | head -n 5"),
             bash("cat small.py"), tool_call("Read", {"file_path": str(small)}), bash("cat big.py"), bash("tail -n 40 big.py"),
             tool_call("Read", {"file_path": path, "offset": 11, "limit": 20})]
    with FakeChat(script=[*calls, "done"]) as srv:
        run(codebuddy_cli, hh, srv, run_host, "look at big.py")
        got = [srv.tool_results().get(c["id"], "") for c in calls]
    assert is_content(got[0])
    assert refusal(got[1]).startswith(f"[unchanged] big.py {LINES} lines"), got[1][:300]
    assert got[2].startswith("Command: cat big.py | head -n 5\nStdout: def function_0"), got[2][:300]
    assert is_content(got[3], "def function_2")
    assert refusal(got[4]).startswith("[unchanged] small.py 9 lines"), f"what cat delivered did not hold for Read: {got[4][:300]}"
    assert is_content(got[5]), "asking again right after a stub gave no output"
    assert refusal(got[6]).startswith(f"[unchanged] big.py L561-600 of {LINES} lines"), got[6][:300]
    assert refusal(got[7]).startswith(f"[unchanged] big.py L11-30 of {LINES} lines"), got[7][:300]
    lean.assert_no_hook_errors()


def test_subagent_reads_its_own_content_and_the_parent_keeps_its_holding(codebuddy_cli, wired, lean, run_host):
    """A subagent (CodeBuddy's `Agent` tool) starts with none of its parent's reads: its first
    `Read` of a file the parent holds gets the content; what it reads itself (through `Read`, or
    `cat`, credited from its own transcript) gives it stubs; after it finished, the parent's
    re-read is a stub of the parent's own holding, and a file only the subagent read is content."""
    hh, _settings, _before = wired
    big, small = hh.proj / "big.py", hh.proj / "small.py"
    small.write_text(source(3))
    bash = lambda command: tool_call("Bash", {"command": command, "description": "Show the file"})  # noqa: E731
    read = lambda p: tool_call("Read", {"file_path": str(p)})  # noqa: E731
    parent = [read(big)]
    agent = tool_call("Agent", {"description": "look at big.py", "prompt": "Read big.py and small.py", "subagent_type": "general-purpose"})
    sub = [read(big), bash("cat big.py"), bash("cat small.py"), read(small)]
    after = [read(big), read(small)]
    with FakeChat(script=[*parent, agent, *sub, "sub: done", *after, "parent: done"]) as srv:
        run(codebuddy_cli, hh, srv, run_host, "use an agent")
        got = {c["id"]: srv.tool_results().get(c["id"], "") for c in [*parent, *sub, *after]}
    assert is_content(got[parent[0]["id"]])
    assert is_content(got[sub[0]["id"]]), "a subagent got a stub for its parent's read"
    assert refusal(got[sub[1]["id"]]).startswith(f"[unchanged] big.py {LINES} lines"), got[sub[1]["id"]][:300]
    assert is_content(got[sub[2]["id"]], "def function_2")
    assert refusal(got[sub[3]["id"]]).startswith("[unchanged] small.py 9 lines"), got[sub[3]["id"]][:300]
    assert refusal(got[after[0]["id"]]).startswith(f"[unchanged] big.py {LINES} lines"), got[after[0]["id"]][:300]
    assert is_content(got[after[1]["id"]], "def function_2"), "the parent got a stub for what only its subagent read"
    lean.assert_no_hook_errors()


def is_compaction(body: dict) -> str:
    """CodeBuddy's summary request (its own system prompt, `Read` its one tool) gets the summary."""
    messages = body.get("messages") or []
    if messages and "summarizing conversations" in json.dumps(messages[0].get("content")):
        return "compact"
    return "main" if body.get("tools") else "side"


SUMMARY = "<analysis>read files</analysis><conversation_history_summary>The user asked to look at big.py.</conversation_history_summary>"


def test_auto_compaction_drops_what_reads_and_shell_reads_delivered(codebuddy_cli, wired, lean, run_host):
    """CodeBuddy compacts on its own before a request once the last reported prompt size is past
    92% of the model's window (`shouldCompact`, emergency-auto); the fake model reports a huge one
    once, with its answer asking to `cat` small.py. CodeBuddy then fires SessionStart (source
    "compact"), not PreCompact, and the next requests carry only the summary. The `cat` output,
    which only the next call's hook could credit, is not credited after the compaction; a re-read
    of what `Read` delivered before it gets the content too; what is read after it gives stubs.
    The next read's hook counts the compaction from the summary entry in the transcript."""
    hh, _settings, _before = wired
    big, small = hh.proj / "big.py", hh.proj / "small.py"
    small.write_text(source(3))
    bash = lambda command: tool_call("Bash", {"command": command, "description": "Show the file"})  # noqa: E731
    read = lambda p: tool_call("Read", {"file_path": str(p)})  # noqa: E731
    calls = [read(big), bash("cat small.py"), read(small), read(big), bash("cat big.py"), bash("cat small.py")]
    huge = {"prompt_tokens": 10_000_000, "completion_tokens": 5, "total_tokens": 10_000_005}
    with FakeChat(script=[*calls, "done"], classify=is_compaction, side_text=SUMMARY,
                  usage=lambda kind, body, items: huge if any(i.get("id") == calls[1]["id"] for i in items) else None) as srv:
        run(codebuddy_cli, hh, srv, run_host, "look at big.py")
        got = [srv.tool_results().get(c["id"], "") for c in calls]
        kinds = [r.kind for r in srv.log if r.kind in ("main", "compact")]
        summarized = json.dumps([r.body for r in srv.log if r.kind == "compact"])
    assert kinds.count("compact") == 1 and kinds.index("compact") == 2, kinds  # right after the model asked to cat small.py
    # the cat's result went into the summary request only: the model's next request has the summary
    assert is_content(got[0]) and not got[1] and "def function_2" in summarized
    assert is_content(got[2], "def function_2"), "a shell read from before the compaction was credited after it"
    assert is_content(got[3]), "a Read from before the compaction was taken as still held"
    assert refusal(got[4]).startswith(f"[unchanged] big.py {LINES} lines"), got[4][:300]
    assert refusal(got[5]).startswith("[unchanged] small.py 9 lines"), got[5][:300]
    rec = lean.only_record("codebuddy")
    # counted from the transcript's summary entry by the next read's hook, whenever SessionStart(compact) lands
    assert rec["compactions"] >= 1 and len(rec.get("losses_seen") or []) == 1, rec
    lean.assert_no_hook_errors()
