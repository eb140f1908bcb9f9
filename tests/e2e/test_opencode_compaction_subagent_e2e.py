"""End to end: OpenCode's own `read` and `bash` reads across a compaction and a subagent, on the
real CLI (`opencode run`), offline against the fake Chat Completions server.

- Compaction: the fake model reports a context near full (`usage` over the model's `limit`), so
  OpenCode compacts on its own (`SessionCompaction`, the same path as its `/compact`): it runs the
  plugin's `experimental.session.compacting`, summarises the history in a request with no tools,
  publishes `session.compacted`, and goes on with only the summary. Every re-read after it must be
  the content, a read whose result only the summariser saw included; after that, stubs again.
  The TUI's `/compact` (`POST /session/<id>/summarize`, sent to a long-lived `opencode serve`
  between two prompts) likewise.
- Subagent: the `task` tool runs a child session (its own `sessionID`, `parentID` the parent's).
  A read in it of a file the parent holds is the content (the child never saw it), its own re-read
  is the stub, and the parent keeps its holding: its re-read after the subagent is the stub.
- Pruning (`compaction.prune`): in a long-lived `opencode serve` (prompts sent with `opencode run
  --attach`), OpenCode clears old tool outputs at the end of a prompt; the plugin forwards the
  cleared parts as a loss, and a re-read of a pruned result is the content.

Verified on OpenCode 1.18.33.
"""
from __future__ import annotations

import json

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_openai import FakeOpenAI, chat_results, function_call
from tests.e2e.test_opencode_builtin_read_e2e import LINES, Setup, is_content, model_got_what_the_after_hook_saw, source  # noqa: F401
from tests.e2e.test_opencode_e2e import Host, oc_env, opencode_cli  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e

TIMEOUT = 240.0
# the model's window: OpenCode compacts once a reply's usage reaches context - output
LIMIT = '"limit": {"context": 200000, "output": 4000}'
FULL = {"prompt_tokens": 199000, "completion_tokens": 5, "total_tokens": 199005}
SUBTASK = "SUBAGENT-TASK: look at big.py and small.py"


def small_source() -> str:
    return "".join(f"VALUE_{i} = {i}\n" for i in range(40))


def is_compaction(body: dict) -> bool:
    """OpenCode's summary request: no tools, the history as one user message."""
    return not body.get("tools") and any(
        m.get("role") == "user" and isinstance(m.get("content"), str) and "<conversation>" in m["content"]
        for m in body.get("messages") or [])


def is_subagent(body: dict) -> bool:
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return bool(users) and SUBTASK in json.dumps(users[0].get("content"))


def with_limit(setup: Setup) -> None:
    """The user's model with a context window, and usage in every streamed answer (what
    uninstall must give back is that file)."""
    def limited(text: str) -> str:
        text = text.replace('"tool_call": true', f'"tool_call": true, {LIMIT}')
        return text.replace('"apiKey": "sk-fake"', '"apiKey": "sk-fake", "includeUsage": true')
    setup.config.write_text(limited(setup.config.read_text()))
    setup.before[setup.config] = limited(setup.before[setup.config].decode()).encode()


