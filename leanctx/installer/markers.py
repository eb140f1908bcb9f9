"""The markers a host writes on its first start, written by init with a user config it creates.

Kilo Code runs a one-time migration on its first start (`migrateBashPermission`, 7.7.7 bundle):
when a user config file exists and holds no bash permission rule, it adds
`"permission": {"bash": "allow"}` to it and writes the empty `~/.config/kilo/.bash-permission-migrated`;
with no config file it writes only the marker. A config that init creates (for the MCP entry)
would make that first start loosen the user's shell permissions because of leanctx. So when init
creates the host's user config (none of the config files the host reads there existed) and a
marker (`first_start_markers` of the host class) is not there, init writes it, empty, before the
config: exactly what the host does on a first start with no config. A marker that exists is never
touched. It is a part of its own (`first-start`) in its own manifest. Uninstall deletes it only
when it also deletes the config init created (the folder is then as it was before init);
otherwise the marker stays, as the host's, and only the record goes.
"""

from __future__ import annotations

import os
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import files, manifest
from leanctx.installer.install import Change, plan_removal

PART = "first-start"
MODE = 0o644  # as the host creates it (Bun.write under the usual umask)


def _markers(agent: Agent, home: Path, project: Path | None) -> list[Path]:
    names = getattr(agent, "first_start_markers", ())
    if project is not None or not names:  # the migration reads the user config folder only
        return []
    folder = agent.config_dir(home)
    return [folder / name for name in names]


def _configs(agent: Agent, home: Path) -> set[Path]:
    folder = agent.config_dir(home)
    return {folder / name for name in (*agent.config_files, *getattr(agent, "legacy_config_files", ()))}


def plan(agent: Agent, home: Path, data_dir: Path, project: Path | None, changes: list[Change], uninstall: bool = False) -> list[Change]:
    """The markers to write (`changes` create the host's user config, none of its config files
    exists and the marker does not), or to take out (`changes` delete the config init created)."""
    markers = _markers(agent, home, project)
    if not markers:
        return []
    configs = _configs(agent, home)
    ours = [c for c in changes if c.path in configs and not c.record_only]
    if any(c.old is None and c.new is not None for c in ours):
        if any(os.path.lexists(p) for p in configs):
            return []
        planned = []
        for marker in markers:
            target = files.resolve_target(marker, home, None)
            if not os.path.lexists(target.path) and not os.path.lexists(target.real):
                planned.append(Change(agent, target, None, b"", part=PART, mode=MODE))
        return planned
    deleted = any(c.removal and c.new is None for c in ours)
    return [c for c in (_take_out(agent, home, data_dir, marker, deleted) for marker in markers if deleted or uninstall) if c]


def _take_out(agent: Agent, home: Path, data_dir: Path, marker: Path, delete: bool) -> Change | None:
    """Delete the marker init wrote (`delete`: the config init created goes too), or only forget it."""
    target = files.resolve_target(marker, home, None)
    record = manifest.load(data_dir, target.real)
    if record is None or not record.holds(agent.name, PART):
        return None
    if not delete:
        old = files.read_bytes(target.real)
        return Change(agent, target, old, old, removal=True, part=PART, record_only=True)

    def surgical(data: bytes, record: object) -> bytes | None:
        return None if data == b"" else data  # the host's own content stays

    return plan_removal(agent, PART, target, data_dir, surgical, lambda: _take_out(agent, home, data_dir, marker, delete), raw=True)
