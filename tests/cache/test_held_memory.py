"""What the read cache holds in memory costs about its UTF-8 bytes (the target: a daemon holding
1,000 files of 40 KB stays within 3x the held bytes; bench/daemon_memory.py measures the RSS).
Counted here exactly with tracemalloc, on the real cache code: a file with one emoji held as a
Python str took 4 bytes a character (PEP 393), so ~4x its bytes."""

from __future__ import annotations

import gc
import tracemalloc

from tests.cache.conftest import World

FILES, SIZE = 40, 40 * 1024


def _emoji_file(world: World, rel: str, i: int) -> bytes:
    lines = ["# status: done \u2705\n"] + [f"def f{i}_{j}(value):  # line {j}\n    return value * {j}\n" for j in range(SIZE // 40)]
    data = "".join(lines).encode()[:SIZE].rsplit(b"\n", 1)[0] + b"\n"
    world.write(rel, data)
    return data


def test_held_file_text_costs_its_utf8_bytes(world: World) -> None:
    h = world.host()
    world.session(h, "conv-mem")
    c = world.conn(h)
    sizes = [len(_emoji_file(world, f"f{i}.py", i)) for i in range(FILES)]
    world.read(c, "f0.py", fresh=True)  # code paths and tokenizer warm before counting
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(1, FILES):
            assert world.read(c, f"f{i}.py")["kind"] == "full"
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    held = sum(sizes[1:])
    assert grown <= 1.3 * held, f"{grown} bytes allocated to hold {held} bytes of file text ({grown / held:.2f}x)"
    stats = world.cache.stats()
    assert stats["contents"] == FILES and stats["content_bytes"] == sum(sizes)


def test_a_diff_of_a_held_emoji_file_is_exact(world: World) -> None:
    """The held bytes are decoded back for a diff: the changed line comes back as it is on disk."""
    h = world.host()
    world.session(h, "conv-diff")
    c = world.conn(h)
    data = _emoji_file(world, "e.py", 1)
    assert world.read(c, "e.py")["kind"] == "full"
    text = data.decode()
    world.write("e.py", text.replace("# line 7\n", "# line 7 \u2728 changed\n", 1))
    out = world.read(c, "e.py")
    assert out["kind"] == "diff", out["kind"]
    assert "-def f1_7(value):  # line 7\n" in out["text"] and "+def f1_7(value):  # line 7 \u2728 changed\n" in out["text"]
