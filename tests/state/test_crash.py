"""A writer killed with SIGKILL at any point of an update never leaves a damaged state (both backends)."""

from __future__ import annotations

import json
import os
import random
import select
import signal
import time
from pathlib import Path

from leanctx.state import api, validate
from leanctx.state import backend as backend_mod
from leanctx.state.backend import Backend
from leanctx.state.filestore import TMP_PREFIX

from .conftest import raw_value

KILLS = 200


def _writer_forever(ready: int) -> None:
    """The child: update as fast as it can until it is killed; says when the first update is in
    (so that the kill lands in the steady write loop, not in connection set-up)."""
    try:
        backend_mod._redis_backends.clear()  # its own connection, not the parent's socket
        validate.FAST = True
        n = 0
        while True:
            api.reply(f"turn {n} " + "x" * 3000, user="alice")
            if n == 0:
                os.write(ready, b"r")
            n += 1
    finally:
        os._exit(1)


def test_sigkill_mid_write_never_damages_the_state(store: Backend, cks_home: Path) -> None:
    api.inbound("seed", user="alice")
    folder = cks_home / "user" / "alice"
    rng = random.Random(20261129)
    stale_temps = 0
    last_revision = 1
    for _ in range(KILLS):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _writer_forever(w)
        os.close(w)
        assert select.select([r], [], [], 30)[0], "the writer never wrote"
        os.close(r)
        time.sleep(rng.uniform(0, 0.004))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raw = raw_value(store, "alice")
        state = json.loads(raw)  # parses...
        validate.validate_stdlib(state)  # ...and validates, with both validators
        validate.validate_jsonschema(state)
        assert state["revision"] >= last_revision
        last_revision = state["revision"]
        if store.name == "file":
            stale_temps += any(p.name.startswith(TMP_PREFIX) for p in folder.iterdir())
    assert store.corrupt_files("alice") == []
    assert last_revision > KILLS  # every writer committed at least once before its kill
    if store.name == "file":
        assert stale_temps > 0  # some kills did land mid-write (a temp file was left behind)...
        api.reply("after the storm", user="alice")  # ...and the next writer cleans them up
        assert not any(p.name.startswith(TMP_PREFIX) for p in folder.iterdir())
