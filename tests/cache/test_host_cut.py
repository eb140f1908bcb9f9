"""An answer longer than its host hands the model whole is never credited (hostcaps.py): every
host cuts a long tool result (keeps a part, or saves it to a file and shows a preview), so a
stub for a file read that way would point at bytes the model never had."""

from __future__ import annotations

import json

import pytest

from leanctx.cache import hostcaps
from leanctx.cache.scope import Scope

from .conftest import World

HOSTS = ("claude", "codex", "gemini", "qwen", "copilot", "codebuddy", "droid", "cline", "opencode", "cursor", None)


def sized(chars: int, line: int = 40) -> str:
    """ASCII text of exactly `chars` characters as its JSON string (quotes and escapes counted)."""
    body = ("y" * (line - 1) + "\n") * ((chars - 2) // (line + 1))
    return body + "z" * (chars - len(json.dumps(body)))


def scope_of(world: World, agent: str | None, key: str = "conv") -> Scope:
    """A known conversation of `agent`, stubs allowed: what the resolver gives a matched record."""
    return Scope(f"{agent}:{key}", agent, 0, (str(world.root),), True, "", str(world.root))


def reads(world: World, agent: str | None, text: str) -> list[str]:
    world.write("f.txt", text)
    scope = scope_of(world, agent, text[:8] + str(len(text)))
    return [world.cache.read(scope, "f.txt")["kind"] for _ in range(2)]


@pytest.mark.parametrize("agent", HOSTS)
def test_an_answer_at_the_hosts_limit_is_credited_and_one_past_it_is_not(world: World, agent: str) -> None:
    chars, _ = hostcaps.limit(agent)
    assert len(json.dumps(sized(chars))) == chars and len(json.dumps(sized(chars + 1))) == chars + 1
    assert reads(world, agent, sized(chars)) == ["full", "stub"]
    over = reads(world, agent, sized(chars + 1))
    assert over == ["full", "full"], over
    assert world.cache.stats()["withheld_reasons"].get("answer longer than the host hands its model whole") == 2


@pytest.mark.parametrize("agent", ["opencode", "qwen", "cursor", None])
def test_a_host_that_cuts_by_lines_gets_no_stub_past_its_line_limit(world: World, agent: str) -> None:
    _, lines = hostcaps.limit(agent)
    assert lines is not None
    assert reads(world, agent, "a\n" * (lines - 1)) == ["full", "stub"]
    assert reads(world, agent, "a\n" * lines) == ["full", "full"]


def test_json_escapes_count_so_a_cut_copy_is_never_credited(world: World) -> None:
    # Cline cuts the result's JSON: quotes, backslashes and newlines take two characters there
    chars, _ = hostcaps.limit("cline")
    text = '"\\\n' * (chars // 5)  # fewer characters than the limit, more as JSON
    assert len(text) < chars < len(json.dumps(text))
    assert reads(world, "cline", text) == ["full", "full"]


# -- a host that compacts with no signal leanctx gets ----------------------------------------------
def cline_task(world: World, host, root_session: str) -> None:
    """Cline CLI's TaskStart hook file, as 3.0.65 runs it (its payload shape)."""
    from bench.support.oracle import publish_event

    payload = {"clineVersion": "", "hookName": "agent_start", "timestamp": "2026-01-01T00:00:00.000Z",
               "taskId": f"conv_{root_session}", "sessionContext": {"rootSessionId": root_session},
               "workspaceRoots": [str(world.root)], "userId": "unknown", "agent_id": "agent_1", "parent_agent_id": None}
    publish_event(str(world.data), "cline", "TaskStart", payload, host.as_host(), world.t)


def test_cline_gets_no_stub_because_it_compacts_without_a_hook(world: World) -> None:
    """Cline 3.0.65 compacts on its own and never runs a PreCompact hook file: any held file
    may be gone from its context without leanctx knowing."""
    world.write("a.py", "x = 1\n" * 50)
    h = world.host("cline")
    cline_task(world, h, "1796128454072_abcde")
    c = world.conn(h)
    scope = world.scope(c)
    assert scope.key and scope.agent == "cline" and not scope.stub_ok and "Cline compacts" in scope.reason
    assert [world.read(c, "a.py")["kind"] for _ in range(2)] == ["full", "full"]
    # nor through an explicit scope naming the same session, nor with conversation scoping off
    named = world.conn(h, "c-named", env={"LEANCTX_SCOPE": "1796128454072_abcde"})
    assert [world.read(named, "a.py")["kind"] for _ in range(2)] == ["full", "full"]
    legacy = world.conn(h, "c-legacy", env={"LEANCTX_CONVERSATION_SCOPE": "0"})
    assert [world.read(legacy, "a.py")["kind"] for _ in range(2)] == ["full", "full"]
