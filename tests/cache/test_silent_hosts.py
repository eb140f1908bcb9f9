"""Hosts that drop context with no hook leanctx receives (cache/scope.py SILENT_COMPACTION):
Windsurf has no compaction or session-start event at all, Kiro CLI compacts without one. A
conversation of theirs is known (its record names the host process), and still every re-read is
sent in full: a stub needs proof the context holds the bytes, and nothing here can give it."""

from __future__ import annotations

import json

import pytest

from bench.support.oracle import publish_event
from leanctx.cache.scope import SILENT_COMPACTION
from tests.conftest import REPO

from .conftest import World, code

DOC = REPO / "tests" / "fixtures" / "documented"


@pytest.mark.parametrize(("agent", "event", "fixture"), [
    ("windsurf", "pre_user_prompt", "windsurf/pre_user_prompt.json"),
    ("kiro", "userPromptSubmit", "kiro/userPromptSubmit.session_id.json"),
])
def test_a_known_conversation_of_a_silent_host_never_gets_a_stub(world: World, agent: str, event: str, fixture: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    world.write("src/app.py", code(120))
    host = world.host(agent)
    monkeypatch.chdir(world.root)  # a Windsurf hook runs in the workspace root
    body = dict(json.loads((DOC / fixture).read_text()), **({"cwd": str(world.root)} if agent == "kiro" else {}))
    assert publish_event(str(world.data), agent, event, body, host.as_host(), world.t)
    conn = world.conn(host)
    scope = world.scope(conn)
    assert scope.agent == agent and not scope.stub_ok and scope.reason == SILENT_COMPACTION[agent]
    assert [world.read(conn, "src/app.py")["kind"] for _ in range(3)] == ["full", "full", "full"]


def test_the_same_reads_under_claude_code_do_get_a_stub(world: World) -> None:
    """The control: the world above does serve stubs where the host reports its compactions."""
    world.write("src/app.py", code(120))
    host = world.host("claude")
    world.session(host, "s1")
    conn = world.conn(host, env={"CLAUDE_CODE_SESSION_ID": "s1"})
    assert [world.read(conn, "src/app.py")["kind"] for _ in range(2)] == ["full", "stub"]
