"""`leanctx init` / `leanctx uninstall`: plan every file change first, then write.

Planning reads and parses every config involved; any refusal (unparseable file, symlink out of
HOME, read-only file, wrong shape) raises ConfigError before a single byte is written, so a
multi-agent run is never half-applied. Writing happens under the install lock, and each file is
re-read right before its rename; if a running host rewrote it meanwhile, that file is re-planned.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from leanctx.agents.base import MCP_SERVER, OLD_GATE_PATH, WRAPPER_NAME, Agent
from leanctx.installer import files, hookconfig, manifest, wrapper
from leanctx.installer.files import ConfigError, Target

MAX_ATTEMPTS = 5
HOOKS = "hooks"  # the part name of our hook entries in a host config


@dataclass
class Change:
    """One file we would write (`new`) or delete (`new is None`), planned from `old`."""

    agent: Agent | None
    target: Target
    old: bytes | None
    new: bytes | None
    created: list = field(default_factory=list)
    replan: Callable[[], Change | None] | None = None
    removal: bool = False  # takes our part out (apply_uninstall) rather than putting it in
    part: str = HOOKS  # which of our parts of the file this is (see manifest)
    record_only: bool = False  # the file stays as it is; only the manifest learns or forgets the part
    note: str | None = None  # why a removal leaves the file as it is
    stale: bool = False  # the file already held an (older) entry of ours: its bytes are no clean baseline
    mode: int = 0o600  # a new file's permission bits (hook files a host executes: 0o755)

    @property
    def path(self) -> Path:
        return self.target.path


def display(path: Path | str, home: Path) -> str:
    """A path for humans and notes: `~/…` under HOME."""
    text = str(path)
    home_text = str(home)
    if text == home_text:
        return "~"
    if text.startswith(home_text.rstrip("/") + "/"):
        return "~/" + text[len(home_text.rstrip("/")) + 1 :]
    return text


def config_path(agent: Agent, home: Path, project: Path | None) -> Path:
    if project is None:
        return agent.user_config_path(home)
    path = agent.project_config_path(project)
    if path is None:
        raise ConfigError(f"{agent.display_name} has no project-level hook config; run without --project")
    return path


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def hook_commands(data_dir: Path, agent: Agent, project: Path | None = None) -> Callable[[str, tuple[str, ...]], str]:
    """The hook command for each event: the absolute wrapper path at user level; in a project's
    files (committed, shared with a team) the `leanctx-hook` console script found on PATH, so no
    path of this machine is written there. Every hook, the read gate included, is a command:
    leanctx answers no hook over the network."""
    wrapper_file = wrapper.wrapper_path(data_dir) if project is None else Path(WRAPPER_NAME)
    return lambda event, flags: wrapper.command(wrapper_file, agent.name, event, flags)


OLD_GATE_FILE = "read_gate.json"  # the old http read gate's port and secret (agents/base.py: is_gate_url)


def retire_old_gate(data_dir: Path) -> None:
    """Delete the old http read gate's settings file: nothing uses it since the gate is a command."""
    with contextlib.suppress(OSError):
        (data_dir / OLD_GATE_FILE).unlink()


@dataclass(frozen=True)
class Profile:
    """What init wires: the plain coding profile, the always-on bot profile, the multi-user guard."""

    bot: bool = False
    guard: bool = False
    read_gate: bool = True  # comes with the MCP server: notes who is about to call ctx_read
    mcp_name: str = MCP_SERVER  # the name the MCP server is registered under (the read gate's matcher)
    # with the read gate: the host's own reader answered by the cache too (`init --no-builtin-gate`: off)
    builtin_read: bool = True

    def events(self, agent: Agent) -> list:
        return agent.profile_events(bot=self.bot, guard=self.guard, read_gate=self.read_gate, mcp_name=self.mcp_name,
                                    builtin_read=self.builtin_read)

    @property
    def name(self) -> str:
        return "+".join(n for n, on in (("bot", self.bot), ("guard", self.guard)) if on) or "coding"


def plan_install(agent: Agent, home: Path, data_dir: Path, project: Path | None, profile: Profile = Profile()) -> Change | None:
    target = files.resolve_target(config_path(agent, home, project), home, project)
    old = files.read_bytes(target.real)
    text = files.decode(target.path, old) if old is not None else None
    new_text, created = hookconfig.add_hooks(agent, target.path, text, hook_commands(data_dir, agent, project), profile.events(agent))
    new = new_text.encode("utf-8")
    if new == old:
        return already_there(agent, HOOKS, target, data_dir, old)
    files.check_writable(target.real)
    # an old http read gate entry is ours too: a file holding one is no clean baseline to restore
    stale = text is not None and (WRAPPER_NAME in text or OLD_GATE_PATH in text) and bool(hookconfig.our_places(agent, target.path, text))
    return Change(agent, target, old, new, created, replan=lambda: plan_install(agent, home, data_dir, project, profile), stale=stale)


