"""End to end: Pi's own `read` tool and plain shell reads (`bash`: `cat F`, `sed -n`, ...) under
the read cache's rules, on the real Pi coding agent (`pi -p`, `pi --mode rpc`), offline against
the fake Chat Completions server.

`leanctx init --agent pi` writes the extension with the gate on `tool_call` (the cache's answer
becomes `{block: true, reason}`, which Pi hands the model as the call's result) and the credit on
`tool_result` (handed to the hook only once the next model request, Pi's `context` event, carries
that very result). The scripted models use only Pi's own tools; what they receive is read back
from the requests the fake server gets. A tap extension of the test's own, loaded after ours, logs
what `tool_result` saw, which must be what the model got. Verified on Pi 0.73.1.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.e2e.fake_openai import FakeOpenAI, chat_results, function_call
from tests.e2e.test_pi_e2e import TIMEOUT, models_json, pi_cli, pi_env, rpc_session, run_pi, session_headers  # noqa: F401

pytestmark = pytest.mark.e2e

LINES = 600

TAP_EXTENSION = r'''
import fs from "node:fs";
const LOG = @LOG@;
export default function (pi) {
  // `/leanctx-test-tree`: what choosing the session's first prompt in `/tree` does (no summary)
  pi.registerCommand("leanctx-test-tree", {
    description: "go back to the session's first prompt",
    handler: async (args, ctx) => {
      const first = ctx.sessionManager.getEntries().find((e) => e.type === "message" && e.message.role === "user");
      await ctx.navigateTree(first.id, { summarize: false });
    },
  });
  pi.on("tool_result", async (event) => {
    const text = (event.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");
    fs.appendFileSync(LOG, JSON.stringify({ id: event.toolCallId, tool: event.toolName, text }) + "\n");
  });
}
'''


def source(n: int = 200) -> str:
    return "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(n))


def is_content(text: str) -> bool:
    return "def function_199" in text and not text.startswith("[")


class Setup:
    """A HOME with Pi's models.json and a tap extension, leanctx wired, the daemon up."""

    def __init__(self, hh, lean, url: str) -> None:
        self.hh, self.lean = hh, lean
        self.agent_dir = hh.home / ".pi" / "agent"
        self.extensions = self.agent_dir / "extensions"
        self.extensions.mkdir(parents=True)
        self.tap_log = hh.root / "tap.jsonl"
        self.tap = self.extensions / "zz-tap.js"  # Pi loads an extension folder's files in name order: after ours
        self.tap.write_text(TAP_EXTENSION.replace("@LOG@", json.dumps(str(self.tap_log))))
        self.models = self.agent_dir / "models.json"
        self.models.write_text(models_json(url))
        self.before = {p: p.read_bytes() for p in (self.models, self.tap)}
        lean.run("init", "--agent", "pi")
        # the daemon is the MCP server's; up before the fake model's instant first call
        lean.run("serve", "--detach")

    def tapped(self) -> dict:
        """toolCallId -> the text `tool_result` saw (after our handler)."""
        if not self.tap_log.exists():
            return {}
        return {e["id"]: e["text"] for e in map(json.loads, self.tap_log.read_text().splitlines())}

    def stop(self) -> None:
        subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=self.lean.env(), capture_output=True, timeout=60)

    def doctor_and_uninstall(self) -> None:
        code, report = self.lean.doctor("pi")
        assert code == 0 and report["agents"][0]["ok"], json.dumps(report, indent=1)[-3000:]
        checks = {c["name"]: c for c in report["agents"][0]["checks"]}
        assert "gated like ctx_read" in checks["built-in reader gate"]["detail"], checks["built-in reader gate"]
        assert checks["event tool_call"]["status"] == checks["event tool_result"]["status"] == "ok", checks
        self.lean.run("uninstall", "--agent", "pi")
        assert {p: p.read_bytes() for p in (self.models, self.tap)} == self.before
        assert sorted(os.listdir(self.extensions)) == ["zz-tap.js"]


def model_got_what_the_tap_saw(setup: Setup, out: dict) -> None:
    tapped = setup.tapped()
    assert tapped, "tool_result never ran"
    for call_id, text in tapped.items():
        if call_id in out:  # the last call of a run has no request after it
            assert out[call_id] == text, (call_id, text[:300], out[call_id][:300])


