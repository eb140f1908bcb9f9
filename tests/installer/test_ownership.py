"""init and uninstall never damage or take what the user has in a config file: one file may hold
several of our parts, an entry we did not write is never ours, and a project's files name no path of this machine. Every test runs the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import tomlkit

from tests.conftest import run_cli

AGENTS = ("claude", "codex", "cursor", "codebuddy", "droid")


def snapshot(*roots: Path, skip: Path | None = None) -> dict[str, bytes]:
    """Every file under `roots` (the data dir left out: backups and manifests are ours)."""
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and (skip is None or skip not in path.parents):
                found[str(path)] = path.read_bytes()
    return found


def ok(*args: str) -> str:
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- init twice = init once, blocks that share a file are independent -------------------


@pytest.mark.parametrize("level", ["user", "project"])
@pytest.mark.parametrize("bot", [False, True], ids=["coding", "bot"])
@pytest.mark.parametrize("name", AGENTS)
def test_init_three_times_equals_once(home: Path, data_dir: Path, tmp_path: Path, name: str, level: str, bot: bool) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    args = ["init", "--agent", name] + (["--project", str(project)] if level == "project" else []) + (["--bot"] if bot else [])
    ok(*args)
    first = snapshot(home, project, skip=data_dir)
    assert first
    for _ in range(2):
        out = ok(*args)
        assert "took our part out" not in out and "updated" not in out, out
        assert snapshot(home, project, skip=data_dir) == first


def test_codex_agents_md_keeps_both_blocks_and_their_order(home: Path, data_dir: Path) -> None:
    """bot -> coding -> bot gives back the same bytes; the read rule never leaves with the
    conversation-state block; uninstall gives back the user's file."""
    agents_md = write(home / ".codex" / "AGENTS.md", "# My rules\n\nAlways answer in French.\n")
    original = agents_md.read_bytes()
    ok("init", "--agent", "codex", "--bot")
    bot = agents_md.read_bytes()
    assert bot.index(b"<!-- leanctx:conversation-state -->") < bot.index(b"<!-- leanctx:ctx-read -->")
    ok("init", "--agent", "codex")
    coding = agents_md.read_text()
    assert "leanctx:conversation-state" not in coding and "<!-- leanctx:ctx-read -->" in coding
    assert coding.startswith("# My rules\n\nAlways answer in French.\n")
    ok("init", "--agent", "codex", "--bot")
    assert agents_md.read_bytes() == bot
    ok("uninstall", "--agent", "codex")
    assert agents_md.read_bytes() == original


def test_removing_one_block_keeps_the_other_in_a_file_we_created(home: Path, data_dir: Path) -> None:
    ok("init", "--agent", "codex", "--bot")
    agents_md = home / ".codex" / "AGENTS.md"
    out = ok("init", "--agent", "codex")  # the bot block goes, the read rule stays
    assert "updated ~/.codex/AGENTS.md: took out the conversation-state instructions" in out
    assert "<!-- leanctx:ctx-read -->" in agents_md.read_text()
    ok("init", "--agent", "codex", "--no-mcp")  # now the read rule goes too: the file was ours
    assert not agents_md.exists()


def test_doctor_fix_keeps_the_read_rule(home: Path, data_dir: Path) -> None:
    ok("init", "--agent", "codex")
    agents_md = home / ".codex" / "AGENTS.md"
    rule = agents_md.read_bytes()
    (data_dir / "bin" / "leanctx-hook").unlink()  # something doctor --fix must repair
    proc = run_cli("doctor", "--agent", "codex", "--fix", "--json")
    assert json.loads(proc.stdout)["fixed"] == ["codex"]
    assert agents_md.read_bytes() == rule
    assert (data_dir / "bin" / "leanctx-hook").exists()


def test_old_manifest_without_parts_still_uninstalls(home: Path, data_dir: Path) -> None:
    """A record written before parts were tracked: read, and only ever removed from surgically."""
    agents_md = write(home / ".codex" / "AGENTS.md", "# Mine\n")
    ok("init", "--agent", "codex", "--bot")
    for record in (data_dir / "installed").glob("*.json"):
        raw = json.loads(record.read_text())
        raw.pop("parts")
        record.write_text(json.dumps(raw))
    ok("init", "--agent", "codex")
    assert "<!-- leanctx:ctx-read -->" in agents_md.read_text()
    ok("uninstall", "--agent", "codex")
    assert agents_md.read_text() == "# Mine\n"
    assert not (home / ".codex" / "hooks.json").exists()


# -- a file two agents' installs share ---------------------------------------------------


