"""A separate writer process for the concurrency tests: `worker.py NAME COUNT START_AT`.

Waits until START_AT (epoch seconds) so that all writers start together, then records COUNT
turns for the user `shared` (alternating inbound and reply), and prints the revision each
update produced, as JSON.
"""

from __future__ import annotations

import json
import sys
import time

from leanctx.state import api


def main(name: str, count: int, start_at: float) -> None:
    time.sleep(max(0.0, start_at - time.time()))
    revisions = []
    for i in range(count):
        if i % 2 == 0:
            state = api.inbound(f"{name} {i}", user="shared", session_id=name)["state"]
        else:
            state = api.reply(f"{name} {i}", user="shared", session_id=name)
        revisions.append(state["revision"])
    print(json.dumps(revisions))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
