"""Several processes updating one user's state at once never lose an update (both backends)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from leanctx.state.backend import Backend

WORKER = Path(__file__).with_name("worker.py")
PROCESSES = 8
UPDATES = 100


def test_eight_processes_lose_no_update(store: Backend) -> None:
    env = dict(os.environ, LEANCTX_FAST_PATH="1")  # the hook's validator: the most concurrent caller
    start_at = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, str(WORKER), f"w{n}", str(UPDATES), str(start_at)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in range(PROCESSES)]
    produced: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        produced += json.loads(out)["revisions"]
    total = PROCESSES * UPDATES
    # every update was applied on top of the one before: each revision was produced exactly once
    assert sorted(produced) == list(range(1, total + 1))
    final = store.load("shared")
    assert final["revision"] == total and final["turn_count"] == total
    assert len(final["recent_turns"]) == 10
    # each writer's own turns stay in its order
    for n in range(PROCESSES):
        mine = [int(t["text"].split()[1]) for t in final["recent_turns"] if t["session_id"] == f"w{n}"]
        assert mine == sorted(mine)
