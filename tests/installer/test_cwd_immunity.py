"""Nothing leanctx writes into a host imports or runs code from the folder the host runs it in.

Hosts start our MCP server, hooks and (through the model's shell) our CLI in the session's
folder, often a cloned repository. Each command kind init writes is run here in a repository
that plants a `leanctx/` package, modules named like the standard library's, and a git config
whose fsmonitor and clean filter are programs (tests/hostile_repo.py): nothing of it may run,
and the command must still work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.installer import instructions, mcpreg
from tests import hostile_repo
from tests.conftest import run_cli
from tests.hooks.test_compaction_notes import card_of, fire, session  # noqa: F401 - the fixture
from tests.hooks.test_hook_entry import hook_wrapper  # noqa: F401 - the fixture

MCP_HELLO = b"".join(json.dumps(m).encode() + b"\n" for m in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return hostile_repo.make(tmp_path / "cloned", tmp_path / "markers")


def markers(repo: Path) -> list[str]:
    return hostile_repo.ran(repo.parent / "markers")


def tools_of(command: list[str], cwd: Path, env: dict | None = None) -> list[str]:
    """The tool names an MCP server started by `command` in `cwd` lists, as a host starts it."""
    env = dict(env or os.environ, LEANCTX_DAEMON="0")
    proc = subprocess.run(command, input=MCP_HELLO, capture_output=True, cwd=cwd, env=env, timeout=120)
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    listed = next((a for a in answers if a.get("id") == 2), None)
    assert listed is not None, (proc.returncode, proc.stdout[-500:], proc.stderr[-2000:])
    return [t["name"] for t in listed["result"]["tools"]]


def test_the_planted_repository_does_run_in_python_dash_m(repo: Path) -> None:
    """The fixture is live: the entry init used to write runs the repository's `leanctx/`."""
    subprocess.run([sys.executable, "-m", "leanctx", "mcp"], input=MCP_HELLO, capture_output=True, cwd=repo, timeout=120)
    assert "leanctx" in markers(repo)


@pytest.mark.parametrize("name", ["claude", "codex", "opencode", "cline", "gemini"])
@pytest.mark.parametrize("bot", [False, True])
def test_the_user_level_mcp_entry_runs_nothing_from_the_folder(home: Path, data_dir: Path, repo: Path, name: str, bot: bool) -> None:
    assert run_cli("init", "--agent", name, *(["--bot"] if bot else [])).returncode == 0
    entry = mcpreg.registered(agents.get(name), home, None)
    command, args, env = mcpreg.launch(entry)
    assert command == str(data_dir / "bin" / "leanctx-hook") and args[0] == "mcp"
    tools = tools_of([command, *args], repo, dict(os.environ, **(env or {})))
    assert "ctx_read" in tools and ("state_show" in tools) == bot
    assert markers(repo) == []


def test_project_level_commands_are_console_scripts_that_never_look_at_the_folder(repo: Path, tmp_path: Path) -> None:
    """A project's files call `leanctx mcp` and `leanctx-hook` from PATH: a console script puts its
    own bin folder first on sys.path, never the current one."""
    bin_dir = Path(sys.executable).parent
    scripts = {name: shutil.which(name, path=str(bin_dir)) for name in ("leanctx", "leanctx-hook")}
    if None in scripts.values():
        pytest.skip("leanctx is not installed with its console scripts beside this Python")
    project = tmp_path / "proj"
    project.mkdir()
    command, args = mcpreg.server_command(project)
    assert [command, *args] == ["leanctx", "mcp"]
    assert "ctx_read" in tools_of([scripts["leanctx"], *args], repo)
    probe = tmp_path / "bin" / "probe"  # a script run by its shebang, as a console script is
    probe.parent.mkdir()
    probe.write_text(f"#!{sys.executable}\nimport sys\nprint(sys.path[0])\n")
    probe.chmod(0o755)
    assert subprocess.run([str(probe)], capture_output=True, text=True, cwd=repo).stdout.strip() == str(probe.parent)
    payload = json.dumps({"session_id": "s-1", "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"})
    hook = subprocess.run([scripts["leanctx-hook"], "claude", "SessionStart"], input=payload, capture_output=True, text=True,
                          cwd=repo, timeout=120, env=dict(os.environ, LEANCTX_HOME=str(tmp_path / "data")))
    assert hook.returncode == 0 and list((tmp_path / "data" / "conversations").rglob("*.json"))
    assert markers(repo) == []


