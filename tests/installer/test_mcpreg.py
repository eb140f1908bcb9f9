"""init registers leanctx's MCP server and its read rule in each host's own files; uninstall takes them out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import tomlkit

from leanctx import agents
from leanctx.installer import mcpreg
from leanctx.installer.commands import run_init, run_uninstall
from tests.conftest import run_cli

WRAPPER = "@WRAPPER@"  # the data dir's wrapper, filled in by each test
EXPECTED = {
    "claude": (".claude.json", {"type": "stdio", "command": WRAPPER, "args": ["mcp"]}),
    "codebuddy": (".codebuddy.json", {"type": "stdio", "command": WRAPPER, "args": ["mcp"]}),
    "cursor": (".cursor/mcp.json", {"command": WRAPPER, "args": ["mcp"]}),
}


def wrapper_of(data_dir: Path) -> str:
    return str(data_dir / "bin" / "leanctx-hook")
RULES = {"claude": ".claude/CLAUDE.md", "codebuddy": ".codebuddy/CODEBUDDY.md", "codex": ".codex/AGENTS.md"}


def init(home: Path, data_dir: Path, name: str, **kw) -> int:
    return run_init([agents.get(name)], home, data_dir, None, dry_run=False, **kw)


def uninstall(home: Path, data_dir: Path, name: str) -> int:
    return run_uninstall([agents.get(name)], home, data_dir, None, dry_run=False, all_agents=False)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_json_hosts_register_next_to_other_servers(home: Path, data_dir: Path, name: str) -> None:
    relative, entry = EXPECTED[name]
    entry = dict(entry, command=wrapper_of(data_dir))
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    original = '{\n  "numStartups": 4,\n  "mcpServers": {\n    "github": {"command": "gh-mcp", "args": []}\n  }\n}\n'
    path.write_text(original)
    assert init(home, data_dir, name) == 0
    value = json.loads(path.read_text())  # strict JSON: the hosts do not accept comments here
    assert value["mcpServers"]["leanctx"] == entry
    assert value["mcpServers"]["github"] == {"command": "gh-mcp", "args": []}
    assert list(value) == ["numStartups", "mcpServers"]
    once = path.read_bytes()
    init(home, data_dir, name)
    assert path.read_bytes() == once
    assert mcpreg.registered(agents.get(name), home, None) == entry
    uninstall(home, data_dir, name)
    assert path.read_text() == original


def test_codex_registers_a_toml_table_keeping_comments(home: Path, data_dir: Path) -> None:
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    original = '# my Codex settings\nmodel = "o3"  # fast enough\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    path.write_text(original)
    init(home, data_dir, "codex")
    text = path.read_text()
    assert text.startswith(original)
    value = tomlkit.parse(text).unwrap()
    assert value["mcp_servers"]["leanctx"] == {"command": wrapper_of(data_dir), "args": ["mcp"],
                                               "tools": {"ctx_read": {"approval_mode": "approve"}}}
    assert value["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    # a user edit elsewhere: uninstall goes surgical and keeps it
    path.write_text(text.replace('"o3"', '"o4"'))
    uninstall(home, data_dir, "codex")
    assert path.read_text() == original.replace('"o3"', '"o4"')


@pytest.mark.parametrize("trust", [False, True])
def test_codex_config_with_a_byte_order_mark_is_edited_and_keeps_it(home: Path, data_dir: Path, trust: bool) -> None:
    """Codex 0.171 reads a config.toml that starts with a BOM (tests/e2e/test_codex_e2e.py shows
    `codex mcp list` listing its servers), so init edits it, the mark stays first, and uninstall
    gives back the same bytes (or, after a user edit elsewhere, the file with that edit and the mark)."""
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    original = '\ufeff# my Codex settings\nmodel = "o3"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    path.write_bytes(original.encode("utf-8"))
    assert init(home, data_dir, "codex", trust=trust) == 0
    text = path.read_bytes().decode("utf-8")
    assert text.startswith("\ufeff# my Codex settings\n") and text.count("\ufeff") == 1
    value = tomlkit.parse(text[1:]).unwrap()
    assert set(value["mcp_servers"]) == {"docs", "leanctx"}
    assert ("hooks" in value) is trust  # the trust tables went into the same file
    uninstall(home, data_dir, "codex")
    assert path.read_bytes() == original.encode("utf-8")
    assert init(home, data_dir, "codex", trust=trust) == 0
    path.write_bytes(path.read_bytes().replace(b'"o3"', b'"o4"'))  # surgical removal keeps the mark too
    uninstall(home, data_dir, "codex")
    assert path.read_bytes() == original.replace('"o3"', '"o4"').encode("utf-8")


def test_files_created_only_for_us_are_removed(home: Path, data_dir: Path) -> None:
    init(home, data_dir, "claude")
    assert (home / ".claude.json").exists() and (home / ".claude" / "CLAUDE.md").exists()
    uninstall(home, data_dir, "claude")
    assert not (home / ".claude.json").exists() and not (home / ".claude").exists()


@pytest.mark.parametrize("name", sorted(RULES))
def test_read_rule_is_a_removable_block_beside_the_users_text(home: Path, data_dir: Path, name: str) -> None:
    path = home / RULES[name]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# My rules\n\nAlways answer in French.\n")
    init(home, data_dir, name)
    text = path.read_text()
    assert text.startswith("# My rules\n\nAlways answer in French.\n")
    assert "<!-- leanctx:ctx-read -->" in text and "<!-- /leanctx:ctx-read -->" in text
    assert "ctx_read" in text and "fresh=true" in text
    path.write_text(text + "\nAlso be brief.\n")  # the user keeps writing after our block
    uninstall(home, data_dir, name)
    assert path.read_text() == "# My rules\n\nAlways answer in French.\n\nAlso be brief.\n"


def test_no_mcp_takes_the_registration_out_again(home: Path, data_dir: Path) -> None:
    init(home, data_dir, "cursor")
    path = home / ".cursor" / "mcp.json"
    assert "leanctx" in json.loads(path.read_text())["mcpServers"]
    init(home, data_dir, "cursor", mcp=False)
    assert not path.exists()
    assert (home / ".cursor" / "hooks.json").exists()  # the hooks stay


def test_project_level_registration(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    for name in ("claude", "cursor", "codex"):
        assert run_init([agents.get(name)], home, data_dir, project, dry_run=False) == 0
    assert json.loads((project / ".mcp.json").read_text())["mcpServers"]["leanctx"] == {"type": "stdio", "command": "leanctx", "args": ["mcp"]}
    assert "leanctx" in json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]
    assert "leanctx" in tomlkit.parse((project / ".codex" / "config.toml").read_text())["mcp_servers"]
    assert (project / ".cursor" / "rules" / "leanctx-ctx-read.mdc").read_text().startswith("---\ndescription:")
    for name in ("claude", "cursor", "codex"):
        run_uninstall([agents.get(name)], home, data_dir, project, dry_run=False, all_agents=False)
    assert list(project.iterdir()) == []


@pytest.mark.parametrize(("relative", "text", "where"), [
    (".claude.json", '{"mcpServers": {', ":1:"),
    (".claude.json", '{"mcpServers": []}', "mcpServers is not an object"),
    (".codex/config.toml", "[mcp_servers\n", ":1:"),
])
def test_broken_mcp_config_is_refused(home: Path, data_dir: Path, relative: str, text: str, where: str) -> None:
    path = home / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    proc = run_cli("init", "--agent", "codex" if "codex" in relative else "claude")
    assert proc.returncode == 2 and where in proc.stderr and str(path) in proc.stderr
    assert path.read_text() == text
    assert not (home / ".claude" / "settings.json").exists() and not (home / ".codex" / "hooks.json").exists()


def test_codex_entry_from_before_per_tool_approval_is_ours_and_upgraded(home: Path, data_dir: Path) -> None:
    """Earlier versions approved every tool of the server (`default_tools_approval_mode`): that
    entry is still recognised as ours, init narrows it to the reading tools, uninstall removes it."""
    path = home / ".codex" / "config.toml"
    path.parent.mkdir()
    original = '# mine\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    old_entry = (f'\n[mcp_servers.leanctx]\ncommand = {json.dumps(sys.executable)}\nargs = ["-m", "leanctx", "mcp"]\n'
                 'default_tools_approval_mode = "approve"\n')
    path.write_text(original + old_entry)
    assert mcpreg.is_ours(tomlkit.parse(path.read_text()).unwrap()["mcp_servers"]["leanctx"])
    assert init(home, data_dir, "codex") == 0
    entry = tomlkit.parse(path.read_text()).unwrap()["mcp_servers"]["leanctx"]
    assert "default_tools_approval_mode" not in entry and set(entry["tools"]) == {"ctx_read"}
    assert mcpreg.is_ours(entry)
    assert uninstall(home, data_dir, "codex") == 0
    assert "leanctx" not in tomlkit.parse(path.read_text()).unwrap()["mcp_servers"]
    assert path.read_text().startswith(original)


BOT_ARGS = ["mcp", "--profile", "bot"]


@pytest.mark.parametrize("name", ["claude", "codex", "cursor", "opencode"])
def test_the_bot_profile_registers_the_bot_command_and_coding_takes_it_back(home: Path, data_dir: Path, name: str) -> None:
    """`--bot` registers `leanctx mcp --profile bot` (the state tools are offered only then); a
    plain init afterwards registers the coding command again; uninstall removes either."""
    agent = agents.get(name)
    assert run_cli("init", "--agent", name, "--bot").returncode == 0
    command, args, _env = mcpreg.launch(mcpreg.registered(agent, home, None))
    assert args == BOT_ARGS and command == wrapper_of(data_dir)
    if name == "codex":
        assert set(mcpreg.registered(agent, home, None)["tools"]) == {"ctx_read", "ctx_stats"}
    assert run_cli("init", "--agent", name).returncode == 0
    assert mcpreg.launch(mcpreg.registered(agent, home, None))[1] == ["mcp"]
    assert run_cli("uninstall", "--agent", name).returncode == 0
    assert mcpreg.registered(agent, home, None) is None


def test_a_bot_entry_from_before_the_profiles_is_recognised_and_upgraded(home: Path, data_dir: Path) -> None:
    """A bot installed before the profiles has the plain command (which now offers ctx_read
    alone): doctor says so and fails, `doctor --fix` (init --bot) upgrades it, doctor passes."""
    assert run_cli("init", "--agent", "claude", "--bot").returncode == 0
    path = home / ".claude.json"
    path.write_text(path.read_text().replace(', "--profile", "bot"', "").replace(',\n        "--profile",\n        "bot"', ""))
    old = mcpreg.registered(agents.get("claude"), home, None)
    assert old["args"] == ["mcp"] and mcpreg.is_ours(old)
    report = json.loads(run_cli("doctor", "--agent", "claude", "--json").stdout)
    check = next(c for c in report["agents"][0]["checks"] if c["name"] == "mcp server")
    assert check["status"] == "fail" and "offers the coding profile's tools; this install is bot" in check["detail"], check
    assert run_cli("doctor", "--agent", "claude", "--fix").returncode == 0
    assert mcpreg.registered(agents.get("claude"), home, None)["args"] == BOT_ARGS
    report = json.loads(run_cli("doctor", "--agent", "claude", "--json").stdout)
    checks = {c["name"]: c for c in report["agents"][0]["checks"]}
    assert checks["mcp server"]["status"] == "ok", checks["mcp server"]
    assert checks["mcp round trip"]["status"] == "ok" and "state_end_thread" in checks["mcp round trip"]["detail"]


@pytest.mark.parametrize("args", [["-m", "leanctx", "mcp", "--profile", "bot"], ["-m", "leanctx", "mcp", "--profile", "coding"],
                                  ["-m", "leanctx", "mcp"]])
def test_every_command_init_ever_wrote_is_ours(args: list[str]) -> None:
    assert mcpreg.is_ours({"command": sys.executable, "args": args})
    assert mcpreg.is_ours({"command": "/usr/local/bin/leanctx", "args": args[2:]})
    assert mcpreg.is_ours({"command": "/home/u/.local/share/leanctx/bin/leanctx-hook", "args": args[2:]})
    assert not mcpreg.is_ours({"command": "/home/u/bin/other-hook", "args": args[2:]})
    assert not mcpreg.is_ours({"command": sys.executable, "args": [*args, "--verbose"]})
    assert not mcpreg.is_ours({"command": sys.executable, "args": ["-m", "leanctx", "mcp", "--profile", "evil"]})
