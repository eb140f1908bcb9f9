"""End to end: GitHub Copilot CLI's built-in `view` tool and its `bash` shell reads under the read
cache's rules, on the real CLI (`copilot -p`, offline, BYOK against tests/e2e/fake_openai.py).

`leanctx init --agent copilot` wires preToolUse (the gate: a refusal carrying the cache's text) and
postToolUse (the credit). Copilot's hook payloads name no call: each hook finds its call's id in
Copilot's session log (leanctx/agents/copilotlog.py). The scripted model uses only the built-in
tools (view, edit, or bash); what it receives is read back from the requests the fake server gets.
Copilot hands a preToolUse refusal to the model as "Denied by preToolUse hook: <reason>"
(1.0.102, verified here).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.e2e.fake_openai import function_call
from tests.e2e.test_codex_cache_e2e import outputs_by_call
from tests.e2e.test_copilot_e2e import copilot_cli, copilot_home, run_copilot, user_files  # noqa: F401 - fixtures

pytestmark = pytest.mark.e2e

LINES = 600
REFUSAL = "Denied by preToolUse hook: "


def source(n: int = 200, tag: str = "") -> str:
    return "".join(f"def function_{i}(x):\n    return x * {i}{tag}\n\n" for i in range(n))


@pytest.fixture
def wired(copilot_home, lean):
    hh = copilot_home
    hh.before = user_files(hh)
    lean.run("init", "--agent", "copilot")
    (hh.proj / "big.py").write_text(source())
    # the daemon is the MCP server's; up before the fake model's instant first call
    lean.run("serve", "--detach")
    yield hh
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def is_content(text: str) -> bool:
    return "def function_199" in text and not text.startswith(("[", REFUSAL))


def refused(text: str) -> str:
    """The cache's text inside Copilot's refusal ('' when the call was not refused)."""
    return text[len(REFUSAL):] if text.startswith(REFUSAL) else ""


def converse(cli, hh, run_host, script: list, prompt: str = "work on big.py", *args) -> tuple[list, list]:
    """Run one `copilot -p` turn; the answer the model got for each scripted call, in order."""
    calls = [item for item in script if isinstance(item, dict)]
    _, bodies, _ = run_copilot(cli, hh, run_host, script, *args, prompt=prompt)
    out = outputs_by_call(bodies)
    return [out.get(c["call_id"], "") for c in calls], bodies


def test_view_only_model_stub_edit_right_after_ask_again_changes_and_new_session(copilot_cli, wired, lean, run_host):
    hh = wired
    big = hh.proj / "big.py"
    path = str(big)

    def view(**kw):
        return function_call("view", {"path": path, **kw})

    def edit(old: str, new: str):
        return function_call("edit", {"path": path, "old_str": old, "new_str": new})

    changed_by_another_program = view()

    def other_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return changed_by_another_program

    script = [
        view(),                                         # 0 content
        view(),                                         # 1 unchanged: the stub
        edit("return x * 7\n", "return x * 70\n"),      # 2 an edit right after the refusal
        view(),                                         # 3 after the model's own edit: a diff, never [unchanged]
        view(),                                         # 4 asked again right after: the content
        view(view_range=[100, 129]),                    # 5 a held range: its stub
        view(view_range=[100, 129]),                    # 6 asked again right after: the content
        other_program,                                  # 7 changed by another program: never [unchanged]
        view(),                                         # 8 asked again: the content
        "done",
    ]
    calls = [changed_by_another_program if item is other_program else item for item in script[:-1]]
    _, bodies, session = run_copilot(copilot_cli, hh, run_host, script, prompt="work on big.py")
    out = outputs_by_call(bodies)
    got = [out.get(c["call_id"], "") for c in calls]
    assert is_content(got[0]), got[0][:300]
    assert refused(got[1]).startswith(f"[unchanged] big.py {LINES} lines"), got[1][:300]
    assert "updated" in got[2].lower() and "return x * 70\n" in big.read_text(), got[2][:300]
    diff = refused(got[3])
    assert diff.startswith("[changed] big.py") and "+    return x * 70" in diff, got[3][:400]
    assert is_content(got[4]) and "x * 70" in got[4], "asking again right after a diff gave no content"
    assert refused(got[5]).startswith(f"[unchanged] big.py L100-129 of {LINES} lines"), got[5][:300]
    assert not refused(got[6]) and got[6].startswith("def function_33"), got[6][:300]
    after_change = refused(got[7])
    assert after_change.startswith("[changed] big.py") and "+    return x * 9 + 0" in after_change, got[7][:300]
    assert is_content(got[8]) and "x * 9 + 0" in got[8]
    lean.assert_no_hook_errors()
    notes = lean.only_record("copilot")["read_calls"]
    views = {c["call_id"] for c in calls if c["name"] == "view"}
    assert views <= set(notes), (sorted(notes), sorted(views))  # every view named by its id from Copilot's log

    # a new session (a new copilot process) never inherits the stub
    again = view()
    got, _ = converse(copilot_cli, hh, run_host, [again, "done"])
    assert is_content(got[0]), got[0][:300]

    rc, report = lean.doctor("copilot")
    assert rc == 0, report
    (mine,) = [a for a in report["agents"] if a["agent"] == "copilot"]
    checks = {c["name"]: c for c in mine["checks"]}
    assert "view and bash gated like ctx_read" in checks["built-in reader gate"]["detail"], checks["built-in reader gate"]
    assert {"event preToolUse", "event postToolUse"} <= set(checks), sorted(checks)  # smoke-run by doctor
    lean.run("uninstall", "--agent", "copilot")
    assert user_files(hh) == hh.before
    assert not (hh.home / ".copilot" / "hooks" / "leanctx.json").exists()


def test_bash_only_model_gets_the_stub_and_content_when_it_changed(copilot_cli, wired, lean, run_host):
    hh = wired
    big = hh.proj / "big.py"

    def sh(command: str):
        return function_call("bash", {"command": command, "description": "read big.py"})

    # big.py ends in a blank line, which Copilot trims off a command's output before the model
    # sees it: the model got every line but that one, exactly, so those are held and a second cat
    # is the pointer that sends only the last line
    once, twice = sh("cat big.py"), sh("cat big.py")
    _, bodies, _ = run_copilot(copilot_cli, hh, run_host, [once, twice, "done"], prompt="read big.py with the shell")
    out = outputs_by_call(bodies)
    assert is_content(out[once["call_id"]]), out[once["call_id"]][:200]
    pointer = refused(out[twice["call_id"]])
    assert pointer.startswith(f"[partly unchanged] big.py L1-{LINES} of {LINES} lines: L1-{LINES - 1} was already sent"), pointer[:300]
    big.write_text(source().rstrip("\n") + "\n")
    lines = LINES - 1

    def edit_by_another_program(body):  # noqa: ANN001
        big.write_text(big.read_text().replace("return x * 5\n", "return x * 50\n"))
        return sh("cat big.py")

    first, second, asked_again, numbered, ranged, ranged_again = (sh("cat big.py"), sh("cat big.py"), sh("cat big.py"),
                                                                  sh("cat -n big.py"), sh("sed -n '10,20p' big.py"),
                                                                  sh("sed -n '10,20p' big.py"))
    # (a span inside one just refused counts as asking again: the range comes before `cat -n`)
    script = [first, second, asked_again, ranged, ranged_again, numbered, edit_by_another_program, "done"]
    _, bodies, _ = run_copilot(copilot_cli, hh, run_host, script, prompt="read big.py with the shell")
    out = outputs_by_call(bodies)
    changed_id = next(c["call_id"] for body in bodies for c in body.get("input", [])
                      if c.get("type") == "function_call" and c["call_id"] not in
                      {x["call_id"] for x in (first, second, asked_again, numbered, ranged, ranged_again)})
    assert is_content(out[first["call_id"]]) and "<shellId:" in out[first["call_id"]], out[first["call_id"]][:300]
    assert refused(out[second["call_id"]]).startswith(f"[unchanged] big.py {lines} lines"), out[second["call_id"]][:300]
    assert is_content(out[asked_again["call_id"]]), "asking again right after the stub gave no content"
    assert refused(out[numbered["call_id"]]).startswith(f"[unchanged] big.py {lines} lines"), out[numbered["call_id"]][:300]
    assert refused(out[ranged["call_id"]]).startswith(f"[unchanged] big.py L10-20 of {lines} lines"), out[ranged["call_id"]][:300]
    assert not refused(out[ranged_again["call_id"]]) and "function_3" in out[ranged_again["call_id"]]
    changed = refused(out[changed_id])  # changed by another program: its diff, never [unchanged]
    assert changed.startswith("[changed] big.py") and "+    return x * 50" in changed, out[changed_id][:300]
    assert "run it again right away for the whole file" in changed, changed[:300]
    lean.assert_no_hook_errors()


SUB_MARK = "SUBAGENT-TASK: view big.py, twice."


def test_a_subagents_views_are_content_and_its_parent_keeps_its_stub(copilot_cli, wired, lean, run_host):
    """A subagent (`task`) runs in the same process; its hook payloads name its own session while
    its calls are logged in its parent's session log, so its calls are named by no id: they run and
    are credited to nobody. The parent's re-read after it is still the parent's stub."""
    hh = wired
    path = str(hh.proj / "big.py")
    p_first, p_last, s_first, s_second = (function_call("view", {"path": path}) for _ in range(4))
    spawn = function_call("task", {"name": "reader", "description": "view big file", "agent_type": "general-purpose",
                                   "prompt": SUB_MARK, "mode": "sync"})
    parent = iter([p_first, spawn, p_last, "done"])
    sub = iter([s_first, s_second, "sub: done"])

    def route(body: dict):
        mine = any(isinstance(i, dict) and i.get("role") == "user" and SUB_MARK in str(i) for i in body.get("input") or [])
        return next(sub, "sub: done") if mine else next(parent, "done")

    _, bodies, _ = run_copilot(copilot_cli, hh, run_host, [route] * 12, prompt="view big.py, then let a subagent view it")
    out = outputs_by_call(bodies)
    assert is_content(out[p_first["call_id"]])
    assert is_content(out[s_first["call_id"]]) and is_content(out[s_second["call_id"]]), out[s_second["call_id"]][:200]
    assert refused(out[p_last["call_id"]]).startswith(f"[unchanged] big.py {LINES} lines"), out[p_last["call_id"]][:200]
    lean.assert_no_hook_errors()


SUMMARY_ASK = "Please create a detailed summary of the conversation so far"  # Copilot's compaction request


def test_after_an_automatic_compaction_a_view_is_content(copilot_cli, wired, lean, run_host, monkeypatch):
    """Copilot compacts in the background once the model reports a prompt near its limit
    (COPILOT_PROVIDER_MAX_PROMPT_TOKENS for a BYOK model); preCompact fires as it starts. A `view`
    after it gets the content; the same script without the compaction gets the stub."""
    from tests.e2e import fake_openai

    hh = wired
    path = str(hh.proj / "big.py")
    limit = 20000
    orig = fake_openai.FakeOpenAI.__init__

    def near_the_limit(self, *a, **kw):  # noqa: ANN001, ANN002, ANN003 - every answer reports a prompt past 80%
        orig(self, *a, **{**kw, "usage": {"input_tokens": limit - 500, "total_tokens": limit - 400}})

    def turn(compact: bool) -> tuple[list, list, list]:
        view = lambda: function_call("view", {"path": path})  # noqa: E731
        sh = lambda: function_call("bash", {"command": "true", "description": "wait"})  # noqa: E731
        calls = [view(), sh(), sh(), view()]
        script, seen = iter([*calls, "done"]), []

        def route(body: dict):
            last = json.dumps((body.get("input") or [None])[-1])
            if SUMMARY_ASK in last:
                seen.append(body)
                return "Summary: big.py was viewed."
            item = next(script, "done")
            # the last view only once the compaction is under way (it runs beside the turn)
            for _ in range(600 if compact and item is calls[3] else 0):
                if seen:
                    break
                time.sleep(0.1)
            return item

        env = {"COPILOT_PROVIDER_MAX_PROMPT_TOKENS": str(limit)} if compact else {}
        with monkeypatch.context() as m:
            if compact:
                m.setattr(fake_openai.FakeOpenAI, "__init__", near_the_limit)
            _, bodies, _ = run_copilot(copilot_cli, hh, run_host, [route] * 12, prompt="work on big.py", env_extra=env)
        out = outputs_by_call(bodies)
        assert bool(seen) == compact, len(seen)
        return [out.get(c["call_id"], "") for c in calls], bodies, calls

    got, _, _ = turn(compact=False)
    assert is_content(got[0]) and refused(got[3]).startswith(f"[unchanged] big.py {LINES} lines"), got[3][:300]

    got, bodies, calls = turn(compact=True)
    assert lean.records("copilot") and any(r["compactions"] >= 1 for r in lean.records("copilot").values())
    assert is_content(got[0])
    assert is_content(got[3]), f"a stub after Copilot compacted: {got[3][:300]}"
    last = json.dumps(bodies[-1]["input"])  # the model's history now: the summary, not the first view
    assert "Summary: big.py was viewed." in last and calls[0]["call_id"] not in last and calls[3]["call_id"] in last
    lean.assert_no_hook_errors()


REDACTOR = '''import json, os, sys
payload = json.load(sys.stdin)
args = json.dumps(payload.get("toolArgs"))
mark = os.path.join(sys.argv[1], "redacted-" + str(payload.get("toolName")))
if "big.py" in args and not os.path.exists(mark):  # the first read of big.py by each tool only
    open(mark, "w").close()
    print(json.dumps({"modifiedResult": {"textResultForLlm": "REDACTED by another program", "resultType": "success"}}))
'''


def test_another_programs_post_tool_hook_rewrote_the_result_so_the_reread_is_content(copilot_cli, wired, lean, run_host):
    """A postToolUse hook of another program answers `modifiedResult` for the first read of big.py
    (by `view`, then by `ctx_read`): the model got its text, not the file. Copilot 1.0.102 ran this
    hooks file after ours, so ours credited the file; the session log shows the replacement, so the
    re-read gets the content, never a stub. small.py, read untouched, still gets its stub."""
    hh = wired
    redactor = hh.root / "redactor.py"
    redactor.write_text(REDACTOR)
    hooks = {"version": 1, "hooks": {"postToolUse": [
        {"type": "command", "bash": f"{sys.executable} {redactor} {hh.root}", "timeoutSec": 10}]}}
    (hh.home / ".copilot" / "hooks" / "aa-redact.json").write_text(json.dumps(hooks))
    (hh.proj / "small.py").write_text(source(40))
    big, small = str(hh.proj / "big.py"), str(hh.proj / "small.py")
    view = lambda p: function_call("view", {"path": p})  # noqa: E731
    ctx_read = lambda p: function_call("leanctx-ctx_read", {"path": p})  # noqa: E731
    sh = function_call("bash", {"command": "true", "description": "wait"})
    calls = [view(big), view(small), sh, view(big), view(small)]
    got, _ = converse(copilot_cli, hh, run_host, [*calls, "done"])
    assert got[0] == "REDACTED by another program", got[0][:200]
    assert "def function_39" in got[1]
    assert is_content(got[3]), f"a stub for what another program's hook replaced: {got[3][:300]}"
    assert refused(got[4]).startswith("[unchanged] small.py 120 lines"), got[4][:300]

    # the same for ctx_read's answers (a new session: nothing held yet)
    calls = [ctx_read(big), sh, ctx_read(big), ctx_read(small), ctx_read(small)]
    got, _ = converse(copilot_cli, hh, run_host, [*calls, "done"])
    assert got[0] == "REDACTED by another program", got[0][:200]
    assert "def function_199" in got[2] and not got[2].startswith("["), f"a stub after a replaced result: {got[2][:300]}"
    assert got[4].startswith("[unchanged] small.py"), got[4][:300]
    lean.assert_no_hook_errors()
