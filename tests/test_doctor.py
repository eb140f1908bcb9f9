"""`leanctx doctor`: real installs, real wrapper runs, real breakage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.installer import wrapper
from tests.conftest import PAYLOADS, run_cli


def doctor_json(*args: str, env: dict | None = None) -> tuple[int, dict]:
    proc = run_cli("doctor", "--json", *args, env=env)
    return proc.returncode, json.loads(proc.stdout)


def scripts_on_path() -> dict:
    """The environment with this installation's console scripts on PATH, as a project install
    needs them (its files call `leanctx-hook` and `leanctx` by name)."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")


def checks_by_name(agent_report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in agent_report["checks"]}


@pytest.mark.parametrize("name", agents.names())
def test_doctor_passes_after_init(home: Path, data_dir: Path, name: str) -> None:
    assert run_cli("init", "--agent", name, *(["--trust"] if name == "codex" else [])).returncode == 0
    code, report = doctor_json("--agent", name)
    assert code == 0, json.dumps(report, indent=1)
    assert report["ok"] and report["schema"] == 1
    (agent_report,) = report["agents"]
    checks = checks_by_name(agent_report)
    for spec in agents.get(name).events:
        assert checks[f"event {spec.name}"]["status"] == "ok"
        smoke = checks[f"smoke {spec.name}"]
        assert smoke["status"] == "ok" and smoke["ms"] > 0
    assert agent_report["installed"] is True
    if name == "goose":  # its MCP servers are YAML, added by hand (tests/installer/test_doc_hosts.py)
        assert checks["mcp server"]["status"] == "info" and "mcp round trip" not in checks
        return
    assert checks["mcp server"]["status"] == "ok"
    assert checks["mcp round trip"]["status"] == "ok" and "[unchanged]" in checks["mcp round trip"]["detail"]
    assert checks["mcp round trip"]["detail"].startswith("tools ctx_read;")  # the coding profile offers nothing else
    # the smoke runs went to a scratch dir: nothing real was published
    assert agent_report["last_published"] is None
    assert not (data_dir / "conversations").exists()


def test_doctor_reports_last_published(home: Path, data_dir: Path) -> None:
    run_cli("init", "--agent", "claude")
    command = wrapper.command(wrapper.wrapper_path(data_dir), "claude", "SessionStart")
    subprocess.run(["/bin/sh", "-c", command], input=(PAYLOADS / "claude" / "SessionStart.json").read_bytes(), check=True)
    code, report = doctor_json("--agent", "claude")
    assert code == 0
    last = report["agents"][0]["last_published"]
    assert last["session_id"] == "b2fc16b1-a97b-483b-a92c-3cdcadcb7a86"
    assert last["last_event"] == "SessionStart" and 0 <= last["age_s"] < 60
    text = run_cli("doctor", "--agent", "claude").stdout
    assert "last published: SessionStart of b2fc16b1-a97b-483b-a92c-3cdcadcb7a86" in text


def test_doctor_fails_when_not_installed(home: Path) -> None:
    code, report = doctor_json("--agent", "cursor")
    assert code == 1 and not report["ok"]
    config = checks_by_name(report["agents"][0])["config"]
    assert config["status"] == "fail" and "leanctx init --agent cursor" in config["fix"]


def test_doctor_all_ignores_hosts_not_wired(home: Path) -> None:
    (home / ".cursor").mkdir()
    run_cli("init", "--agent", "claude")
    code, report = doctor_json()
    assert code == 0, json.dumps(report, indent=1)
    by_agent = {a["agent"]: a for a in report["agents"]}
    assert by_agent["claude"]["installed"] and not by_agent["cursor"]["installed"]
    assert by_agent["cursor"]["detected"]


def test_doctor_detects_removed_event_and_fix_repairs(home: Path, data_dir: Path) -> None:
    run_cli("init", "--agent", "claude")
    path = home / ".claude" / "settings.json"
    value = json.loads(path.read_text())
    del value["hooks"]["Stop"]  # as a host's own settings rewrite might do
    path.write_text(json.dumps(value, indent=2))
    code, report = doctor_json("--agent", "claude")
    assert code == 1
    stop = checks_by_name(report["agents"][0])["event Stop"]
    assert stop["status"] == "fail" and stop["detail"] == "not wired" and "leanctx init --agent claude" in stop["fix"]
    code, report = doctor_json("--agent", "claude", "--fix")
    assert code == 0 and report["fixed"] == ["claude"]
    assert "Stop" in json.loads(path.read_text())["hooks"]


