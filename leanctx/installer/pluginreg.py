"""Registering our plugin file in a host's config, where the host loads plugins only from the
places its config lists (OpenClaw: `openclaw.json`).

OpenClaw loads a standalone plugin file only from `plugins.load.paths`, hands a plugin that is not
bundled with it the conversation hooks only with `plugins.entries.<id>.hooks.allowConversationAccess`,
and, when the user keeps `plugins.allow`, loads only the plugins listed there (docs
gateway/config-extensions.md, plugins/hooks.md). init adds, in place and beside the user's own:
- our file's path to `plugins.load.paths`;
- `plugins.entries.<id>` = {enabled, hooks: {allowConversationAccess}} (an entry of that id that
  is not ours is refused, never overwritten);
- `<id>` to `plugins.allow`, only when that list exists.
A `plugins.deny` naming our id is refused with the fix. Uninstall takes out exactly those (and the
containers init created); the file's pre-init bytes come back when nothing else changed it. The
registration is a part of its own in the file's manifest (`plugin`), next to the MCP entry.
"""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import files, hookconfig, manifest
from leanctx.installer.files import ConfigError
from leanctx.installer.install import Change, already_there, display, plan_removal

PART = "plugin"


def _entry() -> dict:
    return {"enabled": True, "hooks": {"allowConversationAccess": True}}


def _where(agent: Agent, home: Path) -> tuple[Path, str, str] | None:
    reg = getattr(agent, "plugin_registration", None)
    if reg is None:
        return None
    config, plugin = reg(home)
    return config, str(plugin), getattr(agent, "plugin_id", "leanctx")


def _list_at(doc, path: Path, key: tuple) -> list | None:
    if not doc.has(key):
        return None
    value = doc.get(key)
    if not isinstance(value, list):
        raise ConfigError(f"{path}: {'.'.join(key)} is a JSON {type(value).__name__}, expected a list; left untouched")
    return value


def _object_at(doc, path: Path, key: tuple) -> None:
    for n in range(1, len(key) + 1):
        if doc.has(key[:n]) and not isinstance(doc.get(key[:n]), dict):
            raise ConfigError(f"{path}: {'.'.join(key[:n])} is not an object; left untouched")


def plan(agent: Agent, home: Path, data_dir: Path, project: Path | None, want: bool) -> Change | None:
    """Register the plugin (`want`) or take the registration out; None when nothing changes."""
    where = _where(agent, home) if project is None else None
    if where is None:
        return None
    return _register(agent, home, data_dir, *where) if want else _withdraw(agent, home, data_dir, *where)


def _register(agent: Agent, home: Path, data_dir: Path, path: Path, plugin: str, pid: str) -> Change | None:
    target = files.resolve_target(path, home, None)
    old = files.read_bytes(target.real)
    doc = hookconfig.parse(target.path, files.decode(target.path, old) if old is not None and old.strip() else "{}\n")
    _object_at(doc, path, ("plugins", "load"))
    _object_at(doc, path, ("plugins", "entries"))
    deny = _list_at(doc, path, ("plugins", "deny"))
    if deny is not None and pid in deny:
        raise ConfigError(f"{path}: plugins.deny lists {pid!r}, so OpenClaw would never load leanctx's plugin; "
                          f"take {pid!r} out of plugins.deny in {display(path, home)} and run init again; left untouched")
    created: list = []
    paths = _list_at(doc, path, ("plugins", "load", "paths"))
    if paths is None or plugin not in paths:
        created += doc.append(("plugins", "load", "paths"), plugin)
    entry_key = ("plugins", "entries", pid)
    if doc.has(entry_key):
        if doc.get(entry_key) != _entry():
            raise ConfigError(f"{path}: plugins.entries.{pid} exists and is not leanctx's (it is not exactly "
                              f"{_entry()}); take it out of {display(path, home)} and run init again; left untouched")
    else:
        if not doc.has(("plugins", "entries")):
            created.append(["plugins", "entries"])
            if not doc.has(("plugins",)):
                created.append(["plugins"])
        doc.set_key(entry_key, _entry())
        created.append(list(entry_key))
    allow = _list_at(doc, path, ("plugins", "allow"))
    if allow is not None and pid not in allow:
        doc.append(("plugins", "allow"), pid)
    new = doc.text.encode("utf-8")
    if new == old:
        return already_there(agent, PART, target, data_dir, old)
    files.check_writable(target.real)
    return Change(agent, target, old, new, created, part=PART,
                  replan=lambda: _register(agent, home, data_dir, path, plugin, pid))


def _withdraw(agent: Agent, home: Path, data_dir: Path, path: Path, plugin: str, pid: str) -> Change | None:
    target = files.resolve_target(path, home, None)

    def surgical(text: str, record: manifest.Manifest | None) -> str | None:
        doc = hookconfig.parse(target.path, text)
        created = [tuple(c) for c in (record.created if record else [])]
        paths = doc.get(("plugins", "load", "paths")) if doc.has(("plugins", "load", "paths")) else None
        if isinstance(paths, list) and plugin in paths:
            doc.remove_items(("plugins", "load", "paths"), lambda v: v == plugin)
        entry_key = ("plugins", "entries", pid)
        if doc.has(entry_key) and doc.get(entry_key) == _entry():
            doc.remove_key(entry_key)
        allow = doc.get(("plugins", "allow")) if doc.has(("plugins", "allow")) else None
        if isinstance(allow, list) and pid in allow:
            doc.remove_items(("plugins", "allow"), lambda v: v == pid)
        # containers init created, innermost first, once empty
        for key in sorted(created, key=len, reverse=True):
            if key and key[0] == "plugins" and doc.has(key) and doc.is_empty_container(key):
                doc.remove_key(key)
        if record is not None and not record.existed_before and doc.is_empty_container(()):
            return None
        return doc.text

    return plan_removal(agent, PART, target, data_dir, surgical, lambda: _withdraw(agent, home, data_dir, path, plugin, pid))
