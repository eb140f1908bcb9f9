"""The merge rules of `leanctx init` / `leanctx uninstall`, each pinned on real files."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leanctx import agents
from leanctx.installer import files, install, jsonc, manifest, wrapper
from leanctx.installer.commands import run_init, run_uninstall
from tests.conftest import run_cli

USER_SETTINGS = """{
  // my Claude settings: keep this comment
  "model": "opus",
  "hooks": {
    "Stop": [
      { "hooks": [ { "type": "command", "command": "notify-send done" } ] } // mine
    ],
    "PreToolUse": [
      { "matcher": "Bash", "hooks": [ { "type": "command", "command": "/usr/local/bin/guard" } ] }
    ]
  },
  /* trailing block comment */
  "permissions": { "allow": ["Bash(ls)"] }
}
"""


def settings_path(home: Path) -> Path:
    return home / ".claude" / "settings.json"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def init(home: Path, data_dir: Path, name: str = "claude", project: Path | None = None) -> int:
    return run_init([agents.get(name)], home, data_dir, project, dry_run=False)


def uninstall(home: Path, data_dir: Path, name: str = "claude", project: Path | None = None) -> int:
    return run_uninstall([agents.get(name)], home, data_dir, project, dry_run=False, all_agents=False)


def our_commands(value: dict) -> dict[str, list[str]]:
    """Event -> our hook commands (events without one are left out)."""
    found = {
        event: [h["command"] for g in groups for h in g.get("hooks", [g]) if "leanctx-hook" in h.get("command", "")]
        for event, groups in value.get("hooks", {}).items()
    }
    return {event: cmds for event, cmds in found.items() if cmds}


def test_init_keeps_user_entries_comments_and_order(home: Path, data_dir: Path) -> None:
    path = write(settings_path(home), USER_SETTINGS)
    assert init(home, data_dir) == 1  # wired, comments kept; Claude Code will not load it (tests/installer/test_hostload.py)
    text = path.read_text()
    value = jsonc.loads(text)
    assert "// my Claude settings: keep this comment" in text and "// mine" in text and "/* trailing block comment */" in text
    assert list(value) == ["model", "hooks", "permissions"]
    assert value["hooks"]["Stop"][0] == {"hooks": [{"type": "command", "command": "notify-send done"}]}
    assert value["hooks"]["PreToolUse"][0] == jsonc.loads(USER_SETTINGS)["hooks"]["PreToolUse"][0]  # the user's first
    wired = our_commands(value)
    wrapper_file = wrapper.wrapper_path(data_dir)
    for spec in agents.get("claude").events:
        assert wired[spec.name] == [wrapper.command(wrapper_file, "claude", spec.name)]
    # the only pre-tool entry is the read gate, narrowed to our own ctx_read tool and Claude Code's
    # built-in Read and Bash: a command hook through our wrapper (leanctx answers no hook over the network)
    assert wired["PreToolUse"] == [wrapper.command(wrapper_file, "claude", "PreToolUse", ("--read-gate", "--builtin-read"))]
    gate = [g for g in value["hooks"]["PreToolUse"] if "leanctx-hook" in json.dumps(g)]
    assert gate[0]["matcher"] == "mcp__leanctx__ctx_read|Read|Bash"
    # and the post-tool entry that credits what Read delivered, narrowed to Read and Bash
    assert wired["PostToolUse"] == [wrapper.command(wrapper_file, "claude", "PostToolUse", ("--builtin-read",))]
    assert [g["matcher"] for g in value["hooks"]["PostToolUse"]] == ["Read|Bash"]
    assert not (data_dir / "read_gate.json").exists()
    # our group comes after the user's in an existing event list
    assert "notify-send" in json.dumps(value["hooks"]["Stop"][0]) and "leanctx-hook" in json.dumps(value["hooks"]["Stop"][1])


def test_init_twice_equals_init_once(home: Path, data_dir: Path) -> None:
    path = write(settings_path(home), USER_SETTINGS)
    init(home, data_dir)
    once = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    backups = sorted((data_dir / "backups").iterdir())
    init(home, data_dir)
    assert path.read_bytes() == once
    assert path.stat().st_mtime_ns == mtime  # not even rewritten
    assert sorted((data_dir / "backups").iterdir()) == backups


def test_uninstall_restores_bytes_exactly(home: Path, data_dir: Path) -> None:
    path = write(settings_path(home), USER_SETTINGS)
    init(home, data_dir)
    assert uninstall(home, data_dir) == 0
    assert path.read_text() == USER_SETTINGS
    assert not wrapper.wrapper_path(data_dir).exists()  # nothing else installed: wrapper goes too
    assert manifest.all_manifests(data_dir) == []


def test_uninstall_keeps_later_user_edits(home: Path, data_dir: Path) -> None:
    path = write(settings_path(home), USER_SETTINGS)
    init(home, data_dir)
    path.write_text(path.read_text().replace('"opus"', '"sonnet"'))
    uninstall(home, data_dir)
    assert path.read_text() == USER_SETTINGS.replace('"opus"', '"sonnet"')


def test_uninstall_keeps_user_hook_added_after_init_in_our_event(home: Path, data_dir: Path) -> None:
    path = write(settings_path(home), "{}\n")
    init(home, data_dir)
    doc = jsonc.Document(path.read_text())
    doc.append(("hooks", "SessionStart"), {"hooks": [{"type": "command", "command": "echo mine"}]})
    path.write_text(doc.text)
    uninstall(home, data_dir)
    value = jsonc.loads(path.read_text())
    assert value == {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}}


def test_uninstall_without_manifest_is_surgical(home: Path, data_dir: Path) -> None:
    path = write(settings_path(home), USER_SETTINGS)
    init(home, data_dir)
    for m in (data_dir / "installed").iterdir():
        m.unlink()
    uninstall(home, data_dir)
    assert path.read_text() == USER_SETTINGS


def test_file_created_by_init_is_removed_again(home: Path, data_dir: Path) -> None:
    assert init(home, data_dir, "cursor") == 0
    path = home / ".cursor" / "hooks.json"
    value = json.loads(path.read_text())
    assert value["version"] == 1
    assert set(value["hooks"]) == {s.name for s in agents.get("cursor").events}
    assert all(set(entry) == {"command", "timeout"} for groups in value["hooks"].values() for entry in groups)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    uninstall(home, data_dir, "cursor")
    assert not path.exists()
    assert not (home / ".cursor").exists()  # we created the folder, so it goes too


def test_existing_folder_is_kept(home: Path, data_dir: Path) -> None:
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text("# mine\n")
    init(home, data_dir, "codex")
    assert (home / ".codex" / "hooks.json").exists()
    uninstall(home, data_dir, "codex")
    assert not (home / ".codex" / "hooks.json").exists()
    assert (home / ".codex" / "config.toml").read_text() == "# mine\n"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{\n  "model": "opus",\n  "hooks": {\n', "4:1"),
        ('{"a": 1,,}', "1:9"),
        ("{\n  // c\n  'single': 1\n}", "3:3"),
        ("[1, 2]", None),
        ('{"hooks": []}', None),
        ('{"hooks": {"Stop": {"not": "a list"}}}', None),
    ],
)
def test_unparseable_or_wrong_shape_config_is_refused(home: Path, data_dir: Path, text: str, where: str | None) -> None:
    path = write(settings_path(home), text)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 2
    assert str(path) in proc.stderr
    if where:
        assert f"{path}:{where}:" in proc.stderr
    assert "nothing was written" in proc.stderr
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert not wrapper.wrapper_path(data_dir).exists()
    assert not (data_dir / "installed").exists()


def test_one_broken_host_blocks_the_whole_run(home: Path, data_dir: Path) -> None:
    write(settings_path(home), USER_SETTINGS)
    bad = write(home / ".cursor" / "hooks.json", '{"version": 1, "hooks": {')
    proc = run_cli("init", "--agent", "all")
    assert proc.returncode == 2 and str(bad) in proc.stderr
    assert settings_path(home).read_text() == USER_SETTINGS


def test_unknown_agent(home: Path) -> None:
    proc = run_cli("init", "--agent", "zed")
    assert proc.returncode == 2
    for name in agents.names():
        assert name in proc.stderr
    assert not (home / ".zed").exists()


def test_agent_all_uses_detected_hosts_only(home: Path, data_dir: Path) -> None:
    (home / ".cursor").mkdir()
    (home / ".codex").mkdir()
    env = dict(os.environ, PATH="/usr/bin:/bin")  # no host CLI on PATH
    proc = run_cli("init", "--agent", "all", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (home / ".cursor" / "hooks.json").exists() and (home / ".codex" / "hooks.json").exists()
    assert not settings_path(home).exists() and not (home / ".codebuddy").exists()
    proc = run_cli("uninstall", "--agent", "all", env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (home / ".cursor" / "hooks.json").exists() and not (home / ".codex" / "hooks.json").exists()
    assert not wrapper.wrapper_path(data_dir).exists()


def test_symlink_inside_home_is_followed(home: Path, data_dir: Path) -> None:
    real = write(home / "dotfiles" / "claude-settings.json", USER_SETTINGS)
    link = settings_path(home)
    link.parent.mkdir()
    link.symlink_to(real)
    assert init(home, data_dir) == 1  # written through the link; exit 1 for USER_SETTINGS' comments
    assert link.is_symlink() and "leanctx-hook" in real.read_text()
    uninstall(home, data_dir)
    assert link.is_symlink() and real.read_text() == USER_SETTINGS


def test_symlink_outside_home_is_refused(home: Path, data_dir: Path, tmp_path: Path) -> None:
    outside = write(tmp_path / "elsewhere" / "settings.json", "{}")
    link = settings_path(home)
    link.parent.mkdir()
    link.symlink_to(outside)
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 2 and "outside" in proc.stderr and str(link) in proc.stderr
    assert outside.read_text() == "{}"


def test_read_only_config_is_refused(home: Path, data_dir: Path, immutable) -> None:
    path = write(settings_path(home), USER_SETTINGS)
    immutable(path)
    proc = run_cli("init", "--agent", "claude")
    assert proc.returncode == 2, proc.stderr
    assert f"{path}: is read-only" in proc.stderr and "nothing was written" in proc.stderr
    assert path.read_text() == USER_SETTINGS
    assert not list(path.parent.glob(".*.tmp"))
    assert not wrapper.wrapper_path(data_dir).exists()


def test_mode_is_kept_and_backup_left(home: Path, data_dir: Path) -> None:
    path = write(settings_path(home), USER_SETTINGS)
    path.chmod(0o640)
    init(home, data_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    backups = list((data_dir / "backups").iterdir())
    assert len(backups) == 1 and backups[0].read_text() == USER_SETTINGS


def test_dry_run_changes_nothing(home: Path, data_dir: Path) -> None:
    path = write(settings_path(home), USER_SETTINGS)
    proc = run_cli("init", "--agent", "claude", "--dry-run")
    assert proc.returncode == 1 and "WARNING: Claude Code: would be wired, but" in proc.stderr  # the comments in USER_SETTINGS
    assert "--- a/~/.claude/settings.json" in proc.stdout and "+++ b/~/.claude/settings.json" in proc.stdout
    assert "+      {" in proc.stdout and "leanctx-hook claude SessionStart" in proc.stdout
    assert "+++ b/~/.local/share/leanctx/bin/leanctx-hook" in proc.stdout
    assert path.read_text() == USER_SETTINGS
    assert not data_dir.exists()
    init(home, data_dir)
    proc = run_cli("uninstall", "--agent", "claude", "--dry-run")
    assert proc.returncode == 0 and "-            \"command\":" in proc.stdout
    assert "leanctx-hook" in path.read_text()


def test_stale_entry_is_updated_in_place(home: Path, data_dir: Path) -> None:
    """An entry from an older data dir keeps its position (Codex trust is positional)."""
    old_cmd = "'/old/place/bin/leanctx-hook' codex SessionStart"
    text = json.dumps({"hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": old_cmd, "timeout": 10}]},
        {"hooks": [{"type": "command", "command": "echo user"}]},
    ]}}, indent=2)
    path = write(home / ".codex" / "hooks.json", text)
    init(home, data_dir, "codex")
    groups = json.loads(path.read_text())["hooks"]["SessionStart"]
    assert len(groups) == 2
    assert groups[0]["hooks"][0]["command"] == wrapper.command(wrapper.wrapper_path(data_dir), "codex", "SessionStart")
    assert groups[1]["hooks"][0]["command"] == "echo user"


def test_duplicate_entries_collapse_to_one(home: Path, data_dir: Path) -> None:
    ours = {"hooks": [{"type": "command", "command": "/x/leanctx-hook claude Stop"}]}
    path = write(settings_path(home), json.dumps({"hooks": {"Stop": [ours, {"hooks": [{"type": "command", "command": "echo u"}]}, ours]}}))
    init(home, data_dir)
    groups = json.loads(path.read_text())["hooks"]["Stop"]
    assert [g["hooks"][0]["command"].split()[-1] for g in groups] == ["Stop", "u"]


def test_project_level_files(home: Path, data_dir: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    expected = {
        "claude": project / ".claude" / "settings.local.json",
        "codebuddy": project / ".codebuddy" / "settings.local.json",
        "cursor": project / ".cursor" / "hooks.json",
        "codex": project / ".codex" / "hooks.json",
    }
    for name, path in expected.items():
        assert init(home, data_dir, name, project) == 0
        assert "leanctx-hook" in path.read_text()
        assert not agents.get(name).user_config_path(home).exists()
    for name, path in expected.items():
        uninstall(home, data_dir, name, project)
        assert not path.exists()
    assert sorted(p.name for p in project.iterdir()) == []


def test_host_rewrites_file_while_we_write(home: Path, data_dir: Path) -> None:
    """A running host rewrites its settings between our plan and our rename: we re-plan."""
    path = write(settings_path(home), USER_SETTINGS)
    agent = agents.get("claude")
    change = install.plan_install(agent, home, data_dir, None)
    assert change is not None
    path.write_text(USER_SETTINGS.replace('"opus"', '"haiku"'))  # the host's write
    install.apply_with_retry(change, install.apply_install, data_dir)
    text = path.read_text()
    assert '"haiku"' in text and "leanctx-hook" in text


def test_changed_under_us_is_detected(tmp_path: Path) -> None:
    path = write(tmp_path / "f.json", "{}")
    with pytest.raises(files.ChangedUnderUs):
        files.atomic_write(path, b'{"a": 1}', expected_old=b"{ }")
    assert path.read_text() == "{}" and not list(tmp_path.glob(".*tmp"))


# -- property: init then uninstall restores the file ------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=8))
_values = st.recursive(_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=8)
_foreign_group = st.fixed_dictionaries(
    {"hooks": st.lists(st.fixed_dictionaries({"type": st.just("command"), "command": st.text(min_size=1, max_size=20)}), min_size=1, max_size=2)},
    optional={"matcher": st.sampled_from(["", "*", "Bash", "startup|resume"])},
)
_events = st.sampled_from(["SessionStart", "Stop", "UserPromptSubmit", "PreToolUse", "Notification", "SessionEnd"])


@st.composite
def user_configs(draw: st.DrawFn) -> str:
    """A Claude settings file as a user might have it: other keys, other hooks, comments, any indent."""
    value = draw(st.dictionaries(st.sampled_from(["model", "env", "permissions", "statusLine", "x"]), _values, max_size=4))
    if draw(st.booleans()):
        value["hooks"] = draw(st.dictionaries(_events, st.lists(_foreign_group, min_size=1, max_size=3), max_size=4))
    indent = draw(st.sampled_from([None, 2, 4, "\t"]))
    text = json.dumps(value, indent=indent, ensure_ascii=draw(st.booleans()))
    lines = text.split("\n")
    if indent is not None and len(lines) > 2:  # sprinkle comments at line ends (never inside strings)
        for i in draw(st.lists(st.integers(0, len(lines) - 2), max_size=3, unique=True)):
            lines[i] += "  // note " + str(i)
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=user_configs(), name=st.sampled_from(["claude", "codex", "cursor", "codebuddy", "droid"]))
def test_property_init_then_uninstall_restores(home: Path, data_dir: Path, text: str, name: str) -> None:
    agent = agents.get(name)
    path = agent.user_config_path(home)
    write(path, text)
    loaded = not (agent.strict_json and "// note" in text)  # a strict host ignores a file with comments: init says so, exit 1
    try:
        assert init(home, data_dir, name) == (0 if loaded else 1)
        after_init = jsonc.loads(path.read_text())
        assert our_commands(after_init) and all(len(v) == 1 for v in our_commands(after_init).values())
        assert init(home, data_dir, name) == (0 if loaded else 1)
        uninstall(home, data_dir, name)
        assert path.read_text() == text
    finally:
        path.unlink(missing_ok=True)
        for leftover in (data_dir / "installed").glob("*") if (data_dir / "installed").exists() else []:
            leftover.unlink()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=user_configs())
def test_property_surgical_uninstall_keeps_everything_else(home: Path, data_dir: Path, text: str) -> None:
    """With the manifest gone and a user edit after init, uninstall keeps the edit and every
    foreign byte; only our entries (and containers our removal emptied) go."""
    path = write(settings_path(home), text)
    try:
        init(home, data_dir)
        for m in (data_dir / "installed").iterdir():
            m.unlink()
        doc = jsonc.Document(path.read_text())
        doc.set_key(("leanctxTestEdit",), 1)
        path.write_text(doc.text)
        uninstall(home, data_dir)
        result = jsonc.loads(path.read_text())
        expected = dict(jsonc.loads(text), leanctxTestEdit=1)
        if jsonc.loads(text).get("hooks") == {}:
            expected.pop("hooks")  # an empty hooks object we filled and emptied again: dropped
        assert result == expected
        for line in text.splitlines():
            if "// note" in line:
                assert "// note " + line.split("// note ")[1] in path.read_text()
    finally:
        path.unlink(missing_ok=True)


# -- Codex trust (--trust) ---------------------------------------------------------------------

CODEX_TOML = """# my codex config
model = "gpt-5"  # keep this comment

