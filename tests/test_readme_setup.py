"""The README's first command, run as written (minus the pip install this environment already did)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Set-up: two commands"):text.index("## Commands")]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


def test_the_readme_has_exactly_the_two_setup_commands() -> None:
    first, tests = _setup_commands()
    assert first.startswith("python -m pip install -e . && (")
    assert tests == "python -m pip install -e '.[test]' && python -m pytest"
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in run, ".ci/run must run the README's test command"


def test_the_first_command_prints_its_scratch_home_and_works() -> None:
    first, _ = _setup_commands()
    command = first.removeprefix("python -m pip install -e . && ")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": os.environ.get("HOME", "/"),
           "TMPDIR": os.environ.get("TMPDIR", "/tmp"), "LEANCTX_IDLE_EXIT": "1"}
    proc = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    home = Path(re.search(r"^scratch HOME: (.+)$", proc.stdout, re.M).group(1))
    try:
        assert (home / ".claude" / "settings.json").is_file()
        assert "All good." in proc.stdout
        assert proc.stdout.rstrip().endswith(f"look at {home}/.claude; remove it all with: rm -rf {home}")
        assert home != Path(env["HOME"]) and home.name.startswith("tmp")
    finally:
        subprocess.run([str(Path(sys.executable).parent / "leanctx"), "stop"], env=dict(env, HOME=str(home)), capture_output=True, timeout=60)
        shutil.rmtree(home, ignore_errors=True)
