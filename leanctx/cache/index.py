"""The persisted read index: what each known conversation was delivered, never file contents.

`<state dir>/read_index.json`, written atomically (temp file + fsync + rename, mode 0600):

    {"schema": 1, "saved_ts": 1786000000.0,
     "conversations": {"<key>": {"agent": "claude", "used_ts": 1786000000.0, "carried_boundary": "<uuid>",
         "roots": ["/home/me/proj"],
         "held": {"/home/me/proj/path.py": {"fp": "<size>:<blake2b>", "size": 120, "mtime_ns": 1786…,
                                             "compactions": 0, "lines": 4, "whole": true, "ranges": [[1, 4]]}}}},
     "stats": {...cumulative counters...}}

Only conversations whose scope may persist are written (hook-record and explicit keys; never a
legacy `conn:` key, never an unknown caller). A file that does not parse or does not validate is
moved aside to `read_index.json.corrupt-<unix time>` and the cache starts empty: the service keeps
running, it only loses cold stubs (the safe direction).
"""

from __future__ import annotations

import json
import os
import time

from leanctx import safedir
from leanctx.cache import dedup

SCHEMA = 1
INDEX_NAME = "read_index.json"


class IndexError_(ValueError):
    pass


def index_path(state_dir: str) -> str:
    return os.path.join(state_dir, INDEX_NAME)


def _int(v: object, lo: int = 0) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise IndexError_(f"bad integer {v!r}")
    return v


def validate_holding(h: object) -> dict:
    if not isinstance(h, dict):
        raise IndexError_("holding is not an object")
    fp = h.get("fp")
    if not isinstance(fp, str) or ":" not in fp:
        raise IndexError_("bad fingerprint")
    lines = _int(h.get("lines"))
    ranges = h.get("ranges")
    if not isinstance(ranges, list) or not all(dedup.valid(r) and r[1] <= max(lines, 0) for r in ranges):
        raise IndexError_("bad ranges")
    whole = h.get("whole")
    if not isinstance(whole, bool):
        raise IndexError_("bad whole flag")
    calls = h.get("calls")
    return {
        "fp": fp,
        "size": _int(h.get("size")),
        "mtime_ns": _int(h.get("mtime_ns"), lo=-(1 << 62)),
        "compactions": _int(h.get("compactions")),
        "lines": lines,
        "whole": whole,
        "ranges": dedup.coalesce([tuple(r) for r in ranges])[0],
        # the ids of the calls that delivered it (a list of non-empty strings, else unknown: None)
        "calls": calls if isinstance(calls, list) and len(calls) <= 32 and all(isinstance(c, str) and c for c in calls) else None,
    }


def load(state_dir: str) -> tuple[dict, str | None]:
    """(index, quarantined path or None). A missing file is an empty index, not an error."""
    path = index_path(state_dir)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return {"conversations": {}, "stats": {}}, None
    except OSError:
        return {"conversations": {}, "stats": {}}, None
    try:
        doc = json.loads(raw.decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise IndexError_("unknown schema")
        convs = doc.get("conversations")
        if not isinstance(convs, dict):
            raise IndexError_("conversations is not an object")
        out: dict = {}
        for key, c in convs.items():
            if not isinstance(key, str) or not key or key.startswith("conn:") or not isinstance(c, dict):
                raise IndexError_("bad conversation entry")
            held = c.get("held")
            if not isinstance(held, dict):
                raise IndexError_("held is not an object")
            agent = c.get("agent")
            carried = c.get("carried_boundary")  # the last compact_boundary credited (readcache carry)
            roots = c.get("roots")  # every workspace root the conversation was given (paths.named)
            roots = ([os.path.normpath(r) for r in roots[:64] if isinstance(r, str) and os.path.isabs(r) and "\0" not in r]
                     if isinstance(roots, list) else [])
            out[key] = {
                "carried_boundary": carried if isinstance(carried, str) and 0 < len(carried) <= 200 else None,
                "roots": roots,
                "agent": agent if isinstance(agent, str) else None,
                "used_ts": float(c.get("used_ts") or 0.0) if isinstance(c.get("used_ts"), (int, float)) else 0.0,
                "held": {p: validate_holding(h) for p, h in held.items() if isinstance(p, str) and os.path.isabs(p)},
            }
        stats = doc.get("stats") if isinstance(doc.get("stats"), dict) else {}
        tokenizer = doc.get("tokenizer")  # who counted when it was saved (older files: the only record)
        return {"conversations": out, "stats": stats, "tokenizer": tokenizer if isinstance(tokenizer, str) else None}, None
    except (ValueError, UnicodeDecodeError, TypeError, AttributeError, KeyError):
        return {"conversations": {}, "stats": {}}, quarantine(path)


def quarantine(path: str) -> str | None:
    dest = f"{path}.corrupt-{int(time.time())}"
    try:
        os.replace(path, dest)
        return dest
    except OSError:
        return None


def save(state_dir: str, doc: dict) -> None:
    safedir.make_private(state_dir)
    path = index_path(state_dir)
    tmp = f"{path}.{os.getpid()}.tmp"
    data = json.dumps({"schema": SCHEMA, "saved_ts": time.time(), **doc}, separators=(",", ":"), sort_keys=True).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
