"""`leanctx serve | mcp | status | stop | stats`: the cache service from a shell.

`register(main)` adds these commands to the `leanctx` group; `python -m leanctx.cache.cli ...`
runs them standalone (that is also how the MCP server starts a detached daemon, so the daemon's
command line does not depend on how `leanctx` was installed).
"""

from __future__ import annotations

import json
import os
import sys

import click

from leanctx import paths
from leanctx.cache import client

EXIT_NOT_RUNNING = 1


def _base() -> str:
    """Absolute: the daemon runs in / and must find the same data dir (one daemon per data dir).
    Checked: a data dir another account could plant files in is refused (safedir.Unsafe)."""
    return os.path.abspath(paths.usable_data_dir())


def _print_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


def _answers(base: str) -> bool:
    """The daemon answers a request (a stopped or hung one still accepts connections)."""
    probe = client.ServiceClient(base, timeout=5.0)
    try:
        probe.request("hello")
    except client.DaemonError:
        return False
    except client.RemoteError:
        pass
    finally:
        probe.close()
    return True


def _daemon_line(pid: object, state: str = "running") -> str:
    return f"leanctx daemon: {state} (pid {pid}), socket {client.socket_path(_base())}"


@click.command(epilog="""\b
Exit codes:
  0  the daemon ran and stopped cleanly (SIGTERM, `leanctx stop`, idle exit);
     or one already serves this data dir (said on stdout, nothing started);
     with --detach: a daemon is running when it returns
  1  with --detach: the daemon did not come up (see <data dir>/logs/service.log), or one is
     alive but not answering
  2  bad input or environment: --idle-exit or LEANCTX_IDLE_EXIT is not minutes
     >= 0, or the data dir or socket cannot be used (named in one line)""")
@click.option("--detach", is_flag=True, help="Start the daemon in the background and return once it accepts connections.")
@click.option("--idle-exit", default=None, metavar="MINUTES",
              help="Exit after this many minutes with no client connected and no request (0: never; "
                   "fractions allowed). Default: $LEANCTX_IDLE_EXIT, else 2.")
def serve(detach: bool, idle_exit: str | None) -> None:
    """Run the cache daemon (one for every chat on this machine, one per data dir) on a Unix
    socket in the data dir. A second start while one runs says so and exits 0."""
    from leanctx.cache.service import IDLE_ENV, BadSetting, idle_exit_minutes

    base = _base()
    try:
        minutes = idle_exit_minutes(*((idle_exit, "--idle-exit") if idle_exit is not None else (os.environ.get(IDLE_ENV), IDLE_ENV)))
    except BadSetting as exc:
        click.echo(f"leanctx: {exc}", err=True)
        sys.exit(2)
    if not detach:
        from leanctx.cache.service import serve as run_daemon

        sys.exit(run_daemon(base, minutes))
    running = client.daemon_process(base)
    if running is not None:
        if _answers(base):
            click.echo(_daemon_line(running.pid, "already running"))
            return
        click.echo(f"leanctx: daemon pid {running.pid} is alive but not answering on {client.socket_path(base)}; "
                   "`leanctx stop --force` ends it", err=True)
        sys.exit(1)
    os.environ[IDLE_ENV] = repr(minutes)  # the detached daemon reads it
    try:
        spawned = client.spawn_daemon(base)
    except OSError as exc:
        click.echo(f"leanctx: cannot start the daemon in {base}: {exc.strerror or exc} ({exc.filename or base})", err=True)
        sys.exit(2)  # the data dir is unusable: bad environment
    if not client.wait_for_socket(base, 10.0):
        click.echo(f"leanctx: the daemon did not come up; see {client.log_path(base)}", err=True)
        sys.exit(1)
    serving = (client.read_pidfile(base) or {}).get("pid")
    # Another start won the race (ours finds it holding the lock and exits 0 on its own): say who serves.
    click.echo(_daemon_line(serving, "started" if spawned is None or serving == spawned else "already running"))


