"""Reimplementation of Codex's hook-trust identity (key + sha256), verified against Codex 0.171.0.

Codex (``codex-rs/hooks/src/engine/discovery.rs``) runs a non-managed hook only if
``[hooks.state."<key>"]`` in the *user* ``config.toml`` holds ``trusted_hash == <current hash>``
(or ``--dangerously-bypass-hook-trust`` is given).  This module computes both, so ``leanctx doctor``
(and tests) can tell trusted / untrusted / modified / disabled without running Codex.

Verification: for every hook in several hooks.json / config.toml files (all 13 events, with and
without matcher/timeout/async/statusMessage/additionalContextLimit/commandWindows, timeout 0,
SessionEnd clamping, non-ASCII, tabs/newlines/ESC in the command) ``hook_hash`` equals the
``currentHash`` that ``codex app-server`` -> ``hooks/list`` reports, and writing that hash as
``trusted_hash`` makes ``codex exec`` (without the bypass flag) run exactly those hooks.
See ``codex_trust_notes.md``.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Union

__all__ = [
    "KNOWN_EVENTS",
    "MATCHERLESS_EVENTS",
    "event_key_label",
    "effective_timeout",
    "hook_identity",
    "hook_hash",
    "hook_key",
    "iter_hooks",
    "hook_states",
    "trust_status",
    "trust_toml_snippet",
]

# Event names Codex 0.171 accepts in hooks.json / [hooks] (others are ignored silently).
KNOWN_EVENTS = (
    "PreModelRequest", "PreToolUse", "PermissionRequest", "PostToolUse", "PreCompact", "PostCompact",
    "SessionStart", "SessionEnd", "UserPromptSubmit", "SubagentStart", "SubagentStop", "Stop", "Interrupt",
)
# Events whose matcher Codex drops (reported as null, not part of the hash).
MATCHERLESS_EVENTS = frozenset({"PreModelRequest", "UserPromptSubmit", "Stop", "Interrupt"})
# Events with a 1 s default timeout, clamped to at most 3 s ("clamping SessionEnd hook timeout to 3s").
SHORT_TIMEOUT_EVENTS = frozenset({"SessionEnd", "Interrupt"})


def event_key_label(event: str) -> str:
    """'SessionStart' -> 'session_start' (the form used in keys and in the hashed identity)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def effective_timeout(event: str, timeout: Optional[Any]) -> int:
    """The timeout Codex uses (and hashes): JSON key ``timeout`` (seconds); default 600
    (1 for SessionEnd/Interrupt); at least 1; SessionEnd/Interrupt at most 3.
    Note: ``timeout_sec`` / ``timeoutSec`` are NOT read by 0.171 (ignored as unknown keys)."""
    short = event in SHORT_TIMEOUT_EVENTS
    t = (1 if short else 600) if timeout is None else int(timeout)
    t = max(1, t)
    return min(t, 3) if short else t


def hook_identity(event: str, handler: Mapping[str, Any], matcher: Optional[str] = None) -> dict:
    """The normalized identity Codex serializes (TOML -> JSON, None fields dropped)."""
    norm: dict = {
        "type": "command",
        "command": handler["command"],
        "timeout": effective_timeout(event, handler.get("timeout")),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        norm["statusMessage"] = handler["statusMessage"]
    if handler.get("additionalContextLimit") is not None:
        norm["additionalContextLimit"] = handler["additionalContextLimit"]
    # commandWindows is normalized away (None) before hashing.
    ident: dict = {"event_name": event_key_label(event), "hooks": [norm]}
    if matcher is not None and event not in MATCHERLESS_EVENTS:
        ident["matcher"] = matcher
    return ident


def hook_hash(event: str, handler: Mapping[str, Any], matcher: Optional[str] = None) -> str:
    """'sha256:<hex>' of the canonical (sorted keys, compact, UTF-8, non-ASCII unescaped) JSON."""
    data = json.dumps(hook_identity(event, handler, matcher), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def hook_key(source_path: Union[str, Path], event: str, group_index: int, handler_index: int) -> str:
    """'<source_path>:<event_label>:<group_idx>:<handler_idx>'; source_path is the hooks.json
    (or config.toml) path exactly as Codex builds it: ``$CODEX_HOME/hooks.json`` (``~/.codex``),
    absolute, symlinks NOT resolved."""
    return f"{source_path}:{event_key_label(event)}:{group_index}:{handler_index}"


def iter_hooks(hooks: Mapping[str, Any], source_path: Union[str, Path]) -> Iterator[dict]:
    """Yield {key, event, matcher, handler, hash} for each command handler of a parsed hooks.json
    document (``{"hooks": {...}}``) or a config.toml ``[hooks]`` table (``{"PreToolUse": [...]}``).
    Unknown events and non-command handlers are skipped, as Codex does (positions still count)."""
    events = hooks.get("hooks", hooks) if isinstance(hooks, Mapping) else {}
    for event, groups in events.items():
        if event not in KNOWN_EVENTS or not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            matcher = group.get("matcher")
            for hi, handler in enumerate(group.get("hooks") or []):
                if handler.get("type") != "command" or not str(handler.get("command", "")).strip():
                    continue
                yield {
                    "key": hook_key(source_path, event, gi, hi),
                    "event": event,
                    "matcher": None if event in MATCHERLESS_EVENTS else matcher,
                    "handler": handler,
                    "hash": hook_hash(event, handler, matcher),
                }


def hook_states(config: Union[str, Path, Mapping[str, Any]]) -> dict:
    """``{key: {"enabled": bool|None, "trusted_hash": str|None}}`` from config.toml (path, text or
    parsed mapping).  Both TOML spellings work: ``[hooks.state."<key>"]`` tables and
    ``[hooks.state]`` with ``"<key>" = { trusted_hash = ... }``."""
    if not isinstance(config, Mapping):
        try:
            import tomllib  # py311+
        except ImportError:  # pragma: no cover
            import tomli as tomllib  # type: ignore
        p = Path(config) if not isinstance(config, str) or "\n" not in config else None
        text = p.read_text() if p is not None else str(config)
        config = tomllib.loads(text)
    state = ((config.get("hooks") or {}).get("state") or {})
    return {k: {"enabled": v.get("enabled"), "trusted_hash": v.get("trusted_hash")} for k, v in state.items()
            if isinstance(v, Mapping)}


def trust_status(states: Mapping[str, Mapping], key: str, current_hash: str) -> str:
    """'disabled' | 'trusted' | 'modified' | 'untrusted' (Codex's HookTrustStatus for user hooks,
    plus 'disabled' for ``enabled = false`` which Codex skips even when trusted or bypassed)."""
    st = states.get(key) or {}
    if st.get("enabled") is False:
        return "disabled"
    th = st.get("trusted_hash")
    if th is None:
        return "untrusted"
    return "trusted" if th == current_hash else "modified"


def trust_toml_snippet(key: str, current_hash: str) -> str:
    """The table Codex itself writes (via config/batchWrite) when the user trusts a hook."""
    return f'[hooks.state."{key}"]\ntrusted_hash = "{current_hash}"\n'
