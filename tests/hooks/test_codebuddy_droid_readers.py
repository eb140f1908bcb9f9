"""CodeBuddy Code's and Factory Droid's own readers under the read gate: recorded payloads in,
what the gate asks and what it credits out.

The payloads were recorded from the real CLIs (CodeBuddy Code 2.117.0, Droid 0.215.0) against a
fake model; each case holds the pre-tool and post-tool payload of one call and the text the model
received for it. The files they read are re-made here byte for byte, so every credit is checked
against the daemon's own rule (cache/readcache.py: builtin_delivery_matches)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leanctx.agents import codebuddy, droid
from leanctx.cache.readcache import builtin_delivery_matches
from leanctx.readers import Ask
from tests.conftest import PAYLOADS

PROJ = "/home/user/proj"
FILES = {  # the files the recorded calls read, as the recording wrote them
    "small.txt": "alpha\nbeta\ngamma\n",
    "nonl.txt": "one\ntwo",
    "big.py": "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200)),
    "wide.txt": "short\n" + "x" * 2500 + "\nend\n",
    "crlf.txt": "a\r\nb\r\n",
    "tabs.txt": "\tindented\n  \n\n",
}
CASES = {
    "codebuddy": json.loads((PAYLOADS / "codebuddy" / "builtin" / "reads.json").read_text()),
    "droid": json.loads((PAYLOADS / "droid" / "builtin" / "reads.json").read_text()),
}
AGENTS = {"codebuddy": codebuddy.AGENT, "droid": droid.AGENT}


def credited(ask: Ask, content: str) -> bool:
    """Would the daemon credit this delivery for the file as it was recorded?"""
    text = FILES[os.path.basename(ask.path)].replace("\r\n", "\r\n")
    lines = text.split("\n")
    n = len(lines) - 1 if text.endswith("\n") else len(lines)
    end = n if ask.end is None else min(ask.end, n)
    return builtin_delivery_matches(text, (ask.start, end), ask.start, content)


def case(host: str, tool_input: dict) -> dict:
    want = {k: v.replace("__P__", PROJ) if isinstance(v, str) else v for k, v in tool_input.items()}
    found = [c for c in CASES[host] if {k: v for k, v in c["pre"]["tool_input"].items() if k in want} == want
             and set(want) >= set(c["pre"]["tool_input"]) - {"summary", "riskLevel"}]
    assert len(found) == 1, (tool_input, len(found))
    return found[0]


def events(host: str, c: dict):
    agent = AGENTS[host]
    return agent.normalize("PreToolUse", c["pre"]), agent.normalize("PostToolUse", c["post"]) if c["post"] else None


def test_the_recorded_post_tool_text_is_what_the_model_received() -> None:
    """The premise of every credit: the post-tool payload's text is the tool result the model got
    (the reader's calls; CodeBuddy's Bash payload carries no output at all)."""
    for host, cases in CASES.items():
        for c in cases:
            if c["post"] is None:  # an error: no PostToolUse
                continue
            response = c["post"]["tool_response"]
            if isinstance(response, str):
                assert response == c["model"], (host, c["pre"]["tool_input"])
            else:  # CodeBuddy: a Bash run's flags without its output, or a Read's error
                assert host == "codebuddy" and "stdout" not in response
                assert c["pre"]["tool_name"] == "Bash" or response.get("is_error") is True


@pytest.mark.parametrize("host,tool_input,span,text", [
    ("codebuddy", {"file_path": "__P__/small.txt"}, (1, 3), "alpha\nbeta\ngamma"),
    ("codebuddy", {"file_path": "__P__/nonl.txt"}, (1, 2), "one\ntwo"),
    ("codebuddy", {"file_path": "__P__/big.py", "offset": 10, "limit": 5}, (10, 14), None),
    ("codebuddy", {"file_path": "__P__/big.py", "offset": 10, "limit": 1}, (10, 10), "def function_3(x):"),
    ("codebuddy", {"file_path": "__P__/big.py", "offset": 599}, (599, 600), "    return x * 199\n"),
    ("codebuddy", {"file_path": "__P__/big.py"}, (1, 600), FILES["big.py"][:-1]),
    ("codebuddy", {"file_path": "__P__/tabs.txt"}, (1, 3), "\tindented\n  \n"),
    ("droid", {"file_path": "__P__/small.txt"}, (1, 3), "alpha\nbeta\ngamma"),
    ("droid", {"file_path": "__P__/nonl.txt"}, (1, 2), "one\ntwo"),
    ("droid", {"file_path": "__P__/big.py", "offset": 10, "limit": 5}, (10, 14), None),
    ("droid", {"file_path": "__P__/big.py", "offset": 10, "limit": 1}, (10, 10), "def function_3(x):"),
    ("droid", {"file_path": "__P__/big.py", "offset": 599}, (599, 600), "    return x * 199\n"),
    ("droid", {"file_path": "__P__/big.py"}, (1, 600), FILES["big.py"][:-1]),
    ("droid", {"file_path": "__P__/tabs.txt"}, (1, 3), "\tindented\n  \n"),
    ("droid", {"command": "cat small.txt"}, (1, None), "alpha\nbeta\ngamma"),
    ("droid", {"command": "cat -n small.txt"}, (1, None), "alpha\nbeta\ngamma"),
    ("droid", {"command": "cat nonl.txt"}, (1, None), "one\ntwo"),
])
def test_a_recorded_read_is_credited_with_the_lines_the_model_got(host: str, tool_input: dict, span: tuple, text: str | None) -> None:
    c = case(host, tool_input)
    pre, post = events(host, c)
    agent = AGENTS[host]
    asked = agent.builtin_read_ask(pre)
    assert asked is not None and asked.start == span[0]
    got = agent.builtin_read_delivery(post, c["post"])
    assert got is not None
    ask, content = got
    assert (ask.path, ask.start, ask.end) == (asked.path, *span)
    if text is not None:
        assert content == text
    shown = c["model"]
    if host == "codebuddy":  # numbered `%4d→`: the text behind the numbers
        shown = "\n".join(line.partition("\u2192")[2] for line in shown.split("\n"))
    elif ask.numbered:
        shown = "\n".join(line.partition("\t")[2] for line in shown.split("\n"))
    assert content in shown, "credited text the model never saw"
    assert credited(ask, content), "the daemon would not credit what the model verbatim received"


@pytest.mark.parametrize("host,tool_input", [
    ("codebuddy", {"file_path": "__P__/wide.txt"}),   # a line over 2,000 characters: cut for the model
    ("codebuddy", {"file_path": "__P__/crlf.txt"}),   # CR dropped: not the bytes on disk
    ("droid", {"file_path": "__P__/wide.txt"}),
    ("droid", {"file_path": "__P__/crlf.txt"}),
])
def test_text_the_reader_changed_is_never_credited(host: str, tool_input: dict) -> None:
    c = case(host, tool_input)
    _pre, post = events(host, c)
    got = AGENTS[host].builtin_read_delivery(post, c["post"])
    assert got is None or not credited(*got)


def test_codebuddy_shell_reads_are_gated_on_absolute_paths_and_in_the_hosts_own_folder(monkeypatch) -> None:  # noqa: ANN001
    """Each Bash command starts in the CodeBuddy process's working directory: a relative path is
    read from the payload's `cwd` only when it is that folder. The post-tool payload has no output."""
    from leanctx.hooks import hostproc

    assert codebuddy.SHELLS == hostproc._SHELLS  # the same walk up to the host
    c = case("codebuddy", {"command": "cat small.txt"})
    pre, post = events("codebuddy", c)
    assert codebuddy.AGENT.builtin_read_ask(pre) is None, "a relative path against a folder the shell is not in"
    monkeypatch.setattr(codebuddy, "host_cwd", lambda: os.path.realpath(os.getcwd()))
    pre.cwd = os.getcwd()
    assert codebuddy.AGENT.builtin_read_ask(pre) == Ask(os.path.join(os.getcwd(), "small.txt"), reader="shell")
    pre.cwd = PROJ
    pre.tool_input = {"command": f"cat {PROJ}/small.txt", "description": "show"}
    assert codebuddy.AGENT.builtin_read_ask(pre) == Ask(f"{PROJ}/small.txt", reader="shell")
    assert codebuddy.AGENT.builtin_read_delivery(post, c["post"]) is None
    pre.tool_input = {"command": f"cat {PROJ}/small.txt", "run_in_background": True}
    assert codebuddy.AGENT.builtin_read_ask(pre) is None


