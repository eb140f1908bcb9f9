"""`--project` records are keyed by the real folder, whatever way it was typed, and the hook
wrapper stays while any install of any scope still calls it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.installer import wrapper
from tests.conftest import run_cli


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "repos" / "A", tmp_path / "repos" / "B"
    a.mkdir(parents=True)
    b.mkdir()
    return a, b


PROJECT_LEVEL = [n for n in agents.names() if agents.get(n).project_config_path(Path("/p")) is not None]


@pytest.mark.parametrize("name", PROJECT_LEVEL)
def test_uninstall_with_dot_takes_out_what_an_absolute_init_made(home: Path, data_dir: Path, repos, name: str) -> None:
    a, _ = repos
    assert run_cli("init", "--agent", name, "--project", str(a)).returncode == 0
    assert files_in(a)
    proc = run_cli("uninstall", "--agent", name, "--project", ".", cwd=a)
    assert proc.returncode == 0, proc.stderr
    assert files_in(a) == []  # not an empty CLAUDE.md, `{}` or `{"mcpServers": {}}` left behind
    assert list((data_dir / "installed").glob("*.json")) == []
    assert not wrapper.wrapper_path(data_dir).exists()


@pytest.mark.parametrize("name", sorted(set(agents.names()) - set(PROJECT_LEVEL)))
def test_a_host_without_project_level_refuses_project_and_writes_nothing(home: Path, data_dir: Path, repos, name: str) -> None:
    a, _ = repos
    proc = run_cli("init", "--agent", name, "--project", str(a))
    assert proc.returncode == 2 and "no project-level config" in proc.stderr and "run without --project" in proc.stderr
    assert files_in(a) == [] and [f for f in files_in(home) if not f.endswith(".install.lock")] == []


def test_relative_and_symlinked_spellings_are_one_record(home: Path, data_dir: Path, repos, tmp_path: Path) -> None:
    a, _ = repos
    link = tmp_path / "link-to-A"
    link.symlink_to(a)
    for spelling, cwd in ((".", a), ("../A", a.parent / "B"), (str(link), tmp_path)):
        assert run_cli("init", "--agent", "claude", "--project", spelling, cwd=cwd).returncode == 0
    records = [json.loads(p.read_text())["path"] for p in (data_dir / "installed").glob("*.json")]
    assert sorted(records) == sorted({str(a / ".claude" / "settings.local.json"), str(a / ".mcp.json"), str(a / "CLAUDE.md")})
    assert run_cli("uninstall", "--agent", "claude", "--project", str(link), cwd=tmp_path).returncode == 0
    assert files_in(a) == []


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_two_repos_typed_as_dot_keep_their_own_records_and_the_wrapper(home: Path, data_dir: Path, repos, name: str) -> None:
    a, b = repos
    for repo in (a, b):
        assert run_cli("init", "--agent", name, "--project", ".", cwd=repo).returncode == 0
    b_files = {p: p.read_bytes() for p in b.rglob("*") if p.is_file()}
    proc = run_cli("uninstall", "--agent", name, "--project", ".", cwd=a)
    assert proc.returncode == 0, proc.stderr
    assert files_in(a) == []
    assert {p: p.read_bytes() for p in b.rglob("*") if p.is_file()} == b_files
    proc = run_cli("uninstall", "--agent", name, "--project", ".", cwd=b)
    assert proc.returncode == 0 and files_in(b) == []


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_a_project_uninstall_keeps_the_wrapper_a_user_install_calls(home: Path, data_dir: Path, repos, name: str) -> None:
    """Project files call `leanctx-hook` from PATH, so only user-level installs use the wrapper."""
    a, _ = repos
    assert run_cli("init", "--agent", name, "--project", ".", cwd=a).returncode == 0
    assert not wrapper.wrapper_path(data_dir).exists(), "a project install has no use for the wrapper"
    assert run_cli("init", "--agent", name).returncode == 0
    proc = run_cli("uninstall", "--agent", name, "--project", ".", cwd=a)
    assert proc.returncode == 0 and files_in(a) == []
    assert wrapper.wrapper_path(data_dir).exists(), "the user-level hooks still call the wrapper"
    assert "Removed the hook wrapper" not in proc.stdout
    proc = run_cli("uninstall", "--agent", name)
    assert proc.returncode == 0 and "Removed the hook wrapper" in proc.stdout
    assert not wrapper.wrapper_path(data_dir).exists()


def test_wrapper_stays_while_a_user_level_config_calls_it_without_a_record(home: Path, data_dir: Path, repos) -> None:
    """Records can be lost (a wiped data dir's installed/): the configs themselves are the truth."""
    a, _ = repos
    assert run_cli("init", "--agent", "codex", "--no-mcp").returncode == 0
    for record in (data_dir / "installed").iterdir():
        record.unlink()
    assert run_cli("init", "--agent", "claude", "--project", ".", cwd=a).returncode == 0
    assert run_cli("uninstall", "--agent", "claude", "--project", ".", cwd=a).returncode == 0
    assert wrapper.wrapper_path(data_dir).exists(), "~/.codex/hooks.json still calls it"
    assert run_cli("uninstall", "--agent", "codex").returncode == 0
    assert not wrapper.wrapper_path(data_dir).exists()


def test_records_an_older_leanctx_keyed_by_the_typed_path_are_still_used(home: Path, data_dir: Path, repos) -> None:
    """Before, `--project .` was recorded under `.claude/settings.local.json` as typed: runs
    from the same folder find those records, move them to the real key, and take all out."""
    a, _ = repos
    (a / "CLAUDE.md").write_text("# mine\n")
    assert run_cli("init", "--agent", "claude", "--project", ".", cwd=a).returncode == 0
    installed = data_dir / "installed"
    for record_path in list(installed.glob("*.json")):  # rewrite them as an older leanctx kept them
        record = json.loads(record_path.read_text())
        typed = str(Path(record["path"]).relative_to(a))
        legacy = installed / (hashlib.sha256(typed.encode()).hexdigest()[:20] + ".json")
        if record["baseline_backup"]:
            record["baseline_backup"] = str(Path(record["baseline_backup"]).rename(legacy.with_suffix(".orig")))
        record["path"] = typed
        legacy.write_text(json.dumps(record))
        record_path.unlink()
    assert run_cli("init", "--agent", "claude", "--project", ".", "--bot", cwd=a).returncode == 0
    proc = run_cli("uninstall", "--agent", "claude", "--project", ".", cwd=a)
    assert proc.returncode == 0, proc.stderr
    assert files_in(a) == ["CLAUDE.md"] and (a / "CLAUDE.md").read_text() == "# mine\n"
    assert list(installed.iterdir()) == []
