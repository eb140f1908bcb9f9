"""MCP start-up as a host sees it, and what the tool definitions cost the model.

Times, from spawning the command init registers at user level (`<data dir>/bin/leanctx-hook mcp`:
the wrapper, starting an isolated Python) to the `initialize`
response and to the `tools/list` response, with no daemon running (cold: the server starts it)
and with one up (warm), beside a minimal standard-library MCP server (bench/support/minimal_mcp.py)
spawned by the same interpreter, byte code cached as after a pip install. Rows are interleaved round by round, so machine noise hits them
alike; ratios are given p50/p50 and as the median of the per-round ratios. Everything runs in a
throw-away HOME, data dir and project. Targets: p50 <= 100 ms and <= 1.5x the minimal
server, cold and warm.

Then the tokens the model pays per session for each profile: the tools/list answer plus the read
rule init installs (counted with the tokenizer leanctx uses, cl100k_base). Target: <= 300 for
the coding profile.

    python bench/mcp_startup.py [--runs 20] [--old-src DIR]

--old-src DIR adds rows for another checkout's server (e.g. the earlier server built on the `mcp` SDK), run
from DIR's sources by this interpreter, for a before/after table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MINIMAL = REPO / "bench" / "support" / "minimal_mcp.py"
TARGET_MS, TARGET_RATIO, TARGET_TOKENS = 100.0, 1.5, 300

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


def handshake(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """(ms to the initialize response, ms to the tools/list response) from spawning `cmd`."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(line(INIT))
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        t_init = time.perf_counter()
        assert answer.get("id") == 1 and "result" in answer, answer
        proc.stdin.write(line(INITIALIZED) + line(LIST))
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        t_list = time.perf_counter()
        assert answer.get("id") == 2 and answer["result"]["tools"], answer
    finally:
        proc.stdin.close()
        proc.wait(30)
        proc.stdout.close()
    return (t_init - started) * 1000, (t_list - started) * 1000


