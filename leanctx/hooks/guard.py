"""The multi-user guard inside the hook: decide, then answer in the host's own deny form.

A pre-tool hook that crashes or exits non-zero blocks tool calls on some hosts and is ignored on
others, so nothing here raises: an internal error fails closed only for calls that mention the
user tree (the guard's whole job) and open for everything else.
"""

from __future__ import annotations

import os

from leanctx.agents.base import Agent, HookEvent


def _active(data_dir: str | None, agent: Agent | None = None, event: HookEvent | None = None) -> str:
    """The folder this turn may touch: CKS_ACTIVE_USER's; in a channel session the one sender
    whose turn is in progress (state/channel.py turn_user); on a host that names each person's
    conversation (OpenClaw's session key) that person's thread; none when that is unclear."""
    from leanctx.state import channel, slug
    from leanctx.state.errors import BadSlug

    try:
        if agent is not None and agent.thread_key_source:
            key = (event.thread_key or "").strip() if event is not None else ""
            return slug.slugify(channel.thread_id(agent.thread_key_source, key)) if key else ""
        if data_dir is not None:
            from leanctx.hooks.hostproc import host_process

            turn = channel.turn_user(data_dir, host_process())
            if turn is not None:
                return slug.slugify(turn)
        return slug.active_slug()
    except (BadSlug, channel.Refused):  # no single user is this turn's: no user folder is
        return ""


def check(agent: Agent, event: HookEvent, data_dir: str | None = None) -> str:
    from leanctx.state import slug

    tool_input = event.tool_input or {}
    try:
        home = os.environ.get("HOME") or os.path.expanduser("~")
        from leanctx.state.guard import decide

        active = _active(data_dir, agent, event)
        reason = decide(
            event.tool_name or "",
            tool_input,
            cks_home=slug.cks_home(),
            active_slug=active,
            cwd=event.cwd,
            home=home,
            active_id=os.environ.get(slug.ENV, ""),  # the model's shell has the host's environment too
        )
    except Exception as exc:  # noqa: BLE001 - see the module docstring
        root = slug.users_root()
        mentions = root in repr(tool_input) or ".cks" in repr(tool_input)
        reason = f"leanctx guard could not check this call ({type(exc).__name__}: {exc}); refusing because it names {root}" if mentions else None
    if reason is None:
        return agent.no_opinion(event.event)
    return agent.guard_output(event.event, reason)
