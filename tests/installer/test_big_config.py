"""Big host configs (issue 8, item 15): init, re-init and uninstall on a big ~/.claude.json.

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


def extra_peaks(root: Path, name: str, big_text: str, small_text: str, *args: str) -> tuple[int, int]:
    """Peak memory of `leanctx *args` run twice (first, then no-op) with the config file `name`
    big, minus the same two runs in another HOME where it is small: what the big file costs."""
    peaks = []
    for label, text in (("small", small_text), ("big", big_text)):
        home = root / label
        (home / ".claude").mkdir(parents=True)
        (home / name).write_text(text, encoding="utf-8")
        env = dict(os.environ, HOME=str(home), LEANCTX_HOME=str(root / label / "data"))
        peaks.append((traced_run(env, *args), traced_run(env, *args)))
    return peaks[1][0] - peaks[0][0], peaks[1][1] - peaks[0][1]


def test_init_on_a_big_claude_json_builds_no_tree_of_it(tmp_path: Path, home: Path) -> None:
    big = claude_json(BIG, ascii_only=True)  # ASCII: Python holds it at one byte a character
    size = len(big.encode())
    first, again = extra_peaks(tmp_path, ".claude.json", big, json.dumps({"numStartups": 1}, indent=2), "init", "--agent", "claude")
    # The old editor (a node per value, the whole tree built twice) took 13x the file size here,
    # 8x for the no-op; what is left is the text a few times over (the bytes read, the text, the
    # edited text, the bytes written): about 4x and 3x.
    assert first < 6 * size, f"init: {first / size:.1f}x the file size"
    assert again < 4 * size, f"no-op re-init: {again / size:.1f}x the file size"


def test_big_claude_json_keeps_every_byte_through_init_and_uninstall(home: Path, data_dir: Path) -> None:
    (home / ".claude").mkdir()
    config = home / ".claude.json"
    big = claude_json(BIG)  # raw UTF-8 with emoji, as Claude Code writes it
    config.write_text(big, encoding="utf-8")
    assert run_cli("init", "--agent", "claude").returncode == 0
    after = config.read_text(encoding="utf-8")
    value = json.loads(after)
    assert value["mcpServers"]["leanctx"]["args"] == ["-m", "leanctx", "mcp"]
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
