"""End to end: the read cache through the real Codex CLI (`codex exec`) and its MCP connection.

`leanctx init --agent codex --trust` registers `leanctx mcp` in config.toml and wires the hooks,
the read gate included. The scripted model calls `ctx_read` in the `mcp__leanctx` namespace; the
tool results are read back from the requests the fake model server receives. Codex sends each
call's id in `_meta["callId"]`, the same id its PreToolUse hook gets as `tool_use_id`.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time

import pytest

from tests.e2e import hostcli, tracetap
from tests.e2e.fake_openai import FakeOpenAI, _tool_name, function_call, function_outputs, is_subagent

pytestmark = pytest.mark.e2e

NS = "mcp__leanctx"


def read_call(path: str) -> dict:
    return function_call("ctx_read", {"path": path}, namespace=NS)


def output_text(item: dict) -> str:
    """The tool's own text (Codex puts a "Wall time: … Output:" part before an MCP result)."""
    out = item.get("output")
    if isinstance(out, list):
        parts = [c.get("text", "") for c in out if isinstance(c, dict)]
        if parts and parts[0].startswith("Wall time:"):
            parts = parts[1:]
        return "".join(parts)
    return str(out)


def outputs_by_call(bodies: list) -> dict:
    """call_id -> the tool output text Codex sent back to the model (last seen wins)."""
    found: dict = {}
    for body in bodies:
        for item in function_outputs(body):
            found[item["call_id"]] = output_text(item)
    return found


@pytest.fixture
def codex_wired(host_home, lean):
    hh = host_home
    (hh.proj / "big.py").write_text("".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200)))
    return hh


class Scripted:
    """The script, one item per request, noting whether each request offered the `mcp__leanctx`
    tools (`offered`). No start-up grace and no waiting: Codex 0.171 does not wait for MCP
    servers before its first turn, and `leanctx mcp` answers its handshake in tens of ms, so the
    first request must offer them."""

    def __init__(self, script: list) -> None:
        self.script, self.i, self.offered = script, 0, []

    def __call__(self, body: dict):
        self.offered.append(NS in {_tool_name(t) for t in body.get("tools") or []})
        item = self.script[self.i] if self.i < len(self.script) else "done"
        self.i += 1
        return item(body) if callable(item) else item


def exec_codex(codex_cli, hh, lean, run_host, script, prompt="read big.py", tap=False, top_level="", on_server=None,
               after_init=None):
    """init (trusting our hooks), then `codex exec`; with `tap`, our test's own tap hook is added
    (untrusted, so Codex runs with --dangerously-bypass-hook-trust); `after_init(hooks.json path)`
    may change what init wrote. Returns (run, requests, tap log)."""
    scripted = Scripted(script)
    with FakeOpenAI(script=[scripted] * (len(script) + 24)) as srv:
        if on_server:
            on_server(srv)
        hostcli.write_codex_config(hh.home, srv.base_url, top_level=top_level)
        lean.run("init", "--agent", "codex", "--trust")
        if after_init:
            after_init(hh.codex_home / "hooks.json")
        log = tracetap.install_tap(hh.codex_home / "hooks.json", hh.root) if tap else None
        bypass = ["--dangerously-bypass-hook-trust"] if tap else []
        cp, _ = run_host([codex_cli, "exec", "--skip-git-repo-check", *bypass, prompt], cwd=hh.proj,
                         env=hostcli.codex_env(hh.home, lean.host_env))
        assert cp.returncode == 0, cp.stderr
        assert scripted.offered[0], "the first request did not offer the leanctx tools"
        assert "mcp_optional_startup_grace_ms" not in (hh.codex_home / "config.toml").read_text()
        return cp, srv.requests, log


