"""What ships and what a contributor reads names no internal work item: a user cannot look up
"issue 8" or "item 3", so the text says what changed instead."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK_ITEM = re.compile(r"\b(issues? #?\d+|items? \d+\b|the brief\b|workplace\b|exocortex\b)", re.I)


def test_no_text_names_a_work_item() -> None:
    found = []
    for folder, patterns in (("leanctx", ("*.py", "*.js", "*.md")), ("docs", ("*.md",)), ("bench", ("*.py",)),
                             ("tests", ("*.py", "*.md")), (".", ("README.md",))):
        for pattern in patterns:
            for path in sorted((REPO / folder).rglob(pattern) if folder != "." else (REPO / folder).glob(pattern)):
                if ".ci" in path.parts or path == Path(__file__).resolve():
                    continue
                for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                    if WORK_ITEM.search(line):
                        found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:120]}")
    assert not found, "\n".join(found)
