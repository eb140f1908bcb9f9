"""docs/development.md's "Layout" is generated from the tree: every shipped module, template and
bench script, each with the first sentence of its own docstring (or header comment), so it can
neither name a file that is gone nor leave one out.

    python -m tests.readme_examples --update   # rewrites it with the examples and the matrix

tests/test_layout_doc.py fails while it is stale.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "development.md"
MARK_START = "<!-- layout: generated from the tree by `python -m tests.readme_examples --update` -->"
MARK_END = "<!-- /layout -->"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def first_sentence(text: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    cut = _SENTENCE_END.search(paragraph)
    return paragraph[: cut.start()] if cut else paragraph


def _python_summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    return first_sentence(doc) if doc else ""


def _comment_summary(path: Path) -> str:
    """The first comment of a template (`#`, `//`, `<!--` or a JS block comment), skipping a shebang."""
    for line in path.read_text(encoding="utf-8").splitlines()[:15]:
        line = line.strip()
        if not line or line.startswith("#!"):
            continue
        for lead in ("<!--", "/**", "/*", "//", "#", "*"):
            if line.startswith(lead):
                text = line[len(lead):].strip().removesuffix("-->").removesuffix("*/").strip()
                if text and not text.startswith(("leanctx-managed", "@")):
                    return first_sentence(text)
                break
        else:
            return ""
    return ""


def _entries(folder: Path, depth: int) -> list[str]:
    lines = []
    pad = "  " * depth + "- "
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".py", ".sh", ".js", ".mjs", ".md", ".json")
                   and not p.name.startswith("."))
    for path in files:
        summary = _python_summary(path) if path.suffix == ".py" else _comment_summary(path)
        if path.name == "__init__.py":
            continue  # its summary is the folder's
        lines.append(f"{pad}`{path.name}`" + (f": {summary}" if summary else ""))
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
        if sub.name == "traces" or (not any(sub.rglob("*.py")) and sub.name != "templates"):
            continue
        init = sub / "__init__.py"
        summary = _python_summary(init) if init.exists() else ""
        lines.append(f"{pad}`{sub.name}/`" + (f": {summary}" if summary else ""))
        lines.extend(_entries(sub, depth + 1))
    return lines


def render() -> str:
    lines = ["- `leanctx/`: the package (what the wheel ships)"]
    lines += _entries(REPO / "leanctx", 1)
    lines += ["- `bench/`: the benchmarks (not shipped); figures in [benchmarks.md](benchmarks.md)"]
    lines += _entries(REPO / "bench", 1)
    lines += ["- `tests/`: mirrors the package; `tests/e2e/` drives the real host CLIs offline against fake model "
              "servers on 127.0.0.1"]
    return "\n".join(lines) + "\n"


def replace_block(text: str, body: str) -> str | None:
    start, end = text.find(MARK_START), text.find(MARK_END)
    if start < 0 or end < start:
        return None
    return text[: start + len(MARK_START)] + "\n" + body + text[end:]


def update() -> bool:
    """Rewrite the block; True when it changed."""
    text = DOC.read_text(encoding="utf-8")
    fresh = replace_block(text, render())
    if fresh is None or fresh == text:
        return False
    DOC.write_text(fresh, encoding="utf-8")
    return True
