"""GitHub Copilot CLI's built-in readers (`view`, `bash`) under the read cache: which model call a
hook payload stands for, read from Copilot's session log, and what each call gave the model.

Recorded from the real CLI 1.0.102 (tests/fixtures/payloads/copilot/builtin/): one session whose
fake model viewed a file, a range, then three calls in one response (two identical views and a
`cat -n`), a `cat`, a view our tap refused, and a subagent that viewed a file. `hooks.jsonl` holds
every preToolUse/postToolUse payload in the order Copilot ran the hooks, `events.jsonl` Copilot's
session log (its system prompt and usage lines left out), `model_outputs.json` what the model got
per call id."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from leanctx.agents import copilotlog
from tests.conftest import PAYLOADS

RECORDED = PAYLOADS / "copilot" / "builtin"
SESSION = "4eff9077-5747-4336-8fed-7664aa0e7cb9"
HOOKS = [json.loads(line) for line in (RECORDED / "hooks.jsonl").read_text().splitlines()]
LOG = (RECORDED / "events.jsonl").read_bytes()
OUTPUTS = json.loads((RECORDED / "model_outputs.json").read_text())


def config_dir(tmp_path: Path, log: bytes = LOG) -> str:
    folder = tmp_path / "session-state" / SESSION
    folder.mkdir(parents=True)
    (folder / "events.jsonl").write_bytes(log)
    return str(tmp_path)


def tool_payloads(event: str | None = None) -> list[dict]:
    return [h["payload"] for h in HOOKS if h["event"] in ("preToolUse", "postToolUse") and event in (None, h["event"])]


# the id every recorded payload stands for, in the order Copilot ran the hooks; None: not ours to say
EXPECTED = [
    ("preToolUse", "call_view_a"), ("postToolUse", "call_view_a"),
    ("preToolUse", "call_view_range"), ("postToolUse", "call_view_range"),
    ("preToolUse", None), ("preToolUse", "call_par_bash"), ("preToolUse", None),  # two identical views in one response
    ("postToolUse", None), ("postToolUse", None), ("postToolUse", "call_par_bash"),
    ("preToolUse", "call_bash_a"), ("postToolUse", "call_bash_a"),
    ("preToolUse", "call_denied"),
    ("preToolUse", "call_task"),
    ("preToolUse", None), ("postToolUse", None),  # the subagent: its payloads name its own session
    ("postToolUse", "call_task"),
]


def test_each_recorded_payload_finds_its_own_call(tmp_path: Path) -> None:
    base = config_dir(tmp_path)
    got = [(h["event"], copilotlog.call_id(h["event"], h["payload"], base, wait_s=0))
           for h in HOOKS if h["event"] in ("preToolUse", "postToolUse")]
    assert got == EXPECTED
    # and the model got each found call's answer under that very id
    for h in HOOKS:
        p = h["payload"]
        if h["event"] == "postToolUse" and (found := copilotlog.call_id("postToolUse", p, base, wait_s=0)):
            assert OUTPUTS[found] == p["toolResult"]["textResultForLlm"]


def test_the_hooks_line_may_be_stamped_a_moment_after_its_payload(tmp_path: Path) -> None:
    """Copilot 1.0.102 stamps the preToolUse hook.start line a millisecond after the payload at
    times (seen in runs; a subagent's 5-10 ms): still this hook's own line. A line stamped before
    the payload is an earlier response's; one far later is not waited for."""
    base = config_dir(tmp_path)
    first = tool_payloads("preToolUse")[0]
    for shift, want in ((0, "call_view_a"), (-1, "call_view_a"), (-copilotlog.PRE_SLACK_MS, "call_view_a"),
                        (1, None), (-copilotlog.PRE_SLACK_MS - 1, None)):
        payload = dict(first, timestamp=first["timestamp"] + shift)
        assert copilotlog.call_id("preToolUse", payload, base, wait_s=0) == want, shift


def test_subagent_payloads_name_their_own_session_and_agent() -> None:
    sub = [p for p in tool_payloads() if p.get("agentId")]
    assert sub and all(p["sessionId"] == p["agentId"] != SESSION for p in sub)


def log_lines_before(predicate) -> bytes:
    """The log as it was on disk before the first line matching `predicate` was written."""
    lines = LOG.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if predicate(json.loads(line)))
    return b"".join(lines[:cut])


def is_pre_hook_of(call: str):
    def match(entry: dict) -> bool:
        calls = (entry["data"].get("input") or {}).get("toolCalls") or []
        return entry["type"] == "hook.start" and any(c.get("id") == call for c in calls)
    return match


