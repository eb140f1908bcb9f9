"""A cloned repository that tries to run its own code in whatever leanctx starts inside it.

Every file that Python or git could pick up from the current folder writes a marker file (its
own name) into `markers` when it is imported or run: a `leanctx/` package, modules named like
the standard library ones leanctx imports, `site.py`/`sitecustomize.py`, and a `.git/config`
whose fsmonitor and clean filter are programs. `ran(markers)` lists what ran; git's programs
also record the command lines of git's ancestors, so a host's own `git status` is told apart.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

OURS = re.compile(r"leanctx\.hooks|leanctx-hook|leanctx\.cache|-m leanctx|(^| )leanctx (mcp|serve|cli)\b")  # our processes' command lines
PY_MODULES = ("json", "socket", "site", "sitecustomize", "runpy", "re", "struct", "select", "selectors", "subprocess",
              "threading", "tempfile", "shlex", "signal", "uuid", "hashlib", "base64", "platform", "click", "psutil")


def make(repo: Path, markers: Path) -> Path:
    markers.mkdir(parents=True, exist_ok=True)
    repo.mkdir(parents=True, exist_ok=True)

    def plant(path: Path, name: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"open({str(markers / name)!r}, 'w').close()\nraise SystemExit(97)\n")

    plant(repo / "leanctx" / "__init__.py", "leanctx")
    for name in PY_MODULES:
        plant(repo / f"{name}.py", name)
    script = repo / "hook.sh"
    # records who ran it: the command lines of git's ancestors (a host may run git itself)
    script.write_text("#!/bin/sh\n"
                      f"out={shlex.quote(str(markers))}/$1\n"
                      "pid=$PPID\nfor _ in 1 2 3 4 5 6; do\n"
                      "  [ -r /proc/$pid/cmdline ] || break\n"
                      "  tr '\\0' ' ' </proc/$pid/cmdline >>\"$out\"; echo >>\"$out\"\n"
                      "  pid=$(awk '{print $4}' /proc/$pid/stat)\n"
                      "done\ntouch \"$out\"\n[ \"$1\" = clean ] && exec cat\nexit 0\n")  # a clean filter passes the content on
    script.chmod(0o755)
    git = ["git", "-C", str(repo), "-c", "user.email=t@example.invalid", "-c", "user.name=t", "-c", "core.hooksPath=/dev/null"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "a repository"], check=True)
    with open(repo / ".git" / "config", "a") as config:  # only now: set up while committing, these would run
        config.write(f"[core]\n\tfsmonitor = {script} fsmonitor\n[filter \"x\"]\n\tclean = {script} clean\n")
    (repo / ".gitattributes").write_text("* filter=x\n")
    (repo / "json.py").write_text((repo / "json.py").read_text() + "# edited\n")  # a change for status to look at
    return repo


def ran(markers: Path) -> list[str]:
    return sorted(os.listdir(markers))


def ran_by_leanctx(markers: Path) -> list[str]:
    """What ran with leanctx among the runner's ancestors (a host running git itself is not us)."""
    return [name for name in ran(markers) if name not in ("fsmonitor", "clean") or OURS.search((markers / name).read_text())]