def test_codex_second_read_is_the_stub_and_a_new_session_gets_content(codex_cli, codex_wired, lean, run_host):
    hh = codex_wired
    content = (hh.proj / "big.py").read_text()
    first, second = read_call("big.py"), read_call("big.py")
    cp, bodies, _ = exec_codex(codex_cli, hh, lean, run_host, [first, second, "done"], tap=True)
    assert "hook: PreToolUse Completed" in cp.stderr, cp.stderr
    out = outputs_by_call(bodies)
    assert "def function_199" in out[first["call_id"]] and len(out[first["call_id"]]) >= len(content)
    assert out[second["call_id"]].startswith("[unchanged]") and "big.py" in out[second["call_id"]], out[second["call_id"]]
    lean.assert_no_hook_errors()
    # the read gate noted both calls under the ids Codex also sent the MCP server
    rec = lean.only_record("codex")
    assert {first["call_id"], second["call_id"]} <= set(rec["read_calls"])
    # a new `codex exec` is a new session (and a new host process): content again
    again = read_call("big.py")
    _, bodies, tap = exec_codex(codex_cli, hh, lean, run_host, [again, "done"], tap=True)
    assert "def function_199" in outputs_by_call(bodies)[again["call_id"]]
    # `leanctx stats`: two codex processes, one context each, charged once for our tool definition
    # and the rule Codex gets (its tools/list and its reads are the same context)
    st = json.loads(lean.run("stats", "--json").stdout)
    assert (st["reads"], st["stubs"], st["contexts"]) == (3, 1, 2), st
    assert st["by_agent"]["codex"]["contexts"] == 2 and st["by_reader"]["ctx_read"]["reads"] == 3
    assert st["tokens_saved"] == st["tokens_raw"] - st["tokens_sent"] - st["tokens_reread"] - st["tokens_overhead"]
    # both runs, replayed from what Codex itself sent: the same answers, 0 wrong, ours == oracle
    trace = tracetap.to_trace(tap, hh.proj, {"big.py": content}, agent="codex")
    tracetap.check_replay(trace, hh, ["full", "stub", "full"], "codex-two-sessions", host="Codex", source=__file__)


def test_codex_subagent_gets_only_its_own_stubs_and_the_parent_keeps_its_own(codex_cli, codex_wired, lean, run_host):
    hh = codex_wired
    content = (hh.proj / "big.py").read_text()
    p_first, p_last = read_call("big.py"), read_call("big.py")
    s_first, s_second = read_call("big.py"), read_call("big.py")
    spawn = function_call("spawn_agent", {"message": "Read big.py with ctx_read, twice."}, namespace="multi_agent_v1")
    sub_script = [s_first, s_second, "sub: done"]
    state = {"parent": 0, "sub": 0}

    def agent_id(body: dict) -> str:
        for item in function_outputs(body):
            if item["call_id"] == spawn["call_id"]:
                text = output_text(item)
                try:
                    data = json.loads(text)
                except ValueError:
                    return text.strip()
                return str(data.get("agent_id") or data.get("id") or data.get("target") or text)
        raise AssertionError("no spawn_agent output in the parent's request")

    def route(body: dict):
        if is_subagent(body):
            i = state["sub"]
            state["sub"] += 1
            return sub_script[i] if i < len(sub_script) else "sub: done"
        i = state["parent"]
        state["parent"] += 1
        if i == 0:
            return p_first
        if i == 1:
            return spawn
        if i == 2:
            return function_call("wait_agent", {"targets": [agent_id(body)], "timeout_ms": 60000}, namespace="multi_agent_v1")
        if i == 3:
            return p_last
        return "done"

    cp, bodies, tap = exec_codex(codex_cli, hh, lean, run_host, [route] * 12, tap=True)
    out = outputs_by_call(bodies)
    assert state["sub"] >= 3, f"the subagent did not run its script: {state}\n{cp.stderr[-2000:]}"
    assert out[p_first["call_id"]].startswith("def function_0")
    assert "def function_199" in out[s_first["call_id"]], "the subagent got a stub for bytes only its parent holds"
    assert out[s_second["call_id"]].startswith("[unchanged]"), out[s_second["call_id"]][:200]
    assert out[p_last["call_id"]].startswith("[unchanged]"), out[p_last["call_id"]][:200]
    rec = lean.only_record("codex")
    notes = rec["read_calls"]
    assert notes[p_first["call_id"]]["agent_id"] is None and notes[s_first["call_id"]]["agent_id"], notes
    lean.assert_no_hook_errors()
    trace = tracetap.to_trace(tap, hh.proj, {"big.py": content}, agent="codex")
    tracetap.check_replay(trace, hh, ["full", "full", "stub", "stub"], "codex-subagent", host="Codex", source=__file__)


