"""End to end: Factory Droid's own `Read` and shell reads (`Execute`) under the read cache's rules,
on the real CLI (`droid exec`, BYOK custom model, offline).

`leanctx init --agent droid` wires the read gate's pre-tool entry for `Read` and `Execute` too, and
a post-tool entry that credits what they delivered. Droid's tool hooks carry no call id: the hook
takes it from the session's transcript (agents/droid.py). The scripted model uses only Droid's
built-in tools; what it receives is read back from the requests the fake model server gets.
Verified on Droid 0.215.0 (the pinned CLI) and, with LEANCTX_HOST_CLI_DIR pointing at it, 0.225.2.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e.fake_chat import FakeChat, tool_call
from tests.e2e.test_droid_e2e import byok_settings, droid_env

pytestmark = pytest.mark.e2e

LINES = 600
REFUSED = "Error: "  # Droid hands the model a PreToolUse deny's reason after this


def source(n: int = 200) -> str:
    return "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(n))


def is_content(text: str) -> bool:
    return "def function_199" in text and not text.startswith(REFUSED)


def refusal(text: str) -> str:
    assert text.startswith(REFUSED), text[:300]
    return text[len(REFUSED):]


@pytest.fixture
def wired(host_home, lean):
    (host_home.proj / "big.py").write_text(source())
    yield host_home
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def start(hh, lean, srv) -> tuple:
    factory = hh.home / ".factory"
    factory.mkdir(exist_ok=True)
    settings = factory / "settings.json"
    settings.write_text(json.dumps(byok_settings(srv.base_url), indent=4))
    before = settings.read_bytes()
    lean.run("init", "--agent", "droid")
    lean.run("serve", "--detach")  # up before the fake model's instant first call
    return settings, before


def run(droid_cli, hh, run_host, prompt="work on big.py", env: dict | None = None):
    cp, _ = run_host([droid_cli, "exec", "-m", "custom:fake-0", "--skip-permissions-unsafe", prompt], cwd=hh.proj,
                     env=droid_env(hh.home, env))
    assert cp.returncode == 0, cp.stderr[-3000:]


def execute(command: str) -> dict:
    return tool_call("Execute", {"command": command, "summary": "Show the file contents now",
                                 "riskLevel": {"value": "low", "reason": "only reads"}})


def test_read_only_model_stub_edit_right_after_ask_again_changes_and_new_session(droid_cli, wired, lean, run_host):
    hh = wired
    big = hh.proj / "big.py"
    path = str(big)
    read = lambda **kw: tool_call("Read", {"file_path": path, **kw})  # noqa: E731
    edit = lambda old, new: tool_call("Edit", {"file_path": path, "old_str": old, "new_str": new})  # noqa: E731

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return calls[6]

    calls = [read(), read(), edit("return x * 7\n", "return x * 70\n"), read(), read(), read(offset=100, limit=30),
             read(), read(), edit("return x * 11\n", "return x * 110\n")]
    script = [*calls[:6], change_by_another_program, *calls[7:], "done"]
    with FakeChat(script=script) as srv:
        settings, before = start(hh, lean, srv)
        run(droid_cli, hh, run_host)
        got = [srv.tool_results().get(c["id"], "") for c in calls]
        assert is_content(got[0])
        stub = refusal(got[1])
        assert stub.startswith(f"[unchanged] big.py {LINES} lines") and "read it again right away" in stub, stub
        assert "updated successfully" in got[2], "Edit right after a refused re-read failed"
        diff = refusal(got[3])
        assert diff.startswith("[changed] big.py") and "+    return x * 70" in diff, diff[:400]
        assert is_content(got[4]) and "x * 70" in got[4], "asking again right after a diff gave no content"
        assert refusal(got[5]).startswith(f"[unchanged] big.py L100-129 of {LINES} lines")
        after_change = refusal(got[6])
        assert after_change.startswith("[changed] big.py") and "+    return x * 9 + 0" in after_change, after_change[:300]
        assert is_content(got[7]) and "x * 9 + 0" in got[7], "asking again right after a diff gave no content"
        assert "updated successfully" in got[8], got[8]
        assert "return x * 110\n" in big.read_text()

        # a new session (a new droid process) never inherits the stub
        again = read()
        srv.script, srv._next = [again, "done"], 0
        run(droid_cli, hh, run_host, "read it again")
        assert is_content(srv.tool_results()[again["id"]]), "a new session got a stub"
    lean.assert_no_hook_errors()

    rc, report = lean.doctor("droid")
    assert rc == 0 and report["ok"] is True, json.dumps(report, indent=2)
    gate = [c for c in report["agents"][0]["checks"] if c["name"] == "built-in reader gate"]
    assert gate and "Read and Execute gated" in gate[0]["detail"], gate
    lean.run("stop")
    lean.run("uninstall", "--agent", "droid")
    assert settings.read_bytes() == before, "uninstall did not restore settings.json"


SHELL_LINES = 180  # Droid cuts an Execute output over about 8 KB (head and tail kept): a smaller file


def test_shell_only_model_stub_edit_right_after_run_again_and_changes(droid_cli, wired, lean, run_host):
    hh = wired
    mod = hh.proj / "mod.py"
    mod.write_text(source(SHELL_LINES // 3))
    edit = lambda old, new: tool_call("Edit", {"file_path": str(mod), "old_str": old, "new_str": new})  # noqa: E731
    whole = lambda text: "def function_59" in text and not text.startswith(REFUSED)  # noqa: E731

    def change_by_another_program(body):  # noqa: ANN001
        mod.write_text(mod.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return calls[6]

    calls = [execute("cat -n mod.py"), execute("cat mod.py"), edit("return x * 7\n", "return x * 70\n"),
             execute("cat mod.py"), execute("cat mod.py"), execute("sed -n '1,30p' mod.py"),
             execute("cat mod.py"), execute("cat mod.py"), execute(f"tail -n 20 {mod}")]
    script = [*calls[:6], change_by_another_program, *calls[7:], "done"]
    with FakeChat(script=script) as srv:
        start(hh, lean, srv)
        run(droid_cli, hh, run_host, "look at mod.py")
        got = [srv.tool_results().get(c["id"], "") for c in calls]
        assert "     1\tdef function_0(x):" in got[0] and whole(got[0])
        stub = refusal(got[1])
        assert stub.startswith(f"[unchanged] mod.py {SHELL_LINES} lines") and "run the same command again right away" in stub, stub
        assert "updated successfully" in got[2], "Edit right after a refused shell read failed"
        diff = refusal(got[3])  # after the model's own edit: a diff, never [unchanged]
        assert diff.startswith("[changed] mod.py") and "+    return x * 70" in diff, diff[:400]
        assert whole(got[4]) and "x * 70" in got[4], "running the command again right after a diff gave no output"
        assert refusal(got[5]).startswith(f"[unchanged] mod.py L1-30 of {SHELL_LINES} lines"), got[5][:300]
        after_change = refusal(got[6])
        assert after_change.startswith("[changed] mod.py") and "+    return x * 9 + 0" in after_change, after_change[:300]
        assert whole(got[7]) and "x * 9 + 0" in got[7], "running the command again right after a diff gave no output"
        assert refusal(got[8]).startswith(f"[unchanged] mod.py L161-180 of {SHELL_LINES} lines"), got[8][:300]

        # a new session gets the output; what the shell delivered counts for Read as well
        again, read = execute("cat mod.py"), tool_call("Read", {"file_path": str(mod)})
        srv.script, srv._next = [again, read, "done"], 0
        run(droid_cli, hh, run_host, "look again")
        assert whole(srv.tool_results()[again["id"]]), "a new session got a stub"
        assert refusal(srv.tool_results()[read["id"]]).startswith(f"[unchanged] mod.py {SHELL_LINES} lines")
    lean.assert_no_hook_errors()




BIG_PROMPT = {"prompt_tokens": 300000, "completion_tokens": 5, "total_tokens": 300005}  # past the 250,000 default


def test_after_an_automatic_compaction_the_read_is_content(droid_cli, wired, lean, run_host):
    """Droid compacts by itself once the model reports a prompt past its compaction limit, and runs
    no hook for it (0.215.0: PreCompact only for the manual one); its session log gets a
    `compaction_state` line, which the cache counts. Without a compaction the same script gets the stub."""
    hh = wired
    path = str(hh.proj / "big.py")
    read = lambda: tool_call("Read", {"file_path": path})  # noqa: E731

    compact = [False]
    # in the second run the answer asking for `true` (the script's second) reports the big prompt:
    # Droid compacts after running it
    usage = lambda kind, body, items: BIG_PROMPT if compact[0] and kind == "main" and srv._next == 2 else None  # noqa: E731
    with FakeChat(usage=usage) as srv:
        start(hh, lean, srv)
        before = [read(), execute("true"), read()]
        srv.script = [*before, "done"]
        run(droid_cli, hh, run_host)
        got = [srv.tool_results().get(c["id"], "") for c in before]
        assert is_content(got[0]) and refusal(got[2]).startswith(f"[unchanged] big.py {LINES} lines"), got[2][:300]

        compact[0], after = True, [read(), execute("true"), read()]
        srv.script, srv._next = [*after, "done"], 0
        run(droid_cli, hh, run_host)
        got = [srv.tool_results().get(c["id"], "") for c in after]
        assert any("summarize" in json.dumps(b) for b in srv.side_requests), "Droid asked for no summary"
    (log,) = [r for r in lean.records("droid").values() if any(c["id"] in r["read_calls"] for c in after)]
    lines = [json.loads(x) for x in open(log["transcript_path"], encoding="utf-8")]
    assert [x["type"] for x in lines].count("compaction_state") == 1, "Droid did not compact"
    assert log["compactions"] == 0, log  # no hook said so
    assert is_content(got[0])
    assert is_content(got[2]), f"a stub after Droid compacted: {got[2][:300]}"
    lean.assert_no_hook_errors()


SUB_MARK = "SUBAGENT-TASK: read big.py, twice."
# Droid runs a `Task` subagent through its local daemon, which wants a Factory login (0.215.0: "No
# access token available", reported to the model as "Could not reach the daemon"); its air-gapped
# mode stands in a fixed user and token, so the subagent runs offline
AIRGAP = {"FACTORY_AIRGAP_ENABLED": "1"}


def test_a_task_subagent_reads_in_its_own_session_and_the_parent_keeps_its_stub(droid_cli, wired, lean, run_host):
    """A `Task` subagent is another droid process with a session (and transcript) of its own: it
    gets the content of a file only its parent read, then its own stub; the parent, after it, still
    gets its stub."""
    hh = wired
    path = str(hh.proj / "big.py")
    p_first, p_last, s_first, s_second = (tool_call("Read", {"file_path": path}) for _ in range(4))
    spawn = tool_call("Task", {"subagent_type": "worker", "description": "read big file", "prompt": SUB_MARK,
                               "await": True})
    parent, sub = iter([p_first, spawn, p_last, "done"]), iter([s_first, s_second, "sub: done"])

    def route(body: dict):
        mine = any(m.get("role") == "user" and SUB_MARK in json.dumps(m) for m in body.get("messages") or [])
        return next(sub, "sub: done") if mine else next(parent, "done")

    with FakeChat(script=[route] * 20) as srv:
        start(hh, lean, srv)
        run(droid_cli, hh, run_host, env=AIRGAP)
        got = {name: srv.tool_results().get(c["id"], "") for name, c in
               (("p_first", p_first), ("spawn", spawn), ("p_last", p_last), ("s_first", s_first), ("s_second", s_second))}
    assert "sub: done" in got["spawn"], got["spawn"][:300]
    assert is_content(got["p_first"])
    assert is_content(got["s_first"]), f"the subagent got a stub for what only its parent read: {got['s_first'][:300]}"
    assert refusal(got["s_second"]).startswith(f"[unchanged] big.py {LINES} lines")
    assert refusal(got["p_last"]).startswith(f"[unchanged] big.py {LINES} lines")
    recs = lean.records("droid").values()
    assert len(recs) == 2 and len({r["host"]["pid"] for r in recs}) == 2, [r["host"] for r in recs]
    lean.assert_no_hook_errors()
