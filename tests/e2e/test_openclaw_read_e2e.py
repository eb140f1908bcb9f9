"""The read cache through the real OpenClaw gateway (2026.9.6), offline: two Telegram users (a fake
Bot API), a fake model that calls ctx_read for a message `read FILE` and answers with the first
line of what the tool returned, and `leanctx init --agent openclaw` (MCP server + plugin).

One gateway process serves both people, and OpenClaw runs MCP servers through a supervisor of its
own with no id for the call; what is asserted is what each person's model got:
- the MCP entry loads and the model reaches ctx_read as `leanctx__ctx_read` (behind OpenClaw's
  Tool Search: `tool_search` finds it, `tool_call` runs it);
- a person's second read of an unchanged file is the `[unchanged]` stub, the first the content;
- the other person's first read of the same file is the content (the stub is only for what that
  conversation received), then their own stub;
- after `/new` (same session id, transcript emptied) the next read is the content again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.fake_echo_chat import message_text, tool_result_text
from tests.e2e.openclaw_harness import OpenClawHarness, problem
from tests.e2e.test_openclaw_e2e import leanctx

pytestmark = pytest.mark.e2e

WHY = problem()
if WHY:
    pytest.skip(f"OpenClaw cannot run here: {WHY}", allow_module_level=True)

A, B = 1001, 1002
FILE = "notes.txt"
FIRST = "first line of the notes"
BODY = FIRST + "\n" + "".join(f"line {i} of the notes file, kept unchanged\n" for i in range(120))
TOOL = "leanctx__ctx_read"


@pytest.fixture
def gw(tmp_path: Path):
    h = OpenClawHarness(tmp_path, read_tool="__ctx_read")
    proc = leanctx(h, "init", "--agent", "openclaw")
    assert proc.returncode == 0, proc.stderr
    (h.workspace / FILE).write_text(BODY)
    h.start()
    yield h
    h.stop()


def read(h: OpenClawHarness, user: int) -> str:
    """`read notes.txt` from `user`; what ctx_read returned, as the model got it in its next request."""
    before = len(h.model_requests())
    h.send(user, f"read {FILE}")
    reply = h.reply(user, timeout=180)
    results = []
    seen = {m.get("tool_call_id") for body in h.model_requests()[:before] for m in body.get("messages") or []
            if isinstance(m, dict) and m.get("role") == "tool"}  # results of earlier turns, which requests repeat
    for body in h.model_requests()[before:]:
        msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        calls = {c["id"]: c["function"] for m in msgs if m.get("role") == "assistant" for c in m.get("tool_calls") or []}
        for m in msgs:
            fn = calls.get(m.get("tool_call_id")) or {}
            if m.get("role") == "tool" and m.get("tool_call_id") not in seen and fn.get("name") == "tool_call" and json.loads(fn["arguments"]).get("id") == TOOL:
                results.append((m.get("tool_call_id"), tool_result_text(message_text(m))))
    got = list(dict.fromkeys(results))  # each request of the turn repeats its earlier results
    assert len(got) == 1, (reply, got)
    text = got[0][1]
    assert reply == f"reply to: read {FILE}: {text.split(chr(10), 1)[0]}"  # the model answered from it
    return text


def is_stub(text: str) -> bool:
    return text.startswith(f"[unchanged] {FILE}") and len(text) < len(BODY) // 10


def test_ctx_read_reaches_the_model_and_stubs_only_what_that_conversation_holds(gw: OpenClawHarness) -> None:
    h = gw
    first_a = read(h, A)
    assert first_a == BODY
    # OpenClaw defers MCP tools behind Tool Search: found under this exact name, called via tool_call
    tools = [t["function"]["name"] for t in h.model_requests()[0]["tools"]]
    assert "tool_search" in tools and "tool_call" in tools
    assert h.model.read_tool_names == [TOOL]
    second_a = read(h, A)
    assert is_stub(second_a), second_a
    # B, on the same gateway process, never got the file: content, then B's own stub
    assert read(h, B) == BODY
    assert is_stub(read(h, B))
    assert is_stub(read(h, A))  # A's holdings untouched by B's reads
    sessions = h.sessions()
    assert len(set(sessions.values())) == 2
    # `/new`: the same session id, an empty transcript: the next read is the content again
    before = sessions[f"agent:main:telegram:direct:{A}"]
    h.send(A, "/new")
    h.reply(A)
    h.settle()
    assert h.sessions()[f"agent:main:telegram:direct:{A}"] == before
    assert read(h, A) == BODY
    assert is_stub(read(h, A))
    assert is_stub(read(h, B))  # B's conversation kept what it holds
    assert h.model.read_tool_names == [TOOL] * 8
