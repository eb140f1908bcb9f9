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
