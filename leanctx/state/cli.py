"""`leanctx state …`: the conversation state from a shell (operators, and models via their shell tool).

Every command acts on one user: `--user ID` (the exact sender id, slugified), `--slug SLUG` (the
folder name `state list` shows, taken as it is), `--channel SERVER --user ID` (a channel sender's
thread), else $CKS_ACTIVE_USER. Run inside a channel session (the model's shell tool), a command
acts only on the thread of the sender whose turn is in progress (see _whose). Bad input (an empty id,
CKS_ACTIVE_USER set but empty, an empty question, too many options, over-long text) exits 2 with
one `leanctx: …` line on stderr, and nothing is written. `--json` prints machine-readable output.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable

import click

from leanctx.state import api, protocol
from leanctx.state.errors import BadInput, StateError
from leanctx.state.slug import active_slug

EXIT_REFUSED = 2
USER_HELP = "The user's exact sender id (default: $CKS_ACTIVE_USER; `local` when unset)."
SLUG_HELP = "The user's slug, as `leanctx state list` shows it (instead of --user)."
CHANNEL_HELP = "With --user ID: the thread of sender ID on this Claude Code channel server (its MCP server name)."


def _refusals(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        try:
            return fn(*args, **kwargs)
        except StateError as exc:
            click.echo(f"leanctx: {exc}", err=True)
            click.echo("leanctx: nothing was written.", err=True)
            sys.exit(EXIT_REFUSED)

    return wrapper


def _user_option(fn: Callable) -> Callable:
    """--user ID or --slug SLUG (not both): an id is slugified, a slug is taken as it is, so a
    hashed slug given back is never hashed again into somebody else's thread. --channel SERVER
    with --user ID: that channel sender's thread. The command gets the user or slug _whose says."""

    @functools.wraps(fn)
    def resolved(*args, user: str | None = None, slug: str | None = None, channel: str | None = None, **kwargs):  # type: ignore[no-untyped-def]
        user, slug = _whose(user, slug, channel)
        return fn(*args, user=user, slug=slug, **kwargs)

    resolved = _refusals(resolved)
    resolved = click.option("--channel", default=None, metavar="SERVER", help=CHANNEL_HELP)(resolved)
    resolved = click.option("--slug", default=None, metavar="SLUG", help=SLUG_HELP)(resolved)
    return click.option("--user", default=None, metavar="ID", help=USER_HELP)(resolved)


def _channel_turn() -> str | None:
    """The thread this process may act on when it runs inside a channel session (the model's
    shell tool; state/channel.py turn_user), None outside one. StateError when it may act on none."""
    from leanctx.cache.scope import Connection  # this process's host, found as the MCP server finds its own
    from leanctx.paths import data_dir
    from leanctx.state import channel

    me = Connection.capture()
    try:
        return channel.turn_user(str(data_dir()), {"pid": me.host_pid, "start_ticks": me.host_start_ticks})
    except channel.Refused as exc:
        raise BadInput(f"{exc} (outside the bot session, unset {channel.SENDER_ENV})") from None


def _whose(user: str | None, slug: str | None, channel_src: str | None) -> tuple[str | None, str | None]:
    """(user, slug) a command acts on. Inside a channel session: the thread of the sender whose
    turn is in progress, whatever the options say (another thread named there is refused), so a
    message of one sender cannot get the model's own commands to read or write another's."""
    from leanctx.state import channel

    if channel_src is not None:
        if user is None or slug is not None:
            raise BadInput("--channel SERVER goes with --user ID (the sender id on that channel server), not --slug")
        user = channel.thread_id(channel_src, user)
    turn = _channel_turn()
    if turn is None:
        return user, slug
    if (user is not None or slug is not None) and api.target(user, slug).slug != api.target(turn).slug:
        raise BadInput("in a channel session `leanctx state` acts only on the thread of the sender whose turn this "
                       "is; drop --user/--slug/--channel")
    return turn, None