def already_there(agent: Agent, part: str, target: Target, data_dir: Path, old: bytes | None) -> Change | None:
    """Our part is in the file as wanted: nothing to write, but the manifest must know the part
    is this agent's too (Claude Code and CodeBuddy register the same `.mcp.json` entry), so that
    uninstalling the other agent keeps it."""
    record = manifest.load(data_dir, target.real)
    if old is None or (record is not None and (record.parts is None or record.holds(agent.name, part))):
        return None
    return Change(agent, target, old, old, part=part, record_only=True)


def plan_uninstall(agent: Agent, home: Path, data_dir: Path, project: Path | None) -> Change | None:
    target = files.resolve_target(config_path(agent, home, project), home, project)

    def surgical(text: str, record: manifest.Manifest | None) -> str | None:
        new_text = hookconfig.remove_hooks(agent, target.path, text, record.created if record else None)
        if record is not None and not record.existed_before:
            if hookconfig.parse(target.path, new_text).value in ({}, agent.new_file_keys):
                return None  # we created the file and nothing else lives in it
        return new_text

    return plan_removal(agent, HOOKS, target, data_dir, surgical, lambda: plan_uninstall(agent, home, data_dir, project))


def plan_removal(
    agent: Agent,
    part: str,
    target: Target,
    data_dir: Path,
    surgical: Callable[[str, manifest.Manifest | None], str | None],
    again: Callable[[], Change | None],
    raw: bool = False,
) -> Change | None:
    """Plan taking one of our parts out of one file.

    `surgical(text, manifest)` takes exactly that part out (None = delete the file, returning the
    text unchanged = the part is not there); with `raw` it is given and returns the bytes (a big
    file is then never decoded whole). The file's pre-init bytes are restored instead only
    when this is the last of our parts in it and nobody touched it since our last write; a part
    another agent's install holds too (the same entry) stays in the file."""
    old = files.read_bytes(target.real)
    record = manifest.load(data_dir, target.real)
    forget = Change(agent, target, old, old, replan=again, removal=True, part=part, record_only=True)
    held = record is not None and record.holds(agent.name, part)
    others = record.others(agent.name, part) if record is not None else None
    sharing = [a for a, p in others or [] if p == part]
    if old is None or sharing:
        if sharing:
            from leanctx import agents

            forget.note = f"kept: {', '.join(agents.get(a).display_name for a in sharing)} uses it too"
        return forget if held else None
    if raw:
        new = surgical(old, record)
    else:
        new_text = surgical(files.decode(target.path, old), record)
        new = None if new_text is None else new_text.encode("utf-8")
    if new == old:
        return forget if held else None
    if record is not None and others == [] and record.baseline_sha256 != "changed" and _sha(old) == record.installed_sha256 and (
        not record.existed_before or record.baseline_bytes() is not None
    ):
        new = record.baseline_bytes() if record.existed_before else None
    files.check_writable(target.real)
    return Change(agent, target, old, new, replan=again, removal=True, part=part)


def plan_wrapper(data_dir: Path) -> Change | None:
    path = wrapper.wrapper_path(data_dir)
    old = files.read_bytes(path)
    new = wrapper.render(data_dir).encode("utf-8")
    if old == new:
        return None
    if old is not None and not wrapper.is_ours(old.decode("utf-8", "replace")):
        raise ConfigError(f"{path}: exists and is not a leanctx wrapper; move it away and run init again")
    return Change(None, Target(path, path), old, new)


def plan_wrapper_removal(data_dir: Path) -> Change | None:
    path = wrapper.wrapper_path(data_dir)
    old = files.read_bytes(path)
    if old is None or not wrapper.is_ours(old.decode("utf-8", "replace")):
        return None
    return Change(None, Target(path, path), old, None)


def wrapper_in_use(home: Path, data_dir: Path) -> bool:
    """Whether any config we know of still calls this data dir's wrapper: every host's user-level
    config and every file an install of any scope recorded (project configs). One unreadable
    counts as a caller: the wrapper is only removed when no hook can be left calling nothing."""
    from leanctx import agents

    wanted = str(wrapper.wrapper_path(data_dir))
    spellings = {wanted.encode("utf-8"), json.dumps(wanted)[1:-1].encode("utf-8"), json.dumps(wanted, ensure_ascii=False)[1:-1].encode("utf-8")}
    candidates = {a.user_config_path(home) for a in agents.all_agents()}
    candidates |= {Path(m.path) for m in manifest.all_manifests(data_dir)}
    for path in candidates:
        try:
            data = files.read_bytes(path)
        except ConfigError:
            return True
        if data is not None and any(s in data for s in spellings):
            return True
    return False


