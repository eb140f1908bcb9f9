"""Self-tests of the e2e helpers (fake model servers, host CLI runner, Codex trust hash).

They do not involve leanctx.  The protocol tests run everywhere; the ``e2e`` ones need the real
CLIs (LEANCTX_HOST_CLI_DIR, <repo>/.ci/cache/node_modules/.bin or PATH) and are skipped otherwise.
"""
from __future__ import annotations

import json
import sys
import urllib.request

import pytest

from tests.e2e import hostcli
import tomlkit

from leanctx.installer.codex_trust import hook_hash, iter_hooks, states, status
from tests.e2e.fake_anthropic import FakeAnthropic, text, tool_use
from tests.e2e.fake_openai import FakeOpenAI, shell_call

HOOK_LOGGER = r'''
import json, os, sys
data = sys.stdin.read()
with open(sys.argv[2], "a") as f:
    f.write(json.dumps({"event": sys.argv[1], "payload": json.loads(data or "null"), "ppid": os.getppid()}) + "\n")
'''


def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers.get("content-type"), r.read().decode()


def _sse_events(raw):
    return [blk.split("\n", 1)[0][len("event: "):] for blk in raw.strip().split("\n\n")]


def test_fake_anthropic_protocol():
    with FakeAnthropic(script=[tool_use("Read", {"file_path": "/x"}), "bye"]) as srv:
        ct, raw = _post(srv.base_url + "/v1/messages?beta=true", {"stream": True, "tools": [{"name": "Read"}], "messages": []})
        assert ct == "text/event-stream"
        assert _sse_events(raw) == ["message_start", "content_block_start", "content_block_delta",
                                    "content_block_stop", "message_delta", "message_stop"]
        assert '"stop_reason": "tool_use"' in raw and '\\"file_path\\": \\"/x\\"' in raw
        _, raw = _post(srv.base_url + "/v1/messages", {"stream": True, "messages": []})  # no tools: side
        assert "ok" in raw
        _, raw = _post(srv.base_url + "/v1/messages/count_tokens", {"messages": []})
        assert json.loads(raw) == {"input_tokens": 10}
        _, raw = _post(srv.base_url + "/v1/messages", {"stream": False, "tools": [{"name": "Read"}], "messages": []})
        assert json.loads(raw)["content"] == [text("bye")]
        assert [r.kind for r in srv.log] == ["main", "side", "count_tokens", "main"]
        assert srv.turns_served == 2


def test_fake_anthropic_loads_a_deferred_tool_with_toolsearch_first():
    """A scripted call of a tool the request defers (offered only through ToolSearch, as Claude Code
    2.1.332 does with MCP tools) is preceded by a ToolSearch call; the scripted answer follows."""
    deferred = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "Read"}, {"name": "ToolSearch"}]}
    loaded = dict(deferred, tools=[{"name": "Read"}, {"name": "ToolSearch"}, {"name": "mcp__s__t", "defer_loading": True}])
    with FakeAnthropic(script=[tool_use("mcp__s__t", {"a": 1}), tool_use("Read", {"file_path": "/x"})]) as srv:
        first = json.loads(_post(srv.base_url + "/v1/messages", deferred)[1])["content"]
        second = json.loads(_post(srv.base_url + "/v1/messages", loaded)[1])["content"]
        third = json.loads(_post(srv.base_url + "/v1/messages", deferred)[1])["content"]  # Read is offered
        assert [r.kind for r in srv.log] == ["tool_search", "main", "main"] and len(srv.main_requests) == 2
    assert first[0]["name"] == "ToolSearch" and first[0]["input"] == {"query": "select:mcp__s__t"}
    assert second[0]["name"] == "mcp__s__t" and second[0]["input"] == {"a": 1}
    assert third[0]["name"] == "Read"
    with FakeAnthropic(script=[tool_use("mcp__s__t")], load_deferred=False) as srv:
        assert json.loads(_post(srv.base_url + "/v1/messages", deferred)[1])["content"][0]["name"] == "mcp__s__t"


def test_fake_openai_protocol():
    with FakeOpenAI(script=[shell_call("cat a.txt"), "hi"]) as srv:
        body = {"stream": True, "tools": [{"type": "function", "name": "exec_command"}], "input": []}
        ct, raw = _post(srv.base_url + "/responses", body)
        assert ct == "text/event-stream"
        ev = _sse_events(raw)
        assert ev[0] == "response.created" and ev[-1] == "response.completed"
        assert '"name": "exec_command"' in raw and '\\"cmd\\": \\"cat a.txt\\"' in raw
        _, raw = _post(srv.base_url + "/responses", body)
        assert "response.output_text.delta" in raw and '"hi"' in raw
        assert srv.turns_served == 2


