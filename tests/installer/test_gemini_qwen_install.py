"""`leanctx init/uninstall --agent gemini|qwen`: one settings.json holds hooks and MCP server.

Host facts (verified on Gemini CLI 0.61.0 and Qwen Code 0.15.10, see leanctx/agents/gemini.py and
qwen.py): handler timeouts are milliseconds, MCP entries carry no `type`, comments are accepted
but a trailing comma stops Gemini (exit 52) and makes Qwen rename the file, and Qwen rewrites a
settings file without `"$version"` on its first start.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from leanctx.installer import jsonc
from tests.conftest import run_cli

USER_TEXT = '{\n  // my theme\n  "ui": {"theme": "GitHub"},\n  "mcpServers": {"mine": {"command": "mine-server"}}\n}\n'


def settings(home: Path, host: str) -> Path:
    return home / f".{host}" / "settings.json"


@pytest.mark.parametrize("host", ["gemini", "qwen"])
def test_user_level_init_twice_then_uninstall_is_byte_identical(home: Path, host: str) -> None:
    path = settings(home, host)
    path.parent.mkdir()
    path.write_text(USER_TEXT)
    first = run_cli("init", "--agent", host)
    assert first.returncode == 0, first.stderr  # comments are fine for both hosts: no warning
    after_first = path.read_bytes()
    assert run_cli("init", "--agent", host).returncode == 0 and path.read_bytes() == after_first
    value = jsonc.loads(path.read_text())
    handlers = [h for groups in value["hooks"].values() for g in groups for h in g["hooks"]]
    assert handlers and all(h["timeout"] == 10000 for h in handlers)  # milliseconds: 10 would kill the hook
    assert value["mcpServers"]["leanctx"]["args"] == ["mcp"] and "type" not in value["mcpServers"]["leanctx"]
    assert value["mcpServers"]["mine"] == {"command": "mine-server"} and "// my theme" in path.read_text()
    rules = (home / f".{host}" / f"{host.upper()}.md").read_text()
    assert "ctx_read" in rules
    proc = run_cli("uninstall", "--agent", host)
    assert proc.returncode == 0, proc.stderr
    assert path.read_text() == USER_TEXT and not (home / f".{host}" / f"{host.upper()}.md").exists()


def test_gemini_events_and_read_rule(home: Path) -> None:
    assert run_cli("init", "--agent", "gemini", "--guard").returncode == 0
    value = json.loads(settings(home, "gemini").read_text())
    # AfterTool: what read_file and run_shell_command delivered, and the end of a subagent's window
    assert list(value["hooks"]) == ["SessionStart", "BeforeAgent", "PreCompress", "AfterAgent", "SessionEnd", "BeforeTool", "AfterTool"]
    before_tool = value["hooks"]["BeforeTool"][0]
    assert "matcher" not in before_tool and before_tool["hooks"][0]["command"].endswith("gemini BeforeTool --guard --read-gate --builtin-read")
    assert "`mcp_leanctx_ctx_read`" in (home / ".gemini" / "GEMINI.md").read_text()
    assert run_cli("uninstall", "--agent", "gemini").returncode == 0
    run_cli("init", "--agent", "gemini", "--mcp-name", "lc")
    value = json.loads(settings(home, "gemini").read_text())
    # Gemini's own MCP tool name, as a regex, beside its reader, its shell and invoke_agent
    assert value["hooks"]["BeforeTool"][0]["matcher"] == "mcp_lc_ctx_read|read_file|run_shell_command|invoke_agent"
    assert "`mcp_lc_ctx_read`" in (home / ".gemini" / "GEMINI.md").read_text()


def test_qwen_read_rule_says_how_to_load_the_deferred_tool(home: Path) -> None:
    assert run_cli("init", "--agent", "qwen").returncode == 0
    rules = (home / ".qwen" / "QWEN.md").read_text()
    assert '`tool_search` with `{"query": "select:mcp__leanctx__ctx_read"}`' in rules
    value = json.loads(settings(home, "qwen").read_text())
    assert "Notification" in value["hooks"] and value["hooks"]["PreToolUse"][0]["matcher"] == "mcp__leanctx__ctx_read|read_file|run_shell_command"


@pytest.mark.parametrize("host", ["gemini", "qwen"])
def test_project_level(home: Path, tmp_path: Path, host: str) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    proc = run_cli("init", "--agent", host, "--project", str(proj))
    assert proc.returncode == 0, proc.stderr
    value = json.loads((proj / f".{host}" / "settings.json").read_text())
    commands = [h["command"] for groups in value["hooks"].values() for g in groups for h in g["hooks"]]
    assert commands and all(c.startswith(f"leanctx-hook {host} ") for c in commands)  # no path of this machine
    assert value["mcpServers"]["leanctx"] == {"command": "leanctx", "args": ["mcp"]}
    assert "ctx_read" in (proj / f"{host.upper()}.md").read_text()
    assert not settings(home, host).exists()
    assert run_cli("uninstall", "--agent", host, "--project", str(proj)).returncode == 0
    assert sorted(p.name for p in proj.iterdir()) == []


@pytest.mark.parametrize(("host", "effect"), [("gemini", "it refuses to start (exit 52)"), ("qwen", "renames this file to settings.json.corrupted")])
def test_trailing_comma_is_flagged_with_what_the_host_does(home: Path, host: str, effect: str) -> None:
    path = settings(home, host)
    path.parent.mkdir()
    path.write_text('{\n  // fine\n  "ui": {"theme": "x",},\n}\n')
    proc = run_cli("init", "--agent", host)
    assert proc.returncode == 1
    warning = [line for line in proc.stderr.splitlines() if line.startswith("WARNING: ")]
    assert len(warning) == 1 and effect in warning[0] and "trailing comma at line 3" in warning[0]
    assert "comment" not in warning[0]


@pytest.mark.parametrize("host", ["gemini", "qwen"])
def test_byte_order_mark_is_flagged(home: Path, host: str) -> None:
    """Verified on both CLIs: a settings.json starting with a BOM stops Gemini (exit 52) and is
    renamed away by Qwen. init keeps the user's bytes and says so."""
    path = settings(home, host)
    path.parent.mkdir()
    path.write_bytes(b'\xef\xbb\xbf{"ui": {}}\n')
    proc = run_cli("init", "--agent", host)
    assert proc.returncode == 1 and "the byte order mark at the start of the file" in proc.stderr
    assert path.read_bytes().startswith(b"\xef\xbb\xbf") and b"leanctx-hook" in path.read_bytes()