def _shown_id(user_id: str | None) -> str:
    """An id fit for one line of output: as it is when printable, else escaped."""
    if user_id is None:
        return "unknown: kept before ids were recorded"
    return user_id if user_id.isprintable() else ascii(user_id)


def _json_option(fn: Callable) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def _print_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


@click.group("state", context_settings={"help_option_names": ["-h", "--help"]})
def state() -> None:
    """The live conversation thread of each bot user (resumes after a restart)."""


@state.command()
@_user_option
@_json_option
@_refusals
def show(user: str | None, slug: str | None, as_json: bool) -> None:
    """Print the thread as a restarted session would get it (--json: the whole state)."""
    current = api.show(user, slug)
    if as_json:
        _print_json(current)
        return
    click.echo(f"# {current['user_slug']} (id {_shown_id(api.owner(current))}): {api.location(user, slug)} "
               f"(revision {current['revision']})")
    click.echo(protocol.rehydrate(current) or "No conversation in progress.")


@state.command("slug")
@click.option("--user", default=None, metavar="ID", help=USER_HELP)
@_refusals
def slug_(user: str | None) -> None:
    """Print the slug of a sender id: its folder under $CKS_HOME/user/ (for scripts and skills)."""
    click.echo(active_slug(user))


@state.command("list")
@_json_option
@_refusals
def list_(as_json: bool) -> None:
    """Users that have a conversation state."""
    if _channel_turn() is not None:
        raise BadInput("in a channel session `leanctx state list` is refused: it shows every sender's thread")
    rows = []
    for name in api.list_users():
        s = api.show(slug=name)
        rows.append({"id": api.owner(s), "slug": name, "user": name, "revision": s["revision"],
                     "turn_count": s["turn_count"], "pending": s["pending"]["question"] if s["pending"] else None,
                     "last_updated": s["last_updated"], "corrupt_files": len(api.corrupt_files(slug=name))})
    if as_json:
        _print_json(rows)
        return
    if not rows:
        click.echo("No conversation states.")
    for r in rows:
        line = (f"{r['slug']} (id {_shown_id(r['id'])}): revision {r['revision']}, {r['turn_count']} turns, "
                f"updated {r['last_updated']}")
        if r["pending"]:
            line += f", pending: {r['pending'][:60]!r}"
        if r["corrupt_files"]:
            line += f", {r['corrupt_files']} damaged file(s) moved aside"
        click.echo(line)


@state.command()
@click.option("--question", default=None, help="Set this pending clarification (the user's next message answers it).")
@click.option("--option", "options", multiple=True, help="An answer option (repeat, at most 10).")
@click.option("--session-id", default=None, help="The session that asked.")
@_user_option
@_json_option
@_refusals
def pending(question: str | None, options: tuple[str, ...], session_id: str | None, user: str | None, slug: str | None, as_json: bool) -> None:
    """Show the pending question, or set one with --question and --option."""
    if question is None:
        if options:
            raise click.UsageError("--option needs --question")
        current = api.show(user, slug)["pending"]
        if as_json:
            _print_json(current)
        elif current:
            opts = current["options"]
            click.echo(f"Pending since {current['asked_ts']}: {current['question']}"
                       + (f"\nOptions: {', '.join(opts)}" if opts else ""))
        else:
            click.echo("No pending question.")
        return
    new = api.set_pending(question, list(options), user=user, slug=slug, session_id=session_id)
    if as_json:
        _print_json(new["pending"])
    else:
        click.echo(f"Pending question set for {new['user_slug']}; "
                   + ("the user's first message after this turn's reply is its answer."
                      if new["pending"].get("armed") is False else "the next message is its answer."))


@state.command()
@click.argument("text")
@click.option("--message-id", default=None, metavar="ID",
              help="The chat layer's id for this message: a redelivered message is recorded once.")
