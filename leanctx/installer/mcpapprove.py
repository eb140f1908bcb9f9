"""Approving our project MCP server where the host asks for an approval first.

CodeBuddy Code lists the servers of a project's `.mcp.json` but starts one only when the
project's `.codebuddy/settings.local.json` names it in `enabledMcpjsonServers` (verified in a
run, docs/hosts.md). `init --project` adds our server's name to that list, in place, beside the
user's names; uninstall takes out exactly that name (and the list, when init created it). The
approval is a part of its own in the file's manifest (`mcp-approve:<name>`), next to our hooks.
"""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import files, hookconfig, manifest
from leanctx.installer.files import ConfigError
from leanctx.installer.install import Change, already_there, plan_removal


def part_name(name: str) -> str:
    return f"mcp-approve:{name}"


def _recorded(agent: Agent, data_dir: Path, target: files.Target) -> list[str]:
    record = manifest.load(data_dir, target.real)
    if record is None or record.parts is None:
        return []
    return [p.split(":", 1)[1] for a, p in record.parts if a == agent.name and p.startswith("mcp-approve:")]


def plans(agent: Agent, home: Path, data_dir: Path, project: Path | None, keep: str | None = None) -> list[Change]:
    """Approve `keep` (the server name init registers); withdraw every other name we approved."""
    where = agent.mcp_approval(project) if project is not None else None
    if where is None:
        return []
    target = files.resolve_target(where[0], home, project)
    names = [n for n in dict.fromkeys(_recorded(agent, data_dir, target)) if n != keep]
    changes = [_withdraw(agent, home, data_dir, project, n) for n in names]
    if keep is not None:
        changes.append(_approve(agent, home, data_dir, project, keep))
    return [c for c in changes if c is not None]


def _approve(agent: Agent, home: Path, data_dir: Path, project: Path, name: str) -> Change | None:
    path, key = agent.mcp_approval(project)
    target = files.resolve_target(path, home, project)
    old = files.read_bytes(target.real)
    doc = hookconfig.parse(target.path, files.decode(target.path, old) if old is not None and old.strip() else "{}\n")
    created: list = []
    if doc.has((key,)):
        value = doc.get((key,))
        if not isinstance(value, list):
            raise ConfigError(f"{path}: {key} is a JSON {type(value).__name__}, expected a list; left untouched")
        if name in value:
            return already_there(agent, part_name(name), target, data_dir, old)
        doc.append((key,), name)
    else:
        created = doc.append((key,), name)
    files.check_writable(target.real)
    return Change(agent, target, old, doc.text.encode("utf-8"), created,
                  replan=lambda: _approve(agent, home, data_dir, project, name), part=part_name(name))


def _withdraw(agent: Agent, home: Path, data_dir: Path, project: Path, name: str) -> Change | None:
    path, key = agent.mcp_approval(project)
    target = files.resolve_target(path, home, project)

    def surgical(text: str, record: manifest.Manifest | None) -> str | None:
        doc = hookconfig.parse(target.path, text)
        value = doc.get((key,)) if doc.has((key,)) else None
        if not isinstance(value, list) or name not in value:
            return text
        doc.remove_items((key,), lambda v: v == name)
        if record is not None and [key] in record.created and doc.is_empty_container((key,)):
            doc.remove_key((key,))
        if record is not None and not record.existed_before and doc.is_empty_container(()):
            return None
        return doc.text

    return plan_removal(agent, part_name(name), target, data_dir, surgical,
                        lambda: _withdraw(agent, home, data_dir, project, name))
