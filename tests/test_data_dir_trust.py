"""A data dir or CKS_HOME that another local account owns, can write, or can swap on its path is
refused: the CLI says so in one line and exits 2 with nothing written, doctor fails one check, the
hooks fail open, the MCP server refuses before the handshake. Real second uid (setpriv), real
processes; the same account's own folder keeps working."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import PAYLOADS, run_cli
from tests.second_account import OTHER, as_uid, needs_second_uid


@pytest.fixture
def shared(home: Path):
    """A root-owned 0755 folder every account can traverse (pytest's tmp_path is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="leanctx-trust-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _plant(folder: Path, uid: int) -> None:
    """What another account leaves for us: its own data dir with a read gate secret in it."""
    folder.mkdir(mode=0o755)
    os.chown(folder, uid, uid)
    env = dict(os.environ)
    proc = as_uid(uid, [sys.executable, "-c", "import json,sys; open(sys.argv[1], 'w').write(json.dumps({'port': 1, 'secret': 'planted'}))",
                        str(folder / "read_gate.json")], env, cwd="/")
    assert proc.returncode == 0, proc.stderr


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else b"") for p in sorted(folder.rglob("*"))}


def _env(home: Path, data: Path, **extra: str) -> dict:
    return dict(os.environ, HOME=str(home), LEANCTX_HOME=str(data), **extra)


CLI_COMMANDS = [
    ["init", "--agent", "claude"],
    ["uninstall", "--agent", "claude"],
    ["serve"],
    ["serve", "--detach"],
    ["mcp"],
    ["mcp", "--profile", "bot"],
    ["status"],
    ["stop"],
    ["stats"],
]


@needs_second_uid
@pytest.mark.parametrize("args", CLI_COMMANDS, ids=lambda a: " ".join(a))
def test_every_command_refuses_a_data_dir_another_account_owns(home: Path, shared: Path, args: list[str]) -> None:
    data = shared / "leanctx"
    _plant(data, OTHER)
    before = _tree(data)
    proc = run_cli(*args, env=_env(home, data), cwd=home)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in proc.stderr, proc.stderr
    assert f"owned by uid {OTHER}" in line and "LEANCTX_HOME" in line, line
    assert _tree(data) == before  # nothing written, the planted secret not adopted
    assert not (home / ".claude").exists()


@needs_second_uid
def test_doctor_fails_the_data_dir_check_and_runs_nothing_there(home: Path, shared: Path) -> None:
    data = shared / "leanctx"
    _plant(data, OTHER)
    before = _tree(data)
    proc = run_cli("doctor", "--json", env=_env(home, data), cwd=home)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    [check] = report["checks"]
    assert check["name"] == "data dir" and check["status"] == "fail" and f"owned by uid {OTHER}" in check["detail"]
    assert "LEANCTX_HOME" in check["fix"] and report["agents"] == []
    text = run_cli("doctor", env=_env(home, data), cwd=home)
    assert text.returncode == 1 and "FAIL" in text.stdout and "Traceback" not in text.stderr
    fixed = run_cli("doctor", "--fix", "--agent", "claude", env=_env(home, data), cwd=home)
    assert fixed.returncode == 1 and "Traceback" not in fixed.stderr and not (home / ".claude").exists()
    assert _tree(data) == before


@needs_second_uid
def test_the_hook_fails_open_and_writes_nothing(home: Path, shared: Path) -> None:
    data = shared / "leanctx"
    _plant(data, OTHER)
    before = _tree(data)
    stdin = (PAYLOADS / "claude" / "SessionStart.json").read_text()
    proc = run_cli("hook", "claude", "SessionStart", input=stdin, env=_env(home, data), cwd=home)
    assert proc.returncode == 0
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "hook skipped" in proc.stderr and f"owned by uid {OTHER}" in proc.stderr
    assert _tree(data) == before


