"""End to end: OpenCode's own `read` tool and plain shell reads (`bash`: `cat F`, `sed -n`, ...)
under the read cache's rules, on the real CLI (`opencode run`), offline against the fake Chat
Completions server.

`leanctx init --agent opencode` wires the plugin's `tool.execute.before` (the gate: the cache's
answer becomes a thrown error, and OpenCode hands the model its message as the call's result) and
`tool.execute.after` (the credit, handed to the hook only once the next request of the session
carries that very result). The scripted models use only OpenCode's own tools; what they receive
is read back from the requests the fake server gets. A tap plugin of the test's own logs what
`tool.execute.after` saw, which must be what the model got. Verified on OpenCode 1.18.33 and, the
same tests on its fork, on Kilo Code 7.7.7 (`kilo run`): the `oc_host` fixture runs each on both.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_openai import FakeOpenAI, chat_results, function_call
from tests.e2e.test_opencode_e2e import USER_CONFIG, oc_env, oc_host  # noqa: F401 - the fixture

pytestmark = pytest.mark.e2e

TIMEOUT = 240.0
LINES = 600

TAP_PLUGIN = r'''
import fs from "node:fs";
const LOG = @LOG@;
export const Tap = async () => ({
  "tool.execute.after": async (input, output) => {
    fs.appendFileSync(LOG, JSON.stringify({ callID: input.callID, tool: input.tool, output: output.output }) + "\n");
  },
});
'''


def source(n: int = 200) -> str:
    return "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(n))


def is_content(text: str) -> bool:
    return "def function_199" in text and not text.startswith("[")


class Setup:
    """A HOME with the user's opencode.json (Kilo: kilo.jsonc) and a tap plugin, leanctx wired,
    the daemon up."""

    def __init__(self, hh, lean, url: str, host) -> None:
        self.hh, self.lean, self.host = hh, lean, host
        self.config_dir = host.config_dir(hh)
        self.plugins = self.config_dir / "plugins"
        self.plugins.mkdir(parents=True)
        self.tap_log = hh.root / "tap.jsonl"
        self.tap = self.plugins / "tap.js"
        self.tap.write_text(TAP_PLUGIN.replace("@LOG@", json.dumps(str(self.tap_log))))
        self.config = host.config_file(self.config_dir)
        self.config.write_text(USER_CONFIG.replace("@URL@", url))
        self.before = {p: p.read_bytes() for p in (self.config, self.tap)}
        lean.run("init", "--agent", host.name)
        # the daemon is the MCP server's; up before the fake model's instant first call
        lean.run("serve", "--detach")

    def run(self, run_host, prompt: str = "work on big.py") -> set:
        cp, _ = run_host([self.host.cli, "run", prompt, "--format", "json"], cwd=self.hh.proj,
                         env=oc_env(self.hh, self.lean, self.host.name), timeout=TIMEOUT)
        assert cp.returncode == 0, f"{self.host.name} run -> {cp.returncode}\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}"
        return hostcli.printed_ids(cp.stdout, "sessionID")

    def tapped(self) -> dict:
        """callID -> what tool.execute.after saw as the call's output."""
        return {e["callID"]: e["output"] for e in map(json.loads, self.tap_log.read_text().splitlines())}

    def stop(self) -> None:
        subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=self.lean.env(), capture_output=True, timeout=60)

    def doctor_and_uninstall(self) -> None:
        code, report = self.lean.doctor(self.host.name)
        assert code == 0 and report["agents"][0]["ok"], json.dumps(report, indent=1)[-3000:]
        checks = {c["name"]: c for c in report["agents"][0]["checks"]}
        assert "gated like ctx_read" in checks["built-in reader gate"]["detail"], checks["built-in reader gate"]
        assert checks["event tool.execute.before"]["status"] == checks["event tool.execute.after"]["status"] == "ok"
        self.lean.run("uninstall", "--agent", self.host.name)
        assert {p: p.read_bytes() for p in (self.config, self.tap)} == self.before
        assert sorted(os.listdir(self.plugins)) == ["tap.js"]


def model_got_what_the_after_hook_saw(setup: Setup, out: dict) -> None:
    tapped = setup.tapped()
    assert tapped, "tool.execute.after never ran"
    for call_id, text in tapped.items():
        assert out.get(call_id) == text, (call_id, text[:300], (out.get(call_id) or "")[:300])


