"""What asking Claude Code's transcript costs a stub: the read cache's stub with the transcript
check (the delivery's tool_result on the asking call's chain, no compact or microcompact boundary
between) beside the same stub without it, in one process, interleaved.

    python bench/transcript_check.py [--runs 2000] [--calls 2000] [--result-bytes 2000]

The transcript holds `--calls` earlier calls (a tool_use and a tool_result of `--result-bytes`
each, chained as Claude Code writes them); the file read was delivered by the first of them, so
the check walks the whole chain. Each round appends one new call (as a session does), so the
incremental index parses only that. Also printed: the first, full indexing of the transcript.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from leanctx.cache import ReadCache  # noqa: E402
from leanctx.cache.scope import Scope  # noqa: E402
from leanctx.cache.transcript import TranscriptIndex  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


class Transcript:
    def __init__(self, path: Path) -> None:
        self.path, self.tip, self.n = path, None, 0

    def call(self, cid: str, result: str) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            for kind, part in (("assistant", {"type": "tool_use", "id": cid, "name": "mcp__leanctx__ctx_read"}),
                               ("user", {"type": "tool_result", "tool_use_id": cid, "content": result})):
                self.n += 1
                uid = f"u{self.n:08d}"
                f.write(json.dumps({"parentUuid": self.tip, "uuid": uid, "type": kind, "message": {"content": [part]}}) + "\n")
                self.tip = uid


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--result-bytes", type=int, default=2000)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="leanctx-tcheck-") as tmp:
        root = Path(tmp) / "proj"
        root.mkdir()
        (root / "module.py").write_text("".join(f"def f_{i}(x):\n    return x * {i}\n\n" for i in range(700)))
        t = Transcript(Path(tmp) / "s.jsonl")
        t.call("toolu_first", "x" * a.result_bytes)
        for i in range(a.calls - 1):
            t.call(f"toolu_{i}", "x" * a.result_bytes)
        size = t.path.stat().st_size
        t0 = time.perf_counter()
        assert TranscriptIndex().holds(str(t.path), ("toolu_first",), None)
        first_ms = (time.perf_counter() - t0) * 1000
        base = Scope("claude:s@0", "claude", 0, (str(root),), True, "", str(root))
        checked = replace(base, verify=True, transcript=str(t.path), call_id="toolu_first")
        plain_cache, checked_cache = ReadCache(None), ReadCache(None)
        plain_cache.read(base, "module.py")
        assert checked_cache.read(checked, "module.py")["kind"] == "full"
        samples: dict[str, list[float]] = {"stub": [], "stub + transcript check": []}
        for i in range(a.runs):
            cid = f"toolu_run_{i}"
            t.call(cid, "[unchanged]")
            for name, cache, scope in (("stub", plain_cache, base),
                                       ("stub + transcript check", checked_cache, replace(checked, call_id=cid))):
                t0 = time.perf_counter()
                r = cache.read(scope, "module.py")
                samples[name].append((time.perf_counter() - t0) * 1000)
                if r["kind"] != "stub":
                    raise SystemExit(f"{name}: not a stub ({r['kind']})")
    print(f"transcript check, {a.runs} interleaved runs, {a.calls} earlier calls ({size} bytes, "
          f"{2 * a.calls} entries), Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"first indexing of the whole transcript: {first_ms:.1f} ms (once per transcript and daemon)")
    print(f"{'row':<28} {'p50 ms':>8} {'p95 ms':>8}")
    for name, v in samples.items():
        print(f"{name:<28} {pct(v, 0.5):8.3f} {pct(v, 0.95):8.3f}")
    print(f"added per stub (p50): {pct(samples['stub + transcript check'], 0.5) - pct(samples['stub'], 0.5):.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
