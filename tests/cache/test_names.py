"""What a conversation holds belongs to the name it read the file under (paths.named): a symlink,
a second hard link or a retargeted link never makes a stub for bytes the model knows under
another name, and with two workspace roots an answer never names a file relatively."""

from __future__ import annotations

import os

from leanctx.cache import ReadCache
from leanctx.cache.scope import Scope

from .conftest import code


def _scope(roots, cwd, key: str = "claude:s1") -> Scope:
    return Scope(key, "claude", 0, tuple(str(r) for r in roots), True, "", str(cwd), True)


def _write(path, text: str, mtime_ns: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))


def test_a_file_read_through_a_symlink_is_not_held_under_its_target_name(tmp_path) -> None:  # noqa: ANN001
    proj = tmp_path / "proj"
    _write(proj / "a.py", code(120, "alpha"))
    os.symlink("a.py", proj / "link.py")
    cache, s = ReadCache(None), _scope([proj], proj)
    assert cache.read(s, "link.py")["kind"] == "full"
    # the model knows these bytes as link.py only: a stub naming a.py would point at nothing
    assert cache.read(s, "a.py")["kind"] == "full"
    again = cache.read(s, "link.py")
    assert again["kind"] == "stub" and again["path"] == "link.py" and "link.py" in again["text"]


def test_a_retargeted_symlink_is_the_same_name_with_other_bytes(tmp_path) -> None:  # noqa: ANN001
    proj = tmp_path / "proj"
    m = 1_800_000_000_000_000_000
    _write(proj / "a.py", code(120, "alpha"), m)
    _write(proj / "b.py", code(120, "bravo"), m)  # same size and mtime, other bytes
    os.symlink("a.py", proj / "link.py")
    cache, s = ReadCache(None), _scope([proj], proj)
    cache.read(s, "link.py")
    cache.read(s, "a.py")
    os.replace(_relink(proj, "b.py"), proj / "link.py")
    assert cache.read(s, "link.py")["kind"] != "stub"
    cache.read(s, "b.py")
    os.replace(_relink(proj, "a.py"), proj / "link.py")
    # a.py's bytes are held under a.py, but under link.py the latest copy the model got is b's
    back = cache.read(s, "link.py")
    assert back["kind"] != "stub"
    if back["kind"] == "diff":
        assert back["claims"]["fingerprint"] != cache.read(s, "a.py")["fingerprint"]


def _relink(proj, target: str):  # noqa: ANN001, ANN202
    tmp = proj / ".link.tmp"
    if tmp.is_symlink():
        tmp.unlink()
    os.symlink(target, tmp)
    return tmp


def test_a_hard_link_is_a_name_of_its_own(tmp_path) -> None:  # noqa: ANN001
    proj = tmp_path / "proj"
    _write(proj / "a.py", code(120, "alpha"))
    os.link(proj / "a.py", proj / "h.py")
    cache, s = ReadCache(None), _scope([proj], proj)
    cache.read(s, "a.py")
    assert cache.read(s, "h.py")["kind"] == "full"
    (proj / "h.py").write_text(code(120, "alpha").replace("alpha_7(", "alpha_seven("))  # edits both
    d = cache.read(s, "a.py")
    assert d["kind"] == "diff" and "alpha_seven" in d["text"]


def test_two_roots_name_files_absolutely(tmp_path) -> None:  # noqa: ANN001
    one, two = tmp_path / "one", tmp_path / "two"
    _write(one / "src" / "x.py", code(120, "first"))
    _write(two / "src" / "x.py", code(120, "second"))
    cache, s = ReadCache(None), _scope([one, two], one)
    cache.read(s, "src/x.py")
    cache.read(s, str(two / "src" / "x.py"))
    a, b = cache.read(s, "src/x.py"), cache.read(s, str(two / "src" / "x.py"))
    assert a["kind"] == b["kind"] == "stub"
    # `src/x.py` alone could be either file
    assert a["path"] == str(one / "src" / "x.py") and b["path"] == str(two / "src" / "x.py")
    assert a["path"] in a["text"] and b["path"] in b["text"]


def test_a_root_the_conversation_had_keeps_names_absolute_across_a_restart(tmp_path) -> None:  # noqa: ANN001
    one, two, state = tmp_path / "one", tmp_path / "two", tmp_path / "state"
    _write(one / "src" / "x.py", code(120, "first"))
    _write(two / "src" / "x.py", code(120, "second"))
    cache = ReadCache(str(state))
    cache.read(_scope([one], one), "src/x.py")
    cache.read(_scope([one, two], two), "src/x.py")  # the cwd moved to a second folder
    back = _scope([one], one)  # and back: `src/x.py` meant the other file a moment ago
    r = cache.read(back, "src/x.py")
    assert r["kind"] == "stub" and r["path"] == str(one / "src" / "x.py")
    cache.save()
    r = ReadCache(str(state)).read(back, "src/x.py")
    assert r["kind"] == "stub" and r["path"] == str(one / "src" / "x.py")


def test_one_root_still_names_files_relatively(tmp_path) -> None:  # noqa: ANN001
    proj = tmp_path / "proj"
    _write(proj / "pkg" / "m.py", code(120))
    cache, s = ReadCache(None), _scope([proj, proj / "pkg"], proj / "pkg")  # a cwd inside the root
    assert cache.read(s, "m.py")["path"] == "pkg/m.py"
    r = cache.read(s, str(proj / "pkg" / "m.py"))
    assert r["kind"] == "stub" and r["path"] == "pkg/m.py"


def test_a_cwd_reached_through_a_symlink_names_files_under_the_root(tmp_path) -> None:  # noqa: ANN001
    proj = tmp_path / "proj"
    _write(proj / "m.py", code(120))
    os.symlink(proj, tmp_path / "via")
    cache, s = ReadCache(None), _scope([proj], tmp_path / "via")
    assert cache.read(s, "m.py")["path"] == "m.py"
    r = cache.read(s, str(proj / "m.py"))  # the same file, its real spelling: the same name
    assert r["kind"] == "stub" and r["path"] == "m.py"
