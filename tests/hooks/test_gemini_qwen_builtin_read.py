"""Gemini CLI's and Qwen Code's read_file and run_shell_command under the read gate: what each
call asks for and what it gave the model, from the payloads recorded on the real CLIs (Gemini CLI
0.61.0, Qwen Code 0.15.10 and 0.24.4: tests/fixtures/payloads/{gemini,qwen}/builtin/, each with
the tool results the fake model received in `*.model-received.*.json`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leanctx.agents import gemini, qwen
from leanctx.readers import Ask

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "payloads"
PROJ = "/home/user/proj"


def recorded(host: str, name: str) -> dict:
    return json.loads((FIXTURES / host / "builtin" / f"{name}.json").read_text())


def ask(agent, payload: dict):  # noqa: ANN001, ANN201
    return agent.builtin_read_ask(agent.normalize(payload["hook_event_name"], payload))


def delivery(agent, payload: dict):  # noqa: ANN001, ANN201
    return agent.builtin_read_delivery(agent.normalize(payload["hook_event_name"], payload), payload)


@pytest.fixture(autouse=True)
def no_settings(tmp_path: Path, monkeypatch) -> None:
    """No settings file of the test's user turns on Gemini's context management."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GEMINI_CLI_SYSTEM_SETTINGS_PATH", str(tmp_path / "none.json"))
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)


@pytest.mark.parametrize(("name", "want"), [
    ("0.61.0.BeforeTool.read_file.1", Ask(f"{PROJ}/big.py", 1, 2000)),  # `big.py`, relative: the project's
    ("0.61.0.BeforeTool.read_file.4", Ask(f"{PROJ}/small.txt", 1, 2000)),  # `DENYME/../small.txt`
    ("0.61.0.BeforeTool.read_file.3", Ask(f"{PROJ}/big.py", 10, 20)),  # start_line/end_line: 1-based, inclusive
    ("0.61.0.BeforeTool.run_shell_command.2", Ask(f"{PROJ}/small.txt", 2, 3, reader="shell")),
    ("0.61.0.BeforeTool.run_shell_command.4", Ask(f"{PROJ}/small.txt", numbered=True, reader="shell")),  # dir_path "."
    ("0.61.0.BeforeTool.run_shell_command.3", None),  # `cat small.txt # …`: not a plain read
    ("0.61.0.BeforeTool.invoke_agent.1", None),
])
def test_gemini_asks(name: str, want: Ask | None) -> None:
    assert ask(gemini.AGENT, recorded("gemini", name)) == want


@pytest.mark.parametrize(("name", "want"), [
    ("0.15.10.PreToolUse.read_file.2", Ask(f"{PROJ}/big.py", 11, 30)),  # offset 10 (0-based), limit 20
    ("0.15.10.PreToolUse.read_file.1", Ask(f"{PROJ}/big.py", 1, 1000)),
    ("0.15.10.PreToolUse.run_shell_command.4", Ask(f"{PROJ}/small.txt", numbered=True, reader="shell")),  # directory
    ("0.24.4.PreToolUse.run_shell_command.7", Ask(f"{PROJ}/blank.txt", last=2, reader="shell")),
    ("0.24.4.PreToolUse.run_shell_command.3", None),
])
def test_qwen_asks(name: str, want: Ask | None) -> None:
    assert ask(qwen.AGENT, recorded("qwen", name)) == want


def model_received(host: str, version: str, run: str) -> list[str]:
    return json.loads((FIXTURES / host / "builtin" / f"{version}.model-received.{run}.json").read_text())


