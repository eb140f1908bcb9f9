"""End to end: Qwen Code 0.15.10's automatic compression, offline against a fake Chat Completions API.

Qwen compresses before a request once the prompt the model last reported reaches 70% of the
context window (`COMPRESSION_TOKEN_THRESHOLD`): it fires PreCompact(auto), asks the model for a
summary, keeps the newest 30% of the history and writes the compressed history into its chat
recording (the hooks' `transcript_path`) as a `{"type":"system","subtype":"chat_compression"}`
record, then fires SessionStart(source=compact) and PostCompact. Here PreCompact and SessionStart
are taken out of the settings after init (as if their hooks were lost):
the fake model reports a 1,000,000-token prompt after the stub, and the read after the
compression gets the content again, from the recording alone.
"""
from __future__ import annotations

import json

import pytest

from leanctx.installer import jsonc
from tests.e2e import hostcli
from tests.e2e.conftest import _cli
from tests.e2e.fake_gemini_chat import FakeGeminiChat, call, chat_tool_results
from tests.e2e.settings_home import wire
from tests.e2e.test_qwen_e2e import READ, SEARCH, USER_SETTINGS

pytestmark = pytest.mark.e2e


def test_qwen_compression_without_its_hook_is_read_from_the_chat_recording(host_home, lean, run_host):
    qwen_cli = _cli("qwen")
    hh = host_home
    settings, _, _, tap = wire(hh, lean, "qwen", USER_SETTINGS)
    doc = jsonc.loads(settings.read_text())
    # what init wired for a compaction (Qwen runs SessionStart(source=compact) after one); now lost
    assert doc["hooks"].pop("PreCompact") and doc["hooks"].pop("SessionStart") and "PostCompact" not in doc["hooks"]
    settings.write_text(json.dumps(doc, indent=2) + "\n")
    reads = [call(READ, {"path": "big.py"}) for _ in range(3)]
    with FakeGeminiChat([SEARCH, *reads, "done"], prompt_tokens=[10, 10, 1_000_000, 10],
                        side_prompt_tokens=600_000) as srv:
        env = hostcli.base_env(hh.home, {**lean.host_env, "OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": srv.chat_url,
                                         "OPENAI_MODEL": "fake-model"})
        cp, _ = run_host([qwen_cli, "-p", "read big.py", "--output-format", "json", "--allowed-tools", READ],
                         cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr[-3000:]
        results = chat_tool_results(srv.main_requests[-1])
        side = [json.dumps(b) for b in srv.side_requests]
    first, second, third = (results.get(r["id"], "") for r in reads)
    assert "def function_199" in first and second.startswith("[unchanged] big.py"), second[:200]
    record = lean.only_record("qwen")
    chat = open(record["transcript_path"], "rb").read().decode()
    compressions = [r for r in map(json.loads, chat.splitlines()) if r.get("subtype") == "chat_compression"]
    assert len(compressions) == 1 and side, "Qwen did not compress"
    events = [json.loads(line)["event"] for line in tap.read_text().splitlines()]
    assert not {"PreCompact", "SessionStart"} & set(events) and record["compactions"] == 0  # no hook said anything
    assert "def function_199" in third and not third.startswith("[unchanged]"), third[:200]
    lean.assert_no_hook_errors()
