"""The conversation-state bot profile as in-process Claude Agent SDK hooks and tools.

`init --agent claude --bot` needs the CLI to load ~/.claude/settings.json; a bot that runs
`ClaudeAgentOptions(setting_sources=[])` (isolation mode) loads none, so leanctx would be off.
Here the same work rides on Python callbacks the SDK calls in this process, with the user bound
in a closure (one user per `ClaudeSDKClient`, no CKS_ACTIVE_USER in any env):

- UserPromptSubmit: on the first prompt of a session id seen by these hooks, the thread is handed
  back (the SDK never calls a Python SessionStart callback, 0.2.189); then the prompt is recorded,
  and if it answers the pending question the model is told so.
- the reply is recorded as the agent's turn: by the Stop callback (`claude_sdk_options`), or by
  the bot once the user has it (`claude_sdk_binding(...).delivered`, which also carries chat
  message ids, so a redelivered message counts once).
- the state tools (pending, clear-pending, summary, active, end, show) are in-process MCP tools,
  so the model needs neither Bash nor the env var; the instructions go into the system prompt.

Two ways to run a bot, both handled by the same hooks:
- fresh sessions (no `resume=`): every restart starts a new session and its first prompt gets
  the whole thread (`rehydrate`, at most 12,000 characters): bounded, independent of the CLI's
  transcript files;
- SDK `resume=<session id>` (the id from the `init` SystemMessage, kept per user): the CLI
  restores its own transcript, so when the recorded turns show it holds the thread
  (`protocol.holds_thread`) the first prompt gets only what it lacks, the pending question and
  the answer line (`resume_context`), never the thread again: restarts do not stack copies.

Needs the optional extra: in a clone of leanctx, `python -m pip install '.[sdk]'`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from leanctx.state import api, protocol, validate
from leanctx.state.errors import StateError

log = logging.getLogger("leanctx.bot")

SERVER = "leanctx"
SOURCE = "claude-agent-sdk"

INSTRUCTIONS = """\
# Resumable conversation (leanctx)

You run as an always-on bot: a redeploy, a crash or a reconnect restarts you. leanctx records every
user message and every reply of yours, and hands the thread back when a new session starts: a short
summary, the recent turns, the active work and the question still waiting for an answer. When a
message answers that waiting question you are told so with the message; treat it as the answer.

Use the leanctx tools (they act on the current user only):
- you asked the user a clarifying question: right after asking, call `state_pending` with the
  question and the choices you offered; if it got settled some other way, `state_clear_pending`;
- the topic shifted or the thread grew long: `state_summary` with one short paragraph a restarted
  you would need;
