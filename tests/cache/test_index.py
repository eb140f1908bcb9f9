"""The persisted index: cold stubs after a daemon restart, never contents, corrupt file quarantined."""

from __future__ import annotations

import json
import os
from pathlib import Path

from leanctx.cache import ReadCache
from leanctx.cache.index import index_path

from .conftest import World, code


def _setup(world: World):
    world.write("src/a.py", code(80))
    world.write("src/b.py", code(80, "b"))
    h = world.host()
    world.session(h, "s1")
    return h, world.conn(h)


def test_cold_stub_after_restart_for_the_same_conversation(world: World) -> None:
    _h, c = _setup(world)
    world.read(c, "src/a.py")
    world.read(c, "src/b.py", 1, 40)
    world.restart()
    r = world.read(c, "src/a.py")
    assert r["kind"] == "stub"
    assert world.read(c, "src/b.py", 10, 30)["kind"] == "stub"
    assert world.cache.stats()["cold_stubs"] == 2
    assert world.cache.stats()["index"]["loaded_holdings"] == 2


def test_cold_stub_needs_the_same_known_conversation(world: World) -> None:
    _h, c = _setup(world)
    world.read(c, "src/a.py")
    world.restart()
    h2 = world.host()
    world.session(h2, "s2")
    assert world.read(world.conn(h2), "src/a.py")["kind"] == "full"
    lonely = world.conn(world.host(), "lonely")
    assert world.read(lonely, "src/a.py")["kind"] == "full"


def test_cold_stub_withheld_when_the_file_changed_or_after_a_compaction(world: World) -> None:
    h, c = _setup(world)
    world.read(c, "src/a.py")
    world.read(c, "src/b.py")
    world.restart()
    world.write("src/a.py", code(80) + "# more\n")
    assert world.read(c, "src/a.py")["kind"] == "full"  # no diff after a restart: no old text
    world.hook(h, "compact", "s1")
    assert world.read(c, "src/b.py")["kind"] == "full"


def test_restart_never_reapplies_an_old_compaction(world: World) -> None:
    h, c = _setup(world)
    world.hook(h, "compact", "s1")
    world.read(c, "src/a.py")
    world.restart()
    world.restart()
    assert world.read(c, "src/a.py")["kind"] == "stub"


def test_crash_without_save_loses_only_savings(world: World) -> None:
    _h, c = _setup(world)
    world.read(c, "src/a.py")
    world.restart(graceful=False)
    assert world.read(c, "src/a.py")["kind"] == "full"
    assert world.read(c, "src/a.py")["kind"] == "stub"


def test_autosave_persists_without_an_explicit_save(world: World) -> None:
    _h, c = _setup(world)
    world.read(c, "src/a.py")
    world.tick(6)
    world.read(c, "src/b.py")  # the read after 5 s saves (dirty)
    world.restart(graceful=False)
    assert world.read(c, "src/a.py")["kind"] == "stub"


def test_index_never_stores_contents(world: World) -> None:
    _h, c = _setup(world)
    world.write("src/secret.py", "TOKEN = 'very-distinctive-secret-value'\n" * 20)
    world.read(c, "src/secret.py")
    world.cache.save()
    raw = Path(index_path(str(world.state))).read_text()
    assert "very-distinctive-secret-value" not in raw
    assert oct(os.stat(index_path(str(world.state))).st_mode & 0o777) == "0o600"
    doc = json.loads(raw)
    (conv,) = doc["conversations"].values()
    (held,) = conv["held"].values()
    assert set(held) == {"fp", "size", "mtime_ns", "compactions", "lines", "whole", "ranges", "calls"}
    assert all(isinstance(c, str) and c.startswith("toolu_") for c in held["calls"])  # call ids, never text


def test_legacy_and_unknown_deliveries_are_not_persisted(world: World) -> None:
    world.write("src/a.py", code(80))
    legacy = world.conn(None, "L", env={"LEANCTX_CONVERSATION_SCOPE": "0"})
    world.read(legacy, "src/a.py")
    assert world.read(legacy, "src/a.py")["kind"] == "stub"
    world.restart()
    assert world.read(legacy, "src/a.py")["kind"] == "full"
    assert json.loads(Path(index_path(str(world.state))).read_text())["conversations"] == {}


def test_corrupt_index_is_quarantined_and_the_cache_keeps_working(world: World) -> None:
    _h, c = _setup(world)
    world.read(c, "src/a.py")
    world.cache.save()
    p = index_path(str(world.state))
    Path(p).write_text('{"schema": 1, "conversations": {"k": ')
    world.restart(graceful=False)
    st = world.cache.stats()
    assert st["index"]["quarantined"] and os.path.exists(st["index"]["quarantined"])
    assert not os.path.exists(p)
    assert world.read(c, "src/a.py")["kind"] == "full"
    assert world.read(c, "src/a.py")["kind"] == "stub"
    world.cache.save()
    assert json.loads(Path(p).read_text())["schema"] == 1


def test_index_that_parses_but_does_not_validate_is_quarantined(world: World) -> None:
    _h, c = _setup(world)
    world.read(c, "src/a.py")
    world.cache.save()
    p = index_path(str(world.state))
    doc = json.loads(Path(p).read_text())
    (conv,) = doc["conversations"].values()
    (held,) = conv["held"].values()
    held["ranges"] = [[5, 2]]  # an invalid span must never be trusted (or clamped)
    Path(p).write_text(json.dumps(doc))
    cache = ReadCache(str(world.state))
    assert cache.quarantined and cache.stats()["entries"] == 0


def test_stats_survive_a_restart(world: World) -> None:
    _h, c = _setup(world)
    world.read(c, "src/a.py")
    world.read(c, "src/a.py")
    world.restart()
    st = world.cache.stats()
    assert st["reads"] == 2 and st["stubs"] == 1
