"""Big host configs: init, re-init, doctor and uninstall on an 18 MB ~/.claude.json vs. the json floor.

Claude Code's ~/.claude.json grows with every project's prompt history; users with months of
history have files of tens of MB. leanctx edits that file in place (the `mcpServers` entry) and
must not take much longer, or much more memory, than reading and writing it once. What it does,
all in one run so the figures share the machine's current speed:
1. generates, in a temporary HOME, a realistic ~/.claude.json (2-space indent as Claude Code
   writes it; many `projects` with prompt histories, unicode, nested objects) of --mb MB and a
   ~/.claude/settings.json of --settings-mb MB (a long permissions list and env, the user's hooks);
2. runs each command in a fresh subprocess (`python -m leanctx ...`, temp HOME and LEANCTX_HOME,
   no network): `init --agent claude` on the untouched files (first), `init` again (no-op),
   `doctor --agent claude`, `uninstall --agent claude`; each from the same starting files;
   and, for reference, the same with both files small (doctor's MCP round trip and hook smoke
   runs take the same time whatever the size);
3. the floor, in a subprocess of the same interpreter: `json.loads` + `json.dumps(indent=2)` of
   the same file, read from disk;
4. prints the median wall time of --runs runs, its ratio to the floor of the same file, and the
   extra peak memory as a multiple of the file size.

Extra peak memory = the child's peak RSS (VmHWM, written by the child at exit) minus the peak RSS
of a baseline child that only imports the same modules (`leanctx.cli` for the commands, `json`
for the floor). RSS rather than tracemalloc because it counts everything the process really held
(the decoded text, C-level buffers of json and re, freed-but-not-returned arenas) and needs no
instrumentation that would slow the run.

Targets: init <= 5x floor and <= 3x the file size extra peak memory;
no-op re-init <= 2x floor.

Usage: python bench/big_config.py [--runs N] [--mb MB] [--settings-mb MB] [--ascii]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.installer.big_configs import claude_json, settings_json  # noqa: E402  (the tests use the same files)
# Every child runs through this wrapper, which writes its own VmHWM (peak RSS of the process
# since its exec) at exit. ru_maxrss from wait4 would not do: on Linux it keeps the parent's peak
# from before the exec, i.e. this bench's own memory.
WRAPPER = (
    "import atexit, runpy, sys\n"
    "out = sys.argv[1]\n"
    "def hwm():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            open(out, 'w').write(str(int(line.split()[1]) * 1024))\n"
    "atexit.register(hwm)\n"
    "kind, what = sys.argv[2], sys.argv[3]\n"
    "sys.argv = [what] + sys.argv[4:]\n"
    "if kind == '-m':\n"
    "    runpy.run_module(what, run_name='__main__', alter_sys=True)\n"
    "else:\n"
    "    exec(compile(what, '<bench>', 'exec'), {'__name__': '__main__'})\n"
)


def measure(kind: str, what: str, args: list[str], env: dict, scratch: Path) -> tuple[float, int]:
    """(wall seconds, peak RSS in bytes) of one child: `python -m what args` or `python -c what args`."""
    report = scratch / "hwm"
    report.unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, str(report), kind, what, *args], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{kind} {what} {args} exited {proc.returncode}:\n{proc.stderr.decode(errors='replace')}")
    return elapsed, int(report.read_text())


# The floor: read, json.loads, json.dumps, write. Compact dumps runs in C; indent=2 (the layout
# Claude Code writes) makes CPython fall back to its pure-Python encoder, so both are shown and
# ratios are taken against the faster, compact one.
FLOOR = "import json,sys; p=sys.argv[1]; t=open(p,encoding='utf-8').read(); open(p+'.out','w',encoding='utf-8').write(json.dumps(json.loads(t),ensure_ascii=False))"
FLOOR_INDENT = FLOOR.replace("ensure_ascii=False", "ensure_ascii=False,indent=2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mb", type=float, default=18.0)
    parser.add_argument("--settings-mb", type=float, default=5.6)
    parser.add_argument("--ascii", action="store_true", help="prompts without non-ASCII text (Python then holds the text at 1 byte a character, not 4)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="leanctx-bigconfig-"))
    try:
        small_claude = json.dumps({"numStartups": 1, "projects": {}}, indent=2)
        small_settings = json.dumps({"env": {"FOO": "bar"}}, indent=2)
        scenarios = [
            ("~/.claude.json", ".claude.json", claude_json(int(args.mb * 1e6), ascii_only=args.ascii), small_settings),
            ("settings.json", ".claude/settings.json", small_claude, settings_json(int(args.settings_mb * 1e6))),
            ("small files (reference: what does not depend on size)", ".claude.json", small_claude, small_settings),
        ]
        print(f"median of {args.runs} runs; {sys.executable} {sys.version.split()[0]}")
        for label, big_name, claude_text, settings_text in scenarios:
            print()
            run_scenario(root, args.runs, label, big_name, claude_text, settings_text)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_scenario(root: Path, runs: int, label: str, big_name: str, claude_text: str, settings_text: str) -> None:
    """One big file (the other one small): every command, the floor and the baselines, interleaved."""
    seed = root / "seed"
    shutil.rmtree(seed, ignore_errors=True)
    (seed / ".claude").mkdir(parents=True)
    (seed / ".claude.json").write_text(claude_text, encoding="utf-8")
    (seed / ".claude" / "settings.json").write_text(settings_text, encoding="utf-8")
    size = (seed / big_name).stat().st_size

    home, data = root / "home", root / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEANCTX_", "CLAUDE_", "CKS_"))}
    env.update(HOME=str(home), LEANCTX_HOME=str(data), PYTHONPATH=str(REPO), CKS_HOME=str(root / "cks"))
    leanctx = [sys.executable, "-m", "leanctx"]

    def fresh(installed: bool) -> None:
        for d in (home, data):
            shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(seed, home)
        data.mkdir()
        if installed:
            subprocess.run(leanctx + ["init", "--agent", "claude"], env=env, check=True, stdout=subprocess.DEVNULL)

    rows: dict[str, list[tuple[float, int]]] = {}

    def run(name: str, kind: str, what: str, args: list[str], installed: bool = False) -> None:
        fresh(installed)
        elapsed, rss = measure(kind, what, args, env, root)
        rows.setdefault(name, []).append((elapsed, rss))

    for _ in range(runs):
        run("baseline cli", "-c", "import leanctx.cli, leanctx.installer.commands, leanctx.doctor", [])
        run("baseline json", "-c", "import json", [])
        run("floor: json.loads + json.dumps", "-c", FLOOR, [str(home / big_name)])
        run("floor: json.loads + json.dumps(indent=2)", "-c", FLOOR_INDENT, [str(home / big_name)])
        run("init --agent claude (first)", "-m", "leanctx", ["init", "--agent", "claude"])
        run("init --agent claude (no-op re-init)", "-m", "leanctx", ["init", "--agent", "claude"], installed=True)
        run("doctor --agent claude", "-m", "leanctx", ["doctor", "--agent", "claude"], installed=True)
        run("uninstall --agent claude", "-m", "leanctx", ["uninstall", "--agent", "claude"], installed=True)

    def med(name: str) -> tuple[float, int]:
        return statistics.median(t for t, _ in rows[name]), statistics.median(m for _, m in rows[name])

    floor = med("floor: json.loads + json.dumps")[0]
    print(f"{label}: {size / 1e6:.1f} MB" + (" (the other file small)" if size > 1e5 else "") + "\n")
    print("| run | time | vs floor | extra peak memory |")
    print("|---|---:|---:|---:|")
    for name in rows:
        if name.startswith("baseline"):
            continue
        elapsed, rss = med(name)
        base = med("baseline json" if name.startswith("floor") else "baseline cli")[1]
        if size < 1e5:  # the small-files reference: ratios to a tiny file say nothing
            print(f"| {name} | {elapsed:.2f} s | | {(rss - base) / 1e6:.0f} MB |")
        else:
            print(f"| {name} | {elapsed:.2f} s | {elapsed / floor:.1f}x | {(rss - base) / 1e6:.0f} MB = {(rss - base) / size:.1f}x file |")


if __name__ == "__main__":
    main()
