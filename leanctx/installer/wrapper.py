"""The hook wrapper script: the one command every host config points at.

Like pre-commit's hook-tmpl: a marker line identifies the file as ours, the absolute interpreter
path is baked in (hosts run hooks under a non-login `sh -c` where `leanctx` may not be on PATH),
and the script degrades to "exit 0 with a message on stderr" when that interpreter or the package
is gone. Its path is stable (`<data dir>/bin/leanctx-hook`), so upgrading leanctx rewrites this
file only, never the hosts' configs (Codex trusts hooks by a hash of their command text).
"""

from __future__ import annotations

import re
import shlex
import sys
from importlib import resources
from pathlib import Path

import leanctx
from leanctx import launch, paths, templating

MARKER = "# leanctx-wrapper: 1"
_VERSION_LINE = re.compile(r"^# leanctx-version: (\S+)$", re.M)
_PYTHON_LINE = re.compile(r"""^LEANCTX_PYTHON=((?:'[^']*'|"'"|[^\s'"])+)""", re.M)  # one sh word, as shlex.quote wrote it


def package_root() -> Path:
    """The folder to put on sys.path so `import leanctx` finds this installation."""
    return launch.package_root()


def render(data_dir: Path, python: str | None = None, src: Path | None = None) -> str:
    """The wrapper for this installation, every value quoted for sh and filled in one pass (an
    install path holding `@DATA_DIR@`, quotes or `$(...)` stays one inert word)."""
    template = resources.files("leanctx").joinpath("templates/hook-wrapper.sh").read_text(encoding="utf-8")
    values = {
        "VERSION": leanctx.__version__,
        "PYTHON": shlex.quote(python or sys.executable),
        "SRC": shlex.quote(str(src or package_root())),
        "DATA_DIR": shlex.quote(str(data_dir)),
        "STDERR_IS_OUTPUT": " ".join(quiet_agents()),
        "BOOT": shlex.quote(launch.BOOT),
    }
    return templating.fill(template, values, "hook-wrapper.sh")


def quiet_agents() -> list[str]:
    """Hosts that read a hook's stderr as its answer (Gemini CLI): the wrapper writes nothing there."""
    from leanctx import agents

    return [a.name for a in agents.all_agents() if a.stderr_is_output]


def command(wrapper: Path, agent: str, event: str, flags: tuple[str, ...] = ()) -> str:
    """The hook command written into a host config: quoted absolute wrapper path, agent, event,
    and the profile flags (`--bot`, `--guard`), visible in the config so doctor can read them."""
    return " ".join([shlex.quote(str(wrapper)), agent, event, *flags])


def is_ours(text: str) -> bool:
    return MARKER in text


def read_info(path: Path) -> dict:
    """What doctor needs to know about an installed wrapper (empty dict if absent or foreign)."""
    from leanctx.installer import files

    try:
        data = files.read_bytes(path)
    except files.ConfigError as exc:
        return {"unreadable": str(exc)}
    if data is None:
        return {}
    text = data.decode("utf-8", "replace")
    if not is_ours(text):
        return {"foreign": True}
    version = _VERSION_LINE.search(text)
    python = _PYTHON_LINE.search(text)
    return {
        "version": version.group(1) if version else None,
        "python": shlex.split(python.group(1))[0] if python else None,
    }


def wrapper_path(data_dir: Path) -> Path:
    return data_dir / "bin" / paths.WRAPPER_NAME
