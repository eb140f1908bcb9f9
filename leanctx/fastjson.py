"""JSON for the hook path without importing the `json` package.

`import json` pulls in `re`, `enum`, `functools` and `collections`, which on a stock CPython
costs more than the interpreter's own start-up (measured by bench/hook_latency.py). The C
accelerator `_json` that `json` itself uses needs none of them, so the hook calls it directly.
Where `_json` is missing or its signature differs (another Python implementation or a future
CPython), we fall back to the `json` package: slower, same results.
"""

from __future__ import annotations

_WS = " \t\n\r"


class _Context:
    """The attributes `_json.make_scanner` reads from a JSONDecoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        raise ValueError(f"{name} is not valid JSON")


def _default(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


try:
    import _json

    _scan = _json.make_scanner(_Context())
    _encode = _json.make_encoder(None, _default, _json.encode_basestring, None, ":", ",", True, False, False)
    _encode({"probe": [1, "x", None, True, 1.5]}, 0)
except Exception:  # noqa: BLE001 - any mismatch: use the json package
    _scan = None
    _encode = None


def loads(text: str) -> object:
    """Parse one JSON document (surrounding whitespace allowed); ValueError on anything else."""
    if _scan is None:
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WS))
    try:
        value, end = _scan(text, start)
    except StopIteration as stop:
        raise ValueError(f"expecting a JSON value at char {stop.value}") from None
    if text[end:].strip(_WS):
        raise ValueError(f"extra data after the JSON value at char {end}")
    return value


def dumps(value: object) -> str:
    """Compact JSON with sorted keys; non-ASCII kept as is (files are written as UTF-8)."""
    if _encode is None:
        import json

        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return "".join(_encode(value, 0))