[profiles.fast]
model = "o4-mini"

[hooks.state."/somewhere/else/hooks.json:stop:0:0"]
trusted_hash = "sha256:0000"  # someone else's hook: never touched
"""


def test_trust_writes_only_our_keys_and_uninstall_restores(home: Path, data_dir: Path) -> None:
    config = write(home / ".codex" / "config.toml", CODEX_TOML)
    assert run_init([agents.get("codex")], home, data_dir, None, dry_run=False, trust=True) == 0
    text = config.read_text()
    assert text.startswith(CODEX_TOML)  # appended, nothing of the user's moved
    from leanctx.installer import codex_trust
    from leanctx.installer.trust import trust_report

    hooks_path = home / ".codex" / "hooks.json"
    report = trust_report(agents.get("codex"), home, hooks_path, hooks_path.read_text())
    assert {r["status"] for r in report} == {"trusted"} and len(report) == len(agents.get("codex").events) + 2  # + the read gate, the shell-read credit
    assert all(r["key"].startswith(f"{hooks_path}:") for r in report)
    assert codex_trust.event_label("UserPromptSubmit") == "user_prompt_submit"
    # init --trust twice changes nothing
    before = config.read_bytes()
    run_init([agents.get("codex")], home, data_dir, None, dry_run=False, trust=True)
    assert config.read_bytes() == before
    uninstall(home, data_dir, "codex")
    assert config.read_text() == CODEX_TOML


def test_untrust_is_surgical_after_user_edit(home: Path, data_dir: Path) -> None:
    config = write(home / ".codex" / "config.toml", CODEX_TOML)
    run_init([agents.get("codex")], home, data_dir, None, dry_run=False, trust=True)
    config.write_text(config.read_text().replace('model = "o4-mini"', 'model = "o3"'))
    uninstall(home, data_dir, "codex")
    assert config.read_text() == CODEX_TOML.replace('model = "o4-mini"', 'model = "o3"')


def test_hand_trusted_hooks_are_untrusted_on_uninstall(home: Path, data_dir: Path) -> None:
    """Trust the user gave in /hooks would otherwise dangle after our hooks are gone."""
    config = write(home / ".codex" / "config.toml", CODEX_TOML)
    init(home, data_dir, "codex")
    from leanctx.installer import codex_trust
    from leanctx.installer.trust import our_entries

    hooks_path = home / ".codex" / "hooks.json"
    entries = our_entries(agents.get("codex"), hooks_path, hooks_path.read_text())
    config.write_text(codex_trust.trust(config.read_text(), entries))  # what Codex's /hooks writes
    uninstall(home, data_dir, "codex")
    assert config.read_text() == CODEX_TOML


def test_user_disabled_hook_stays_disabled(home: Path, data_dir: Path) -> None:
    hooks_path = home / ".codex" / "hooks.json"
    init(home, data_dir, "codex")
    key = f"{hooks_path}:stop:0:0"
    config = write(home / ".codex" / "config.toml", f'[hooks.state."{key}"]\nenabled = false\n')
    run_init([agents.get("codex")], home, data_dir, None, dry_run=False, trust=True)
    assert f'[hooks.state."{key}"]\nenabled = false\n' in config.read_text()
    from leanctx.installer.trust import trust_report

    statuses = {r["event"]: r["status"] for r in trust_report(agents.get("codex"), home, hooks_path, hooks_path.read_text())}
    assert statuses["Stop"] == "disabled" and statuses["SessionStart"] == "trusted"


def test_trust_refuses_bad_toml(home: Path, data_dir: Path) -> None:
    config = write(home / ".codex" / "config.toml", "model = \n[oops")
    proc = run_cli("init", "--agent", "codex", "--trust")
    assert proc.returncode == 2 and f"{config}:1:" in proc.stderr
    assert config.read_text() == "model = \n[oops"
    assert not (home / ".codex" / "hooks.json").exists()
