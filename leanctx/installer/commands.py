"""What `leanctx init` and `leanctx uninstall` print and do, on top of the planner."""

from __future__ import annotations

from pathlib import Path

import click

from leanctx import agents
from leanctx.agents.base import Agent
from leanctx.installer import files, hookconfig, hostload, manifest, mcpreg
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
    retire_old_gate,
    unified_diff,
    wrapper_in_use,
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


def _plan_init(
    selected: list[Agent], home: Path, data_dir: Path, project: Path | None, trust: bool, profile: Profile, mcp: bool,
    mcp_name: str | None = None,
) -> list[tuple[Agent, list[Change], Change | None, list[Change]]]:
    """(agent, hooks changes, Codex trust change, other changes) per agent; raises before any write.

    The other changes: the bot profile's instructions, the MCP server entry and its read rule
    (each installed or taken out, so the run states the whole profile). The server keeps the
    name an earlier init gave it unless `mcp_name` says otherwise (then the old entry goes)."""
    from dataclasses import replace

    from leanctx.installer import instructions, markers, mcpapprove, mcpreg, pluginreg

    planned = []
    for agent in selected:
        name = mcpreg.chosen_name(agent, home, data_dir, project, mcp_name)
        agent_profile = replace(profile, mcp_name=name)
        hooks = _plan_hooks(agent, home, data_dir, project, agent_profile)
        trust_change = None
        if trust and agent.name == "codex":
            from leanctx.installer.trust import plan_trust

            hooks_text = (hooks[0].new if hooks else files.read_bytes(_config(agent, home, project)) or b"").decode("utf-8")
            trust_change = plan_trust(agent, home, data_dir, project, hooks_text)
        others = [
            pluginreg.plan(agent, home, data_dir, project, want=True),
            instructions.plan(agent, home, data_dir, project, want=profile.bot),
            *mcpreg.plan_unregister_all(agent, home, data_dir, project, keep=name if mcp else None),
            mcpreg.plan_register(agent, home, data_dir, project, name, bot=profile.bot) if mcp else None,
            *mcpapprove.plans(agent, home, data_dir, project, keep=name if mcp else None),
            instructions.plan(agent, home, data_dir, project, want=mcp, spec=instructions.CTX_READ, server=name),
        ]
        others = [c for c in others if c is not None]
        # a host's first-start markers go in before the config init creates, out after it
        marks = markers.plan(agent, home, data_dir, project, others)
        others = [c for c in marks if not c.removal] + others + [c for c in marks if c.removal]
        planned.append((agent, hooks, trust_change, others))
    return planned


def _plan_hooks(agent: Agent, home: Path, data_dir: Path, project: Path | None, profile: Profile) -> list[Change]:
    """Our hook entries in the host's config, or our hook files (OpenCode's plugin, Cline's files)."""
    if agent.hook_file_mode is not None:
        from leanctx.installer import hookfiles

        if project is not None and agent.project_config_path(project) is None:
            raise ConfigError(f"{agent.display_name} has no project-level config; "
                              "run without --project")
        return hookfiles.plan_install(agent, home, data_dir, project, profile)
    change = plan_install(agent, home, data_dir, project, profile)
    return [change] if change is not None else []


def run_init(
    selected: list[Agent],
    home: Path,
    data_dir: Path,
    project: Path | None,
    dry_run: bool,
    say=click.echo,
    trust: bool = False,
    profile: Profile = Profile(),
    mcp: bool = True,
    mcp_name: str | None = None,
) -> int:
    """Plan every agent, then write; `say` prints progress (doctor --fix sends it to stderr)."""
    files.return_big_blocks()
    project = files.real_folder(project)
    if not mcp and profile.read_gate:
        from dataclasses import replace

        profile = replace(profile, read_gate=False)
    try:
        if dry_run:
            planned = _plan_init(selected, home, data_dir, project, trust, profile, mcp, mcp_name)
            changes = [c for c in [_wrapper_change(data_dir, project)] + [c for _, hooks, trusts, others in planned for c in [*hooks, trusts, *others]] if c and not c.record_only]
            _print_diffs(changes, home)
            return _warn_not_loaded(selected, home, project, mcp, hostload.planned_reader(home, project, changes), dry_run=True)
        with files.install_lock(data_dir):
            _write_init(_plan_init(selected, home, data_dir, project, trust, profile, mcp, mcp_name), home, data_dir, project, say, trust, profile)
            if project is not None:
                _say_portable(say, data_dir, home)
    except ConfigError as exc:
        return _refuse(exc)
    say("Check it with: leanctx doctor" + (f" --project {project}" if project is not None else ""))
    # the planned changes (old and new bytes of every file) are gone by now: a big file is read once more here
    return _warn_not_loaded(selected, home, project, mcp, hostload.disk_reader(home, project), dry_run=False)


