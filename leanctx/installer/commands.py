"""What `leanctx init` and `leanctx uninstall` print and do, on top of the planner."""

from __future__ import annotations

from pathlib import Path

import click

from leanctx import agents
from leanctx.agents.base import Agent
from leanctx.installer import files, hookconfig, manifest
from leanctx.installer.files import ConfigError
from leanctx.installer.install import (
    Change,
    apply_install,
    apply_uninstall,
    apply_with_retry,
    display,
    plan_install,
    plan_uninstall,
    plan_wrapper,
    plan_wrapper_removal,
    unified_diff,
)

EXIT_REFUSED = 2

CODEX_TRUST_HINT = (
    "Codex runs a new or changed hook only after you trust it: start `codex`, open /hooks and trust the "
    "leanctx entries (for one-off automation, `codex exec --dangerously-bypass-hook-trust`). "
    "`leanctx doctor --agent codex` reports hooks that are still untrusted."
)


def _refuse(exc: ConfigError) -> int:
    click.echo(f"leanctx: {exc}", err=True)
    click.echo("leanctx: nothing was written.", err=True)
    return EXIT_REFUSED


def _print_diffs(changes: list[Change], home: Path) -> None:
    if not changes:
        click.echo("Nothing to change.")
    for change in changes:
        click.echo(unified_diff(change, home), nl=False)


def run_init(selected: list[Agent], home: Path, data_dir: Path, project: Path | None, dry_run: bool, say=click.echo) -> int:
    """Plan every agent, then write; `say` prints progress (doctor --fix sends it to stderr)."""
    try:
        if dry_run:
            changes = [c for c in [plan_wrapper(data_dir)] + [plan_install(a, home, data_dir, project) for a in selected] if c]
            _print_diffs(changes, home)
            return 0
        with files.install_lock(data_dir):
            planned = [(a, plan_install(a, home, data_dir, project)) for a in selected]
            wrapper_change = plan_wrapper(data_dir)
            if wrapper_change:  # first, so no host ever calls a missing wrapper
                apply_install(wrapper_change, data_dir)
            for agent, change in planned:
                done = apply_with_retry(change, apply_install, data_dir) if change else None
                where = display(done.path if done else _config(agent, home, project), home)
                verb = "wired" if done else "already wired"
                say(f"{agent.display_name}: {verb} {len(agent.events)} events in {where}")
                if agent.name == "codex" and done:
                    say(f"  {CODEX_TRUST_HINT}")
    except ConfigError as exc:
        return _refuse(exc)
    say("Check it with: leanctx doctor")
    return 0


def _config(agent: Agent, home: Path, project: Path | None) -> Path:
    from leanctx.installer.install import config_path

    return config_path(agent, home, project)


def run_uninstall(selected: list[Agent], home: Path, data_dir: Path, project: Path | None, dry_run: bool, all_agents: bool) -> int:
    try:
        planned = [(a, plan_uninstall(a, home, data_dir, project)) for a in selected]
        if dry_run:
            changes = [c for _, c in planned if c]
            if all_agents and (w := plan_wrapper_removal(data_dir)):
                changes.append(w)
            _print_diffs(changes, home)
            return 0
        with files.install_lock(data_dir):
            planned = [(a, plan_uninstall(a, home, data_dir, project)) for a in selected]
            for agent, change in planned:
                done = apply_with_retry(change, apply_uninstall, data_dir) if change else None
                where = display(_config(agent, home, project), home)
                if done is None:
                    click.echo(f"{agent.display_name}: nothing of ours in {where}")
                elif done.new is None:
                    click.echo(f"{agent.display_name}: removed {where} (leanctx had created it)")
                else:
                    click.echo(f"{agent.display_name}: removed our hooks from {where}")
            if not manifest.all_manifests(data_dir) and (w := plan_wrapper_removal(data_dir)):
                apply_uninstall(w, data_dir)
                click.echo(f"Removed the hook wrapper {display(w.path, home)}")
    except ConfigError as exc:
        return _refuse(exc)
    return 0


def installed_agents(home: Path, data_dir: Path) -> list[Agent]:
    """Agents with a manifest or with our entries in their user config (for `uninstall --agent all`)."""
    names = {m.agent for m in manifest.all_manifests(data_dir)}
    for agent in agents.all_agents():
        path = agent.user_config_path(home)
        try:
            data = files.read_bytes(path)
            if data is None:
                continue
            doc = hookconfig.parse(path, files.decode(path, data))
        except ConfigError:
            continue
        hooks = doc.value.get(agent.hooks_key[0]) if isinstance(doc.value, dict) else None
        if isinstance(hooks, dict) and any(
            isinstance(groups, list) and any(agent.is_our_group(g) for g in groups) for groups in hooks.values()
        ):
            names.add(agent.name)
    return [a for a in agents.all_agents() if a.name in names]
