"""End to end: leanctx on the real Gemini CLI (0.61.0), offline against a fake Gemini API.

`leanctx init --agent gemini` writes the hooks and the MCP server into the user's own
~/.gemini/settings.json (which keeps its comment). One `gemini -p` run has the scripted model
call `mcp_leanctx_ctx_read` twice on the same file: the first call returns the file, the second
the `[unchanged]` stub; the record the hooks published names the session id Gemini itself prints,
and the routine PreCompress before every model request bumped no compaction counter. A second
`gemini -p` is a new session and gets the content again. doctor passes, uninstall gives the user
back their file byte for byte. Headless Gemini runs hooks only in a trusted folder
(GEMINI_CLI_TRUST_WORKSPACE) and offers an MCP tool only when it may run without asking
(`--allowed-tools`).
"""
from __future__ import annotations

import json

import pytest

from tests.e2e import hostcli, tracetap
from tests.e2e.conftest import _cli
from tests.e2e.fake_gemini_chat import FakeGeminiChat, call, gemini_tool_results
from tests.e2e.settings_home import BIG, wire

pytestmark = pytest.mark.e2e

READ = "mcp_leanctx_ctx_read"
USER_SETTINGS = """{
  // the user's own settings: auth for the fake API, no telemetry
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false}
}
"""


@pytest.fixture
def gemini_cli():
    return _cli("gemini")


def run_gemini(gemini_cli, hh, lean, run_host, script, prompt="read big.py"):
    """One headless turn; returns (session id Gemini printed, the tool results it sent back)."""
    with FakeGeminiChat(script) as srv:
        env = hostcli.base_env(hh.home, {**lean.host_env, "GEMINI_API_KEY": "fake-key", "GEMINI_CLI_TRUST_WORKSPACE": "true",
                                         "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{srv.port}"})
        cp, _ = run_host([gemini_cli, "-p", prompt, "--output-format", "json", "--allowed-tools", READ], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert "Hook system message" not in cp.stderr and "leanctx" not in cp.stderr, cp.stderr  # our hooks stay silent
        out = json.loads(cp.stdout)
        return out["session_id"], gemini_tool_results(srv.main_requests[-1])


def test_gemini_session_id_stub_new_session_doctor_uninstall(gemini_cli, host_home, lean, run_host):
    hh = host_home
    settings, original, wired, tap = wire(hh, lean, "gemini", USER_SETTINGS)

    sid, results = run_gemini(gemini_cli, hh, lean, run_host, [call(READ, {"path": "big.py"}), call(READ, {"path": "big.py"}), "done"])
    assert [name for name, _ in results] == [READ, READ]
    assert "def function_199" in results[0][1]
    assert "[unchanged] big.py" in results[1][1] and "def function_1(" not in results[1][1]
    lean.assert_no_hook_errors()
    record = lean.only_record("gemini")
    assert record["session_id"] == record["conversation_id"] == sid  # the id Gemini itself printed
    assert record["transcript_path"].startswith(str(hh.home / ".gemini" / "tmp")) and sid[:8] in record["transcript_path"]
    assert record["cwd"] == str(hh.proj) and record["last_event"] == "SessionEnd"
    events = [json.loads(line)["event"] for line in tap.read_text().splitlines()]
    assert events.count("PreCompress") >= 2 and record["compactions"] == 0  # fired per request, compressed nothing

    sid2, results = run_gemini(gemini_cli, hh, lean, run_host, [call(READ, {"path": "big.py"}), "done"])
    assert sid2 != sid and "def function_199" in results[0][1]  # a new session gets the content
    assert lean.records("gemini").keys() == {sid, sid2}
    trace = tracetap.to_trace(tap, hh.proj, {"big.py": BIG}, agent="gemini", call_ids=False)
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], "gemini-two-sessions", host="Gemini CLI", source=__file__)

    settings.write_bytes(wired)  # the tap was our test's own hook; Gemini itself did not rewrite the file
    rc, report = lean.doctor("gemini")
    assert rc == 0, json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", "gemini")
    assert settings.read_bytes() == original
    assert not (hh.home / ".gemini" / "GEMINI.md").exists()


@pytest.mark.parametrize(("bad", "spot"), [
    (b'{\n  "security": {"auth": {"selectedType": "gemini-api-key"}},\n}\n', "the trailing comma at line"),
    (b'\xef\xbb\xbf{"security": {"auth": {"selectedType": "gemini-api-key"}}}\n', "the byte order mark at the start"),
], ids=["trailing comma", "byte order mark"])
def test_gemini_refuses_a_settings_file_init_warns_about(gemini_cli, host_home, lean, run_host, bad, spot):
    """Verified here: a trailing comma or a byte order mark stops Gemini (exit 52); init wires the
    file as it is, keeps what the user wrote, and warns with the fix (exit 1)."""
    hh = host_home
    settings = hh.home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_bytes(bad)
    init = lean.run("init", "--agent", "gemini", ok=False)
    assert init.returncode == 1 and "refuses to start (exit 52)" in init.stderr and spot in init.stderr
    env = hostcli.base_env(hh.home, {"GEMINI_API_KEY": "fake-key", "GEMINI_CLI_TRUST_WORKSPACE": "true",
                                     "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9"})
    cp, _ = run_host([gemini_cli, "-p", "hi"], cwd=hh.proj, env=env)
    assert cp.returncode == 52
