"""A long-running chat bot on the real Claude Agent SDK, for the e2e tests (a bot author's shape).

It reads a spool: `<spool>/inbox/*.json` ({"user", "text"}) in name order, one `ClaudeSDKClient`
per user (started lazily, one asyncio task per user), and appends {"user", "text", "reply"} to
`<spool>/outbox.jsonl`. An inbox file is deleted only after its answer is written, so a kill -9
redelivers it (at-least-once, like a chat layer). Fresh sessions: the thread survives restarts
only through leanctx.

    python -m tests.e2e.sdk_bot SPOOL [--mode native|settings] [--cli PATH]

`native`: leanctx.bot.claude_sdk_options(user) with setting_sources=[]; `settings`: plain
options with env={"CKS_ACTIVE_USER": user} (the `init --bot` hooks from ~/.claude).
ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY come from this process's env.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, TextBlock


def options(user: str, mode: str, cli: str | None, cwd: Path) -> ClaudeAgentOptions:
    cwd.mkdir(parents=True, exist_ok=True)
    common = {"cwd": str(cwd), "cli_path": cli, "permission_mode": "default"}
    if mode == "native":
        from leanctx.bot.claude_sdk import claude_sdk_options

        return ClaudeAgentOptions(**common, **claude_sdk_options(user))
    return ClaudeAgentOptions(**common, env={"CKS_ACTIVE_USER": user}, allowed_tools=["Bash"])


class Bot:
    def __init__(self, spool: Path, mode: str, cli: str | None) -> None:
        self.spool, self.mode, self.cli = spool, mode, cli
        self.clients: dict[str, ClaudeSDKClient] = {}
        self.queues: dict[str, asyncio.Queue] = {}
        self.taken: set[str] = set()

    async def serve(self, user: str) -> None:
        client = ClaudeSDKClient(options(user, self.mode, self.cli, self.spool / "cwd" / user))
        await client.connect()
        queue = self.queues[user]
        while True:
            path, msg = await queue.get()
            await client.query(msg["text"])
            parts = []
            async for m in client.receive_response():
                if isinstance(m, AssistantMessage):
                    parts += [b.text for b in m.content if isinstance(b, TextBlock)]
                elif isinstance(m, ResultMessage):
                    break
            with (self.spool / "outbox.jsonl").open("a") as out:
                out.write(json.dumps({"user": user, "text": msg["text"], "reply": "\n".join(parts)}) + "\n")
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
    ap.add_argument("--mode", choices=["native", "settings"], default="native")
    ap.add_argument("--cli")
    a = ap.parse_args(argv)
    asyncio.run(Bot(a.spool, a.mode, a.cli).run())


if __name__ == "__main__":
    sys.exit(main())