@click.option("--session-id", default=None, help="The session it was sent to.")
@_user_option
@_json_option
@_refusals
def inbound(text: str, message_id: str | None, session_id: str | None, user: str | None, slug: str | None,
            as_json: bool) -> None:
    """Record a user message TEXT (`-` reads stdin), for a bot without the hooks. Prints the line
    that tells the model it answers the pending question, if it does."""
    if text == "-":
        text = sys.stdin.read()
    result = api.inbound(text, user, session_id=session_id, slug=slug, message_id=message_id)
    if as_json:
        _print_json({"answered": result["answered"], "answer_context": result["answer_context"]})
    elif result["answer_context"]:
        click.echo(result["answer_context"])


@state.command()
@click.argument("text")
@click.option("--session-id", default=None, help="The session that replied.")
@_user_option
@_json_option
@_refusals
def reply(text: str, session_id: str | None, user: str | None, slug: str | None, as_json: bool) -> None:
    """Record the agent's reply TEXT (`-` reads stdin) once it reached the user; a question asked
    in this turn becomes answerable."""
    if text == "-":
        text = sys.stdin.read()
    new = api.reply(text, user, session_id=session_id, slug=slug)
    _print_json(new) if as_json else click.echo(f"Reply recorded for {new['user_slug']}.")


@state.command("clear-pending")
@_user_option
@_json_option
@_refusals
def clear_pending(user: str | None, slug: str | None, as_json: bool) -> None:
    """Drop the pending question."""
    new = api.clear_pending(user, slug)
    _print_json(new) if as_json else click.echo(f"No pending question for {new['user_slug']} now.")


@state.command()
@click.argument("text", required=False)
@_user_option
@_json_option
@_refusals
def summary(text: str | None, user: str | None, slug: str | None, as_json: bool) -> None:
    """Set the running summary to TEXT (`-` reads stdin); without TEXT, print it."""
    if text is None:
        current = api.show(user, slug)["thread_summary"]
        _print_json(current) if as_json else click.echo(current or "No summary yet.")
        return
    if text == "-":
        text = sys.stdin.read()
    new = api.set_summary(text, user=user, slug=slug)
    _print_json(new) if as_json else click.echo(f"Summary set for {new['user_slug']} ({len(new['thread_summary'])} characters).")


@state.command()
@click.option("--feature", default=None, help="The feature being worked on.")
@click.option("--phase", default=None, help="Its phase.")
@_user_option
@_json_option
@_refusals
def active(feature: str | None, phase: str | None, user: str | None, slug: str | None, as_json: bool) -> None:
    """Set the active feature and phase (an empty value clears it)."""
    new = api.set_active(feature, phase, user=user, slug=slug)
    if as_json:
        _print_json(new)
    else:
        click.echo(f"Active work for {new['user_slug']}: feature {new['active_feature'] or '(none)'}, "
                   f"phase {new['active_phase'] or '(none)'}.")


@state.command()
@_user_option
@_json_option
@_refusals
def end(user: str | None, slug: str | None, as_json: bool) -> None:
    """End the thread: its digest goes to history.md, and the next message starts a fresh one."""
    done = api.end_thread(user, slug)
    if as_json:
        _print_json(done)
    elif done["digest"]:
        click.echo(done["digest"].rstrip("\n"))
        click.echo(f"(appended to the history of {done['state']['user_slug']}; a fresh thread starts now)")
    else:
        click.echo("The thread was empty: nothing appended; a fresh thread starts now.")


@state.command()
@_user_option
@_json_option
@_refusals
def reset(user: str | None, slug: str | None, as_json: bool) -> None:
    """Drop the thread without a digest."""
    new = api.reset(user, slug)
    _print_json(new) if as_json else click.echo(f"Conversation state of {new['user_slug']} reset.")


@state.command()
@_user_option
@_json_option
@_refusals
def history(user: str | None, slug: str | None, as_json: bool) -> None:
    """Print history.md (the digests of ended threads)."""
    text = api.history(user, slug)
    _print_json(text) if as_json else click.echo(text.rstrip("\n") or "No history yet.")
