"""The always-on bot profile inside the hook: keep the user's thread in conversation-state.

- a prompt is recorded as the user's turn; if it answers the pending question, the host is told
  so in the added context of that same prompt (the model may be a fresh process that never saw
  the question being asked);
- a reply (Stop's `last_assistant_message`, Cursor's afterAgentResponse) is recorded as the
  agent's turn;
- every session start (new, resumed, cleared, compacted) gets the rehydrated thread as added
  context: summary, recent turns, active work, the pending question with its options; except a
  resumed session whose transcript already holds the thread (protocol.holds_thread), which gets
  only the answer line and the pending question, so restarts never stack copies of the thread;
- a question the model saved inside a turn is armed by that turn's stop: a message redelivered
  after a crash mid-turn is not taken as its answer, nor recorded twice.
Each turn notes the session it came from. Only installed with `leanctx init --bot`.

With LEANCTX_CHANNEL_SENDER=<attribute> (opt-in) one Claude Code session serves every sender of a
channel: the user is the sender attribute of the `<channel ...>` wrapper, namespaced by the channel
server (leanctx.state.channel), not CKS_ACTIVE_USER; see _channel_event.

When CKS_ACTIVE_USER is set but empty (a channel adapter that exported no sender id) nothing is
recorded or handed back, and one line goes to the hook log: never the `local` thread, which
would merge every unidentified sender into one user.
"""

from __future__ import annotations

import os

from leanctx import fastjson
from leanctx.agents.base import PROMPT, REPLY, SESSION_START, STOP, Agent, HookEvent


def on_event(agent: Agent, event: HookEvent, data_dir: str) -> str | None:
    """What to print for `event` under the bot profile (None: the plain profile's answer)."""
    os.environ["LEANCTX_FAST_PATH"] = "1"  # validate with the stdlib validator, not jsonschema
    from leanctx.state import api, protocol
    from leanctx.state.errors import BadSlug
    from leanctx.state.slug import active_id

    session = event.session_id or event.conversation_id
    if agent.thread_key_source:
        return _keyed_event(agent, event, data_dir, session)
    if os.environ.get("LEANCTX_CHANNEL_SENDER", "").strip():
        return _channel_event(agent, event, data_dir, session)
    try:
        user = active_id()
    except BadSlug as exc:
        from leanctx.hooks import log

        log(data_dir, agent.name, event.event, f"bot profile: nothing recorded: {exc}")
        return None
    if event.kind == SESSION_START:
        text = protocol.session_context(api.show(user), session, resumed=event.source == "resume")
        return agent.context_output(event.event, text) if text else None
    if event.kind == PROMPT and event.prompt and not event.subagent_id:
        notes = []
        if agent.thread_on_first_prompt:
            state = api.show(user)
            if not protocol.holds_thread(state, session):
                notes.append(protocol.rehydrate(state))
        result = api.inbound(event.prompt, user, session_id=session, source=agent.name)
        if result.get("answered"):
            notes.append(protocol.answer_context(result["answered"]))
        joined = "\n\n".join(n for n in notes if n)
        return (agent.context_output(event.event, joined) or None) if joined else None
    if event.kind in (STOP, REPLY) and not event.subagent_id:
        _record_reply(agent, event, user, session)
    return None


def _record_reply(agent: Agent, event: HookEvent, user: str, session: str | None) -> None:
    """The turn's reply, which arms a question asked in this turn; a stop that carries no reply
    text arms it all the same, so the question is never left unanswerable."""
    from leanctx.state import api

    reply = agent.reply_text(event)
    if reply:
        api.reply(reply, user, session_id=session)
    else:
        api.arm_pending(user)


def _keyed_event(agent: Agent, event: HookEvent, data_dir: str, session: str | None) -> str | None:
    """The bot profile on a host whose one process serves many people and names each one's
    conversation (OpenClaw's session key: one per person and channel). The thread is
    `channel:[<host>, key]`, a name CKS_ACTIVE_USER cannot take. The host keeps its own transcript
    under the key across restarts, so a prompt gets the whole thread only when that session does
    not hold it yet (a new session after `/new`, a daily reset, a first message) or right after a
    compaction; otherwise only the answer line. The message id makes a redelivered message count
    once (the gateway re-runs a message it had queued when it was killed mid-turn)."""
    from leanctx.hooks import log
    from leanctx.state import api, channel, protocol
    from leanctx.state.errors import BadSlug
    from leanctx.state.slug import check_id

    if event.subagent_id or event.kind not in (SESSION_START, PROMPT, STOP, REPLY):
        return None
    key = (event.thread_key or "").strip()
    if not key:
        log(data_dir, agent.name, event.event, "bot profile: nothing recorded: the event names no session key")
        return None
    try:
        user = check_id(channel.thread_id(agent.thread_key_source or agent.name, key))
        if event.kind == SESSION_START:
            # `/new`, `/reset`, an idle or daily reset: OpenClaw 2026.9.6 starts the key's transcript
            # empty under the same session id, so the id cannot tell; the next prompt gets the
            # whole thread (noted on disk: a restart in between keeps it)
            _fresh(data_dir, user, mark=True)
            return None
        if event.kind == PROMPT:
            if not event.prompt:
                return None
            state = api.show(user)
            whole = _fresh(data_dir, user) or event.source == "compact" or not protocol.holds_thread(state, session)
            notes = [protocol.rehydrate(state)] if whole and not protocol.is_empty(state) else []
            result = api.inbound(event.prompt, user, session_id=session, source=agent.name, message_id=event.message_id)
            notes.append(protocol.answer_context(result["answered"]) if result.get("answered") else "")
            joined = "\n\n".join(n for n in notes if n)
            return (agent.context_output(event.event, joined) or None) if joined else None
        _record_reply(agent, event, user, session)
    except BadSlug as exc:
        log(data_dir, agent.name, event.event, f"bot profile: nothing recorded: {exc}")
    return None