def test_read_stub_edit_right_after_ask_again_changes_and_a_new_session(pi_cli, host_home, lean, run_host):
    hh = host_home
    big = hh.proj / "big.py"
    big.write_text(source())
    path = str(big)
    read = lambda **kw: function_call("read", {"path": path, **kw})  # noqa: E731
    edit = lambda old, new: function_call("edit", {"path": path, "edits": [{"oldText": old, "newText": new}]})  # noqa: E731

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return calls[7]

    calls = [
        read(),                                                   # 0 content
        read(),                                                   # 1 unchanged: the stub
        edit("return x * 7\n", "return x * 70\n"),                # 2 an edit right after the refusal
        read(),                                                   # 3 after the model's own edit: a diff
        read(),                                                   # 4 asked again right after: the content
        read(offset=100, limit=30),                               # 5 a held range: its stub
        function_call("read", {"path": "big.py"}),                # 6 relative to the project: the stub
        read(),                                                   # 7 changed by another program: never [unchanged]
        read(),                                                   # 8 asked again right after: the content
        read(offset=590, limit=20),                               # 9 the file's last lines: the stub
    ]
    script = calls[:7] + [change_by_another_program] + calls[8:] + ["done", read(), "done"]
    with FakeOpenAI(script=script, model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url)
        try:
            run_pi(pi_cli, hh, lean, run_host, "work on big.py")
            out = chat_results(srv)
            got = [out.get(c["call_id"], "") for c in calls]
            assert got[0] == source(), got[0][:300]
            assert got[1].startswith(f"[unchanged] big.py {LINES} lines") and "read it again right away" in got[1], got[1]
            assert "Successfully replaced 1 block(s)" in got[2], got[2]
            assert got[3].startswith("[changed] big.py") and "+    return x * 70" in got[3], got[3][:400]
            assert is_content(got[4]) and "x * 70" in got[4], "asking again right after a diff gave no content"
            assert got[5].startswith(f"[unchanged] big.py L100-129 of {LINES} lines"), got[5][:300]
            assert got[6].startswith(f"[unchanged] big.py {LINES} lines"), got[6][:300]
            assert got[7].startswith("[changed] big.py") and "+    return x * 9 + 0" in got[7], got[7][:300]
            assert got[8] == big.read_text(), got[8][:300]
            assert got[9].startswith(f"[unchanged] big.py L590-600 of {LINES} lines"), got[9][:300]
            model_got_what_the_tap_saw(setup, out)
            # a second `pi -p` is a new session: content, not the stub
            run_pi(pi_cli, hh, lean, run_host, "read big.py again")
            assert len(session_headers(setup.agent_dir)) == 2
            assert chat_results(srv)[script[-2]["call_id"]] == big.read_text()
            lean.assert_no_hook_errors()
        finally:
            setup.stop()
        setup.doctor_and_uninstall()


def test_a_long_file_is_credited_as_far_as_pi_cut_it(pi_cli, host_home, lean, run_host):
    """Pi's `read` cuts a file at 2,000 lines with a note: the lines it showed are held (their
    range is a stub), the rest is not (reading on from the note's offset is content)."""
    hh = host_home
    long = hh.proj / "long.txt"
    long.write_text("".join(f"row {i} of the long file\n" for i in range(1, 2501)))
    calls = [function_call("read", {"path": "long.txt"}),                           # 0 lines 1-2000 and the note
             function_call("read", {"path": "long.txt", "offset": 1500, "limit": 100}),  # 1 held: the stub
             function_call("read", {"path": "long.txt", "offset": 2001}),            # 2 never shown: content
             function_call("read", {"path": "long.txt"})]                           # 3 now all of it is held
    with FakeOpenAI(script=[*calls, "done"], model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url)
        try:
            run_pi(pi_cli, hh, lean, run_host, "read long.txt")
            out = chat_results(srv)
            got = [out.get(c["call_id"], "") for c in calls]
            assert got[0].endswith("row 2000 of the long file\n\n[Showing lines 1-2000 of 2501. Use offset=2001 to continue.]"), got[0][-300:]
            assert got[1].startswith("[unchanged] long.txt L1500-1599 of 2500 lines"), got[1][:300]
            assert got[2].startswith("row 2001 of the long file\n") and got[2].endswith("row 2500 of the long file\n"), got[2][:300]
            assert got[3].startswith("[unchanged] long.txt 2500 lines"), got[3][:300]
            model_got_what_the_tap_saw(setup, out)
            lean.assert_no_hook_errors()
        finally:
            setup.stop()


