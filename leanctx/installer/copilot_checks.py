"""Copilot CLI's folder trust: it runs project hooks only in a folder the user trusted. Found by
host name through hostload.HOST_CHECKS."""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.base import Agent


def load_problems(agent: Agent, home: Path, project: Path | None, read) -> list[dict]:
    if project is None:
        return []
    hooks = agent.project_config_path(project)
    return [{
        "name": "copilot trusts the project folder",
        "path": hooks,
        "reason": f"Copilot runs project hooks only in a folder you trusted; in any other it skips {hooks.parent} without a word",
        "fix": f"trust {project} once: start `copilot` there and choose to trust the folder (or run it with --trust-folder)",
        "severity": "note",
    }]
