"""Pi's own doctor rows: the version of the `pi` found on PATH (the extension API this install
was checked against is 0.73.1's)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from leanctx.agents.base import Agent

CHECKED = "0.73.1"


def doctor_checks(agent: Agent, home: Path, project: Path | None = None) -> list[dict]:
    exe = shutil.which("pi")
    if exe is None:
        return [{"name": "pi version", "status": "info", "detail": "pi is not on PATH: version not checked", "fix": None}]
    try:
        cp = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                            env={**__import__("os").environ, "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1"})
        version = (cp.stdout or cp.stderr).strip().splitlines()[-1] if (cp.stdout or cp.stderr).strip() else ""
    except (OSError, subprocess.SubprocessError) as exc:
        return [{"name": "pi version", "status": "fail", "detail": f"{exe} --version: {exc}", "fix": None}]
    if not version:
        return [{"name": "pi version", "status": "fail", "detail": f"{exe} --version printed nothing", "fix": None}]
    note = "" if version.endswith(CHECKED) else f" (leanctx's extension was checked against {CHECKED})"
    return [{"name": "pi version", "status": "ok", "detail": f"pi {version}{note}", "fix": None}]