def test_codex_first_turn_offers_ctx_read_without_a_startup_grace(codex_cli, codex_wired, lean, run_host):
    """Codex does not wait for MCP servers before its first turn; `leanctx mcp` is up in time
    anyway, so no `mcp_optional_startup_grace_ms` is needed and doctor no longer suggests one.
    (With the SDK server, 0.6-1.8 s to initialize, this first request lacked our tools.)"""
    hh = codex_wired
    offered = []

    def first(body: dict) -> str:
        offered.append(sorted(t for t in (_tool_name(t) for t in body.get("tools") or []) if t and t.startswith(NS)))
        return "done"

    with FakeOpenAI(script=[first]) as srv:
        config = hostcli.write_codex_config(hh.home, srv.base_url)
        lean.run("init", "--agent", "codex", "--trust")
        assert "mcp_optional_startup_grace_ms" not in config.read_text()
        cp, _ = run_host([codex_cli, "exec", "--skip-git-repo-check", "hi"], cwd=hh.proj,
                         env=hostcli.codex_env(hh.home, lean.host_env))
        assert cp.returncode == 0, cp.stderr
    assert offered and offered[0], f"the first request did not offer the leanctx tools: {offered}"
    report = json.loads(lean.run("doctor", "--agent", "codex", "--json", ok=False).stdout)
    assert "codex mcp start-up" not in {c["name"] for c in report["agents"][0]["checks"]}


def usage_reporter(server: dict):  # noqa: ANN201
    """reporting(usage, item): `item` answered with this usage reported (None: the fake's small
    default), on the fake server kept in server["srv"]."""
    def reporting(usage: dict | None, item):  # noqa: ANN001, ANN202
        def build(body: dict):  # noqa: ANN202
            server["srv"].usage = usage
            return item
        return build
    return reporting


def test_codex_after_an_auto_compaction_the_next_read_is_full(codex_cli, codex_wired, lean, run_host):
    """Codex compacts on its own when a response reports usage over its limit; PreCompact bumps
    the conversation's counter and the next read of a file it held is full again."""
    hh = codex_wired
    content = (hh.proj / "big.py").read_text()
    reads = [read_call("big.py") for _ in range(4)]
    server: dict = {}
    reporting = usage_reporter(server)
    over = {"input_tokens": 50000, "total_tokens": 50005}  # over the limit: Codex compacts after this response
    script = [reporting(None, reads[0]), reporting(None, reads[1]), reporting(over, reads[2]),
              reporting(None, reads[3]), reporting(None, "done")]
    cp, bodies, tap = exec_codex(codex_cli, hh, lean, run_host, script, tap=True,
                                 top_level="model_auto_compact_token_limit = 20000",
                                 on_server=lambda srv: server.update(srv=srv))
    out = outputs_by_call(bodies)
    kinds = ["stub" if out[r["call_id"]].startswith("[unchanged]") else "full" for r in reads]
    assert "def function_199" in out[reads[0]["call_id"]] and kinds[1] == "stub", kinds
    assert lean.only_record("codex")["compactions"] >= 1, "Codex did not compact (or PreCompact was not published)"
    assert "def function_199" in out[reads[3]["call_id"]], "a stub was served after Codex compacted the context"
    lean.assert_no_hook_errors()
    trace = tracetap.to_trace(tap, hh.proj, {"big.py": content}, agent="codex")
    tracetap.check_replay(trace, hh, kinds, "codex-compaction", host="Codex", source=__file__)


def tracetap_events(log) -> set:  # noqa: ANN001
    return {json.loads(line).get("event") for line in log.read_text().splitlines() if line.strip()}


def rollout_lines(hh, kind: str) -> list:
    """The lines of `kind` in the session's rollout(s) Codex wrote."""
    out = []
    for f in sorted((hh.codex_home / "sessions").rglob("rollout-*.jsonl")):
        out += [v for v in map(json.loads, f.read_text().splitlines()) if v.get("type") == kind]
    return out


def test_codex_compaction_with_no_hook_is_read_from_the_rollout(codex_cli, codex_wired, lean, run_host):
    """Codex compacts on its own, and no compaction hook reaches leanctx (here: PreCompact and
    SessionStart removed from hooks.json after init, as if untrusted, lost or timed out). The
    rollout's `compacted` line alone makes the next read of a file it held full again."""
    hh = codex_wired
    reads = [read_call("big.py") for _ in range(4)]
    server: dict = {}
    reporting = usage_reporter(server)
    def without_compaction_hooks(path) -> None:  # noqa: ANN001
        config = json.loads(path.read_text())
        for event in ("PreCompact", "PostCompact", "SessionStart"):
            config["hooks"].pop(event, None)
        path.write_text(json.dumps(config, indent=2) + "\n")

    over = {"input_tokens": 50000, "total_tokens": 50005}
    script = [reporting(None, reads[0]), reporting(None, reads[1]), reporting(over, reads[2]),
              reporting(None, reads[3]), reporting(None, "done")]
    cp, bodies, tap = exec_codex(codex_cli, hh, lean, run_host, script, tap=True,
                                 top_level="model_auto_compact_token_limit = 20000",
                                 on_server=lambda srv: server.update(srv=srv), after_init=without_compaction_hooks)
    out = outputs_by_call(bodies)
    assert "def function_199" in out[reads[0]["call_id"]] and out[reads[1]["call_id"]].startswith("[unchanged]")
    assert len(rollout_lines(hh, "compacted")) == 1, "Codex did not compact"
    # Codex ran PreCompact (for the test's tap only); leanctx heard of no compaction
    assert "PreCompact" in tracetap_events(tap) and lean.only_record("codex")["compactions"] == 0
    assert "def function_199" in out[reads[3]["call_id"]], "a stub was served after Codex compacted the context"
    lean.assert_no_hook_errors()


