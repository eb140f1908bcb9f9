"""Codex hook trust: which of our hooks Codex will actually run, and trusting them on request.

Codex (0.171) runs a user hook only when `[hooks.state."<key>"] trusted_hash` in the user's
`config.toml` equals the hash of the hook's current content; otherwise it skips the hook without
a word. The key is `<hooks.json path>:<snake_case event>:<group index>:<handler index>` and the
hash is sha256 over the canonical JSON of the normalized hook. Both were reproduced from Codex's
source and checked against `codex app-server`'s own `hooks/list` and real `codex exec` runs
(tests/e2e/codex_trust_notes.md).

Used by doctor and `leanctx init --agent codex --trust` (installer/trust.py), never by the hook path.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import tomlkit

KNOWN_EVENTS = frozenset(
    {"PreModelRequest", "PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact", "SessionStart",
     "SessionEnd", "UserPromptSubmit", "SubagentStart", "SubagentStop", "Stop", "Interrupt"}
)
MATCHERLESS_EVENTS = frozenset({"PreModelRequest", "UserPromptSubmit", "Stop", "Interrupt"})
SHORT_TIMEOUT_EVENTS = frozenset({"SessionEnd", "Interrupt"})


def event_label(event: str) -> str:
    """'SessionStart' -> 'session_start', the form in trust keys and hashes."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def effective_timeout(event: str, timeout: Any) -> int:
    short = event in SHORT_TIMEOUT_EVENTS
    value = (1 if short else 600) if timeout is None else int(timeout)
    value = max(1, value)
    return min(value, 3) if short else value


def hook_hash(event: str, handler: Mapping[str, Any], matcher: str | None) -> str:
    normalized: dict[str, Any] = {
        "type": "command",
        "command": handler["command"],
        "timeout": effective_timeout(event, handler.get("timeout")),
        "async": bool(handler.get("async", False)),
    }
    for optional in ("statusMessage", "additionalContextLimit"):
        if handler.get(optional) is not None:
            normalized[optional] = handler[optional]
    identity: dict[str, Any] = {"event_name": event_label(event), "hooks": [normalized]}
    if matcher is not None and event not in MATCHERLESS_EVENTS:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def iter_hooks(hooks_doc: Mapping[str, Any], source: Path) -> Iterator[dict]:
    """{key, event, handler, hash} for every command handler Codex would consider, in position order."""
    events = hooks_doc.get("hooks") if isinstance(hooks_doc, Mapping) else None
    if not isinstance(events, Mapping):
        return
    for event, groups in events.items():
        if event not in KNOWN_EVENTS or not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            if not isinstance(group, Mapping):
                continue
            handlers = group.get("hooks") or []
            for hi, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if not isinstance(handler, Mapping) or handler.get("type") != "command" or not str(handler.get("command", "")).strip():
                    continue
                yield {
                    "key": f"{source}:{event_label(event)}:{gi}:{hi}",
                    "event": event,
                    "handler": handler,
                    "hash": hook_hash(event, handler, group.get("matcher")),
                }


def states(config: Mapping[str, Any]) -> dict[str, dict]:
    hooks = config.get("hooks")
    state = hooks.get("state") if isinstance(hooks, Mapping) else None
    return {k: dict(v) for k, v in state.items() if isinstance(v, Mapping)} if isinstance(state, Mapping) else {}


def status(state: Mapping[str, Any] | None, current_hash: str) -> str:
    """'disabled' | 'trusted' | 'modified' | 'untrusted', as Codex decides."""
    state = state or {}
    if state.get("enabled") is False:
        return "disabled"
    trusted = state.get("trusted_hash")
    if trusted is None:
        return "untrusted"
    return "trusted" if trusted == current_hash else "modified"


def trust(config_text: str, entries: list[dict]) -> str:
    """config.toml text with `trusted_hash` set for `entries` (comments and order kept, via tomlkit)."""
    from leanctx.installer.tomledit import dumps, load, table_in

    doc = load(config_text)
    hooks = doc.get("hooks")
    if hooks is None:
        hooks = tomlkit.table(is_super_table=True)
        doc["hooks"] = hooks
    state = hooks.get("state")
    if state is None:
        state = tomlkit.inline_table() if isinstance(hooks, tomlkit.items.InlineTable) else tomlkit.table(is_super_table=True)
        hooks["state"] = state
    for entry in entries:
        table = state.get(entry["key"])
        if table is None:
            state[entry["key"]] = table_in(state, {"trusted_hash": entry["hash"]})
        else:
            table["trusted_hash"] = entry["hash"]
    return dumps(doc, config_text)


def untrust(config_text: str, keys: set[str]) -> str:
    """config.toml text without the state tables of `keys` (and without containers left empty)."""
    from leanctx.installer.tomledit import load

    doc = load(config_text)
    hooks = doc.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    if not isinstance(state, dict):
        return config_text
    for key in keys:
        if key in state:
            del state[key]
    if not state:
        del hooks["state"]
    if not hooks:
        del doc["hooks"]
    from leanctx.installer.tomledit import dumps_after_removal

    return dumps_after_removal(doc, config_text)
