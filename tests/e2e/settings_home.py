"""The start of an e2e run on a host that keeps hooks and MCP in one settings.json (Gemini, Qwen):
a project file to read, the user's own settings, `leanctx init`, and our test's tap hook."""
from __future__ import annotations

from pathlib import Path

from tests.e2e import tracetap

BIG = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))


def wire(hh, lean, agent: str, user_settings: str) -> tuple[Path, bytes, bytes, Path]:
    """(settings path, its bytes before init, after init, the tap log) with big.py in the project."""
    (hh.proj / "big.py").write_text(BIG)
    settings = hh.home / f".{agent}" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(user_settings)
    original = settings.read_bytes()
    lean.run("init", "--agent", agent)
    wired = settings.read_bytes()
    assert b"// the user's own settings" in wired  # init keeps the user's comment
    return settings, original, wired, tracetap.install_tap(settings, hh.root, agent=agent)
