"""Factory Droid's hooks.json, which hides our settings.json entries for the events it names.
Found by host name through hostload.HOST_CHECKS."""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import jsonc
from leanctx.installer.hostload import display


def load_problems(agent: Agent, home: Path, project: Path | None, read) -> list[dict]:
    """A `hooks.json` beside the settings file replaces the settings file's list of each event it
    names (read in the CLI: `{...settings hooks, ...hooks.json}`), so ours for those events
    never run."""
    settings = agent.user_config_path(home) if project is None else agent.project_config_path(project)
    out = []
    for path in (settings.parent / "hooks.json", settings.parent / "hooks" / "hooks.json"):
        data = read(path)
        if data is None:
            continue
        try:
            value = jsonc.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, jsonc.JsoncError):
            value = None  # Droid ignores a file it cannot parse: nothing of ours is hidden
        hidden = sorted({e.name for e in agent.events + (agent.read_gate_event,)} & set(value)) if isinstance(value, dict) else []
        if hidden:
            out.append({"name": "droid hooks not shadowed", "path": path,
                        "reason": f"Droid takes {', '.join(hidden)} from this file instead of {display(settings, home)}",
                        "fix": f"move leanctx's entries for {', '.join(hidden)} into {display(path, home)}, "
                               f"or those events out of it"})
        break  # Droid reads hooks/hooks.json only when hooks.json does not exist
    return out
