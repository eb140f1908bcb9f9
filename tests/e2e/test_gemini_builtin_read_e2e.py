"""End to end: Gemini CLI's own read_file and run_shell_command under the read cache's rules, on
the real CLI (0.61.0, the newest on npm too), offline against a fake Gemini API.

`leanctx init --agent gemini` wires BeforeTool for read_file and run_shell_command (beside
ctx_read) and an AfterTool entry that credits what they delivered. The scripted model uses only
the built-in tools; what it receives is read back from the requests the fake model gets. A
refusal reaches the model as `{"error": "Tool execution blocked: <the cache's text>"}`.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e import hostcli
from tests.e2e.conftest import _cli
from tests.e2e.fake_gemini_chat import FakeGeminiChat, call, gemini_tool_results
from tests.e2e.settings_home import BIG, wire
from tests.e2e.test_gemini_e2e import USER_SETTINGS

pytestmark = pytest.mark.e2e

BLOCKED = "Tool execution blocked: "
LINES = 600
# a file with no blank line at its end: Gemini trims a command's output, so only such a file's
# `cat` shows its text whole
PLAIN = "".join(f"def function_{i}(x):\n    return x * {i}\n" for i in range(300))


@pytest.fixture
def gemini_cli():
    return _cli("gemini")


@pytest.fixture
def wired(host_home, lean):
    hh = host_home
    settings, original, wired_bytes, _tap = wire(hh, lean, "gemini", USER_SETTINGS)
    settings.write_bytes(wired_bytes)  # without the test's own tap hook
    (hh.proj / "plain.py").write_text(PLAIN)
    lean.run("serve", "--detach")  # the daemon is up before the fake model's instant first call
    yield hh, settings, original
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def run(gemini_cli, hh, lean, run_host, script, *extra, prompt="work on big.py", tokens=()):
    """One headless turn; returns (session id, the fake model's main requests)."""
    with FakeGeminiChat(script, prompt_tokens=tokens) as srv:
        env = hostcli.base_env(hh.home, {**lean.host_env, "GEMINI_API_KEY": "fake-key", "GEMINI_CLI_TRUST_WORKSPACE": "true",
                                         "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{srv.port}"})
        cp, _ = run_host([gemini_cli, "-p", prompt, "--output-format", "json", "--approval-mode", "yolo", *extra],
                         cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert "Hook system message" not in cp.stderr, cp.stderr
        return json.loads(cp.stdout)["session_id"], srv.main_requests


def got(bodies: list, i: int) -> str:
    """What the model received for its i-th call (in the request after the turn that made it);
    a refusal without the wrapper Gemini puts around it."""
    name, text = gemini_tool_results(bodies[i + 1])[-1]
    if text.startswith('{"error": '):
        text = json.loads(text)["error"]
        assert text.startswith(BLOCKED), text
        return text[len(BLOCKED):]
    return text


def is_content(text: str, last: str = "def function_199") -> bool:
    return last in text and not text.startswith("[")


def test_read_file_only_stub_edit_right_after_ask_again_changes_new_session(gemini_cli, wired, lean, run_host):
    hh, settings, original = wired
    big = hh.proj / "big.py"
    path = str(big)

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return call("read_file", {"file_path": path})

    def edit(old: str, new: str):
        return call("replace", {"file_path": path, "instruction": "change it", "old_string": old, "new_string": new})

    read = lambda **kw: call("read_file", {"file_path": path, **kw})  # noqa: E731
    script = [
        read(),                                          # 0 content
        read(),                                          # 1 unchanged: the stub
        edit("return x * 7\n", "return x * 70\n"),       # 2 an edit right after the refusal
        read(),                                          # 3 after the model's own edit: a diff, never [unchanged]
        read(),                                          # 4 asked again right after: the content
        read(start_line=100, end_line=129),              # 5 a held range: its stub
        change_by_another_program,                       # 6 changed by another program: never [unchanged]
        read(),                                          # 7 asked again: the content
        call("read_file", {"file_path": "big.py"}),      # 8 the same file by its relative name: the stub
        "done",
    ]
    _sid, bodies = run(gemini_cli, hh, lean, run_host, script)
    assert len(bodies) == len(script)
    assert is_content(got(bodies, 0))
    assert got(bodies, 1).startswith(f"[unchanged] big.py {LINES} lines"), got(bodies, 1)
    assert "read it again right away" in got(bodies, 1)
    assert "Successfully modified" in got(bodies, 2), got(bodies, 2)
    diff = got(bodies, 3)
    assert diff.startswith("[changed] big.py") and "+    return x * 70" in diff, diff[:400]
    assert is_content(got(bodies, 4)) and "x * 70" in got(bodies, 4), "asking again right after a diff gave no content"
    assert got(bodies, 5).startswith(f"[unchanged] big.py L100-129 of {LINES} lines"), got(bodies, 5)
    after = got(bodies, 6)
    assert after.startswith("[changed] big.py") and "+    return x * 9 + 0" in after, after[:300]
    assert is_content(got(bodies, 7)) and "x * 9 + 0" in got(bodies, 7)
    assert got(bodies, 8).startswith(f"[unchanged] big.py {LINES} lines"), got(bodies, 8)
    lean.assert_no_hook_errors()

    # a new session (a new gemini process, a new chat) never inherits a stub
    _sid2, bodies = run(gemini_cli, hh, lean, run_host, [read(), "done"])
    assert is_content(got(bodies, 0))

    rc, report = lean.doctor("gemini")
    assert rc == 0, json.dumps(report, indent=1)[-3000:]
    assert "built-in read_file and run_shell_command gated like ctx_read" in json.dumps(report)


def test_shell_only_stub_range_run_again_and_a_change(gemini_cli, wired, lean, run_host):
    hh, _settings, _original = wired
    plain = hh.proj / "plain.py"

    def change_by_another_program(body):  # noqa: ANN001
        plain.write_text(plain.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return call("run_shell_command", {"command": "cat plain.py"})

    sh = lambda command: call("run_shell_command", {"command": command})  # noqa: E731
    script = [
        sh("cat plain.py"),                    # 0 content
        sh("cat plain.py"),                    # 1 the stub
        sh("cat plain.py"),                    # 2 run again right after: the output
        sh("sed -n '100,129p' plain.py"),      # 3 a held range: its stub
        change_by_another_program,             # 4 changed by another program: never [unchanged]
        sh("head -n 5 plain.py | cat"),        # 5 not a plain read: runs as it is
        "done",
    ]
    _sid, bodies = run(gemini_cli, hh, lean, run_host, script, prompt="work on plain.py")
    assert is_content(got(bodies, 0), "def function_299")
    assert got(bodies, 1).startswith("[unchanged] plain.py 600 lines") and "run the same command again" in got(bodies, 1), got(bodies, 1)
    assert is_content(got(bodies, 2), "def function_299")
    assert got(bodies, 3).startswith("[unchanged] plain.py L100-129 of 600 lines"), got(bodies, 3)
    assert got(bodies, 4).startswith("[changed] plain.py") and "+    return x * 9 + 0" in got(bodies, 4), got(bodies, 4)[:300]
    assert "def function_0(x)" in got(bodies, 5)
    lean.assert_no_hook_errors()


def test_after_gemini_compresses_the_re_read_is_content(gemini_cli, wired, lean, run_host):
    """Content, the stub, the content again (asked again right after), then the fake model reports
    a 1,000,000-token prompt: Gemini compresses before the next request (its chat recording gets
    the new history) and the read after it gets the content, where it had been the stub."""
    hh, _settings, _original = wired
    read = call("read_file", {"file_path": str(hh.proj / "big.py")})
    sid, _ = run(gemini_cli, hh, lean, run_host, [read, "done"])
    sid2, bodies = run(gemini_cli, hh, lean, run_host, [read, read, read, read, "done"], "--resume", "latest",
                       prompt="read it again", tokens=[10, 10, 1_000_000, 10])
    assert sid2 == sid
    results = [gemini_tool_results(b)[-1][1] for b in bodies[1:5]]
    assert is_content(results[0])  # the resume replaced the history: sent again once
    assert BLOCKED + "[unchanged] big.py" in results[1]
    assert is_content(results[2])  # asked again right after
    assert "Got it. Thanks for the additional context!" in json.dumps(bodies[4]), "Gemini did not compress"
    assert is_content(results[3]), results[3][:300]
    chat = open(lean.only_record("gemini")["transcript_path"], "rb").read()
    assert chat.count(b'{"$set":{"messages":') >= 3
    lean.assert_no_hook_errors()


def test_a_subagents_reads_are_never_credited_to_the_conversation(gemini_cli, wired, lean, run_host):
    """Gemini's subagent (invoke_agent) runs in the same process; its read_file hooks look like the
    conversation's own. Its window is the invoke_agent call: nothing read inside it is credited."""
    hh, _settings, _original = wired
    path = str(hh.proj / "big.py")
    script = [
        call("invoke_agent", {"agent_name": "generalist", "prompt": "read big.py"}),  # 0 the conversation
        call("read_file", {"file_path": path}),                                      # the subagent reads
        call("complete_task", {"result": {"response": "read it"}}),                   # the subagent ends
        call("read_file", {"file_path": path}),                                      # the conversation reads: content
        call("read_file", {"file_path": path}),                                      # ...and again: its own stub
        "done",
    ]
    _sid, bodies = run(gemini_cli, hh, lean, run_host, script)
    results = [text for body in bodies[1:] for name, text in gemini_tool_results(body)[-1:] if name == "read_file"]
    assert len(results) >= 3, results
    assert is_content(results[-2]), "the subagent's read was credited to the conversation"
    assert results[-1].startswith('{"error": "' + BLOCKED + "[unchanged] big.py"), results[-1][:200]
    lean.assert_no_hook_errors()


def test_uninstall_gives_the_users_file_back(gemini_cli, wired, lean, run_host):
    hh, settings, original = wired
    text = settings.read_text()
    assert "read_file|run_shell_command|invoke_agent" in text
    lean.run("uninstall", "--agent", "gemini")
    assert settings.read_bytes() == original