@needs_second_uid
def test_the_registered_mcp_command_refuses_before_the_handshake(home: Path, shared: Path) -> None:
    """The MCP server (what the wrapper's `mcp` entry and `python -m leanctx mcp` both start) goes
    straight to the server, not through click: it refuses too."""
    data = shared / "leanctx"
    _plant(data, OTHER)
    before = _tree(data)
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
                        "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}) + "\n"
    proc = subprocess.run([sys.executable, "-m", "leanctx", "mcp"], input=hello, capture_output=True, text=True,
                          env=_env(home, data), cwd=home, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("leanctx mcp: refusing data dir") and f"owned by uid {OTHER}" in proc.stderr
    assert _tree(data) == before


@needs_second_uid
def test_a_symlinked_data_dir_into_another_accounts_folder_is_refused(home: Path, shared: Path) -> None:
    theirs = shared / "theirs"
    _plant(theirs, OTHER)
    link = home / ".local" / "share" / "leanctx"
    link.parent.mkdir(parents=True)
    link.symlink_to(theirs)
    proc = run_cli("init", "--agent", "claude", env=_env(home, link), cwd=home)
    assert proc.returncode == 2 and f"owned by uid {OTHER}" in proc.stderr and str(theirs) in proc.stderr
    assert not (home / ".claude").exists() and sorted(os.listdir(theirs)) == ["read_gate.json"]


@needs_second_uid
def test_a_parent_another_account_owns_is_refused(home: Path, shared: Path) -> None:
    """They could rename our data dir away and put theirs in its place."""
    parent = shared / "theirs"
    parent.mkdir(mode=0o755)
    os.chown(parent, OTHER, OTHER)
    data = parent / "leanctx"
    proc = run_cli("init", "--agent", "claude", env=_env(home, data), cwd=home)
    assert proc.returncode == 2 and f"{parent} on its path is owned by uid {OTHER}" in proc.stderr
    assert not data.exists() and not (home / ".claude").exists()


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_a_data_dir_others_can_write_is_refused(home: Path, tmp_path: Path, mode: int) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(mode)
    proc = run_cli("init", "--agent", "claude", env=_env(home, data), cwd=home)
    assert proc.returncode == 2 and "writable by group or others" in proc.stderr and f"chmod 700 {data}" in proc.stderr
    assert os.listdir(data) == [] and not (home / ".claude").exists()


def test_a_world_writable_parent_without_sticky_bit_is_refused_with_it_allowed(home: Path, tmp_path: Path) -> None:
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)
    data = parent / "leanctx"
    proc = run_cli("init", "--agent", "claude", env=_env(home, data), cwd=home)
    assert proc.returncode == 2 and f"{parent} on its path is writable by group or others" in proc.stderr
    assert not data.exists()
    parent.chmod(0o1777)  # like /tmp: others cannot rename or delete what we put there
    proc = run_cli("init", "--agent", "claude", env=_env(home, data), cwd=home)
    assert proc.returncode == 0, proc.stderr
    assert (data / "bin" / "leanctx-hook").exists()


@needs_second_uid
def test_the_state_commands_refuse_a_cks_home_another_account_owns(home: Path, shared: Path) -> None:
    cks = shared / "cks"
    cks.mkdir(mode=0o755)
    (cks / "user").mkdir(mode=0o755)
    for p in (cks, cks / "user"):
        os.chown(p, OTHER, OTHER)
    env = _env(home, home / "data", CKS_HOME=str(cks), CKS_ACTIVE_USER="alice")
    for args in (["state", "summary", "hello"], ["state", "show"], ["state", "list"]):
        proc = run_cli(*args, env=env, cwd=home)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert f"refusing CKS_HOME {cks}: it is owned by uid {OTHER}" in proc.stderr and "CKS_HOME" in proc.stderr
    assert os.listdir(cks / "user") == []


@needs_second_uid
def test_run_as_another_account_leanctx_refuses_roots_data_dir_and_keeps_its_own(shared: Path) -> None:
    """The other way round: leanctx run by uid 4242 against a folder root owns is refused; its
    own HOME and data dir (the same uid) work."""
    theirs = shared / "home4242"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER, OTHER)
    roots = shared / "roots-data"
    roots.mkdir(mode=0o755)
    argv = [sys.executable, "-m", "leanctx", "init", "--agent", "claude"]
    proc = as_uid(OTHER, argv, _env(theirs, roots), cwd="/")
    assert proc.returncode == 2 and f"owned by uid 0, not by you (uid {OTHER})" in proc.stderr, proc.stderr
    assert os.listdir(roots) == []
    own = theirs / ".local" / "share" / "leanctx"
    proc = as_uid(OTHER, argv, _env(theirs, own), cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert os.stat(own).st_uid == OTHER and (own / "bin" / "leanctx-hook").exists()
    assert (theirs / ".claude" / "settings.json").exists()


@needs_second_uid
def test_a_bot_hook_fails_open_on_a_cks_home_another_account_owns(home: Path, shared: Path, data_dir: Path) -> None:
    cks = shared / "cks"
    cks.mkdir(mode=0o755)
    os.chown(cks, OTHER, OTHER)
    env = _env(home, data_dir, CKS_HOME=str(cks), CKS_ACTIVE_USER="alice")
    stdin = (PAYLOADS / "claude" / "UserPromptSubmit.json").read_text()
    proc = run_cli("hook", "claude", "UserPromptSubmit", "--bot", input=stdin, env=env, cwd=home)
    assert proc.returncode == 0 and proc.stdout == ""
    assert os.listdir(cks) == []  # no thread planted or read there
    log = (data_dir / "logs" / "hooks.log").read_text()
    assert f"refusing CKS_HOME {cks}: it is owned by uid {OTHER}" in log
