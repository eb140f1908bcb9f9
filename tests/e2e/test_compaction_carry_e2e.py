"""End to end: carrying a coding session across `/compact` with the real Claude Code 2.1.197.

One scripted session (the fake model server on 127.0.0.1): the model reads 8 files with the
built-in Read tool (one over Claude Code's 5,000-token re-attach limit), updates its todos, edits
a file and runs a failing command; `--continue "/compact"` (the fake answers with a deliberately
poor summary); one of the files Claude Code re-attached is changed on disk; `--continue` re-reads
all 8 through `ctx_read`. The verdicts and the file copies are read from the requests the fake
model receives, three ways: no leanctx, leanctx without carry (`LEANCTX_CARRY=0`), leanctx with
carry. `scenario()` is shared with bench/compaction_carry.py, which prints the figures.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use

pytestmark = pytest.mark.e2e

READ = "mcp__leanctx__ctx_read"
TOOLS = f"Read,Edit,Bash,TodoWrite,{READ}"
SMALL = [f"f{i}.py" for i in range(1, 8)]
BIG = "big.py"
ORDER = [BIG, *SMALL]  # read in this order: Claude Code re-attaches the 5 most recent (f3..f7)
CHANGED = "f5.py"  # re-attached, then changed on disk between the compaction and the re-read
EDITED = "f2.py"  # edited by the model before the compaction: that makes it recent, so re-attached
ATTACHED = ["f2.py", "f4.py", "f5.py", "f6.py", "f7.py"]  # what Claude Code 2.1.197 re-attached (observed)
POOR_SUMMARY = "<summary>SUMMARY-TEXT</summary>"


def file_text(name: str) -> str:
    if name == BIG:  # about 9k tokens: over the 5k re-attach limit
        return "".join(f"def big_function_{i}(x):\n    return x * {i} + {i * 7}\n\n" for i in range(700))
    n = int(name[1])
    return "".join(f"def f{n}_helper_{i}(value):\n    return value + {n * 100 + i}\n\n" for i in range(30))


def marker(name: str) -> str:
    """A line only this file holds: counting it in a request counts copies of the file."""
    return "big_function_699" if name == BIG else f"f{name[1]}_helper_29"


def write_project(proj: Path) -> None:
    for name in ORDER:
        (proj / name).write_text(file_text(name))


def run_one(claude_cli, hh, run_host, script, prompt, *extra, env_extra=None):
    with FakeAnthropic(script=script, compact_text=POOR_SUMMARY) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"MCP_CONNECTION_NONBLOCKING": "false", **(env_extra or {})})
        cp, _ = run_host([claude_cli, "-p", prompt, "--allowedTools", TOOLS, *extra], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        return srv


def scenario(claude_cli, hh, run_host, reread_tool: str, env_extra=None) -> dict:
    """Run the three `claude -p` processes; return the post-compaction request bodies and the
    tool results of the re-reads (in ORDER)."""
    write_project(hh.proj)
    p = hh.proj
    before = [tool_use("Read", {"file_path": str(p / name)}) for name in ORDER]
    before += [
        tool_use("TodoWrite", {"todos": [
            {"content": "Refactor f2 helpers", "status": "completed", "activeForm": "Refactoring f2 helpers"},
            {"content": "Fix the failing integration test", "status": "in_progress", "activeForm": "Fixing the test"},
            {"content": "Write the release note PLANTED-TODO", "status": "pending", "activeForm": "Writing the note"},
        ]}),
        tool_use("Edit", {"file_path": str(p / EDITED), "old_string": "return value + 229", "new_string": "return value + 9229"}),
        tool_use("Bash", {"command": "sh -c 'echo boom-PLANTED-FAIL >&2; exit 3'", "description": "run the failing check"}),
        "Done for now.",
    ]
    run_one(claude_cli, hh, run_host, before, "Please refactor the helpers PLANTED-PROMPT", env_extra=env_extra)
    compact = run_one(claude_cli, hh, run_host, [], "/compact", "--continue", env_extra=env_extra)
    (p / CHANGED).write_text(file_text(CHANGED).replace("return value + 510", "return value + 77510"))
    if reread_tool == READ:
        reads = [tool_use(READ, {"path": name}) for name in ORDER]
    else:
        reads = [tool_use("Read", {"file_path": str(p / name)}) for name in ORDER]
    after = run_one(claude_cli, hh, run_host, [*reads, "all read"], "go on", "--continue", env_extra=env_extra)
    bodies = after.main_requests
    results = [last_tool_result(bodies[i + 1]) for i in range(len(ORDER))]
    return {"bodies": bodies, "results": results, "compact": compact, "first": bodies[0]}


def last_tool_result(body: dict) -> str:
    for message in reversed(body["messages"]):
        if isinstance(message["content"], list):
            blocks = [b for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
            if blocks:
                content = blocks[-1].get("content")
                if isinstance(content, list):
                    return "".join(c.get("text", "") for c in content if isinstance(c, dict))
                return str(content)
    return ""


def copies(body: dict, name: str) -> int:
    return json.dumps(body).count(marker(name))


def transcripts(home: Path) -> list[Path]:
    return sorted((home / ".claude" / "projects").glob("*/*.jsonl"))


@pytest.fixture
def wired(host_home, lean):
    lean.run("init", "--agent", "claude")
    yield host_home
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def test_carry_reattached_files_get_stubs_and_a_changed_one_a_diff(claude_cli, wired, lean, run_host):
    hh = wired
    out = scenario(claude_cli, hh, run_host, READ)
    first = out["first"]
    # Claude Code re-attached the 5 most recently read or edited files whole, not big.py
    assert [n for n in ORDER if copies(first, n) >= 1] == ATTACHED
    verdicts = dict(zip(ORDER, out["results"]))
    for name in ATTACHED:
        if name != CHANGED:
            assert verdicts[name].startswith("[unchanged]"), (name, verdicts[name][:200])
    assert "77510" in verdicts[CHANGED] and marker(CHANGED) not in verdicts[CHANGED], verdicts[CHANGED][:300]
    for name in (BIG, "f1.py", "f3.py"):
        assert marker(name) in verdicts[name], (name, verdicts[name][:200])
    last = out["bodies"][-1]
    for name in ATTACHED:
        assert copies(last, name) == 1, (name, copies(last, name))
    lean.assert_no_hook_errors()
