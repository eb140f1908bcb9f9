"""State writers shared by the concurrency and crash tests and by bench/state_bench.py.

As a script, `worker.py NAME COUNT START_AT [USER]`: waits until START_AT (epoch seconds) so
that all writers start together, records COUNT turns for USER (default `shared`), alternating
inbound and reply, and prints the revision each update produced as JSON, then the end time.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import sys
import time


def record_turns(name: str, count: int, start_at: float, user: str) -> list[int]:
    """COUNT turns for `user` from START_AT on; the revision of each update."""
    from leanctx.state import api

    api.show(user=user)  # connect / import before the start line
    time.sleep(max(0.0, start_at - time.time()))
    revisions = []
    for i in range(count):
        if i % 2 == 0:
            state = api.inbound(f"{name} {i}", user=user, session_id=name)["state"]
        else:
            state = api.reply(f"{name} {i}", user=user, session_id=name)
        revisions.append(state["revision"])
    return revisions


def write_forever(ready: int, user: str) -> None:
    """A forked child: update `user`'s state as fast as it can until it is killed; writes one
    byte to `ready` once the first update is in (so a kill lands in the steady write loop, not
    in connection set-up). Never returns."""
    try:
        from leanctx.state import api, backend, validate

        backend._redis_backends.clear()  # its own connection, not the parent's socket
        validate.FAST = True
        n = 0
        while True:
            api.reply(f"turn {n} " + "x" * 3000, user=user)
            if n == 0:
                os.write(ready, b"r")
            n += 1
    finally:
        os._exit(1)


def kill_a_writer_mid_update(user: str, rng: random.Random) -> bool:
    """Fork a `write_forever` child, let it write steadily, SIGKILL it at a random moment within
    4 ms, reap it. False when the child never wrote within 30 s."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        write_forever(w, user)
    os.close(w)
    wrote = bool(select.select([r], [], [], 30)[0])
    os.close(r)
    time.sleep(rng.uniform(0, 0.004))
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return wrote


if __name__ == "__main__":
    revisions = record_turns(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "shared")
    print(json.dumps({"revisions": revisions, "end": time.time()}))
