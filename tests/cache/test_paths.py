"""Path safety: only inside the conversation's roots (or the allow-list), text only, clean errors."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from leanctx.cache import ReadCache
from leanctx.cache import paths
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
    assert r["kind"] == "full" and r["path"] == "link-in.py"  # named as asked (test_names.py)


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


# -- a path changed between the check and the open -------------------------------------------------
SECRET = "outside-secret\n"


def _no_fd_path(monkeypatch) -> None:
    """Simulate a platform where the opened descriptor's path cannot be read (no /proc, no F_GETPATH)."""
    monkeypatch.setattr(paths, "_fd_path", lambda fd: None)


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "f.py").write_text(SECRET)
    (d / "f.py").write_text(SECRET)
    return d


class SwapFolder(ReadCache):
    """Swaps src/sub for a symlink to a folder outside the workspace after the path check."""

    target = ""

    def _before_open(self, real: str) -> None:
        folder = os.path.dirname(real)
        os.rename(folder, folder + ".orig")
        os.symlink(self.target, folder)


@pytest.mark.parametrize("fd_path", ["readable", "unreadable"])
def test_folder_swapped_for_a_symlink_after_the_check(world: World, c, outside, monkeypatch, fd_path) -> None:
    """The walk from the root's descriptor refuses the symlink, with or without /proc."""
    if fd_path == "unreadable":
        _no_fd_path(monkeypatch)
    world.write("src/sub/f.py", code(5))
    world.cache = SwapFolder(None)
    world.cache.target = str(outside / "sub")
    r = world.read(c, "src/sub/f.py")
    assert SECRET not in r["text"]
    assert "replaced" in _err(r, "changed")


def test_file_swapped_for_a_symlink_or_folder_for_a_file(world: World, c, outside, monkeypatch) -> None:
    _no_fd_path(monkeypatch)

    class SwapFile(ReadCache):
        def _before_open(self, real: str) -> None:
            os.remove(real)
            os.symlink(outside / "f.py", real)

    world.write("src/f.py", code(5))
    world.cache = SwapFile(None)
    assert SECRET not in _err(world.read(c, "src/f.py"), "changed")

    class FolderToFile(ReadCache):
        def _before_open(self, real: str) -> None:
            folder = os.path.dirname(real)
            os.rename(folder, folder + ".orig")
            with open(folder, "w") as f:
                f.write(SECRET)

    world.write("src/deep/g.py", code(5))
    world.cache = FolderToFile(None)
    _err(world.read(c, "src/deep/g.py"), "changed")


def test_symlinks_resolved_inside_still_read_without_fd_path(world: World, c, monkeypatch) -> None:
    """The walk follows the resolved path, so a symlink that stays inside the roots still works."""
    _no_fd_path(monkeypatch)
    world.write("src/real/a.py", code(5))
    os.symlink(world.path("src/real"), world.path("src/alias"))
    r = world.read(c, "src/alias/a.py")
    assert r["kind"] == "full" and r["path"] == "src/alias/a.py"  # named as asked
    assert world.read(c, "src/ok.py")["kind"] == "full"


def test_no_walk_and_no_fd_path_fails_closed(world: World, c, monkeypatch) -> None:
    """Without openat+O_NOFOLLOW and without a readable descriptor path, nothing is returned."""
    monkeypatch.setattr(paths, "CAN_WALK", False)
    _no_fd_path(monkeypatch)
    assert "no way to prove" in _err(world.read(c, "src/ok.py"), "unverified")


def swapped_read(world: World, c, outside: Path) -> dict:  # noqa: ANN001
    """Read src/sub/f.py while its folder is swapped for a symlink out of the workspace between the
    check and the open; the secret outside must never come back."""
    world.write("src/sub/f.py", code(5))
    world.cache = SwapFolder(None)
    world.cache.target = str(outside / "sub")
    r = world.read(c, "src/sub/f.py")
    assert SECRET not in r["text"]
    return r


def test_no_walk_falls_back_to_the_descriptor_path(world: World, c, outside, monkeypatch) -> None:
    """Without the walk, the descriptor's path (/proc here) is the proof: a swap is still refused."""
    monkeypatch.setattr(paths, "CAN_WALK", False)
    if paths._fd_path(0) is None:
        pytest.skip("needs /proc/self/fd or F_GETPATH")
    assert world.read(c, "src/ok.py")["kind"] == "full"
    _err(swapped_read(world, c, outside), "outside_roots")


def test_racing_swaps_never_return_outside_content(world: World, c, outside, monkeypatch) -> None:
    """A thread flips src/sub between a folder and a symlink out while reads run (bounded)."""
    _no_fd_path(monkeypatch)
    world.write("src/sub/f.py", code(5))
    folder = str(world.path("src/sub"))
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            os.rename(folder, folder + ".orig")
            os.symlink(outside / "sub", folder)
            os.remove(folder)
            os.rename(folder + ".orig", folder)

    t = threading.Thread(target=flip)
    t.start()
    try:
        kinds = set()
        for _ in range(400):
            r = world.cache.read(world.scope(c), "src/sub/f.py", fresh=True)
            assert SECRET not in r["text"], r
            kinds.add(r.get("code") or r["kind"])
    finally:
        stop.set()
        t.join()
    assert kinds <= {"full", "changed", "not_found", "outside_roots"}, kinds