def test_every_hook_command_and_hook_file_runs_nothing_from_the_folder(home: Path, data_dir: Path, repo: Path) -> None:
    """The wrapper behind every hook command (config entries, OpenCode's plugin, Cline's files)."""
    assert run_cli("init", "--agent", "claude").returncode == 0
    assert run_cli("init", "--agent", "cline").returncode == 0
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    payload = json.dumps({"session_id": "s-1", "cwd": str(repo), "hook_event_name": "SessionStart", "source": "startup"})
    done = subprocess.run(["/bin/sh", "-c", command], input=payload, capture_output=True, text=True, cwd=repo, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads((data_dir / "conversations" / "claude" / "s-1.json").read_text())["cwd"] == str(repo)
    cline_files = [p for p in agents.get("cline").hook_folder(home, None).iterdir() if os.access(p, os.X_OK)]
    assert cline_files
    for path in cline_files:
        assert subprocess.run([str(path)], input=b"{}", capture_output=True, cwd=repo, timeout=120).returncode == 0
    assert markers(repo) == []


def test_the_cli_word_in_instructions_never_falls_back_to_python_dash_m(home: Path, data_dir: Path, repo: Path,
                                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a console script beside the Python (e.g. a `pip install --user` whose scripts are
    elsewhere), the instructions name the data dir's wrapper, which runs the CLI isolated."""
    assert run_cli("init", "--agent", "claude").returncode == 0
    lonely = tmp_path / "lonely-bin"
    lonely.mkdir()
    (lonely / "python3").symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(lonely / "python3"))
    word = instructions.leanctx_command(None, data_dir)
    assert "-m leanctx" not in word and word.endswith(" cli")
    done = subprocess.run(["/bin/sh", "-c", f"{word} state show"], capture_output=True, text=True, cwd=repo, timeout=120,
                          env=dict(os.environ, CKS_HOME=str(tmp_path / "cks"), CKS_ACTIVE_USER="alice"))
    assert done.returncode == 0, done.stderr
    assert markers(repo) == []


def test_the_state_card_reads_git_state_without_running_the_repositorys_programs(hook_wrapper: Path, data_dir: Path,
                                                                                  session, tmp_path: Path) -> None:
    proj, transcript = session
    hostile_repo.make(proj, tmp_path / "markers")
    card = card_of(fire(hook_wrapper, "SessionStart", proj, transcript, source="compact"))
    assert 'Git: branch "main", uncommitted: "json.py"' in card
    assert hostile_repo.ran(tmp_path / "markers") == []


def test_git_state_of_a_linked_worktree_and_a_detached_head(tmp_path: Path) -> None:
    from leanctx.hooks import gitstate

    repo = hostile_repo.make(tmp_path / "repo", tmp_path / "markers")
    (repo / ".git" / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = false\n")  # git itself runs below
    (repo / ".gitattributes").unlink()
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(tmp_path / "wt")], check=True)
    (tmp_path / "wt" / "socket.py").write_text("changed\n")
    root, gitdir = gitstate.git_dir(str(tmp_path / "wt" / "leanctx"))
    assert root == str(tmp_path / "wt") and gitstate.branch(gitdir) == "HEAD"
    assert gitstate.changed(root, gitdir) == ["socket.py"]
    root, gitdir = gitstate.git_dir(str(repo))
    assert gitstate.branch(gitdir) == "main" and gitstate.changed(root, gitdir) == ["json.py"]


def test_the_daemon_starts_isolated_from_every_folder(tmp_path: Path) -> None:
    from leanctx import launch
    from leanctx.cache import client

    argv = launch.argv(client.SERVE_MODULE, "serve")
    assert argv[1:3] == ["-I", "-c"] and client.is_daemon_cmdline(argv)


def test_a_pip_user_install_keeps_its_user_site_packages(repo: Path, tmp_path: Path) -> None:
    """`-I` drops the user site-packages, where `pip install --user` puts leanctx's dependencies:
    outside a venv, the launcher adds it back (after the package root, before the system's)."""
    from leanctx import launch

    base = getattr(sys, "_base_executable", sys.executable)  # an interpreter outside any venv
    env = dict(os.environ, PYTHONUSERBASE=str(tmp_path / "userbase"))
    env.pop("VIRTUAL_ENV", None)
    user_site = subprocess.run([base, "-c", "import site; print(site.getusersitepackages())"], env=env, capture_output=True,
                               text=True, check=True).stdout.strip()
    Path(user_site).mkdir(parents=True)
    (Path(user_site) / "userdep_probe.py").write_text("import json, sys\nprint(json.dumps(sys.path))\n")
    done = subprocess.run(launch.argv("userdep_probe", python=base), capture_output=True, text=True, cwd=repo, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    path = json.loads(done.stdout)
    assert path[:2] == [str(launch.package_root()), user_site] and str(repo) not in path and "" not in path
    assert markers(repo) == []


@pytest.mark.parametrize("planted", ["HEAD", "index"])
def test_a_fifo_where_git_keeps_its_files_never_holds_the_hook(tmp_path: Path, planted: str) -> None:
    """A repository can ship `.git/HEAD` or `.git/index` as a FIFO: reading it must not wait for
    a writer (the hook would hold its host until killed); the card goes without that fact."""
    import threading

    from leanctx.hooks import gitstate

    repo = hostile_repo.make(tmp_path / "repo", tmp_path / "markers")
    target = repo / ".git" / planted
    target.unlink()
    os.mkfifo(target)
    result: dict = {}

    def look() -> None:
        root, gitdir = gitstate.git_dir(str(repo))
        result["branch"], result["changed"] = gitstate.branch(gitdir), gitstate.changed(root, gitdir)

    worker = threading.Thread(target=look, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # unblock the reader so the test process can exit, then fail
        with open(target, "wb"):
            pass
        pytest.fail(f"reading a FIFO at .git/{planted} blocked")
    assert result["branch" if planted == "HEAD" else "changed"] in (None, [])


def test_the_launcher_keeps_absolute_pythonpath_folders_and_drops_relative_ones(repo: Path, tmp_path: Path) -> None:
    """PYTHONPATH is the user's own setting, so its absolute folders still count under `-I`; a
    relative one (`.`, `src`) would name the folder the host opened, so it never does."""
    from leanctx import launch

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "pp_probe.py").write_text("import json, sys\nprint(json.dumps(sys.path))\n")
    (repo / "pp_probe.py").write_text("open('PLANTED-RAN', 'w').close()\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([".", "src", str(extra)]))
    done = subprocess.run(launch.argv("pp_probe"), capture_output=True, text=True, cwd=repo, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    path = json.loads(done.stdout)
    assert str(extra) in path and "." not in path and "src" not in path and "" not in path
    assert not (repo / "PLANTED-RAN").exists() and markers(repo) == []
