"""The console examples in README.md and docs/*.md are produced by running them, so they cannot drift.

A generated block in a Markdown file looks like this:

    <!-- example: NAME -->
    ```console
    $ leanctx init --agent claude
    (whatever that printed)
    ```
    <!-- /example -->

The `$ ` lines are the commands. Each block runs in a fresh HOME (made ready by the setup named
NAME in SETUPS), its commands in order through `bash -c` from `~/proj`, with this installation's
`leanctx` first on PATH, and the block is rewritten as each command followed by what it printed
(stdout and stderr interleaved, as a terminal shows them). Paths of the machine are replaced: the
HOME by `/home/you`, the interpreter by `/path/to/venv/bin/python`, this checkout by
`/path/to/leanctx`; what prints `~` keeps printing `~`.

    python -m tests.readme_examples           # check every block (exit 1 and a diff when stale)
    python -m tests.readme_examples --update  # rewrite the blocks (and README's support matrix)

tests/test_readme_examples.py runs the check. Timings (`24 ms`, `3 s ago`) and generated ids are
masked when comparing, never when writing.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"(<!-- example: (?P<name>[\w-]+) -->\n```console\n)(?P<body>.*?)(```\n<!-- /example -->)", re.S)
VOLATILE = [
    (re.compile(r"\b\d+(\.\d+)? (ms|s|min|h)\b"), "# \\2"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<time>"),
    (re.compile(r"\bpid \d+"), "pid #"),
]

CLAUDE_SETTINGS = """{
  // my settings
  "model": "opus",
  "hooks": {
    "Stop": [ { "hooks": [ { "type": "command", "command": "notify-send done" } ] } ]
  }
}
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _claude_dir(home: Path) -> None:
    (home / ".claude").mkdir(parents=True, exist_ok=True)


def _codex_dir(home: Path) -> None:
    (home / ".codex").mkdir(parents=True, exist_ok=True)


def _broken_settings(home: Path) -> None:
    _write(home / ".claude" / "settings.json", '{\n  "model": "opus",\n  "hooks": {\n')


def _refusals(home: Path) -> None:
    """One refusal per host: unparseable, a server of the user's, a FIFO, a folder linked out of HOME."""
    _broken_settings(home)
    _write(home / ".codex" / "config.toml", '[mcp_servers.leanctx]\ncommand = "my-leanctx"\nenv = { TOKEN = "secret" }\n')
    (home / ".cursor").mkdir()
    os.mkfifo(home / ".cursor" / "hooks.json")
    elsewhere = home.parent / "elsewhere"
    elsewhere.mkdir()
    (home / ".codebuddy").symlink_to(elsewhere)


def _commented_settings(home: Path) -> None:
    _write(home / ".claude" / "settings.json", CLAUDE_SETTINGS)


def _nothing(home: Path) -> None:
    return None


# One Claude Code conversation's reads, played through the real read cache (tests/cache's World:
# hook records, transcript, the cache core) in a process of its own with the example's environment,
# its index then put where `leanctx stats` finds it with no daemon running.
READS = r"""
import os, shutil, sys
from pathlib import Path
from tests.cache.conftest import World, code
from tests.cache.test_stats_net import Host
from leanctx import paths
from leanctx.cache import client
from leanctx.cache.index import index_path

world = World(Path(sys.argv[1]))
world.write("app.py", code(400))
world.write("util.py", code(120, "u"))
host = Host(world, "7f3c2a")
host.ctx_read("app.py")
host.ctx_read("app.py")        # unchanged: the stub
host.builtin("app.py")         # the built-in Read of the same bytes: refused with the stub
host.builtin("util.py")        # a first read: runs, credited
host.builtin("util.py", "shell")  # `cat util.py` in its shell: refused with the stub
host.ctx_read("util.py", fresh=True)  # the model wanted it after all: that stub's saving goes
world.cache.save()
dest = client.cache_dir(paths.usable_data_dir())
os.makedirs(dest, mode=0o700, exist_ok=True)
shutil.copy(index_path(str(world.state)), os.path.join(dest, "read_index.json"))
"""


def _read_history(home: Path) -> None:
    env = {**_environment(home, home), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", READS, str(home.parent / "world")], env=env, cwd=REPO, check=True,
                   capture_output=True, timeout=120)


def _host_clis(home: Path) -> None:
    """Two host CLIs on the example's PATH (~/.local/bin), printing versions as the real ones do."""
    for name, prints in (("claude", "2.1.340 (Claude Code)"), ("gemini", "0.61.0")):
        _write(home / ".local" / "bin" / name, f"#!/bin/sh\necho '{prints}'\n")
        (home / ".local" / "bin" / name).chmod(0o755)