@pytest.mark.parametrize(("host", "name", "run", "want"), [
    ("gemini", "0.61.0.AfterTool.read_file.4", "g061", (Ask(f"{PROJ}/small.txt", 1, None), "alpha\nbeta\ngamma\n")),
    ("gemini", "0.61.0.AfterTool.run_shell_command.1", "g061s", (Ask(f"{PROJ}/small.txt", reader="shell"), "alpha\nbeta\ngamma")),
    ("gemini", "0.61.0.AfterTool.run_shell_command.3", "g061s",  # trimmed: `1\talpha`, padding restored
     (Ask(f"{PROJ}/small.txt", numbered=True, reader="shell"), "alpha\nbeta\ngamma")),
    ("qwen", "0.15.10.PostToolUse.read_file.3", "q015", (Ask(f"{PROJ}/small.txt", 1, None), "alpha\nbeta\ngamma\n")),
    ("qwen", "0.24.4.PostToolUse.run_shell_command.2", "q024shell", (Ask(f"{PROJ}/small.txt", 2, 3, reader="shell"), "beta\ngamma")),
    ("qwen", "0.24.4.PostToolUse.run_shell_command.3", "q024shell",
     (Ask(f"{PROJ}/small.txt", numbered=True, reader="shell"), "alpha\nbeta\ngamma")),
])
def test_what_the_model_received_is_handed_on(host: str, name: str, run: str, want: tuple) -> None:
    agent = gemini.AGENT if host == "gemini" else qwen.AGENT
    payload = recorded(host, name)
    assert delivery(agent, payload) == want
    # the post-tool payload's text is, byte for byte, a tool result the model got in that run
    assert payload["tool_response"]["llmContent"] in model_received(host, name.split(".Post")[0].split(".After")[0], run)


def test_a_range_is_handed_on_without_the_head_the_reader_put_before_it() -> None:
    big = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200)).split("\n")
    ask_, text = delivery(gemini.AGENT, recorded("gemini", "0.61.0.AfterTool.read_file.3"))
    assert ask_ == Ask(f"{PROJ}/big.py", 10, 20) and text == "\n".join(big[9:20])
    ask_, text = delivery(qwen.AGENT, recorded("qwen", "0.15.10.PostToolUse.read_file.2"))
    assert ask_ == Ask(f"{PROJ}/big.py", 11, 30) and text == "\n".join(big[10:30])


@pytest.mark.parametrize(("host", "name"), [
    ("qwen", "0.15.10.PostToolUse.read_file.4"),  # Qwen's own "unchanged since last read" note
    ("qwen", "0.24.4.PostToolUse.read_file.4"),
    ("qwen", "0.15.10.PostToolUse.run_shell_command.3"),  # 0.15's terminal turned the tabs of `nl -ba` into spaces
    ("gemini", "0.61.0.AfterTool.run_shell_command.6"),  # `tail -n 2 blank.txt` is `mid\n\n`, trimmed to `mid`: handed on, never matches
])
def test_what_is_not_the_files_text_is_not_handed_on(host: str, name: str) -> None:
    agent = gemini.AGENT if host == "gemini" else qwen.AGENT
    got = delivery(agent, recorded(host, name))
    assert got is None or got[1] == "mid"


@pytest.mark.parametrize("response", [
    {"llmContent": "Could not read file because no file was found at the specified path.", "returnDisplay": "File not found.",
     "error": {"message": "File not found"}},
    {"llmContent": {"inlineData": {"data": "...", "mimeType": "image/png"}}, "returnDisplay": "Read image file"},
    {"llmContent": "\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines 3-20 of 601 total lines.\n"
                   "Action: …\n\n--- FILE CONTENT (truncated) ---\nx", "returnDisplay": ""},  # not the start asked for
    {"llmContent": "", "returnDisplay": ""},
])
def test_gemini_read_file_answers_that_are_not_the_asked_lines(response: dict) -> None:
    payload = {**recorded("gemini", "0.61.0.AfterTool.read_file.3"), "tool_response": response}
    assert delivery(gemini.AGENT, payload) is None


@pytest.mark.parametrize("output", [
    "<untrusted_context>\nOutput: alpha\nExit Code: 1\nProcess Group PGID: 7\n</untrusted_context>",
    "<untrusted_context>\nOutput: (empty)\nProcess Group PGID: 7\n</untrusted_context>",
    "<untrusted_context>\nOutput: alpha\nBackground PIDs: 9\nProcess Group PGID: 7\n</untrusted_context>",
    "Output: alpha\nProcess Group PGID: 7",
])
def test_gemini_shell_output_only_from_a_clean_run(output: str) -> None:
    payload = {**recorded("gemini", "0.61.0.AfterTool.run_shell_command.1"), "tool_response": {"llmContent": output}}
    got = delivery(gemini.AGENT, payload)
    assert got is None or got[1] != "alpha"


