"""`leanctx init --agent codex --trust`: mark our Codex hooks trusted, and take that back out.

A headless machine (a bot on a VPS) has no `/hooks` screen to click through, and Codex skips
untrusted hooks silently. With `--trust`, init writes exactly what `/hooks` would write for our
hooks only — `[hooks.state."<key>"] trusted_hash = "sha256:…"` in the user's config.toml —
through tomlkit, so every comment and table of the user's survives. Uninstall removes those
tables again (always, whether or not --trust was used, since the user may have trusted them by
hand and the keys would otherwise dangle). Hooks the user disabled (`enabled = false`) stay so.
"""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.base import Agent, is_our_command
from leanctx.installer import codex_trust, files, hookconfig, tomledit
from leanctx.installer.files import Target
from leanctx.installer.install import Change, already_there, config_path, plan_removal


def trust_part(hooks_path: Path) -> str:
    """The manifest's name for our trust tables of one hooks.json (user and project level both
    keep theirs in the user's config.toml)."""
    return f"trust:{hooks_path}"


def config_toml(agent: Agent, home: Path) -> Path:
    return agent.config_dir(home) / "config.toml"


def our_entries(agent: Agent, hooks_path: Path, hooks_text: str | None) -> list[dict]:
    """Our handlers in a Codex hooks.json, with the trust key and hash Codex computes for them."""
    if not hooks_text:
        return []
    value = hookconfig.parse(hooks_path, hooks_text).value
    return [e for e in codex_trust.iter_hooks(value, hooks_path) if is_our_command(e["handler"].get("command"))]


def trust_report(agent: Agent, home: Path, hooks_path: Path, hooks_text: str) -> list[dict]:
    """[{event, key, status}] for each of our hooks: what Codex will do with it."""
    target = files.resolve_target(config_toml(agent, home), home)
    data = files.read_bytes(target.real)
    config = tomledit.values(target.path, files.decode(target.path, data)) if data is not None else {}
    current = codex_trust.states(config)
    return [
        {"event": e["event"], "key": e["key"], "status": codex_trust.status(current.get(e["key"]), e["hash"])}
        for e in our_entries(agent, hooks_path, hooks_text)
    ]


def plan_trust(agent: Agent, home: Path, data_dir: Path, project: Path | None, hooks_text: str) -> Change | None:
    hooks_path = config_path(agent, home, project)
    target = files.resolve_target(config_toml(agent, home), home)
    old = files.read_bytes(target.real)
    text = files.decode(target.path, old) if old is not None else ""
    current = codex_trust.states(tomledit.values(target.path, text))
    ours = our_entries(agent, hooks_path, hooks_text)
    needed = [e for e in ours if codex_trust.status(current.get(e["key"]), e["hash"]) in ("untrusted", "modified")]
    if not needed:
        return already_there(agent, trust_part(hooks_path), target, data_dir, old) if ours else None
    with tomledit.editing(target.path, text, "hooks"):
        new = codex_trust.trust(text, needed).encode("utf-8")
    files.check_writable(target.real)

    def again() -> Change | None:
        fresh = files.read_bytes(files.resolve_target(hooks_path, home, project).real)
        return plan_trust(agent, home, data_dir, project, fresh.decode("utf-8") if fresh else "")

    stale = any(codex_trust.status(current.get(e["key"]), e["hash"]) != "untrusted" for e in ours)
    return Change(agent, target, old, new, replan=again, part=trust_part(hooks_path), stale=stale)


def plan_untrust(agent: Agent, home: Path, data_dir: Path, project: Path | None) -> Change | None:
    hooks_path = config_path(agent, home, project)
    hooks_data = files.read_bytes(files.resolve_target(hooks_path, home, project).real)
    keys = {e["key"] for e in our_entries(agent, hooks_path, files.decode(hooks_path, hooks_data) if hooks_data else None)}
    target: Target = files.resolve_target(config_toml(agent, home), home)

    def surgical(text: str, record: object) -> str | None:
        if not keys:
            return text
        tomledit.values(target.path, text)
        with tomledit.editing(target.path, text, "hooks"):
            new_text = codex_trust.untrust(text, keys)
        if record is not None and not getattr(record, "existed_before", True) and not new_text.strip():
            return None
        return new_text

    return plan_removal(agent, trust_part(hooks_path), target, data_dir, surgical, lambda: plan_untrust(agent, home, data_dir, project))
