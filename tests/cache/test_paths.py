"""Path safety: only inside the conversation's roots (or the allow-list), text only, clean errors."""

from __future__ import annotations

import os

import pytest

from leanctx.cache import ReadCache
from leanctx.cache.paths import line_starts

from .conftest import World, code


@pytest.fixture
def c(world: World):
    world.write("src/ok.py", code(20))
    h = world.host()
    world.session(h, "s1")
    return world.conn(h)


def _err(r: dict, code_: str) -> str:
    assert r["kind"] == "error", r
    assert r["code"] == code_, r
    assert r["text"].startswith("error: ")
    return r["text"]


def test_inside_root_relative_and_absolute(world: World, c) -> None:
    assert world.read(c, "src/ok.py")["kind"] == "full"
    r = world.read(c, str(world.path("src/ok.py")))
    assert r["path"] == "src/ok.py"


def test_outside_roots_and_dotdot(world: World, c, tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    _err(world.read(c, str(secret)), "outside_roots")
    _err(world.read(c, "../secret.txt"), "outside_roots")
    _err(world.read(c, "src/../../secret.txt"), "outside_roots")
    _err(world.read(c, "/etc/passwd"), "outside_roots")


def test_symlinks_are_resolved_before_the_check(world: World, c, tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("password\n")
    os.symlink(secret, world.path("link-out.txt"))
    os.symlink(tmp_path, world.path("dir-out"))
    _err(world.read(c, "link-out.txt"), "outside_roots")
    _err(world.read(c, "dir-out/secret.txt"), "outside_roots")
    os.symlink(world.path("src/ok.py"), world.path("link-in.py"))
    r = world.read(c, "link-in.py")
    assert r["kind"] == "full" and r["path"] == "src/ok.py"  # named by its real path


def test_allow_list_extends_the_roots(world: World, c, tmp_path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "lib.py").write_text(code(10))
    world.cache = ReadCache(None, allow=(str(shared),))
    r = world.read(c, str(shared / "lib.py"))
    assert r["kind"] == "full" and r["path"] == os.path.realpath(shared / "lib.py")


def test_devices_fifos_and_directories(world: World, c) -> None:
    world.cache = ReadCache(None, allow=("/dev",))
    _err(world.read(c, "/dev/zero"), "not_a_file")
    _err(world.read(c, "/dev/null"), "not_a_file")
    os.mkfifo(world.path("pipe"))
    _err(world.read(c, "pipe"), "not_a_file")  # never blocks
    _err(world.read(c, "src"), "not_a_file")


def test_binary_huge_and_non_utf8(world: World, c) -> None:
    world.write("img.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert "binary" in _err(world.read(c, "img.png"), "binary")
    world.write("latin1.txt", "caf\xe9\n".encode("latin-1"))
    assert "not UTF-8" in _err(world.read(c, "latin1.txt"), "not_utf8")
    world.cache = ReadCache(None, max_file_bytes=1000)
    world.write("big.txt", "x" * 1001)
    assert "over the 1000-byte cap" in _err(world.read(c, "big.txt"), "too_large")
    world.write("fits.txt", "y" * 1000)
    assert world.read(c, "fits.txt")["kind"] == "full"


def test_missing_and_deleted_between_stat_and_read(world: World, c) -> None:
    _err(world.read(c, "nope.py"), "not_found")

    class Racy(ReadCache):
        def _before_open(self, real: str) -> None:
            os.remove(real)

    world.write("gone.py", code(10))
    world.cache = Racy(None)
    assert "deleted" in _err(world.read(c, "gone.py"), "not_found")


def test_bad_path_values(world: World, c) -> None:
    _err(world.read(c, ""), "bad_path")
    _err(world.read(c, "a\0b"), "bad_path")
    _err(world.cache.read(world.scope(c), None), "bad_path")  # type: ignore[arg-type]


def test_relative_path_without_any_root(world: World) -> None:
    from leanctx.cache import Scope

    s = Scope(None, None, 0, (), False, "unknown", None)
    _err(world.cache.read(s, "x.py"), "bad_path")


def test_root_slash_is_never_a_root(world: World) -> None:
    from leanctx.cache import Scope

    s = Scope(None, None, 0, ("/",), False, "unknown", "/")
    _err(world.cache.read(s, "/etc/hostname"), "outside_roots")


def test_errors_never_break_the_cache(world: World, c) -> None:
    world.read(c, "nope.py")
    assert world.read(c, "src/ok.py")["kind"] == "full"
    assert world.read(c, "src/ok.py")["kind"] == "stub"


def test_line_starts() -> None:
    assert line_starts("") == []
    assert line_starts("a") == [0]
    assert line_starts("a\n") == [0]
    assert line_starts("a\nb") == [0, 2]
    assert line_starts("a\r\nb\n\n") == [0, 3, 5]
