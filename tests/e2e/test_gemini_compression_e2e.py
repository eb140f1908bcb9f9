"""End to end: Gemini CLI 0.61.0's automatic compression, offline against a fake Gemini API.

No hook tells of it (PreCompress(auto) fires before every request), but the CLI writes the new
history into its chat recording as one `{"$set":{"messages":…}}` line. Here a resumed session
reads big.py twice (the second read is the stub), then the fake model reports a prompt of
1,000,000 tokens: before the next request Gemini compresses (two summary requests, the history
restarts from the snapshot) and the read after that gets the content again, not a stub.
"""
from __future__ import annotations

import json

import pytest

from tests.e2e import hostcli
from tests.e2e.conftest import _cli
from tests.e2e.fake_gemini_chat import FakeGeminiChat, call, gemini_tool_results
from tests.e2e.settings_home import wire
from tests.e2e.test_gemini_e2e import READ, USER_SETTINGS

pytestmark = pytest.mark.e2e


def run(gemini_cli, hh, lean, run_host, script, prompt, extra=(), tokens=()):
    with FakeGeminiChat(script, prompt_tokens=tokens) as srv:
        env = hostcli.base_env(hh.home, {**lean.host_env, "GEMINI_API_KEY": "fake-key", "GEMINI_CLI_TRUST_WORKSPACE": "true",
                                         "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{srv.port}"})
        cp, _ = run_host([gemini_cli, "-p", prompt, "--output-format", "json", "--allowed-tools", READ, *extra], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr[-3000:]
        return json.loads(cp.stdout)["session_id"], srv


def test_gemini_automatic_compression_resends_what_it_dropped(host_home, lean, run_host):
    gemini_cli = _cli("gemini")
    hh = host_home
    wire(hh, lean, "gemini", USER_SETTINGS)
    read = call(READ, {"path": "big.py"})
    sid, _ = run(gemini_cli, hh, lean, run_host, [read, "done"], "read big.py")
    sid2, srv = run(gemini_cli, hh, lean, run_host, [read, read, read, read, "done"], "read it again",
                    extra=("--resume", "latest"), tokens=[10, 10, 1_000_000, 10])
    assert sid2 == sid
    # the result of the read each main request carries back (requests 1..4)
    last = [gemini_tool_results(body)[-1][1] for body in srv.main_requests[1:5]]
    assert "def function_199" in last[0]  # the resume replaced the history: sent again once
    assert "[unchanged] big.py" in last[1] and "[unchanged] big.py" in last[2]  # nothing compressed yet
    summaries = [b for b in srv.side_requests if "state_snapshot" in json.dumps(b)]
    assert len(summaries) == 2  # Gemini really compressed (a summary, then its self-check)
    assert "Got it. Thanks for the additional context!" in json.dumps(srv.main_requests[4])
    assert "def function_199" in last[3] and "[unchanged]" not in last[3]  # after it: content
    record = lean.only_record("gemini")
    assert record["compactions"] == 0  # no hook said anything; the chat recording did
    chat = open(record["transcript_path"], "rb").read()
    assert chat.count(b'{"$set":{"messages":') >= 3
    lean.assert_no_hook_errors()
