"""Adding and removing our hook entries in one host config's text (pure functions).

The rules the tests pin:
- foreign entries (other tools' hooks, the user's own) are never touched or reordered;
- our entry is recognised by the wrapper name in its command, so an entry written by an older
  install or another data dir is updated in place (same position: Codex trust is positional);
- adding twice changes nothing the second time;
- removal takes out exactly our entries, then the containers we created if they are empty.
The text is edited in place (jsonc.Document), so comments, key order and formatting survive.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from leanctx.agents.base import Agent, EventSpec
from leanctx.installer import files, jsonc
from leanctx.installer.files import ConfigError

Container = tuple  # a path of keys/indexes inside the JSON document


def parse(path: Path, text: str | bytes) -> jsonc.Document:
    """Parse a host config; a parse error becomes a ConfigError naming file, line and column.
    Given bytes (a big ~/.claude.json), it is never decoded whole (`jsonc.Document.from_utf8`)."""
    try:
        doc = jsonc.Document(text) if isinstance(text, str) else jsonc.Document.from_utf8(text)
    except UnicodeDecodeError as exc:
        raise files.not_utf8(path, exc) from None
    except jsonc.JsoncError as exc:
        raise files.ParseError(path, exc.line, exc.col, "JSON", exc.msg) from None
    if not doc.is_object:
        raise ConfigError(f"{path}: top level is a JSON {type(doc.value).__name__}, expected an object; left untouched")
    return doc


def new_file_text(agent: Agent) -> str:
    """What a config we create starts as, before our entries are appended."""
    if agent.new_file_keys:
        return json.dumps(agent.new_file_keys, indent=2) + "\n"
    return "{}\n"


def _event_list(path: Path, doc: jsonc.Document, key: Container) -> list:
    if not doc.has(key):
        return []
    value = doc.get(key)
    if not isinstance(value, list):
        where = ".".join(str(k) for k in key)
        raise ConfigError(f"{path}: {where} is a JSON {type(value).__name__}, expected a list; left untouched")
    return value


def add_hooks(
    agent: Agent,
    path: Path,
    text: str | None,
    command_for: Callable[[str, tuple[str, ...]], str],
    profile: list[tuple[EventSpec, tuple[str, ...]]] | None = None,
) -> tuple[str, list[Container]]:
    """Return (new text, containers created) with our entry present once for every event of the
    profile (default: the plain coding profile), and gone from events the profile does not wire
    (init states the whole profile: running it without --guard takes the guard out again)."""
    profile = profile if profile is not None else agent.profile_events()
    doc = parse(path, text if text is not None and text.strip() else new_file_text(agent))
    hooks_parent = agent.hooks_key
    if doc.has(hooks_parent) and not isinstance(doc.get(hooks_parent), dict):
        where = ".".join(hooks_parent)
        raise ConfigError(f"{path}: {where} is not an object; left untouched")
    created: list[Container] = []
    wanted = {spec.name for spec, _ in profile}
    if doc.has(hooks_parent):
        for event in [e for e in doc.get(hooks_parent) if e not in wanted]:
            key = hooks_parent + (event,)
            if isinstance(doc.get(key), list) and _remove_ours(agent, doc, key) and not doc.get(key):
                doc.remove_key(key)
    for spec, flags in profile:
        key = hooks_parent + (spec.name,)
        want = agent.hook_group(command_for(spec.name, flags), spec)
        groups = _event_list(path, doc, key)
        places, stray = _our_places(agent, groups, want)
        if places:
            keep = places[0]
            # same position, new content (a no-op when equal); inside a user's group, only our handler
            doc.set_key(key + keep, want if len(keep) == 1 else want["hooks"][0])
        for place in sorted(places[1:] + stray, reverse=True):  # duplicates, strays: from the end
            _remove_place(doc, key, place)
        if not places:
            created += [c for c in doc.append(key, want) if c not in created]
    return doc.text, created


def _our_places(agent: Agent, groups: list, want: object) -> tuple[list[tuple], list[tuple]]:
    """Where our entries for one event are: (group index,) for a group of ours, (group index,
    "hooks", handler index) for our handler inside a user's group (an old install's, updated
    where it is). Returns (places, strays): a handler in a user's group under another matcher
    than ours is a stray, taken out rather than kept."""
    places: list[tuple] = []
    strays: list[tuple] = []
    matcher = want.get("matcher") if isinstance(want, dict) else None
    for gi, group in enumerate(groups):
        if agent.is_our_group(group):
            places.append((gi,))
        for hi in agent.mixed_handlers(group):
            (places if group.get("matcher") == matcher else strays).append((gi, "hooks", hi))
    return places, strays


def our_places(agent: Agent, path: Path, text: str) -> list[tuple]:
    """(event, place) of every entry of ours in a config's text (an older install's included)."""
    doc = parse(path, text) if text.strip() else None
    hooks = doc.get(agent.hooks_key) if doc is not None and doc.has(agent.hooks_key) else None
    if not isinstance(hooks, dict):
        return []
    return [(event, place) for event, groups in hooks.items() if isinstance(groups, list)
            for place in sum(_our_places(agent, groups, None), [])]


def _remove_place(doc: jsonc.Document, key: Container, place: tuple) -> None:
    if len(place) == 1:
        doc.remove_index(key, place[0])
    else:
        doc.remove_index(key + place[:2], place[2])


def _remove_ours(agent: Agent, doc: jsonc.Document, key: Container) -> int:
    """Take our entries out of one event's list: our groups, and our handlers inside users' groups."""
    places, strays = _our_places(agent, doc.get(key), None)
    for place in sorted(places + strays, reverse=True):
        _remove_place(doc, key, place)
    return len(places) + len(strays)


def remove_hooks(agent: Agent, path: Path, text: str, created: list[Container] | None) -> str:
    """Return the text without our entries and without the (now empty) containers we created.

    `created` is what the install manifest recorded; None means unknown (manifest lost), in
    which case an event list or hooks object is dropped only when our removal emptied it."""
    doc = parse(path, text)
    hooks_parent = agent.hooks_key
    if not doc.has(hooks_parent) or not isinstance(doc.get(hooks_parent), dict):
        return text
    emptied: list[Container] = []
    for event in list(doc.get(hooks_parent)):
        key = hooks_parent + (event,)
        groups = doc.get(key)
        if not isinstance(groups, list):
            continue
        if _remove_ours(agent, doc, key) and not doc.get(key):
            emptied.append(key)
    if created is not None:
        candidates = sorted({tuple(c) for c in created}, key=len, reverse=True)
    else:
        candidates = emptied + ([hooks_parent] if emptied else [])
    for key in candidates:
        if doc.has(key) and doc.is_empty_container(key):
            doc.remove_key(key)
    return doc.text

