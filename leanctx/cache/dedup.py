"""Range algebra for range dedup (codegraph CG-17/18 semantics, keyed by conversation).

Spans are inclusive, 1-based `(start, end)` line ranges. Which way to be wrong: a held-range
record may only ever claim FEWER lines than the conversation received (under-report = a later read
re-sends something it has, over-report = a pointer to lines it never saw). So: invalid spans are
discarded (never clamped), and at the cap the SMALLEST spans are dropped.
"""

from __future__ import annotations

MIN_COVERED_LINES = 8      # shortest held run that may become a pointer
MIN_DELTA_CHARS = 160      # new text under this folds into the pointer line (no own sections)
MAX_RANGES_PER_FILE = 24   # held spans kept per (conversation, file); smallest dropped first
MAX_SPANS_IN_POINTER = 4   # spans named in a pointer before "+N more"

Span = tuple[int, int]


def valid(span: object) -> bool:
    return (
        isinstance(span, (tuple, list))
        and len(span) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in span)
        and 1 <= span[0] <= span[1]
    )


def merge(spans) -> list[Span]:
    """Valid spans only, sorted, touching/overlapping ones merged."""
    good = sorted((int(s[0]), int(s[1])) for s in spans if valid(s))
    out: list[list[int]] = []
    for s, e in good:
        if out and s <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def coalesce(spans, cap: int = MAX_RANGES_PER_FILE) -> tuple[list[Span], bool]:
    """merge(), then keep at most `cap` spans, dropping the smallest (ties: later start first)."""
    merged = merge(spans)
    if len(merged) <= cap:
        return merged, False
    keep = sorted(merged, key=lambda r: (-(r[1] - r[0]), r[0]))[:cap]
    return sorted(keep), True


def intersect(window: Span, spans) -> list[Span]:
    s0, e0 = window
    out = []
    for s, e in merge(spans):
        lo, hi = max(s, s0), min(e, e0)
        if lo <= hi:
            out.append((lo, hi))
    return out


def subtract(window: Span, spans) -> list[Span]:
    s0, e0 = window
    out = []
    cur = s0
    for s, e in merge(spans):
        if e < cur or s > e0:
            continue
        if s > cur:
            out.append((cur, min(s - 1, e0)))
        cur = max(cur, e + 1)
        if cur > e0:
            break
    if cur <= e0:
        out.append((cur, e0))
    return out


def covers(spans, window: Span) -> bool:
    return not subtract(window, spans)


def plan(window: Span, held, min_covered: int = MIN_COVERED_LINES) -> tuple[list[Span], list[Span]]:
    """(covered runs worth a pointer, spans to send) for a window against held spans."""
    covered = [r for r in intersect(window, held) if r[1] - r[0] + 1 >= min_covered]
    if not covered:
        return [], [window]
    return covered, subtract(window, covered)


def fmt_spans(spans: list[Span], limit: int = MAX_SPANS_IN_POINTER) -> str:
    names = [f"L{s}" if s == e else f"L{s}-{e}" for s, e in spans[:limit]]
    more = len(spans) - limit
    if more > 0:
        names.append(f"+{more} more span{'s' if more > 1 else ''}")
    return ", ".join(names)
