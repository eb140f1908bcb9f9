"""Amp: what our plugin sends the hook command and the answers it takes back, where init writes
(the plugin, the flat `amp.mcpServers` key in a JSONC settings file, the guidance file Amp reads),
byte-identical uninstall, and the process walk past Amp's plugin runtime. The plugin itself runs in
Amp's real plugin runtime in tests/e2e/test_amp_e2e.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.agents.amp import tool_server_name
from leanctx.agents.base import PRE_COMPACT, PRE_TOOL, PROMPT, SESSION_START, STOP
from leanctx.installer import jsonc
from tests.conftest import run_cli

AGENT = agents.get("amp")
THREAD = "T-5f0c1a2b-3d4e-4f60-8a7b-9c0d1e2f3a4b"  # Amp's thread id shape
SETTINGS = '{\n  // mine\n  "amp.notifications.enabled": false,\n  "amp.mcpServers": {\n    "other": {"command": "other-mcp", "args": []}, // theirs\n  },\n}\n'


def sent(event: str, **more: object) -> dict:
    """What the plugin sends for `event` (templates/amp-plugin.js: fire)."""
    return {"hook_event_name": event, "session_id": THREAD, "cwd": "/home/u/work/proj", **more}


def settings(home: Path) -> Path:
    return home / ".config" / "amp" / "settings.json"


def test_the_plugins_payloads_normalize_to_amps_thread() -> None:
    start = AGENT.normalize("session.start", sent("session.start", source="startup"))
    assert (start.kind, start.session_id, start.conversation_id, start.cwd) == (SESSION_START, THREAD, THREAD, "/home/u/work/proj")
    prompt = AGENT.normalize("agent.start", sent("agent.start", prompt="read big.py", message_id="7"))
    assert (prompt.kind, prompt.prompt, prompt.message_id) == (PROMPT, "read big.py", "7")
    call = AGENT.normalize("tool.call", sent("tool.call", tool_name="mcp__leanctx__ctx_read", tool_input={"path": "a"}, tool_use_id="toolu_1"))
    assert (call.kind, call.tool_use_id) == (PRE_TOOL, "toolu_1") and AGENT.is_read_tool(call.tool_name)
    assert AGENT.normalize("context.lost", sent("context.lost")).kind == PRE_COMPACT
    end = AGENT.normalize("agent.end", sent("agent.end", last_assistant_message="Done."))
    assert (end.kind, end.reply) == (STOP, "Done.")


def test_answers_the_plugin_takes() -> None:
    deny = AGENT.guard_output("tool.call", "no")
    assert json.loads(deny) == {"decision": "deny", "reason": "no"} and AGENT.check_output("tool.call", deny) is None
    ctx = AGENT.context_output("agent.start", "thread")
    assert json.loads(ctx) == {"context": "thread"} and AGENT.check_output("agent.start", ctx) is None
    assert AGENT.context_output("session.start", "thread") == ""  # session.start cannot add context
    assert AGENT.check_output("agent.end", "") is None and AGENT.check_output("agent.end", '{"x": 1}') is not None


def test_the_plugin_hands_the_id_under_the_argument_our_server_takes() -> None:
    from leanctx.agents.amp import CALL_ID_ARG
    from leanctx.cache.mcpserver import CALL_ID_ARG as SERVERS

    assert CALL_ID_ARG == SERVERS


def test_tool_names_follow_amps_form_of_the_server_name() -> None:
    assert AGENT.read_tool() == "mcp__leanctx__ctx_read"
    assert AGENT.read_tool("my-lean ctx") == "mcp__my_lean_ctx__ctx_read" and tool_server_name("--") == "server"


def test_paths_follow_xdg_and_amp_settings_file(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert AGENT.hook_folder(home, None) == home / ".config" / "amp" / "plugins"
    assert AGENT.mcp_config(home, None) == (settings(home), "json", ("amp.mcpServers",))
    proj = tmp_path / "proj"
    assert AGENT.hook_folder(home, proj) == proj / ".amp" / "plugins"
    assert AGENT.mcp_config(home, proj)[0] == proj / ".amp" / "settings.json"
    (proj / ".amp").mkdir(parents=True)
    (proj / ".amp" / "settings.jsonc").write_text("{}\n")  # Amp reads settings.jsonc when settings.json is not there
    assert AGENT.mcp_config(home, proj)[0] == proj / ".amp" / "settings.jsonc"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert AGENT.hook_folder(home, None) == tmp_path / "xdg" / "amp" / "plugins"
    monkeypatch.setenv("AMP_SETTINGS_FILE", str(tmp_path / "elsewhere.json"))
    assert AGENT.mcp_config(home, None)[0] == tmp_path / "elsewhere.json"


def test_the_rule_goes_into_the_guidance_file_amp_reads(tmp_path: Path, home: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    assert AGENT.rules_path(home, proj) == (proj / "AGENTS.md", "block")
    (proj / "CLAUDE.md").write_text("# ours\n")  # Amp reads only the first of its names in a folder
    assert AGENT.rules_path(home, proj) == (proj / "CLAUDE.md", "block")
    (proj / "AGENT.md").write_text("# ours\n")
    assert AGENT.rules_path(home, proj) == (proj / "AGENT.md", "block")


def test_init_edits_the_settings_in_place_and_uninstall_gives_back_every_byte(home: Path, data_dir: Path) -> None:
    settings(home).parent.mkdir(parents=True)
    settings(home).write_text(SETTINGS)
    proc = run_cli("init", "--agent", "amp")
    assert proc.returncode == 0, proc.stderr
    text = settings(home).read_text()
    assert "// mine" in text and "// theirs" in text
    value = jsonc.loads(text)
    assert set(value["amp.mcpServers"]) == {"other", "leanctx"} and value["amp.mcpServers"]["leanctx"]["args"] == ["mcp"]
    assert "amp" not in value  # the key is flat, dot and all
    plugin = home / ".config" / "amp" / "plugins" / "leanctx.js"
    assert "leanctx-hooks: " in plugin.read_text() and oct(plugin.stat().st_mode & 0o777) == "0o644"
    assert "mcp__leanctx__ctx_read" in (home / ".config" / "amp" / "AGENTS.md").read_text()
    assert run_cli("init", "--agent", "amp").returncode == 0 and settings(home).read_text() == text
    assert run_cli("uninstall", "--agent", "amp").returncode == 0
    assert settings(home).read_text() == SETTINGS and not plugin.exists() and not (home / ".config" / "amp" / "AGENTS.md").exists()


def test_a_server_of_the_users_named_leanctx_is_refused_writing_nothing(home: Path, data_dir: Path) -> None:
    settings(home).parent.mkdir(parents=True)
    mine = '{"amp.mcpServers": {"leanctx": {"command": "my-own", "args": []}}}\n'
    settings(home).write_text(mine)
    proc = run_cli("init", "--agent", "amp")
    assert proc.returncode == 2 and "leanctx did not write" in proc.stderr, proc
    assert settings(home).read_text() == mine and not (home / ".config" / "amp" / "plugins").exists()


def test_project_install_and_the_plugin_it_writes(home: Path, data_dir: Path, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    assert run_cli("init", "--agent", "amp", "--project", str(proj), "--guard").returncode == 0
    text = (proj / ".amp" / "plugins" / "leanctx.js").read_text()
    assert '"tool.call": "leanctx-hook amp tool.call --guard --read-gate"' in text and "const READS_ONLY = false;" in text
    assert 'const CALL_ID_ARG = "leanctx_call_id";' in text and str(home) not in text
    value = jsonc.loads((proj / ".amp" / "settings.json").read_text())
    assert value == {"amp.mcpServers": {"leanctx": {"command": "leanctx", "args": ["mcp"]}}}
    assert run_cli("uninstall", "--agent", "amp", "--project", str(proj)).returncode == 0
    assert not (proj / ".amp").exists() and not (proj / "AGENTS.md").exists()


def test_hook_command_publishes_the_thread(home: Path, data_dir: Path) -> None:
    for event, more in (("session.start", {"source": "startup"}), ("agent.start", {"prompt": "hi", "message_id": "1"}), ("agent.end", {})):
        proc = run_cli("hook", "amp", event, input=json.dumps(sent(event, **more)))
        assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc
    record = json.loads((data_dir / "conversations" / "amp" / f"{THREAD}.json").read_text())
    assert record["conversation_id"] == THREAD and record["stopped_at"]
    proc = run_cli("hook", "amp", "context.lost", input=json.dumps(sent("context.lost")))
    assert proc.returncode == 0 and json.loads((data_dir / "conversations" / "amp" / f"{THREAD}.json").read_text())["compactions"] == 1


def test_the_host_of_a_hook_under_amps_plugin_runtime_is_the_amp_process(tmp_path: Path) -> None:
    """Amp runs a plugin as `amp run <tmp>/amp-plugin-runtime-*/plugin-runtime.ts <plugin>`: walked
    past, a hook's host is the Amp process that also starts the MCP servers. Any other program
    named amp, or a runtime script elsewhere, is a host itself."""
    from leanctx.hooks.hostproc import process_stat

    probe = "import json; from leanctx.hooks.hostproc import host_process; print(json.dumps(host_process()))"
    fake_amp = tmp_path / "amp"  # Python under the name amp: `amp run …` runs the file `run`, which runs the probe
    fake_amp.symlink_to(sys.executable)
    (tmp_path / "run").write_text("import subprocess, sys\n"
                                  f"sys.stdout.write(subprocess.run([{sys.executable!r}, '-c', {probe!r}], capture_output=True, text=True).stdout)\n")

    def host(*argv: str) -> dict:
        cp = subprocess.run([str(fake_amp), *argv], cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
        assert process_stat(os.getpid()) and cp.returncode == 0, cp.stderr
        return json.loads(cp.stdout)

    me = {"pid": os.getpid(), "name": process_stat(os.getpid())[0], "start_ticks": process_stat(os.getpid())[2]}
    runtime = str(tmp_path / "amp-plugin-runtime-AbC123" / "plugin-runtime.ts")
    assert host("run", runtime, "/home/u/.config/amp/plugins/leanctx.js") == me
    assert host("run", str(tmp_path / "other" / "plugin-runtime.ts"), "x")["pid"] != os.getpid()
    (tmp_path / "threads").write_text((tmp_path / "run").read_text())
    assert host("threads", "list")["pid"] != os.getpid()
