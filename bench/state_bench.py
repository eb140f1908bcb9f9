"""Conversation-state store: latency, lost updates under contention, and crash safety.

For the file backend and Redis (a private redis-server on 127.0.0.1, started here; skipped with a
note when redis-server is absent), all in one run so the figures share the machine's
current speed:
1. p50/p95 of one inbound+reply cycle (two compare-and-swap updates, a 10-turn thread), with the
   hook's stdlib validator and with jsonschema (the CLI/API path), interleaved round-robin with a
   baseline of the same two updates done bare: json read + atomic write (temp, fsync, rename,
   fsync of the folder), or GET + SET for Redis;
2. 8 processes x 500 turns against one user: lost updates (must be 0) and turns per second;
3. a crash loop: a writer killed with SIGKILL at a random point of its update loop, 1,000 times:
   states that fail to parse or validate afterwards (must be 0), and how many kills landed
   mid-write (a temp file left behind).

Usage: python bench/state_bench.py [--runs N] [--procs N] [--turns N] [--kills N]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from tests.state.worker import kill_a_writer_mid_update  # noqa: E402  (the writers the state tests use too)

WORKER = os.path.join(REPO, "tests", "state", "worker.py")
TEXT_USER = "How do I point the bot's webhook at the VPS, and do I need a certificate for it? " * 2
TEXT_AGENT = "Use setWebhook with your HTTPS URL; Telegram needs a valid certificate (Let's Encrypt works). " * 3


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- selection of backend and validator ---------------------------------------------------------


def select_store(url: str | None, fast: bool) -> None:
    from leanctx.state import validate

    if url:
        os.environ["LEANCTX_STATE_URL"] = url
    else:
        os.environ.pop("LEANCTX_STATE_URL", None)
    validate.FAST = fast


# --- 1. latency -----------------------------------------------------------------------------------


def cycle(user: str) -> None:
    from leanctx.state import api

    api.inbound(TEXT_USER, user=user, session_id="bench")
    api.reply(TEXT_AGENT, user=user, session_id="bench")


def bare_file_cycle(path: str) -> None:
    """The floor: the same two read-modify-writes with nothing but json and an atomic write."""
    folder = os.path.dirname(path)
    for text in (TEXT_USER, TEXT_AGENT):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        doc["recent_turns"] = (doc["recent_turns"] + [{"role": "user", "text": text, "ts": "2026-01-01T00:00:00.000Z"}])[-10:]
        doc["revision"] += 1
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, separators=(",", ":")))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dfd = os.open(folder, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)


def bare_redis_cycle(client, key: str) -> None:  # type: ignore[no-untyped-def]
    """The floor for Redis: GET, json, SET on the same client, no WATCH, no validation."""
    for text in (TEXT_USER, TEXT_AGENT):
        doc = json.loads(client.call("GET", key))
        doc["recent_turns"] = (doc["recent_turns"] + [{"role": "user", "text": text, "ts": "2026-01-01T00:00:00.000Z"}])[-10:]
        doc["revision"] += 1
        client.call("SET", key, json.dumps(doc, separators=(",", ":")))


def latency(runs: int, redis_url: str | None) -> list[tuple[str, list[float]]]:
    from leanctx.state import api, slug

    rows: dict[str, callable] = {}  # type: ignore[valid-type]
    for name, url, fast in [("file, stdlib validator (hook path)", None, True),
                            ("file, jsonschema (CLI/API path)", None, False),
                            ("redis, stdlib validator (hook path)", redis_url, True),
                            ("redis, jsonschema (CLI/API path)", redis_url, False)]:
        if name.startswith("redis") and not redis_url:
            continue
        user = "lat-" + name.split(",")[0] + ("-fast" if fast else "-full")
        select_store(url, fast)
        for _ in range(6):  # a steady 10-turn thread
            cycle(user)
        rows[name] = lambda user=user, url=url, fast=fast: (select_store(url, fast), cycle(user))
    select_store(None, True)
    state_path = os.path.join(slug.user_dir("lat-file-fast"), "conversation-state.json")
    bare_path = os.path.join(os.path.dirname(state_path), "..", "bare.json")
    shutil.copyfile(state_path, bare_path)
    rows = {"file, bare json read + atomic write (floor)": lambda: bare_file_cycle(bare_path), **rows}
    if redis_url:
        from leanctx.state.resp import Client

        client = Client(redis_url)
        select_store(redis_url, True)
        client.call("SET", "bench:bare", json.dumps(api.show(user="lat-redis-fast")))
        rows["redis, bare GET + SET (floor)"] = lambda: bare_redis_cycle(client, "bench:bare")
    samples: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(runs):
        for name, fn in rows.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - t0) * 1000)
    select_store(None, None)  # type: ignore[arg-type]
    return list(samples.items())


# --- 2. contention ------------------------------------------------------------------------------


def contention(procs: int, turns: int, url: str | None) -> dict:
    from leanctx.state import api

    select_store(url, True)
    env = dict(os.environ, LEANCTX_FAST_PATH="1")
    if url:
        env["LEANCTX_STATE_URL"] = url
    start_at = time.time() + 2.0
    children = [subprocess.Popen([sys.executable, WORKER, f"w{n}", str(turns), str(start_at), "contended"],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(procs)]
    revisions: list[int] = []
    end = start_at
    for child in children:
        out, err = child.communicate(timeout=600)
        if child.returncode != 0:
            raise SystemExit(f"a writer failed: {err[-2000:]}")
        result = json.loads(out)
        revisions += result["revisions"]
        end = max(end, result["end"])
    final = api.show(user="contended")
    expected = procs * turns
    return {"expected": expected, "turn_count": final["turn_count"], "revision": final["revision"],
            "lost": expected - final["turn_count"], "duplicate_revisions": len(revisions) - len(set(revisions)),
            "seconds": end - start_at, "turns_per_s": expected / (end - start_at)}


# --- 3. crash loop ------------------------------------------------------------------------------


def crash_loop(kills: int, url: str | None) -> dict:
    from leanctx.state import api, backend, filestore, slug, validate

    select_store(url, True)
    store = backend.get_backend()
    api.inbound("seed", user="crash")
    folder = slug.user_dir("crash")
    rng = random.Random(1)
    damaged = mid_write = 0
    for _ in range(kills):
        kill_a_writer_mid_update("crash", rng)
        if url:
            raw = store.client.call("GET", store.key("crash"))  # type: ignore[attr-defined]
        else:
            with open(os.path.join(folder, filestore.STATE), "rb") as f:
                raw = f.read()
            mid_write += any(n.startswith(filestore.TMP_PREFIX) for n in os.listdir(folder))
        try:
            state = json.loads(raw)
            validate.validate_stdlib(state)
            validate.validate_jsonschema(state)
        except Exception:  # noqa: BLE001 - any failure to parse or validate counts
            damaged += 1
    final = api.show(user="crash")
    return {"kills": kills, "damaged": damaged, "mid_write": mid_write if not url else None,
            "quarantined": len(store.corrupt_files("crash")), "final_revision": final["revision"]}


# --- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="inbound+reply cycles per latency row")
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--turns", type=int, default=500, help="turns per process in the contention test")
    parser.add_argument("--kills", type=int, default=1000)
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="leanctx-state-bench-")
    os.environ["CKS_HOME"] = os.path.join(workdir, "cks")
    os.environ.pop("CKS_ACTIVE_USER", None)
    from bench.support.localredis import LocalRedis, server_path

    server = None
    note = ""
    if server_path() is None:
        note = "redis-server is not installed (apt-get install redis-server): Redis rows skipped"
    try:
        if not note:
            server = LocalRedis()
            server.start()
        backends = [("file", None)] + ([("redis", server.url)] if server else [])
        print(f"conversation-state bench, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
              f"state under {workdir}" + (f", redis-server {server.url}" if server else ""))
        if note:
            print(f"note: {note}")

        print(f"\n1. one inbound+reply cycle (two compare-and-swap updates, 10-turn thread), "
              f"{args.runs} interleaved runs per row")
        rows = latency(args.runs, server.url if server else None)
        floors = {name.split(",")[0]: percentile(v, 0.5) for name, v in rows if "floor" in name}
        print(f"   {'row':46} {'p50 ms':>8} {'p95 ms':>8} {'p50 / floor':>12}")
        for name, values in rows:
            p50 = percentile(values, 0.5)
            print(f"   {name:46} {p50:8.2f} {percentile(values, 0.95):8.2f} {p50 / floors[name.split(',')[0]]:11.2f}x")

        print(f"\n2. {args.procs} processes x {args.turns} turns against one user (hook validator, separate processes)")
        print(f"   {'backend':8} {'turns':>7} {'final turns':>12} {'lost':>5} {'dup revs':>9} {'seconds':>8} {'turns/s':>8}")
        all_ok = True
        for name, url in backends:
            r = contention(args.procs, args.turns, url)
            all_ok &= r["lost"] == 0 and r["duplicate_revisions"] == 0 and r["revision"] == r["expected"]
            print(f"   {name:8} {r['expected']:7d} {r['turn_count']:12d} {r['lost']:5d} {r['duplicate_revisions']:9d} "
                  f"{r['seconds']:8.2f} {r['turns_per_s']:8.0f}")

        print(f"\n3. crash loop: a writer killed with SIGKILL mid-update, {args.kills} times")
        print(f"   {'backend':8} {'kills':>6} {'killed mid-write':>17} {'damaged':>8} {'quarantined':>12} {'final revision':>15}")
        for name, url in backends:
            r = crash_loop(args.kills, url)
            all_ok &= r["damaged"] == 0 and r["quarantined"] == 0
            mid = "n/a (EXEC)" if r["mid_write"] is None else str(r["mid_write"])
            print(f"   {name:8} {r['kills']:6d} {mid:>17} {r['damaged']:8d} {r['quarantined']:12d} {r['final_revision']:15d}")
        print("\nlost updates 0 and damaged states 0 on every backend: " + ("met" if all_ok else "NOT met"))
        if not all_ok:
            sys.exit(1)
    finally:
        if server:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
