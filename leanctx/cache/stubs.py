"""The texts the read cache sends instead of content. Pure functions of their inputs, so the same
situation always produces the same bytes (provider prompt caching, #498): no counters, no times.

Every text names the file as the model asked for it, relative to the workspace root (absolute once
the conversation has had two outermost roots: paths.named; never the basename), says
the copy came from THIS conversation and is unchanged on disk since, and names `fresh=true` as
the way to get the content again. None says "omitted" or "unavailable". A path with a character
that is not printable (a newline, a bidi override, a zero-width space...) is shown as a JSON string,
so a file's name can neither start a line of its own nor hide text; every other path as it is.
"""

from __future__ import annotations

from leanctx import fastjson
from leanctx.cache.dedup import Span, fmt_spans

FRESH_HINT = "fresh=true to re-read"


class Hints:
    """How a text tells the model to get the content anyway: `ctx_read`'s `fresh=true`, or for a
    host's built-in reader (whose call has no such argument) asking again right away."""

    __slots__ = ("all", "one", "whole")

    def __init__(self, one: str, all: str, whole: str) -> None:  # noqa: A002 - the texts' own word
        self.one, self.all, self.whole = one, all, whole


FRESH = Hints(FRESH_HINT, f"{FRESH_HINT} everything", f"{FRESH_HINT} the whole file")
# the built-in reader gate lets the same file through when it is asked for again right after
# its stub (leanctx/cache/readcache.py, gate mode)
AGAIN = Hints("read it again right away for the content", "read it again right away for everything",
              "read it again right away for the whole file")
# a shell read (`cat`, `sed -n`, ...): the same command run again right away prints the file
RUN_AGAIN = Hints("run the same command again right away for the output", "run it again right away for everything",
                  "run it again right away for the whole file")


def shown(rel: str) -> str:
    """`rel` as the texts name it: as is when every character is printable, else a JSON string
    whose every non-printable character is a \\u escape."""
    if rel.isprintable():
        return rel
    return "".join(c if c.isprintable() else _escape(ord(c)) for c in fastjson.dumps(rel))


def _escape(n: int) -> str:
    if n < 0x10000:
        return f"\\u{n:04x}"
    n -= 0x10000
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"


def _plural(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def stub(rel: str, nlines: int, window: Span | None = None, hint: Hints = FRESH) -> str:
    """The whole file (window None) or a window the conversation already holds, unchanged."""
    rel = shown(rel)
    where = rel if window is None else f"{rel} L{window[0]}-{window[1]} of"
    return (
        f"[unchanged] {where} {_plural(nlines)} · already sent earlier in this conversation and "
        f"unchanged on disk since, so that copy is exact · {hint.one}"
    )


def pointer(rel: str, nlines: int, window: Span, covered: list[Span], sections: list[tuple[Span, str]], folded: bool,
            hint: Hints = FRESH) -> str:
    """Held runs named, only the new lines sent. `folded`: the new text is short, so it follows the
    pointer line directly (numbered lines) instead of in its own `@@ Lx-y @@` sections."""
    rel = shown(rel)
    is_are = "was" if len(covered) == 1 else "were"
    head = (
        f"[partly unchanged] {rel} L{window[0]}-{window[1]} of {_plural(nlines)}: "
        f"{fmt_spans(covered)} {is_are} already sent earlier in this conversation and unchanged on disk since, "
        f"so that copy is exact"
    )
    if folded:
        new = fmt_spans([s for s, _ in sections], limit=len(sections))
        lines = []
        for (s, _e), text in sections:
            body = text.removesuffix("\n")
            for i, line in enumerate(body.split("\n")):
                lines.append(f"{s + i}\t{line}")
        return f"{head}; the only new lines are {new}:\n" + "\n".join(lines) + "\n"
    parts = [f"{head}; only the new lines follow ({hint.all})."]
    for (s, e), text in sections:
        parts.append(f"@@ L{s}-{e} @@")
        parts.append(text if text.endswith("\n") else text + "\n")
    return "\n".join(p.rstrip("\n") for p in parts) + "\n"


def diff_header(rel: str, nlines: int, hint: Hints = FRESH) -> str:
    rel = shown(rel)
    return (
        f"[changed] {rel} ({_plural(nlines)} now) changed on disk since it was sent earlier in this "
        f"conversation; unified diff against that copy ({hint.whole}):\n"
    )


def same_bytes(rel: str, nlines: int, hint: Hints = FRESH) -> str:
    """The file's mtime moved but its bytes are the ones this conversation holds: an empty diff."""
    rel = shown(rel)
    return (
        f"[changed] {rel} {_plural(nlines)} · modified on disk since it was sent earlier in this "
        f"conversation, but byte-identical to that copy (empty diff) · {hint.one}"
    )
