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
    Profile,
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


def _plan_init(selected: list[Agent], home: Path, data_dir: Path, project: Path | None, trust: bool, profile: Profile) -> list[tuple[Agent, Change | None, Change | None, Change | None]]:
    """(agent, hooks change, Codex trust change, instructions change) per agent; raises before any write."""
    from leanctx.installer import instructions

    planned = []
    for agent in selected:
        change = plan_install(agent, home, data_dir, project, profile)
        trust_change = None
        if trust and agent.name == "codex":
            from leanctx.installer.trust import plan_trust

            hooks_text = (change.new if change else files.read_bytes(_config(agent, home, project)) or b"").decode("utf-8")
            trust_change = plan_trust(agent, home, data_dir, project, hooks_text)
        skill_change = instructions.plan(agent, home, data_dir, project, want=profile.bot)
        planned.append((agent, change, trust_change, skill_change))
    return planned


def run_init(
    selected: list[Agent],
    home: Path,
    data_dir: Path,
    project: Path | None,
    dry_run: bool,
    say=click.echo,
    trust: bool = False,
    profile: Profile = Profile(),
) -> int:
    """Plan every agent, then write; `say` prints progress (doctor --fix sends it to stderr)."""
    try:
        if dry_run:
            planned = _plan_init(selected, home, data_dir, project, trust, profile)
            changes = [plan_wrapper(data_dir)] + [c for _, *agent_changes in planned for c in agent_changes]
            _print_diffs([c for c in changes if c], home)
            return 0
        with files.install_lock(data_dir):
            planned = _plan_init(selected, home, data_dir, project, trust, profile)
            wrapper_change = plan_wrapper(data_dir)
            if wrapper_change:  # first, so no host ever calls a missing wrapper
                apply_install(wrapper_change, data_dir)
            for agent, change, trust_change, skill_change in planned:
                done = apply_with_retry(change, apply_install, data_dir) if change else None
                where = display(done.path if done else _config(agent, home, project), home)
                verb = "wired" if done else "already wired"
                say(f"{agent.display_name}: {verb} {len(profile.events(agent))} events ({profile.name} profile) in {where}")
                if trust_change is not None:
                    apply_with_retry(trust_change, apply_install, data_dir)
                    say(f"  marked leanctx's hooks trusted in {display(trust_change.path, home)} (as Codex's /hooks screen does)")
                elif agent.name == "codex" and done and not trust:
                    say(f"  {CODEX_TRUST_HINT}")
                if skill_change is not None:
                    apply_with_retry(skill_change, apply_install if skill_change.new is not None else apply_uninstall, data_dir)
                    verb = "wrote the conversation-state instructions to" if skill_change.new is not None else "took the conversation-state instructions out of"
                    say(f"  {verb} {display(skill_change.path, home)}")
                elif profile.bot and agent.instructions_path(home, project) is None:
                    say(f"  {agent.display_name} keeps user-level rules in its settings, not a file: use --project DIR for a rules file")
    except ConfigError as exc:
        return _refuse(exc)
    say("Check it with: leanctx doctor")
    return 0


def _config(agent: Agent, home: Path, project: Path | None) -> Path:
    from leanctx.installer.install import config_path

    return config_path(agent, home, project)


def run_uninstall(selected: list[Agent], home: Path, data_dir: Path, project: Path | None, dry_run: bool, all_agents: bool) -> int:
    try:
        planned = _plan_uninstall(selected, home, data_dir, project)
        if dry_run:
            changes = [c for _, c in planned if c]
            if all_agents and (w := plan_wrapper_removal(data_dir)):
                changes.append(w)
            _print_diffs(changes, home)
            return 0
        with files.install_lock(data_dir):
            planned = _plan_uninstall(selected, home, data_dir, project)
            changed = {agent.name for agent, change in planned if change}
            for agent, change in planned:
                if change is None:
                    if agent.name not in changed:
                        click.echo(f"{agent.display_name}: nothing of ours in {display(_config(agent, home, project), home)}")
                    continue
                done = apply_with_retry(change, apply_uninstall, data_dir)
                if done is not None:
                    what = display(done.path, home)
                    click.echo(f"{agent.display_name}: " + (f"removed {what} (leanctx had created it)" if done.new is None else f"took our entries out of {what}"))
            if not manifest.all_manifests(data_dir) and (w := plan_wrapper_removal(data_dir)):
                apply_uninstall(w, data_dir)
                click.echo(f"Removed the hook wrapper {display(w.path, home)}")
    except ConfigError as exc:
        return _refuse(exc)
    return 0


def _plan_uninstall(selected: list[Agent], home: Path, data_dir: Path, project: Path | None) -> list[tuple[Agent, Change | None]]:
    """Every file to change, planned before any write (Codex trust keys need hooks.json as it is now)."""
    planned: list[tuple[Agent, Change | None]] = []
    for agent in selected:
        if agent.name == "codex":
            from leanctx.installer.trust import plan_untrust

            trust_change = plan_untrust(agent, home, data_dir, project)
            if trust_change is not None:
                planned.append((agent, trust_change))
        from leanctx.installer import instructions

        skill_change = instructions.plan(agent, home, data_dir, project, want=False)
        if skill_change is not None:
            planned.append((agent, skill_change))
        planned.append((agent, plan_uninstall(agent, home, data_dir, project)))
    return planned


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