def test_reads_after_an_automatic_compaction_are_content_then_stubs_again(opencode_cli, host_home, lean, run_host):
    hh = host_home
    big, small, other = hh.proj / "big.py", hh.proj / "small.py", hh.proj / "other.py"
    big.write_text(source())
    small.write_text(small_source())
    other.write_text(source(30))
    read = lambda p: function_call("read", {"filePath": str(p)})  # noqa: E731
    cat = lambda: function_call("bash", {"command": "cat small.py", "description": "show the file"})  # noqa: E731
    full = {"now": False}

    def window_full(item):  # noqa: ANN001, ANN202 - this answer reports the window as full
        def build(body):  # noqa: ANN001, ANN202
            full["now"] = True
            return item
        return build

    def usage(kind: str, body: dict):  # noqa: ANN202
        if kind == "main" and full["now"]:
            full["now"] = False
            return FULL
        return None

    calls = [
        read(big),     # 0 content
        cat(),         # 1 content
        read(big),     # 2 the stub
        cat(),         # 3 the stub
        read(other),   # 4 content; this answer fills the window: the next request is the summary
        read(big),     # 5 after the compaction: content
        cat(),         # 6 content
        read(other),   # 7 content (call 4's result reached the summariser only)
        read(big),     # 8 the stub again
        cat(),         # 9 the stub again
        read(other),   # 10 the stub again
    ]
    script = calls[:4] + [window_full(calls[4])] + calls[5:] + ["done"]
    with FakeOpenAI(script=script, model="fake-model", chat_usage=usage) as srv:
        setup = Setup(hh, lean, srv.base_url, Host("opencode"))
        with_limit(setup)
        try:
            sessions = setup.run(run_host)
            out = chat_results(srv)
            got = [out.get(c["call_id"], "") for c in calls]
            summaries = [r.body for r in srv.log if isinstance(r.body, dict) and is_compaction(r.body)]
            assert len(summaries) == 1, [r.kind for r in srv.log]
            # the summariser saw call 4's result; the requests after it carry none of the old results
            assert calls[4]["call_id"] in json.dumps(summaries[0]) or "other.py" in json.dumps(summaries[0])
            after = [r.body for r in srv.log if isinstance(r.body, dict) and r.body.get("tools")
                     and calls[5]["call_id"] in out and calls[5]["call_id"] in json.dumps(r.body)]
            assert after and not any(c["call_id"] in json.dumps(after[0]) for c in calls[:5])
            assert calls[4]["call_id"] not in out, "call 4's result reached the model itself"
            assert is_content(got[0]) and got[1] == small_source(), (got[0][:200], got[1][:200])
            assert got[2].startswith(f"[unchanged] big.py {LINES} lines"), got[2][:300]
            assert got[3].startswith("[unchanged] small.py 40 lines"), got[3][:300]
            assert is_content(got[5]), f"a re-read after the compaction was not the content: {got[5][:300]}"
            assert got[6] == small_source(), f"cat after the compaction was not the content: {got[6][:300]}"
            assert got[7].startswith(f"<path>{other}</path>") and "def function_29" in got[7], got[7][:300]
            assert got[8].startswith(f"[unchanged] big.py {LINES} lines"), got[8][:300]
            assert got[9].startswith("[unchanged] small.py 40 lines"), got[9][:300]
            assert got[10].startswith("[unchanged] other.py"), got[10][:300]
            # every result tool.execute.after saw reached the model as it was, but call 4's, which
            # only the summariser got
            model_got_what_the_after_hook_saw(setup, {**out, calls[4]["call_id"]: setup.tapped().get(calls[4]["call_id"])})
            lean.assert_no_hook_errors()
            rec = {r["session_id"]: r for r in lean.records("opencode").values()}[next(iter(sessions))]
            assert rec["compactions"] >= 1, rec
        finally:
            setup.stop()
        setup.doctor_and_uninstall()


def test_a_task_subagent_reads_what_its_parent_holds_and_the_parent_keeps_its_stub(opencode_cli, host_home, lean, run_host):
    hh = host_home
    big, small = hh.proj / "big.py", hh.proj / "small.py"
    big.write_text(source())
    small.write_text(small_source())
    read = lambda p: function_call("read", {"filePath": str(p)})  # noqa: E731
    cat = lambda: function_call("bash", {"command": "cat small.py", "description": "show the file"})  # noqa: E731
    task = function_call("task", {"description": "look at the files", "prompt": SUBTASK, "subagent_type": "general"})
    parent_before = [read(big), cat()]                  # content, content (no stub here: asking again
                                                        # right after a stub is the content, by design)
    sub = [read(big), cat(), read(big), cat()]          # content, content (never seen there), then its own stubs
    parent_after = [read(big), cat()]                   # the parent's holding: stubs
    script = parent_before + [task] + sub + ["subagent finished"] + parent_after + ["done"]
    with FakeOpenAI(script=script, model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url, Host("opencode"))
        try:
            setup.run(run_host)
            out = chat_results(srv)
            got = lambda group: [out.get(c["call_id"], "") for c in group]  # noqa: E731
            # the subagent's requests are its own conversation: its first user message is the task
            bodies = [r.body for r in srv.log if isinstance(r.body, dict) and r.body.get("tools")]
            sub_bodies = [b for b in bodies if is_subagent(b)]
            assert sub_bodies and all(not any(c["call_id"] in json.dumps(b) for c in parent_before) for b in sub_bodies)
            pb, s, pa = got(parent_before), got(sub), got(parent_after)
            assert is_content(pb[0]) and pb[1] == small_source(), pb
            assert is_content(s[0]), f"the subagent got no content for a file only its parent holds: {s[0][:300]}"
            assert s[1] == small_source(), s[1][:300]
            assert s[2].startswith(f"[unchanged] big.py {LINES} lines"), s[2][:300]
            assert s[3].startswith("[unchanged] small.py 40 lines"), s[3][:300]
            assert "subagent finished" in out.get(task["call_id"], ""), out.get(task["call_id"])
            assert pa[0].startswith(f"[unchanged] big.py {LINES} lines"), f"the parent lost its holding: {pa[0][:300]}"
            assert pa[1].startswith("[unchanged] small.py 40 lines"), pa[1][:300]
            model_got_what_the_after_hook_saw(setup, out)
            lean.assert_no_hook_errors()
            recs = lean.records("opencode")
            assert len(recs) == 2, recs  # the parent's session and the child's, each its own record
        finally:
            setup.stop()
        setup.doctor_and_uninstall()