def unified_diff(change: Change, home: Path) -> str:
    name = display(change.path, home)
    old = change.old.decode("utf-8", "replace").splitlines(keepends=True) if change.old is not None else []
    new = change.new.decode("utf-8", "replace").splitlines(keepends=True) if change.new is not None else []
    lines = difflib.unified_diff(
        old,
        new,
        fromfile=f"a/{name}" if change.old is not None else "/dev/null",
        tofile=f"b/{name}" if change.new is not None else "/dev/null",
    )
    out = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    if not out and change.old != change.new:  # an empty file created or deleted: difflib says nothing
        out = f"--- {'a/' + name if change.old is not None else '/dev/null'}\n+++ {'b/' + name if change.new is not None else '/dev/null'}\n"
    return out


def apply_install(change: Change, data_dir: Path) -> None:
    real = change.target.real
    if change.agent is None:  # the wrapper: no manifest, it is ours entirely
        if change.old is not None:
            files.backup(data_dir, real, change.old)
        files.atomic_write(real, change.new or b"", change.old, new_file_mode=0o755)
        os.chmod(real, 0o755)
        return
    record = manifest.load(data_dir, real)
    if record is None:
        record = manifest.Manifest(
            path=str(real),
            agent=change.agent.name,
            existed_before=change.old is not None,
            baseline_sha256=_sha(change.old),
            baseline_backup=str(manifest.keep_baseline(data_dir, real, change.old)) if change.old is not None else None,
            parts=[],
        )
    elif record.installed_sha256 != _sha(change.old):
        record.baseline_sha256 = "changed"  # someone else edited it since: only surgical removal is safe now
    if (change.record_only or change.stale) and not any(p == change.part for _, p in record.parts or []):
        record.baseline_sha256 = "changed"  # the part was there before we wrote it: the baseline holds it
    if not change.record_only:
        if change.old is not None:
            files.backup(data_dir, real, change.old)
        dirs = files.atomic_write(real, change.new or b"", change.old, new_file_mode=change.mode)
        if change.mode & 0o111:  # a file the host executes stays executable (atomic_write keeps the old bits)
            os.chmod(real, os.stat(real).st_mode & 0o7777 | change.mode & 0o111)
        record.installed_sha256 = _sha(change.new)
        record.created += [list(c) for c in change.created if list(c) not in record.created]
        record.created_dirs += [str(d) for d in dirs]
    if record.parts is not None and not record.holds(change.agent.name, change.part):
        record.parts.append([change.agent.name, change.part])
    manifest.save(data_dir, record)


def apply_uninstall(change: Change, data_dir: Path) -> None:
    """Take one part out; the manifest goes with the last part (or the file)."""
    real = change.target.real
    if change.agent is None:  # the wrapper
        files.atomic_remove(real, change.old or b"")
        return
    record = manifest.load(data_dir, real)
    if not change.record_only:
        if change.old is not None:
            files.backup(data_dir, real, change.old)
        if change.new is None:
            files.atomic_remove(real, change.old or b"")
        else:
            files.atomic_write(real, change.new, change.old)
    if record is None:
        return
    left = record.others(change.agent.name, change.part)
    if change.new is not None and (left or (left is None and b"leanctx" in change.new)):
        if not change.record_only:
            if record.installed_sha256 != _sha(change.old):
                record.baseline_sha256 = "changed"
            record.installed_sha256 = _sha(change.new)
        if left is not None:
            record.parts = left
        manifest.save(data_dir, record)
        return
    manifest.delete(data_dir, real)
    for folder in sorted(record.created_dirs, key=len, reverse=True):
        try:
            Path(folder).rmdir()  # only if empty
        except OSError:
            _hand_over(data_dir, folder)


def _hand_over(data_dir: Path, folder: str) -> None:
    """A folder we created still holds another file of ours (`.cursor/` with our rules in it):
    the record of that file takes the folder over, so the last uninstall removes it."""
    heir = next((m for m in manifest.all_manifests(data_dir) if Path(m.path).is_relative_to(folder)), None)
    if heir is not None and folder not in heir.created_dirs:
        heir.created_dirs.append(folder)
        manifest.save(data_dir, heir)


def apply_with_retry(change: Change, apply: Callable[[Change, Path], None], data_dir: Path) -> Change | None:
    """Apply; if the file changed under us, re-plan from the fresh bytes (a host rewrote it)."""
    current: Change | None = change
    for _ in range(MAX_ATTEMPTS):
        if current is None:
            return None
        try:
            apply(current, data_dir)
            return current
        except files.ChangedUnderUs:
            current = current.replan() if current.replan else None
    raise ConfigError(f"{change.path}: keeps changing while we write it; close the host and try again")
