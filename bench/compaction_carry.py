"""File tokens re-spent after a compaction, with the real Claude Code: three ways.

Runs tests/e2e/compaction_scenario.py (real `claude` 2.1.197 from .ci/cache, the fake model
server on 127.0.0.1, a throw-away HOME per way): 8 files read (one over the 5k-token re-attach
limit), todos, an edit, a failing command; `/compact`; a re-attached file changed on disk; all
8 re-read. Prints, per way, which files Claude Code re-attached, the verdict of each re-read,
how many re-attached files the model got a second copy of, and the tokens (cl100k, or the
estimate leanctx reports) of the re-reads and of the attachments.

    python bench/compaction_carry.py [--json]

Ways: none (no leanctx: the re-reads go through Claude Code's own Read), before (leanctx with
LEANCTX_CARRY=0, what it did before carry), carry (leanctx as shipped).
Target: 0 duplicates of re-attached files; total <= attached + files not attached.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e import compaction_scenario as sc  # noqa: E402
from tests.e2e.conftest import _cli  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args(argv)
    claude = _cli("claude")
    rows = []
    with tempfile.TemporaryDirectory(prefix="leanctx-carry-bench-") as tmp:
        for way in sc.WAYS:
            rows.append(sc.figures(sc.run_way(claude, Path(tmp) / way, way)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"re-attached by Claude Code: {', '.join(rows[0]['attached'])} "
          f"({rows[0]['attached_tokens']} tokens, the same every way)")
    print(f"{'way':<8} {'re-read tokens':>14} {'+ attached':>10} {'= total':>8} {'duplicates':>10}  verdicts")
    for r in rows:
        v = " ".join(f"{n.split('.')[0]}:{k}" for n, k in r["verdicts"].items())
        print(f"{r['way']:<8} {r['reread_tokens']:>14} {r['attached_tokens']:>10} {r['total_tokens']:>8} "
              f"{r['duplicates']:>10}  {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
