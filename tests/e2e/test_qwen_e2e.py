"""End to end: leanctx on the real Qwen Code (0.15.10), offline against a fake Chat Completions API.

`leanctx init --agent qwen` writes the hooks and the MCP server into ~/.qwen/settings.json and
the read rule into ~/.qwen/QWEN.md. Qwen defers MCP tools: the scripted model first loads ctx_read
with `tool_search` (as the read rule tells it), then calls it twice — content, then the stub. `qwen
-p` fires no SessionStart: the record is made by the Notification that comes first, and names the
session id Qwen prints. A second `qwen -p` is a new session and gets the content. doctor passes;
uninstall restores the user's file byte for byte (a file with "$version", which Qwen leaves alone)
or, after Qwen rewrote a file without it, takes exactly our entries out.
"""
from __future__ import annotations

import json

import pytest

from leanctx.installer import jsonc
from tests.e2e import hostcli, tracetap
from tests.e2e.conftest import _cli
from tests.e2e.fake_gemini_chat import FakeGeminiChat, call, chat_tool_results
from tests.e2e.settings_home import BIG, wire

pytestmark = pytest.mark.e2e

READ = "mcp__leanctx__ctx_read"
SEARCH = call("tool_search", {"query": f"select:{READ}"})  # what the installed read rule tells the model
USER_SETTINGS = """{
  // the user's own settings: the fake OpenAI-compatible endpoint, no telemetry
  "security": {"auth": {"selectedType": "openai"}},
  "model": {"name": "fake-model"},
  "privacy": {"usageStatisticsEnabled": false},
  "$version": 4
}
"""


@pytest.fixture
def qwen_cli():
    return _cli("qwen")


def run_qwen(qwen_cli, hh, lean, run_host, script, prompt="read big.py"):
    """One headless turn; returns (session id Qwen printed, tool_call_id -> result it sent back)."""
    with FakeGeminiChat(script) as srv:
        env = hostcli.base_env(hh.home, {**lean.host_env, "OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": srv.chat_url,
                                         "OPENAI_MODEL": "fake-model"})
        cp, _ = run_host([qwen_cli, "-p", prompt, "--output-format", "json", "--allowed-tools", READ], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr[-3000:]
        messages = json.loads(cp.stdout)
        ids = {m.get("session_id") for m in messages if m.get("type") in ("system", "result")}
        assert len(ids) == 1, ids
        return ids.pop(), chat_tool_results(srv.main_requests[-1])


def test_qwen_session_id_stub_new_session_doctor_uninstall(qwen_cli, host_home, lean, run_host):
    hh = host_home
    settings, original, wired, tap = wire(hh, lean, "qwen", USER_SETTINGS)
    assert f'"select:{READ}"' in (hh.home / ".qwen" / "QWEN.md").read_text()
    tapped = settings.read_bytes()

    first, second = call(READ, {"path": "big.py"}), call(READ, {"path": "big.py"})
    sid, results = run_qwen(qwen_cli, hh, lean, run_host, [SEARCH, first, second, "done"])
    assert READ in results[SEARCH["id"]]  # the deferred tool is loaded
    assert "def function_199" in results[first["id"]]
    assert results[second["id"]].startswith("[unchanged] big.py"), results[second["id"]]
    lean.assert_no_hook_errors()
    record = lean.only_record("qwen")
    assert record["session_id"] == record["conversation_id"] == sid  # the id Qwen itself printed
    assert record["transcript_path"].endswith(f"/chats/{sid}.jsonl") and record["cwd"] == str(hh.proj)
    events = [json.loads(line)["event"] for line in tap.read_text().splitlines()]
    assert events[0] == "Notification" and "SessionStart" not in events  # `-p`: the Notification comes first
    assert events.count("UserPromptSubmit") >= 3 and record["compactions"] == 0

    again = call(READ, {"path": "big.py"})
    sid2, results = run_qwen(qwen_cli, hh, lean, run_host, [SEARCH, again, "done"])
    assert sid2 != sid and "def function_199" in results[again["id"]]  # a new session gets the content
    trace = tracetap.to_trace(tap, hh.proj, {"big.py": BIG}, agent="qwen", call_ids=False)
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], "qwen-two-sessions", host="Qwen Code", source=__file__)

    assert settings.read_bytes() == tapped  # a file with "$version" is not rewritten by Qwen
    settings.write_bytes(wired)  # the tap was our test's own hook
    rc, report = lean.doctor("qwen")
    assert rc == 0, json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", "qwen")
    assert settings.read_bytes() == original
    assert not (hh.home / ".qwen" / "QWEN.md").exists()


def test_qwen_rewrites_the_settings_file_and_uninstall_still_takes_only_ours(qwen_cli, host_home, lean, run_host):
    """A settings file without "$version" is rewritten by Qwen on its first start (re-indented,
    comments kept, "$version" added): uninstall then takes exactly our entries out."""
    hh = host_home
    settings = hh.home / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS.replace(',\n  "$version": 4', ""))
    lean.run("init", "--agent", "qwen")
    wired = settings.read_bytes()
    sid, _ = run_qwen(qwen_cli, hh, lean, run_host, ["hello"], prompt="hi")
    rewritten = settings.read_text()
    assert rewritten.encode() != wired and '"$version"' in rewritten and "// the user's own settings" in rewritten
    assert lean.only_record("qwen")["session_id"] == sid  # our entries survived Qwen's rewrite and ran
    lean.run("uninstall", "--agent", "qwen")
    text = settings.read_text()
    assert "leanctx" not in text and "// the user's own settings" in text
    assert jsonc.loads(text) == jsonc.loads(USER_SETTINGS)  # the user's settings plus Qwen's "$version": 4


def test_qwen_renames_a_settings_file_with_a_byte_order_mark_and_init_says_so(qwen_cli, host_home, lean, run_host):
    """Verified here: Qwen renames a settings.json it cannot parse (a BOM is enough) to
    `settings.json.corrupted.<ms>` and runs without it; init warns before that happens (exit 1)."""
    hh = host_home
    settings = hh.home / ".qwen" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(b"\xef\xbb\xbf" + USER_SETTINGS.encode())
    init = lean.run("init", "--agent", "qwen", ok=False)
    assert init.returncode == 1 and "renames this file to settings.json.corrupted" in init.stderr
    env = hostcli.base_env(hh.home, {"OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_MODEL": "m"})
    run_host([qwen_cli, "-p", "hi"], cwd=hh.proj, env=env)
    assert not settings.exists() and [p.name.split(".")[2] for p in settings.parent.glob("settings.json.corrupted.*")] == ["corrupted"]
