"""`leanctx stats` reports savings a sceptic can check: per reader (ctx_read, a host's built-in
reader, a plain read through its shell), net of our own overhead (the tool definition and the read
rule, charged once per context) and of the reads our stubs caused; every table sums to the
total, the total never goes down (restart, dropped conversations), and a loss shows as a loss."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from leanctx.cache import mcpserver, overhead, readcache, tokens
from leanctx.cache.cli import render_stats
from leanctx.cache.index import index_path
from leanctx.cache.readcache import OLDER, ReadCache
from leanctx.cache.service import savings

from .conftest import World, code
from .test_builtin_read import read_form

READ_FIELDS = ("reads", "full", "stubs", "diffs", "pointers", "errors", "withheld", "tokens_raw", "tokens_sent",
               "rereads", "tokens_reread")
COST_FIELDS = ("contexts", "tokens_overhead", "tokens_tool", "tokens_rule")


def consistent(st: dict) -> dict:
    """Assert the invariants of a stats report; return it."""
    buckets = [st, *st["by_agent"].values(), *st["by_conversation"].values()]
    for b in buckets:
        for f in READ_FIELDS:
            assert b[f] == sum(r[f] for r in b["by_reader"].values()), (f, b)
        assert b["tokens_saved"] == b["tokens_raw"] - b["tokens_sent"] - b["tokens_reread"] - b["tokens_overhead"]
        assert b["tokens_saved"] == sum(r["tokens_saved"] for r in b["by_reader"].values()) - b["tokens_overhead"]
        assert b["tokens_overhead"] == b["tokens_tool"] + b["tokens_rule"]
        assert all(b[f] >= 0 for f in (*READ_FIELDS, *COST_FIELDS))
    for group in ("by_agent", "by_conversation"):
        for f in (*READ_FIELDS, *COST_FIELDS, "tokens_saved"):
            assert st[f] == sum(b[f] for b in st[group].values()), (group, f)
    return st


def totals(st: dict) -> dict:
    return {f: st[f] for f in (*READ_FIELDS, *COST_FIELDS)}


def grew(before: dict, after: dict) -> bool:
    return all(after[f] >= before[f] for f in before)


class Host:
    """One Claude Code session reading through ctx_read, the built-in Read and `cat` in its shell."""

    def __init__(self, world: World, conv: str = "s1", agent: str = "claude") -> None:
        self.world = world
        self.h = world.host(agent)
        world.session(self.h, conv)
        self.conn = world.conn(self.h)
        self.n = 0

    def _call(self, name: str):  # noqa: ANN202
        scope = self.world.scope(self.conn)
        self.n += 1
        call = f"toolu_stat{self.n:04d}"
        self.world.transcript_entry(scope.transcript, {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": call, "name": name, "input": {}}]}})
        return dataclasses.replace(scope, call_id=call), call

    def _result(self, scope, call: str, text: str) -> None:  # noqa: ANN001
        self.world.transcript_entry(scope.transcript, {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": call, "content": text}]}})

    def builtin(self, rel: str, reader: str = "builtin") -> dict:
        """A gated built-in read of the whole file: refused with a stub, or run and credited."""
        path = str(self.world.path(rel))
        scope, call = self._call("Read" if reader == "builtin" else "Bash")
        gate = self.world.cache.read(scope, path, 1, 2000, mode="gate", reader=reader)
        if gate["kind"] != "full":
            self._result(scope, call, gate["text"])
            return gate
        got = read_form(self.world.path(rel).read_text())
        self._result(scope, call, got)
        credit = self.world.cache.read(scope, path, 1, 1 + got.count("\n"), mode="credit", delivered=got, reader=reader)
        return {**gate, "credit": credit["kind"]}

    def ctx_read(self, rel: str, fresh: bool = False) -> dict:
        scope, call = self._call("mcp__leanctx__ctx_read")
        res = self.world.cache.read(scope, rel, fresh=fresh)
        self._result(scope, call, res["text"])
        return res


def per_context(agent: str = "claude") -> int:
    c = overhead.per_context(agent)
    return c["tool"] + c["rule"]


def test_the_tool_definition_is_counted_from_what_tools_list_returns() -> None:
    listed = json.dumps(mcpserver.tools_for("coding"), ensure_ascii=False, separators=(",", ":"))
    assert overhead.tool_tokens() == tokens.count(listed) > 50
    rule = overhead.rule_text("claude")
    assert "ctx_read" in rule and "<!-- leanctx:ctx-read -->" in rule
    assert overhead.rule_tokens("claude") == tokens.count(rule)
    # a host nobody can name is charged the longest rule of any host
    assert overhead.rule_tokens(None) >= max(overhead.rule_tokens(a) for a in ("claude", "codex", "gemini", "cursor"))


def test_readers_are_counted_apart_and_every_table_sums_to_the_total(world: World) -> None:
    world.write("a.py", code(200))
    world.write("b.py", code(120, "b"))
    one, two = Host(world, "s1"), Host(world, "s2")
    assert one.ctx_read("a.py")["kind"] == "full"
    assert one.ctx_read("a.py")["kind"] == "stub"
    assert one.builtin("a.py")["kind"] == "stub"
    assert one.builtin("b.py")["credit"] == "full"
    assert two.builtin("b.py", "shell")["credit"] == "full"
    assert two.builtin("b.py", "shell")["kind"] == "stub"
    st = consistent(world.cache.stats())
    r = st["by_reader"]
    assert (r["ctx_read"]["reads"], r["ctx_read"]["stubs"]) == (2, 1)
    assert (r["builtin"]["reads"], r["builtin"]["stubs"], r["builtin"]["full"]) == (2, 1, 1)
    assert (r["shell"]["reads"], r["shell"]["stubs"], r["shell"]["full"]) == (2, 1, 1)
    assert all(r[n]["tokens_saved"] > 0 for n in ("ctx_read", "builtin", "shell"))
    assert st["contexts"] == 2 and st["tokens_overhead"] == 2 * per_context()
    (k1,) = [k for k in st["by_conversation"] if k.startswith("claude:s1@")]
    assert set(st["by_conversation"][k1]["by_reader"]) == {"ctx_read", "builtin"}


def test_overhead_is_charged_once_per_context_and_again_after_a_compaction(world: World) -> None:
    world.write("a.py", code(200))
    host = Host(world)
    for _ in range(4):
        host.ctx_read("a.py")
    assert world.cache.stats()["contexts"] == 1
    world.hook(host.h, "compact", "s1")
    host.ctx_read("a.py")
    host.ctx_read("a.py")
    st = consistent(world.cache.stats())
    assert st["contexts"] == 2 and st["tokens_overhead"] == 2 * per_context()
    world.restart()  # the charge is remembered: a restarted daemon does not charge the same context again
    host.ctx_read("a.py")
    assert world.cache.stats()["contexts"] == 2


def test_a_stub_followed_by_a_full_read_of_the_same_bytes_gives_its_saving_back(world: World) -> None:
    world.write("a.py", code(200))
    host = Host(world)
    full = host.ctx_read("a.py")
    stub = host.ctx_read("a.py")
    assert stub["kind"] == "stub"
    assert host.ctx_read("a.py", fresh=True)["kind"] == "full"  # the model did not have it after all
    st = consistent(world.cache.stats())
    assert (st["rereads"], st["tokens_reread"]) == (1, full["tokens_raw"])
    # without leanctx the model reads the file twice; with it, twice plus the stub: the stub's
    # tokens and the overhead are the loss
    assert st["tokens_saved"] == -stub["tokens_sent"] - per_context()
    # a changed file read in full is news, not a re-read
    host.ctx_read("a.py")
    world.write("a.py", code(40, "z"))
    host.ctx_read("a.py")
    assert consistent(world.cache.stats())["rereads"] == 1


def test_a_refused_built_in_read_asked_again_gives_its_saving_back_to_that_reader(world: World) -> None:
    world.write("a.py", code(200))
    host = Host(world)
    host.builtin("a.py")
    refused = host.builtin("a.py")
    assert refused["kind"] == "stub"
    again = host.builtin("a.py")  # the same lines asked for right after a refusal: the reader runs
    assert again["kind"] == "full" and again["again"] and again["credit"] == "full"
    st = consistent(world.cache.stats())
    b = st["by_reader"]["builtin"]
    assert b["rereads"] == 1 and b["tokens_reread"] == refused["tokens_raw"] > 0
    # the file reached the model twice and the refusal cost its text: the reader saved less than nothing
    assert b["tokens_saved"] == -refused["tokens_sent"] and "ctx_read" not in st["by_reader"]


def test_a_loss_is_shown_as_a_loss(world: World) -> None:
    world.write("a.py", code(200))
    Host(world).ctx_read("a.py")
    st = consistent(world.cache.stats())
    assert st["tokens_saved"] == -per_context() < 0
    assert savings(st)["tokens_saved"] == st["tokens_saved"] and savings(st)["ratio"] < 0
    total = next(line for line in render_stats(st, "test").splitlines() if line.startswith("  total"))
    assert f" {-per_context()} " in total


def test_totals_never_go_down_across_restarts_and_dropped_conversations(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readcache, "MAX_CONVERSATIONS", 3)
    world.write("a.py", code(200))
    seen = totals(world.cache.stats())
    for i in range(7):
        host = Host(world, f"c{i}")
        host.ctx_read("a.py")
        host.ctx_read("a.py")
        if i % 3 == 2:
            world.restart()
        st = consistent(world.cache.stats())
        assert grew(seen, totals(st)), (seen, totals(st))
        seen = totals(st)
    assert len(st["by_conversation"]) == 4 and OLDER in st["by_conversation"]  # 3 kept + the older ones
    assert st["reads"] == 14 and st["stubs"] == 7 and st["contexts"] == 7
    assert st["by_conversation"][OLDER]["reads"] == 8
    world.restart()
    assert totals(consistent(world.cache.stats())) == seen


def test_an_index_from_before_readers_keeps_its_counts_unattributed(world: World) -> None:
    """An index saved by an earlier version: no by_reader, no overhead, and conversations that
    were dropped without a trace (their counts only in the total)."""
    old = {"reads": 10, "full": 6, "stubs": 4, "diffs": 0, "pointers": 0, "errors": 0, "cold_stubs": 0,
           "withheld": 0, "tokens_raw": 5000, "tokens_sent": 2000}
    conv = dict(old, reads=4, full=2, stubs=2, tokens_raw=2000, tokens_sent=800)
    doc = {"schema": 1, "conversations": {}, "tokenizer": "cl100k_base",
           "stats": {"total": old, "by_agent": {"claude": old}, "by_conversation": {"claude:x@t#1:2": conv}}}
    world.state.mkdir(parents=True, exist_ok=True)
    Path(index_path(str(world.state))).write_text(json.dumps(doc))
    st = consistent(ReadCache(str(world.state)).stats())
    assert (st["reads"], st["tokens_raw"], st["tokens_sent"]) == (10, 5000, 2000)
    assert st["by_reader"] == {"unattributed": {**st["by_reader"]["unattributed"], "reads": 10}}
    assert st["by_conversation"][OLDER]["reads"] == 6


def test_a_host_that_listed_our_tools_is_charged_once_even_with_no_read(world: World) -> None:
    world.write("a.py", code(200))
    idle = world.host()  # tools listed, no conversation known yet, never reads
    for _ in range(2):
        world.cache.charge_listed(world.scope(world.conn(idle)), idle.pid, idle.ticks)
    st = consistent(world.cache.stats())
    assert st["contexts"] == 1 and st["reads"] == 0 and st["tokens_saved"] < 0
    # a second host lists, then its conversation starts and reads: the listing's charge is that
    # context's, moved to it, not charged twice
    busy = world.host()
    world.cache.charge_listed(world.scope(world.conn(busy)), busy.pid, busy.ticks)
    world.session(busy, "s-busy")
    c = world.conn(busy)
    world.read(c, "a.py")
    world.read(c, "a.py")
    st = consistent(world.cache.stats())
    assert st["contexts"] == 2 and st["tokens_overhead"] == 2 * sum(overhead.per_context(None).values())
    (key,) = [k for k in st["by_conversation"] if k.startswith("claude:s-busy@")]
    assert st["by_conversation"][key]["contexts"] == 1
    assert not [k for k in st["by_conversation"] if k.endswith(f"#{busy.pid}:{busy.ticks}") and "tools listed" in k]
    # a listing after the conversation is known charges nothing more
    world.cache.charge_listed(world.scope(c), busy.pid, busy.ticks)
    world.restart()
    assert consistent(world.cache.stats())["contexts"] == 2


def test_the_rendered_table_names_the_tokenizer_the_rule_and_the_readers(world: World) -> None:
    world.write("a.py", code(200))
    host = Host(world)
    host.ctx_read("a.py")
    host.ctx_read("a.py")
    host.builtin("a.py")
    st = consistent(world.cache.stats())
    lines = render_stats(st, "daemon").splitlines()
    assert lines[1] == "  " + st["tokenizer_note"]
    assert lines[2].startswith("  saved = raw - sent - re-read - overhead")
    c = overhead.per_context("claude")
    assert lines[3].startswith(f"  overhead: tool definition {c['tool']} + read rule {c['rule']} tokens per context")
    assert "not per model request" in lines[3]
    rows = {line.split()[0]: line.split() for line in lines[5:] if line.startswith("  ")}
    assert rows["total"][-2:] == [str(st["tokens_saved"]), f"{100 * st['tokens_saved'] / st['tokens_raw']:.1f}%"]
    assert rows["ctx_read"][-3] == "-" and rows["builtin"][-3] == "-"  # the overhead is no reader's
    assert int(rows["ctx_read"][-2]) + int(rows["builtin"][-2]) - st["tokens_overhead"] == st["tokens_saved"]
    assert "  per host:" in lines and "  per conversation:" in lines


# -- through the real processes: `leanctx mcp` (stdio), its daemon, `leanctx stats` ----------------

def _mcp(env: dict, cwd: Path, log: Path):  # noqa: ANN202
    """`leanctx mcp` driven by bare JSON-RPC lines, as a host drives it: (process, call)."""
    import subprocess

    from .test_service_support import leanctx_cmd

    with open(log, "ab") as err:
        proc = subprocess.Popen(leanctx_cmd("mcp"), env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    ids = iter(range(1, 1000))

    def call(method: str, params: dict) -> dict:
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params}) + "\n").encode())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert "result" in answer, answer
        return answer["result"]

    call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}})
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    return proc, call


def _stats(env: dict) -> dict:
    from tests.conftest import run_cli

    res = run_cli("stats", "--json", env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout and json.loads(res.stdout)


def test_a_real_daemon_charges_the_listed_tools_once_and_keeps_its_totals(env: dict, data_dir: Path, tmp_path: Path) -> None:
    """A host (this test process) whose MCP server lists our tools and reads a file twice: one
    context charged (the listing and the reads are the same context), the tool definition counted
    from the tools/list answer the host got; the totals survive `leanctx stop` and a new daemon."""
    from tests.cache.conftest import host_said
    from tests.conftest import run_cli

    from .test_service_support import publish_conversation, wait_until

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text("".join(f"alpha line {i}\n" for i in range(1, 301)))
    publish_conversation(data_dir, "conv-net", proj)
    server, call = _mcp(env, proj, tmp_path / "mcp.log")
    try:
        listed = call("tools/list", {})["tools"]
        kinds = []
        for i in range(2):
            host_said(f"toolu_net{i}")
            result = call("tools/call", {"name": "ctx_read", "arguments": {"path": "a.txt"},
                                         "_meta": {"claudecode/toolUseId": f"toolu_net{i}"}})
            kinds.append("stub" if result["content"][0]["text"].startswith("[unchanged]") else "full")
        assert kinds == ["full", "stub"]
        # the listing is told to the daemon off the handshake's path: wait for its charge
        assert wait_until(lambda: _stats(env)["contexts"] >= 1, 30.0)
        st = consistent(_stats(env))
    finally:
        server.stdin.close()
        server.wait(30)
    assert st["source"] == "daemon" and (st["reads"], st["stubs"], st["contexts"]) == (2, 1, 1)
    if st["tokenizer"] == tokens.name():  # this process counts as the daemon did
        text = json.dumps(listed, ensure_ascii=False, separators=(",", ":"))
        assert st["tokens_tool"] == tokens.count(text)
        assert st["tokens_rule"] == overhead.rule_tokens("claude")
    assert st["tokens_saved"] == st["tokens_raw"] - st["tokens_sent"] - st["tokens_overhead"] > 0
    assert st["by_reader"]["ctx_read"]["reads"] == 2
    assert run_cli("stop", env=env).returncode == 0
    offline = consistent(_stats(env))
    assert offline["source"].startswith("persisted index") and totals(offline) == totals(st)
    assert run_cli("serve", "--detach", env=env).returncode == 0
    again = consistent(_stats(env))
    assert again["source"] == "daemon" and totals(again) == totals(st)
    lines = run_cli("stats", env=env).stdout.splitlines()
    assert any(line.startswith("  total") and line.split()[-2] == str(st["tokens_saved"]) for line in lines)
    status = run_cli("status", env=env).stdout
    assert f"savings      {st['tokens_saved']} tokens net ({st['tokens_sent']} delivered of {st['tokens_raw']} raw, " \
        f"0 re-read, {st['tokens_overhead']} our overhead;" in status, status


def test_a_real_host_that_only_lists_our_tools_is_charged(env: dict, data_dir: Path, tmp_path: Path) -> None:
    """No hook record, no read: the host still carries our tool definition, and stats say so."""
    from .test_service_support import wait_until

    proj = tmp_path / "proj"
    proj.mkdir()
    server, call = _mcp(env, proj, tmp_path / "mcp.log")
    try:
        call("tools/list", {})
        call("tools/list", {})  # listed again: the same host process, charged once
        assert wait_until(lambda: _stats(env)["contexts"] >= 1, 30.0)
        st = consistent(_stats(env))
    finally:
        server.stdin.close()
        server.wait(30)
    assert (st["reads"], st["contexts"]) == (0, 1) and st["tokens_saved"] == -st["tokens_overhead"] < 0
    (key,) = st["by_conversation"]
    assert "tools listed, no conversation identified" in key
