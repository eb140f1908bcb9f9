"""Whose message is this? The sender of a Claude Code channel message, when the operator opts in.

A channel (an MCP server declaring the `claude/channel` capability) pushes each chat message into
one running session, and Claude Code hands it to the model, and to UserPromptSubmit, as

    <channel source="SERVER" user="ana" chat_id="42">
    the message text
    </channel>

(verified on Claude Code 2.1.197: `source` is the MCP server's name, set by Claude Code; the other
attributes are the server's `meta`, keys `[A-Za-z_][A-Za-z0-9_]*`, values with & < > " ' escaped;
`</channel` inside the text arrives as `<\\/channel`). One session serves every sender, so the
bot hooks cannot take the user from CKS_ACTIVE_USER. With LEANCTX_CHANNEL_SENDER=<attribute>
they take it from that attribute, which only the channel server writes; LEANCTX_CHANNEL_SOURCE
(comma-separated server names) limits which servers are believed. Off unless set.

A sender's thread is named by the server too (`thread_id`): `channel:["SERVER","ID"]`, a form
CKS_ACTIVE_USER may not take, so a sender called `local`, one named like the operator's
CKS_ACTIVE_USER, or the same id on another channel server never reaches another thread.

Messages queued while the model works arrive as one turn (one UserPromptSubmit each, one Stop),
so the senders of a turn are kept per session until its Stop (`remember`, `take`): a reply is
recorded only when one sender had the whole turn. The same ledger tells the model's own tools
(the state_* MCP tools, `leanctx state ...` run from its shell) whose turn it is: `remember` also
notes which session the host process is in, and `turn_user` finds the turn of the caller's host;
while no single sender has the turn in progress they are refused, never given a shared thread.
"""

from __future__ import annotations

import os
import re

from leanctx import fastjson, safedir
from leanctx.state.errors import BadSlug
from leanctx.state.slug import THREAD_PREFIX, slugify

SENDER_ENV = "LEANCTX_CHANNEL_SENDER"
SOURCE_ENV = "LEANCTX_CHANNEL_SOURCE"
_ATTR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BLOCK = re.compile(r'<channel source="([^"<>]*)"((?: [A-Za-z_][A-Za-z0-9_]*="[^"<>]*")*)>\n(.*?)\n</channel>', re.S)
_PAIR = re.compile(r' ([A-Za-z_][A-Za-z0-9_]*)="([^"<>]*)"')
_CLOSE = re.compile(r"<\\/(?=channel(?:[>\s/]|$))", re.I)
_ENTITIES = (("&quot;", '"'), ("&apos;", "'"), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))
LEDGER_KEEP = 200


class Refused(Exception):
    """A channel message whose sender cannot be trusted or found: record nothing for anyone."""


def sender_attribute() -> str | None:
    """The attribute that names the sender (None: the feature is off). Refused when malformed."""
    attr = (os.environ.get(SENDER_ENV) or "").strip()
    if not attr:
        return None
    if not _ATTR.match(attr):
        raise Refused(f"{SENDER_ENV}={attr!r} is not an attribute name ([A-Za-z_][A-Za-z0-9_]*)")
    return attr


def _unescape(value: str) -> str:
    for entity, char in _ENTITIES:
        value = value.replace(entity, char)
    return value


def parse(prompt: str) -> list[dict] | None:
    """The channel messages a prompt consists of ([{source, attrs, text}]), None when it is not a
    channel message. Refused when it starts like one but is not exactly a run of well-formed blocks
    (what Claude Code writes never is; a forged header inside a message's text stays its text)."""
    if not prompt.startswith('<channel source="'):
        return None
    blocks, pos = [], 0
    while pos < len(prompt):
        m = _BLOCK.match(prompt, pos)
        if not m:
            raise Refused("a prompt that starts like a channel message is not one")
        attrs = {k: _unescape(v) for k, v in _PAIR.findall(m.group(2))}
        blocks.append({"source": _unescape(m.group(1)), "attrs": attrs, "text": _CLOSE.sub("</", m.group(3))})
        pos = m.end()
        while pos < len(prompt) and prompt[pos] == "\n":
            pos += 1
    return blocks


def sender(prompt: str, attr: str) -> tuple[str, str, str] | None:
    """(server, sender id, message text) of a channel prompt, None when the prompt is not a
    channel message (typed at the terminal). Refused: no/empty sender attribute, a server not in
    LEANCTX_CHANNEL_SOURCE, or one prompt carrying several senders' messages (the same id on two
    servers is two senders)."""
    blocks = parse(prompt)
    if blocks is None:
        return None
    allowed = {s.strip() for s in (os.environ.get(SOURCE_ENV) or "").split(",") if s.strip()}
    ids = set()
    for b in blocks:
        if allowed and b["source"] not in allowed:
            raise Refused(f"channel source {b['source']!r} is not in {SOURCE_ENV}")
        value = b["attrs"].get(attr, "")
        if not value.strip():
            raise Refused(f"channel message from {b['source']!r} has no {attr!r} attribute")
        ids.add((b["source"], value))
    if len(ids) > 1:
        raise Refused(f"one prompt holds messages of {len(ids)} senders")
    source, value = ids.pop()
    return source, value, "\n\n".join(b["text"] for b in blocks)


