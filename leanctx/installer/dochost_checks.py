"""Doctor rows for hosts wired from documentation only (Crush, Goose, Antigravity CLI): the
version of the CLI found on PATH against the module's `min_version`, and a note that no run
verified the wiring. Found by host name through hostload.HOST_CHECKS."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from leanctx.agents.base import Agent

VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """The first x.y.z in a `--version` output (`crush version v0.90.0`, `goose 1.44.0`)."""
    found = VERSION.search(text)
    return tuple(int(n) for n in found.groups()) if found else None  # type: ignore[return-value]


def doctor_checks(agent: Agent, home: Path, project: Path | None = None) -> list[dict]:
    rows = [{"name": "verified", "status": "info", "fix": None,
             "detail": f"documentation only, never run: {agent.checked_against}"}]
    command = agent.version_command
    exe = shutil.which(command[0]) if command else None
    if exe is None:
        return rows + [{"name": "version", "status": "info", "fix": None,
                        "detail": f"{command[0] if command else agent.name} is not on PATH: version not checked"}]
    try:
        done = subprocess.run([exe, *command[1:]], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return rows + [{"name": "version", "status": "fail", "detail": f"{exe} {' '.join(command[1:])}: {exc}", "fix": None}]
    text = (done.stdout or done.stderr).strip()
    version = parse_version(text)
    if version is None:
        return rows + [{"name": "version", "status": "info", "fix": None, "detail": f"no version in {text[:80]!r}"}]
    shown = ".".join(map(str, version))
    floor = parse_version(agent.min_version) if agent.min_version else None
    if floor is not None and version < floor:
        return rows + [{"name": "version", "status": "fail",
                        "detail": f"{agent.display_name} {shown} is older than {agent.min_version}, the first with the hooks leanctx wires: "
                                  "they are ignored",
                        "fix": f"upgrade {agent.display_name} to {agent.min_version} or later"}]
    return rows + [{"name": "version", "status": "ok", "fix": None, "detail": f"{agent.display_name} {shown}"}]
