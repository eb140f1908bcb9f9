"""init's verdict "wired, but <host> will not load this file" (exit 1) against the real hosts.

For each config a user might have, init is run and then the real CLI: our SessionStart hook must
publish exactly when init exited 0. So the rules in leanctx/installer/hostload.py and the host
checks modules (installer/HOST_CHECKS) cannot drift from what Claude Code 2.1.197 and Codex 0.171 really do.
"""
from __future__ import annotations

import json

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic
from tests.e2e.fake_openai import FakeOpenAI

pytestmark = pytest.mark.e2e

SETTINGS = json.dumps({"model": "opus", "env": {"A": "1"}}, indent=2)


@pytest.mark.parametrize(
    "settings, loads",
    [
        (SETTINGS, True),
        ("// mine\n" + SETTINGS, False),
        (SETTINGS.replace('"1"\n', '"1",\n'), False),  # a trailing comma
        ("\ufeff" + SETTINGS, True),  # Claude Code accepts a byte order mark
        (SETTINGS[:-1] + ', "disableAllHooks": true}', False),
    ],
    ids=["clean", "comment", "trailing-comma", "bom", "disableAllHooks"],
)
def test_claude_loads_exactly_when_init_says_so(claude_cli, host_home, lean, run_host, settings, loads):
    hh = host_home
    hostcli.write_claude_settings(hh.home, settings)
    init = lean.run("init", "--agent", "claude", "--no-mcp", ok=False)
    assert init.returncode == (0 if loads else 1), init.stderr
    assert ("WARNING: Claude Code: wired, but" in init.stderr) is not loads
    with FakeAnthropic(script=["ok"]) as srv:
        cp, _ = run_host([claude_cli, "-p", "hi"], cwd=hh.proj, env=hostcli.claude_env(hh.home, srv.base_url))
    assert cp.returncode == 0, cp.stderr
    assert bool(lean.records("claude")) is loads


@pytest.mark.parametrize(
    "hooks_prefix, features, loads",
    [
        ("", None, True),
        ("\ufeff", None, False),  # Codex rejects a byte order mark
        ("// mine\n", None, False),
        ("", "hooks = false", False),
        ("", "codex_hooks = false", False),
        ("", "hooks = true\ncodex_hooks = false", True),  # `hooks` wins
    ],
    ids=["clean", "bom", "comment", "hooks-off", "codex_hooks-off", "hooks-on-wins"],
)
def test_codex_loads_exactly_when_init_says_so(codex_cli, host_home, lean, run_host, hooks_prefix, features, loads):
    hh = host_home
    if hooks_prefix:
        hostcli.write_codex_hooks(hh.home, hooks_prefix + '{"hooks": {}}\n')
    with FakeOpenAI(script=["ok"]) as srv:
        config = hostcli.write_codex_config(hh.home, srv.base_url)
        if features:
            config.write_text(config.read_text() + f"\n[features]\n{features}\n")
        init = lean.run("init", "--agent", "codex", "--no-mcp", "--trust", ok=False)
        assert init.returncode == (0 if loads else 1), init.stderr
        assert ("WARNING: Codex CLI: wired, but" in init.stderr) is not loads
        cp, _ = run_host([codex_cli, "exec", "--skip-git-repo-check", "hi"], cwd=hh.proj, env=hostcli.codex_env(hh.home))
    assert cp.returncode == 0, cp.stderr
    assert bool(lean.records("codex")) is loads
