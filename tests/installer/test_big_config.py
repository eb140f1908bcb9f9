"""Big host configs: init, re-init and uninstall on a big ~/.claude.json.

Claude Code keeps every project's history in ~/.claude.json, so it grows to tens of MB; we edit
only its `mcpServers` member. The editor used to build a node per value of the whole document
and re-parse it after every edit (16 s and 915 MB on 18 MB). Speed is measured by
bench/big_config.py, not asserted here; what is asserted is what does not depend on the
machine: the memory the real CLI allocates beyond a run on a tiny file (tracemalloc in the child,
deterministic for a given interpreter), and that the user's bytes survive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.installer.big_configs import claude_json, settings_json

# The real CLI entry point in a child, with tracemalloc on; prints the peak of traced memory.
TRACED_CLI = """
import sys, tracemalloc
tracemalloc.start()
from leanctx.cli import main
try:
    main(sys.argv[1:], prog_name="leanctx")
except SystemExit as exc:
    code = exc.code
print("PEAK", tracemalloc.get_traced_memory()[1], file=sys.stderr)
sys.exit(code)
"""

BIG = 3_000_000


def traced_run(env: dict, *args: str) -> int:
    proc = subprocess.run([sys.executable, "-c", TRACED_CLI, *args], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return int(proc.stderr.rsplit("PEAK ", 1)[1])


def extra_peaks(root: Path, name: str, big_text: str, small_text: str, *commands: tuple[str, ...]) -> list[int]:
    """Peak memory of each of `commands` run in turn (e.g. init, init again, uninstall) with the
    config file `name` big, minus the same runs in another HOME where it is small: what the big
    file costs each."""
    peaks = []
    for label, text in (("small", small_text), ("big", big_text)):
        home = root / label
        (home / ".claude").mkdir(parents=True)
        (home / name).write_text(text, encoding="utf-8")
        env = dict(os.environ, HOME=str(home), LEANCTX_HOME=str(root / label / "data"))
        peaks.append([traced_run(env, *args) for args in commands])
    return [big - small for big, small in zip(peaks[1], peaks[0])]


INIT = ("init", "--agent", "claude")


@pytest.mark.parametrize("ascii_only", [True, False], ids=["ascii", "utf8-emoji"])
def test_init_on_a_big_claude_json_holds_it_about_twice(tmp_path: Path, home: Path, ascii_only: bool) -> None:
    """Raw UTF-8 with emoji (as Claude Code writes it) costs what ASCII does: the file is held as
    bytes read as latin-1 (one byte a character), never as a decoded str (four bytes a
    character as soon as it holds one emoji), and never given to json.loads whole."""
    big = claude_json(BIG, ascii_only=ascii_only)
    size = len(big.encode())
    first, again, uninstall = extra_peaks(tmp_path, ".claude.json", big, json.dumps({"numStartups": 1}, indent=2),
                                          INIT, INIT, ("uninstall", "--agent", "claude"))
    # Before: a node per value, the whole tree built twice: 13x the file size for ASCII; then a
    # decoded str of the text several times over: 5.6x (ASCII) and 11x (emoji) for init, 3.6x
    # and 7.8x for the no-op, 6.4x and 15x for uninstall. Now the old bytes and the latin-1 text
    # (parse), the old and new text (the splice), the new text and bytes, the old and new bytes
    # (the planned change): never more than two copies at once, about 2.3x; 1.9x for the no-op.
    assert first < 3 * size, f"init: {first / size:.1f}x the file size"
    assert again < 2.5 * size, f"no-op re-init: {again / size:.1f}x the file size"
    assert uninstall < 4.5 * size, f"uninstall: {uninstall / size:.1f}x the file size"


def test_big_claude_json_keeps_every_byte_through_init_and_uninstall(home: Path, data_dir: Path) -> None:
    (home / ".claude").mkdir()
    config = home / ".claude.json"
    big = claude_json(BIG)  # raw UTF-8 with emoji, as Claude Code writes it
    config.write_text(big, encoding="utf-8")
    assert run_cli("init", "--agent", "claude").returncode == 0
    after = config.read_text(encoding="utf-8")
    value = json.loads(after)
    assert value["mcpServers"]["leanctx"]["args"] == ["mcp"]
    assert after.startswith(big.rstrip()[:-1].rstrip())  # everything before the new member, untouched
    assert value["projects"] == json.loads(big)["projects"]
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 0 and "updated ~/.claude.json" not in proc.stdout
    assert config.read_text(encoding="utf-8") == after
    # the host rewrote the file since (its own re-serialisation): only a surgical removal works
    config.write_text(json.dumps(value, ensure_ascii=False, indent=2), encoding="utf-8")
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    left = json.loads(config.read_text(encoding="utf-8"))
    assert "mcpServers" not in left and left == json.loads(big)


@pytest.mark.parametrize("comment", ["", "// my settings\n"])
def test_big_settings_json_is_wired_and_unwired_in_place(home: Path, data_dir: Path, comment: str) -> None:
    """Eight events appended one by one into a big file, with a comment (JSONC) or without."""
    (home / ".claude").mkdir()
    settings = home / ".claude" / "settings.json"
    big = comment + settings_json(BIG)
    settings.write_text(big, encoding="utf-8")
    proc = run_cli("init", "--agent", "claude")
    # wired either way; with a comment init may also warn that Claude Code reads strict JSON only
    assert proc.returncode == 0 or (comment and proc.returncode == 1), proc.stdout + proc.stderr
    after = settings.read_text(encoding="utf-8")
    assert after.startswith(comment)
    value = json.loads(after[len(comment):])
    assert value["permissions"] == json.loads(big[len(comment):])["permissions"]
    assert any("leanctx-hook" in h["command"] for g in value["hooks"]["Stop"] for h in g["hooks"])
    assert value["hooks"]["PostToolUse"][0]["hooks"][0]["command"] == "prettier --write"
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert settings.read_text(encoding="utf-8") == big


def test_claude_json_in_any_script_is_edited_as_its_bytes(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bytes path decodes keys and values from their own bytes: a data dir, a server and
    keys in other scripts are compared as text (init twice = once), and the file comes back
    byte for byte, also after the host re-serialised it."""
    data = home / "données 日本 🚀"
    monkeypatch.setenv("LEANCTX_HOME", str(data))  # our entry then carries it (env LEANCTX_HOME)
    (home / ".claude").mkdir()
    config = home / ".claude.json"
    mine = {"command": "wörk-mcp", "args": ["--名前", "🚀"]}
    original = json.dumps({"projects": {"/home/ünï/项目": {"history": ["✨ 修复"]}}, "mcpServers": {"mïne 🚀": mine}}, ensure_ascii=False, indent=2)
    config.write_text(original, encoding="utf-8")
    assert run_cli("init", "--agent", "claude").returncode == 0
    after = config.read_bytes()
    servers = json.loads(after)["mcpServers"]
    assert servers["mïne 🚀"] == mine and servers["leanctx"]["env"] == {"LEANCTX_HOME": str(data)}
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 0 and "updated ~/.claude.json" not in proc.stdout, proc.stdout
    assert config.read_bytes() == after
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert config.read_text(encoding="utf-8") == original
    # the host re-serialised it (escaped, one line): only a surgical removal works
    assert run_cli("init", "--agent", "claude").returncode == 0
    config.write_text(json.dumps(json.loads(config.read_bytes())), encoding="utf-8")
    assert run_cli("uninstall", "--agent", "claude").returncode == 0
    assert json.loads(config.read_bytes()) == json.loads(original)


def test_claude_json_that_is_not_utf8_is_refused_untouched(home: Path, data_dir: Path) -> None:
    (home / ".claude").mkdir()
    config = home / ".claude.json"
    config.write_bytes(b'{"projects": {"caf\xe9": {}}}')  # latin-1, not UTF-8
    for command in (["init", "--agent", "claude"], ["uninstall", "--agent", "claude"]):
        proc = run_cli(*command)
        assert config.read_bytes() == b'{"projects": {"caf\xe9": {}}}'
        assert "Traceback" not in proc.stderr, proc.stderr
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 2 and "not UTF-8 text (byte 18)" in proc.stderr, proc.stderr
