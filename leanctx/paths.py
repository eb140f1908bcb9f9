"""Where leanctx keeps its own files.

The data dir is `LEANCTX_HOME` when set, else the platform's user data dir for "leanctx"
(platformdirs; `~/.local/share/leanctx` on Linux). Host config locations are the hosts' own
business and live in each agent module; they are all derived from `HOME`.

This module is imported by the hook fast path, so platformdirs is imported lazily: the hook
wrapper always exports `LEANCTX_HOME`, and the hook never pays for the import.
"""

from __future__ import annotations

import os
from pathlib import Path

WRAPPER_NAME = "leanctx-hook"


def home() -> Path:
    """The user's home, from `HOME` first so tests and sandboxes can relocate everything."""
    env = os.environ.get("HOME")
    return Path(env) if env else Path.home()


def data_dir() -> Path:
    env = os.environ.get("LEANCTX_HOME")
    if env:
        return Path(env).expanduser()
    return default_data_dir()


def usable_data_dir() -> Path:
    """The data dir, checked: safedir.Unsafe (one line with the fix) when another account owns
    it, can write into it, or can swap a folder on its path."""
    from leanctx import safedir

    path = data_dir()
    safedir.check(path)
    return path


def default_data_dir() -> Path:
    """The data dir without LEANCTX_HOME: what a process started by a host finds on its own."""
    import platformdirs

    return Path(platformdirs.user_data_dir("leanctx", appauthor=False))


def wrapper_path(base: Path | None = None) -> Path:
    return (base or data_dir()) / "bin" / WRAPPER_NAME


def conversations_dir(base: Path | None = None) -> Path:
    return (base or data_dir()) / "conversations"


def active_transcript_path(base: Path | None = None) -> Path:
    return (base or data_dir()) / "active_transcript.json"


def hook_log_path(base: Path | None = None) -> Path:
    return (base or data_dir()) / "logs" / "hooks.log"


def backups_dir(base: Path | None = None) -> Path:
    return (base or data_dir()) / "backups"


def manifests_dir(base: Path | None = None) -> Path:
    return (base or data_dir()) / "installed"
