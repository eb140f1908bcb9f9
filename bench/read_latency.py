"""ctx_read round trip through the MCP stdio server, stub and full, beside a plain open().read().

Everything real: a temporary HOME and data dir, the daemon (`serve`) as a subprocess, a hook
record published through leanctx.hooks.publish naming this process as the host, the MCP server
(`mcp`) spawned as a subprocess by the official SDK's stdio client (so, as under Claude Code, the
MCP server's parent is the "host" the record names). Rows are interleaved round by round so that
machine noise hits them alike.

    python bench/read_latency.py [--runs 300] [--lines 2000]

Rows:
  open().read() (floor)         the same file read in this process
  MCP ping (transport floor)    the SDK's ping: JSON-RPC over the stdio pipes, no tool
  daemon socket, stub           the daemon's answer to a read, from a pooled socket in this process
                                (the daemon verified who we are once, when the socket was accepted)
  verified identity (per socket) what the daemon does once per accepted socket to learn who is
                                asking (cache/peer.py: SO_PEERCRED/pidfd, /proc environ, cwd,
                                parent chain), timed here on a live child process
  raw JSON-RPC ping / stub      a third MCP server driven by a bare line client (no SDK client)
  ctx_read stub (daemon)        tools/call ctx_read of a file this conversation holds
  ctx_read full (daemon)        the same with fresh=true: the whole file comes back
  ctx_read stub (in-process)    a second MCP server with LEANCTX_DAEMON=0 (the fallback path)
Then, in the same run, the whole ctx_read-stub path as Claude Code sees it, gate + call, each call
under its own tool_use_id (noted by the gate, sent in `_meta["claudecode/toolUseId"]`):
  gate: command hook            the read gate's command from the settings.json init wrote, run as
                                Claude Code runs it (`sh -c`, the payload on stdin): a process start
  command gate + ctx_read stub  that gate, then the call on the bare JSON-RPC client: the host's
                                wait for one stub
  ctx_read stub (noted call)    the call alone, its note written beforehand in this process
Each timed call's tool_use entry is already in the session transcript, as it is once Claude Code
has flushed it (every 100 ms): a call that comes before its entry waits for it, up to that
interval (the transcript check, docs/cache.md), which these rows do not include.
  daemon socket, stub           the daemon's own stub floor, same rounds
  built-in Read: gate stub      the same command before Claude Code's own Read of that file (held
                                from the ctx_read calls: one ledger), which refuses it with the stub
                                (the hook asks the daemon over its socket): the host's whole wait
(leanctx answers no hook over the network: a 127.0.0.1 port is open to every local account.)
Target: stub round trip p50 under 2 ms; verified identity at most 0.2 ms added to the daemon's stub. Printed for both clients: the bare one (the round trip
through our stdio server, which is what a host's own client in another runtime waits for) and
the Python SDK's client (its own parsing and validation included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from leanctx.agents.base import SESSION_START, HookEvent
from leanctx.cache import client, peer
from leanctx.hooks import publish
from leanctx.hooks.hostproc import host_process, process_stat


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def make_project(root: Path, lines: int) -> Path:
    root.mkdir(parents=True)
    body = "".join(f"def function_{i}(x):\n    return x * {i} + {i % 7}  # line {i}\n\n" for i in range(lines // 3))
    path = root / "module.py"
    path.write_text(body)
    return path


def said(proj: Path, call_id: str) -> None:
    """What Claude Code writes to the session transcript for one call: its tool_use, then its
    result. The daemon credits a delivery only while the transcript shows it in the context, and
    a stub without a call id of its own is anchored at the transcript's newest entry."""
    t = proj / "t.jsonl"
    tip = None
    if t.exists():
        tip = json.loads(t.read_text().splitlines()[-1])["uuid"]
    with t.open("a", encoding="utf-8") as f:
        for kind, part in (("assistant", {"type": "tool_use", "id": call_id, "name": "mcp__leanctx__ctx_read"}),
                           ("user", {"type": "tool_result", "tool_use_id": call_id, "content": "..."})):
            f.write(json.dumps({"parentUuid": tip, "uuid": f"{call_id}-{kind}", "type": kind,
                                "message": {"content": [part]}}) + "\n")
            tip = f"{call_id}-{kind}"