@click.command(epilog="""\b
Exit codes:
  0  the host closed stdin (normal end)
  1  internal error
  2  an unknown option or profile""")
@click.option("--profile", type=click.Choice(["coding", "bot"]), default="coding", show_default=True,
              help="The tools offered: coding = ctx_read; bot = also ctx_stats and the conversation-state tools.")
def mcp(profile: str) -> None:
    """The stdio MCP server hosts spawn (init registers it; you never run it by hand). It starts
    the shared daemon when none runs, and again after one exited idle."""
    from leanctx.cache.mcpserver import run

    sys.exit(run(_base(), profile))


def daemon_status(base: str) -> dict:
    """The daemon's own report, or what the files say when it does not answer."""
    problem = "no status"
    try:
        answer = client.ServiceClient(base, timeout=5.0).request("status")
        if isinstance(answer, dict):
            return answer
    except (client.DaemonError, client.RemoteError) as exc:
        problem = str(exc)
    proc = client.daemon_process(base)
    if proc is not None:
        return {"running": True, "responding": False, "pid": proc.pid, "socket": client.socket_path(base), "error": problem}
    stale = os.path.exists(client.pid_path(base)) or os.path.exists(client.socket_path(base))
    return {"running": False, "stale_files": stale, "socket": client.socket_path(base)}


def _duration(seconds: float) -> str:
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return (f"{d}d " if d else "") + (f"{h}h " if d or h else "") + f"{m}m {s}s"