def _fresh(data_dir: str, user: str, mark: bool = False) -> bool:
    """Note (`mark`) or take the note that this person's next prompt starts on an empty
    transcript; True when there was one to take."""
    from leanctx.state.slug import slugify

    folder = os.path.join(data_dir, "bot-fresh")
    path = os.path.join(folder, slugify(user))
    if mark:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))
        return True
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


STATE_TOOL = "state_tool"  # the kind of a host tool call on the person's own thread (OpenClaw's plugin tools)
STATE_OPS = ("pending", "clear_pending", "summary", "show")


def state_tool(agent: Agent, event: HookEvent, data_dir: str) -> str:
    """One of the model's state tools, on the thread of the session key the host gave the tool
    (OpenClaw hands a plugin's tool factory the session's key: the tool can only ever reach the
    thread of the person whose session runs it). Returns {"text"} for the model; bad input gets
    {"error"} naming what is wrong, and nothing is written."""
    from leanctx.state import api, channel
    from leanctx.state.errors import StateError
    from leanctx.state.slug import check_id

    key = (event.thread_key or "").strip()
    op, args = event.tool_name, event.tool_input or {}
    try:
        if not key or not agent.thread_key_source:
            raise ValueError("this session names no person (no session key): nothing recorded")
        if op not in STATE_OPS:
            raise ValueError(f"unknown state tool {op!r}; one of {', '.join(STATE_OPS)}")
        user = check_id(channel.thread_id(agent.thread_key_source, key))
        if op == "pending":
            question, options = args.get("question"), args.get("options") or []
            if not isinstance(question, str) or not isinstance(options, list) or not all(isinstance(o, str) for o in options):
                raise ValueError("pending needs question (text) and options (a list of texts)")
            api.set_pending(question, options, user=user, session_id=event.session_id)
            text = "Saved: the person's next message will be recorded as the answer."
        elif op == "clear_pending":
            api.clear_pending(user)
            text = "No question is pending now."
        elif op == "summary":
            summary = args.get("text")
            if not isinstance(summary, str):
                raise ValueError("summary needs text")
            api.set_summary(summary, user)
            text = "Summary saved."
        else:
            text = api.rehydrate(user) or "No thread is kept for this person yet."
    except (ValueError, StateError) as exc:
        return fastjson.dumps({"error": str(exc)})
    return fastjson.dumps({"text": text})


def _channel_event(agent: Agent, event: HookEvent, data_dir: str, session: str | None) -> str | None:
    """The bot profile when one session serves every sender of a Claude Code channel
    (LEANCTX_CHANNEL_SENDER names the trusted attribute; leanctx.state.channel). The session has
    no single user, so SessionStart hands back nothing; each sender's thread comes back with their
    first message in the session, and a reply is recorded only for a turn one sender had alone."""
    from leanctx.hooks import log
    from leanctx.hooks.hostproc import host_process
    from leanctx.state import api, channel, protocol
    from leanctx.state.errors import BadSlug
    from leanctx.state.slug import active_id, check_id

    if event.subagent_id or event.kind not in (PROMPT, STOP, REPLY):
        return None
    try:
        attr = channel.sender_attribute()
        if event.kind == PROMPT:
            if not event.prompt:
                return None
            user, text, found = None, event.prompt, None
            try:
                found = channel.sender(event.prompt, attr)
                user, text = ((check_id(channel.thread_id(found[0], check_id(found[1]))), found[2]) if found
                              else (active_id(), event.prompt))
            finally:
                channel.remember(data_dir, session, user, host_process())
            state = api.show(user)
            notes = [] if protocol.holds_thread(state, session) else [protocol.rehydrate(state)]
            result = api.inbound(text, user, session_id=session, source=agent.name)
            notes.append(protocol.answer_context(result["answered"]) if result.get("answered") else "")
            if found:
                notes.append(channel.sender_note(attr, found[1]))
            joined = "\n\n".join(n for n in notes if n)
            return agent.context_output(event.event, joined) or None if joined else None
        senders = channel.take(data_dir, session)
        if not senders or None in senders or len(set(senders)) > 1:
            log(data_dir, agent.name, event.event, f"bot profile (channel): reply not recorded: the turn's senders are "
                f"{'unknown' if not senders or None in senders else 'several'}")
            for user in {u for u in senders if u is not None}:
                api.arm_pending(user)
            return None
        _record_reply(agent, event, senders[0], session)
    except (channel.Refused, BadSlug) as exc:
        log(data_dir, agent.name, event.event, f"bot profile (channel): nothing recorded: {exc}")
    return None
