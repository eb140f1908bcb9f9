"""A long-running chat bot on the real Claude Agent SDK, for the e2e tests (a bot author's shape).

It reads a spool: `<spool>/inbox/*.json` ({"user", "text"}) in name order, one `ClaudeSDKClient`
per user (started lazily, one asyncio task per user), and appends {"user", "text", "reply"} to
`<spool>/outbox.jsonl`. An inbox file is deleted only after its answer is written, so a kill -9
redelivers it (at-least-once, like a chat layer); the file's name is the chat message id.

    python -m tests.e2e.sdk_bot SPOOL [--mode native|binding|settings] [--resume] [--cli PATH]

`native`: leanctx.bot.claude_sdk_options(user) with setting_sources=[]; `binding`:
leanctx.bot.claude_sdk_binding(user), each query with its message id, the reply marked delivered
once written; `settings`: plain options with env={"CKS_ACTIVE_USER": user} (the `init --bot`
hooks from ~/.claude). Without --resume every process starts fresh sessions (the thread survives
only through leanctx); with it the session id (from the `init` message) is kept per user in
`<spool>/sessions/` and passed as `resume=` by the next process.
While `<spool>/hold` exists, a finished reply is not delivered: the bot writes `<spool>/held`
and waits (a test kills it there: the model's turn is over, the user has nothing).
ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY come from this process's env.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from claude_agent_sdk import (AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, SystemMessage,
                              TextBlock)

from leanctx.state.slug import slugify


def options(user: str, mode: str, cli: str | None, cwd: Path, binding, resume: str | None) -> ClaudeAgentOptions:
    cwd.mkdir(parents=True, exist_ok=True)
    common = {"cwd": str(cwd), "cli_path": cli, "permission_mode": "default", "resume": resume}
    if mode == "native":
        from leanctx.bot.claude_sdk import claude_sdk_options

        return ClaudeAgentOptions(**common, **claude_sdk_options(user))
    if mode == "binding":
        return ClaudeAgentOptions(**common, **binding.options)
    return ClaudeAgentOptions(**common, env={"CKS_ACTIVE_USER": user}, allowed_tools=["Bash"])


class Bot:
    def __init__(self, spool: Path, mode: str, cli: str | None, resume: bool) -> None:
        self.spool, self.mode, self.cli, self.resume = spool, mode, cli, resume
        self.queues: dict[str, asyncio.Queue] = {}
        self.taken: set[str] = set()

    def session_file(self, user: str) -> Path:
        return self.spool / "sessions" / slugify(user)

    def keep_session(self, user: str, sid: str) -> None:
        path = self.session_file(user)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(sid)
        tmp.replace(path)

    async def serve(self, user: str) -> None:
        binding = None
        if self.mode == "binding":
            from leanctx.bot.claude_sdk import claude_sdk_binding

            binding = claude_sdk_binding(user)
        sessions = self.session_file(user)
        resume = sessions.read_text() if self.resume and sessions.exists() else None
        client = ClaudeSDKClient(options(user, self.mode, self.cli, self.spool / "cwd" / user, binding, resume))
        await client.connect()
        queue = self.queues[user]
        while True:
            path, msg = await queue.get()
            if binding:
                await binding.query(client, msg["text"], message_id=path.stem)
            else:
                await client.query(msg["text"])
            parts = []
            async for m in client.receive_response():
                if isinstance(m, SystemMessage) and m.subtype == "init" and self.resume:
                    self.keep_session(user, m.data["session_id"])  # known before the turn can crash
                elif isinstance(m, AssistantMessage):
                    parts += [b.text for b in m.content if isinstance(b, TextBlock)]
                elif isinstance(m, ResultMessage):
                    break
            reply = "\n".join(parts)
            if (self.spool / "hold").exists():
                (self.spool / "held").write_text(msg["text"])
                await asyncio.Event().wait()
            with (self.spool / "outbox.jsonl").open("a") as out:
                out.write(json.dumps({"user": user, "text": msg["text"], "reply": reply}) + "\n")
            if binding:
                await binding.delivered(reply)
            path.unlink()

    async def run(self) -> None:
        inbox = self.spool / "inbox"
        inbox.mkdir(parents=True, exist_ok=True)
        (self.spool / "ready").write_text("1")
        while True:
            for path in sorted(inbox.glob("*.json")):
                if path.name in self.taken:
                    continue
                self.taken.add(path.name)
                msg = json.loads(path.read_text())
                user = msg["user"]
                if user not in self.queues:
                    self.queues[user] = asyncio.Queue()
                    asyncio.get_running_loop().create_task(self.serve(user))
                await self.queues[user].put((path, msg))
            await asyncio.sleep(0.05)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spool", type=Path)
    ap.add_argument("--mode", choices=["native", "binding", "settings"], default="native")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--cli")
    a = ap.parse_args(argv)
    asyncio.run(Bot(a.spool, a.mode, a.cli, a.resume).run())


if __name__ == "__main__":
    sys.exit(main())