def _cb_transcript(path: Path, rounds: list) -> None:
    """A CodeBuddy transcript: the prompt, then per model response its calls (all under the
    response's id, one parent) and each call's result, chained (2.117.0's shape)."""
    entries = [{"id": "u0", "parentId": None, "type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}]
    last = "u0"
    for r, calls in enumerate(rounds):
        rid = f"chatcmpl_{r}"
        for call_id, tool, args, _out in calls:
            entries.append({"id": rid, "parentId": last, "type": "function_call", "callId": call_id, "name": tool,
                            "arguments": json.dumps(args)})
        last = rid
        for n, (call_id, tool, _args, out) in enumerate(calls):
            if out is None:
                continue
            entries.append({"id": f"r{r}.{n}", "parentId": last, "type": "function_call_result", "name": tool, "callId": call_id,
                            "status": "completed", "output": {"type": "text", "text": out}})
            last = f"r{r}.{n}"
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def _bash(call_id: str, command: str, stdout: str | None) -> tuple:
    """A Bash call and the text the model got for it (None: no result yet, the call is running)."""
    out = None if stdout is None else f"Command: {command}\nStdout: {stdout}\nStderr: (empty)\nExit Code: 0\nSignal: (none)"
    return (call_id, "Bash", {"command": command, "description": "show"}, out)


def test_codebuddy_credits_the_shell_reads_just_before_a_call_once(tmp_path: Path) -> None:
    t = tmp_path / "s.jsonl"
    a, b = "/p/a.py", "/p/b.py"
    rounds = [[_bash("c1", f"cat {a}", "A\n"), _bash("c2", f"sed -n '2,3p' {b}", "x\ny\n")],
              [("c3", "Edit", {"file_path": a}, "Successfully edited")],
              [("c4", "Read", {"file_path": b}, None), _bash("c5", f"cat {a}", None)]]
    _cb_transcript(t, rounds)
    got = codebuddy.earlier_shell_reads(str(t), "c4", None)
    assert got == [("c1", Ask(a, reader="shell"), "A"), ("c2", Ask(b, 2, 3, reader="shell"), "x\ny")]
    assert codebuddy.earlier_shell_reads(str(t), "c5", None) == [], "only the response's first Read/Bash credits"
    assert codebuddy.earlier_shell_reads(str(t), "c3", None) == [], "Edit's hook does not credit"
    assert codebuddy.earlier_shell_reads(str(t), "c2", None) == []
    # a response whose first call credited: the next one takes only what came after it
    rounds.append([_bash("c6", f"cat {b}", None)])
    rounds[2][1] = _bash("c5", f"cat {a}", "A2\n")
    rounds[2][0] = ("c4", "Read", {"file_path": b}, "   1\u2192x")
    _cb_transcript(t, rounds)
    assert codebuddy.earlier_shell_reads(str(t), "c6", None) == [("c5", Ask(a, reader="shell"), "A2")]


@pytest.mark.parametrize("out", [
    "Command: cat /p/a.py\nStdout: A\n\nStderr: boom\nExit Code: 0\nSignal: (none)",
    "Command: cat /p/a.py\nStdout: A\n\nStderr: (empty)\nExit Code: 1\nSignal: (none)",
    "Command: cat /p/a.py\nStdout: (empty)\nStderr: (empty)\nExit Code: 0\nSignal: (none)",
    "Command: cat /p/b.py\nStdout: A\n\nStderr: (empty)\nExit Code: 0\nSignal: (none)",
    "<persisted-output>\nOutput too large (43.9KB). Full output saved to: /t/x.txt\n</persisted-output>",
    "Command: cat /p/a.py\nStdout: A\n\nStderr: (empty)\nExit Code: 0\nSignal: (none)\n\nSandbox Intercept Info (non-blocking):",
    "Error: [unchanged] a.py 1 lines",
])
def test_codebuddy_output_not_of_a_clean_run_is_not_credited(tmp_path: Path, out: str) -> None:
    t = tmp_path / "s.jsonl"
    _cb_transcript(t, [[("c1", "Bash", {"command": "cat /p/a.py"}, out)], [_bash("c2", "cat /p/a.py", None)]])
    assert codebuddy.earlier_shell_reads(str(t), "c2", None) == []


def test_codebuddy_the_chain_ends_at_anything_but_calls_and_results(tmp_path: Path) -> None:
    """A compaction's summary, a new prompt, a broken chain or a line that is not JSON: nothing above it counts."""
    t = tmp_path / "s.jsonl"
    _cb_transcript(t, [[_bash("c1", "cat /p/a.py", "A\n")], [_bash("c2", "cat /p/a.py", None)]])
    lines = t.read_text().splitlines()
    summary = {"id": "u1", "parentId": None, "type": "message", "role": "user", "content": [{"type": "input_text", "text": "<conversation_history_summary>"}]}
    moved = json.loads(lines[-1])
    moved["parentId"] = "u1"
    t.write_text("\n".join([*lines[:-1], json.dumps(summary), json.dumps(moved)]) + "\n")
    assert codebuddy.earlier_shell_reads(str(t), "c2", None) == []
    t.write_text("\n".join([*lines[:-2], "{not json", *lines[-1:]]) + "\n")
    assert codebuddy.earlier_shell_reads(str(t), "c2", None) == []
    t.write_text("\n".join([lines[0], *lines[2:]]) + "\n")  # the first response's entry is gone
    assert codebuddy.earlier_shell_reads(str(t), "c2", None) == []
    assert codebuddy.earlier_shell_reads(str(tmp_path / "missing.jsonl"), "c2", None) == []
    assert codebuddy.earlier_shell_reads("relative.jsonl", "c2", None) == []


@pytest.mark.parametrize("host", ["codebuddy", "droid"])
@pytest.mark.parametrize("tool_input", [
    {"file_path": "small.txt"},
    {"file_path": "/p/a.py", "offset": 0},
    {"file_path": "/p/a.py", "offset": -5},  # Droid: the last lines
    {"file_path": "/p/a.py", "limit": 2.5},
    {"file_path": "/p/a.py", "offset": "3"},
    {"file_path": "/p/a.png", "image_quality": "high"},
    None,
])
def test_reads_the_gate_cannot_pin_down_are_left_alone(host: str, tool_input: object) -> None:
    ev = AGENTS[host].hook_event("PreToolUse", tool_name="Read", tool_input=tool_input, tool_use_id="call_1")
    assert AGENTS[host].builtin_read_ask(ev) is None


@pytest.mark.parametrize("response", [
    "   1\u2192alpha\n   3\u2192gamma",          # a number skipped
    "  1\u2192alpha",                            # another width
    "Offset 601 is beyond file end (total lines: 600)",
    '<system-reminder data-role="tool-hint">Warning: the file exists but is shorter than the provided offset (1).</system-reminder>',
    {"type": "image"},
    "",
])
def test_codebuddy_output_of_another_shape_is_not_credited(response: object) -> None:
    ev = codebuddy.AGENT.hook_event("PostToolUse", tool_name="Read", tool_input={"file_path": "/p/a.txt"}, tool_use_id="c1")
    assert codebuddy.AGENT.builtin_read_delivery(ev, {"tool_response": response}) is None


@pytest.mark.parametrize("tool_input,response", [
    ({"file_path": "/p/a.txt"}, "a\n\n<system-reminder>[Showing lines 1-660 of 1051 total lines, truncated to 60k characters]</system-reminder>"),
    ({"file_path": "/p/a.txt", "offset": 3}, "x\n\n<system-reminder>[Showing lines 4-4 of 9 total lines]</system-reminder>"),
    ({"file_path": "/p/a.txt", "offset": 3}, "x\ny\n\n<system-reminder>[Showing lines 3-3 of 9 total lines]</system-reminder>"),
    ({"file_path": "/p/a.txt", "limit": 1}, "x\ny"),  # more lines than asked for
    ({"file_path": "/p/a.txt"}, ["not", "text"]),
])
def test_droid_output_of_another_shape_is_not_credited(tool_input: dict, response: object) -> None:
    ev = droid.AGENT.hook_event("PostToolUse", tool_name="Read", tool_input=tool_input, tool_use_id="c1")
    assert droid.AGENT.builtin_read_delivery(ev, {"tool_response": response}) is None


@pytest.mark.parametrize("response", [
    "alpha\n\n[Process exited with code 1]",
    "Command completed successfully",
    "alpha\n\nFull command output saved to: /x.log (44KB)",
])
def test_droid_execute_output_of_another_shape_is_not_credited(response: str) -> None:
    ev = droid.AGENT.hook_event("PostToolUse", tool_name="Execute", tool_input={"command": "cat a.txt", "summary": "Show"},
                                tool_use_id="c1", cwd="/p")
    assert droid.AGENT.builtin_read_delivery(ev, {"tool_response": response}) is None


# --- Droid's call ids, from the session's transcript ---------------------------------------
SNAPSHOTS = json.loads((PAYLOADS / "droid" / "builtin" / "transcript-at-pre.json").read_text())


def at_pre(tmp_path: Path, c: dict, name: str | None = None) -> dict:
    """The recorded payload, its transcript as it stood when the hook ran, at a path of this test."""
    pre = dict(c["pre"])
    path = tmp_path / (name or f"{pre['session_id']}.jsonl")
    lines = c["transcript_at_pre"].split("\n")
    path.write_text("\n".join(lines[1:]))  # the recording kept a tail: its first line may be cut
    pre["transcript_path"] = str(path)
    return pre


def test_droid_finds_the_models_call_id_in_its_transcript(tmp_path: Path) -> None:
    reads = [c for c in SNAPSHOTS if c["pre"]["tool_name"] == "Read"]
    assert len(reads) == 2  # the second after the first was answered: a call of the same input
    for c in reads:
        pre = at_pre(tmp_path, c)
        assert droid.AGENT.normalize("PreToolUse", pre).tool_use_id == c["call_id"]
        # the same call's post-tool payload finds it too: its result is written after the hook
        assert droid.AGENT.normalize("PostToolUse", {**pre, "hook_event_name": "PostToolUse"}).tool_use_id == c["call_id"]


def test_droid_without_one_matching_pending_call_there_is_no_call_id(tmp_path: Path) -> None:
    c = next(c for c in SNAPSHOTS if c["pre"]["tool_name"] == "Read")
    pre = at_pre(tmp_path, c)
    path = Path(pre["transcript_path"])
    text = path.read_text()
    use = {"type": "tool_use", "id": c["call_id"], "name": "Read", "input": pre["tool_input"]}

    def tool_id(event: str = "PreToolUse", **changes) -> str | None:
        return droid.AGENT.normalize(event, {**pre, **changes, "hook_event_name": event}).tool_use_id

    assert tool_id(tool_input={"file_path": pre["tool_input"]["file_path"], "limit": 3}) is None, "another input"
    assert tool_id(session_id="other-session") is None, "a transcript not named after the session"
    # the call answered already: a hook for it now is not this call's
    path.write_text(text + "\n" + json.dumps({"type": "message", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": c["call_id"], "content": "x"}]}}) + "\n")
    assert tool_id() is None
    # ...but after the call Droid may have written its result before the post-tool hook runs
    assert tool_id("PostToolUse") == c["call_id"]
    # two identical calls pending in one message: which one runs cannot be told
    twice = {"type": "message", "message": {"role": "assistant", "content": [use, {**use, "id": "call_other"}]}}
    path.write_text(text + "\n" + json.dumps(twice) + "\n")
    assert tool_id() is None and tool_id("PostToolUse") is None
    # a later assistant message without tool calls: nothing is pending
    path.write_text(text + "\n" + json.dumps({"type": "message", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "done"}]}}) + "\n")
    assert tool_id() is None
    # a transcript reached through a symlink is not read
    path.write_text(text)
    link = tmp_path / "links" / path.name
    link.parent.mkdir()
    link.symlink_to(path)
    assert tool_id(transcript_path=str(link)) is None
    assert tool_id() == c["call_id"]


@pytest.mark.parametrize("host", ["codebuddy", "droid"])
def test_a_refusal_is_the_hosts_deny_with_the_text_as_its_reason(host: str) -> None:
    """Verified on both CLIs: the model gets `Error: <reason>` as the call's result."""
    ev = AGENTS[host].hook_event("PreToolUse", tool_name="Read", tool_input={"file_path": "/p/a"}, tool_use_id="c1")
    out = json.loads(AGENTS[host].builtin_refusal_output(ev, "[unchanged] a 3 lines"))
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert out["hookSpecificOutput"]["permissionDecisionReason"] == "[unchanged] a 3 lines"
    assert AGENTS[host].builtin_again_output(ev, None) == "", "asked again, the read must simply run"


# --- the whole path: the real hook processes and a real daemon; the test process is the host ---
import subprocess  # noqa: E402
import sys  # noqa: E402

from tests.cache.test_service_support import start_daemon, stop_any_daemon, subprocess_env  # noqa: E402

HOOK = [sys.executable, "-c", "from leanctx.hooks import run; run()"]
FLAGS = ("--read-gate", "--builtin-read")


def run_hook(env: dict, host: str, event: str, payload: dict, *flags: str) -> str:
    cmd = " ".join([*(f"'{w}'" for w in HOOK), host, event, *flags])
    proc = subprocess.run(["/bin/sh", "-c", cmd], input=json.dumps(payload).encode(), env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


class HostSession:
    """A CodeBuddy or Droid session as its hooks (and, for Droid, its transcript) show it. Each
    call's output is made the way the host makes it (the shapes recorded above)."""

    def __init__(self, env: dict, host: str, proj: Path, conv: str) -> None:
        self.env, self.host, self.proj, self.conv, self.n = env, host, proj, conv, 0
        self.transcript = proj.parent / f"{conv}.jsonl"
        self.transcript.write_text("")
        self.base = {"session_id": conv, "transcript_path": str(self.transcript), "cwd": str(proj)}
        run_hook(env, host, "SessionStart", {**self.base, "hook_event_name": "SessionStart", "source": "startup"})

    def _log(self, role: str, block: dict) -> None:
        if self.host == "codebuddy":  # its own shape: calls under the response's id, results chained
            last = getattr(self, "last", None)
            if role == "assistant":
                entry = {"id": f"resp_{block['id']}", "parentId": last, "type": "function_call", "callId": block["id"],
                         "name": block["name"], "arguments": json.dumps(block["input"])}
            else:
                entry = {"id": f"res_{block['tool_use_id']}", "parentId": last, "type": "function_call_result",
                         "name": self.tool, "callId": block["tool_use_id"], "status": "completed",
                         "output": {"type": "text", "text": block["content"]}}
            self.last = entry["id"]
            with open(self.transcript, "a") as f:
                f.write(json.dumps(entry) + "\n")
            return
        with open(self.transcript, "a") as f:
            f.write(json.dumps({"type": "message", "message": {"role": role, "content": [block]}}) + "\n")

    def call(self, tool: str, tool_input: dict, output) -> str:  # noqa: ANN001 - output: () -> str
        self.n += 1
        call = f"call_{self.conv}_{self.n:04d}"  # a model's ids never repeat
        ids = {"tool_use_id": call} if self.host == "codebuddy" else {}
        self.tool = tool
        self._log("assistant", {"type": "tool_use", "id": call, "name": tool, "input": tool_input})
        pre = {**self.base, **ids, "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input}
        out = run_hook(self.env, self.host, "PreToolUse", pre, *FLAGS)
        if out:
            answer = json.loads(out)["hookSpecificOutput"]
            assert answer["permissionDecision"] == "deny"
            text = "Error: " + answer["permissionDecisionReason"]
        else:
            text = output()
            assert run_hook(self.env, self.host, "PostToolUse", {**pre, "hook_event_name": "PostToolUse", "tool_response": text},
                            "--builtin-read") == ""
        self._log("user", {"type": "tool_result", "tool_use_id": call, "content": text})
        return text

    def read(self, path: Path, **window: int) -> str:
        def output() -> str:
            pieces = path.read_text().split("\n")
            start = window.get("offset", 1)
            shown = pieces[start - 1:start - 1 + window.get("limit", 2000)]
            if self.host == "codebuddy":
                return "\n".join(f"{start + i:4d}\u2192{p}" for i, p in enumerate(shown))
            text = "\n".join(shown)
            end = start + len(shown) - 1
            if start > 1 or end < len(pieces):
                text += f"\n\n<system-reminder>[Showing lines {start}-{end} of {len(pieces)} total lines]</system-reminder>"
            return text

        return self.call("Read", {"file_path": str(path), **window}, output)

    def shell(self, command: str) -> str:
        def output() -> str:
            ran = subprocess.run(["sh", "-c", command], cwd=self.proj, capture_output=True, text=True, timeout=30)
            if self.host == "codebuddy":
                return (f"Command: {command}\nStdout: {ran.stdout or '(empty)'}\nStderr: {ran.stderr or '(empty)'}\n"
                        f"Exit Code: {ran.returncode}\nSignal: (none)")
            return ran.stdout + f"\n\n[Process exited with code {ran.returncode}]"

        tool_input = {"command": command, "summary": "Show the file"} if self.host == "droid" else {"command": command}
        return self.call("Execute" if self.host == "droid" else "Bash", tool_input, output)


@pytest.fixture
def daemon(home: Path, data_dir: Path, tmp_path: Path):
    env = subprocess_env(home, data_dir)
    proc = start_daemon(env, tmp_path / "daemon.log")
    yield env
    proc.terminate()
    proc.wait(20)
    stop_any_daemon(data_dir)


@pytest.mark.parametrize("host", ["codebuddy", "droid"])
def test_a_read_re_read_is_refused_and_asking_again_gives_the_content(host: str, daemon: dict, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    f = proj / "mod.py"
    f.write_text("".join(f"def g{i}():\n    return {i}\n\n" for i in range(100)))
    s = HostSession(daemon, host, proj, "sess-1")
    assert "def g99" in s.read(f)
    stub = s.read(f)
    assert stub.startswith("Error: [unchanged] mod.py 300 lines") and "read it again right away" in stub, stub
    assert "def g99" in s.read(f), "asking again right after the stub gave no content"
    assert s.read(f, offset=10, limit=20).startswith("Error: [unchanged] mod.py L10-29 of 300 lines")
    # a new session never inherits it
    assert "def g99" in HostSession(daemon, host, proj, "sess-2").read(f)


def test_droid_shell_reads_count_for_read_and_the_other_way_round(daemon: dict, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    f = proj / "mod.py"
    f.write_text("".join(f"def g{i}():\n    return {i}\n\n" for i in range(100)))
    s = HostSession(daemon, "droid", proj, "sess-1")
    assert "def g99" in s.shell("cat mod.py")
    assert s.shell("sed -n '5,40p' mod.py").startswith("Error: [unchanged] mod.py L5-40 of 300 lines")
    assert s.read(f).startswith("Error: [unchanged] mod.py 300 lines"), "what cat delivered did not count for Read"
    s2 = HostSession(daemon, "droid", proj, "sess-2")
    assert "def g99" in s2.read(f)
    assert s2.shell(f"cat -n {f}").startswith("Error: [unchanged] mod.py 300 lines"), "what Read delivered did not count for cat"


def test_codebuddy_shell_reads_are_credited_by_the_next_call(daemon: dict, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    f = proj / "mod.py"
    f.write_text("".join(f"def g{i}():\n    return {i}\n\n" for i in range(100)))
    s = HostSession(daemon, "codebuddy", proj, "sess-1")
    assert "def g99" in s.shell(f"cat {f}")
    assert s.shell(f"cat {f}").startswith("Error: [unchanged] mod.py 300 lines"), "what cat delivered was not credited"
    assert "def g99" in s.shell(f"cat {f}"), "running the command again right after the stub gave no output"
    assert s.read(f).startswith("Error: [unchanged] mod.py 300 lines"), "what cat delivered did not count for Read"
    assert "def g99" in s.shell("cat mod.py"), "a relative path outside the host's own folder was gated"


def test_droid_an_odd_transcript_gives_no_call_id_and_no_error(tmp_path: Path) -> None:
    path = tmp_path / "s1.jsonl"
    use = {"type": "tool_use", "id": "c1", "name": "Read", "input": {"file_path": "/p/a"}}
    odd = [{"message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": ["x"]}]}},
           {"message": {"role": "assistant", "content": [use, {"type": "tool_use", "id": ["c2"], "name": "Read", "input": {"file_path": "/p/a"}}]}}]
    path.write_text("".join(json.dumps(e) + "\n" for e in odd[::-1]))
    assert droid.call_id_from_transcript(str(path), "s1", "Read", {"file_path": "/p/a"}) is None
    path.write_text(json.dumps({"message": {"role": "assistant", "content": [use]}}) + "\n{not json\n")
    assert droid.call_id_from_transcript(str(path), "s1", "Read", {"file_path": "/p/a"}) is None
    path.write_text(json.dumps({"message": {"role": "assistant", "content": [use]}}) + "\n")
    assert droid.call_id_from_transcript(str(path), "s1", "Read", {"file_path": "/p/a"}) == "c1"


def test_codebuddy_a_compaction_in_its_transcript_counts_once_before_the_next_read(tmp_path: Path) -> None:
    """CodeBuddy's automatic compaction fires SessionStart(compact) without waiting for it: the
    summary entry it writes to the transcript is counted by the next read's hook, once."""
    from leanctx.hooks import publish

    t = tmp_path / "sess-1.jsonl"
    _cb_transcript(t, [[_bash("c1", "cat /p/a.py", "A\n")]])
    summary = {"id": "sum-1", "logicalParentId": "r0.0", "type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "<conversation_history_summary>...</conversation_history_summary>"}],
               "providerData": {"compactType": "emergency-auto", "isCompacted": True, "isSummary": True, "agent": "cli"}}
    quoted = {"id": "r9", "parentId": "r0.0", "type": "function_call_result", "name": "Bash", "callId": "c9", "status": "completed",
              "output": {"type": "text", "text": '"isCompacted":true'}}
    with open(t, "a") as f:
        f.write(json.dumps(quoted, separators=(",", ":")) + "\n")
    assert codebuddy.compactions_in(str(t)) == [], "a tool output that quotes the mark is no compaction"
    with open(t, "a") as f:
        f.write(json.dumps(summary, separators=(",", ":")) + "\n")
    assert codebuddy.compactions_in(str(t)) == ["sum-1"]
    ev = codebuddy.AGENT.hook_event("PreToolUse", tool_name="Bash", tool_input={"command": "cat /p/a.py"}, tool_use_id="c2",
                                    session_id="sess-1", conversation_id="sess-1", transcript_path=str(t))
    data = tmp_path / "data"
    path = publish.record_path(data, "codebuddy", "sess-1")
    before = (publish.read_json(path) or {}).get("compactions", 0)
    for _ in range(2):
        publish.note_losses(data, ev, codebuddy.AGENT.context_losses(ev))
    rec = publish.read_json(path)
    assert rec["compactions"] == before + 1 and rec["losses_seen"] == ["sum-1"]


def test_codebuddy_a_transcript_of_another_shape_credits_nothing_and_never_raises(tmp_path: Path) -> None:
    t = tmp_path / "s.jsonl"
    _cb_transcript(t, [[_bash("c1", "cat /p/a.py", "A\n")], [_bash("c2", "cat /p/a.py", None)]])
    lines = [json.loads(x) for x in t.read_text().splitlines()]
    for at, field, value in ((2, "parentId", ["x"]), (1, "callId", {"a": 1}), (1, "arguments", 7), (2, "output", ["A"]),
                             (1, "name", None), (2, "callId", ["c1"]), (3, "parentId", {"r0.0": 1})):
        odd = [dict(e) for e in lines]
        odd[at][field] = value  # 1: the first response's call, 2: its result, 3: the asking call
        t.write_text("".join(json.dumps(e) + "\n" for e in odd))
        assert codebuddy.earlier_shell_reads(str(t), "c2", None) == [], field
