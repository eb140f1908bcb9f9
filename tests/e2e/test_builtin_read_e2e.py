"""End to end: Claude Code's built-in Read under the read cache's rules, on the real CLI.

`leanctx init --agent claude` wires the read gate's pre-tool entry for `Read` too, and a post-tool
entry that credits what Read delivered. The scripted model uses only the built-in tools (Read,
Edit); what it receives is read back from the requests the fake model server gets. Verified on
Claude Code 2.1.197 (the pinned CLI) and, with LEANCTX_HOST_CLI_DIR pointing at it, 2.1.332.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use

pytestmark = pytest.mark.e2e

TOOLS = "Read,Edit"
LINES = 600


def results(body: dict) -> list[tuple[str, bool]]:
    """(text, is_error) of every tool_result block in the latest message that has any."""
    for message in reversed(body["messages"]):
        content = message["content"]
        blocks = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(content, list) else []
        if blocks:
            break
    else:
        return []
    out = []
    for block in blocks:
        content = block.get("content")
        text = "".join(c.get("text", "") for c in content if isinstance(c, dict)) if isinstance(content, list) else str(content)
        out.append((text, bool(block.get("is_error"))))
    return out


# Claude Code 2.1.332 puts this before a PreToolUse refusal's reason in the tool result (every form:
# permissionDecision deny, decision block, exit 2); 2.1.197 hands the reason over as it is
REFUSAL_PREFIX = "PreToolUse:Read hook error: "
BASH_REFUSAL_PREFIX = "PreToolUse:Bash hook error: "


def got(bodies: list, i: int) -> str:
    """What the model received for its i-th call (the request after the turn that made it); a
    refusal (an error result) without the prefix some versions put before the hook's reason."""
    (text, err), = results(bodies[i + 1])
    return text.removeprefix(REFUSAL_PREFIX).removeprefix(BASH_REFUSAL_PREFIX) if err else text


def source(n: int = 200, tag: str = "") -> str:
    return "".join(f"def function_{i}(x):\n    return x * {i}{tag}\n\n" for i in range(n))


