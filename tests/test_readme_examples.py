"""Every console example in README.md and docs/ is what the commands print today."""

from __future__ import annotations

import pytest

from tests import readme_examples


def _blocks() -> list[tuple[str, str, str]]:
    found = []
    for doc in readme_examples.DOCS:
        for match in readme_examples.BLOCK.finditer(doc.read_text(encoding="utf-8")):
            found.append((doc.name, match["name"], match["body"]))
    return found


def test_there_are_examples_for_every_setup() -> None:
    names = {name for _, name, _ in _blocks()}
    assert names == set(readme_examples.SETUPS), "every setup is used by a block, every block has a setup"


@pytest.mark.parametrize("doc,name,body", _blocks(), ids=[f"{d}:{n}" for d, n, _ in _blocks()])
def test_example_is_current(doc: str, name: str, body: str) -> None:
    fresh = readme_examples.run_block(name, body)
    assert readme_examples._masked(fresh) == readme_examples._masked(body), (
        f"{doc} example {name!r} is stale; run: python -m tests.readme_examples --update\n"
        f"--- in {doc}\n{body}\n--- printed now\n{fresh}"
    )


def test_a_machine_path_never_reaches_an_example() -> None:
    import os
    import sys

    for doc, name, body in _blocks():
        for local in (sys.executable, os.path.expanduser("~") + "/", str(readme_examples.REPO)):
            assert local not in body, f"{doc} example {name!r} shows a path of this machine: {local}"