def wide(tag: str, n: int = 400) -> str:
    """About 40 KB in 400 lines: under `read`'s 2,000 lines and 50 KB, about 10,000 tokens."""
    return "".join(f"{tag}_{i} = '{'x' * 90}'\n" for i in range(n))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(check, what: str, limit_s: float = 120.0):  # noqa: ANN001, ANN201 - waits for an event, asserts nothing on time
    import time

    end = time.monotonic() + limit_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.2)


class Server:
    """`opencode serve` on a free port of 127.0.0.1, prompts sent with `opencode run --attach`: one
    long-lived OpenCode process, as the TUI is."""

    def __init__(self, cli: str, hh, lean, run_host) -> None:  # noqa: ANN001
        import subprocess

        self.cli, self.hh, self.run_host = cli, hh, run_host
        self.env = oc_env(hh, lean)
        self.url = f"http://127.0.0.1:{free_port()}"
        self.said = hh.root / "serve.log"
        self.session = None
        with open(self.said, "wb") as log:
            self.proc = subprocess.Popen([cli, "serve", "--hostname", "127.0.0.1", "--port", self.url.rsplit(":", 1)[1]],
                                         cwd=hh.proj, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: self.proc.poll() is not None or f"listening on {self.url}" in self.said.read_text(), "opencode serve listening")
        assert self.proc.poll() is None, f"opencode serve exited: {self.said.read_text()[-2000:]}"

    def prompt(self, text: str) -> None:
        argv = [self.cli, "run", "--attach", self.url, text, "--format", "json", *(["--session", self.session] if self.session else [])]
        cp, _ = self.run_host(argv, cwd=self.hh.proj, env=self.env, timeout=TIMEOUT)
        assert cp.returncode == 0, f"opencode run --attach -> {cp.returncode}\n{cp.stdout[-2000:]}\n{cp.stderr[-2000:]}"
        self.session = self.session or next(iter(hostcli.printed_ids(cp.stdout, "sessionID")))

    def compact(self) -> None:
        """What the TUI's /compact sends: POST /session/<id>/summarize with the session's model."""
        import urllib.request

        body = json.dumps({"providerID": "fake", "modelID": "fake-model"}).encode()
        req = urllib.request.Request(f"{self.url}/session/{self.session}/summarize", data=body, method="POST",
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as answer:
            assert answer.status == 200, answer.status

    def stop(self) -> None:
        import os
        import signal

        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=60)


