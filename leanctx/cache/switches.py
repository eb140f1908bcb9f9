"""The cache's on/off environment switches (LEANCTX_DEDUP, LEANCTX_DAEMON, ...), read one way."""

from __future__ import annotations

OFF = frozenset({"0", "false", "off", "no"})


def switched_off(value: str | None) -> bool:
    """A switch set to 0/false/off/no, in any case and spacing; unset or anything else is on."""
    return (value or "").strip().lower() in OFF