@pytest.mark.parametrize("output", [
    "Command: cat small.txt\nDirectory: (root)\nOutput: alpha\nError: (none)\nExit Code: 1\nSignal: 0\nProcess Group PGID: 7",
    "Command: cat other.txt\nDirectory: (root)\nOutput: alpha\nError: (none)\nExit Code: 0\nSignal: 0\nProcess Group PGID: 7",
    "Command: cat small.txt\nDirectory: (root)\nOutput: (empty)\nError: (none)\nExit Code: 0\nSignal: 0\nProcess Group PGID: 7",
    "Command: cat small.txt\nDirectory: (root)\nOutput: alpha\nError: (none)\nExit Code: 0\nSignal: 15\nProcess Group PGID: 7",
])
def test_qwen_shell_output_only_from_a_clean_run(output: str) -> None:
    payload = {**recorded("qwen", "0.15.10.PostToolUse.run_shell_command.1"), "tool_response": {"llmContent": output}}
    assert delivery(qwen.AGENT, payload) is None


def test_gemini_names_each_call_the_same_before_and_after_it_runs() -> None:
    before = gemini.AGENT.normalize("BeforeTool", recorded("gemini", "0.61.0.BeforeTool.read_file.3"))
    after = gemini.AGENT.normalize("AfterTool", recorded("gemini", "0.61.0.AfterTool.read_file.3"))
    other = gemini.AGENT.normalize("BeforeTool", recorded("gemini", "0.61.0.BeforeTool.read_file.2"))
    relative = gemini.AGENT.normalize("BeforeTool", recorded("gemini", "0.61.0.BeforeTool.read_file.1"))
    assert before.tool_use_id == after.tool_use_id and before.tool_use_id.startswith("gemini-call:")
    assert other.tool_use_id != before.tool_use_id and relative.tool_use_id != other.tool_use_id


def test_gemini_context_management_withholds_everything(tmp_path: Path) -> None:
    """With context management on, Gemini rewrites tool output after AfterTool: nothing is gated
    or handed on (a settings file that names it, or one we cannot read)."""
    settings = tmp_path / "home" / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"contextManagement": {"enabled": true}}')
    assert ask(gemini.AGENT, recorded("gemini", "0.61.0.BeforeTool.read_file.3")) is None
    assert delivery(gemini.AGENT, recorded("gemini", "0.61.0.AfterTool.read_file.3")) is None
    settings.write_text("{}")
    assert ask(gemini.AGENT, recorded("gemini", "0.61.0.BeforeTool.read_file.3")) is not None
    settings.unlink()
    settings.mkdir()  # not a file we can read
    assert ask(gemini.AGENT, recorded("gemini", "0.61.0.BeforeTool.read_file.3")) is None