def test_reads_after_a_compact_command_are_content_then_stubs_again(opencode_cli, host_home, lean, run_host):
    """The TUI's /compact (`session.summarize`, here through `opencode serve`'s HTTP API) between
    two prompts of one session: the re-reads after it are content, then stubs again."""
    hh = host_home
    big, small = hh.proj / "big.py", hh.proj / "small.py"
    big.write_text(source())
    small.write_text(small_source())
    read = lambda: function_call("read", {"filePath": str(big)})  # noqa: E731
    cat = lambda: function_call("bash", {"command": "cat small.py", "description": "show the file"})  # noqa: E731
    before = [read(), cat(), read(), cat()]        # content, content, stubs
    after = [read(), cat(), read(), cat()]         # after /compact: content, content, then stubs
    script = before + ["first done"] + after + ["second done"]
    with FakeOpenAI(script=script, model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url, Host("opencode"))
        server = Server(opencode_cli, hh, lean, run_host)
        try:
            server.prompt("one")
            server.compact()
            assert [r for r in srv.log if isinstance(r.body, dict) and is_compaction(r.body)], "no summary request"
            server.prompt("two")
            out = chat_results(srv)
            b, a = [out.get(c["call_id"], "") for c in before], [out.get(c["call_id"], "") for c in after]
            assert is_content(b[0]) and b[1] == small_source(), b
            assert b[2].startswith(f"[unchanged] big.py {LINES} lines") and b[3].startswith("[unchanged] small.py 40 lines"), b
            assert is_content(a[0]), f"a re-read after /compact was not the content: {a[0][:300]}"
            assert a[1] == small_source(), f"cat after /compact was not the content: {a[1][:300]}"
            assert a[2].startswith(f"[unchanged] big.py {LINES} lines") and a[3].startswith("[unchanged] small.py 40 lines"), a
            rec = {r["session_id"]: r for r in lean.records("opencode").values()}[server.session]
            assert rec["compactions"] >= 1, rec
            model_got_what_the_after_hook_saw(setup, out)
            lean.assert_no_hook_errors()
        finally:
            server.stop()
            setup.stop()
        setup.doctor_and_uninstall()


def test_a_read_opencode_pruned_is_content_again_in_a_long_lived_server(opencode_cli, host_home, lean, run_host):
    """`compaction.prune` (off by default) clears old tool outputs at the end of a prompt's loop
    ("[Old tool result content cleared]" from then on). `opencode run` exits before that runs, and
    each `opencode run` process is a context of its own for leanctx; in a long-lived process (the
    TUI, `opencode serve`) the plugin sees the cleared parts (`message.part.updated`, marked
    `time.compacted`) and counts them as a loss: a re-read of a pruned result is content."""
    hh = host_home
    files = [hh.proj / f"f{k}.py" for k in range(6)]
    for k, p in enumerate(files):
        p.write_text(wide(f"v{k}"))
    read = lambda p: function_call("read", {"filePath": str(p)})  # noqa: E731
    first = [read(p) for p in files]                  # about 60,000 tokens: OpenCode keeps the newest 40,000
    later = [read(files[0]), read(files[0])]          # pruned: content, then the stub
    script = first + ["one done", "two done", "three done"] + later + ["four done"]
    with FakeOpenAI(script=script, model="fake-model") as srv:
        setup = Setup(hh, lean, srv.base_url, Host("opencode"))
        prune = lambda text: text.replace('"autoupdate"', '"compaction": {"prune": true},\n  "autoupdate"')  # noqa: E731
        setup.config.write_text(prune(setup.config.read_text()))
        setup.before[setup.config] = prune(setup.before[setup.config].decode()).encode()
        server = Server(opencode_cli, hh, lean, run_host)
        try:
            for n, prompt in enumerate(["one", "two", "three", "four"]):
                if n == 3:  # the end of the third prompt's loop pruned the first one's results
                    wait_for(lambda: any(r["compactions"] for r in lean.records("opencode").values()), "the prune on record")
                server.prompt(prompt)
            out = chat_results(srv)
            cleared = [c["call_id"] for c in first if out.get(c["call_id"]) == "[Old tool result content cleared]"]
            assert first[0]["call_id"] in cleared, "OpenCode did not prune the oldest result"
            got = [out.get(c["call_id"], "") for c in later]
            assert got[0].startswith(f"<path>{files[0]}</path>") and "v0_399 = " in got[0], \
                f"a re-read of a pruned result was not the content: {got[0][:300]}"
            assert got[1].startswith("[unchanged] f0.py 400 lines"), got[1][:300]
            records = lean.records("opencode")
            assert len(records) == 1 and next(iter(records.values()))["session_id"] == server.session, records
            lean.assert_no_hook_errors()
        finally:
            server.stop()
            setup.stop()
        setup.doctor_and_uninstall()