@pytest.mark.parametrize("host", ["gemini", "qwen"])
def test_unparseable_settings_are_left_untouched(home: Path, host: str) -> None:
    path = settings(home, host)
    path.parent.mkdir()
    path.write_text('{"ui": ')
    proc = run_cli("init", "--agent", host)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert str(path).replace(str(home), "~") in proc.stderr or str(path) in proc.stderr
    assert path.read_text() == '{"ui": ' and not (home / f".{host}" / f"{host.upper()}.md").exists()


def test_qwen_rewrite_then_uninstall_takes_only_our_entries(home: Path) -> None:
    """Qwen rewrites a settings file without "$version" on its first start (comment-json: comments
    kept, re-indented, "$version" added). Uninstall must still take exactly our entries out."""
    path = settings(home, "qwen")
    path.parent.mkdir()
    path.write_text(USER_TEXT)
    assert run_cli("init", "--agent", "qwen").returncode == 0
    value = jsonc.loads(path.read_text())
    value["$version"] = 4
    body = json.dumps(value, indent=4)
    path.write_text(body[:1] + "\n    // my theme" + body[1:] + "\n")  # what Qwen leaves: comment kept, 4 spaces
    proc = run_cli("uninstall", "--agent", "qwen")
    assert proc.returncode == 0, proc.stderr
    text = path.read_text()
    assert "leanctx" not in text and "// my theme" in text
    assert jsonc.loads(text) == {"$version": 4, "ui": {"theme": "GitHub"}, "mcpServers": {"mine": {"command": "mine-server"}}}
    assert re.search(r'\n {4}"ui"', text)  # the host's layout stays


@pytest.mark.parametrize(("host", "switch", "said"), [
    ("gemini", {"hooksConfig": {"enabled": False}}, '"hooksConfig": {"enabled": false} turns off every hook'),
    ("gemini", {"hooksConfig": {"disabled": ["~/.local/share/leanctx/bin/leanctx-hook gemini BeforeAgent"]}},
     '"hooksConfig.disabled" lists leanctx\'s hook(s)'),
    ("qwen", {"disableAllHooks": True}, '"disableAllHooks": true turns off every hook'),
])
def test_a_switch_that_turns_our_hooks_off_is_named(home: Path, tmp_path: Path, host: str, switch: dict, said: str) -> None:
    """init warns (exit 1) and doctor fails while the host's own switch keeps every hook off."""
    path = settings(home, host)
    path.parent.mkdir()
    path.write_text(json.dumps(switch))
    proc = run_cli("init", "--agent", host)
    assert proc.returncode == 1 and said in proc.stderr, proc.stderr
    assert json.loads(path.read_text()).items() >= switch.items()  # the user's switch is theirs: kept
    assert run_cli("doctor", "--agent", host).returncode != 0
    proj = tmp_path / "proj"
    (proj / f".{host}").mkdir(parents=True)
    (proj / f".{host}" / "settings.json").write_text(json.dumps(switch))
    assert said in run_cli("init", "--agent", host, "--project", str(proj)).stderr
