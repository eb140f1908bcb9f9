"""Who runs a loopback Redis: the cost of the check on a new connection, netlink vs /proc.

A private redis-server on 127.0.0.1 (run as uid 4242 through setpriv when we are root, so the
check has another owner to name), and N extra idle loopback connections to fill the machine's
TCP table (what the /proc scan reads line by line; netlink looks one 4-tuple up). Interleaved
round-robin in one run, per new connection: the plain connect; connect + the check through
NETLINK_SOCK_DIAG (what runs on Linux); connect + the check through the /proc/net/tcp(6) scan (the
fallback). p50/p95 in ms, and the TCP socket count the kernel showed.

Usage: python bench/peer_owner.py [--runs N] [--extra N ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from bench.support.localredis import LocalRedis, server_path  # noqa: E402
from leanctx.state import peerowner  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def tcp_sockets() -> int:
    total = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if os.path.exists(name):
            with open(name, "rb") as f:
                total += f.read().count(b"\n") - 1
    return total


def filler(count: int) -> list[socket.socket]:
    """`count` idle loopback connections (2 sockets each, plus a listener)."""
    if not count:
        return []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * count + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(4096)
    held = [lst]
    for _ in range(count):
        c = socket.create_connection(lst.getsockname())
        a, _ = lst.accept()
        held += [c, a]
    return held


def measure(port: int, runs: int) -> dict[str, list[float]]:
    real_diag = peerowner._diag_server_uids
    where = f"127.0.0.1:{port}"
    times: dict[str, list[float]] = {k: [] for k in ("connect", "connect+netlink", "connect+proc")}
    verdicts = set()
    for i in range(runs + 20):
        for kind in times:
            peerowner._diag_server_uids = (lambda *a: None) if kind == "connect+proc" else real_diag
            t0 = time.perf_counter()
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.connect(("127.0.0.1", port))
            verdict = None if kind == "connect" else peerowner.problem(s, where, unix=False)
            elapsed = time.perf_counter() - t0
            s.close()
            if kind != "connect":
                verdicts.add(verdict)
            if i >= 20:  # warm-up
                times[kind].append(elapsed * 1000)
    peerowner._diag_server_uids = real_diag
    assert len(verdicts) == 1, verdicts  # both paths refused (or accepted) alike
    return times


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--extra", type=int, nargs="+", default=[0, 3000],
                    help="idle loopback connections to add (2 sockets each), one round per value")
    args = ap.parse_args()
    exe = server_path()
    if not exe:
        print("redis-server is not installed: nothing measured")
        return 0
    as_uid = 4242 if os.geteuid() == 0 and shutil.which("setpriv") else None
    with_redis = LocalRedis(exe, as_uid=as_uid)
    with_redis.start()
    try:
        print(f"server run by uid {as_uid if as_uid is not None else os.geteuid()}; we are uid {os.geteuid()}; "
              f"{args.runs} connections per column, interleaved")
        print(f"{'tcp sockets':>12} | {'connect p50/p95':>16} | {'+netlink p50/p95':>17} | {'+/proc p50/p95':>16}")
        held: list[socket.socket] = []
        for extra in args.extra:
            held += filler(max(0, extra - (len(held) // 2)))
            t = measure(with_redis.port, args.runs)
            cells = [f"{percentile(t[k], .5):.3f}/{percentile(t[k], .95):.3f}" for k in t]
            print(f"{tcp_sockets():>12} | {cells[0]:>16} | {cells[1]:>17} | {cells[2]:>16}")
        for s in held:
            s.close()
    finally:
        with_redis.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
