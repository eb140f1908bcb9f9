"""Templates are filled in one pass, each value escaped for the template's language.

An install path may hold anything a file name can: a placeholder token (`@DATA_DIR@`), quotes,
`$(...)`, backticks, a newline. Chained replacement rescanned inserted values, so such a path
broke the wrapper's sh quoting (a command ran) and the OpenCode plugin's JS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import leanctx
from leanctx.installer import wrapper
from tests.conftest import run_cli

TOKENS = "@DATA_DIR@@SRC@@PYTHON@@BOOT@@VERSION@@STDERR_IS_OUTPUT@@HOOKS@@MARK@@TIMEOUT_MS@@LEANCTX@@SERVER@@HOW@"
NASTY = f"a {TOKENS}'q\"$(touch pwned1)`touch pwned2`;touch pwned3 \\\n*/ \u2028z"
NODE = shutil.which("node")


def test_fill_is_one_pass_and_an_unknown_placeholder_is_an_error() -> None:
    from leanctx import templating

    assert templating.fill("@A@-@B@", {"A": "@B@", "B": "x"}, "t") == "@B@-x"
    with pytest.raises(ValueError, match=r"template t: no value for @C@"):
        templating.fill("@A@ @C@", {"A": "1"}, "t")


@pytest.fixture
def nasty(tmp_path: Path) -> dict[str, Path]:
    """A data dir, a package root and a Python, each under a folder named NASTY."""
    root = tmp_path / NASTY
    (root / "bin").mkdir(parents=True)
    python = root / "bin" / "python3"
    python.symlink_to(sys.executable)
    src = root / "src"
    src.mkdir()
    (src / "leanctx").symlink_to(Path(leanctx.__file__).resolve().parent)
    return {"data": root / "data", "python": python, "src": src, "cwd": tmp_path}


def write_wrapper(data: Path, **render) -> Path:
    path = wrapper.wrapper_path(data)
    path.parent.mkdir(parents=True)
    path.write_text(wrapper.render(data, **render))
    path.chmod(0o755)
    return path


def test_a_wrapper_under_paths_full_of_tokens_quotes_and_newlines_runs_hooks(nasty: dict[str, Path]) -> None:
    path = write_wrapper(nasty["data"], python=str(nasty["python"]), src=nasty["src"])
    assert wrapper.read_info(path) == {"version": leanctx.__version__, "python": str(nasty["python"])}
    payload = json.dumps({"session_id": "s-1", "cwd": "/w", "hook_event_name": "SessionStart", "source": "startup"})
    done = subprocess.run(["/bin/sh", "-c", wrapper.command(path, "claude", "SessionStart")], input=payload,
                          capture_output=True, text=True, cwd=nasty["cwd"], env={k: v for k, v in os.environ.items() if k != "LEANCTX_HOME"},
                          timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads((nasty["data"] / "conversations" / "claude" / "s-1.json").read_text())["session_id"] == "s-1"
    assert not list(nasty["cwd"].glob("pwned*"))


def test_a_wrapper_under_such_paths_passes_the_cli_its_arguments(nasty: dict[str, Path]) -> None:
    path = write_wrapper(nasty["data"], src=nasty["src"])
    env = {k: v for k, v in os.environ.items() if k != "LEANCTX_HOME"}
    done = subprocess.run([str(path), "cli", "state", "summary", NASTY], capture_output=True, text=True, cwd=nasty["cwd"],
                          env=dict(env, CKS_HOME=str(nasty["cwd"] / "cks"), CKS_ACTIVE_USER="alice"), timeout=120)
    assert done.returncode == 0, done.stderr
    shown = subprocess.run([str(path), "cli", "state", "show", "--json"], capture_output=True, text=True, cwd=nasty["cwd"],
                           env=dict(env, CKS_HOME=str(nasty["cwd"] / "cks"), CKS_ACTIVE_USER="alice"), timeout=120)
    assert json.loads(shown.stdout)["thread_summary"] == NASTY  # one argument, byte for byte
    assert not list(nasty["cwd"].glob("pwned*"))


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_opencode_plugin_under_such_a_data_dir_parses_and_runs_its_hooks(home: Path, tmp_path: Path) -> None:
    from tests.agents.test_opencode import SESSION, drive, plugin_calls

    data = tmp_path / NASTY / "data"
    env = dict(os.environ, LEANCTX_HOME=str(data))
    assert run_cli("init", "--agent", "opencode", env=env).returncode == 0
    plugin = home / ".config" / "opencode" / "plugins" / "leanctx.js"
    checked = subprocess.run([NODE, "--check", str(plugin)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    out = drive(plugin, plugin_calls(), tmp_path, env)
    assert all(r.get("ok") for r in out), out
    record = json.loads(next((data / "conversations" / "opencode").glob("*.json")).read_text())
    assert record["session_id"] == SESSION
    assert not list(tmp_path.glob("pwned*"))