@pytest.mark.parametrize("first_out", ["codebuddy", "claude"])
def test_shared_mcp_json_stays_while_another_agent_uses_it(home: Path, data_dir: Path, tmp_path: Path, first_out: str) -> None:
    project = tmp_path / "proj"
    mcp_json = write(project / ".mcp.json", '{\n  "mcpServers": {\n    "github": {"command": "gh-mcp"}\n  }\n}\n')
    original = snapshot(project)
    ok("init", "--agent", "claude", "--project", str(project))
    ok("init", "--agent", "codebuddy", "--project", str(project))
    both = mcp_json.read_bytes()
    out = ok("uninstall", "--agent", first_out, "--project", str(project))
    assert mcp_json.read_bytes() == both
    assert "left our entry in" in out and "uses it too" in out
    other = "claude" if first_out == "codebuddy" else "codebuddy"
    ok("uninstall", "--agent", other, "--project", str(project))
    assert snapshot(project) == original


def test_shared_mcp_json_created_by_us_goes_with_the_last_install(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    ok("init", "--agent", "codebuddy", "--project", str(project))
    ok("init", "--agent", "claude", "--project", str(project))
    ok("uninstall", "--agent", "codebuddy", "--project", str(project))
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["leanctx"]["command"] == "leanctx"
    assert (project / ".claude" / "settings.local.json").exists() and (project / "CLAUDE.md").exists()
    ok("uninstall", "--agent", "claude", "--project", str(project))
    assert list(project.iterdir()) == []


# -- a server named leanctx that we did not write ----------------------------------------

USERS_SERVER = {"command": "node", "args": ["/opt/my-leanctx/server.js"], "env": {"TOKEN": "s3cret"}}


@pytest.mark.parametrize(("name", "relative", "level"), [
    ("claude", ".claude.json", "user"),
    ("codebuddy", ".codebuddy.json", "user"),
    ("cursor", ".cursor/mcp.json", "user"),
    ("claude", "proj/.mcp.json", "project"),
    ("cursor", "proj/.cursor/mcp.json", "project"),
])
def test_users_own_leanctx_server_in_json_is_refused(home: Path, data_dir: Path, tmp_path: Path, name: str, relative: str, level: str) -> None:
    root = tmp_path if level == "project" else home
    config = write(root / relative, json.dumps({"numStartups": 3, "mcpServers": {"leanctx": USERS_SERVER}}, indent=2))
    where = ["--project", str(tmp_path / "proj")] if level == "project" else []
    before = snapshot(home, tmp_path / "proj", skip=data_dir)
    proc = run_cli("init", "--agent", name, *where)
    assert proc.returncode == 2
    assert str(config) in proc.stderr and "'leanctx'" in proc.stderr and "--mcp-name NAME" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert snapshot(home, tmp_path / "proj", skip=data_dir) == before
    ok("uninstall", "--agent", name, *where)
    assert config.read_text() == before[str(config)].decode()


def test_users_own_leanctx_server_in_toml_is_refused(home: Path, data_dir: Path) -> None:
    text = '# mine\n[mcp_servers.leanctx]\ncommand = "my-ctx"\nargs = ["serve"]\nenv = { TOKEN = "s3cret" }\n'
    config = write(home / ".codex" / "config.toml", text)
    proc = run_cli("init", "--agent", "codex")
    assert proc.returncode == 2 and str(config) in proc.stderr and "--mcp-name" in proc.stderr
    assert config.read_text() == text
    assert not (home / ".codex" / "hooks.json").exists()
    ok("uninstall", "--agent", "codex")
    assert config.read_text() == text


def test_mcp_name_registers_ours_beside_theirs_end_to_end(home: Path, data_dir: Path) -> None:
    claude_json = write(home / ".claude.json", json.dumps({"mcpServers": {"leanctx": USERS_SERVER}}, indent=2) + "\n")
    settings = write(home / ".claude" / "settings.json", '{\n  "model": "opus"\n}\n')
    original = snapshot(home, skip=data_dir)
    ok("init", "--agent", "claude", "--mcp-name", "leanctx-ctx")
    servers = json.loads(claude_json.read_text())["mcpServers"]
    assert servers["leanctx"] == USERS_SERVER
    assert servers["leanctx-ctx"]["args"] == ["mcp"]
    gate = json.loads(settings.read_text())["hooks"]["PreToolUse"]
    assert [g["matcher"] for g in gate] == ["mcp__leanctx-ctx__ctx_read|Read|Bash"]
    assert "`mcp__leanctx-ctx__ctx_read` in Claude Code" in (home / ".claude" / "CLAUDE.md").read_text()
    once = snapshot(home, skip=data_dir)
    ok("init", "--agent", "claude")  # the name is remembered
    assert snapshot(home, skip=data_dir) == once
    report = json.loads(run_cli("doctor", "--agent", "claude", "--json").stdout)
    mcp = {c["name"]: c for c in report["agents"][0]["checks"]}["mcp server"]
    assert mcp["status"] == "ok" and "leanctx-ctx" in mcp["detail"]
    ok("uninstall", "--agent", "claude")
    assert snapshot(home, skip=data_dir) == original


@pytest.mark.parametrize("name", ["my server", "", "a/b", "x" * 65, "ctx.read"])
def test_bad_mcp_name_is_refused(home: Path, data_dir: Path, name: str) -> None:
    proc = run_cli("init", "--agent", "claude", "--mcp-name", name)
    assert proc.returncode == 2 and "--mcp-name" in proc.stderr and "Traceback" not in proc.stderr
    assert not (home / ".claude").exists() and not (home / ".claude.json").exists()


@pytest.mark.parametrize("had_servers", [False, True])
def test_uninstall_after_the_host_reserialised_the_file(home: Path, data_dir: Path, had_servers: bool) -> None:
    """Claude Code rewrites ~/.claude.json (indent, key order): we still take out exactly ours,
    keep the user's servers, and drop only a container we created."""
    start = {"numStartups": 1, "mcpServers": {"github": {"command": "gh-mcp", "args": []}}} if had_servers else {"numStartups": 1}
    claude_json = write(home / ".claude.json", json.dumps(start, indent=2) + "\n")
    ok("init", "--agent", "claude")
    value = json.loads(claude_json.read_text())
    value["mcpServers"]["notes"] = {"command": "notes-mcp"}  # the user adds one through the host
    value["tipsHistory"] = {"x": 1}
    claude_json.write_text(json.dumps(value, indent=4, sort_keys=True))
    ok("uninstall", "--agent", "claude")
    after = json.loads(claude_json.read_text())
    expected_servers = {**start.get("mcpServers", {}), "notes": {"command": "notes-mcp"}}
    assert after == {"numStartups": 1, "tipsHistory": {"x": 1}, "mcpServers": expected_servers}


def test_uninstall_keeps_a_server_the_user_put_in_place_of_ours(home: Path, data_dir: Path) -> None:
    ok("init", "--agent", "codex")
    config = home / ".codex" / "config.toml"
    doc = tomlkit.parse(config.read_text())
    doc["mcp_servers"]["leanctx"] = {"command": "my-ctx", "env": {"TOKEN": "s3cret"}}
    config.write_text(tomlkit.dumps(doc))
    ok("uninstall", "--agent", "codex")
    assert tomlkit.parse(config.read_text()).unwrap()["mcp_servers"]["leanctx"] == {"command": "my-ctx", "env": {"TOKEN": "s3cret"}}


# -- our handler inside the user's own hook group ----------------------------------------


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_old_handler_in_users_group_is_updated_in_place(home: Path, data_dir: Path, name: str) -> None:
    theirs = {"type": "command", "command": "notify-send done"}
    stale = {"type": "command", "command": f"/old/data/bin/leanctx-hook {name} Stop", "timeout": 5}
    config = home / (".claude/settings.json" if name == "claude" else ".codex/hooks.json")
    start = {"hooks": {"Stop": [{"hooks": [theirs, stale]}], "SessionStart": [{"matcher": "startup", "hooks": [stale | {"command": f"/old/leanctx-hook {name} SessionStart"}]}]}}
    write(config, json.dumps(start, indent=2) + "\n")
    ok("init", "--agent", name, "--no-mcp")
    stop = json.loads(config.read_text())["hooks"]["Stop"]
    assert len(stop) == 1 and stop[0]["hooks"][0] == theirs  # their group, their handler first
    ours = stop[0]["hooks"][1]
    assert ours["command"] == f"{data_dir / 'bin' / 'leanctx-hook'} {name} Stop" and ours["timeout"] == 10
    once = config.read_bytes()
    ok("init", "--agent", name, "--no-mcp")
    assert config.read_bytes() == once
    ok("uninstall", "--agent", name)
    after = json.loads(config.read_text())
    assert after["hooks"]["Stop"] == [{"hooks": [theirs]}]
    assert "leanctx-hook" not in config.read_text()


def test_users_group_with_a_prompt_handler_beside_ours_is_theirs(home: Path, data_dir: Path) -> None:
    prompt = {"type": "prompt", "prompt": "Is the task done?"}
    stale = {"type": "command", "command": "/old/leanctx-hook claude Stop"}
    config = write(home / ".claude" / "settings.json", json.dumps({"hooks": {"Stop": [{"hooks": [prompt, stale]}]}}))
    ok("init", "--agent", "claude", "--no-mcp")
    ok("uninstall", "--agent", "claude")
    assert json.loads(config.read_text()) == {"hooks": {"Stop": [{"hooks": [prompt]}]}}


# -- inline tables and dotted keys in config.toml ---------------------------------------


@pytest.mark.parametrize("text", [
    'mcp_servers = { docs = { command = "docs-mcp" } }\n',
    'model = "o3"\nmcp_servers.docs.command = "docs-mcp"\n',
    '[mcp_servers]\ndocs = { command = "docs-mcp" }\n',
])
def test_codex_config_with_inline_or_dotted_servers(home: Path, data_dir: Path, text: str) -> None:
    config = write(home / ".codex" / "config.toml", text)
    proc = run_cli("init", "--agent", "codex")
    assert proc.returncode == 0, proc.stderr
    servers = tomlkit.parse(config.read_text()).unwrap()["mcp_servers"]
    assert servers["docs"] == {"command": "docs-mcp"}
    assert servers["leanctx"]["args"] == ["mcp"]
    ok("init", "--agent", "codex")
    ok("uninstall", "--agent", "codex")
    assert config.read_text() == text


def test_codex_trust_into_inline_hooks_table(home: Path, data_dir: Path) -> None:
    text = 'hooks = { state = { "elsewhere:stop:0:0" = { enabled = false } } }\n'
    config = write(home / ".codex" / "config.toml", text)
    proc = run_cli("init", "--agent", "codex", "--trust", "--no-mcp")
    assert proc.returncode == 0, proc.stderr
    state = tomlkit.parse(config.read_text()).unwrap()["hooks"]["state"]
    assert state["elsewhere:stop:0:0"] == {"enabled": False}
    assert sum(1 for v in state.values() if "trusted_hash" in v) == 7  # the coding profile without the read gate
    ok("uninstall", "--agent", "codex")
    assert config.read_text() == text


# -- a project's files name no path of this machine -------------------------------------


def test_project_files_are_portable(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    for name in AGENTS:
        ok("init", "--agent", name, "--project", str(project), "--bot", "--guard")
    written = snapshot(project)
    assert len(written) >= 12
    machine = {str(tmp_path), str(home), str(data_dir), sys.executable, sys.prefix, str(Path(sys.executable).parent)}
    for path, data in written.items():
        text = data.decode()
        assert not [m for m in machine if m in text], path
    hooks = json.loads((project / ".codex" / "hooks.json").read_text())["hooks"]
    assert hooks["Stop"][0]["hooks"][0]["command"] == "leanctx-hook codex Stop --bot"
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["leanctx"]["command"] == "leanctx"
    assert "`leanctx state show`" in (project / "AGENTS.md").read_text()
    for name in AGENTS:
        ok("uninstall", "--agent", name, "--project", str(project))
    assert list(project.iterdir()) == []


def test_project_hook_command_runs_from_path(home: Path, data_dir: Path, tmp_path: Path) -> None:
    """`leanctx-hook` (the console script a project's entries call) publishes like the wrapper."""
    script = shutil.which("leanctx-hook", path=str(Path(sys.executable).parent))
    assert script, "pip install -e . puts the leanctx-hook console script beside python"
    import subprocess

    payload = json.dumps({"session_id": "s-portable", "transcript_path": "/t.jsonl", "cwd": str(tmp_path), "hook_event_name": "Stop"})
    proc = subprocess.run(["/bin/sh", "-c", "leanctx-hook claude Stop"], input=payload, capture_output=True, text=True,
                          env=dict(os.environ, PATH=f"{Path(script).parent}:/usr/bin:/bin"), timeout=60)
    assert proc.returncode == 0 and proc.stdout == ""
    assert json.loads((data_dir / "conversations" / "claude" / "s-portable.json").read_text())["last_event"] == "Stop"


def test_doctor_flags_a_hook_command_missing_from_path(home: Path, data_dir: Path) -> None:
    ok("init", "--agent", "claude", "--no-mcp")
    settings = home / ".claude" / "settings.json"
    settings.write_text(settings.read_text().replace(str(data_dir / "bin" / "leanctx-hook"), "leanctx-hook"))
    env = dict(os.environ, PATH="/usr/bin:/bin")
    proc = run_cli("doctor", "--agent", "claude", "--json", env=env)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["agents"][0]["checks"]}
    assert proc.returncode == 1
    assert checks["on PATH"]["status"] == "fail" and "leanctx-hook" in checks["on PATH"]["detail"]