SETUPS: dict[str, Callable[[Path], None]] = {
    "init-claude": _claude_dir,
    "init-codex": _codex_dir,
    "init-refusals": _refusals,
    "init-strict-json": _commented_settings,
    "uninstall": _claude_dir,
    "doctor": _claude_dir,
    "doctor-nothing": _nothing,
    "doctor-project": _nothing,
    "uninstall-codex": _codex_dir,
    "hook-help": _nothing,
    "hosts": _host_clis,
    "hook": _nothing,
    "state": _nothing,
    "cache": _claude_dir,
    "stats": _read_history,
}


def _environment(home: Path, bin_dir: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR")}
    # tiktoken's cache inside the scratch HOME: the examples show what a standard install counts
    # with, whatever this machine has cached
    return {**keep, "HOME": str(home), "PATH": f"{bin_dir}:/usr/bin:/bin", "LEANCTX_IDLE_EXIT": "1",
            "TIKTOKEN_CACHE_DIR": str(home / ".cache" / "tiktoken")}


def _scrub(text: str, home: Path) -> str:
    replacements = [
        (str(home), "/home/you"),
        (str(home.parent), ""),  # the scratch folder: a sibling of HOME shows as /elsewhere
        (sys.executable, "/path/to/venv/bin/python"),
        (str(Path(sys.executable).parent), "/path/to/venv/bin"),
        (str(REPO), "/path/to/leanctx"),
    ]
    for old, new in replacements:
        text = text.replace(old, new)
    return text


def run_block(name: str, body: str) -> str:
    """Run the `$ ` lines of one block in a fresh HOME; the block's new body."""
    commands = [line[2:] for line in body.splitlines() if line.startswith("$ ")]
    if name not in SETUPS:
        raise KeyError(f"example {name!r} has no setup in tests/readme_examples.py SETUPS")
    with tempfile.TemporaryDirectory(prefix="leanctx-example-") as scratch:
        home = Path(scratch) / "home"
        (home / "proj").mkdir(parents=True)
        bin_dir = Path(scratch) / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "leanctx"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m leanctx "$@"\n')
        shim.chmod(0o755)
        hook_shim = bin_dir / "leanctx-hook"  # what project files call from PATH
        hook_shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from leanctx.hooks import run; run()" "$@"\n')
        hook_shim.chmod(0o755)
        SETUPS[name](home)
        env = _environment(home, bin_dir)
        out = []
        try:
            for command in commands:
                proc = subprocess.run(
                    ["bash", "-c", command], cwd=home / "proj", env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, timeout=120,
                )
                out.append(f"$ {command}\n{_scrub(proc.stdout, home)}")
        finally:
            subprocess.run([str(shim), "stop"], env=env, capture_output=True, timeout=60)
        return "".join(out)


def _masked(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def check(update: bool = False) -> list[str]:
    """Every stale block as a diff (empty when all are current); `update` rewrites them instead."""
    problems = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        pieces, last, changed = [], 0, False
        for match in BLOCK.finditer(text):
            fresh = run_block(match["name"], match["body"])
            pieces += [text[last : match.start("body")], fresh if update else match["body"]]
            last = match.end("body")
            if _masked(fresh) != _masked(match["body"]):
                changed = True
                diff = difflib.unified_diff(
                    match["body"].splitlines(keepends=True), fresh.splitlines(keepends=True),
                    fromfile=f"{doc.name} (example {match['name']})", tofile="what the commands print now",
                )
                problems.append("".join(diff))
        if update and changed:
            doc.write_text("".join(pieces) + text[last:], encoding="utf-8")
    return problems


def update_matrix() -> bool:
    """Rewrite README.md's support matrix from the host modules (`leanctx hosts --markdown`);
    True when it changed. tests/test_host_matrix.py fails while it is stale."""
    from leanctx import hostversions

    readme = REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    fresh = hostversions.replace_block(text, hostversions.markdown())
    if fresh is None or fresh == text:
        return False
    readme.write_text(fresh, encoding="utf-8")
    return True


def main(argv: list[str]) -> int:
    update = "--update" in argv
    if update and update_matrix():
        print("rewrote README.md's support matrix")
    if update:
        from tests import layout_doc

        if layout_doc.update():
            print("rewrote docs/development.md's layout")
    problems = check(update)
    for problem in problems:
        print(problem)
    if problems and not update:
        print("stale examples; run: python -m tests.readme_examples --update", file=sys.stderr)
        return 1
    if update:
        print(f"rewrote {len(problems)} example block(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
