"""A writer killed with SIGKILL at any point of an update never leaves a damaged state (both backends)."""

from __future__ import annotations

import json
import random
from pathlib import Path

from leanctx.state import api, validate
from leanctx.state.backend import Backend
from leanctx.state.filestore import TMP_PREFIX

from .conftest import raw_value
from .worker import kill_a_writer_mid_update

KILLS = 200


def test_sigkill_mid_write_never_damages_the_state(store: Backend, cks_home: Path) -> None:
    api.inbound("seed", user="alice")
    folder = cks_home / "user" / "alice"
    rng = random.Random(20261129)
    stale_temps = 0
    last_revision = 1
    for _ in range(KILLS):
        assert kill_a_writer_mid_update("alice", rng), "the writer never wrote"
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
