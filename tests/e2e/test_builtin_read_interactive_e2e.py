"""End to end: the built-in Read and Bash gate in the interactive Claude Code, in a pseudo-terminal, offline.

Three turns of a model that uses only Read (or only Bash `cat`) and Edit: the content; an
unchanged re-read refused with the stub and an Edit right after it; after that edit a diff, and
the content when it asks again. Verified on 2.1.197 (and with LEANCTX_HOST_CLI_DIR, 2.1.332)."""
from __future__ import annotations

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use
from tests.e2e.test_builtin_read_e2e import BASH_REFUSAL_PREFIX, REFUSAL_PREFIX, results
from tests.e2e.test_rewind_interactive_e2e import BUSY, EMPTY_INPUT, converse, interactive  # noqa: F401 - the fixture
from tests.e2e.tty import Terminal

pytestmark = pytest.mark.e2e


def test_interactive_stub_edit_right_after_and_content_when_asked_again(claude_cli, interactive, lean):  # noqa: F811
    hh = interactive
    lean.run("serve", "--detach")  # the MCP server's daemon, up before the fake model's first call
    big = hh.proj / "big.py"
    path = str(big)
    script = [
        tool_use("Read", {"file_path": path}), "ANSWER-ONE",
        tool_use("Read", {"file_path": path}),
        tool_use("Edit", {"file_path": path, "old_string": "return x * 7\n", "new_string": "return x * 70\n"}), "ANSWER-TWO",
        tool_use("Read", {"file_path": path}), tool_use("Read", {"file_path": path}), "ANSWER-THREE",
    ]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"TERM": "xterm-256color"})
        with Terminal([claude_cli, "--allowedTools", "Read,Edit", "--permission-mode", "acceptEdits"], cwd=hh.proj, env=env) as term:
            term.wait_for(EMPTY_INPUT, absent=BUSY)
            converse(term, (("read big.py", "ANSWER-ONE"), ("read it again and fix function 7", "ANSWER-TWO"),
                            ("show it", "ANSWER-THREE")))
        bodies = srv.main_requests
    assert len(bodies) == len(script), len(bodies)

    def got(i: int) -> str:
        (text, err), = results(bodies[i + 1])
        return text.removeprefix(REFUSAL_PREFIX) if err else text

    assert "def function_199" in got(0)
    assert got(2).startswith("[unchanged] big.py 600 lines"), got(2)[:200]
    assert "updated successfully" in got(3), got(3)
    assert got(5).startswith("[changed] big.py") and "+    return x * 70" in got(5), got(5)[:300]
    assert "def function_199" in got(6) and "x * 70" in got(6), "asking again right after the diff gave no content"
    assert "return x * 70\n" in big.read_text()
    lean.assert_no_hook_errors()


def test_interactive_shell_reads_stub_edit_right_after_and_output_when_run_again(claude_cli, interactive, lean):  # noqa: F811
    hh = interactive
    lean.run("serve", "--detach")
    big = hh.proj / "big.py"
    big.write_text(big.read_text().rstrip("\n") + "\n")  # Claude Code trims an output's final blank lines

    def cat():
        return tool_use("Bash", {"command": "cat big.py", "description": "show big.py"})

    script = [
        cat(), "ANSWER-ONE",
        cat(), tool_use("Edit", {"file_path": str(big), "old_string": "return x * 7\n", "new_string": "return x * 70\n"}),
        "ANSWER-TWO",
        cat(), cat(), "ANSWER-THREE",
    ]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"TERM": "xterm-256color"})
        with Terminal([claude_cli, "--allowedTools", "Read,Edit,Bash", "--permission-mode", "acceptEdits"], cwd=hh.proj,
                      env=env) as term:
            term.wait_for(EMPTY_INPUT, absent=BUSY)
            converse(term, (("show big.py", "ANSWER-ONE"), ("show it again and fix function 7", "ANSWER-TWO"),
                            ("show it", "ANSWER-THREE")))
        bodies = srv.main_requests
    assert len(bodies) == len(script), len(bodies)

    def got(i: int) -> str:
        (text, err), = results(bodies[i + 1])
        return text.removeprefix(BASH_REFUSAL_PREFIX) if err else text

    assert "def function_199" in got(0)
    assert got(2).startswith("[unchanged] big.py 599 lines") and "run the same command again" in got(2), got(2)[:200]
    assert "updated successfully" in got(3), got(3)
    assert got(5).startswith("[changed] big.py") and "+    return x * 70" in got(5), got(5)[:300]
    assert "def function_199" in got(6) and "x * 70" in got(6), "running the command again right after the diff gave no output"
    lean.assert_no_hook_errors()
