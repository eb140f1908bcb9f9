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
}
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
}


def installed_version(package: str) -> str | None:
    manifest = PREFIX / "node_modules" / package / "package.json"
    try:
        return json.loads(manifest.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def ensure(timeout: float = 600.0) -> str | None:
    """Install whatever pinned CLI is missing; returns None on success, else why it could not."""
    missing = [f"{p}@{v}" for p, v in PINNED.items() if installed_version(p) != v]
    if not missing:
        return None
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
    return None


if __name__ == "__main__":
    problem = ensure()
    if problem:
        sys.exit(problem)
    for binary, package in BINARIES.items():
        print(f"{binary}: {package} {installed_version(package)} in {PREFIX / 'node_modules'}")