def _wrapper_change(data_dir: Path, project: Path | None) -> Change | None:
    """The hook wrapper to write: user-level installs call it; project files call leanctx-hook on PATH."""
    return plan_wrapper(data_dir) if project is None else None


def _write_init(planned: list, home: Path, data_dir: Path, project: Path | None, say, trust: bool, profile: Profile) -> None:
    """Write what `_plan_init` planned (under the install lock), saying what each step did."""
    wrapper_change = _wrapper_change(data_dir, project)
    if wrapper_change:  # first, so no host ever calls a missing wrapper
        apply_install(wrapper_change, data_dir)
    new_files: set[Path] = set()  # files this run created: a second change to one is still "created"
    for agent, hooks, trust_change, others in planned:
        done = [d for d in (apply_with_retry(c, apply_uninstall if c.removal else apply_install, data_dir) for c in hooks) if d]
        written = [d for d in done if not d.record_only]
        events = f"{len(profile.events(agent))} events ({profile.name} profile)"
        if written:
            say(f"{agent.display_name}: wired {events}: {_files_written(written, new_files, home)}")
        else:
            where = display(done[0].path if done else _config(agent, home, project), home)
            if agent.hook_file_mode is not None and len(agent.hook_file_names()) > 1:  # Cline: one file per event
                where = display(agent.hook_folder(home, project), home)
            say(f"{agent.display_name}: already wired {events} in {where}")
        if trust_change is not None:
            done_trust = apply_with_retry(trust_change, apply_install, data_dir)
            if done_trust is not None:
                say(f"  {file_verb(done_trust, new_files)} {display(done_trust.path, home)}: "
                    "marked leanctx's hooks trusted (as Codex's /hooks screen does)")
        elif agent.name == "codex" and written and not trust:
            say(f"  {CODEX_TRUST_HINT}")
        if agent.init_hint:
            say(f"  {agent.init_hint}")
        for other in others:
            done_other = apply_with_retry(other, apply_uninstall if other.removal else apply_install, data_dir)
            if done_other is not None and not done_other.record_only:
                say(f"  {_one_file_written(done_other, new_files, home)}")
        manual = mcpreg.by_hand(agent, data_dir, project, profile.bot) if profile.read_gate else None
        if manual:  # a host whose MCP file init does not edit (Goose's YAML): the user adds the entry
            say(f"  MCP server not registered (leanctx does not edit {agent.display_name}'s YAML config); {manual}")
        if profile.guard and agent.guard_event is None:
            click.echo(f"WARNING: {agent.display_name} cannot deny a single tool call, so --guard adds nothing there: "
                       "do not rely on it for a multi-user bot on this host", err=True)
        if profile.bot and agent.instructions_path(home, project) is None and (project is not None or agent.project_config_path(home) is not None):
            say(f"  {agent.display_name} keeps user-level rules in its settings, not a file: use --project DIR for a rules file")
    retire_old_gate(data_dir)  # the old http gate's entries are replaced above: its port and secret go too


def file_verb(done: Change, new_files: set[Path]) -> str:
    """What a write did to its file: "created" one that did not exist before this run,
    "updated" one that did, "removed" one it deleted."""
    if done.new is None:
        return "removed"
    if done.old is None or done.target.real in new_files:
        new_files.add(done.target.real)
        return "created"
    return "updated"


def _one_file_written(done: Change, new_files: set[Path], home: Path) -> str:
    """`created ~/.claude.json with the MCP server entry 'leanctx'` and the like."""
    verb = file_verb(done, new_files)
    label = _part_label(done.part)
    shown = display(done.path, home)
    if verb == "removed":
        return f"removed {shown} (leanctx had created it for {label})"
    if done.removal:
        return f"{verb} {shown}: took out {label}"
    return f"created {shown} with {label}" if verb == "created" else f"updated {shown}: {label}"


def _files_written(written: list[Change], new_files: set[Path], home: Path) -> str:
    """`created ~/.claude/settings.json`, or for a host with a file per event (Cline)
    `created 6 files in ~/.cline/hooks`."""
    verbs = [file_verb(d, new_files) for d in written]
    folders = {d.path.parent for d in written}
    if len(written) == 1 or len(folders) > 1:
        return ", ".join(f"{verb} {display(d.path, home)}" for verb, d in zip(verbs, written))
    counts = [(verb, verbs.count(verb)) for verb in ("created", "updated", "removed") if verb in verbs]
    text = " and ".join(f"{verb} {n} file{'s' if n > 1 else ''}" for verb, n in counts)
    return f"{text} in {display(folders.pop(), home)}"