- you started or finished a piece of work: `state_active` (empty feature clears it);
- the conversation is over: `state_end`; to see what is saved: `state_show`.
"""

_TOOLS = ("state_pending", "state_clear_pending", "state_summary", "state_active", "state_end", "state_show")


def tool_names(server: str = SERVER) -> list[str]:
    """The names the CLI gives our tools, for `allowed_tools`."""
    return [f"mcp__{server}__{name}" for name in _TOOLS]


def _context(event: str, text: str) -> dict:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}} if text else {}


class _Hooks:
    """The callbacks for one user's client.

    `deferred` (a Binding): no Stop callback, the bot records the reply once delivered; and the
    prompt's commit runs in the background while the model works, its added context computed from
    the state read just before (the same protocol.inbound on the same data). Everything that
    depends on that commit awaits it first (`settle`): the state tools, `delivered`, the next
    prompt. A crash before it lands loses nothing: the bot acknowledges a message only after
    `delivered`, so the chat layer redelivers it. Otherwise (claude_sdk_options) the prompt is
    recorded before the model runs and the Stop callback records the reply."""

    def __init__(self, user: str, source: str, deferred: bool) -> None:
        api.target(user)  # a bad user id fails here, at build time, not inside the first turn
        if validate.FAST is None:
            # the stdlib interpreter of the same schema (held equal to jsonschema by a property
            # test), as in the hook process: jsonschema took ~6 ms of each turn's commit
            validate.FAST = True
        self.user, self.source, self.deferred = user, source, deferred
        self.seen: set[str | None] = set()  # sessions already handed the thread
        self.expected: deque[tuple[str, str]] = deque()  # (prompt, chat message id) queued by Binding.query
        self.session: str | None = None  # the session of the last prompt
        self.inflight: asyncio.Future | None = None  # the deferred commit of the last prompt

    def message_id(self, prompt: str) -> str | None:
        """The chat message id the bot queued with this prompt (entries queued before it are stale)."""
        for i, (text, mid) in enumerate(self.expected):
            if text == prompt:
                for _ in range(i + 1):
                    self.expected.popleft()
                return mid
        return None

    def handed_back(self, session: str | None, state: dict | None = None) -> str:
        """On a session's first prompt, before recording: the thread as the last session left it
        (`state`, else read now); a resumed transcript that holds it gets only the pending
        question and answer line, so resumes never stack it. '' on later prompts."""
        if session in self.seen:
            return ""
        self.seen.add(session)
        return protocol.session_context(api.show(self.user) if state is None else state, session)

    def on_prompt_sync(self, prompt: str, session: str | None, message_id: str | None) -> dict:
        parts = [self.handed_back(session)]
        if prompt:
            result = api.inbound(prompt, self.user, session_id=session, source=self.source, message_id=message_id)
            parts.append(result["answer_context"] or "")
        return _context("UserPromptSubmit", "\n\n".join(p for p in parts if p))

    def peek_prompt(self, prompt: str, session: str | None, message_id: str | None) -> dict:
        """The deferred mode's added context: what on_prompt_sync would say, from one read."""
        state = api.show(self.user)
        parts = [self.handed_back(session, state)]
        if prompt:
            parts.append(protocol.answer_context(protocol.inbound(state, prompt, session, message_id=message_id)[1]))
        return _context("UserPromptSubmit", "\n\n".join(p for p in parts if p))

    def record_prompt(self, prompt: str, session: str | None, message_id: str | None) -> dict:
        api.inbound(prompt, self.user, session_id=session, source=self.source, message_id=message_id)
        return {}

    def record_reply(self, text: str, session: str | None) -> dict:
        """The reply as the agent's turn, which arms a question asked in this turn; no text: arm only."""
        if text.strip():
            api.reply(text, self.user, session_id=session)
        else:
            api.arm_pending(self.user)
        return {}

    async def settle(self) -> None:
        """Wait for the deferred commit of the last prompt (several callers may wait at once)."""
        task = self.inflight
        if task is None:
            return
        try:
            await task
        finally:
            if self.inflight is task:
                self.inflight = None  # an error surfaces once, never at every later call

    async def guarded(self, event: str, fn, *args) -> dict:
        """A state the store refuses (damaged, busy, foreign) must not fail the user's turn: the
        turn goes on without leanctx and the bot's log says why."""
        try:
            return await asyncio.to_thread(fn, *args)
        except StateError as exc:
            log.warning("leanctx %s for user %r: nothing recorded: %s", event, self.user, exc)
            return {}

    async def on_prompt(self, data: dict, tool_use_id: Any, context: Any) -> dict:
        prompt, self.session = data.get("prompt") or "", data.get("session_id") or None
        args = (prompt, self.session, self.message_id(prompt))
        await self.settle()
        if not self.deferred:
            return await self.guarded("UserPromptSubmit", self.on_prompt_sync, *args)
        out = await self.guarded("UserPromptSubmit", self.peek_prompt, *args)
        if prompt:
            self.inflight = asyncio.ensure_future(self.guarded("UserPromptSubmit", self.record_prompt, *args))
        return out

    async def on_stop(self, data: dict, tool_use_id: Any, context: Any) -> dict:
        return await self.guarded("Stop", self.record_reply, data.get("last_assistant_message") or "",
                                  data.get("session_id") or None)

    async def delivered(self, reply: str) -> None:
        await self.settle()
        await self.guarded("delivered", self.record_reply, reply, self.session)

    def matchers(self) -> dict:
        from claude_agent_sdk import HookMatcher

        hooks = {"UserPromptSubmit": [HookMatcher(hooks=[self.on_prompt])]}
        if not self.deferred:
            hooks["Stop"] = [HookMatcher(hooks=[self.on_stop])]
        return hooks


def claude_sdk_server(user: str, *, name: str = SERVER, hooks: _Hooks | None = None) -> Any:
    """An in-process MCP server whose state tools act on `user`'s thread (after the deferred
    commit of `hooks`' last prompt, so a question saved in a turn sees that turn's message)."""
    from claude_agent_sdk import create_sdk_mcp_server, tool

    def run(fn, *args) -> dict:
        try:
            fn(*args)
        except StateError as exc:
            return {"content": [{"type": "text", "text": f"leanctx: {exc}"}], "is_error": True}
        return {"content": [{"type": "text", "text": "saved"}]}

    async def call(fn) -> dict:
        if hooks is not None:
            await hooks.settle()
        return await asyncio.to_thread(run, fn)

    @tool("state_pending", "Save the clarifying question you just asked the user, with the choices offered.",
          {"type": "object", "properties": {"question": {"type": "string"},
                                            "options": {"type": "array", "items": {"type": "string"}}},
           "required": ["question"]})
    async def pending(args: dict) -> dict:
        return await call(lambda: api.set_pending(args["question"], args.get("options") or (), user))

    @tool("state_clear_pending", "The waiting question got settled some other way.", {})
    async def clear_pending(args: dict) -> dict:
        return await call(lambda: api.clear_pending(user))

    @tool("state_summary", "Replace the thread's summary with one short paragraph.", {"text": str})
    async def summary(args: dict) -> dict:
        return await call(lambda: api.set_summary(args["text"], user))

    @tool("state_active", "Set the piece of work in progress (empty feature clears it).",
          {"type": "object", "properties": {"feature": {"type": "string"}, "phase": {"type": "string"}}})
    async def active(args: dict) -> dict:
        return await call(lambda: api.set_active(args.get("feature") or None, args.get("phase"), user))

    @tool("state_end", "The conversation is over: file its digest and start a fresh thread.", {})
    async def end(args: dict) -> dict:
        return await call(lambda: api.end_thread(user))

    @tool("state_show", "See the saved thread.", {})
    async def show(args: dict) -> dict:
        if hooks is not None:
            await hooks.settle()
        text = await asyncio.to_thread(api.rehydrate, user)
        return {"content": [{"type": "text", "text": text or "(no saved thread)"}]}

    return create_sdk_mcp_server(name, tools=[pending, clear_pending, summary, active, end, show])


