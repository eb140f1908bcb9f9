"""The `leanctx` command (click). Heavy imports live here and below, never on the hook path."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

import leanctx
from leanctx import agents, paths, safedir
from leanctx.agents.base import Agent

EXIT_REFUSED = 2


def _agent_list(name: str, home: Path, for_uninstall: bool = False) -> list[Agent]:
    if name == "all":
        if for_uninstall:
            from leanctx.installer.commands import installed_agents

            return installed_agents(home, paths.usable_data_dir())
        found = [a for a in agents.all_agents() if a.detect(home)]
        if not found:
            _no_host_found(home)
        return found
    try:
        return [agents.get(name)]
    except agents.UnknownAgent as exc:
        raise click.UsageError(str(exc)) from None


def _no_host_found(home: Path) -> None:
    """`--agent all` with nothing to act on: one line naming what was looked for, exit 1."""
    from leanctx.installer.install import display

    folders = ", ".join(display(a.config_dir(home), home) for a in agents.all_agents())
    binaries = ", ".join(b for a in agents.all_agents() for b in a.binaries)
    click.echo(f"leanctx: no supported host found (looked for {folders} and for {binaries} on PATH); "
               f"name one: leanctx init --agent {'|'.join(agents.names())}", err=True)
    sys.exit(1)


def _existing_project(project: Path | None) -> Path | None:
    """--project DIR must name a folder that exists: a mistyped DIR is refused in one line, exit
    2, before anything is written (init would otherwise create it and a project tree in it)."""
    if project is not None and not project.is_dir():
        click.echo(f"leanctx: --project {project}: no such folder; check the spelling, or create it first "
                   f"(mkdir -p {shlex.quote(str(project))}) and run this again", err=True)
        sys.exit(EXIT_REFUSED)
    return project


class _AgentChoice(click.ParamType):
    """Any known agent name or `all`; an unknown one is a usage error listing the known ones."""

    name = "agent"

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        if value == "all" or value in agents.names():
            return value
        self.fail(f"unknown agent {value!r}; known agents: {', '.join(agents.names())}, or all", param, ctx)


AGENT_HELP = f"Host to act on: {', '.join(agents.names())}, or all (every host detected here)."


class _Leanctx(click.Group):
    """The command group, with stdout/stderr that survive a closed pipe and a last-resort handler
    (leanctx/cli_safety.py): no command ends in a traceback."""

    def main(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        from leanctx import cli_safety

        cli_safety.tolerate_closed_output()
        return super().main(*args, **kwargs)

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except safedir.Unsafe as exc:  # refused before anything is written, and nothing logged there
            click.echo(f"leanctx: {exc}", err=True)
            sys.exit(EXIT_REFUSED)
        except Exception as exc:  # noqa: BLE001 - the last resort: one line, the log, an exit code
            from leanctx import cli_safety

            sys.exit(cli_safety.report(exc))


@click.group(cls=_Leanctx, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(leanctx.__version__, prog_name="leanctx")
def main() -> None:
    """Hooks, installer and doctor for AI coding agents and always-on bots."""


@main.command()
@click.option("--agent", "agent_name", required=True, type=_AgentChoice(), help=AGENT_HELP)
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), help="Write the project-level config in DIR (an existing folder) instead of the user-level one.")
@click.option("--dry-run", is_flag=True, help="Print a unified diff of every file that would change; change nothing.")
@click.option("--trust", is_flag=True, help="Codex only: mark leanctx's hooks trusted in ~/.codex/config.toml, as its /hooks screen would (for headless machines).")
@click.option("--bot", is_flag=True, help="Always-on bot profile: record prompts and replies in conversation-state and hand the thread back at session start.")
@click.option("--guard", is_flag=True, help="Multi-user bots: deny tool calls that touch another user's folder under $CKS_HOME/user/.")
@click.option("--no-mcp", is_flag=True, help="Do not register leanctx's MCP server (ctx_read) or its read rule.")
@click.option("--mcp-name", metavar="NAME", help="Register leanctx's MCP server under NAME instead of `leanctx` (when you have a server of that name). Remembered for later runs.")
@click.option("--no-builtin-gate", is_flag=True, help="Leave the host's own file reader and shell reads (Read, Bash, read_file, view, ...) ungated: only ctx_read gets the read cache's stubs.")
def init(agent_name: str, project: Path | None, dry_run: bool, trust: bool, bot: bool, guard: bool, no_mcp: bool, mcp_name: str | None,
         no_builtin_gate: bool) -> None:
    """Wire leanctx's hooks into a host's config (merging, never replacing).

    init states the whole profile: running it again without --bot or --guard takes them out."""
    from leanctx.installer.commands import run_init
    from leanctx.installer.install import Profile

    project = _existing_project(project)
    home = paths.home()
    selected = _agent_list(agent_name, home)
    sys.exit(run_init(selected, home, paths.usable_data_dir(), project, dry_run, trust=trust, profile=Profile(bot=bot, guard=guard, builtin_read=not no_builtin_gate), mcp=not no_mcp, mcp_name=mcp_name))


@main.command()
@click.option("--agent", "agent_name", required=True, type=_AgentChoice(), help=AGENT_HELP)
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), help="Act on the project-level config in DIR.")
@click.option("--dry-run", is_flag=True, help="Print a unified diff of every file that would change; change nothing.")
def uninstall(agent_name: str, project: Path | None, dry_run: bool) -> None:
    """Take out exactly what init put in."""
    from leanctx.installer.commands import run_uninstall

    project = _existing_project(project)
    home = paths.home()
    sys.exit(run_uninstall(_agent_list(agent_name, home, for_uninstall=True), home, paths.usable_data_dir(), project, dry_run, all_agents=agent_name == "all"))


@main.command()
@click.option("--agent", "agent_name", type=_AgentChoice(), default="all", show_default=True, help=AGENT_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (schema 1, described in docs/commands.md).")
@click.option("--fix", is_flag=True, help="Re-run init for every agent whose checks fail (not one with a file init refuses, such as one it cannot parse: the fix line says what to edit), then check again.")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), help="Check the project-level install in DIR instead of the user-level one.")
def doctor(agent_name: str, as_json: bool, fix: bool, project: Path | None) -> None:
    """Prove, per agent, that the hooks are wired and working; say how to fix what is not."""
    import os

    from leanctx import doctor as doctor_mod

    project = _existing_project(project)
    home = paths.home()
    project = Path(os.path.realpath(project)) if project is not None else None
    report = doctor_mod.run(home, paths.data_dir(), None if agent_name == "all" else agent_name, fix=fix, project=project)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(doctor_mod.render(report))
    sys.exit(0 if report["ok"] else 1)


@main.command()
@click.option("--markdown", is_flag=True, help="Print the support matrix as the README's Markdown table.")
@click.option("--json", "as_json", is_flag=True, help="Print every host with its versions as JSON.")
def hosts(markdown: bool, as_json: bool) -> None:
    """Every host leanctx supports: its family, the versions verified, and the one installed here."""
    from leanctx import hostversions

    if markdown:
        click.echo(hostversions.markdown(), nl=False)
        return
    rows = []
    for agent in agents.all_agents():
        binary, version, why = hostversions.installed(agent)
        verdict = hostversions.verdict(agent, version)[0] if version else "not installed" if agent.version_command else "no CLI"
        rows.append({"agent": agent.name, "display_name": agent.display_name, "family": agent.family,
                     "verified_version": agent.verified_version or None, "min_version": agent.min_version or None,
                     "installed_version": version, "verdict": verdict})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    header = ("agent", "family", "verified", "oldest ok", "installed", "")
    table = [header] + [(r["agent"], r["family"], r["verified_version"] or "docs only", r["min_version"] or "-",
                         r["installed_version"] or "-", "" if r["verdict"] in ("ok", "not installed", "no CLI") else r["verdict"])
                        for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


class _HookCommand(click.Command):
    """`leanctx hook --help` ends with every agent's events and the hook flags, read from the
    agent modules and the hook itself when help is asked for (so the list cannot drift)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from leanctx.hooks import FLAGS

        rows = []
        for agent in agents.all_agents():
            rows.append((agent.name, f"{agent.display_name}: {', '.join(s.name for s in agent.events)}"))
            if agent.bot_events:
                rows.append(("", f"with --bot also: {', '.join(s.name for s in agent.bot_events)}"))
            if agent.guard_event is not None:
                rows.append(("", f"with --guard: {agent.guard_event.name}"))
            if agent.read_gate_event is not None:
                gate = agent.read_gate_event
                rows.append(("", f"with --read-gate: {gate.name}" + (f" (matcher {gate.matcher})" if gate.matcher else "")))
            if agent.builtin_read_tools and agent.builtin_read_post_event is not None:
                post = agent.builtin_read_post_event
                pre_spec = agent.builtin_read_pre_event or agent.read_gate_event or agent.guard_event
                pre = pre_spec.name if pre_spec is not None else "?"
                rows.append(("", f"with --builtin-read: {', '.join(agent.builtin_read_tools)} on {pre} and {post.name}"))
        with formatter.section("Agents and events"):
            formatter.write_dl(rows)
        with formatter.section("Flags"):
            formatter.write_dl(list(FLAGS.items()))


@main.command(cls=_HookCommand, context_settings={"ignore_unknown_options": True})
@click.argument("agent_name", metavar="AGENT")
@click.argument("event", metavar="EVENT")
@click.argument("flags", metavar="[FLAGS]...", nargs=-1, type=click.UNPROCESSED)
def hook(agent_name: str, event: str, flags: tuple[str, ...]) -> None:
    """Run a hook by hand: the payload on stdin, exactly what the wrapper does.

    Prints what the host would get on stdout and always exits 0; problems go to the hook log."""
    from leanctx.hooks import main as hook_main

    sys.exit(hook_main([agent_name, event, *flags]))


def _register_subcommands() -> None:
    """`leanctx state …` (leanctx/state/cli.py) and serve/mcp/status/stop/stats (leanctx/cache/cli.py)."""
    from leanctx.cache.cli import register
    from leanctx.state.cli import state

    main.add_command(state)
    register(main)


_register_subcommands()
