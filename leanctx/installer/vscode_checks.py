"""VS Code's settings that turn our hooks off, and what its read cache does. Found by host name
through hostload.HOST_CHECKS. From VS Code's source (documentation only, no VS Code runs here):
`chat.useHooks` (default true) runs no hook at all when false; `chat.hookFilesLocations` maps each
folder or file VS Code loads hooks from to true or false (microsoft/vscode chat.contribution.ts,
promptFileLocations.ts DEFAULT_HOOK_FILE_PATHS). Both live in VS Code's JSONC settings files."""

from __future__ import annotations

import re
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.agents.vscode import user_data_dir
from leanctx.installer import jsonc
from leanctx.installer.hostload import where

USE_HOOKS = "chat.useHooks"
LOCATIONS = "chat.hookFilesLocations"


def _settings(data: bytes | None) -> tuple[dict, str] | None:
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
        value = jsonc.loads(text)
    except (UnicodeDecodeError, jsonc.JsoncError):
        return None  # VS Code's own problem to report: it shows the settings file's errors
    return (value, text) if isinstance(value, dict) else None


def _line(text: str, key: str) -> int | None:
    match = re.search(r'"' + re.escape(key) + r'"\s*:', text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def load_problems(agent: Agent, home: Path, project: Path | None, read) -> list[dict]:
    """`"chat.useHooks": false`, or our hooks folder set to false in `chat.hookFilesLocations`, in
    the user's settings or (for a project install) the workspace's: VS Code then runs none of ours."""
    folder = "~/.copilot/hooks" if project is None else ".github/hooks"
    paths = [user_data_dir(home) / "settings.json"] + ([project / ".vscode" / "settings.json"] if project is not None else [])
    out = []
    for path in paths:
        found = _settings(read(path))
        if found is None:
            continue
        value, text = found
        if value.get(USE_HOOKS) is False:
            out.append({"name": "vscode hooks enabled", "path": path,
                        "reason": f'"{USE_HOOKS}": false turns off every chat hook, leanctx\'s included',
                        "fix": f'remove "{USE_HOOKS}": false from {where(path, home, _line(text, USE_HOOKS))}'})
        locations = value.get(LOCATIONS)
        if isinstance(locations, dict) and any(locations.get(k) is False for k in (folder, folder + "/")):
            out.append({"name": "vscode loads our hooks folder", "path": path,
                        "reason": f'"{LOCATIONS}" sets "{folder}" to false, so VS Code skips {agent.hooks_file} there',
                        "fix": f'set "{folder}" to true in "{LOCATIONS}" in {where(path, home, _line(text, LOCATIONS))}'})
    return out


def doctor_checks(agent: Agent, home: Path, project: Path | None = None) -> list[dict]:
    return [{"name": "read cache", "status": "info",
             "detail": "ctx_read answers VS Code with the file's content, never a stub: VS Code drops old turns "
                       "without a hook leanctx receives (cache/scope.py SILENT_COMPACTION)", "fix": None}]