def test_doctor_detects_missing_interpreter(home: Path, data_dir: Path) -> None:
    run_cli("init", "--agent", "codex", "--trust")
    path = wrapper.wrapper_path(data_dir)
    path.write_text(wrapper.render(data_dir, python="/gone/python3"))
    code, report = doctor_json("--agent", "codex")
    assert code == 1
    interp = next(c for c in report["checks"] if c["name"] == "wrapper interpreter")
    assert interp["status"] == "fail" and "/gone/python3" in interp["detail"]
    code, report = doctor_json("--agent", "codex", "--fix")
    assert code == 0, json.dumps(report, indent=1)


def test_doctor_detects_old_wrapper_version(home: Path, data_dir: Path) -> None:
    run_cli("init", "--agent", "cursor")
    path = wrapper.wrapper_path(data_dir)
    path.write_text(path.read_text().replace("# leanctx-version: ", "# leanctx-version: 0.0.1-old"))
    code, report = doctor_json("--agent", "cursor")
    assert code == 1
    version = next(c for c in report["checks"] if c["name"] == "wrapper version")
    assert version["status"] == "fail" and "0.0.1-old" in version["detail"]


def test_doctor_detects_broken_hook(home: Path, data_dir: Path) -> None:
    """A wrapper that prints junk fails the smoke run with the host's own output rule."""
    run_cli("init", "--agent", "cursor")
    path = wrapper.wrapper_path(data_dir)
    path.write_text(path.read_text().replace("exec \"$LEANCTX_PYTHON\"", "echo not-json; exec \"$LEANCTX_PYTHON\""))
    code, report = doctor_json("--agent", "cursor")
    assert code == 1
    smoke = checks_by_name(report["agents"][0])["smoke sessionStart"]
    assert smoke["status"] == "fail" and "not one JSON object" in smoke["detail"]


def test_doctor_text_folds_a_passing_smoke_run_into_its_event_line(home: Path, data_dir: Path) -> None:
    """The text form shows a wired event and its passing smoke run as one line; a failing smoke
    run keeps its own line with the fix. --json keeps both checks (above)."""
    run_cli("init", "--agent", "cursor")
    text = run_cli("doctor", "--agent", "cursor").stdout
    assert "  [ok  ] event sessionStart: wired to our wrapper; smoke run: exit 0, valid output, published, " in text
    assert "smoke sessionStart" not in text
    path = wrapper.wrapper_path(data_dir)
    path.write_text(path.read_text().replace("exec \"$LEANCTX_PYTHON\"", "echo not-json; exec \"$LEANCTX_PYTHON\""))
    text = run_cli("doctor", "--agent", "cursor").stdout
    assert "  [ok  ] event sessionStart: wired to our wrapper\n  [FAIL] smoke sessionStart: " in text
    assert "fix: leanctx doctor --agent cursor --fix   (rewrites the wrapper and the entries)" in text


