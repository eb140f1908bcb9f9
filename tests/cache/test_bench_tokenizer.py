"""Every bench that prints token figures says which tokenizer counted them (an estimate says so
and how to get exact counts). The benches run as a user runs them, in a subprocess, with
tiktoken's cache empty so that the default of a standard install is what counts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench(tmp_path: Path, *args: str, **env: str) -> list[str]:
    e = {k: v for k, v in os.environ.items() if k not in ("LEANCTX_TOKENIZER", "PYTHONPATH")}
    e.update(TIKTOKEN_CACHE_DIR=str(tmp_path / "tiktoken-cache"), **env)
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=e, timeout=300, cwd=tmp_path)
    assert out.returncode in (0, 1), out.stderr  # 1: a target missed, still a printed report
    return out.stdout.splitlines()


def test_cache_replay_names_its_tokenizer(tmp_path: Path) -> None:
    lines = bench(tmp_path, str(BENCH / "cache_replay.py"), "--scale", "0.1", "--no-recorded")
    assert lines[0] == "cache_replay: seed 7, scale 0.1, tokenizer cl100k_base"
    assert lines[1] == "tokens counted with tiktoken cl100k_base"
    est = bench(tmp_path, str(BENCH / "cache_replay.py"), "--scale", "0.1", "--no-recorded", LEANCTX_TOKENIZER="estimate")
    assert est[0].endswith("tokenizer estimate-chars/4")
    assert est[1].startswith("tokens estimated (characters/4), not counted: LEANCTX_TOKENIZER=estimate; for exact counts: ")


def test_read_latency_names_its_tokenizer(tmp_path: Path) -> None:
    lines = bench(tmp_path, str(BENCH / "read_latency.py"), "--runs", "3", "--lines", "50")
    tok = [line for line in lines if line.startswith("tokens: ")]
    assert len(tok) == 1 and tok[0].endswith(" (stub); tokens counted with tiktoken cl100k_base"), lines