def publish_host_record(data_dir: Path, proj: Path, conversation_id: str, host_pid: int | None = None) -> None:
    """A SessionStart record as the hook would write it under a host whose process is `host_pid`
    (default: us, the parent of the MCP servers we spawn)."""
    pid = host_pid or os.getpid()
    stat = process_stat(pid)
    host = {"pid": pid, "name": stat[0] if stat else None, "start_ticks": stat[2] if stat else None}
    ev = HookEvent("claude", "SessionStart", SESSION_START, conversation_id=conversation_id, session_id=conversation_id,
                   cwd=str(proj), transcript_path=str(proj / "t.jsonl"), source="startup")
    original = publish.host_process
    publish.host_process = lambda: host
    try:
        publish.publish(str(data_dir), ev)
    finally:
        publish.host_process = original


def server_params(env: dict[str, str], proj: Path, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "leanctx.cache.cli", "mcp"],
                                 env={**env, **extra}, cwd=str(proj))


class IdentityProbe:
    """A live child process connected to a socket of ours: the daemon's per-socket identity work
    (peer.peer_of + peer.identify) timed on it."""

    def __init__(self, tmp: Path) -> None:
        import socket

        path = str(tmp / "probe.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1)
        self.child = subprocess.Popen([sys.executable, "-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); "
                                       f"s.connect({path!r}); sys.stdin.read()"], stdin=subprocess.PIPE)
        self.conn, _ = self.listener.accept()

    def identify(self) -> None:
        who = peer.peer_of(self.conn)
        ident = peer.identify(who)
        if who is not None:
            who.close()
        if isinstance(ident, str):
            raise SystemExit(f"identity not verified: {ident}")

    def close(self) -> None:
        self.child.stdin.close()
        self.child.wait(10)
        self.conn.close()
        self.listener.close()


class RawClient:
    """A bare line-based JSON-RPC client on a third MCP server: the server's share of a round
    trip without the SDK client's own overhead (a host's client has its own, in another runtime)."""

    def __init__(self, env: dict[str, str], proj: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "leanctx.cache.cli", "mcp"], env=env, cwd=proj,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def call(self, method: str, params: dict | None = None) -> dict:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


async def timed(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    await fn()
    return (time.perf_counter() - t0) * 1000


async def run(runs: int, lines: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="leanctx-bench-"))
    home, proj = tmp / "home", tmp / "proj"
    home.mkdir()
    data_dir = home / ".local" / "share" / "leanctx"
    target = make_project(proj, lines)
    size = target.stat().st_size
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX", "CURSOR", "LEANCTX_"))}
    env.update(HOME=str(home), LEANCTX_HOME=str(data_dir), CKS_HOME=str(home / ".cks"))
    os.environ["LEANCTX_HOME"] = str(data_dir)
    # init writes the hook wrapper and the settings.json whose read-gate command is timed below
    subprocess.run([sys.executable, "-m", "leanctx", "init", "--agent", "claude"], env=env, check=True, capture_output=True)
    log = open(tmp / "daemon.log", "ab")
    daemon = subprocess.Popen([sys.executable, "-m", "leanctx.cache.cli", "serve"], env=env, stdin=subprocess.DEVNULL,
                              stdout=log, stderr=log)
    try:
        if not client.wait_for_socket(data_dir, 30):
            raise SystemExit(f"daemon did not start: {(tmp / 'daemon.log').read_text()}")
        publish_host_record(data_dir, proj, "bench-" + uuid.uuid4().hex[:8])
        # the daemon sees this process's own host (the nearest non-shell ancestor) behind our socket
        publish_host_record(data_dir, proj, "bench-direct-" + uuid.uuid4().hex[:8], host_process()["pid"])
        probe = IdentityProbe(tmp)
        facts = {"connection_id": uuid.uuid4().hex, "env": {}, "host_pid": os.getpid(),
                 "host_start_ticks": (process_stat(os.getpid()) or (None, None, None))[2]}
        direct = client.ServiceClient(data_dir)
        raw = RawClient(env, proj)
        async with stdio_client(server_params(env, proj)) as (r1, w1), ClientSession(r1, w1) as via_daemon, \
                stdio_client(server_params(env, proj, LEANCTX_DAEMON="0")) as (r2, w2), ClientSession(r2, w2) as local:
            await via_daemon.initialize()
            await local.initialize()
            kinds = {}
            for name, session in (("daemon", via_daemon), ("in-process", local)):
                said(proj, f"toolu_first_{name}")
                first = await session.call_tool("ctx_read", {"path": "module.py"},
                                                meta={"claudecode/toolUseId": f"toolu_first_{name}"})
                second = await session.call_tool("ctx_read", {"path": "module.py"})
                assert not first.is_error and not second.is_error, (first, second)
                kinds[name] = (len(first.content[0].text), second.content[0].text)
            said(proj, "toolu_first_direct")
            direct.request("read", facts, {"path": str(target), "call_id": "toolu_first_direct"})
            again = direct.request("read", facts, {"path": str(target)})
            if again.get("kind") != "stub":
                raise SystemExit(f"the daemon socket row would not time a stub: {again.get('kind')}")

            def plain() -> None:
                with open(target, encoding="utf-8") as f:
                    f.read()

            def sock_stub() -> None:
                direct.request("read", facts, {"path": str(target)})

            async def sync(fn) -> None:  # noqa: ANN001
                fn()

            # every ctx_read below comes as Claude Code sends it: under its own call id, whose
            # tool_use is in the transcript already (written outside the timed call); a call
            # without one would be anchored at the newest entry, and a fresh read without one
            # leaves a delivery the transcript cannot confirm (no stub after it)
            ids = iter(range(10**9))

            def meta() -> dict:
                cid = f"toolu_row_{next(ids)}"
                said(proj, cid)
                return {"claudecode/toolUseId": cid}

            raw.call("tools/call", {"name": "ctx_read", "arguments": {"path": "module.py"}, "_meta": meta()})

            rows = {
                "open().read() (floor)": lambda m: sync(plain),
                "MCP ping (transport floor)": lambda m: via_daemon.send_ping(),
                "daemon socket, stub": lambda m: sync(sock_stub),
                "verified identity (per socket)": lambda m: sync(probe.identify),
                "raw JSON-RPC ping": lambda m: sync(lambda: raw.call("ping")),
                "raw JSON-RPC ctx_read stub": lambda m: sync(lambda: raw.call(
                    "tools/call", {"name": "ctx_read", "arguments": {"path": "module.py"}, "_meta": m})),
                "ctx_read stub (daemon)": lambda m: via_daemon.call_tool("ctx_read", {"path": "module.py"}, meta=m),
                "ctx_read full (daemon)": lambda m: via_daemon.call_tool("ctx_read", {"path": "module.py", "fresh": True},
                                                                         meta=m),
                "ctx_read stub (in-process)": lambda m: local.call_tool("ctx_read", {"path": "module.py"}, meta=m),
            }
            for fn in rows.values():  # warm-up
                for _ in range(20):
                    await fn(meta())
            samples: dict[str, list[float]] = {name: [] for name in rows}
            for _ in range(runs):
                for name, fn in rows.items():
                    m = meta()
                    samples[name].append(await timed(lambda: fn(m)))
            stub_daemon = await via_daemon.call_tool("ctx_read", {"path": "module.py"}, meta=meta())
            # last: once this host's record holds notes, a call without one (the rows above) gets content
            gate_samples = gate_rows(home, data_dir, env, proj, raw, direct, facts, target, runs)
            status = direct.request("status")
            counted = direct.request("stats")  # which tokenizer the daemon counts with, in words
            stub_read = direct.request("read", facts, {"path": str(target)})
            full_read = direct.request("read", facts, {"path": str(target), "fresh": True})
        direct.close()
        raw.close()
        probe.close()
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"ctx_read latency, {runs} interleaved runs per row, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, file {lines} lines / {size} bytes")
    print(f"stub text: {stub_daemon.content[0].text[:300]!r}")
    if not stub_daemon.content[0].text.startswith("[unchanged]"):
        raise SystemExit("the ctx_read rows did not time a stub")
    print(f"full text: {kinds['daemon'][0]} chars; daemon status: {status['connections']}")
    print(f"tokens: full {full_read['tokens_sent']}, stub {stub_read['tokens_sent']} ({stub_read['kind']}); "
          f"{counted['tokenizer_note']}")
    floor = pct(samples["MCP ping (transport floor)"], 0.5)
    print(f"{'row':<32} {'p50 ms':>8} {'p95 ms':>8} {'p50 / ping':>11}")
    for name, values in samples.items():
        p50 = pct(values, 0.5)
        print(f"{name:<32} {p50:8.3f} {pct(values, 0.95):8.3f} {p50 / floor:10.2f}x")
    print()
    print("the whole ctx_read-stub path as Claude Code sees it (gate + call), same run:")
    print(f"{'row':<40} {'p50 ms':>8} {'p95 ms':>8}")
    for name, values in gate_samples.items():
        print(f"{name:<40} {pct(values, 0.5):8.3f} {pct(values, 0.95):8.3f}")
    whole, gate = pct(gate_samples["command gate + ctx_read stub"], 0.5), pct(gate_samples["gate: command hook"], 0.5)
    print(f"whole path (command gate + stub) p50 {whole:.3f} ms: the gate {gate:.3f} ms, the noted call "
          f"{pct(gate_samples['ctx_read stub (noted call)'], 0.5):.3f} ms, the daemon's own stub "
          f"{pct(gate_samples['daemon socket, stub'], 0.5):.3f} ms")
    for row in ("raw JSON-RPC ctx_read stub", "ctx_read stub (daemon)"):
        p50 = pct(samples[row], 0.5)
        print(f"target: {row} p50 < 2 ms: {'met' if p50 < 2 else 'NOT met'} ({p50:.3f} ms)")
    ident, stub = pct(samples["verified identity (per socket)"], 0.5), pct(samples["daemon socket, stub"], 0.5)
    print(f"verified identity: {ident:.3f} ms once per accepted socket (an MCP server keeps its sockets: "
          f"0 per call after that), {ident / stub:.2f}x the daemon's stub ({stub:.3f} ms); "
          f"target <= 0.2 ms added: {'met' if ident <= 0.2 else 'NOT met'}")


