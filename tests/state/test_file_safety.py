"""The file backend's promises: permissions, no write outside the user folder, temp clean-up,
bounded lock wait, and no lost update even against a writer that ignores the lock."""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path

import pytest

from leanctx.state import api, protocol
from leanctx.state.errors import StateBusy, UnsafePath
from leanctx.state.filestore import LOCK, FileBackend


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under root with its bytes (None for folders): to prove nothing changed."""
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_files_are_0600_and_folders_0700(cks_home: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        api.inbound("hello", user="alice")
        api.end_thread(user="alice")
    finally:
        os.umask(old)
    folder = cks_home / "user" / "alice"
    assert mode(cks_home / "user") == 0o700 and mode(folder) == 0o700
    for name in ("conversation-state.json", "history.md", LOCK):
        assert mode(folder / name) == 0o600, name


def test_a_symlinked_user_folder_pointing_outside_is_refused(cks_home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "conversation-state.json").write_text("secret of someone else")
    (cks_home / "user").mkdir(parents=True)
    (cks_home / "user" / "alice").symlink_to(outside)
    before = tree(outside)
    for call in (lambda: api.inbound("hi", user="alice"), lambda: api.show(user="alice"),
                 lambda: api.end_thread(user="alice"), lambda: FileBackend().append_history("alice", "x"),
                 lambda: FileBackend().read_history("alice")):
        with pytest.raises(UnsafePath, match="is a symlink"):
            call()
    assert tree(outside) == before


def test_a_symlinked_user_root_is_refused_before_anything_is_created(cks_home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cks_home.mkdir()
    (cks_home / "user").symlink_to(outside)
    with pytest.raises(UnsafePath):
        api.inbound("hi", user="bob")
    assert list(outside.iterdir()) == []  # not even the bob/ folder


def test_a_symlinked_cks_home_is_the_operators_choice(cks_home: Path, tmp_path: Path) -> None:
    real = tmp_path / "volume"
    real.mkdir()
    cks_home.symlink_to(real)
    api.inbound("hi", user="bob")
    assert (real / "user" / "bob" / "conversation-state.json").is_file()


def test_a_state_file_symlink_is_moved_aside_never_followed(cks_home: Path, tmp_path: Path) -> None:
    target = tmp_path / "other.json"
    other = protocol.fresh("alice", None)
    target.write_text(json.dumps(other))
    folder = cks_home / "user" / "alice"
    folder.mkdir(parents=True)
    (folder / "conversation-state.json").symlink_to(target)
    s = api.inbound("hi", user="alice")["state"]
    assert s["revision"] == 1
    assert target.read_text() == json.dumps(other)  # untouched
    assert (folder / "conversation-state.json").is_file() and not (folder / "conversation-state.json").is_symlink()
    [aside] = api.corrupt_files(user="alice")
    assert os.path.islink(aside)
    (folder / "history.md").symlink_to(tmp_path / "history-elsewhere.md")
    with pytest.raises(UnsafePath):
        api.end_thread(user="alice")
    assert not (tmp_path / "history-elsewhere.md").exists()


def test_stale_temp_files_of_a_killed_writer_are_removed(cks_home: Path) -> None:
    api.inbound("hi", user="alice")
    folder = cks_home / "user" / "alice"
    stale = folder / ".conversation-state.json.99999.deadbeef.tmp"
    stale.write_text('{"half": ')
    unrelated = folder / "profile.md"
    unrelated.write_text("keep me")
    api.reply("hello", user="alice")
    assert not stale.exists() and unrelated.read_text() == "keep me"
    assert sorted(p.name for p in folder.iterdir()) == [LOCK, "conversation-state.json", "profile.md"]


def test_the_lock_wait_is_bounded(cks_home: Path) -> None:
    api.inbound("hi", user="alice")
    before = (cks_home / "user" / "alice" / "conversation-state.json").read_bytes()
    fd = os.open(cks_home / "user" / "alice" / LOCK, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process would hold it the same way
    try:
        with pytest.raises(StateBusy, match="stayed locked"):
            FileBackend(lock_timeout=0.2).update("alice", lambda s: protocol.reply(s, "never"))
    finally:
        os.close(fd)
    assert (cks_home / "user" / "alice" / "conversation-state.json").read_bytes() == before
    assert FileBackend(lock_timeout=0.2).update("alice", lambda s: protocol.reply(s, "now"))["revision"] == 2


def test_a_writer_that_ignores_the_lock_does_not_lose_its_update(cks_home: Path) -> None:
    """A model writing the file with its Write tool in the middle of our update: we redo ours on its state."""
    api.inbound("first", user="alice")
    path = cks_home / "user" / "alice" / "conversation-state.json"
    calls = []

    def change(s: dict) -> dict:
        if not calls:
            foreign = json.loads(path.read_text())
            foreign["thread_summary"] = "written by the model directly"
            foreign["revision"] = 7
            path.write_text(json.dumps(foreign))
        calls.append(s["revision"])
        return protocol.reply(s, "second")

    s = FileBackend().update("alice", change)
    assert calls == [1, 7]
    assert s["revision"] == 8 and s["thread_summary"] == "written by the model directly"
    assert [t["text"] for t in s["recent_turns"]] == ["first", "second"]