@pytest.fixture
def wired(host_home, lean):
    lean.run("init", "--agent", "claude")
    (host_home.proj / "big.py").write_text(source())
    # the daemon is the MCP server's; up before the fake model's instant first call
    lean.run("serve", "--detach")
    yield host_home
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def run(claude_cli, hh, run_host, script, *extra, prompt="work on big.py", tools=TOOLS):
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url)
        cp, _ = run_host([claude_cli, "-p", prompt, "--allowedTools", tools, "--permission-mode", "acceptEdits", *extra],
                         cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        return srv.main_requests


def is_content(text: str) -> bool:
    return "def function_199" in text and not text.startswith("[")


def test_read_only_model_stub_edit_right_after_ask_again_and_changes(claude_cli, wired, lean, run_host):
    hh = wired
    big = hh.proj / "big.py"
    path = str(big)

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return tool_use("Read", {"file_path": path})

    def edit(old: str, new: str):
        return tool_use("Edit", {"file_path": path, "old_string": old, "new_string": new})

    read = lambda **kw: tool_use("Read", {"file_path": path, **kw})  # noqa: E731
    script = [
        read(),                                            # 0 content
        read(),                                            # 1 unchanged: the stub
        edit("return x * 7\n", "return x * 70\n"),         # 2 Edit right after the refusal
        read(),                                            # 3 after the model's own edit: a diff, never [unchanged]
        read(),                                            # 4 asked again right after: the content
        edit("return x * 8\n", "return x * 80\n"),         # 5
        read(),                                            # 6 after the model's own edit: a diff, never [unchanged]
        read(),                                            # 7 asked again right after: the content
        read(offset=100, limit=30),                        # 8 a held range: its stub
        change_by_another_program,                         # 9 changed by another program: never [unchanged]
        edit("return x * 9 + 0\n", "return x * 90\n"),     # 10 2.1.197 wants a fresh Read first
        read(),                                            # 11 asked again: the content (2.1.197)
        edit("return x * 11\n", "return x * 110\n"),       # 12 an Edit after it works
        "done",
    ]
    bodies = run(claude_cli, hh, run_host, script)
    assert len(bodies) == len(script)
    assert is_content(got(bodies, 0))
    stub, = results(bodies[2])
    assert stub[1] is True and stub[0] in (got(bodies, 1), REFUSAL_PREFIX + got(bodies, 1))
    assert got(bodies, 1).startswith(f"[unchanged] big.py {LINES} lines") and "read it again right away" in stub[0], stub
    assert "updated successfully" in got(bodies, 2), "Edit right after a refused re-read failed"
    diff = got(bodies, 3)
    assert diff.startswith("[changed] big.py") and "+    return x * 70" in diff, diff[:400]
    assert is_content(got(bodies, 4)) and "x * 70" in got(bodies, 4), "asking again right after a diff gave no content"
    assert "updated successfully" in got(bodies, 5)
    diff = got(bodies, 6)
    assert diff.startswith("[changed] big.py") and "+    return x * 80" in diff, diff[:400]
    assert is_content(got(bodies, 7)) and "x * 80" in got(bodies, 7), "asking again right after a diff gave no content"
    assert got(bodies, 8).startswith(f"[unchanged] big.py L100-129 of {LINES} lines")
    after_change = got(bodies, 9)
    assert after_change.startswith("[changed] big.py") and "+    return x * 9 + 0" in after_change, after_change[:300]
    # Claude Code 2.1.197 refuses an Edit of a file changed since its last Read, whoever changed
    # it (host-alone behaviour; 2.1.332 applies it with a note); the model reads it again and gets
    # the content, and the next Edit works
    edited = "updated successfully" in got(bodies, 10)
    assert edited or "modified since read" in got(bodies, 10), got(bodies, 10)
    if edited:  # changed again since the last refusal: news, so its diff
        assert got(bodies, 11).startswith("[changed] big.py") and "+    return x * 90" in got(bodies, 11)
    else:
        assert is_content(got(bodies, 11)) and "x * 9 + 0" in got(bodies, 11)
    assert "updated successfully" in got(bodies, 12), got(bodies, 12)
    assert "return x * 110\n" in big.read_text()
    lean.assert_no_hook_errors()
    # Claude Code's own "unchanged" note never counts as content, and every gate call was noted
    notes = lean.only_record("claude")["read_calls"]
    assert len(notes) == 9, notes


def compact_and_read_again(claude_cli, hh, lean, run_host) -> tuple[str, dict]:
    path = str(hh.proj / "big.py")
    bodies = run(claude_cli, hh, run_host, [tool_use("Read", {"file_path": path}), tool_use("Read", {"file_path": path}), "done"])
    assert is_content(got(bodies, 0)) and got(bodies, 1).startswith("[unchanged]")
    run(claude_cli, hh, run_host, ["summary of the conversation"], "--continue", prompt="/compact")
    assert lean.only_record("claude")["compactions"] >= 1
    bodies = run(claude_cli, hh, run_host, [tool_use("Read", {"file_path": path}), "done"], "--continue", prompt="read it again")
    return got(bodies, 0), bodies[0]


def test_after_compaction_only_what_claude_code_re_attached_is_held(claude_cli, wired, lean, run_host):
    """Claude Code 2.1.197 re-attaches the files its Read tool read recently after a compaction:
    the request after `/compact` carries big.py's text once, below the summary. Those exact bytes
    are in the context (leanctx/cache/carry.py), so the re-read is the stub, as for ctx_read."""
    hh = wired
    answer, first = compact_and_read_again(claude_cli, hh, lean, run_host)
    assert json.dumps(first["messages"]).count("def function_199(x)") == 1, "the file is not in the compacted context"
    assert answer.startswith(f"[unchanged] big.py {LINES} lines"), answer[:200]
    # a new session (a new claude process) never inherits the stub
    bodies = run(claude_cli, hh, run_host, [tool_use("Read", {"file_path": str(hh.proj / "big.py")}), "done"])
    assert is_content(got(bodies, 0))
    lean.assert_no_hook_errors()


def test_after_compaction_the_read_is_content_without_the_re_attachment_credit(claude_cli, host_home, lean, run_host):
    lean.run("init", "--agent", "claude")
    (host_home.proj / "big.py").write_text(source())
    subprocess.run([sys.executable, "-m", "leanctx", "serve", "--detach"], env=lean.env({"LEANCTX_CARRY": "0"}),
                   capture_output=True, timeout=60, check=True)
    try:
        answer, _first = compact_and_read_again(claude_cli, host_home, lean, run_host)
        assert is_content(answer), "a stub after the context was compacted"
        lean.assert_no_hook_errors()
    finally:
        subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def test_shell_only_model_stub_edit_right_after_cd_and_one_ledger_with_read(claude_cli, wired, lean, run_host):
    """A model that reads only through Bash: `cat`/`sed -n` re-reads get the stub, an Edit right
    after one works, running the command again gives the output, and what the shell delivered
    counts for Read. After `cd sub`, a relative name is the file in sub (the hook's `cwd` follows
    the shell's), never the one of the same name it read before."""
    hh = wired
    big = hh.proj / "big.py"
    # Claude Code trims the blank lines that end a command's output (2.1.197 and 2.1.332): the
    # model never sees a file's trailing blank lines through the shell, so such a file is never
    # credited from it; these end with one newline, as most files do
    big.write_text(source().rstrip("\n") + "\n")
    sub = hh.proj / "sub"
    sub.mkdir()
    (sub / "big.py").write_text(source(tag=" + 1").rstrip("\n") + "\n")
    lines = LINES - 1

    def bash(command: str):
        return tool_use("Bash", {"command": command, "description": "read"})

    script = [
        bash("cat big.py"),                                                                  # 0 content
        bash("cat big.py"),                                                                  # 1 the stub
        tool_use("Edit", {"file_path": str(big), "old_string": "return x * 7\n", "new_string": "return x * 70\n"}),  # 2
        bash("cat big.py"),                                                                  # 3 a diff
        bash("cat big.py"),                                                                  # 4 run again: the output
        bash("sed -n '100,160p' big.py"),                                                    # 5 a held range: its stub
        tool_use("Read", {"file_path": str(big)}),                                           # 6 the stub: one ledger
        bash("cd sub"),                                                                      # 7
        bash("cat big.py"),                                                                  # 8 sub/big.py: content
        bash("sed -n '100,160p' big.py"),                                                    # 9 sub/big.py's range: stub
        bash("cat big.py | head -n 3"),                                                      # 10 a pipe: runs
        "done",
    ]
    bodies = run(claude_cli, hh, run_host, script, tools="Read,Edit,Bash")
    assert len(bodies) == len(script)
    assert is_content(got(bodies, 0))
    stub = got(bodies, 1)
    assert stub.startswith(f"[unchanged] big.py {lines} lines") and "run the same command again right away" in stub, stub
    assert "updated successfully" in got(bodies, 2), "Edit right after a refused shell re-read failed"
    assert got(bodies, 3).startswith("[changed] big.py") and "+    return x * 70" in got(bodies, 3), got(bodies, 3)[:300]
    assert is_content(got(bodies, 4)) and "x * 70" in got(bodies, 4), "running the command again gave no output"
    assert got(bodies, 5).startswith(f"[unchanged] big.py L100-160 of {lines} lines"), got(bodies, 5)[:200]
    assert got(bodies, 6).startswith(f"[unchanged] big.py {lines} lines"), got(bodies, 6)[:200]
    assert is_content(got(bodies, 8)) and "x * 199 + 1" in got(bodies, 8), "after cd, the other big.py was not read"
    assert got(bodies, 9).startswith(f"[unchanged] sub/big.py L100-160 of {lines} lines"), got(bodies, 9)[:200]
    assert got(bodies, 10).startswith("def function_0"), got(bodies, 10)[:200]
    lean.assert_no_hook_errors()
    # `leanctx stats` by reader: the shell's stubs and diff, the diff it ran again for (a re-read
    # that cancels the diff's saving), Read's stub; one context charged once
    st = json.loads(lean.run("stats", "--json").stdout)
    shell, builtin = st["by_reader"]["shell"], st["by_reader"]["builtin"]
    assert (shell["stubs"], shell["diffs"], shell["rereads"]) == (3, 1, 1), shell
    assert (builtin["reads"], builtin["stubs"]) == (1, 1) and "ctx_read" not in st["by_reader"], st["by_reader"]
    assert st["contexts"] == 1 and st["reads"] == shell["reads"] + builtin["reads"]
    assert st["tokens_saved"] == shell["tokens_saved"] + builtin["tokens_saved"] - st["tokens_overhead"]
    assert st["tokens_saved"] == st["tokens_raw"] - st["tokens_sent"] - st["tokens_reread"] - st["tokens_overhead"]


def test_shell_reads_after_another_program_compaction_and_a_new_session(claude_cli, wired, lean, run_host):
    """Through the shell only: a change made by another program is a diff, never [unchanged];
    after `/compact` the file read only with `cat` is not re-attached by Claude Code, so the
    re-read is the content; a new session starts empty."""
    hh = wired
    big = hh.proj / "big.py"
    big.write_text(source().rstrip("\n") + "\n")

    def cat():  # each call its own id, as a model's
        return tool_use("Bash", {"command": "cat big.py", "description": "read"})

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return tool_use("Bash", {"command": "cat big.py", "description": "read"})

    bodies = run(claude_cli, hh, run_host, [cat(), cat(), change_by_another_program, "done"], tools="Read,Edit,Bash")
    assert is_content(got(bodies, 0)) and got(bodies, 1).startswith("[unchanged] big.py"), got(bodies, 1)[:300]
    changed = got(bodies, 2)
    assert changed.startswith("[changed] big.py") and "+    return x * 9 + 0" in changed, changed[:300]
    run(claude_cli, hh, run_host, ["summary of the conversation"], "--continue", prompt="/compact")
    assert lean.only_record("claude")["compactions"] >= 1
    bodies = run(claude_cli, hh, run_host, [cat(), "done"], "--continue", prompt="read it again", tools="Read,Edit,Bash")
    assert is_content(got(bodies, 0)), "a shell read got a stub after the context was compacted"
    bodies = run(claude_cli, hh, run_host, [cat(), "done"], tools="Read,Edit,Bash")
    assert is_content(got(bodies, 0)), "a new session got a stub"
    lean.assert_no_hook_errors()


def kind_of(text: str) -> str:
    """A tool result as the replay bench names an answer."""
    for prefix, kind in (("[unchanged]", "stub"), ("[partly unchanged]", "pointer"), ("[changed]", "diff")):
        if text.startswith(prefix):
            return kind
    return "full"


def test_recorded_built_in_and_shell_reads_beside_ctx_read_replay_as_they_ran(claude_cli, wired, lean, run_host):
    """Read, Bash (cat, cat -n, sed -n, tail -n) and ctx_read in one conversation, then a new
    session: one ledger, the stubs the real run gave. The tap records every hook payload (the
    built-in calls' pre- and post-tool ones too) as a trace; replayed through the gate and the
    credit, ours answers as the real run did, with 0 wrong stubs and the oracle's tokens
    (kept as bench/traces/claude-builtin-recorded.jsonl with LEANCTX_RECORD_TRACES)."""
    from tests.e2e import tracetap

    hh = wired
    big, other = hh.proj / "big.py", hh.proj / "other.py"
    big.write_text(source().rstrip("\n") + "\n")  # the shell's output loses trailing blank lines
    other.write_text(source(150, " + 2").rstrip("\n") + "\n")
    n_other = len(other.read_text().splitlines())
    tap = tracetap.install_tap(hh.claude_dir / "settings.json", hh.root, builtin=True)
    ctx_read = "mcp__leanctx__ctx_read"

    def bash(command: str):
        return tool_use("Bash", {"command": command, "description": "read"})

    script = [
        tool_use("Read", {"file_path": str(big)}),                                     # 0 content
        tool_use(ctx_read, {"path": "big.py"}),                                         # 1 stub: one ledger
        bash("cat big.py"),                                                             # 2 stub
        bash("cat big.py"),                                                             # 3 run again: the output
        bash("sed -n '100,160p' big.py"),                                               # 4 a held range: stub
        # (Claude Code 2.1.197 trims the blank lines around a command's output, in what its model
        # and the post-tool hook get alike: an output that starts with a blank line is never
        # credited, so the last 29 lines, which start with a `def`)
        bash("tail -n 29 other.py"),                                                    # 5 content
        tool_use("Read", {"file_path": str(other), "offset": n_other - 28, "limit": 29}),  # 6 the same lines: stub
        tool_use(ctx_read, {"path": "other.py"}),                                       # 7 the rest only: pointer
        bash("cat -n big.py"),                                                          # 8 stub
        "done",
    ]
    tools = f"Read,Edit,Bash,{ctx_read}"
    bodies = run(claude_cli, hh, run_host, script, tools=tools)
    assert len(bodies) == len(script)
    first = [kind_of(got(bodies, i)) for i in range(len(script) - 1)]
    assert first == ["full", "stub", "stub", "full", "stub", "full", "stub", "pointer", "stub"], \
        json.dumps([(k, got(bodies, i)[:150]) for i, k in enumerate(first)])
    bodies = run(claude_cli, hh, run_host, [bash("cat big.py"), tool_use("Read", {"file_path": str(big)}), "done"], tools=tools)
    second = [kind_of(got(bodies, i)) for i in range(2)]
    assert second == ["full", "stub"], second  # a new session starts empty
    lean.assert_no_hook_errors()
    files = {"big.py": big.read_text(), "other.py": other.read_text()}
    trace = tracetap.to_trace(tap, hh.proj, files)
    readers = [e.get("reader") for e in trace if e["op"] == "read"]
    assert readers == ["builtin", None, "shell", "shell", "shell", "shell", "builtin", None, "shell", "shell", "builtin"], readers
    assert sum(1 for e in trace if e["op"] == "read" and "delivered" in e) == 4  # the built-in calls that ran
    tracetap.check_replay(trace, hh, first + second, "claude-builtin-recorded", host="Claude Code", source=__file__)


def test_a_subagents_read_is_content_its_re_read_its_own_stub_and_the_parent_keeps_its_stub(claude_cli, wired, lean, run_host):
    """The built-in Read in a subagent (`Agent`): Claude Code names each call and the subagent in
    the hook payloads, so the subagent's first Read of a file only its parent read is the content
    (its context never had it), its own re-read is its own stub, and the parent's re-read after it
    is still the parent's stub."""
    hh = wired
    path = str(hh.proj / "big.py")
    read = lambda: tool_use("Read", {"file_path": path})  # noqa: E731
    script = [
        read(),                                                               # parent: content
        tool_use("Agent", {"description": "read big.py", "prompt": "Read big.py twice.",
                           "subagent_type": "general-purpose", "run_in_background": False}),
        read(),                                                               # subagent: content
        read(),                                                               # subagent again: its stub
        "sub: done",
        read(),                                                               # parent again: its stub
        "done",
    ]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url)
        cp, _ = run_host([claude_cli, "-p", "work on big.py", "--allowedTools", TOOLS + ",Agent", "--permission-mode",
                          "acceptEdits"], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        bodies = srv.requests
    from tests.e2e.fake_anthropic import is_subagent

    mains = [b for b in bodies if isinstance(b, dict) and b.get("tools")]
    sub = [b for b in mains if is_subagent(b)]
    parent = [b for b in mains if not is_subagent(b)]
    assert len(sub) == 3 and len(parent) == 4, (len(sub), len(parent))

    def answer(body: dict) -> str:
        (text, err), = results(body)
        return text.removeprefix(REFUSAL_PREFIX) if err else text

    assert is_content(answer(parent[1]))
    assert is_content(answer(sub[1])), "the subagent was refused a file only its parent had read"
    assert answer(sub[2]).startswith(f"[unchanged] big.py {LINES} lines"), answer(sub[2])[:200]
    assert answer(parent[3]).startswith(f"[unchanged] big.py {LINES} lines"), "the parent lost its stub after the subagent"
    notes = lean.only_record("claude")["read_calls"]
    assert sum(1 for n in notes.values() if n["agent_id"]) == 2, notes
    lean.assert_no_hook_errors()
