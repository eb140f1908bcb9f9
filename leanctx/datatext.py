"""Text from a transcript, a repository or the disk, handed to a model as data, not as prose.

A file name, a branch or a task subject is chosen by whoever wrote it (a cloned repository, a
tool result) and can read like an instruction. Before such text reaches a model or a summariser
it is made one inert line: control and format characters (Cc, Cf: bidi overrides, zero-width,
tags; line and paragraph separators; surrogates, private use) are removed, whitespace runs become
one space, the result is clipped, and `quoted` wraps it as a JSON string so it cannot close the
quote it sits in. Standard library only (hook path).
"""

from __future__ import annotations

import unicodedata

from leanctx import fastjson

_DROP = frozenset(("Cc", "Cf", "Cs", "Co", "Zl", "Zp"))
ELLIPSIS = "…"


def plain(text: str, limit: int) -> str:
    """`text` as one line of at most `limit` characters, without control or format characters."""
    out = []
    for ch in text:
        if ch.isspace():  # \t \n \r, NEL, Zs: a space (Zl/Zp too: isspace is true for them)
            out.append(" ")
        elif ch < " " or unicodedata.category(ch) in _DROP:
            continue
        else:
            out.append(ch)
        if len(out) > 4 * limit + 64:  # enough to clip from; never walk a 10 MB name to the end
            break
    one = " ".join("".join(out).split())
    return one if len(one) <= limit else one[: max(limit - 1, 0)] + ELLIPSIS


def quoted(text: str, limit: int) -> str:
    """`plain(text, limit)` as a JSON string literal (its quotes and backslashes escaped)."""
    return fastjson.dumps(plain(text, limit))