def test_doctor_unparseable_config(home: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"hooks": ')
    code, report = doctor_json("--agent", "claude")
    assert code == 1
    config = checks_by_name(report["agents"][0])["config"]
    assert config["status"] == "fail" and f"{path}:1:11" in config["detail"]
    assert path.read_text() == '{"hooks": '


def test_doctor_unwritable_data_dir(home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = dict(os.environ, LEANCTX_HOME=str(blocker / "sub"))
    proc = run_cli("doctor", "--json", env=env)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert report["checks"][0]["name"] == "data dir" and report["checks"][0]["status"] == "fail"


def test_doctor_reports_untrusted_and_modified_codex_hooks(home: Path, data_dir: Path) -> None:
    run_cli("init", "--agent", "codex")
    code, report = doctor_json("--agent", "codex")
    trust = checks_by_name(report["agents"][0])["codex hook trust"]
    assert code == 1 and trust["status"] == "fail"
    assert "SessionStart untrusted" in trust["detail"] and "--trust" in trust["fix"]
    assert run_cli("init", "--agent", "codex", "--trust").returncode == 0
    code, report = doctor_json("--agent", "codex")
    assert code == 0, json.dumps(report, indent=1)
    # the user edits our Stop hook: Codex now sees it as modified and skips it
    path = home / ".codex" / "hooks.json"
    value = json.loads(path.read_text())
    value["hooks"]["Stop"][0]["hooks"][0]["timeout"] = 99
    path.write_text(json.dumps(value))
    code, report = doctor_json("--agent", "codex")
    trust = checks_by_name(report["agents"][0])["codex hook trust"]
    assert code == 1 and trust["detail"] == "Codex will skip these hooks: Stop modified"


def test_doctor_reports_codex_hooks_feature_off(home: Path, data_dir: Path) -> None:
    run_cli("init", "--agent", "codex", "--trust")
    config = home / ".codex" / "config.toml"
    config.write_text(config.read_text() + "\n[features]\nhooks = false  # I turned them off\n")
    code, report = doctor_json("--agent", "codex")
    feature = checks_by_name(report["agents"][0])["codex hooks feature"]
    assert code == 1 and feature["status"] == "fail" and "hooks = true" in feature["fix"]


def test_doctor_flags_comments_the_host_rejects(home: Path, data_dir: Path) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{\n  // my note\n  "model": "opus"\n}\n')
    run_cli("init", "--agent", "claude")
    assert "// my note" in path.read_text()  # we never strip them
    code, report = doctor_json("--agent", "claude")
    strict = checks_by_name(report["agents"][0])["config is strict JSON"]
    assert code == 1 and "ignores this whole file" in strict["detail"]


def test_doctor_shows_bot_profile_and_damaged_state(home: Path, data_dir: Path) -> None:
    run_cli("init", "--agent", "claude", "--bot")
    env = dict(os.environ, CKS_ACTIVE_USER="bob")
    assert run_cli("state", "pending", "--question", "Which plan?", env=env).returncode == 0
    state = home / ".cks" / "user" / "bob" / "conversation-state.json"
    state.write_text("{not json")
    assert run_cli("state", "show", env=env).returncode == 0  # the read quarantines it
    code, report = doctor_json("--agent", "claude")
    assert code == 0, json.dumps(report, indent=1)  # reported, not failed: the thread restarted cleanly
    assert report["agents"][0]["profile"] == "bot"
    damaged = next(c for c in report["checks"] if c["name"] == "conversation state bob")
    assert damaged["status"] == "warn" and "conversation-state.corrupt-" in damaged["detail"]
    # every bot event's smoke run went to a scratch CKS_HOME: bob's real folder got nothing new
    assert sorted(p.name.split(".")[0] for p in state.parent.iterdir() if not p.name.startswith(".")) == ["conversation-state"]


def test_doctor_reports_a_broken_mcp_entry(home: Path, data_dir: Path) -> None:
    run_cli("init", "--agent", "cursor")
    path = home / ".cursor" / "mcp.json"
    value = json.loads(path.read_text())
    value["mcpServers"]["leanctx"]["command"] = "/gone/bin/leanctx-hook"  # another data dir's wrapper
    path.write_text(json.dumps(value))
    code, report = doctor_json("--agent", "cursor")
    entry = checks_by_name(report["agents"][0])["mcp server"]
    assert code == 1 and entry["status"] == "fail" and "/gone/bin/leanctx-hook" in entry["detail"]
    code, report = doctor_json("--agent", "cursor", "--fix")
    assert code == 0, json.dumps(report, indent=1)
    assert checks_by_name(report["agents"][0])["mcp round trip"]["status"] == "ok"


def test_doctor_no_longer_asks_codex_for_an_mcp_startup_grace(home: Path, data_dir: Path) -> None:
    """`leanctx mcp` answers the handshake in tens of ms, so Codex's first turn offers ctx_read
    without `mcp_optional_startup_grace_ms` (tests/e2e/test_codex_cache_e2e.py): no check asks for it."""
    run_cli("init", "--agent", "codex", "--trust")
    code, report = doctor_json("--agent", "codex")
    assert code == 0 and "codex mcp start-up" not in checks_by_name(report["agents"][0])
    assert "mcp_optional_startup_grace_ms" not in json.dumps(report)


# -- project installs (--project) and nothing installed ----------------------------------------


@pytest.mark.parametrize("name", ["claude", "codex", "gemini", "qwen"])
def test_doctor_project_passes_after_a_project_only_install(home: Path, data_dir: Path, tmp_path: Path, name: str) -> None:
    project = (tmp_path / "repo").resolve()
    project.mkdir()
    env = scripts_on_path()
    init = run_cli("init", "--agent", name, "--project", str(project), *(["--trust"] if name == "codex" else []), env=env)
    assert init.returncode == 0, init.stderr
    assert f"Check it with: leanctx doctor --project {project}" in init.stdout
    code, report = doctor_json("--agent", name, "--project", str(project), env=env)
    assert code == 0, json.dumps(report, indent=1)
    (agent_report,) = report["agents"]
    assert report["installed"] and report["project"] == str(project)
    assert agent_report["config_path"] == str(agents.get(name).project_config_path(project))
    checks = checks_by_name(agent_report)
    for spec in agents.get(name).events:
        assert checks[f"smoke {spec.name}"]["status"] == "ok"
    assert checks["mcp server"]["status"] == "ok" and str(project) in checks["mcp server"]["detail"]
    assert checks["mcp round trip"]["status"] == "ok"
    # --agent all in the project: the same verdict, other hosts only noted
    assert run_cli("doctor", "--project", str(project), env=env).returncode == 0
    assert not wrapper.wrapper_path(data_dir).exists()  # project files need none: no wrapper check


def test_doctor_fails_a_gemini_hook_that_writes_stderr(home: Path, tmp_path: Path) -> None:
    """Gemini takes a hook's stderr as its answer when stdout is empty: a `leanctx-hook` on PATH
    that talks there is a failure for Gemini (its own smoke message says why)."""
    project = (tmp_path / "repo").resolve()
    project.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    noisy = bin_dir / "leanctx-hook"
    noisy.write_text(f"#!/bin/sh\necho 'some warning' >&2\nexec {sys.executable} -c 'from leanctx.hooks import run; run()' \"$@\"\n")
    noisy.chmod(0o755)
    env = dict(scripts_on_path(), PATH=f"{bin_dir}:{scripts_on_path()['PATH']}")
    assert run_cli("init", "--agent", "gemini", "--project", str(project), env=env).returncode == 0
    code, report = doctor_json("--agent", "gemini", "--project", str(project), env=env)
    smoke = checks_by_name(report["agents"][0])["smoke BeforeAgent"]
    assert code == 1 and smoke["status"] == "fail"
    assert smoke["detail"] == "wrote to stderr, which Gemini CLI takes as the hook's answer: some warning"


def test_doctor_without_project_points_at_the_project_install(home: Path, tmp_path: Path) -> None:
    project = (tmp_path / "repo").resolve()
    project.mkdir()
    assert run_cli("init", "--agent", "claude", "--project", str(project)).returncode == 0
    for args in ((), ("--agent", "claude")):
        proc = run_cli("doctor", *args)
        assert proc.returncode == 1
        assert f"claude in {project}: run leanctx doctor --project {project}" in proc.stdout
        assert "leanctx init --agent claude   (" not in proc.stdout  # no user-level install suggested
    code, report = doctor_json()
    assert code == 1 and report["installed"] is False
    assert report["project_installs"] == [{"agent": "claude", "project": str(project)}]
    assert report["start"] == f"leanctx doctor --project {project}"


def test_doctor_fix_with_project_repairs_the_project_install(home: Path, tmp_path: Path) -> None:
    project = (tmp_path / "repo").resolve()
    project.mkdir()
    env = scripts_on_path()
    run_cli("init", "--agent", "claude", "--project", str(project), env=env)
    path = project / ".claude" / "settings.local.json"
    value = json.loads(path.read_text())
    del value["hooks"]["Stop"]
    path.write_text(json.dumps(value))
    code, report = doctor_json("--agent", "claude", "--project", str(project), env=env)
    stop = checks_by_name(report["agents"][0])["event Stop"]
    assert code == 1 and stop["fix"] == f"leanctx init --agent claude --project {project}   (or: leanctx doctor --agent claude --project {project} --fix)"
    code, report = doctor_json("--agent", "claude", "--project", str(project), "--fix", env=env)
    assert code == 0, json.dumps(report, indent=1)
    assert "Stop" in json.loads(path.read_text())["hooks"]
    assert not (home / ".claude" / "settings.json").exists()  # no user-level install appeared


def test_doctor_with_nothing_installed_says_how_to_start(home: Path) -> None:
    proc = run_cli("doctor")
    assert proc.returncode == 1
    assert proc.stdout.rstrip().splitlines()[-1] == "leanctx is not installed for any agent here. Start with: leanctx init --agent claude"
    assert "All good" not in proc.stdout
    (home / ".codex").mkdir()  # a detected host is the one suggested
    code, report = doctor_json()
    assert code == 1 and report["installed"] is False and report["ok"] is False
    assert report["start"] == "leanctx init --agent codex"


def test_doctor_project_with_nothing_installed_there(home: Path, tmp_path: Path) -> None:
    proc = run_cli("doctor", "--project", str(tmp_path))
    assert proc.returncode == 1
    assert f"leanctx is not installed for any agent in {tmp_path.resolve()}" in proc.stdout


def test_doctor_spots_a_state_no_hook_records_into(home: Path, data_dir: Path) -> None:
    """Isolation mode (ClaudeAgentOptions(setting_sources=[])) runs no hooks while the model keeps
    calling `leanctx state`: a pending question nothing will ever clear. doctor says what to pass;
    a user whose turns the hooks record is not flagged."""
    run_cli("init", "--agent", "claude", "--bot")
    isolated = dict(os.environ, CKS_ACTIVE_USER="iso")
    assert run_cli("state", "pending", "--question", "Which plan?", "--option", "pro", env=isolated).returncode == 0
    assert run_cli("state", "summary", "wants a plan", env=isolated).returncode == 0
    hooked = dict(os.environ, CKS_ACTIVE_USER="ok")
    prompt = (PAYLOADS / "claude" / "UserPromptSubmit.json").read_bytes()
    proc = subprocess.run(["/bin/sh", "-c", wrapper.command(wrapper.wrapper_path(data_dir), "claude", "UserPromptSubmit",
                                                            ("--bot",))], input=prompt, capture_output=True,
                          env=hooked, timeout=60)
    assert proc.returncode == 0
    code, report = doctor_json("--agent", "claude")
    names = {c["name"]: c for c in report["checks"]}
    warn = names["conversation state iso hooks"]
    assert code == 0 and warn["status"] == "warn" and "no turn was ever recorded" in warn["detail"]
    assert "setting_sources" in warn["fix"] and '"user"' in warn["fix"]
    assert "conversation state ok hooks" not in names
    text = run_cli("doctor", "--agent", "claude").stdout
    assert "no turn was ever recorded" in text and "setting_sources" in text


def test_doctor_spots_a_question_no_stop_hook_followed(home: Path, data_dir: Path) -> None:
    """Hooks recorded turns once, then the host lost them (setting_sources=[] after a redeploy):
    a question saved long ago with no turn since is flagged; the same question asked after the
    last turn but recently (a turn may be running) is not."""
    run_cli("init", "--agent", "claude", "--bot")
    env = dict(os.environ, CKS_ACTIVE_USER="late")
    prompt = (PAYLOADS / "claude" / "UserPromptSubmit.json").read_bytes()
    assert subprocess.run(["/bin/sh", "-c", wrapper.command(wrapper.wrapper_path(data_dir), "claude",
                                                            "UserPromptSubmit", ("--bot",))],
                          input=prompt, capture_output=True, env=env, timeout=60).returncode == 0
    assert run_cli("state", "pending", "--question", "Which plan?", env=env).returncode == 0
    code, report = doctor_json("--agent", "claude")
    assert "conversation state late hooks" not in {c["name"] for c in report["checks"]}
    path = home / ".cks" / "user" / "late" / "conversation-state.json"
    value = json.loads(path.read_text())
    value["recent_turns"][0]["ts"] = "2020-01-01T00:00:00.000Z"
    value["pending"]["asked_ts"] = "2020-01-01T00:05:00.000Z"
    path.write_text(json.dumps(value))
    code, report = doctor_json("--agent", "claude")
    warn = {c["name"]: c for c in report["checks"]}["conversation state late hooks"]
    assert warn["status"] == "warn" and "no Stop hook ran" in warn["detail"] and "setting_sources" in warn["fix"]


@pytest.mark.parametrize("bot", [False, True])
def test_doctor_fails_the_python_dash_m_entry_and_its_fix_replaces_it(home: Path, data_dir: Path, bot: bool) -> None:
    """`<python> -m leanctx mcp`, what init registered before, imports from the folder the host
    opens: doctor fails it with a fix line that works, and the fixed entry is the wrapper's."""
    profile = ["--bot"] if bot else []
    run_cli("init", "--agent", "claude", *profile)
    path = home / ".claude.json"
    value = json.loads(path.read_text())
    value["mcpServers"]["leanctx"] = {"type": "stdio", "command": sys.executable,
                                      "args": ["-m", "leanctx", "mcp", *(["--profile", "bot"] if bot else [])]}
    path.write_text(json.dumps(value))
    code, report = doctor_json("--agent", "claude")
    entry = checks_by_name(report["agents"][0])["mcp server"]
    assert code == 1 and entry["status"] == "fail" and "python -m leanctx mcp" in entry["detail"], entry
    assert entry["fix"].startswith("leanctx init --agent claude")
    fix = entry["fix"].split("   ")[0].split()[1:] + profile  # run the fix line as written
    assert run_cli(*fix).returncode == 0
    fixed = json.loads(path.read_text())["mcpServers"]["leanctx"]
    assert fixed["command"] == str(data_dir / "bin" / "leanctx-hook") and fixed["args"][0] == "mcp"
    code, report = doctor_json("--agent", "claude")
    checks = checks_by_name(report["agents"][0])
    assert checks["mcp server"]["status"] == "ok" and checks["mcp round trip"]["status"] == "ok", checks