def _part_label(part: str) -> str:
    """What one of our parts of a file is, for init's report."""
    kind, _, name = part.partition(":")
    labels = {"mcp": f"the MCP server entry {name!r}", "mcp-approve": f"the approval of MCP server {name!r}",
              "plugin": "the plugin's registration", "instructions": f"the {name} instructions",
              "trust": "the trust of leanctx's hooks", "hooks": "leanctx's hook entries",
              "first-start": "the host's first-start marker"}
    return labels.get(kind, f"leanctx's {kind}")


def _warn_not_loaded(selected: list[Agent], home: Path, project: Path | None, mcp: bool, read: hostload.Reader, dry_run: bool) -> int:
    """After every file is written (or diffed): each file a host will not load as it is; 1 if any."""
    found = [(agent, problem) for agent in selected for problem in hostload.problems(agent, home, project, read, mcp)]
    return hostload.warn(found, home, dry_run)


def _say_portable(say, data_dir: Path, home: Path) -> None:
    """A project's files name `leanctx-hook` and `leanctx` as found on PATH (they are committed and
    shared): say so, and say when this machine's PATH does not have them."""
    import shutil

    from leanctx import paths

    say("The project's files call `leanctx-hook` and `leanctx` from PATH, so they hold no path of this machine.")
    missing = [name for name in ("leanctx-hook", "leanctx") if shutil.which(name) is None]
    if missing:
        say(f"  warning: {' and '.join(missing)} not on PATH here: the hosts will not find them; install leanctx "
            "so they are (e.g. `pipx install .` in a clone of leanctx)")
    if data_dir != paths.default_data_dir():
        say(f"  note: they use LEANCTX_HOME from the host's environment (else {display(paths.default_data_dir(), home)}), "
            f"not {display(data_dir, home)}")


def _config(agent: Agent, home: Path, project: Path | None) -> Path:
    from leanctx.installer.install import config_path

    return config_path(agent, home, project)


def run_uninstall(selected: list[Agent], home: Path, data_dir: Path, project: Path | None, dry_run: bool, all_agents: bool) -> int:
    files.return_big_blocks()
    project = files.real_folder(project)
    try:
        planned = _plan_uninstall(selected, home, data_dir, project)
        if dry_run:
            changes = [c for _, c in planned if c and not c.record_only]
            if all_agents and (w := plan_wrapper_removal(data_dir)):
                changes.append(w)
            _print_diffs(changes, home)
            return 0
        planned = []  # re-planned under the lock: never two plans (old and new bytes of a big file) at once
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
                    if done.record_only:
                        if done.note:
                            click.echo(f"{agent.display_name}: left our entry in {what} ({done.note})")
                        continue
                    click.echo(f"{agent.display_name}: " + (f"removed {what} (leanctx had created it)" if done.new is None
                                                            else f"updated {what}: took out {_part_label(done.part)}"))
            if not wrapper_in_use(home, data_dir) and (w := plan_wrapper_removal(data_dir)):
                apply_uninstall(w, data_dir)
                click.echo(f"Removed the hook wrapper {display(w.path, home)}")
            retire_old_gate(data_dir)
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
        from leanctx.installer import instructions, markers, mcpapprove, mcpreg, pluginreg

        others = [c for c in (
            pluginreg.plan(agent, home, data_dir, project, want=False),
            instructions.plan(agent, home, data_dir, project, want=False),
            instructions.plan(agent, home, data_dir, project, want=False, spec=instructions.CTX_READ),
            *mcpreg.plan_unregister_all(agent, home, data_dir, project),
            *mcpapprove.plans(agent, home, data_dir, project),
        ) if c is not None]
        # after the config: a host's first-start marker goes only with the config init created
        others += markers.plan(agent, home, data_dir, project, others, uninstall=True)
        planned += [(agent, c) for c in others]
        if agent.hook_file_mode is not None:
            from leanctx.installer import hookfiles

            planned += [(agent, c) for c in hookfiles.plan_uninstall(agent, home, data_dir, project)]
        else:
            planned.append((agent, plan_uninstall(agent, home, data_dir, project)))
    return planned


def installed_agents(home: Path, data_dir: Path) -> list[Agent]:
    """Agents with a manifest or with our entries in their user config (for `uninstall --agent all`)."""
    names = {a for m in manifest.all_manifests(data_dir) for a in m.agents()}
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
            isinstance(groups, list) and any(agent.our_commands(g) for g in groups) for groups in hooks.values()
        ):
            names.add(agent.name)
    return [a for a in agents.all_agents() if a.name in names]
