"""Memory of the cache daemon holding many files, beside the bytes it holds.

Everything real: a temporary HOME and data dir, the daemon (`serve`) as a subprocess, and a
reader process (explicit LEANCTX_SCOPE, so every read is recorded for one conversation) that
reads N files of S bytes through the daemon's socket. The daemon's resident memory (RSS, from
its own `status`) is taken when it is warm but holds nothing (one small read done: tokenizer and
code loaded), then after the N reads; the growth is printed beside the file text it holds.

    python bench/daemon_memory.py [--files 1000] [--kib 40]

Target: growth at most 3x the held bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from leanctx.cache import client

TARGET_RATIO = 3.0

READER = r"""
import sys
from leanctx.cache import client
from leanctx.cache.scope import Connection
base, n = sys.argv[1], int(sys.argv[2])
c = client.ServiceClient(base, timeout=60)
facts = Connection.capture().to_dict()
for i in range(n):
    r = c.request("read", facts, {"path": f"f{i:05d}.py"})
    if r.get("kind") != "full":
        raise SystemExit(f"f{i:05d}.py: {r.get('kind')} {r.get('text', '')[:200]}")
c.close()
"""


def make_files(root: Path, files: int, size: int, text: str) -> int:
    """`files` distinct Python-like files of `size` bytes; returns the total bytes. `text`:
    "ascii", or "emoji" (one emoji in a comment on the first line, as much modern code has: a
    Python str of such a file takes 4 bytes a character, its UTF-8 bytes about 1)."""
    root.mkdir(parents=True)
    total = 0
    for i in range(files):
        first = "# status: done \u2705\n" if text == "emoji" else "# status: done\n"
        lines, n = [first], len(first.encode())
        j = 0
        while n < size:
            line = f"def f{i}_{j}(value, other):  # file {i} line {j}\n    return value * {j} + other - {i}\n"
            lines.append(line)
            n += len(line)
            j += 1
        data = "".join(lines).encode()[:size]
        (root / f"f{i:05d}.py").write_bytes(data)
        total += len(data)
    return total


def status(base: Path) -> dict:
    answer = client.ServiceClient(base, timeout=30).request("status")
    assert isinstance(answer, dict)
    return answer


def read_all(env: dict, proj: Path, base: Path, count: int) -> None:
    subprocess.run([sys.executable, "-c", READER, str(base), str(count)], env=env, cwd=proj, check=True, timeout=900)


def measure(files: int, kib: int, text: str) -> dict:
    """One daemon, from empty to holding `files` files: its RSS before and after, and what it holds."""
    tmp = Path(tempfile.mkdtemp(prefix="leanctx-mem-"))
    daemon = None
    try:
        home, base, proj = tmp / "home", tmp / "data", tmp / "proj"
        home.mkdir()
        file_bytes = make_files(proj, files, kib * 1024, text)
        (proj / "warm.py").write_text("x = 1\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX", "CURSOR", "LEANCTX_"))}
        env.update(HOME=str(home), LEANCTX_HOME=str(base), LEANCTX_IDLE_EXIT="0", PYTHONUNBUFFERED="1")
        daemon = subprocess.Popen([sys.executable, "-m", "leanctx.cache.cli", "serve"], env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not client.wait_for_socket(base, 60):
            raise SystemExit("the daemon did not come up")
        reader_env = dict(env, LEANCTX_SCOPE="bench-memory")
        subprocess.run([sys.executable, "-c", READER.replace('f"f{i:05d}.py"', '"warm.py"'), str(base), "1"],
                       env=reader_env, cwd=proj, check=True, timeout=300)
        empty = status(base)["memory"]
        read_all(reader_env, proj, base, files)
        full = status(base)
        mem = full["memory"]
        growth = mem["rss_bytes"] - empty["rss_bytes"]
        held = mem["held_bytes"]
        return {"text": text, "files": files, "file_bytes": file_bytes, "held_bytes": held, "held_files": mem["held_files"],
                "rss_empty": empty["rss_bytes"], "rss_full": mem["rss_bytes"], "rss_growth": growth,
                "growth_over_held": round(growth / held, 3) if held else None, "target": TARGET_RATIO,
                "entries": full.get("entries")}
    finally:
        if daemon is not None and daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                daemon.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--kib", type=int, default=40)
    ap.add_argument("--text", choices=("ascii", "emoji", "both"), default="both",
                    help="file text: plain ASCII, one emoji per file, or a run of each (default)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    kinds = ("ascii", "emoji") if args.text == "both" else (args.text,)
    rows = [measure(args.files, args.kib, kind) for kind in kinds]
    ok = all(r["growth_over_held"] is not None and r["growth_over_held"] <= TARGET_RATIO for r in rows)
    if args.json:
        print(json.dumps({"python": sys.version.split()[0], "rows": rows}, indent=2))
        return 0 if ok else 1
    mib = 1 << 20
    print(f"leanctx daemon memory: {args.files} files of {args.kib} KiB read by one conversation, one daemon per row "
          f"(python {sys.version.split()[0]})")
    print(f"  {'files':<8} {'on disk':>9} {'held':>9} {'RSS empty':>10} {'RSS full':>9} {'growth':>9}  growth/held (target <= {TARGET_RATIO:g}x)")
    for r in rows:
        ratio = r["growth_over_held"]
        verdict = "met" if ratio is not None and ratio <= TARGET_RATIO else "MISSED"
        print(f"  {r['text']:<8} {r['file_bytes'] / mib:>5.1f} MiB {r['held_bytes'] / mib:>5.1f} MiB "
              f"{r['rss_empty'] / mib:>6.1f} MiB {r['rss_full'] / mib:>5.1f} MiB {r['rss_growth'] / mib:>5.1f} MiB  "
              f"{ratio}x {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
