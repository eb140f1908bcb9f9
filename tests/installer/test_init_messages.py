"""init and uninstall say "created" for a file that did not exist and "updated" for one that did,
for every host: each message is checked against the files before the run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from leanctx import agents
from tests.conftest import run_cli

FILE_SAID = re.compile(r"\b(created|updated|removed) (~/[^\s:,()]+)")
FILES_IN = re.compile(r"\b(created|updated) (\d+) files? in (~/[^\s:,()]+)")


def snapshot(home: Path) -> set[Path]:
    return {p for p in home.rglob("*") if p.is_file()}


def check_messages(out: str, home: Path, before: set[Path]) -> list[str]:
    """Every `created/updated/removed ~/file` in `out` against the files that existed before;
    returns the verbs seen."""
    seen = []
    for line in out.splitlines():
        for verb, shown in FILE_SAID.findall(line):
            path = home / shown[2:]
            if FILES_IN.search(line):
                continue  # a folder of files, checked below
            seen.append(verb)
            if verb == "created":
                assert path not in before and path.is_file(), line
            elif verb == "updated":  # (a later step of the same run may remove it)
                assert path in before, line
            else:
                assert path in before and not path.exists(), line
        for verb, count, shown in FILES_IN.findall(line):
            folder = home / shown[2:]
            seen.append(verb)
            mine = [p for p in folder.iterdir() if p.is_file()]
            fresh = [p for p in mine if p not in before]
            assert (len(fresh) if verb == "created" else len(mine) - len(fresh)) >= int(count), line
    return seen


@pytest.mark.parametrize("name", agents.names())
def test_init_and_uninstall_say_created_or_updated(home: Path, data_dir: Path, name: str) -> None:
    agent = agents.get(name)
    agent.config_dir(home).mkdir(parents=True, exist_ok=True)
    before = snapshot(home)
    first = run_cli("init", "--agent", name)
    assert first.returncode in (0, 1), first.stderr  # 1: a host switch warning, not ours to judge here
    assert "updated" not in first.stdout, first.stdout  # a fresh HOME: every file is new
    assert "created" in check_messages(first.stdout, home, before)
    before = snapshot(home)
    second = run_cli("init", "--agent", name, "--bot")  # changes the files init wrote
    assert "updated" in check_messages(second.stdout, home, before), second.stdout
    before = snapshot(home)
    gone = run_cli("uninstall", "--agent", name)
    assert gone.returncode == 0, gone.stderr
    check_messages(gone.stdout, home, before)


def test_a_file_that_existed_is_updated(home: Path, data_dir: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"model": "opus"}\n')
    out = run_cli("init", "--agent", "claude").stdout
    assert "Claude Code: wired 9 events (coding profile): updated ~/.claude/settings.json" in out
    assert "  created ~/.claude.json with the MCP server entry 'leanctx'" in out
    out = run_cli("uninstall", "--agent", "claude").stdout
    assert "Claude Code: updated ~/.claude/settings.json: took out leanctx's hook entries" in out
    assert "Claude Code: removed ~/.claude.json (leanctx had created it)" in out
