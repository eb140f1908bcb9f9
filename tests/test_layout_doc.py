"""docs/development.md's layout names every file of the tree and nothing else."""

from __future__ import annotations

from tests import layout_doc


def test_the_layout_in_development_md_is_the_tree() -> None:
    text = layout_doc.DOC.read_text(encoding="utf-8")
    fresh = layout_doc.replace_block(text, layout_doc.render())
    assert fresh is not None, "docs/development.md lost its layout markers"
    assert fresh == text, "docs/development.md's layout is stale: run python -m tests.readme_examples --update"


def test_every_shipped_module_is_listed_once() -> None:
    listed = layout_doc.render()
    for path in sorted((layout_doc.REPO / "leanctx").rglob("*.py")):
        if path.name == "__init__.py" or "__pycache__" in path.parts:
            continue
        assert listed.count(f"`{path.name}`:") + listed.count(f"`{path.name}`\n") >= 1, path


def test_first_sentence() -> None:
    assert layout_doc.first_sentence("One thing. Two things.\n\nMore.") == "One thing."
    assert layout_doc.first_sentence("Wrapped\nline: with a colon") == "Wrapped line: with a colon"
    assert layout_doc.first_sentence("Uses e.g.x and ends.") == "Uses e.g.x and ends."
