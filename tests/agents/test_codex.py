"""Codex's shell reads, parsed from the payloads Codex 0.171.0 really sent.

tests/e2e/recorded_payloads/codex/shell_reads.json holds, per shell call of one `codex exec` run
(exec_command; apply_patch), the PreToolUse and PostToolUse payloads its hooks got and the
function_call_output the next model request carried. What the gate credits must be what the
model got, byte for byte; what it cannot pin down it leaves alone."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.codex import REFUSAL_END, shell_command
from leanctx.cache.readcache import builtin_delivery_matches, window_of
from leanctx.cache.paths import line_count
from leanctx.readers import Ask

RECORDED = json.loads((Path(__file__).parents[1] / "e2e" / "recorded_payloads" / "codex" / "shell_reads.json").read_text())
CALLS = {c["call_id"]: c for c in RECORDED["calls"]}
CODEX = agents.get("codex")
PROJ = "/home/user/proj"
# the files the recording read (tests/e2e: the recorder wrote them so)
BIG = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
SMALL = "alpha\nbeta\n\tgamma  \n"
FILES = {f"{PROJ}/big.py": BIG, f"{PROJ}/small.txt": SMALL, f"{PROJ}/sub/inner.txt": "inner one\ninner two\n"}


def ask_of(cid: str):
    pre = CALLS[cid]["pre"]
    return CODEX.builtin_read_ask(CODEX.normalize("PreToolUse", pre))


def delivery_of(cid: str):
    post = CALLS[cid]["post"]
    return CODEX.builtin_read_delivery(CODEX.normalize("PostToolUse", post), post)


def credited(ask: Ask, content: str) -> bool:
    """Would the daemon credit `content` for `ask` against the recorded file?"""
    text = FILES[ask.path]
    n = line_count(text)
    start, end = (max(1, n - ask.last + 1), None) if ask.last is not None else (ask.start, ask.end)
    return builtin_delivery_matches(text, window_of(n, start, end), None, content)


def model_body(cid: str) -> str:
    head, sep, body = CALLS[cid]["model_output"].partition("\nOutput:\n")
    assert sep and head.startswith("Chunk ID: ")
    return body


READS = {
    "call_cat": Ask(f"{PROJ}/big.py", reader="shell"),
    "call_sed": Ask(f"{PROJ}/big.py", 1, 80, reader="shell"),
    "call_catn": Ask(f"{PROJ}/small.txt", numbered=True, reader="shell"),
    "call_nl": Ask(f"{PROJ}/small.txt", numbered=True, reader="shell"),
    "call_head": Ask(f"{PROJ}/small.txt", 1, 2, reader="shell"),
    "call_tail": Ask(f"{PROJ}/small.txt", last=2, reader="shell"),
    "call_tailplus": Ask(f"{PROJ}/small.txt", 2, None, reader="shell"),
    # exec_command's `workdir` is not in tool_input: Codex reports it as the payload's cwd
    "call_workdir": Ask(f"{PROJ}/sub/inner.txt", reader="shell"),
}


def test_the_recording_is_what_the_gate_is_built_on() -> None:
    assert RECORDED["host"] == "codex-cli 0.171.0"
    for c in RECORDED["calls"]:
        assert c["pre"]["tool_use_id"] == c["call_id"] and c["pre"]["tool_name"] in ("Bash", "apply_patch")
        assert set(c["pre"]["tool_input"]) == {"command"} and isinstance(c["pre"]["tool_input"]["command"], str)
    assert CALLS["call_workdir"]["pre"]["cwd"] == f"{PROJ}/sub"
    assert "post" not in CALLS["call_deny"]  # refused: no post-tool hook
    assert CALLS["call_deny"]["model_output"].startswith("Command blocked by PreToolUse hook: ")


@pytest.mark.parametrize("cid", sorted(READS))
def test_a_plain_read_names_its_span_and_credits_exactly_what_the_model_got(cid: str) -> None:
    assert ask_of(cid) == READS[cid]
    ask, content = delivery_of(cid)
    assert ask == READS[cid]
    assert credited(ask, content), cid
    # the post-tool hook's output is the model's, after exec_command's header, byte for byte
    assert CALLS[cid]["post"]["tool_response"] == model_body(cid)


def test_an_output_the_model_got_cut_or_changed_is_never_credited() -> None:
    # max_output_tokens: Codex cut it ("Warning: truncated output …" and a middle left out)
    ask, content = delivery_of("call_cut") or (ask_of("call_cut"), None)
    assert content is None or not credited(ask, content)
    # tty: the terminal made every "\n" a "\r\n"
    ask, content = delivery_of("call_tty") or (ask_of("call_tty"), None)
    assert content is None or not credited(ask, content)


def test_what_is_not_a_plain_read_is_left_alone() -> None:
    assert ask_of("call_yield") is None and delivery_of("call_yield") is None  # `sleep 1; cat …`
    patch = CALLS["call_patch"]
    assert "apply_patch" not in CODEX.builtin_read_tools
    assert CODEX.builtin_read_ask(CODEX.normalize("PreToolUse", patch["pre"])) is None


@pytest.mark.parametrize("tool_input,want", [
    ({"command": "cat a.py"}, "cat a.py"),
    ({"command": ["bash", "-lc", "sed -n '1,80p' f"]}, "sed -n '1,80p' f"),  # the older `shell` tool's argv
    ({"command": ["/bin/sh", "-c", "cat a.py"]}, "cat a.py"),
    ({"command": ["cat", "a.py"]}, None),
    ({"command": ["bash", "-lc", "cat a", "x"]}, None),
    ({"command": ["python", "-c", "cat a"]}, None),
    ({"command": "cat a.py", "workdir": "/x"}, None),  # a key 0.171.0 never sends: doubt
    ({"command": 3}, None),
    ({}, None),
    ("cat a.py", None),
])
def test_the_command_is_taken_only_in_the_shapes_codex_sends(tool_input: object, want: str | None) -> None:
    assert shell_command(tool_input) == want


def test_a_several_line_refusal_ends_in_a_line_of_its_own() -> None:
    """Codex 0.171.0 shows "<reason>. Command: <cmd>" with the reason's trailing newlines trimmed."""
    event = CODEX.normalize("PreToolUse", CALLS["call_cat"]["pre"])
    one = json.loads(CODEX.builtin_refusal_output(event, "[unchanged] big.py 600 lines · run it again"))
    assert one["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert one["hookSpecificOutput"]["permissionDecisionReason"] == "[unchanged] big.py 600 lines · run it again"
    diff = "[changed] big.py\n--- a/big.py\n+++ b/big.py\n@@ -1 +1 @@\n-x\n+y\n"
    reason = json.loads(CODEX.builtin_refusal_output(event, diff))["hookSpecificOutput"]["permissionDecisionReason"]
    assert reason == diff.rstrip("\n") + "\n" + REFUSAL_END
    assert CODEX.check_output("PreToolUse", CODEX.builtin_refusal_output(event, diff)) is None
