"""Claude Code's settings that turn our hooks off. Found by host name through hostload.HOST_CHECKS."""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer.hostload import json_true_key, where


def load_problems(agent: Agent, home: Path, project: Path | None, read) -> list[dict]:
    """`"disableAllHooks": true` in any settings file Claude Code reads turns off every hook,
    ours included (verified on 2.1.197: in the user file and in the project's local file)."""
    settings = [agent.user_config_path(home)]
    if project is not None:
        settings += [project / ".claude" / "settings.json", agent.project_config_path(project)]
    out = []
    for path in settings:
        line = json_true_key(path, read(path), "disableAllHooks")
        if line is not None:
            out.append({"name": "claude hooks enabled", "path": path,
                        "reason": "\"disableAllHooks\": true turns off every hook, leanctx's included",
                        "fix": f"remove \"disableAllHooks\": true from {where(path, home, line)}"})
    return out
