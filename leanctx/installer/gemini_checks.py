"""Gemini CLI's and Qwen Code's settings that turn our hooks off (the host module says which:
`hooks_switched_off`). Found by host name through hostload.HOST_CHECKS."""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.geminishape import GeminiShapeAgent
from leanctx.installer import jsonc
from leanctx.installer.hostload import key_line, where


def load_problems(agent: GeminiShapeAgent, home: Path, project: Path | None, read) -> list[dict]:
    """A switch in any settings file the host reads at this level that turns our hooks off."""
    paths = [agent.user_config_path(home)] + ([agent.project_config_path(project)] if project is not None else [])
    out = []
    for path in paths:
        data = read(path)
        try:
            value = jsonc.loads(data.decode("utf-8-sig")) if data else None
        except (UnicodeDecodeError, jsonc.JsoncError):
            continue  # the syntax check names that file already
        switched = agent.hooks_switched_off(value) if isinstance(value, dict) else None
        if switched:
            reason, change, key = switched
            out.append({"name": f"{agent.name} hooks enabled", "path": path, "reason": reason,
                        "fix": f"{change} in {where(path, home, key_line(data, key))}"})
    return out
