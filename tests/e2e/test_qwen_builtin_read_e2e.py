"""End to end: Qwen Code's own read_file and run_shell_command under the read cache's rules, on
the real CLI (0.15.10; LEANCTX_HOST_CLI_DIR pointing at 0.24.4 runs the same), offline against a
fake Chat Completions API.

`leanctx init --agent qwen` wires PreToolUse for read_file and run_shell_command (beside ctx_read)
and a PostToolUse entry that credits what they delivered. A refusal reaches the model as the
cache's text itself. Qwen's read_file keeps its own cache: a whole-file re-read of a file it read
whole in this process, unchanged by its stat, gets its own "[File … unchanged since last read in
this session …]" note.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e import hostcli
from tests.e2e.conftest import _cli
from tests.e2e.fake_gemini_chat import FakeGeminiChat, call, chat_tool_results
from tests.e2e.settings_home import wire
from tests.e2e.test_qwen_e2e import READ, SEARCH, USER_SETTINGS

pytestmark = pytest.mark.e2e

LINES = 600
QWEN_UNCHANGED = "[File big.py unchanged since last read in this session"
# a small file with no blank line at its end: Qwen trims a command's output, and 0.15.10 cut a
# longer `cat` (about 4 KB, mid-line, with no note) in these runs
PLAIN = "".join(f"def function_{i}(x):\n    return x * {i}\n" for i in range(50))


@pytest.fixture
def qwen_cli():
    return _cli("qwen")


@pytest.fixture
def wired(host_home, lean):
    hh = host_home
    settings, original, wired_bytes, _tap = wire(hh, lean, "qwen", USER_SETTINGS)
    settings.write_bytes(wired_bytes)  # without the test's own tap hook
    (hh.proj / "plain.py").write_text(PLAIN)
    lean.run("serve", "--detach")  # the daemon is up before the fake model's instant first call
    yield hh, settings, original
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def run(qwen_cli, hh, lean, run_host, script, *extra, prompt="work on big.py", tokens=(), side_tokens=10):
    """One headless turn; returns (session id, call id -> what the model received for it)."""
    with FakeGeminiChat(script, prompt_tokens=tokens, side_prompt_tokens=side_tokens) as srv:
        env = hostcli.base_env(hh.home, {**lean.host_env, "OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": srv.chat_url,
                                         "OPENAI_MODEL": "fake-model"})
        cp, _ = run_host([qwen_cli, "-p", prompt, "--output-format", "json", "--yolo", *extra], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr[-3000:]
        messages = json.loads(cp.stdout)
        sid = {m.get("session_id") for m in messages if m.get("type") in ("system", "result")}.pop()
        results: dict = {}
        for body in srv.main_requests:  # a subagent's results are in its own requests
            results.update(chat_tool_results(body))
        return sid, results


def is_content(text: str | None, last: str = "def function_199") -> bool:
    return text is not None and last in text and not text.startswith("[")


def edit(path: str, old: str, new: str) -> dict:
    return call("edit", {"file_path": path, "old_string": old, "new_string": new})


EDITED = "has been updated"  # Qwen's answer to an edit it made (0.15.10)
NOT_READ = "has not been read in this session"  # its refusal of a file its own read_file did not read


def test_read_file_only_stub_edit_right_after_ask_again_changes_new_session(qwen_cli, wired, lean, run_host):
    hh, settings, original = wired
    big = hh.proj / "big.py"
    path = str(big)
    read = lambda **kw: call("read_file", {"file_path": path, **kw})  # noqa: E731
    changed = read()

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return changed

    script = [
        read(),                                     # 0 content
        read(),                                     # 1 unchanged: the stub
        edit(path, "return x * 7\n", "return x * 70\n"),  # 2
        read(),                                     # 3 after the model's own edit: a diff
        read(),                                     # 4 asked again right after: the content
        read(offset=99, limit=30),                  # 5 a held range (offset is 0-based): its stub
        change_by_another_program,                  # 6 changed by another program: never [unchanged]
        read(),                                     # 7 asked again: the content
        read(),                                     # 8 the stub (Qwen's own cache would say "unchanged" too)
        read(),                                     # 9 asked again right after: the content, not Qwen's note
        read(offset=0, limit=1000),                 # 10 the same lines by a range: the stub
        edit(path, "return x * 11\n", "return x * 11 + 1\n"),  # 11
        "done",
    ]
    _sid, results = run(qwen_cli, hh, lean, run_host, script)
    got = [results.get(changed["id"] if callable(item) else item["id"]) for item in script[:-1]]
    assert is_content(got[0])
    assert got[1].startswith(f"[unchanged] big.py {LINES} lines") and "read it again right away" in got[1], got[1]
    assert EDITED in got[2], got[2]
    assert got[3].startswith("[changed] big.py") and "+    return x * 70" in got[3], got[3][:400]
    assert is_content(got[4]) and "x * 70" in got[4]
    assert got[5].startswith(f"[unchanged] big.py L100-129 of {LINES} lines"), got[5]
    assert got[6].startswith("[changed] big.py") and "+    return x * 9 + 0" in got[6], got[6][:300]
    assert is_content(got[7]) and "x * 9 + 0" in got[7]
    assert got[8].startswith(f"[unchanged] big.py {LINES} lines"), got[8]
    before_last_edit = big.read_text().replace("return x * 11 + 1\n", "return x * 11\n")
    assert got[9] == before_last_edit, (got[9] or "")[:200]  # the file's text, as read_file gives it
    assert got[10].startswith(f"[unchanged] big.py {LINES} lines"), got[10]
    assert EDITED in got[11], got[11]  # an edit right after a range's stub
    assert "return x * 11 + 1\n" in big.read_text()
    assert not any(QWEN_UNCHANGED in (g or "") for g in got)
    lean.assert_no_hook_errors()

    _sid2, results = run(qwen_cli, hh, lean, run_host, [first := read(), "done"])
    assert is_content(results[first["id"]]), "a new session inherited a stub"

    rc, report = lean.doctor("qwen")
    assert rc == 0, json.dumps(report, indent=1)[-3000:]
    assert "built-in read_file and run_shell_command gated like ctx_read" in json.dumps(report)
    lean.run("uninstall", "--agent", "qwen")
    assert settings.read_bytes() == original


def test_shell_only_stub_range_run_again_and_a_change(qwen_cli, wired, lean, run_host):
    hh, _settings, _original = wired
    plain = hh.proj / "plain.py"
    sh = lambda command: call("run_shell_command", {"command": command})  # noqa: E731
    changed = sh("cat plain.py")

    def change_by_another_program(body):  # noqa: ANN001
        plain.write_text(plain.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return changed

    script = [sh("cat plain.py"), sh("cat plain.py"), sh("cat plain.py"), sh("sed -n '20,29p' plain.py"),
              change_by_another_program, sh("head -n 5 plain.py | cat"), "done"]
    _sid, results = run(qwen_cli, hh, lean, run_host, script, prompt="work on plain.py")
    got = [results.get(changed["id"] if callable(item) else item["id"]) for item in script[:-1]]
    assert "def function_49" in got[0]
    assert got[1].startswith("[unchanged] plain.py 100 lines") and "run the same command again" in got[1], got[1]
    assert "def function_49" in got[2] and not got[2].startswith("[")
    assert got[3].startswith("[unchanged] plain.py L20-29 of 100 lines"), got[3]
    assert got[4].startswith("[changed] plain.py") and "+    return x * 9 + 0" in got[4], got[4][:300]
    assert "def function_0(x)" in got[5]
    lean.assert_no_hook_errors()


def test_after_qwen_compresses_the_re_read_is_content(qwen_cli, wired, lean, run_host):
    """Content, the stub, the content again (asked again right after), then the fake model reports
    a 1,000,000-token prompt: Qwen compresses before the next request and the read after it gets
    the content, where it had been the stub. (0.15.10; 0.24.4 did not compress with this fake
    model's counts: past its hard limit of 177,000 tokens it stops the run instead.)"""
    hh, _settings, _original = wired
    reads = [call("read_file", {"file_path": str(hh.proj / "big.py")}) for _ in range(4)]
    _sid, results = run(qwen_cli, hh, lean, run_host, [*reads, "done"], tokens=[10, 10, 1_000_000, 10], side_tokens=600_000)
    got = [results.get(r["id"]) for r in reads]
    assert is_content(got[0]) and got[1].startswith("[unchanged] big.py") and is_content(got[2]), got[1][:200]
    record = lean.only_record("qwen")
    chat = open(record["transcript_path"], "rb").read().decode()
    assert any(json.loads(line).get("subtype") == "chat_compression" for line in chat.splitlines()), "Qwen did not compress"
    assert is_content(got[3]), (got[3] or "")[:200]
    lean.assert_no_hook_errors()


def test_a_subagents_reads_are_never_credited_to_the_conversation(qwen_cli, wired, lean, run_host):
    """Qwen Code 0.15.10 sends a subagent's PreToolUse without `agent_id`; between its
    SubagentStart and SubagentStop nothing read is credited to the conversation."""
    hh, _settings, _original = wired
    path = str(hh.proj / "big.py")
    sub_read, main_read, main_again = (call("read_file", {"file_path": path}) for _ in range(3))
    agent = call("agent", {"subagent_type": "general-purpose", "description": "read", "prompt": "read big.py"})
    script = [agent, sub_read, "read it", main_read, main_again, "done"]
    _sid, results = run(qwen_cli, hh, lean, run_host, script)
    if (results.get(agent["id"]) or "").startswith("Background agent launched"):
        # 0.24.4 runs it beside the conversation (whose next request takes the next scripted
        # call), and names it on its calls (agent_id): tests/cache/test_unnamed_subagents.py
        pytest.skip("this Qwen Code runs the subagent in the background")
    assert is_content(results[sub_read["id"]])
    assert is_content(results[main_read["id"]]), "the subagent's read was credited to the conversation"
    assert results[main_again["id"]].startswith(f"[unchanged] big.py {LINES} lines")
    lean.assert_no_hook_errors()


def test_qwen_clearing_old_tool_results_on_a_later_prompt_is_a_compaction(qwen_cli, host_home, lean, run_host):
    """Qwen Code clears old tool results (all but the last `toolResultsNumToKeep`) from its
    context when a user prompt comes `toolResultsThresholdMinutes` after its last answer, with no
    hook and nothing in its chat recording. Here the threshold is 0 and one result is kept: the
    second prompt of one process (stream-json input) finds the first read's result replaced by
    `[Old tool result content cleared]`, and the re-read after it gets the content, not the stub."""
    hh = host_home
    settings = USER_SETTINGS.replace('"$version": 4', '"context": {"clearContextOnIdle": {"toolResultsThresholdMinutes": 0, '
                                                      '"toolResultsNumToKeep": 1}},\n  "$version": 4')
    wire(hh, lean, "qwen", settings)
    lean.run("serve", "--detach")
    path = str(hh.proj / "big.py")
    first, again = call("read_file", {"file_path": path}), call("read_file", {"file_path": path})
    script = [first, call("run_shell_command", {"command": "echo hi"}), "first done", again, "second done"]
    try:
        with FakeGeminiChat(script) as srv:
            env = hostcli.base_env(hh.home, {**lean.host_env, "OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": srv.chat_url,
                                             "OPENAI_MODEL": "fake-model"})
            proc = subprocess.Popen([qwen_cli, "--input-format", "stream-json", "--output-format", "stream-json", "--yolo"],
                                    cwd=hh.proj, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
            try:
                for prompt in ("read big.py", "read it again"):
                    proc.stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n")
                    proc.stdin.flush()
                    for line in proc.stdout:  # this prompt's turn ends with a result message
                        if json.loads(line).get("type") == "result":
                            break
                proc.stdin.close()
                proc.wait(timeout=120)
            finally:
                if proc.poll() is None:
                    proc.kill()
            last = chat_tool_results(srv.main_requests[-1])
    finally:
        subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)
    assert last[first["id"]] == "[Old tool result content cleared]", "Qwen did not clear the old result"
    assert is_content(last[again["id"]]), last[again["id"]][:200]
    assert lean.only_record("qwen")["compactions"] >= 1
    lean.assert_no_hook_errors()


def test_an_edit_right_after_a_gate_answer_succeeds_whatever_read_first(qwen_cli, wired, lean, run_host):
    """Qwen's edit tool accepts only a file its own read_file read in this process, at this mtime
    and size (0.15.10: checkPriorRead, FileReadCache): a gated read_file runs and its answer is
    replaced after it, so an edit right after a stub, a diff or the content asked again succeeds,
    whichever reader read the file first. First `cat` (no read_file yet), then read_file: the
    stub; an edit; the diff after it; asked again: the content (Qwen's own note replaced); an
    edit; another program's change: the diff; an edit; ... ; the stub; an edit. A read right after
    a diff is asked again too (the daemon remembers the refusal), so it gets the content."""
    hh, _settings, _original = wired
    plain = hh.proj / "plain.py"
    path = str(plain)
    read = lambda: call("read_file", {"file_path": path})  # noqa: E731
    changed = read()

    def change_by_another_program(body):  # noqa: ANN001
        plain.write_text(plain.read_text().replace("return x * 30\n", "return x * 30 + 3\n"))
        return changed

    script = [
        call("run_shell_command", {"command": "cat plain.py"}),  # 0 content, by the shell
        read(),                                                  # 1 the stub
        edit(path, "return x * 7\n", "return x * 70\n"),        # 2 an edit right after it
        read(),                                                  # 3 the diff after the model's own edit
        read(),                                                  # 4 asked again: the content
        edit(path, "return x * 9\n", "return x * 90\n"),        # 5
        change_by_another_program,                               # 6 the diff
        edit(path, "return x * 11\n", "return x * 110\n"),      # 7 an edit right after a diff
        read(),                                                  # 8 the diff after that edit
        read(),                                                  # 9 asked again: the content
        edit(path, "return x * 13\n", "return x * 130\n"),      # 10 an edit right after it
        read(),                                                  # 11 the diff after it
        edit(path, "return x * 15\n", "return x * 150\n"),      # 12 an edit right after the diff
        read(),                                                  # 13 the diff
        read(),                                                  # 14 asked again: the content
        read(),                                                  # 15 the stub
        edit(path, "return x * 17\n", "return x * 170\n"),      # 16 an edit right after the stub
        "done",
    ]
    _sid, results = run(qwen_cli, hh, lean, run_host, script, prompt="work on plain.py")
    got = [results.get(changed["id"] if callable(item) else item["id"]) for item in script[:-1]]
    assert "def function_49" in got[0] and not got[0].startswith("[")
    assert got[1].startswith("[unchanged] plain.py 100 lines"), got[1]
    assert EDITED in got[2], got[2]
    assert got[3].startswith("[changed] plain.py") and "+    return x * 70" in got[3], got[3][:300]
    after_first_edit = PLAIN.replace("return x * 7\n", "return x * 70\n")
    assert got[4] == after_first_edit.rstrip("\n") or got[4] == after_first_edit, (got[4] or "")[:200]
    assert EDITED in got[5], got[5]
    assert got[6].startswith("[changed] plain.py") and "+    return x * 30 + 3" in got[6], got[6][:300]
    assert EDITED in got[7], got[7]
    assert got[8].startswith("[changed] plain.py") and "+    return x * 110" in got[8], got[8][:300]
    assert is_content(got[9], "def function_49") and "return x * 110\n" in got[9], got[9][:200]
    assert EDITED in got[10], got[10]
    assert got[11].startswith("[changed] plain.py") and "+    return x * 130" in got[11], got[11][:300]
    assert EDITED in got[12], got[12]
    assert got[13].startswith("[changed] plain.py") and "+    return x * 150" in got[13], got[13][:300]
    assert is_content(got[14], "def function_49") and "return x * 150\n" in got[14], got[14][:200]
    assert got[15].startswith("[unchanged] plain.py 100 lines"), got[15]
    assert EDITED in got[16], got[16]
    text = plain.read_text()
    assert all(f"return x * {n}\n" in text for n in (70, 90, 110, 130, 150, 170)) and "return x * 30 + 3\n" in text
    assert not any(NOT_READ in (g or "") or QWEN_UNCHANGED in (g or "") for g in got)
    lean.assert_no_hook_errors()


def test_asked_again_where_the_files_text_is_not_sure_to_be_read_files(qwen_cli, wired, lean, run_host):
    """A file with blanks at the end of its lines, read by ctx_read (its bytes as they are), then
    by read_file (which trims them, so the hook cannot hand the file's text as read_file would):
    the stub; asked again right after it, the model gets what Qwen alone gives (its own
    "unchanged" note: its read_file read this version whole under the stub); an edit right after
    the stub and after that note succeeds. (Qwen trims those blanks in read_file's and the
    shell's output, so only ctx_read is credited with such a file.)"""
    hh, _settings, _original = wired
    spaced = hh.proj / "spaced.py"
    spaced.write_text("".join(f"x_{i} = {i}  \n" for i in range(40)))
    path = str(spaced)
    read = lambda: call("read_file", {"file_path": path})  # noqa: E731
    script = [SEARCH, call(READ, {"path": "spaced.py"}), read(), edit(path, "x_3 = 3 ", "x_3 = 33 "),
              call(READ, {"path": "spaced.py"}), read(), read(), edit(path, "x_5 = 5 ", "x_5 = 55 "), "done"]
    _sid, results = run(qwen_cli, hh, lean, run_host, script, "--allowed-tools", READ, prompt="work on spaced.py")
    got = [results.get(item["id"]) for item in script[1:-1]]
    assert "x_39 = 39  " in got[0], got[0][:200]
    assert got[1].startswith("[unchanged] spaced.py 40 lines"), got[1]
    assert EDITED in got[2], got[2]
    assert "+x_3 = 33" in got[3], got[3][:300]  # ctx_read's diff after the model's own edit
    assert got[4].startswith("[unchanged] spaced.py 40 lines"), got[4]
    assert got[5].startswith("[File spaced.py unchanged since last read in this session"), got[5][:200]
    assert EDITED in got[6], got[6]
    assert "x_3 = 33  \n" in spaced.read_text() and "x_5 = 55  \n" in spaced.read_text()
    assert not any(NOT_READ in (g or "") for g in got)
    lean.assert_no_hook_errors()
