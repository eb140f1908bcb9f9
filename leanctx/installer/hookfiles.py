"""Hooks that are whole files of ours: OpenCode's plugin, Cline's executable hook files.

Some hosts run no hook command from a config: OpenCode loads JS plugins from a folder, Cline runs
executable files named after the event. There init writes files that are entirely ours, with the
same guarantees as config entries, through the same planner (install.Change, manifests, backups,
atomic writes, symlink and FIFO refusal):
- every file carries a marker line `leanctx-hooks: {event: command}` (in a comment), which is how
  it is recognised as ours and how doctor reads back what is wired; a file of that name without
  it is the user's: init refuses (exit 2, nothing written), uninstall leaves it;
- init writes what the profile needs and takes out our files the profile no longer needs; run
  twice, it writes nothing the second time;
- uninstall deletes each file we wrote and the folders init created for them, once empty.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import files
from leanctx.installer.files import ConfigError
from leanctx.installer.install import HOOKS, Change, Profile, already_there, hook_commands, plan_removal

MARK = "leanctx-hooks: "
_MARK_LINE = re.compile(r"leanctx-hooks: (\{.*\})[ \t]*$", re.M)


def mark(wired: dict[str, str]) -> str:
    """The marker line's text for the events one file runs."""
    return MARK + json.dumps(wired, sort_keys=True)


def wired_in(text: str) -> dict[str, str] | None:
    """{event: command} a file of ours runs; None when the file is not ours."""
    match = _MARK_LINE.search(text)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _foreign(path: Path) -> ConfigError:
    return ConfigError(f"{path}: exists and is not leanctx's; move it away and run init again")


def _read_ours(target: files.Target) -> tuple[bytes | None, dict[str, str] | None]:
    """(bytes, what it runs) of one hook file; a file that is not UTF-8 is not ours."""
    old = files.read_bytes(target.real)
    if old is None:
        return None, None
    try:
        return old, wired_in(old.decode("utf-8"))
    except UnicodeDecodeError:
        return old, None


def wanted(agent: Agent, home: Path, data_dir: Path, project: Path | None, profile: Profile) -> dict[str, str]:
    """{file name: text} for this profile."""
    command_for = hook_commands(data_dir, agent, project)
    wired = {spec.name: command_for(spec.name, flags) for spec, flags in profile.events(agent)}
    return agent.hook_files(wired, mark)


def plan_install(agent: Agent, home: Path, data_dir: Path, project: Path | None, profile: Profile) -> list[Change]:
    """Every file to write (or, left over from another profile, to take out); raises before any write."""
    folder = agent.hook_folder(home, project)
    want = wanted(agent, home, data_dir, project, profile)
    changes: list[Change] = []
    for name in dict.fromkeys([*want, *agent.hook_file_names()]):
        target = files.resolve_target(folder / name, home, project)
        if name not in want:
            changes.append(_plan_remove(agent, home, data_dir, project, name))
            continue
        old, ours = _read_ours(target)
        if old is not None and ours is None:
            raise _foreign(target.path)
        new = want[name].encode("utf-8")
        again = lambda name=name: _plan_one(agent, home, data_dir, project, profile, name)  # noqa: E731
        if new == old and not _lost_exec_bit(agent, target):
            changes.append(already_there(agent, HOOKS, target, data_dir, old))
            continue
        files.check_writable(target.real)
        changes.append(Change(agent, target, old, new, replan=again, stale=old is not None, mode=agent.hook_file_mode or 0o600))
    return [c for c in changes if c is not None]


def _lost_exec_bit(agent: Agent, target: files.Target) -> bool:
    """A hook file the host executes (Cline's) that is no longer executable: init rewrites it."""
    import os

    executable = bool(agent.hook_file_mode and agent.hook_file_mode & 0o100)
    return executable and os.path.exists(target.real) and not os.access(target.real, os.X_OK)


def _plan_one(agent: Agent, home: Path, data_dir: Path, project: Path | None, profile: Profile, name: str) -> Change | None:
    """Re-plan one file after a host (or the user) changed it under us."""
    for change in plan_install(agent, home, data_dir, project, profile):
        if change.path.name == name:
            return change
    return None


def _plan_remove(agent: Agent, home: Path, data_dir: Path, project: Path | None, name: str) -> Change | None:
    target = files.resolve_target(agent.hook_folder(home, project) / name, home, project)

    def surgical(data: bytes, record: object) -> bytes | None:
        try:
            ours = wired_in(data.decode("utf-8"))
        except UnicodeDecodeError:
            ours = None
        return data if ours is None else None  # the user's file stays as it is

    again = lambda: _plan_remove(agent, home, data_dir, project, name)  # noqa: E731
    return plan_removal(agent, HOOKS, target, data_dir, surgical, again, raw=True)


def plan_uninstall(agent: Agent, home: Path, data_dir: Path, project: Path | None) -> list[Change]:
    changes = [_plan_remove(agent, home, data_dir, project, name) for name in agent.hook_file_names()]
    return [c for c in changes if c is not None]


def read_wired(agent: Agent, home: Path, project: Path | None) -> tuple[dict, list[Path]]:
    """({"hooks": {event: [{"command", "file", "executable"}]}}, the files holding them) as the
    host will load them now, for doctor; a file of ours the host cannot run (Cline's, not
    executable) raises."""
    folder = agent.hook_folder(home, project)
    hooks: dict[str, list[dict]] = {}
    found: list[Path] = []
    for name in agent.hook_file_names():
        target = files.resolve_target(folder / name, home, project)
        old, ours = _read_ours(target)
        if ours is None:
            continue
        if _lost_exec_bit(agent, target):
            raise ConfigError(f"{target.path}: is not executable, so {agent.display_name} will not run it (chmod +x)")
        found.append(target.path)
        executable = bool(agent.hook_file_mode and agent.hook_file_mode & 0o100)
        for event, command in ours.items():
            hooks.setdefault(event, []).append({"command": command, "file": str(target.path), "executable": executable})
    return {"hooks": hooks}, found
