"""Registering leanctx's MCP server (`leanctx mcp`) in each host's MCP config, and taking it out.

Same rules as the hooks: the entry is edited in place (JSON through the span-keeping editor,
Codex's config.toml through tomlkit), other servers and comments are untouched, init twice is
init once, uninstall removes our entry and the `mcpServers` table if we created it. The server
is spawned without a shell, so the entry names this installation's Python by absolute path.
Claude Code rewrites ~/.claude.json itself on every start (and replaces a file it cannot parse
with defaults), so we never leave it unparseable: every write is atomic.
"""

from __future__ import annotations

import sys
from pathlib import Path

import tomlkit
import tomlkit.exceptions

from leanctx import paths
from leanctx.agents.base import Agent
from leanctx.installer import files, hookconfig, jsonc, manifest
from leanctx.installer.files import ConfigError
from leanctx.installer.install import Change, plan_removal
from leanctx.installer.tomledit import dumps_after_removal

SERVER = "leanctx"


def server_command() -> tuple[str, list[str]]:
    return sys.executable, ["-m", "leanctx", "mcp"]


def wanted_entry(agent: Agent, data_dir: Path | None = None) -> dict:
    """The entry for this installation. When init ran with a LEANCTX_HOME other than the default,
    the entry carries it, or the server the host spawns (without that variable) would look for
    the hooks' records in the default place while the wrapper publishes them in LEANCTX_HOME."""
    entry = agent.mcp_entry(*server_command())
    if data_dir is not None and Path(data_dir) != paths.default_data_dir():
        entry["env"] = {"LEANCTX_HOME": str(data_dir)}
    return entry


def _toml(path: Path, text: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"{path}:{exc.line}:{exc.col}: cannot parse TOML; left untouched") from None


def registered(agent: Agent, home: Path, project: Path | None) -> dict | None:
    """Our entry as the host will read it now, or None."""
    path, fmt, key = agent.mcp_config(home, project)
    data = files.read_bytes(files.resolve_target(path, home, project).real)
    if data is None:
        return None
    text = files.decode(path, data)
    value = _toml(path, text).unwrap() if fmt == "toml" else hookconfig.parse(path, text).value
    servers = value.get(key[0]) if isinstance(value, dict) else None
    entry = servers.get(SERVER) if isinstance(servers, dict) else None
    return entry if isinstance(entry, dict) else None


def plan_register(agent: Agent, home: Path, data_dir: Path, project: Path | None) -> Change | None:
    path, fmt, key = agent.mcp_config(home, project)
    target = files.resolve_target(path, home, project)
    old = files.read_bytes(target.real)
    text = files.decode(target.path, old) if old is not None else ""
    entry = wanted_entry(agent, data_dir)
    created: list = []
    if fmt == "toml":
        doc = _toml(target.path, text)
        servers = doc.get(key[0])
        if servers is None:
            servers = tomlkit.table(is_super_table=True)
            doc[key[0]] = servers
            created.append(list(key))
        elif not isinstance(servers, dict):
            raise ConfigError(f"{path}: {key[0]} is not a table; left untouched")
        current = servers.get(SERVER)
        if current is None or current.unwrap() != entry:
            table = tomlkit.table()
            table.update(entry)
            servers[SERVER] = table
        new_text = tomlkit.dumps(doc)
    else:
        doc = hookconfig.parse(target.path, text if text.strip() else "{}\n")
        if doc.has(key) and not isinstance(doc.get(key), dict):
            raise ConfigError(f"{path}: {key[0]} is not an object; left untouched")
        if not doc.has(key):
            created.append(list(key))
        if not doc.has(key + (SERVER,)) or doc.get(key + (SERVER,)) != entry:
            doc.set_key(key + (SERVER,), entry)
        new_text = doc.text
    new = new_text.encode("utf-8")
    if new == old:
        return None
    files.check_writable(target.real)
    return Change(agent, target, old, new, created, replan=lambda: plan_register(agent, home, data_dir, project))


def plan_unregister(agent: Agent, home: Path, data_dir: Path, project: Path | None) -> Change | None:
    path, fmt, key = agent.mcp_config(home, project)
    target = files.resolve_target(path, home, project)

    def surgical(text: str, record: manifest.Manifest | None) -> str | None:
        created = {tuple(c) for c in record.created} if record else set()
        if fmt == "toml":
            doc = _toml(target.path, text)
            servers = doc.get(key[0])
            if servers is None or SERVER not in servers:
                return text
            del servers[SERVER]
            if not servers and tuple(key) in created:
                del doc[key[0]]
            new_text = dumps_after_removal(doc, text)
            empty = not new_text.strip()
        else:
            doc = hookconfig.parse(target.path, text)
            if not doc.remove_key(key + (SERVER,)):
                return text
            if tuple(key) in created and doc.is_empty_container(key):
                doc.remove_key(key)
            new_text = doc.text
            empty = jsonc.loads(new_text) == {}
        if record is not None and not record.existed_before and empty:
            return None
        return new_text

    return plan_removal(agent, target, data_dir, surgical, lambda: plan_unregister(agent, home, data_dir, project))
