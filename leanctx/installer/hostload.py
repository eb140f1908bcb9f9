"""Will the host load what init wired? init warns at the end of its output (exit 1), doctor fails.

The hosts say nothing when they skip a config (tests/e2e/HOSTS_VERIFIED.md): Claude Code and Codex
ignore a whole hooks file that is not strict JSON (Codex also one that starts with a byte order
mark), Claude Code exits and replaces a `~/.claude.json` it cannot parse with its defaults, and
host switches turn our hooks off (Claude Code's `disableAllHooks`, Codex's `[features] hooks`).
leanctx keeps the user's comments and switches as they are, so it has to say so, with the fix.
The JSON syntax is checked here; a host's own switches in `installer/<host>_checks.py` (HOST_CHECKS).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import click

from leanctx.agents.base import Agent
from leanctx.installer import files, jsonc
from leanctx.installer.files import ConfigError
from leanctx.installer.install import Change, config_path, display

FAIL = "fail"
NOTE = "note"
SPOTS_NAMED = 5  # a file full of comments gets the first few and a count, not a page

Reader = Callable[[Path], "bytes | None"]


@dataclass(frozen=True)
class LoadProblem:
    """One file the host will not load as wired: why, and the exact fix."""

    name: str  # the check's name in doctor's report
    path: Path
    reason: str
    fix: str
    severity: str = FAIL  # NOTE: the host asks the user first (e.g. Codex's folder trust)


def disk_reader(home: Path, project: Path | None = None) -> Reader:
    """Files as they are now (None: missing, or a file init and doctor refuse on their own)."""

    def read(path: Path) -> bytes | None:
        try:
            return files.read_bytes(files.resolve_target(path, home, project).real)
        except ConfigError:
            return None

    return read


def planned_reader(home: Path, project: Path | None, changes: Iterable[Change]) -> Reader:
    """Files as a dry run's changes would leave them: the planned bytes first, else the disk."""
    planned = {change.target.real: change.new for change in changes}
    disk = disk_reader(home, project)

    def read(path: Path) -> bytes | None:
        try:
            real = files.resolve_target(path, home, project).real
        except ConfigError:
            return None
        return planned[real] if real in planned else disk(path)

    return read


def problems(agent: Agent, home: Path, project: Path | None, read: Reader, mcp: bool = True) -> list[LoadProblem]:
    """Every reason `agent` will not load what init wires at this level (user, or `project`)."""
    found: list[LoadProblem] = []
    try:
        json_files = [] if agent.hook_file_mode is not None else [("config is strict JSON", config_path(agent, home, project))]
        mcp_path, fmt, _ = agent.mcp_config(home, project) or (None, None, None)
    except ConfigError:
        return found
    # Gemini, Qwen: one settings file holds both; Copilot reads its MCP file as JSONC
    if mcp and fmt == "json" and all(mcp_path != p for _n, p in json_files) and not agent.mcp_jsonc_ok:
        json_files.append(("mcp config is strict JSON", mcp_path))
    for name, path in json_files:
        problem = strict_json_problem(agent, home, path, read(path), name)
        if problem is not None:
            found.append(problem)
    for p in host_checks(agent, "load_problems", home, project, read):
        found.append(LoadProblem(p["name"], p["path"], p["reason"], p["fix"], p.get("severity", FAIL)))
    return found


# Hosts whose own settings can turn our part off: the module judging them (`load_problems`, and
# optionally `doctor_checks`). Host modules only describe hosts; reading a host's settings to
# judge them is installer and doctor work, so it lives in the installer package.
HOST_CHECKS = {"claude": "leanctx.installer.claude_checks", "codex": "leanctx.installer.codex_checks",
               "gemini": "leanctx.installer.gemini_checks", "qwen": "leanctx.installer.gemini_checks", "openclaw": "leanctx.installer.openclaw_checks",
               "copilot": "leanctx.installer.copilot_checks", "droid": "leanctx.installer.droid_checks",
               "kiro": "leanctx.installer.kiro_checks",
               "vscode": "leanctx.installer.vscode_checks"}


def host_checks(agent: Agent, kind: str, *args: object) -> list[dict]:
    """`kind` ("load_problems": [{name, path, reason, fix, severity?}] with `read(path)` giving a
    file's bytes as they are or would be under --dry-run; "doctor_checks": doctor rows) of the
    host's checks module, [] when it has none."""
    import importlib

    module = HOST_CHECKS.get(agent.name)
    check = getattr(importlib.import_module(module), kind, None) if module else None
    return check(agent, *args) if check else []


