"""One coding session carried across `/compact` with the real Claude Code, three ways.

Shared by tests/e2e/test_compaction_carry_e2e.py (asserts) and bench/compaction_carry.py
(prints the figures). The fake model server (127.0.0.1) scripts the model:

1. `claude -p`: Read 8 files with the built-in Read tool (big.py is over Claude Code's
   5,000-token re-attach limit), TodoWrite, Edit f2.py, a failing Bash command.
2. `claude -p --continue "/compact"`: the fake answers with a deliberately poor summary.
3. f5.py (re-attached) is changed on disk.
4. `claude -p --continue "go on"`: the model re-reads all 8 files, through `ctx_read` when
   leanctx is installed, else through Read.

Ways: "none" (no leanctx), "before" (leanctx with LEANCTX_CARRY=0: what it did before carry),
"carry" (leanctx as shipped). The figures come from the requests the fake model receives.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e import hostcli
from tests.e2e.conftest import _run_host
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use

READ = "mcp__leanctx__ctx_read"
SMALL = [f"f{i}.py" for i in range(1, 8)]
BIG = "big.py"
ORDER = [BIG, *SMALL]  # read in this order: Claude Code re-attaches the 5 most recent
CHANGED = "f5.py"  # re-attached, then changed on disk between the compaction and the re-read
EDITED = "f2.py"  # edited by the model before the compaction: that makes it recent, so re-attached
ATTACHED = ["f2.py", "f4.py", "f5.py", "f6.py", "f7.py"]  # what Claude Code 2.1.197 re-attached (observed)
STALE = "f1.py"  # read, then changed on disk before the compaction (not re-attached)
POOR_SUMMARY = "<summary>SUMMARY-TEXT</summary>"
WAYS = ("none", "before", "carry")
CARD_HEAD = "[leanctx state card"
# facts planted before the compaction, for the state card
PLANTED = {"prompt": "PLANTED-PROMPT", "todo": "PLANTED-TODO", "failure": "PLANTED-FAIL"}


def file_text(name: str) -> str:
    if name == BIG:  # about 9k tokens: over the 5k re-attach limit
        return "".join(f"def big_function_{i}(x):\n    return x * {i} + {i * 7}\n\n" for i in range(700))
    n = int(name[1])
    return "".join(f"def f{n}_helper_{i}(value):\n    return value + {n * 100 + i}\n\n" for i in range(30))


def marker(name: str) -> str:
    """A line only this file holds (its last): counting it in a request counts copies of the file."""
    return "big_function_699" if name == BIG else f"f{name[1]}_helper_29"


def _run(claude_cli: str, hh: hostcli.HostHome, script: list, prompt: str, *extra: str, env_extra: dict) -> FakeAnthropic:
    tools = "Read,Edit,Bash,TaskCreate,TaskUpdate" + (f",{READ}" if env_extra.get("LEANCTX_HOME") else "")
    with FakeAnthropic(script=script, compact_text=POOR_SUMMARY) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"MCP_CONNECTION_NONBLOCKING": "false", **env_extra})
        cp, _ = _run_host([claude_cli, "-p", prompt, "--allowedTools", tools, *extra], cwd=hh.proj, env=env)
        assert cp.returncode == 0, cp.stderr
        return srv


def lean_env(hh: hostcli.HostHome) -> dict:
    return hostcli.base_env(hh.home, {"LEANCTX_HOME": str(hh.home / "leanctx-data")})


def run_way(claude_cli: str, root: Path, way: str) -> dict:
    """The whole scenario in a fresh HOME under `root`; returns what the model received."""
    assert way in WAYS
    hh = hostcli.make_home(root, {})
    p = hh.proj
    for name in ORDER:
        (p / name).write_text(file_text(name))
    env_extra: dict = {}
    if way != "none":
        off = "0" if way == "before" else "1"
        env_extra = {"LEANCTX_HOME": str(hh.home / "leanctx-data"), "LEANCTX_CARRY": off, "LEANCTX_COMPACT_HINT": off,
                     "LEANCTX_STATE_CARD": off}
        cp = subprocess.run([sys.executable, "-m", "leanctx", "init", "--agent", "claude"], env={**lean_env(hh), **env_extra},
                            capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr
    try:
        before = [tool_use("Read", {"file_path": str(p / name)}) for name in ORDER]
        before += [
            # Claude Code 2.1.197 offers TaskCreate/TaskUpdate in -p mode (TodoWrite "is not enabled")
            tool_use("TaskCreate", {"subject": "Refactor f2 helpers", "description": "rename"}),
            tool_use("TaskCreate", {"subject": "Fix the failing integration test", "description": "exit 3"}),
            tool_use("TaskCreate", {"subject": f"Write the release note {PLANTED['todo']}", "description": "notes"}),
            tool_use("TaskUpdate", {"taskId": "1", "status": "completed"}),
            tool_use("TaskUpdate", {"taskId": "2", "status": "in_progress"}),
            tool_use("Edit", {"file_path": str(p / EDITED), "old_string": "return value + 229", "new_string": "return value + 9229"}),
            tool_use("Bash", {"command": f"sh -c 'echo boom-{PLANTED['failure']} >&2; exit 3'", "description": "run the failing check"}),
            "Done for now.",
        ]
        _run(claude_cli, hh, before, f"Please refactor the helpers {PLANTED['prompt']}", env_extra=env_extra)
        # a file the model read changes on disk before the compaction (stamped 30 s later: the
        # runs are faster than the card's 1 s allowance between the transcript's clock and disk's)
        (p / STALE).write_text(file_text(STALE).replace("return value + 105", "return value + 99105"))
        later = time.time() + 30
        os.utime(p / STALE, (later, later))
        compact = _run(claude_cli, hh, [], "/compact", "--continue", env_extra=env_extra)
        (p / CHANGED).write_text(file_text(CHANGED).replace("return value + 510", "return value + 77510"))
        if way == "none":
            reads = [tool_use("Read", {"file_path": str(p / name)}) for name in ORDER]
        else:
            reads = [tool_use(READ, {"path": name}) for name in ORDER]
        after = _run(claude_cli, hh, [*reads, "all read"], "go on", "--continue", env_extra=env_extra)
    finally:
        if way != "none":
            subprocess.run([sys.executable, "-m", "leanctx", "stop"], env={**lean_env(hh), **env_extra},
                           capture_output=True, timeout=60)
    bodies = after.main_requests
    results = [last_tool_result(bodies[i + 1]) for i in range(len(ORDER))]
    return {"way": way, "home": hh, "bodies": bodies, "results": dict(zip(ORDER, results)),
            "compact_requests": [r.body for r in compact.log if r.kind == "compact"]}


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


def verdict(text: str, name: str) -> str:
    if text.startswith("[unchanged]"):
        return "stub"
    if text.startswith("[changed]"):
        return "diff"
    if marker(name) in text:
        return "full"
    return "other: " + text[:80]


def figures(out: dict) -> dict:
    """File tokens the model was given after the compaction, and the duplicates among them."""
    from leanctx.cache import tokens

    first, last = out["bodies"][0], out["bodies"][-1]
    attached = [n for n in ORDER if copies(first, n) >= 1]
    reread = sum(tokens.count(t) for t in out["results"].values())
    attached_tokens = sum(tokens.count(file_text(n)) for n in attached)  # as attached (f2 edited: close)
    return {
        "way": out["way"],
        "attached": attached,
        "verdicts": {n: verdict(t, n) for n, t in out["results"].items()},
        "duplicates": sum(1 for n in attached if copies(last, n) > 1),
        "reread_tokens": reread,
        "attached_tokens": attached_tokens,
        "total_tokens": reread + attached_tokens,
        "card_bytes": len((card_of(first) or "").encode()),
        "card_facts": sorted(k for k, v in PLANTED.items() if v in (card_of(first) or "")),
    }


def card_of(body: dict) -> str | None:
    """The state card as the model received it (inside a system reminder), or None."""
    for message in body["messages"]:
        blocks = message["content"] if isinstance(message["content"], list) else [{"type": "text", "text": message["content"]}]
        for block in blocks:
            text = block.get("text") if isinstance(block, dict) else None
            if isinstance(text, str) and CARD_HEAD in text:
                card = text[text.index(CARD_HEAD):]
                end = card.find("</system-reminder>")
                return (card[:end] if end >= 0 else card).strip()
    return None


def compaction_prompt(out: dict) -> str:
    """The last user text of the request that asked the fake model for the summary."""
    (body,) = out["compact_requests"]
    content = body["messages"][-1]["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content if isinstance(b, dict))


def transcript_of(hh: hostcli.HostHome) -> Path:
    (path,) = sorted((hh.home / ".claude" / "projects").glob("*/*.jsonl"))
    return path


def env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


AUTO_WINDOW = "20000"  # CLAUDE_CODE_AUTO_COMPACT_WINDOW: the fake's high usage figure crosses it


def run_auto(claude_cli: str, root: Path) -> dict:
    """One `claude -p` process: Read the 8 files; the answer to the 8th reports 190,000 input
    tokens, so Claude Code compacts on its own before the next turn; then ctx_read all 8."""
    import itertools

    hh = hostcli.make_home(root, {})
    p = hh.proj
    for name in ORDER:
        (p / name).write_text(file_text(name))
    env_extra = {"LEANCTX_HOME": str(hh.home / "leanctx-data")}
    cp = subprocess.run([sys.executable, "-m", "leanctx", "init", "--agent", "claude"], env={**lean_env(hh), **env_extra},
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    script = [tool_use("Read", {"file_path": str(p / n)}) for n in ORDER] + [tool_use(READ, {"path": n}) for n in ORDER] + ["done"]
    mains = itertools.count(1)

    def usage(body: dict, kind: str) -> int:
        return 190_000 if kind == "main" and next(mains) == len(ORDER) else 1

    try:
        with FakeAnthropic(script=script, compact_text=POOR_SUMMARY, input_tokens=usage) as srv:
            env = hostcli.claude_env(hh.home, srv.base_url, {"MCP_CONNECTION_NONBLOCKING": "false", **env_extra,
                                                             "CLAUDE_CODE_AUTO_COMPACT_WINDOW": AUTO_WINDOW})
            cp, _ = _run_host([claude_cli, "-p", "work", "--allowedTools", f"Read,{READ}"], cwd=p, env=env)
            assert cp.returncode == 0, cp.stderr
    finally:
        subprocess.run([sys.executable, "-m", "leanctx", "stop"], env={**lean_env(hh), **env_extra}, capture_output=True, timeout=60)
    bodies = srv.main_requests
    n = len(ORDER)
    return {"home": hh, "bodies": bodies, "kinds": [r.kind for r in srv.log if r.path.startswith("/v1/messages")],
            "results": {name: last_tool_result(bodies[n + 1 + i]) for i, name in enumerate(ORDER)}, "first": bodies[n]}
