"""End to end: our VS Code hooks file sits in ~/.copilot/hooks beside Copilot CLI's, and the real
Copilot CLI (`copilot -p`, offline against tests/e2e/fake_openai.py) loads every *.json there.

VS Code does not run here; what this shows is the other direction. Copilot CLI 1.0.102 runs a file
in our VS Code file's shape (no "version", flat `command` entries, PascalCase events: a tap in that
shape shows it) with snake_case payloads and COPILOT_CLI=1. With both files of ours (`init --agent
copilot` and `init --agent vscode --guard`) its session runs as before (the record is Copilot's
own, the re-read a stub), and our VS Code entries publish nothing, deny nothing, log no error.
"""
from __future__ import annotations

import json
import sys

import pytest

from tests.e2e.test_codex_cache_e2e import outputs_by_call
from tests.e2e.test_copilot_e2e import copilot_cli, copilot_home, read_call, run_copilot  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

TAP = r'''
import json, os, sys
event, log = sys.argv[1], sys.argv[2]
with open(log, "a") as f:
    f.write(json.dumps({"event": event, "copilot_cli": os.environ.get("COPILOT_CLI"), "payload": json.loads(sys.stdin.read())}) + "\n")
'''


def test_copilot_cli_tolerates_our_vscode_file_in_its_hooks_folder(copilot_cli, copilot_home, lean, run_host):  # noqa: F811
    hh = copilot_home
    lean.run("init", "--agent", "copilot")
    lean.run("init", "--agent", "vscode", "--guard")
    ours = hh.home / ".copilot" / "hooks" / "leanctx-vscode.json"
    assert ours.is_file() and (hh.home / ".copilot" / "hooks" / "leanctx.json").is_file()
    tap, tap_log = hh.root / "vscode_tap.py", hh.root / "vscode_tap.jsonl"
    tap.write_text(TAP)
    shaped = {"hooks": {e: [{"type": "command", "command": f"{sys.executable} {tap} {e} {tap_log}", "timeout": 10}]
                        for e in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop")}}
    (hh.home / ".copilot" / "hooks" / "vscode-shaped-tap.json").write_text(json.dumps(shaped, indent=2) + "\n")

    first, second = read_call(), read_call()
    _, bodies, session = run_copilot(copilot_cli, hh, run_host, [first, second, "The file defines 200 functions."])
    out = outputs_by_call(bodies)
    assert "def function_199" in out[first["call_id"]]
    assert out[second["call_id"]].startswith("[unchanged]"), out[second["call_id"]][:300]
    lean.assert_no_hook_errors()
    assert lean.records("vscode") == {}
    assert lean.only_record("copilot")["session_id"] == session

    # what Copilot does with a file in our VS Code file's shape (no "version", flat `command`
    # entries, VS Code's PascalCase events): a tap in that very shape, beside ours
    taps = [json.loads(line) for line in tap_log.read_text().splitlines()] if tap_log.exists() else []
    # 1.0.102 runs it, so it ran our VS Code entries too (which published nothing, above)
    assert {t["event"] for t in taps} == {"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"}, taps
    for t in taps:  # and it says so in the environment, which our hook heeds
        assert t["copilot_cli"] == "1" and t["payload"].get("session_id") == session, t

    rc, report = lean.doctor("vscode")
    assert rc == 0, json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", "vscode")
    lean.run("uninstall", "--agent", "copilot")
    assert not ours.exists()