def test_codex_cuts_a_large_output_so_it_is_not_held(codex_cli, codex_wired, lean, run_host):
    """Codex 0.171.0 keeps a tool output over its budget only in part (`…N chars truncated…` in
    the middle) in the model's history and the rollout; the model never saw the rest, so the
    next read of that file is content again, not a stub. A small file still gets its stub."""
    hh = codex_wired
    (hh.proj / "huge.py").write_text("".join(f"def function_{i}(x):\n    return x * {i}  # padding\n\n"
                                             for i in range(6000)))
    script = [read_call("huge.py"), read_call("huge.py"), read_call("big.py"), read_call("big.py"), "done"]
    _, bodies, _ = exec_codex(codex_cli, hh, lean, run_host, script)
    out = outputs_by_call(bodies)
    first, second, small, small_again = (out[c["call_id"]] for c in script[:4])
    assert "chars truncated…" in first or "tokens truncated…" in first, first[:300]  # what the model got
    assert "def function_5999" in second and not second.startswith("[unchanged]"), second[:200]
    assert "def function_199" in small and small_again.startswith("[unchanged]"), small_again[:200]
    lean.assert_no_hook_errors()


class AppServer:
    """`codex app-server` (0.171.0) over stdio: JSON-RPC requests, and the notifications it sends
    (turn/completed ...). Its hooks must be trusted: app-server has no bypass flag, so `trust_all`
    trusts what hooks/list reports, as the /hooks screen does."""

    def __init__(self, cli: str, hh, env: dict) -> None:  # noqa: ANN001
        self.proc = subprocess.Popen([cli, "app-server"], cwd=str(hh.proj), env=env, text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        self.n = 0
        self.seen: list = []

    def send(self, method: str, params: dict | None = None, notify: bool = False) -> int:
        msg: dict = {"method": method, "params": params}
        if not notify:
            self.n += 1
            msg["id"] = self.n
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return self.n

    def wait(self, pred, limit: float = 90) -> dict:  # noqa: ANN001
        """The first message `pred` accepts; `pred(None)` is asked between messages too."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if not ready:
                if pred(None):
                    return {}
                continue
            line = self.proc.stdout.readline()
            if not line:
                break
            msg = json.loads(line)
            self.seen.append(json.dumps(msg)[:300] if msg.get("method") == "configWarning" else msg.get("method") or f"answer {msg.get('id')}")
            if pred(msg):
                return msg
        raise AssertionError(f"codex app-server did not answer; last messages: {self.seen[-12:]}")

    def call(self, method: str, params: dict) -> dict:
        i = self.send(method, params)
        msg = self.wait(lambda m: m is not None and m.get("id") == i and "method" not in m)
        assert "result" in msg, msg
        return msg["result"]

    def trust_all(self, cwd) -> None:  # noqa: ANN001
        hooks = self.call("hooks/list", {"cwds": [str(cwd)]})
        edits = [{"keyPath": f'hooks.state."{h["key"]}".trusted_hash', "value": h["currentHash"], "mergeStrategy": "replace"}
                 for entry in hooks.get("data", []) for h in entry.get("hooks", []) if h.get("trustStatus") != "trusted"]
        if edits:
            self.call("config/batchWrite", {"edits": edits})

    def turn(self, thread: str, text: str, ended) -> str:  # noqa: ANN001
        """One turn, until `ended()` (the fake model has given its last answer of the turn) and
        the thread is idle again (turn/completed comes before the Stop hook, at times before the
        answer to turn/start, and after a revert at times not at all)."""
        i = self.send("turn/start", {"threadId": thread, "input": [{"type": "text", "text": text}]})
        seen: dict = {}

        def done(m: dict | None) -> bool:
            if m is not None and m.get("id") == i and "method" not in m:
                seen["answer"] = m
            elif m is not None and ended() and m.get("method") == "thread/status/changed" \
                    and (m.get("params") or {}).get("status", {}).get("type") == "idle":
                seen["idle"] = m  # after its Stop hook: a revert asked before that could hang
            return len(seen) == 2

        self.wait(done)
        assert "result" in seen["answer"], seen["answer"]
        return seen["answer"]["result"]["turn"]["id"]

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def test_codex_a_reverted_turn_takes_its_reads_with_it(codex_cli, codex_wired, lean, run_host):
    """`thread/revert` (Codex 0.171.0 app-server: an edited earlier prompt) drops the turns from
    one on. Codex then fires SessionEnd and SessionStart(source=resume) and goes on in a new
    rollout segment (`rollout-…-<thread>_<segment>.jsonl`, whose session_meta names the kept part
    of the old one as `history_base`). The read made in the dropped turn is not in the context
    any more, so the read after the revert is content (it was a stub before the rollout check)."""
    hh = codex_wired
    dropped, after = read_call("big.py"), read_call("big.py")
    with FakeOpenAI(script=["one", dropped, "two", after, "three"]) as srv:
        hostcli.write_codex_config(hh.home, srv.base_url)
        lean.run("init", "--agent", "codex", "--trust")
        app = AppServer(codex_cli, hh, hostcli.codex_env(hh.home, lean.host_env))
        try:
            app.call("initialize", {"clientInfo": {"name": "leanctx-tests", "version": "0"}})
            app.send("initialized", notify=True)
            app.trust_all(hh.proj)
            thread = app.call("thread/start", {"cwd": str(hh.proj)})["thread"]["id"]
            def served(n: int):  # noqa: ANN202
                return lambda: len(srv.main_requests) >= n

            app.turn(thread, "say one", served(1))
            second = app.turn(thread, "read big.py", served(3))
            app.call("thread/revert", {"threadId": thread, "beforeTurnId": second})
            app.turn(thread, "read big.py again", served(5))
        finally:
            app.close()
        out = outputs_by_call(srv.requests)
        last = srv.requests[-1]
    assert "def function_199" in out[dropped["call_id"]]
    assert "read big.py" not in json.dumps(last.get("input")).replace("read big.py again", ""), "Codex kept the reverted turn"
    assert "def function_199" in out[after["call_id"]], "a stub was served for a read the revert dropped"
    assert len(list((hh.codex_home / "sessions").rglob(f"rollout-*{thread}_*.jsonl"))) == 1  # the new segment
    lean.assert_no_hook_errors()


def test_codex_auto_approves_only_the_reading_tools(codex_cli, codex_wired, lean, run_host):
    """init --bot approves ctx_read and ctx_stats per tool; a state tool (it writes the user's
    thread, offered with --bot only) keeps Codex's default, which `codex exec` (approval policy
    never) refuses without running it."""
    hh = codex_wired
    reading = read_call("big.py")
    stats = function_call("ctx_stats", {}, namespace=NS)
    writing = function_call("state_set_summary", {"text": "planted by the model"}, namespace=NS)
    cks_home = hh.root / "cks"
    host_env = dict(lean.host_env, CKS_HOME=str(cks_home), CKS_ACTIVE_USER="Ana")
    scripted = Scripted([reading, stats, writing, "done"])
    with FakeOpenAI(script=[scripted] * 28) as srv:
        hostcli.write_codex_config(hh.home, srv.base_url)
        lean.run("init", "--agent", "codex", "--trust", "--bot")
        cp, _ = run_host([codex_cli, "exec", "--skip-git-repo-check", "read big.py"], cwd=hh.proj,
                         env=hostcli.codex_env(hh.home, host_env))
        assert cp.returncode == 0, cp.stderr
        out = outputs_by_call(srv.requests)
    assert scripted.offered[0], "the first request did not offer the leanctx tools"
    assert "def function_199" in out[reading["call_id"]]
    assert json.loads(out[stats["call_id"]])["served_by"], out[stats["call_id"]]
    assert "requires approval" in out[writing["call_id"]], out[writing["call_id"]]
    # the bot hooks keep this user's thread in cks_home; the refused tool wrote nothing into it
    assert not any("planted by the model" in p.read_text(errors="replace") for p in cks_home.rglob("*") if p.is_file()), \
        "the state tool ran"
