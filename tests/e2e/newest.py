"""Run the end-to-end suite against the newest version of every host CLI on npm.

CI runs the pinned versions (tests/e2e/install_clis.py); users run whatever npm gave them last
week. This script asks npm for each pinned package's newest version, installs those into a prefix
of their own (`.ci/newest`, the pinned install is left alone), runs each host's end-to-end test
files against them (LEANCTX_HOST_CLI_DIR points the tests there) and prints a matrix: host, pinned
version, newest version, and pass/fail per test.

    python tests/e2e/newest.py                 # every host
    python tests/e2e/newest.py claude qwen     # some hosts
    python tests/e2e/newest.py --markdown      # the matrix as docs/hosts.md shows it

Only npm's registry is contacted (for versions and packages); the tests themselves stay on
127.0.0.1 like every e2e test.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.e2e import install_clis  # noqa: E402

REPO = install_clis.REPO
NEWEST = REPO / ".ci" / "newest"
E2E = REPO / "tests" / "e2e"
# host -> (npm package, its e2e test files; KEYWORDS narrows files shared by a family); files that drive several hosts at once (the session
# bench, the hostile repository, output cuts) are left to the pinned run
HOSTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "claude": ("@anthropic-ai/claude-code", (
        "test_claude_e2e.py", "test_builtin_read_e2e.py", "test_compaction_carry_e2e.py", "test_channel_e2e.py",
        "test_read_gate_squatter_e2e.py", "test_rewind_interactive_e2e.py")),
    "codex": ("@openai/codex", ("test_codex_e2e.py", "test_codex_cache_e2e.py", "test_codex_shell_read_e2e.py")),
    "gemini": ("@google/gemini-cli", ("test_gemini_e2e.py", "test_gemini_builtin_read_e2e.py", "test_gemini_compression_e2e.py")),
    "qwen": ("@qwen-code/qwen-code", ("test_qwen_e2e.py", "test_qwen_builtin_read_e2e.py", "test_qwen_compression_e2e.py")),
    "copilot": ("@github/copilot", ("test_copilot_e2e.py", "test_copilot_builtin_read_e2e.py")),
    "opencode": ("opencode-ai", ("test_opencode_e2e.py", "test_opencode_builtin_read_e2e.py",
                                 "test_opencode_compaction_subagent_e2e.py")),
    "kilo": ("@kilocode/cli", ("test_opencode_e2e.py", "test_opencode_builtin_read_e2e.py")),
    "cline": ("cline", ("test_cline_e2e.py",)),
    "codebuddy": ("@tencent-ai/agent-sdk", ("test_codebuddy_e2e.py", "test_codebuddy_builtin_read_e2e.py")),
    "droid": ("droid", ("test_droid_e2e.py", "test_droid_builtin_read_e2e.py")),
    "pi": ("@mariozechner/pi-coding-agent", ("test_pi_e2e.py", "test_pi_builtin_read_e2e.py")),
    "openclaw": (install_clis.OPENCLAW_PACKAGE, ("test_openclaw_e2e.py", "test_openclaw_read_e2e.py")),
    # Amp now publishes under @ampcode/cli, which the pinned @sourcegraph/amp depends on
    "amp": ("@ampcode/cli", ("test_amp_e2e.py",)),
    "auggie": ("@augmentcode/auggie", ("test_auggie_e2e.py",)),
}
# tests parametrized over the OpenCode family carry the host's name in their id
KEYWORDS = {"opencode": "not kilo", "kilo": "kilo"}


def npm() -> str:
    found = shutil.which("npm")
    if found is None:
        sys.exit("npm is not installed (Node.js is needed for the end-to-end tests)")
    return found


def newest_version(package: str) -> str | None:
    proc = subprocess.run([npm(), "view", package, "version"], capture_output=True, text=True, timeout=120)
    lines = proc.stdout.strip().splitlines()
    return lines[-1].strip() if proc.returncode == 0 and lines else None


def pinned_version(package: str) -> str | None:
    if package == install_clis.OPENCLAW_PACKAGE:
        return install_clis.OPENCLAW_VERSION
    return install_clis.PINNED.get(package) or install_clis.installed_version(package)


def install(package: str, version: str) -> str | None:
    """Install one package's version into .ci/newest (OpenClaw, which needs Node 24, into
    .ci/newest/openclaw); None on success, else why not."""
    openclaw = package == install_clis.OPENCLAW_PACKAGE
    if openclaw and version == install_clis.OPENCLAW_VERSION:
        return install_clis.ensure_openclaw()
    prefix = NEWEST / "openclaw" if openclaw else NEWEST
    if install_clis.installed_version(package, prefix) == version:
        return None
    prefix.mkdir(parents=True, exist_ok=True)
    if not (prefix / "package.json").exists():
        (prefix / "package.json").write_text('{"name": "leanctx-e2e-newest", "private": true}\n')
    env = dict(os.environ)
    if openclaw:
        env["PATH"] = f"{install_clis.node24_bin()}{os.pathsep}{env.get('PATH', '')}"
    print(f"installing {package}@{version} into {prefix}", flush=True)
    proc = subprocess.run([npm(), "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"{package}@{version}"],
                          capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode != 0 or install_clis.installed_version(package, prefix) != version:
        last = [line for line in proc.stderr.strip().splitlines() if "npm error" in line][:2] or proc.stderr.strip().splitlines()[-1:]
        return f"npm install {package}@{version} failed: {' '.join(last)[:300]}"
    return None


def does_not_run(host: str) -> str | None:
    """Why the installed newest CLI does not even print its version (a platform package missing
    from the registry leaves a launcher without its binary); None when it runs."""
    from leanctx import agents, hostversions

    agent = agents.get(host)
    bin_dir = NEWEST / "node_modules" / ".bin"
    if not agent.version_command or not (bin_dir / agent.version_command[0]).exists():
        return None
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    if host == "openclaw":
        return None
    _, version, why = hostversions.installed(agent, env)
    if version is not None:
        return None
    return f"installed, but it does not run: {why}"


def run_host(host: str, files: tuple[str, ...], newest: str, pinned: str | None) -> list[tuple[str, str]]:
    """(test id, "passed"|"failed"|"skipped") for one host's e2e files against its newest CLI."""
    present = [str(E2E / f) for f in files if (E2E / f).exists()]
    if not present:
        return []
    env = dict(os.environ, LEANCTX_HOST_CLI_DIR=str(NEWEST / "node_modules" / ".bin"))
    if host == "openclaw" and newest != pinned:
        env["LEANCTX_OPENCLAW_PREFIX"] = str(NEWEST / "openclaw")
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "junit.xml"
        print(f"{host}: running {len(present)} test file(s) against {newest}", flush=True)
        narrow = ["-k", KEYWORDS[host]] if host in KEYWORDS else []
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *narrow, *present],
                       cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600)
        if not report.exists():
            return [("(the run)", "failed")]
        results = []
        for case in ET.parse(report).iter("testcase"):
            outcome = "passed"
            if case.find("failure") is not None or case.find("error") is not None:
                outcome = "failed"
            elif case.find("skipped") is not None:
                outcome = "skipped"
            results.append((f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}", outcome))
        return results


def markdown(rows: list[dict], when: str) -> str:
    lines = [f"Run {when} with `python tests/e2e/newest.py`.", "",
             "| host | pinned (CI) | newest on npm | passed | failed | skipped | failed tests |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        outcomes = [o for _, o in row["results"]]
        failed = ", ".join(f"`{t}`" for t, o in row["results"] if o == "failed") or "—"
        lines.append(f"| {row['host']} | {row['pinned'] or '—'} | {row['newest'] or 'not on npm'} | {outcomes.count('passed')} | "
                     f"{outcomes.count('failed')} | {outcomes.count('skipped')} | {row['why'] or failed} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hosts", nargs="*", metavar="HOST", help=f"any of {', '.join(HOSTS)} (default: all)")
    parser.add_argument("--markdown", action="store_true", help="print the matrix as a Markdown table")
    parser.add_argument("--changed-only", action="store_true", help="run only the hosts whose newest version is not the pinned one")
    args = parser.parse_args(argv)
    unknown = [h for h in args.hosts if h not in HOSTS]
    if unknown:
        parser.error(f"unknown host(s) {', '.join(unknown)}; known: {', '.join(HOSTS)}")
    chosen = args.hosts or list(HOSTS)
    rows = []
    for host in chosen:
        package, _ = HOSTS[host]
        rows.append({"host": host, "package": package, "pinned": pinned_version(package), "newest": newest_version(package),
                     "results": [], "why": ""})
    for row in rows:
        if row["newest"] is None:
            row["why"] = "npm view failed"
    for row in rows:
        if not row["newest"]:
            continue
        problem = install(row["package"], row["newest"])
        if problem:
            row["why"] = problem
            print(problem, file=sys.stderr)
            continue
        if args.changed_only and row["newest"] == row["pinned"]:
            row["why"] = "newest is the pinned version: see the pinned run (.ci/run)"
            continue
        broken = does_not_run(row["host"])
        if broken:
            row["why"] = broken
            print(broken, file=sys.stderr)
            continue
        row["results"] = run_host(row["host"], HOSTS[row["host"]][1], row["newest"], row["pinned"])
    when = datetime.date.today().isoformat()
    if args.markdown:
        print(markdown(rows, when), end="")
    else:
        for row in rows:
            outcomes = [o for _, o in row["results"]]
            print(f"{row['host']:<10} pinned {row['pinned'] or '-':<12} newest {row['newest'] or '-':<28} "
                  f"passed {outcomes.count('passed'):>3}  failed {outcomes.count('failed'):>3}  skipped {outcomes.count('skipped'):>3}"
                  + (f"  ({row['why']})" if row["why"] else ""))
            for test, outcome in row["results"]:
                print(f"    {outcome:<8} {test}")
    return 1 if any(o == "failed" for row in rows for _, o in row["results"]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