# Hashes reported by `codex app-server` hooks/list (Codex 0.171.0) for these exact hooks.
CODEX_HASH_VECTORS = [
    ("PreToolUse", "Bash", {"type": "command", "command": "echo a", "timeout": 5},
     "sha256:9cd648ee888b820ea0f1507715165f879f5abf81f7ba6d22cb69249cfd9af728"),
    ("PreToolUse", "Bash", {"type": "command", "command": "echo b"},
     "sha256:32dc8c77d13c35aedddf4d22d2d04bc57512f693cb64d5d902eb9e9ad558219a"),
    ("PreToolUse", "*", {"type": "command", "command": "echo c", "async": True, "statusMessage": "Checking…"},
     "sha256:fcaf173840f4aaf3faafe0192356e7f985f937b67b2b3ddfbd16b7dd983b7a4d"),
    ("PreToolUse", "", {"type": "command", "command": "echo d", "timeout": 0},
     "sha256:9a9ad5ffc1b9d1d1e5869698ac8a0f1289fc83619aec4d0c2c7db37c41ba7e1d"),
    ("UserPromptSubmit", "ignored?", {"type": "command", "command": "echo 'héllo \"q\"'", "timeout": 15},
     "sha256:8bff923eed64bbb6fcb156a9178b4588a3369b11e4b83c9f71ab97190fe0bbdf"),
    ("Stop", "x", {"type": "command", "command": "echo e", "commandWindows": "echo win", "timeout": 7},
     "sha256:70536e02027ab656ed7db193c26c45fd7bb0c69335630382605875eea47d1dc4"),
    ("SessionStart", "startup|resume|clear", {"type": "command", "command": "echo f", "additionalContextLimit": 100},
     "sha256:52bec6f0667a3c00e72bf9584b260c4f4365e4e5308d28facacd770ade4a85ea"),
    ("SessionEnd", None, {"type": "command", "command": "echo g", "timeout": 30},
     "sha256:f1e4311d3105e1b19776d8704ec530e7ce072dc139a1270de4e7b01e19622d36"),
]


@pytest.mark.parametrize("event,matcher,handler,expected", CODEX_HASH_VECTORS)
def test_codex_hook_hash_vectors(event, matcher, handler, expected):
    assert hook_hash(event, handler, matcher) == expected


@pytest.mark.e2e
def test_claude_full_turn_fires_hooks(claude_cli, host_home, tmp_path):
    logger = tmp_path / "hooklog.py"
    logger.write_text(HOOK_LOGGER)
    log = tmp_path / "hooks.jsonl"
    events = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"]
    hostcli.write_claude_settings(host_home.home, {"hooks": {
        e: [{"hooks": [{"type": "command", "command": f"{sys.executable} {logger} {e} {log}", "timeout": 10}]}]
        for e in events}})
    with FakeAnthropic(script=[tool_use("Read", {"file_path": str(host_home.proj / "a.txt")}),
                               "The file says hello."]) as srv:
        cp = hostcli.run_claude("read a.txt", home=host_home.home, cwd=host_home.proj, base_url=srv.base_url, timeout=90)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == "The file says hello."
        assert "hello world file" in srv.all_text()
    seen = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert seen == events


@pytest.mark.e2e
def test_codex_full_turn_and_trust(codex_cli, host_home, tmp_path):
    logger = tmp_path / "hooklog.py"
    logger.write_text(HOOK_LOGGER)
    log = tmp_path / "hooks.jsonl"
    events = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"]
    hooks_path = hostcli.write_codex_hooks(host_home.home, {
        e: [{"hooks": [{"type": "command", "command": f"{sys.executable} {logger} {e} {log}", "timeout": 10}]}]
        for e in events})
    with FakeOpenAI(script=[shell_call("cat a.txt"), "The file says hello.",
                            "second run"]) as srv:
        hostcli.write_codex_config(host_home.home, srv.base_url)
        cp = hostcli.run_codex_exec("read a.txt", home=host_home.home, cwd=host_home.proj, timeout=90)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.strip() == "The file says hello."
        assert "hello world file" in srv.all_text()
        seen = [json.loads(line)["event"] for line in log.read_text().splitlines()]
        assert seen == events

        # Trust only Stop, computed offline; run without the bypass flag.
        entries = list(iter_hooks(json.loads(hooks_path.read_text()), str(hooks_path)))
        stop = next(h for h in entries if h["event"] == "Stop")
        listed = {h["key"]: h for h in hostcli.codex_hooks_list(host_home.home, host_home.proj)}
        assert {k: v["currentHash"] for k, v in listed.items()} == {h["key"]: h["hash"] for h in entries}
        hostcli.write_codex_config(host_home.home, srv.base_url,
                                   tables=f'[hooks.state."{stop["key"]}"]\ntrusted_hash = "{stop["hash"]}"')
        current = states(tomlkit.parse((host_home.codex_home / "config.toml").read_text()).unwrap())
        assert status(current.get(stop["key"]), stop["hash"]) == "trusted"
        log.write_text("")
        cp = hostcli.run_codex_exec("again", home=host_home.home, cwd=host_home.proj,
                                    bypass_hook_trust=False, timeout=90)
        assert cp.returncode == 0, cp.stderr
        assert [json.loads(line)["event"] for line in log.read_text().splitlines()] == ["Stop"]