def daemon_pid(data: Path) -> int | None:
    try:
        return int(json.loads((data / "leanctx.pid").read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stop_daemon(data: Path) -> None:
    """No daemon for this data dir when it returns (SIGTERM, then SIGKILL after 10 s)."""
    pid = daemon_pid(data)
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    for name in ("leanctx.sock", "leanctx.pid"):
        (data / name).unlink(missing_ok=True)


def wait_daemon(data: Path, env: dict) -> None:
    """A daemon answers for this data dir (started by the last cold row, or now)."""
    from leanctx.cache import client

    if not client.wait_for_socket(data, 0.5):
        subprocess.run([sys.executable, "-m", "leanctx", "serve", "--detach"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert client.wait_for_socket(data, 15), "the daemon did not come up"


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


class Row:
    def __init__(self, name: str, cmd: list[str], env: dict, data: Path | None = None, cold: bool = False) -> None:
        self.name, self.cmd, self.env, self.data, self.cold = name, cmd, env, data, cold
        self.init: list[float] = []
        self.list: list[float] = []

    def prepare(self) -> None:
        if self.data is not None:
            stop_daemon(self.data) if self.cold else wait_daemon(self.data, self.env)


def token_table() -> list[tuple[str, str, int, int, int]]:
    """(profile, host, tools/list tokens, rule tokens, total) for every host init writes the read
    rule for (at user level; the project text differs only by the command's spelling)."""
    from leanctx import agents
    from leanctx.cache import tokens
    from leanctx.cache.mcpserver import PROFILES, tools_for
    from leanctx.installer import instructions

    out = []
    for profile in PROFILES:
        listed = tokens.count(json.dumps({"tools": tools_for(profile)}, separators=(",", ":")))
        for agent in agents.all_agents():
            located = agent.rules_path(Path.home(), None) or agent.rules_path(Path.home(), Path.cwd())
            if located is None:
                continue
            path, kind = located
            rule = instructions.render(instructions.CTX_READ, path, kind, None, "leanctx", agent.read_rule_note("leanctx"))
            n = tokens.count(rule)
            out.append((profile, agent.name, listed, n, listed + n))
    return out


def write_wrapper(data: Path) -> None:
    """The hook wrapper as init writes it (0700 data dir, executable script)."""
    from leanctx.installer import wrapper

    path = wrapper.wrapper_path(data)
    path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    data.chmod(0o700)
    path.write_text(wrapper.render(data))
    path.chmod(0o755)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--old-src", type=Path, help="also time the server of this checkout (its sources on PYTHONPATH)")
    opts = ap.parse_args()

    from leanctx.cache import tokens
    from leanctx.installer import mcpreg

    with tempfile.TemporaryDirectory(prefix="leanctx-mcp-startup-") as scratch:
        root = Path(scratch)
        project = root / "proj"
        project.mkdir()
        base_env = {k: v for k, v in os.environ.items() if not k.startswith(("LEANCTX_", "CLAUDE", "CODEX"))}
        base_env["HOME"] = str(root / "home")
        # Byte code cached as on a pip install (which compiles it), kept out of every source tree;
        # the warm-up rounds fill it (the minimal server, a script, is compiled on every run).
        base_env.pop("PYTHONDONTWRITEBYTECODE", None)
        base_env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        rows = [Row("minimal stdlib MCP server (floor)", [sys.executable, str(MINIMAL)], base_env)]
        impls = [("leanctx mcp", dict(base_env), root / "data")]
        if opts.old_src:
            old_env = dict(base_env, PYTHONPATH=str(opts.old_src.resolve()))
            impls.append((f"old ({opts.old_src.name})", old_env, root / "data-old"))
        for label, env, data in impls:
            env["LEANCTX_HOME"] = str(data)
            if label == "leanctx mcp":  # the entry init writes: the data dir's wrapper
                command, args = mcpreg.server_command(data_dir=data)
                write_wrapper(data)
            else:  # another checkout, by the form it registered then
                command, args = sys.executable, ["-m", "leanctx", "mcp"]
            rows.append(Row(f"{label}, cold (no daemon)", [command, *args], env, data, cold=True))
            rows.append(Row(f"{label}, warm (daemon up)", [command, *args], env, data))
        for i in range(opts.warmup + opts.runs):
            for row in rows:
                row.prepare()
                t_init, t_list = handshake(row.cmd, row.env, project)
                if i >= opts.warmup:
                    row.init.append(t_init)
                    row.list.append(t_list)
        for _, _, data in impls:
            stop_daemon(data)

    floor = rows[0]
    print(f"MCP start-up, {opts.runs} interleaved rounds (+{opts.warmup} warm-up), Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs; ms from spawn")
    print(f"{'row':44} {'init p50':>9} {'p95':>7} {'list p50':>9} {'p95':>7} {'init x floor':>13} {'list x floor':>13}")
    verdicts = []
    for row in rows:
        cells = [f"{pct(row.init, .5):9.1f}", f"{pct(row.init, .95):7.1f}", f"{pct(row.list, .5):9.1f}", f"{pct(row.list, .95):7.1f}"]
        if row is floor:
            cells += ["", ""]
        else:
            for mine, base in ((row.init, floor.init), (row.list, floor.list)):
                paired = statistics.median(a / b for a, b in zip(mine, base))
                cells.append(f"{pct(mine, .5) / pct(base, .5):5.2f} ({paired:4.2f})")
        print(f"{row.name:44} " + " ".join(f"{c:>13}" if j >= 4 else c for j, c in enumerate(cells)))
        if row.name.startswith("leanctx mcp"):
            for what, values, base in (("initialize", row.init, floor.init), ("tools/list", row.list, floor.list)):
                p50, ratio = pct(values, .5), pct(values, .5) / pct(base, .5)
                ok = p50 <= TARGET_MS and ratio <= TARGET_RATIO
                verdicts.append(f"  {'PASS' if ok else 'FAIL'} {row.name}, {what}: p50 {p50:.1f} ms (target <= {TARGET_MS:.0f}), "
                                f"{ratio:.2f}x the minimal server (target <= {TARGET_RATIO})")
    print("(ratio columns: p50/p50, and in brackets the median of the per-round ratios)")
    print("targets:")
    print("\n".join(verdicts))

    print(f"\nTokens per session ({tokens.name()}): tools/list + the read rule init installs")
    print(f"{'profile':8} {'host':10} {'tools/list':>10} {'rule':>6} {'total':>6}")
    for profile, host, listed, rule, total in token_table():
        mark = f"  {'PASS' if total <= TARGET_TOKENS else 'FAIL'} (target <= {TARGET_TOKENS})" if profile == "coding" else ""
        print(f"{profile:8} {host:10} {listed:10} {rule:6} {total:6}{mark}")


if __name__ == "__main__":
    main()