def test_read_only_model_stub_edit_right_after_ask_again_changes_and_a_new_session(oc_host, host_home, lean, run_host):
    hh = host_home
    big = hh.proj / "big.py"
    big.write_text(source())
    path = str(big)
    read = lambda **kw: function_call("read", {"filePath": path, **kw})  # noqa: E731
    edit = lambda old, new: function_call("edit", {"filePath": path, "oldString": old, "newString": new})  # noqa: E731

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
        function_call("read", {"filePath": "big.py"}),            # 6 relative to the project: the stub
        read(),                                                   # 7 changed by another program: never [unchanged]
        read(),                                                   # 8 asked again right after: the content
        edit("return x * 11\n", "return x * 110\n"),              # 9 an edit after it works
        read(),                                                   # 10 a diff again
    ]
    script = calls[:7] + [change_by_another_program] + calls[8:] + ["done", read(), "done"]
    with FakeOpenAI(script=script, model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url, oc_host)
        try:
            first = setup.run(run_host)
            out = chat_results(srv)
            got = [out.get(c["call_id"], "") for c in calls]
            assert is_content(got[0]), got[0][:300]
            assert got[1].startswith(f"[unchanged] big.py {LINES} lines") and "read it again right away" in got[1], got[1]
            assert "Edit applied successfully" in got[2], got[2]
            assert got[3].startswith("[changed] big.py") and "+    return x * 70" in got[3], got[3][:400]
            assert is_content(got[4]) and "x * 70" in got[4], "asking again right after a diff gave no content"
            assert got[5].startswith(f"[unchanged] big.py L100-129 of {LINES} lines"), got[5][:300]
            assert got[6].startswith(f"[unchanged] big.py {LINES} lines"), got[6][:300]
            assert got[7].startswith("[changed] big.py") and "+    return x * 9 + 0" in got[7], got[7][:300]
            assert is_content(got[8]) and "x * 9 + 0" in got[8], got[8][:300]
            assert "Edit applied successfully" in got[9], got[9]
            assert got[10].startswith("[changed] big.py") and "+    return x * 110" in got[10], got[10][:400]
            assert "return x * 110\n" in big.read_text()
            model_got_what_the_after_hook_saw(setup, out)
            # a second `run` is a new session: content, not the stub
            second = setup.run(run_host, "read big.py again")
            assert second - first, "the second run reused the session"
            assert is_content(chat_results(srv)[script[-2]["call_id"]])
            lean.assert_no_hook_errors()
            rec = {r["session_id"]: r for r in lean.records(oc_host.name).values()}[next(iter(first))]
            assert len(rec["read_calls"]) == len(calls) - 2, rec["read_calls"]  # every read noted, no edit
        finally:
            setup.stop()
        setup.doctor_and_uninstall()


def test_bash_only_model_cat_and_sed_get_the_stub_and_content_when_due(oc_host, host_home, lean, run_host):
    hh = host_home
    big = hh.proj / "big.py"
    big.write_text(source())
    bash = lambda command: function_call("bash", {"command": command, "description": "show the file"})  # noqa: E731

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
        function_call("read", {"filePath": str(big)}),        # 6 the reader knows what the shell read: the stub
    ]
    script = calls[:4] + [change_by_another_program] + calls[5:] + ["done"]
    with FakeOpenAI(script=script, model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url, oc_host)
        try:
            setup.run(run_host)
            out = chat_results(srv)
            got = [out.get(c["call_id"], "") for c in calls]
            assert got[0] == source(), got[0][:300]
            assert got[1].startswith(f"[unchanged] big.py L100-129 of {LINES} lines") and "run the same command again" in got[1], got[1]
            assert got[2].startswith(f"[unchanged] big.py {LINES} lines"), got[2][:300]
            assert got[3] == "     1\tdef function_0(x):\n     2\t    return x * 0\n     3\t\n", got[3]
            assert got[4].startswith("[changed] big.py") and "+    return x * 9 + 0" in got[4], got[4][:300]
            assert got[5] == big.read_text(), got[5][:300]
            assert got[6].startswith(f"[unchanged] big.py {LINES} lines") and "read it again right away" in got[6], got[6][:300]
            model_got_what_the_after_hook_saw(setup, out)
            lean.assert_no_hook_errors()
        finally:
            setup.stop()
        setup.doctor_and_uninstall()
