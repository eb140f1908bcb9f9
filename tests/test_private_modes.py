"""Every folder leanctx creates for itself is 0700 and every file 0600, whoever creates it first
(a hook, the CLI's error path, init, the daemon, the state store) and whatever the umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PAYLOADS, REPO
from tests.test_cli_safety import BUGGY

UMASKS = [0o000, 0o022]
HOOK = "import sys; sys.path.insert(0, sys.argv.pop(1)); from leanctx.hooks import run; run()"


def _run(argv: list[str], umask: int, env: dict, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=120, cwd="/",
                          preexec_fn=lambda: os.umask(umask))


def _modes(top: Path) -> dict[str, str]:
    """Every entry from `top` down (itself included), with its permission bits."""
    out = {".": oct(stat.S_IMODE(top.stat().st_mode))}
    for p in top.rglob("*"):
        out[str(p.relative_to(top))] = oct(stat.S_IMODE(p.lstat().st_mode))
    return out


def _assert_private(top: Path, executable: tuple[str, ...] = ()) -> None:
    wrong = {}
    for name, mode in _modes(top).items():
        p = top / name
        if p.is_symlink() or p.is_socket():
            continue
        want = "0o700" if p.is_dir() or name in executable else "0o600"
        if mode != want:
            wrong[name] = mode
    assert not wrong, wrong


@pytest.mark.parametrize("umask", UMASKS, ids=oct)
def test_a_hook_that_creates_the_data_dir_makes_it_private(home: Path, tmp_path: Path, umask: int) -> None:
    data = tmp_path / "new" / "leanctx"
    env = dict(os.environ, LEANCTX_HOME=str(data))
    stdin = (PAYLOADS / "claude" / "SessionStart.json").read_bytes()
    ok = _run([sys.executable, "-I", "-S", "-c", HOOK, str(REPO), "claude", "SessionStart"], umask, env, stdin)
    assert ok.returncode == 0 and (data / "conversations").is_dir(), ok.stderr
    bad = _run([sys.executable, "-I", "-S", "-c", HOOK, str(REPO), "claude", "NoSuchEvent"], umask, env, b"{}")
    assert bad.returncode == 0 and (data / "logs" / "hooks.log").is_file()
    _assert_private(tmp_path / "new")


@pytest.mark.parametrize("umask", UMASKS, ids=oct)
def test_the_cli_error_path_creates_a_private_data_dir(home: Path, tmp_path: Path, umask: int) -> None:
    data = tmp_path / "new" / "leanctx"
    proc = _run([sys.executable, "-c", BUGGY], umask, dict(os.environ, LEANCTX_HOME=str(data)))
    assert proc.returncode == 1 and (data / "logs" / "cli.log").is_file(), proc.stderr
    _assert_private(tmp_path / "new")


@pytest.mark.parametrize("umask", UMASKS, ids=oct)
def test_init_creates_a_private_data_dir(home: Path, tmp_path: Path, umask: int) -> None:
    data = tmp_path / "new" / "leanctx"
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"model": "x"}\n')
    env = dict(os.environ, LEANCTX_HOME=str(data))
    proc = _run([sys.executable, "-m", "leanctx", "init", "--agent", "claude"], umask, env)
    assert proc.returncode == 0, proc.stderr
    assert (data / "installed").is_dir() and (data / "backups").is_dir()
    modes = _modes(tmp_path / "new")
    wrapper = "leanctx/bin/leanctx-hook"
    assert modes.pop(wrapper) in ("0o755", "0o700")  # the wrapper hosts execute
    for name, mode in modes.items():
        p = tmp_path / "new" / name
        assert mode == ("0o700" if p.is_dir() else "0o600"), (name, mode)


@pytest.mark.parametrize("umask", UMASKS, ids=oct)
def test_the_state_store_creates_a_private_cks_home(home: Path, tmp_path: Path, umask: int) -> None:
    cks = tmp_path / "new" / "cks"
    env = dict(os.environ, CKS_HOME=str(cks), CKS_ACTIVE_USER="alice")
    proc = _run([sys.executable, "-m", "leanctx", "state", "summary", "hello"], umask, env)
    assert proc.returncode == 0, proc.stderr
    assert (cks / "user" / "alice").is_dir()
    _assert_private(tmp_path / "new")


@pytest.mark.parametrize("umask", UMASKS, ids=oct)
def test_the_daemon_creates_a_private_data_dir(home: Path, tmp_path: Path, umask: int) -> None:
    data = tmp_path / "new" / "leanctx"
    env = dict(os.environ, LEANCTX_HOME=str(data))
    proc = _run([sys.executable, "-m", "leanctx", "serve", "--detach"], umask, env)
    try:
        assert proc.returncode == 0, proc.stderr
    finally:
        _run([sys.executable, "-m", "leanctx", "stop"], umask, env)
    _assert_private(tmp_path / "new")


@pytest.mark.parametrize("umask", UMASKS, ids=oct)
def test_the_wrappers_own_fallback_log_is_private(home: Path, tmp_path: Path, umask: int) -> None:
    """The wrapper logs by itself when it cannot import leanctx, for a host that reads a hook's
    stderr as its answer (Gemini CLI): that first write of the data dir is private too."""
    from leanctx.installer import wrapper

    data = tmp_path / "new" / "leanctx"
    script = tmp_path / "leanctx-hook"
    script.write_text(wrapper.render(data, src=tmp_path / "no-such-src"))
    script.chmod(0o755)
    proc = _run(["/bin/sh", "-c", wrapper.command(script, "gemini", "BeforeTool")], umask,
                dict(os.environ, LEANCTX_HOME=str(data)), b"{}")
    assert proc.returncode == 0 and "cannot import leanctx" in (data / "logs" / "hooks.log").read_text()
    _assert_private(tmp_path / "new")


def test_init_makes_an_existing_readable_data_dir_private(home: Path, tmp_path: Path) -> None:
    """A data dir an older version (or a hook) left 0755 is 0700 after the next init."""
    data = tmp_path / "old"
    data.mkdir()
    data.chmod(0o755)
    proc = _run([sys.executable, "-m", "leanctx", "init", "--agent", "claude"], 0o022, dict(os.environ, LEANCTX_HOME=str(data)))
    assert proc.returncode == 0, proc.stderr
    assert oct(stat.S_IMODE(data.stat().st_mode)) == "0o700"