def strict_json_problem(agent: Agent, home: Path, path: Path, data: bytes | None, name: str = "config is strict JSON") -> LoadProblem | None:
    """The comments, trailing commas (and, for some hosts, a byte order mark) a strict host rejects."""
    if data is None or not agent.strict_json or _is_strict_json(data, agent.json_bom_ok):
        return None
    try:
        spots = jsonc.strict_json_spots(data.decode("utf-8"))
    except (UnicodeDecodeError, jsonc.JsoncError):
        return None  # not JSONC either: init refuses the file and doctor's config check fails it
    if agent.json_bom_ok:
        spots = [spot for spot in spots if spot[0] != "byte order mark"]
    if agent.json_comments_ok:
        spots = [spot for spot in spots if spot[0] != "comment"]
    if agent.json_trailing_commas_ok:
        spots = [spot for spot in spots if spot[0] != "trailing comma"]
    if not spots:
        return None
    named = _spots_text(spots)
    return LoadProblem(name, path, f"{agent.unparseable_effect(path, home)} ({named})", f"remove {named} from {display(path, home)}")


def _is_strict_json(data: bytes, bom_ok: bool) -> bool:
    """The fast answer for the usual case (C-speed json on a ~/.claude.json of many MB); the
    JSONC parse that locates each spot runs only when this says no."""
    return jsonc.is_strict_json_utf8(data, bom_ok)  # builds no values: json.loads of it would take ~13x its size


def _spots_text(spots: list[tuple[str, int, int]]) -> str:
    parts = [
        "the byte order mark at the start of the file" if what == "byte order mark" else f"the {what} at line {line} column {col}"
        for what, line, col in spots[:SPOTS_NAMED]
    ]
    if len(spots) > SPOTS_NAMED:
        parts.append(f"{len(spots) - SPOTS_NAMED} more comment(s)/trailing comma(s)")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def json_true_key(path: Path, data: bytes | None, key: str) -> int | None:
    """The line of a top-level `"key": true` in a JSON(C) settings file, or None when not set."""
    if data is None or f'"{key}"'.encode() not in data:
        return None
    try:
        text = data.decode("utf-8")
        value = jsonc.loads(text)
    except (UnicodeDecodeError, jsonc.JsoncError):
        return None
    if not isinstance(value, dict) or value.get(key) is not True:
        return None
    match = re.search(r'"' + re.escape(key) + r'"\s*:\s*true', text)
    return text.count("\n", 0, match.start()) + 1 if match else 0


def key_line(data: bytes | None, key: str) -> int | None:
    """The line of the first `"key":` in a JSON(C) file, for a fix message (None: not found)."""
    text = (data or b"").decode("utf-8", "replace")
    match = re.search(r'"' + re.escape(key) + r'"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else None


_TOML_HEADER = re.compile(r"^\s*\[\[?\s*(.+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_\-.\s])+?)\s*=""")
_TOML_KEY_PART = re.compile(r""""([^"]*)"|'([^']*)'|([^.\s]+)""")


def _toml_keys(dotted: str) -> tuple[str, ...]:
    return tuple(a or b or c for a, b, c in _TOML_KEY_PART.findall(dotted))


def toml_line(text: str, *keys: str) -> int | None:
    """The line that sets the key `keys` (e.g. "features", "hooks") in TOML text, for the fix
    message; None when it is set some other way (an inline table) or not at all."""
    table: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), 1):
        if header := _TOML_HEADER.match(line):
            table = _toml_keys(header.group(1))
        elif key := _TOML_KEY.match(line):
            if table + _toml_keys(key.group(1)) == keys:
                return number
    return None


def where(path: Path, home: Path, line: int | None) -> str:
    """`~/file (line N)` for fix messages."""
    return display(path, home) + (f" (line {line})" if line else "")


def warn(found: list[tuple[Agent, LoadProblem]], home: Path, dry_run: bool) -> int:
    """Print each problem loudly on stderr, after everything else; 1 when a host will not load a file."""
    for agent, problem in found:
        shown = display(problem.path, home)
        if problem.severity == NOTE:
            click.echo(f"NOTE: {agent.display_name}: {problem.reason}", err=True)
        else:
            verb = "would be wired" if dry_run else "wired"
            click.echo(f"WARNING: {agent.display_name}: {verb}, but {agent.display_name} will not load {shown}: {problem.reason}", err=True)
        click.echo(f"  fix: {problem.fix}", err=True)
    failing = sum(1 for _, problem in found if problem.severity == FAIL)
    if failing:
        click.echo(f"leanctx: {failing} file(s) the host will not load as they are; fix them as shown, then run leanctx doctor.", err=True)
        return 1
    return 0
