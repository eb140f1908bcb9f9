"""The conversation-state bot profile as in-process Claude Agent SDK hooks and tools.

`init --agent claude --bot` needs the CLI to load ~/.claude/settings.json; a bot that runs
`ClaudeAgentOptions(setting_sources=[])` (isolation mode) loads none, so leanctx would be off.
Here the same work rides on Python callbacks the SDK calls in this process, with the user bound
in a closure (one user per `ClaudeSDKClient`, no CKS_ACTIVE_USER in any env):

- UserPromptSubmit: on the first prompt of a session id seen by these hooks, the thread is handed
  back (the SDK never calls a Python SessionStart callback, 0.2.189); then the prompt is recorded,
  and if it answers the pending question the model is told so.
- Stop: the reply is recorded as the agent's turn.
- the state tools (pending, clear-pending, summary, active, end, show) are in-process MCP tools,
  so the model needs neither Bash nor the env var; the instructions go into the system prompt.

Needs the optional extra: `pip install 'leanctx-hooks[sdk]'`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from leanctx.state import api
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


def claude_sdk_hooks(user: str, *, source: str = SOURCE) -> dict:
    """`ClaudeAgentOptions.hooks` for `user`: UserPromptSubmit and Stop callbacks."""
    from claude_agent_sdk import HookMatcher

    api.target(user)  # a bad user id fails here, at build time, not inside the first turn
    seen: set[str] = set()

    def on_prompt_sync(data: dict) -> dict:
        prompt, session = data.get("prompt") or "", data.get("session_id") or None
        parts = []
        if session not in seen:
            seen.add(session)
            parts.append(api.rehydrate(user))  # before recording: the thread as the last session left it
        if prompt:
            result = api.inbound(prompt, user, session_id=session, source=source)
            parts.append(result["answer_context"] or "")
        return _context("UserPromptSubmit", "\n\n".join(p for p in parts if p))

    def on_stop_sync(data: dict) -> dict:
        text = data.get("last_assistant_message") or ""
        if text.strip():
            api.reply(text, user, session_id=data.get("session_id") or None)
        return {}

    async def guarded(fn, event: str, data: dict) -> dict:
        """A state the store refuses (damaged, busy, foreign) must not fail the user's turn: the
        turn goes on without leanctx and the bot's log says why."""
        try:
            return await asyncio.to_thread(fn, data)
        except StateError as exc:
            log.warning("leanctx %s for user %r: nothing recorded: %s", event, user, exc)
            return {}

    async def on_prompt(data: dict, tool_use_id: Any, context: Any) -> dict:
        return await guarded(on_prompt_sync, "UserPromptSubmit", data)

    async def on_stop(data: dict, tool_use_id: Any, context: Any) -> dict:
        return await guarded(on_stop_sync, "Stop", data)

    return {"UserPromptSubmit": [HookMatcher(hooks=[on_prompt])], "Stop": [HookMatcher(hooks=[on_stop])]}


def claude_sdk_server(user: str, *, name: str = SERVER) -> Any:
    """An in-process MCP server whose state tools act on `user`'s thread."""
    from claude_agent_sdk import create_sdk_mcp_server, tool

    def run(fn, *args) -> dict:
        try:
            fn(*args)
        except StateError as exc:
            return {"content": [{"type": "text", "text": f"leanctx: {exc}"}], "is_error": True}
        return {"content": [{"type": "text", "text": "saved"}]}

    @tool("state_pending", "Save the clarifying question you just asked the user, with the choices offered.",
          {"type": "object", "properties": {"question": {"type": "string"},
                                            "options": {"type": "array", "items": {"type": "string"}}},
           "required": ["question"]})
    async def pending(args: dict) -> dict:
        return await asyncio.to_thread(run, lambda: api.set_pending(args["question"], args.get("options") or (), user))

    @tool("state_clear_pending", "The waiting question got settled some other way.", {})
    async def clear_pending(args: dict) -> dict:
        return await asyncio.to_thread(run, lambda: api.clear_pending(user))

    @tool("state_summary", "Replace the thread's summary with one short paragraph.", {"text": str})
    async def summary(args: dict) -> dict:
        return await asyncio.to_thread(run, lambda: api.set_summary(args["text"], user))

    @tool("state_active", "Set the piece of work in progress (empty feature clears it).",
          {"type": "object", "properties": {"feature": {"type": "string"}, "phase": {"type": "string"}}})
    async def active(args: dict) -> dict:
        return await asyncio.to_thread(run, lambda: api.set_active(args.get("feature") or None, args.get("phase"), user))

    @tool("state_end", "The conversation is over: file its digest and start a fresh thread.", {})
    async def end(args: dict) -> dict:
        return await asyncio.to_thread(run, lambda: api.end_thread(user))

    @tool("state_show", "See the saved thread.", {})
    async def show(args: dict) -> dict:
        text = await asyncio.to_thread(api.rehydrate, user)
        return {"content": [{"type": "text", "text": text or "(no saved thread)"}]}

    return create_sdk_mcp_server(name, tools=[pending, clear_pending, summary, active, end, show])


def claude_sdk_options(user: str, *, system_prompt: str | None = None, source: str = SOURCE) -> dict:
    """Keyword arguments to merge into `ClaudeAgentOptions(...)` for one client serving `user`:
    hooks, the state tools, their permission, the instructions appended to `system_prompt`, and
    `setting_sources=[]` (nothing from ~/.claude is needed). Merge `allowed_tools` and
    `mcp_servers` with your own rather than overwriting them."""
    prompt = f"{system_prompt}\n\n{INSTRUCTIONS}" if system_prompt else INSTRUCTIONS
    return {
        "hooks": claude_sdk_hooks(user, source=source),
        "mcp_servers": {SERVER: claude_sdk_server(user)},
        "allowed_tools": tool_names(),
        "system_prompt": prompt,
        "setting_sources": [],
    }
