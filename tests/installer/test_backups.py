"""Rolling backups in `<data dir>/backups/`: each file keeps its own newest copies, and pruning one
file's never touches another's, whatever characters the paths hold (real files, the real folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from leanctx.installer import files

KEPT = files.BACKUPS_KEPT_PER_FILE

# (a file whose backups must survive, a file backed up after it): glob characters in a path, and
# the `/` -> `__` folding of an older naming that made two paths one name.
PAIRS = [
    ("A.json", "[A-Z].json"),
    ("#.json", "*.json"),
    ("a.json", "?.json"),
    ("a/b.json", "a__b.json"),
    ("a__b.json", "a/b.json"),
    ("x/settings.json", "x/[!y]/../settings.json"),
]


def own_backups(data_dir: Path, tag: str) -> list[int]:
    """The write numbers of the backups holding `tag`'s bytes, whatever their names."""
    out = []
    for f in (data_dir / "backups").iterdir():
        head, _, n = f.read_text().rpartition(":")
        if head == tag:
            out.append(int(n))
    return sorted(out)


@pytest.mark.parametrize(("victim", "other"), PAIRS)
def test_pruning_one_files_backups_never_deletes_anothers(tmp_path: Path, victim: str, other: str) -> None:
    data_dir = tmp_path / "data"
    root = tmp_path / "cfg"
    for name in (victim, other):
        for i in range(KEPT + 2):
            files.backup(data_dir, root / name, f"{name}:{i}".encode())
    for name in (victim, other):
        assert own_backups(data_dir, name) == list(range(2, KEPT + 2)), name  # its own newest, all of them


def test_backup_names_differ_per_file_and_keep_a_readable_label(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    a = files.backup(data_dir, Path("/p/a__b/settings.json"), b"1")
    b = files.backup(data_dir, Path("/p/a/b/settings.json"), b"2")
    assert a.name.startswith("p__a__b__settings.json.") and b.name.startswith("p__a__b__settings.json.")
    assert files.backups_of(data_dir, Path("/p/a__b/settings.json")) == [a]
    assert files.backups_of(data_dir, Path("/p/a/b/settings.json")) == [b]
    long = files.backup(data_dir, Path("/" + "d" * 250 + "/\n[*?].json"), b"3")  # still a valid file name
    assert len(long.name.encode()) <= 255 and long.read_bytes() == b"3"


def test_backups_an_older_leanctx_named_are_left_alone(tmp_path: Path) -> None:
    """`<folded path>.<stamp>.bak` cannot say whose it is (`a/b` and `a__b` fold alike): never pruned."""
    data_dir = tmp_path / "data"
    (data_dir / "backups").mkdir(parents=True)
    legacy = [data_dir / "backups" / f"p__a__b.json.20250101T000000{i:09d}.bak" for i in range(KEPT + 3)]
    for f in legacy:
        f.write_bytes(b"old")
    for i in range(KEPT + 2):
        files.backup(data_dir, Path("/p/a/b.json"), b"new")
    assert all(f.read_bytes() == b"old" for f in legacy)
    assert len(files.backups_of(data_dir, Path("/p/a/b.json"))) == KEPT