def test_a_log_behind_the_hook_never_gives_an_earlier_calls_id(tmp_path: Path) -> None:
    """Copilot writes its log behind its hooks. The third response views a.txt again, exactly as
    the first did; while its own hook.start line is not on disk the first call still looks
    unfinished there (its tool.execution_complete not written yet either): that call's id must not
    be taken for this one's."""
    stale = log_lines_before(lambda e: e["type"] == "tool.execution_complete" and e["data"]["toolCallId"] == "call_view_a")
    base = config_dir(tmp_path, stale)
    third = [p for p in tool_payloads("preToolUse")][2]
    assert third["toolArgs"] == tool_payloads("preToolUse")[0]["toolArgs"]
    assert copilotlog.call_id("preToolUse", third, base, wait_s=0) is None
    # nor does a postToolUse payload of it take the earlier call's id
    post = tool_payloads("postToolUse")[2]
    assert post["toolArgs"] == third["toolArgs"] and copilotlog.call_id("postToolUse", post, base, wait_s=0) is None


def test_the_hook_waits_for_its_own_line(tmp_path: Path) -> None:
    """The hook's line lands after it started: it is waited for, and then the id is the call's."""
    early = log_lines_before(is_pre_hook_of("call_bash_a"))
    base = config_dir(tmp_path, early)
    log = Path(base) / "session-state" / SESSION / "events.jsonl"
    pre = next(p for p in tool_payloads("preToolUse") if p["toolArgs"].get("command") == "cat a.txt")
    assert copilotlog.call_id("preToolUse", pre, base, wait_s=0) is None
    written = threading.Event()

    def write_rest() -> None:
        with open(log, "ab") as f:
            f.write(LOG[len(early):])
        written.set()

    timer = threading.Timer(0.05, write_rest)
    timer.start()
    try:
        assert copilotlog.call_id("preToolUse", pre, base, wait_s=30) == "call_bash_a"
        assert written.is_set()
    finally:
        timer.cancel()


def test_a_half_written_last_line_is_not_read(tmp_path: Path) -> None:
    lines = LOG.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if is_pre_hook_of("call_bash_a")(json.loads(line)))
    base = config_dir(tmp_path, b"".join(lines[:at]) + lines[at][:-1])  # no newline yet
    pre = next(p for p in tool_payloads("preToolUse") if p["toolArgs"].get("command") == "cat a.txt")
    assert copilotlog.call_id("preToolUse", pre, base, wait_s=0) is None


@pytest.mark.parametrize("change", [
    {"agentId": "sub-1"},
    {"timestamp": None}, {"timestamp": True}, {"timestamp": "1796189656150"},
    {"sessionId": "../x"}, {"sessionId": "a/b"}, {"sessionId": ".."}, {"sessionId": None},
    {"toolArgs": "cat a.txt"},
    {"toolArgs": {"path": "/home/user/work/proj/other.txt"}},
    {"timestamp": 1},
])
def test_payloads_that_name_no_call_of_the_log(tmp_path: Path, change: dict) -> None:
    base = config_dir(tmp_path)
    pre = dict(tool_payloads("preToolUse")[0], **change)
    post = dict(tool_payloads("postToolUse")[0], **change)
    assert copilotlog.call_id("preToolUse", pre, base, wait_s=0) is None
    assert copilotlog.call_id("postToolUse", post, base, wait_s=0) is None