def _n(count: object, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _mib(n: object) -> str:
    return f"{n / (1 << 20):.1f} MiB" if isinstance(n, (int, float)) else "unknown"


def _client_row(c: dict) -> str:
    who = f"pid {c.get('pid')}" + (f" {c['name']}" if c.get("name") else "")
    if c.get("verified") is False:
        who += f" (not verified: {c.get('reason')})"
    elif c.get("host_pid"):
        who += f", host pid {c['host_pid']}" + (f" {c['host_name']}" if c.get("host_name") else "")
    idle = c.get("idle_s")
    last = "no request yet" if not c.get("requests") else f"last answer {_duration(idle or 0)} ago"
    return (f"    {who}: {_n(c.get('sockets', 0), 'socket')}, {_n(c.get('requests', 0), 'request')}, "
            f"connected {_duration(c.get('connected_s') or 0)}, {last}")


def render_running(report: dict) -> str:
    """`leanctx status` for a daemon that answered."""
    conns = report.get("connections") or {}
    sv = report.get("savings") or {}
    mem = report.get("memory") or {}
    clients = report.get("clients") or []
    out = [f"leanctx daemon: running, pid {report['pid']}, up {_duration(report.get('uptime_s') or 0)}, "
           f"leanctx {report.get('version')}",
           f"  socket       {report.get('socket')}",
           f"  memory       {_mib(mem.get('rss_bytes'))} resident, holding {_mib(mem.get('held_bytes'))} of file text "
           f"({_n(mem.get('held_files') or 0, 'file')}, kept for diffs)",
           f"  clients      {len(clients)} connected ({_n(conns.get('open_sockets', 0), 'socket')}), "
           f"{_n(conns.get('clients_seen', 0), 'MCP connection')} since start"]
    out += [_client_row(c) for c in clients]
    idle = report.get("idle_exit_min")
    rule = f"after {idle:g} min with no client and no request" if idle else "never"
    idle_for = report.get("idle_for_s")
    now = f"; no client for {_duration(idle_for)}" if idle_for is not None else ""
    out += [f"  idle exit    {rule} ({client.IDLE_ENV}){now}",
            f"  requests     {report.get('requests', 0)} ({report.get('errors', 0)} errors)",
            f"  entries      {report.get('entries')}",
            f"  savings      {sv.get('tokens_saved', 0)} tokens net ({sv.get('tokens_sent', 0)} delivered of "
            f"{sv.get('tokens_raw', 0)} raw, {sv.get('tokens_reread', 0)} re-read, {sv.get('tokens_overhead', 0)} "
            f"our overhead; {100 * (sv.get('ratio') or 0):.1f}%), "
            f"{'counted with tiktoken' if sv.get('tokens_exact') else 'estimated, no tokenizer:'} {sv.get('tokenizer')}"]
    return "\n".join(out)


@click.command(epilog="""\b
Exit codes:
  0  running and answering
  1  not running, or alive but not answering""")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(as_json: bool) -> None:
    """Is the daemon running: pid, uptime, memory, its clients (process, host, sockets), cache
    entries, savings."""
    report = daemon_status(_base())
    if as_json:
        _print_json(report)
    elif not report.get("running"):
        note = " (stale pid/socket files will be replaced at the next start)" if report.get("stale_files") else ""
        click.echo(f"leanctx daemon: not running{note}")
    elif report.get("responding") is False:
        click.echo(f"leanctx daemon: pid {report['pid']} is alive but not answering on {report['socket']}: {report.get('error')}")
    else:
        click.echo(render_running(report))
    sys.exit(0 if report.get("running") and report.get("responding") is not False else EXIT_NOT_RUNNING)


@click.command(epilog="""\b
Exit codes:
  0  stopped (or killed with --force), or none was running (said so)
  1  it did not exit within --timeout and --force was not given""")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds to wait for a graceful exit.")
@click.option("--force", is_flag=True, help="SIGKILL the daemon if it has not exited after --timeout.")
def stop(timeout: float, force: bool) -> None:
    """Stop the daemon gracefully (SIGTERM: it saves its index, removes its socket and pid file)."""
    import psutil

    base = _base()
    proc = client.daemon_process(base)
    if proc is None:
        click.echo("leanctx daemon: not running, nothing to stop")
        return
    pid = proc.pid
    try:
        proc.terminate()
    except psutil.NoSuchProcess:
        pass
    if not client.wait_gone(proc, timeout):
        if not force:
            click.echo(f"leanctx: daemon pid {pid} did not exit within {timeout:g} s (use --force)", err=True)
            sys.exit(1)
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
        click.echo(f"leanctx daemon: killed pid {pid}")
        return
    click.echo(f"leanctx daemon: stopped pid {pid}")


_READER_ORDER = ("ctx_read", "builtin", "shell")


def _row(label: str, r: dict, reader: bool = False) -> str:
    """One table row. A reader's row has no overhead of its own: its saved is raw - sent - re-read."""
    raw, sent = r.get("tokens_raw") or 0, r.get("tokens_sent") or 0
    reread, cost = r.get("tokens_reread") or 0, r.get("tokens_overhead") or 0
    net = raw - sent - reread - (0 if reader else cost)
    pct = f"{100 * net / raw:6.1f}%" if raw else "      -"
    cost_cell = "-" if reader else str(cost)
    return (f"  {label:<44} {r.get('reads', 0):>6} {r.get('stubs', 0):>6} {r.get('diffs', 0):>6} "
            f"{r.get('pointers', 0):>6} {r.get('withheld', 0):>6} {raw:>10} {sent:>10} {reread:>8} {cost_cell:>9} "
            f"{net:>10} {pct}")


def _rows(label: str, r: dict, indent: str) -> list[str]:
    """A bucket's row, then one row per reader that read (when more than one did, or one other than ctx_read)."""
    out = [_row(indent + label, r)]
    readers = r.get("by_reader") if isinstance(r.get("by_reader"), dict) else {}
    names = sorted((n for n, b in readers.items() if isinstance(b, dict) and (b.get("reads") or b.get("tokens_reread"))),
                   key=lambda n: (_READER_ORDER.index(n) if n in _READER_ORDER else 9, n))
    if names and names != ["ctx_read"]:
        out += [_row(indent + "  " + n, readers[n], reader=True) for n in names]
    return out


def _overhead_line(stats: dict) -> str:
    per = stats.get("overhead_per_context") if isinstance(stats.get("overhead_per_context"), dict) else {}
    tools = sorted({v.get("tool") for v in per.values() if isinstance(v, dict)} - {None})
    rules = sorted({v.get("rule") for v in per.values() if isinstance(v, dict)} - {None})

    def span(xs: list) -> str:
        return "?" if not xs else str(xs[0]) if len(xs) == 1 else f"{xs[0]}-{xs[-1]}"

    return (f"  overhead: tool definition {span(tools)} + read rule {span(rules)} tokens per context (each conversation "
            "and subagent per host process, again after each compaction), counted once like a file's tokens, not per "
            "model request")


def render_stats(stats: dict, source: str) -> str:
    out = [f"leanctx read cache ({source})",
           f"  {stats.get('tokenizer_note') or 'tokenizer ' + str(stats.get('tokenizer'))}"]
    if stats.get("exact_counts"):
        out.append(f"  for exact counts: {stats['exact_counts']}")
    counted = list(stats.get("counted_with") or ())
    earlier = [n for n in counted if n != stats.get("tokenizer")]
    if earlier and source == "daemon":
        out.append(f"  the totals include counts made with {', '.join(earlier)} (an earlier daemon, another tokenizer)")
    elif earlier:  # nothing here counted them: the line above is what a daemon started now would use
        out.append(f"  the totals were counted with {', '.join(counted)}")
    out.append("  saved = raw - sent - re-read - overhead (re-read: a full read a stub caused, the context reading "
               "unchanged bytes it was told it held)")
    out.append(_overhead_line(stats))
    out.append(f"  {'':<44} {'reads':>6} {'stubs':>6} {'diffs':>6} {'ptrs':>6} {'w/held':>6} "
               f"{'raw tok':>10} {'sent tok':>10} {'re-read':>8} {'overhead':>9} {'saved tok':>10} saved%")
    out += _rows("total", stats, "")
    for title, key in (("per host", "by_agent"), ("per conversation", "by_conversation")):
        group = stats.get(key)
        if isinstance(group, dict) and group:
            out.append(f"  {title}:")
            for name, r in sorted(group.items()):
                if isinstance(r, dict):
                    label = name if len(name) <= 42 else name[:19] + "…" + name[-22:]
                    out += _rows(label, r, "  ")
    reasons = stats.get("withheld_reasons")
    if isinstance(reasons, dict) and reasons:
        out.append("  stubs withheld because:")
        for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
            out.append(f"    {n:>6}  {why}")
    return "\n".join(out)


@click.command(epilog="""\b
Exit codes:
  0  statistics printed (from the daemon, else from the persisted index)""")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def stats(as_json: bool) -> None:
    """Read-cache statistics: reads, stubs, diffs, pointers, raw vs delivered tokens, net of re-reads
    and of leanctx's own overhead, per host, conversation and reader (ctx_read, builtin, shell), and
    which tokenizer counted them (an estimate says so, and how to get exact counts)."""
    base = _base()
    try:
        result = client.ServiceClient(base, timeout=5.0).request("stats")
        source = "daemon"
    except (client.DaemonError, client.RemoteError):
        from leanctx.cache.readcache import ReadCache

        result = ReadCache(client.cache_dir(base)).stats()
        source = "persisted index; daemon not running"
    if not isinstance(result, dict):
        result = {}
    if as_json:
        _print_json({"source": source, **result})
    else:
        click.echo(render_stats(result, source))


COMMANDS = (serve, mcp, status, stop, stats)


def register(group: click.Group) -> None:
    for command in COMMANDS:
        group.add_command(command)


class _Standalone(click.Group):
    """`python -m leanctx.cache.cli`: a refused data dir is one line and exit 2, as in `leanctx`."""

    def invoke(self, ctx: click.Context):  # type: ignore[no-untyped-def]
        from leanctx import safedir

        try:
            return super().invoke(ctx)
        except safedir.Unsafe as exc:
            click.echo(f"leanctx: {exc}", err=True)
            sys.exit(2)


@click.group(cls=_Standalone, context_settings={"help_option_names": ["-h", "--help"]})
def standalone() -> None:
    """leanctx cache service commands."""


register(standalone)

if __name__ == "__main__":
    standalone(prog_name="leanctx")