def test_bash_reads_get_the_stub_and_content_when_due_and_a_new_session_drops_the_credit(pi_cli, host_home, lean):
    """`pi --mode rpc`: `cat`/`sed -n` through Pi's bash, a command that is no plain read runs as
    it is, a change by another program is a diff; then the `new_session` command (what `/new`
    does: a new session id, the extension loaded again) and the same `cat` is content again, and
    a compaction of that session drops the credit as well."""
    hh = host_home
    big = hh.proj / "big.py"
    big.write_text(source())
    bash = lambda command: function_call("bash", {"command": command})  # noqa: E731

    def change_by_another_program(body):  # noqa: ANN001
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return calls[4]

    calls = [
        bash("cat big.py"),                                   # 0 content
        bash("sed -n '100,129p' big.py"),                     # 1 a held range: its stub
        bash(f"cat {big}"),                                   # 2 the whole file by its full name: the stub
        bash("cat -n big.py | head -3"),                      # 3 a pipe: not a plain read, it runs
        bash("cat big.py"),                                   # 4 changed by another program: a diff
        bash("cat big.py"),                                   # 5 run again right after: the output
        function_call("read", {"path": str(big)}),            # 6 the reader knows what the shell read: the stub
    ]
    after_new = [bash("cat big.py"), bash("cat big.py")]      # a new session: content, then the stub
    after_compact = [bash("cat big.py"), bash("cat big.py")]  # after a compaction: content, then the stub
    script = (calls[:4] + [change_by_another_program] + calls[5:] + ["done"]
              + [after_new[0], after_new[1], "done"] + [after_compact[0], after_compact[1], "done"])
    with FakeOpenAI(script=script, model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url)
        try:
            rpc_session(pi_cli, hh, lean, [
                {"type": "prompt", "message": "work on big.py"},
                {"type": "new_session"},
                {"type": "prompt", "message": "cat big.py twice"},
                {"type": "compact"},
                {"type": "prompt", "message": "cat big.py twice"},
            ])
            out = chat_results(srv)
            got = [out.get(c["call_id"], "") for c in calls]
            assert got[0] == source(), got[0][:300]
            assert got[1].startswith(f"[unchanged] big.py L100-129 of {LINES} lines") and "run the same command again" in got[1], got[1]
            assert got[2].startswith(f"[unchanged] big.py {LINES} lines"), got[2][:300]
            assert got[3] == "     1\tdef function_0(x):\n     2\t    return x * 0\n     3\t\n", got[3]
            assert got[4].startswith("[changed] big.py") and "+    return x * 9 + 0" in got[4], got[4][:300]
            assert got[5] == big.read_text(), got[5][:300]
            assert got[6].startswith(f"[unchanged] big.py {LINES} lines") and "read it again right away" in got[6], got[6][:300]
            assert out[after_new[0]["call_id"]] == big.read_text(), out[after_new[0]["call_id"]][:300]
            assert out[after_new[1]["call_id"]].startswith(f"[unchanged] big.py {LINES} lines"), out[after_new[1]["call_id"]][:300]
            assert out[after_compact[0]["call_id"]] == big.read_text(), out[after_compact[0]["call_id"]][:300]
            assert out[after_compact[1]["call_id"]].startswith(f"[unchanged] big.py {LINES} lines")
            assert len(session_headers(setup.agent_dir)) == 2
            model_got_what_the_tap_saw(setup, out)
            lean.assert_no_hook_errors()
        finally:
            setup.stop()
        setup.doctor_and_uninstall()