def test_refusals_reach_each_model_as_recorded() -> None:
    """Gemini 0.61.0 hands the model `{"error": "Tool execution blocked: <reason>"}`; Qwen Code
    0.15.10 and 0.24.4 the reason itself (the probe's refusal text, recorded in those runs)."""
    reason = "REFUSAL-TEXT line1\nline2 [unchanged] x"
    ev = gemini.AGENT.normalize("BeforeTool", recorded("gemini", "0.61.0.BeforeTool.read_file.3"))
    assert json.loads(gemini.AGENT.builtin_refusal_output(ev, reason)) == {"decision": "deny", "reason": reason}
    assert json.dumps({"error": f"Tool execution blocked: {reason}"}) in model_received("gemini", "0.61.0", "g061")
    ev = qwen.AGENT.normalize("PreToolUse", recorded("qwen", "0.15.10.PreToolUse.read_file.2"))
    out = json.loads(qwen.AGENT.builtin_refusal_output(ev, reason))["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny" and out["permissionDecisionReason"] == reason
    for version, run in (("0.15.10", "q015"), ("0.24.4", "q024basic")):
        assert reason in model_received("qwen", version, run)


def test_qwen_asked_again_gets_the_files_text_when_read_file_would_give_exactly_it(tmp_path: Path) -> None:
    """Qwen's PreToolUse takes no `updatedInput` and its read_file may answer a whole-file re-read
    with its own "unchanged" note: asked again right after a refusal, read_file runs (so Qwen's
    edit tool knows it read the file) and its note is replaced by the file's text, through
    PostToolUse's `continue: false` (the model gets `stopReason` verbatim), only where read_file
    would send exactly it; content it sent stands."""
    base = recorded("qwen", "0.15.10.PostToolUse.read_file.1")
    note = f"{qwen.UNCHANGED_HEAD}a.py{qwen.UNCHANGED_MARK} \u2014 the full content was provided earlier]"

    def again(name: str, data: bytes, returned: str = note, **extra: object) -> str | None:
        path = tmp_path / name
        path.write_bytes(data)
        payload = {**base, "tool_input": {"file_path": str(path), **extra}, "tool_response": {"llmContent": returned}}
        ev = qwen.AGENT.normalize("PostToolUse", payload)
        return qwen.AGENT.builtin_again_text(ev, payload, str(path))

    assert again("a.py", b"def f():\n    return 1\n") == "def f():\n    return 1\n"
    ev = qwen.AGENT.normalize("PostToolUse", base)
    assert json.loads(qwen.AGENT.builtin_replace_output(ev, "TEXT")) == {"continue": False, "stopReason": "TEXT"}
    assert again("b.py", b"x = 1\n", returned="x = 1\n") is None  # it sent the content: that stands
    for name, data in (("trailing.py", b"x = 1  \n"), ("crlf.py", b"x = 1\r\n"), ("latin.py", b"caf\xe9\n"),
                       ("big.py", b"x\n" * 1000), ("wide.py", b"y" * 20_001), ("empty.py", b"")):
        assert again(name, data) is None, name  # read_file would not send exactly the file: its note stands
    assert again("ranged.py", b"x = 1\n", offset=0, limit=10) is None  # a range never meets Qwen's own note


def test_qwen_read_file_refusal_is_handed_over_after_it_ran_only_while_the_file_stays_as_it_was(tmp_path: Path, monkeypatch) -> None:
    """What the pre-tool hook kept for a read_file call (the cache's text, the file's stat) is what
    its post-tool hook answers with, once: never when the file changed between the two hooks
    (then what read_file returned stands, and is credited as usual); asked again, only Qwen's own
    note is replaced. Real files under a data dir with no daemon (a credit is then silence)."""
    from leanctx.hooks import readgate

    monkeypatch.delenv(readgate.ENV, raising=False)
    data_dir = str(tmp_path / "data")
    path = tmp_path / "a.py"
    path.write_text("def f():\n    return 1\n")
    pre = {**recorded("qwen", "0.15.10.PreToolUse.read_file.1"), "tool_input": {"file_path": str(path)}}
    post = {**pre, "hook_event_name": "PostToolUse", "tool_response": {"llmContent": path.read_text(), "returnDisplay": ""}}
    agent = qwen.AGENT
    ev = agent.normalize("PostToolUse", post)
    kept = readgate._after_path(data_dir, agent.normalize("PreToolUse", pre))
    assert kept is not None and kept == readgate._after_path(data_dir, ev)

    readgate._keep(kept, {"text": "[unchanged] a.py 2 lines", "path": str(path), "stat": readgate._stat(str(path))})
    assert json.loads(readgate.after_read(data_dir, post, agent, ev)) == {"continue": False, "stopReason": "[unchanged] a.py 2 lines"}
    assert readgate.after_read(data_dir, post, agent, ev) == ""  # once: the kept answer is gone

    readgate._keep(kept, {"text": "[unchanged] a.py 2 lines", "path": str(path), "stat": readgate._stat(str(path))})
    path.write_text("def f():\n    return 22\n")  # changed while read_file ran: its answer stands
    assert readgate.after_read(data_dir, post, agent, ev) == ""
    assert not os.path.exists(kept)

    note = {**post, "tool_response": {"llmContent": f"{qwen.UNCHANGED_HEAD}a.py{qwen.UNCHANGED_MARK} \u2014 …]"}}
    readgate._keep(kept, {"again": True, "path": str(path), "stat": readgate._stat(str(path))})
    assert json.loads(readgate.after_read(data_dir, note, agent, ev)) == {"continue": False, "stopReason": path.read_text()}
    readgate._keep(kept, {"again": True, "path": str(path), "stat": readgate._stat(str(path))})
    assert readgate.after_read(data_dir, post, agent, ev) == ""  # content came: it stands

    monkeypatch.setenv("LEANCTX_BUILTIN_GATE", "0")  # switched off: nothing replaced
    readgate._keep(kept, {"text": "[unchanged] a.py 2 lines", "path": str(path), "stat": readgate._stat(str(path))})
    assert readgate.after_read(data_dir, post, agent, ev) == ""