def read_gate_command(home: Path) -> str:
    """The read gate's command as init wrote it into Claude Code's settings.json."""
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    for group in settings["hooks"]["PreToolUse"]:
        for handler in group["hooks"]:
            if handler.get("type") == "command" and "--read-gate" in handler.get("command", ""):
                return handler["command"]
    raise SystemExit("init wrote no read-gate command into settings.json")


def gate_rows(home: Path, data_dir: Path, env: dict, proj: Path, raw: RawClient, direct, facts: dict, target: Path,  # noqa: ANN001
              runs: int) -> dict[str, list[float]]:
    """Gate + call, interleaved round by round (see the module docstring)."""
    from leanctx.agents import claude

    conversation = "bench-gate-" + uuid.uuid4().hex[:8]
    publish_host_record(data_dir, proj, conversation)  # this process is the host: it runs the gate and spawned the servers
    command = read_gate_command(home)
    counter = iter(range(10**9))

    def payload() -> tuple[str, bytes]:
        call_id = f"toolu_bench_{next(counter)}"
        body = json.dumps({"session_id": conversation, "transcript_path": str(proj / "t.jsonl"), "cwd": str(proj),
                           "hook_event_name": "PreToolUse", "tool_name": "mcp__leanctx__ctx_read",
                           "tool_input": {"path": "module.py"}, "tool_use_id": call_id}).encode()
        return call_id, body

    def call(call_id: str) -> str:
        answer = raw.call("tools/call", {"name": "ctx_read", "arguments": {"path": "module.py"},
                                         "_meta": {"claudecode/toolUseId": call_id}})
        return answer["result"]["content"][0]["text"]

    def command_gate(body: bytes) -> None:
        subprocess.run(["/bin/sh", "-c", command], input=body, env=env, cwd=proj, check=True, capture_output=True)

    def note_here(body: bytes) -> None:
        publish.note_read_call(str(data_dir), claude.AGENT.normalize("PreToolUse", json.loads(body)))

    # the gate notes the call, and the call is then a stub; anything else would time the wrong path
    cid, body = payload()
    command_gate(body)
    said(proj, cid)
    call(cid)  # the conversation's first read: the content
    cid, body = payload()
    command_gate(body)
    if not call(cid).startswith("[unchanged]"):
        raise SystemExit("after the command gate the call was not a stub")
    total = max(4, len(target.read_text(encoding="utf-8").splitlines()))
    span, shift = total // 2, total // 4  # windows 1..span and shift+1..shift+span: neither inside the other

    def read_payload() -> tuple[str, bytes]:
        # two windows taking turns, neither inside the other: the same refusal asked for again
        # would be let through (the no-loop rule), which is not the path timed here
        n = next(counter)
        call_id = f"toolu_bench_{n}"
        body = json.dumps({"session_id": conversation, "transcript_path": str(proj / "t.jsonl"), "cwd": str(proj),
                           "hook_event_name": "PreToolUse", "tool_name": "Read",
                           "tool_input": {"file_path": str(proj / "module.py"), "offset": 1 + n % 2 * shift, "limit": span},
                           "tool_use_id": call_id}).encode()
        return call_id, body

    def builtin_gate(body: bytes) -> str:
        return subprocess.run(["/bin/sh", "-c", command], input=body, env=env, cwd=proj, check=True,
                              capture_output=True).stdout.decode()

    samples: dict[str, list[float]] = {name: [] for name in (
        "daemon socket, stub", "ctx_read stub (noted call)", "gate: command hook", "command gate + ctx_read stub",
        "built-in Read: gate stub")}
    for _ in range(runs):
        t0 = time.perf_counter()
        direct.request("read", facts, {"path": str(target)})
        samples["daemon socket, stub"].append((time.perf_counter() - t0) * 1000)
        cid, body = payload()
        note_here(body)
        said(proj, cid)  # the call's tool_use is in the transcript, as once Claude Code has flushed it
        t0 = time.perf_counter()
        text = call(cid)
        samples["ctx_read stub (noted call)"].append((time.perf_counter() - t0) * 1000)
        if not text.startswith("[unchanged]"):
            raise SystemExit(f"a noted call was not a stub: {text[:120]!r}")
        cid, body = payload()
        said(proj, cid)
        t0 = time.perf_counter()
        command_gate(body)
        t1 = time.perf_counter()
        text = call(cid)
        t2 = time.perf_counter()
        if not text.startswith("[unchanged]"):
            raise SystemExit(f"command gate: the call was not a stub: {text[:120]!r}")
        samples["gate: command hook"].append((t1 - t0) * 1000)
        samples["command gate + ctx_read stub"].append((t2 - t0) * 1000)
        cid, body = read_payload()
        said(proj, cid)  # the host writes the call before it runs the hook
        t0 = time.perf_counter()
        out = builtin_gate(body)
        samples["built-in Read: gate stub"].append((time.perf_counter() - t0) * 1000)
        if "[unchanged]" not in out:
            raise SystemExit(f"the built-in Read gate did not refuse with the stub: {out[:160]!r}")
    return samples


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--lines", type=int, default=2000)
    args = ap.parse_args()
    asyncio.run(run(args.runs, args.lines))


if __name__ == "__main__":
    main()
