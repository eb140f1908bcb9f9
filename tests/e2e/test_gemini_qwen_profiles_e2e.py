"""End to end: `--bot` and `--guard` on the real Gemini CLI (0.61.0) and Qwen Code (0.15.10).

- guard: the scripted model reads another user's file with the host's own `read_file`; our
  pre-tool hook denies it in the host's deny form, so the file never reaches the model;
- bot: each user prompt and reply is recorded once (Qwen fires UserPromptSubmit before every
  model request, with an empty prompt on the continuations); on Gemini the next session's
  SessionStart hands the thread back to the model. `qwen -p` fires no SessionStart, so there is
  nothing to hand back in print mode (interactive Qwen fires it).
"""
from __future__ import annotations

import json

import pytest

from leanctx.state.slug import slugify
from tests.e2e import hostcli
from tests.e2e.conftest import _cli
from tests.e2e.fake_gemini_chat import FakeGeminiChat, call, chat_tool_results, gemini_tool_results

pytestmark = pytest.mark.e2e

SECRET = "bob's phone number is 555-0100"


@pytest.fixture(params=["gemini", "qwen"])
def host(request):
    return request.param, _cli(request.param)


def run(host, hh, lean, run_host, script, prompt, extra_env):
    """One headless turn of `host`: (its stdout, the fake server)."""
    name, cli = host
    with FakeGeminiChat(script) as srv:
        if name == "gemini":
            env = {"GEMINI_API_KEY": "k", "GEMINI_CLI_TRUST_WORKSPACE": "true", "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{srv.port}"}
            (hh.home / ".gemini").mkdir(exist_ok=True)
        else:
            env = {"OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": srv.chat_url, "OPENAI_MODEL": "fake-model"}
        cp, _ = run_host([cli, "-p", prompt, "--output-format", "json"], cwd=hh.proj,
                         env=hostcli.base_env(hh.home, {**lean.host_env, **env, **extra_env}))
        assert cp.returncode == 0, cp.stderr[-3000:]
        return cp.stdout, srv


def settings_for(name: str) -> str:
    if name == "gemini":
        return '{"security": {"auth": {"selectedType": "gemini-api-key"}}}'
    return '{"security": {"auth": {"selectedType": "openai"}}, "model": {"name": "fake-model"}, "$version": 4}'


def test_guard_denies_another_users_file_in_the_hosts_own_form(host, host_home, lean, run_host):
    name, _ = host
    hh = host_home
    cks = hh.proj / "bot-users"  # inside the workspace: Gemini refuses paths outside it before any hook
    secret = cks / "user" / slugify("bob") / "profile.md"
    secret.parent.mkdir(parents=True)
    secret.write_text(SECRET)
    (hh.home / f".{name}").mkdir()
    (hh.home / f".{name}" / "settings.json").write_text(settings_for(name))
    lean.run("init", "--agent", name, "--guard")
    read = call("read_file", {"file_path": str(secret)})
    _, srv = run(host, hh, lean, run_host, [read, "done"], "show me bob's profile", {"CKS_HOME": str(cks), "CKS_ACTIVE_USER": "alice"})
    last = srv.main_requests[-1]
    result = gemini_tool_results(last)[0][1] if name == "gemini" else chat_tool_results(last)[read["id"]]
    assert SECRET not in srv.all_text() and "leanctx" in result and str(cks) in result, result
    if name == "gemini":
        assert "Tool execution blocked" in result  # Gemini's words for a BeforeTool deny
    lean.assert_no_hook_errors()


def test_bot_records_each_turn_once_and_gemini_hands_the_thread_back(host, host_home, lean, run_host):
    name, _ = host
    hh = host_home
    (hh.home / f".{name}").mkdir()
    (hh.home / f".{name}" / "settings.json").write_text(settings_for(name))
    lean.run("init", "--agent", name, "--bot")
    env = {"CKS_HOME": str(hh.home / ".cks"), "CKS_ACTIVE_USER": "Ana"}
    listing = call("list_directory", {"dir_path": str(hh.proj)} if name == "gemini" else {"path": str(hh.proj)})
    run(host, hh, lean, run_host, [listing, "The VPS is chosen; next is the bot token."], "set up the telegram bot", env)
    state = json.loads((hh.home / ".cks" / "user" / slugify("Ana") / "conversation-state.json").read_text())
    turns = [(t["role"], t["text"]) for t in state["recent_turns"]]
    assert turns == [("user", "set up the telegram bot"), ("agent", "The VPS is chosen; next is the bot token.")], turns
    record = lean.only_record(name)
    assert {t["session_id"] for t in state["recent_turns"]} == {record["session_id"]}

    _, srv = run(host, hh, lean, run_host, ["Welcome back."], "where were we?", env)
    first = json.dumps(srv.main_requests[0])
    if name == "gemini":  # SessionStart's additionalContext reaches the first request of the new session
        assert "The VPS is chosen; next is the bot token." in first and "set up the telegram bot" in first
    lean.assert_no_hook_errors()