def _options(user: str, hooks: _Hooks, system_prompt: str | None) -> dict:
    prompt = f"{system_prompt}\n\n{INSTRUCTIONS}" if system_prompt else INSTRUCTIONS
    return {
        "hooks": hooks.matchers(),
        "mcp_servers": {SERVER: claude_sdk_server(user, hooks=hooks)},
        "allowed_tools": tool_names(),
        "system_prompt": prompt,
        "setting_sources": [],
    }


def claude_sdk_options(user: str, *, system_prompt: str | None = None, source: str = SOURCE) -> dict:
    """Keyword arguments to merge into `ClaudeAgentOptions(...)` for one client serving `user`:
    hooks, the state tools, their permission, the instructions appended to `system_prompt`, and
    `setting_sources=[]` (nothing from ~/.claude is needed). Merge `allowed_tools` and
    `mcp_servers` with your own rather than overwriting them. The reply is recorded when the
    model's turn ends (Stop); a bot that knows its chat message ids and when a reply reached the
    user should use `claude_sdk_binding` instead."""
    return _options(user, _Hooks(user, source, deferred=False), system_prompt)


class Binding:
    """leanctx for one `ClaudeSDKClient` serving one user, for a bot on an at-least-once chat layer:

        lc = claude_sdk_binding(user)
        client = ClaudeSDKClient(ClaudeAgentOptions(cwd=..., **lc.options))
        await lc.query(client, msg.text, message_id=msg.id)   # instead of client.query(msg.text)
        reply = ...                                           # collect receive_response()
        await chat.send(reply)
        await lc.delivered(reply)                             # then ack the chat message

    - `query` hands the chat message id to the UserPromptSubmit callback (which cannot see it), so
      a message the chat layer redelivers after a crash is recorded once;
    - the reply is recorded, and a question asked in the turn becomes answerable, only in
      `delivered`: a process killed after the model's turn but before the user got the reply
      leaves the question unarmed, so the redelivered message never answers a question the user
      never saw (the redone turn asks it again);
    - a turn costs one SDK control round trip (no Stop callback), the message's commit runs while
      the model works (the state tools and `delivered` wait for it), and the reply's commit
      happens after the user has the reply.
    Await `delivered` before you acknowledge the message; a reply never marked delivered is not
    in the thread, and its question is dropped at the next message.
    """

    def __init__(self, user: str, *, system_prompt: str | None = None, source: str = SOURCE) -> None:
        self._hooks = _Hooks(user, source, deferred=True)
        self.options = _options(user, self._hooks, system_prompt)
        self._open = False  # a query whose reply was not marked delivered yet

    async def query(self, client: Any, prompt: str, *, message_id: str | None = None, **kwargs: Any) -> None:
        """`client.query(prompt, **kwargs)`, with `message_id` (the chat layer's id) recorded on the turn."""
        if self._open:
            log.warning("leanctx: the previous reply for user %r was never marked delivered: not in the thread",
                        self._hooks.user)
        if message_id:
            self._hooks.expected.append((prompt, str(message_id)))
        self._open = True
        await client.query(prompt, **kwargs)

    async def delivered(self, reply: str) -> None:
        """The reply reached the user: record it as the agent's turn (arming a question asked in it)."""
        self._open = False
        await self._hooks.delivered(reply or "")


def claude_sdk_binding(user: str, *, system_prompt: str | None = None, source: str = SOURCE) -> Binding:
    """A `Binding` for one client serving `user`: `.options` to merge into `ClaudeAgentOptions`,
    `.query(client, text, message_id=...)` and `.delivered(reply)`."""
    return Binding(user, system_prompt=system_prompt, source=source)