def thread_id(source: str, sender_id: str) -> str:
    """The thread of `sender_id` on channel server `source`: one-to-one (JSON), and prefixed with
    what CKS_ACTIVE_USER is refused to start with."""
    return THREAD_PREFIX + fastjson.dumps([source, sender_id])


def sender_note(attr: str, sender_id: str) -> str:
    """Added to the prompt's context: who sent it, and that the state tools follow the turn."""
    return (f"[leanctx] This channel message is from {attr}={fastjson.dumps(sender_id)}. While this turn is "
            f"theirs alone, the state_* tools and `leanctx state ...` act on their thread by themselves "
            f"(no --user needed); in a turn with several senders they refuse.")


def _ledger(data_dir: str, session: str | None) -> str | None:
    """The session's file (its slug: one-to-one, a safe name); None for no or an unusable id, and
    then no reply is ever recorded for it (the safe side)."""
    try:
        return os.path.join(data_dir, "channel-turns", slugify(session) + ".jsonl") if session else None
    except BadSlug:
        return None


def _host_file(data_dir: str, host: dict) -> str | None:
    """Where a host process's current session is noted; None when the host is not known."""
    pid, ticks = host.get("pid"), host.get("start_ticks")
    if not isinstance(pid, int) or not isinstance(ticks, int):
        return None
    return os.path.join(data_dir, "channel-turns", f"host-{pid}-{ticks}")


def remember(data_dir: str, session: str | None, user: str | None, host: dict | None = None) -> None:
    """Note that `user` (None: unknown) sent a prompt of the current turn of `session`: one line
    appended (O_APPEND, so prompts of one turn fired at once never lose each other); and that
    `host` (hostproc.host_process() of the hook) is in `session` now."""
    path = _ledger(data_dir, session)
    if path is None:
        return
    safedir.make_private(os.path.dirname(path))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (fastjson.dumps([user]) + "\n").encode("utf-8", "surrogatepass"))
    finally:
        os.close(fd)
    pointer = _host_file(data_dir, host or {})
    if pointer is not None:
        tmp = f"{pointer}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, os.path.basename(path).encode("utf-8"))
        finally:
            os.close(fd)
        os.replace(tmp, pointer)
    _prune(os.path.dirname(path))


def _senders(path: str) -> list[str | None]:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    senders: list[str | None] = []
    for line in lines:
        try:
            value = fastjson.loads(line)
        except ValueError:
            value = None
        senders.append(value[0] if isinstance(value, list) and value and isinstance(value[0], str) else None)
    return senders


def turn_user(data_dir: str, host: dict) -> str | None:
    """Whose thread a tool call of the model acts on in a channel session: the one sender of the
    turn in progress in `host`'s session (`host`: hostproc.host_process() of the caller). None
    when this is no channel session (LEANCTX_CHANNEL_SENDER unset and no channel turn ever
    noted for this host): then CKS_ACTIVE_USER's, as always. Refused when the turn's sender is
    unknown, when it has several, when no turn is in progress, or the host cannot be told."""
    pointer = _host_file(data_dir, host)
    name = ""
    if pointer is not None:
        try:
            with open(pointer, encoding="utf-8", errors="replace") as f:
                name = f.read(300).strip()
        except FileNotFoundError:
            pass
    if not name:
        if not (os.environ.get(SENDER_ENV) or "").strip():
            return None
        why = ("no channel message's turn is in progress in this session" if pointer else
               "cannot tell which session this process belongs to (its host process is unknown)")
        raise Refused(f"{why}; the state tools act only on the thread of the sender whose turn it is")
    if "/" in name or name.startswith("."):
        raise Refused("the channel turn record of this session is damaged")
    senders = _senders(os.path.join(data_dir, "channel-turns", name))
    if not senders:
        raise Refused("no channel message's turn is in progress in this session; the state tools act only on "
                      "the thread of the sender whose turn it is")
    if None in senders:
        raise Refused("this turn holds a message whose sender is unknown; refusing to pick a thread")
    if len(set(senders)) > 1:
        raise Refused(f"this turn answers {len(set(senders))} senders at once; refusing to pick one's thread "
                      f"(save it in a turn of that sender alone)")
    return senders[0]


def take(data_dir: str, session: str | None) -> list[str | None]:
    """The senders of the turn that just stopped; consumed (moved aside first, so a prompt of the
    next turn appending meanwhile starts the next turn's file)."""
    path = _ledger(data_dir, session)
    if path is None:
        return []
    taken = f"{path}.{os.getpid()}.taken"
    try:
        os.replace(path, taken)
    except OSError:
        return []
    try:
        return _senders(taken)
    finally:
        os.unlink(taken)


def _prune(folder: str) -> None:
    """Sessions that never stopped leave a file each: keep the newest LEDGER_KEEP."""
    try:
        names = os.listdir(folder)
        if len(names) <= LEDGER_KEEP:
            return
        paths = sorted((os.path.join(folder, n) for n in names), key=lambda p: os.stat(p).st_mtime)
        for p in paths[:-LEDGER_KEEP]:
            os.unlink(p)
    except OSError:
        pass