def test_only_a_regular_log_file_is_read(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real_base = config_dir(real)
    linked = tmp_path / "linked" / "session-state" / SESSION
    linked.mkdir(parents=True)
    os.symlink(Path(real_base) / "session-state" / SESSION / "events.jsonl", linked / "events.jsonl")
    pre = tool_payloads("preToolUse")[0]
    assert copilotlog.call_id("preToolUse", pre, real_base, wait_s=0) == "call_view_a"
    assert copilotlog.call_id("preToolUse", pre, str(tmp_path / "linked"), wait_s=0) is None
    fifo = tmp_path / "fifo" / "session-state" / SESSION
    fifo.mkdir(parents=True)
    os.mkfifo(fifo / "events.jsonl")
    assert copilotlog.call_id("preToolUse", pre, str(tmp_path / "fifo"), wait_s=0) is None
    # no log at all (yet): waited for, then nothing
    assert copilotlog.call_id("preToolUse", pre, str(tmp_path / "none"), wait_s=0) is None


def test_no_session_folder_is_not_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session Copilot never made (doctor's smoke run) has no folder: nothing to wait for. A
    folder without its log yet is waited for (Copilot writes the file lazily)."""
    def no_sleep(_s: float) -> None:
        raise AssertionError("waited for a log of a session that does not exist")

    monkeypatch.setattr(copilotlog.time, "sleep", no_sleep)
    pre = tool_payloads("preToolUse")[0]
    assert copilotlog.call_id("preToolUse", pre, str(tmp_path), wait_s=30) is None
    (tmp_path / "session-state" / SESSION).mkdir(parents=True)
    with pytest.raises(AssertionError, match="waited"):
        copilotlog.call_id("preToolUse", pre, str(tmp_path), wait_s=30)


def test_other_events_and_tools_are_not_asked_for() -> None:
    pre = tool_payloads("preToolUse")[0]
    assert copilotlog.call_id("preMcpToolCall", pre, "/nonexistent", wait_s=0) is None
    assert copilotlog.iso_ms(1796189656150) == "2026-12-02T05:34:16.150Z"


# -- what each call reads, and what it gave the model -----------------------------------------

from leanctx import agents  # noqa: E402
from leanctx.agents.copilot import shell_output_content, view_content  # noqa: E402
from leanctx.readers import Ask  # noqa: E402

COPILOT = agents.get("copilot")
PROJ = "/home/user/work/proj"


def ask_of(payload: dict):
    from leanctx.agents.copilot import _builtin_ask

    return _builtin_ask(payload["toolName"], payload["toolArgs"], payload["cwd"])


@pytest.mark.parametrize(("args", "want"), [
    ({"path": f"{PROJ}/a.txt"}, Ask(f"{PROJ}/a.txt")),
    ({"path": f"{PROJ}/big.txt", "view_range": [3, 5]}, Ask(f"{PROJ}/big.txt", 3, 5)),
    ({"path": f"{PROJ}/big.txt", "view_range": [38, -1]}, Ask(f"{PROJ}/big.txt", 38, None)),
    ({"path": f"{PROJ}/big.txt", "view_range": [35, 100]}, Ask(f"{PROJ}/big.txt", 35, 100)),
    ({"path": f"{PROJ}/./big.txt", "forceReadLargeFiles": True}, Ask(f"{PROJ}/big.txt")),
    # view answers these with an error, or reads what we cannot name: not a gated read
    ({"path": "a.txt"}, None), ({"path": f"{PROJ}/x/../a.txt"}, None),
    ({"path": f"{PROJ}/big.txt", "view_range": [0, 3]}, None), ({"path": f"{PROJ}/big.txt", "view_range": [5, 3]}, None),
    ({"path": f"{PROJ}/big.txt", "view_range": [5]}, None), ({"path": f"{PROJ}/big.txt", "view_range": [5, -2]}, None),
    ({"path": f"{PROJ}/big.txt", "view_range": [5, True]}, None), ({"path": f"{PROJ}/big.txt", "view_range": [1.0, 3]}, None),
    ({"path": f"{PROJ}/big.txt", "view_range": "1,3"}, None), ({"path": f"{PROJ}/big.txt", "forceReadLargeFiles": "yes"}, None),
    ({"path": f"{PROJ}/big.txt", "other": 1}, None),
])
def test_view_arguments(args: dict, want) -> None:
    assert ask_of({"toolName": "view", "toolArgs": args, "cwd": PROJ}) == want


@pytest.mark.parametrize(("args", "want"), [
    ({"command": "cat a.txt", "description": "d"}, Ask(f"{PROJ}/a.txt", reader="shell")),
    ({"command": "cat -n big.txt", "description": "d", "mode": "sync", "initial_wait": 30},
     Ask(f"{PROJ}/big.txt", numbered=True, reader="shell")),
    # returned before its output, or run in a shell made elsewhere: not a plain read
    ({"command": "cat a.txt", "description": "d", "mode": "async"}, None),
    ({"command": "cat a.txt", "description": "d", "shellId": "s1"}, None),
    ({"command": "cat a.txt", "description": "d", "mode": "async", "detach": True}, None),
    ({"command": "cat a.txt | head", "description": "d"}, None),
    ({"command": ["cat", "a.txt"], "description": "d"}, None),
])
def test_bash_arguments(args: dict, want) -> None:
    assert ask_of({"toolName": "bash", "toolArgs": args, "cwd": PROJ}) == want


def test_recorded_deliveries_are_the_files_text() -> None:
    """What the model got (model_outputs.json) stands for exactly the file's lines."""
    files = {"a.txt": "hello world file\n", "big.txt": "".join(f"line {i} of big\n" for i in range(1, 41))}
    seen = {}
    for p in tool_payloads("postToolUse"):
        if p["toolName"] not in ("view", "bash") or p.get("agentId"):
            continue
        ask = ask_of(p)
        text = p["toolResult"]["textResultForLlm"]
        got = view_content(text) if p["toolName"] == "view" else shell_output_content(ask, text)
        seen[json.dumps(p["toolArgs"], sort_keys=True)] = (ask, got)
    from leanctx.cache.readcache import builtin_delivery_matches, window_of

    for ask, got in seen.values():
        text = files[os.path.basename(ask.path)]
        window = window_of(text.count("\n"), ask.start, ask.end)
        assert builtin_delivery_matches(text, window, ask.start, got), (ask, got)
    assert len(seen) == 4  # view whole, view range, cat -n (its first number trimmed by Copilot), cat


@pytest.mark.parametrize("text", [
    "File too large to read at once (20.5 KB). Consider using the grep tool to search within the file, or view "
    "with view_range to read specific sections.",
    "00001 y\n00002 yy\n\n[Output truncated. Use view_range=[3, ...] to continue reading. In your next response, "
    "you may batch this with other view calls. File has at least 2001 lines.]",
    "", None,
])
def test_views_own_notes_are_not_file_text(text) -> None:
    assert view_content(text) is None


SHELL = Ask(f"{PROJ}/a.txt", reader="shell")
NUMBERED = Ask(f"{PROJ}/a.txt", numbered=True, reader="shell")


@pytest.mark.parametrize(("ask", "text", "want"), [
    (SHELL, "hello world file\n<shellId: 1 completed with exit code 0>", "hello world file"),
    (SHELL, "a\n  b\n<shellId: my-shell completed with exit code 0>", "a\n  b"),
    (NUMBERED, "1\tx\n     2\t  y\n<shellId: 0 completed with exit code 0>", "x\n  y"),
    (NUMBERED, "     1\tx\n<shellId: 0 completed with exit code 0>", "x"),
    # a failure, a run not finished, output saved to a file, no output, an odd suffix
    (SHELL, "cat: a.txt: No such file or directory\n<shellId: 15 completed with exit code 1>", None),
    (SHELL, "<command started in background with shellId: 16>", None),
    (SHELL, "Output too large to read at once (20.5 KB). Saved to: /home/user/tmp/x.txt\nConsider using tools "
            "like grep.\n\nPreview (first 500 chars):\n00001 y\n\n<shellId: 3 completed with exit code 0>", None),
    (SHELL, "\n<shellId: 8 completed with exit code 0>", None),
    # a file whose last line reads like the suffix: only Copilot's own, the last one, is taken off
    (SHELL, "x\n<shellId: 1 completed with exit code 0>\n<shellId: 2 completed with exit code 0>",
     "x\n<shellId: 1 completed with exit code 0>"),
    (SHELL, "x\n<shellId: 1> completed with exit code 0>", None),
    (SHELL, "hello world file", None),
    (NUMBERED, "x\n     2\ty\n<shellId: 0 completed with exit code 0>", None),
])
def test_shell_output_as_copilot_hands_it_over(ask, text: str, want) -> None:
    assert shell_output_content(ask, text) == want


def test_trimmed_output_that_is_not_the_files_is_never_credited() -> None:
    """Copilot trims blank space at both ends of a command's output (1.0.102, recorded: a file
    starting with blank lines and an indented line, ending in spaces and blank lines). What is left
    is what the model got; it is not the file's text, so the daemon credits nothing."""
    from leanctx.cache.readcache import builtin_delivery_matches, window_of

    text = "\n\n  lead spaces\ntrail spaces   \n\n\n"
    got = shell_output_content(SHELL, "lead spaces\ntrail spaces\n<shellId: 0 completed with exit code 0>")
    assert got == "lead spaces\ntrail spaces"
    assert not builtin_delivery_matches(text, window_of(text.count("\n"), 1, None), 1, got)
    # recorded `cat -n` of it: the last number's tab trimmed away with the blank line
    cat_n = "1\t\n     2\t\n     3\t  lead spaces\n     4\ttrail spaces   \n     5\t\n     6\n<shellId: 11 completed with exit code 0>"
    assert shell_output_content(Ask("/p/ws.txt", numbered=True, reader="shell"), cat_n) is None


def test_builtin_gate_wiring() -> None:
    """The built-in gate listens on preToolUse (with the guard when both are wired) and credits on
    postToolUse; the read gate stays alone on preMcpToolCall."""
    plain = COPILOT.profile_events(read_gate=True, builtin_read=True)
    assert [(s.name, f) for s, f in plain if s.kind in ("pre_tool", "post_tool")] == [
        ("preMcpToolCall", ("--read-gate",)), ("preToolUse", ("--builtin-read",)), ("postToolUse", ("--builtin-read",))]
    guarded = COPILOT.profile_events(guard=True, read_gate=True, builtin_read=True)
    assert [(s.name, f) for s, f in guarded if s.kind in ("pre_tool", "post_tool")] == [
        ("preToolUse", ("--guard", "--builtin-read")), ("preMcpToolCall", ("--read-gate",)), ("postToolUse", ("--builtin-read",))]
    off = COPILOT.profile_events(read_gate=True, builtin_read=False)
    assert [s.name for s, _ in off if s.kind in ("pre_tool", "post_tool")] == ["preMcpToolCall"]
    assert COPILOT.event("postToolUse").kind == "post_tool" and COPILOT.event("preToolUse").kind == "pre_tool"
