"""Old conversation records out of the data dir.

The hooks write one small record per conversation and never delete one (they must stay fast and
never lose state a live chat needs). An always-on bot restarted by every redeploy starts a new
session each time, so `conversations/` grows without bound, and the cache service's record scan
(a stat per file whenever a record changes) slows with it. Nothing needs a record once it is a
few days old: the scope ignores records after 2 h (24 h for a chat still inside a turn) and
doctor shows only the latest. The daemon runs this at start and hourly.

Only our files are touched: `*.json` records and our stale `.<name>.<pid>.tmp` files, in the
per-agent folders, never through a symlink, each folder under the same lock the hooks take, so a
record being written is never deleted from under its writer.
"""

from __future__ import annotations

import logging
import os
import re
import stat as statmod
import time

from leanctx.cache.scope import IN_TURN_MAX_AGE_S

log = logging.getLogger("leanctx.prune")

KEEP_S = 7 * 86400.0
KEEP_ENV = "LEANCTX_RECORD_KEEP_DAYS"
MIN_KEEP_S = IN_TURN_MAX_AGE_S  # never below the longest age any scope rule reads a record at
STALE_TMP_S = 86400.0
_TMP = re.compile(r"^\..+\.json\.\d+\.tmp$")


def keep_seconds(environ: dict | None = None) -> float:
    """How long records are kept: LEANCTX_RECORD_KEEP_DAYS (>= 1), else 7 days."""
    raw = (environ if environ is not None else os.environ).get(KEEP_ENV, "").strip()
    if not raw:
        return KEEP_S
    try:
        days = float(raw)
    except ValueError:
        days = -1.0
    if not MIN_KEEP_S <= days * 86400.0 < 1e12:  # also refuses NaN and infinity
        log.warning("%s=%r is not a number of days >= 1; keeping records %g days", KEEP_ENV, raw, KEEP_S / 86400)
        return KEEP_S
    return days * 86400.0


def _updated_ts(path: str) -> float | None:
    from leanctx.hooks.publish import read_json

    value = read_json(path)
    ts = value.get("updated_ts") if isinstance(value, dict) else None
    return float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None


def prune_records(data_dir: str | os.PathLike, keep_s: float = KEEP_S, now: float | None = None) -> int:
    """Delete records whose last event (the newer of their mtime and `updated_ts`) is older than
    `keep_s`. Returns how many files were removed."""
    from leanctx.hooks.publish import RecordLock

    now = time.time() if now is None else now
    base = os.path.join(os.fspath(data_dir), "conversations")
    try:
        agents = [d for d in os.scandir(base) if not d.name.startswith(".") and d.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    removed = 0
    for d in agents:
        with RecordLock(os.path.join(d.path, ".lock")) as lock:
            if not lock.acquired or lock.fd is None:  # a hook holds it (or locking is unavailable): next round
                continue
            try:
                entries = list(os.scandir(d.path))
            except OSError:
                continue
            for f in entries:
                is_record = f.name.endswith(".json") and not f.name.startswith(".")
                is_tmp = bool(_TMP.match(f.name))
                # a missed-lock counter (hooks/publish.py) as old as an old record goes with it
                is_missed = f.name.startswith(".") and f.name.endswith(".missed")
                if not (is_record or is_tmp or is_missed):
                    continue
                try:
                    st = f.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not statmod.S_ISREG(st.st_mode):
                    continue
                if is_tmp:
                    old = now - st.st_mtime > STALE_TMP_S
                elif is_missed:  # only once its record is gone: the record counts what it folded
                    record = os.path.join(d.path, f.name[1 : -len(".missed")] + ".json")
                    old = now - st.st_mtime > keep_s and not os.path.lexists(record)
                else:
                    last = max(st.st_mtime, _updated_ts(f.path) or 0.0)
                    old = now - last > keep_s
                if old:
                    try:
                        os.unlink(f.path)
                        removed += not is_missed
                    except OSError as exc:
                        log.warning("cannot remove old record %s: %s", f.path, exc)
    if removed:
        log.info("removed %d conversation record(s) older than %g days", removed, keep_s / 86400)
    return removed