def test_one_message_with_a_read_beside_an_edit_gets_no_stub(pi_cli, host_home, lean, run_host):
    """Pi runs the calls of one model message together, each `tool_call` before any of them runs:
    a read beside an edit or a shell command that writes is never the stub (the edit may change
    the file under it); beside only reads (`read`, `ls`, `grep`) it is."""
    hh = host_home
    big, other = hh.proj / "big.py", hh.proj / "other.py"
    big.write_text(source())
    other.write_text(source(150))
    read = lambda f: function_call("read", {"path": str(f)})  # noqa: E731
    edit = function_call("edit", {"path": str(big), "edits": [{"oldText": "return x * 7\n", "newText": "return x * 70\n"}]})
    calls = [
        [read(big), read(other)],                                                    # 0 both content
        [edit, read(other)],                                                         # 1 beside an edit: runs
        [read(other), function_call("ls", {}), function_call("grep", {"pattern": "x"})],  # 2 beside reads: the stub
        [read(big)],                                                                 # 3 after the edit: a diff
        [read(big)],                                                                 # 4 asked again: content
        [read(big), function_call("bash", {"command": "cat big.py > copy.py"})],     # 5 beside a writer: runs
    ]
    with FakeOpenAI(script=[*calls, "done"], model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url)
        try:
            run_pi(pi_cli, hh, lean, run_host, "work on big.py")
            out = chat_results(srv)
            got = [[out.get(c["call_id"], "") for c in batch] for batch in calls]
            edited = source().replace("return x * 7\n", "return x * 70\n")
            assert got[0] == [source(), source(150)], [g[:100] for g in got[0]]
            assert "Successfully replaced 1 block(s)" in got[1][0], got[1][0]
            assert got[1][1] == source(150), got[1][1][:300]
            assert got[2][0].startswith("[unchanged] other.py 450 lines"), got[2][0][:300]
            assert got[3][0].startswith("[changed] big.py") and "+    return x * 70" in got[3][0], got[3][0][:300]
            assert got[4][0] == edited, got[4][0][:300]
            assert got[5][0] == edited, got[5][0][:300]
            assert (hh.proj / "copy.py").read_text() == edited
            model_got_what_the_tap_saw(setup, out)
            lean.assert_no_hook_errors()
        finally:
            setup.stop()


def test_after_a_tree_navigation_the_read_is_content(pi_cli, host_home, lean):
    """`/tree` (here through an extension command calling `ctx.navigateTree`, what choosing an
    entry in `/tree` does) leaves the branch that read the file: Pi fires `session_before_tree`
    and `session_tree`, counted as context losses, and the next read is the content."""
    hh = host_home
    big = hh.proj / "big.py"
    big.write_text(source())
    read = lambda: function_call("read", {"path": "big.py"})  # noqa: E731
    first, stub, after, again = read(), read(), read(), read()
    with FakeOpenAI(script=[first, stub, "done", after, again, "done"], model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url)
        try:
            rpc_session(pi_cli, hh, lean, [{"type": "prompt", "message": "read big.py twice"},
                                           {"type": "prompt", "message": "/leanctx-test-tree"},
                                           {"type": "prompt", "message": "read big.py twice"}])
            out = chat_results(srv)
            assert out[first["call_id"]] == source() and out[stub["call_id"]].startswith(f"[unchanged] big.py {LINES} lines")
            rec = lean.only_record("pi")
            assert rec["compactions"] == 2, rec  # session_before_tree and session_tree
            assert out[after["call_id"]] == source(), out[after["call_id"]][:300]
            assert out[again["call_id"]].startswith(f"[unchanged] big.py {LINES} lines"), out[again["call_id"]][:300]
            # the request after the navigation no longer carries the first branch's reads
            last = [b for b in srv.requests if isinstance(b, dict) and b.get("tools")][-1]
            assert first["call_id"] not in json.dumps(last) and after["call_id"] in json.dumps(last)
            lean.assert_no_hook_errors()
        finally:
            setup.stop()


def test_resuming_an_earlier_session_in_the_same_process(pi_cli, host_home, lean):
    """`/resume` in one process (`switch_session` in `pi --mode rpc`): session A read the file,
    session B did not; back in A, whose messages Pi loads again with that read in them, the
    re-read is the stub; B's read of it was content."""
    hh = host_home
    big = hh.proj / "big.py"
    big.write_text(source())
    read = lambda: function_call("read", {"path": "big.py"})  # noqa: E731
    a_first, b_first, a_again = read(), read(), read()
    with FakeOpenAI(script=[a_first, "done", b_first, "done", a_again, "done"], model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url)
        try:
            first_file = {}

            def back_to_a():
                headers = session_headers(setup.agent_dir)
                first_file["a"] = next(f for f in headers.values() if a_first["call_id"] in open(f).read())
                return {"type": "switch_session", "sessionPath": first_file["a"]}

            rpc_session(pi_cli, hh, lean, [{"type": "prompt", "message": "read big.py"}, {"type": "new_session"},
                                           {"type": "prompt", "message": "read big.py"}, back_to_a,
                                           {"type": "prompt", "message": "read big.py again"}])
            out = chat_results(srv)
            assert out[a_first["call_id"]] == source() and out[b_first["call_id"]] == source(), out
            assert out[a_again["call_id"]].startswith(f"[unchanged] big.py {LINES} lines"), out[a_again["call_id"]][:300]
            assert a_again["call_id"] in open(first_file["a"]).read()
            lean.assert_no_hook_errors()
        finally:
            setup.stop()
