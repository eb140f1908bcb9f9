"""Whether the host really running a hook wired for another runs our own hook for the event too.

Cursor and Continue CLI also run the hooks in Claude Code's settings files, with their own
payloads (agents/claude.py `real_caller`). A Cursor conversation must be filed under Cursor, and
when the user also wired our Cursor hooks (`init --agent cursor`), Cursor runs both for one event:
then only the Cursor hook publishes, so the event is folded into the record once (a compaction
counted twice would cost a needless full re-send each time).
"""

from __future__ import annotations

import os

from leanctx.agents.base import Agent, is_our_command
from leanctx.hooks.publish import read_json


def runs_own_hook(host: Agent, event: str, payload: dict) -> bool:
    """Our hook for `event` is in a config file `host` reads here: the user's, or a project's
    among the payload's workspace roots (its cwd when it names none)."""
    from pathlib import Path  # only on this rare path: pathlib costs the hook ~2 ms

    roots = payload.get("workspace_roots")
    roots = [r for r in roots if isinstance(r, str) and r] if isinstance(roots, list) else []
    cwd = payload.get("cwd")
    if not roots and isinstance(cwd, str) and cwd:
        roots = [cwd]
    paths = [host.user_config_path(Path(os.path.expanduser("~")))]
    for root in roots[:16]:
        project_path = host.project_config_path(Path(root))
        if project_path is not None:
            paths.append(project_path)
    wanted = f" {host.name} {event} "  # the command's arguments: AGENT EVENT [FLAGS]
    for path in paths:
        config = read_json(path)  # non-blocking, size-capped, None for anything odd
        if config is None:
            continue
        groups: object = config
        for key in host.hooks_key:
            groups = groups.get(key) if isinstance(groups, dict) else None
        groups = groups.get(event) if isinstance(groups, dict) else None
        for group in groups if isinstance(groups, list) else ():
            if any(is_our_command(c) and wanted in f"{c} " for c in host.group_commands(group)):
                return True
    return False
