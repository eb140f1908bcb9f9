"""End to end: Claude Code channels, the real CLI (2.1.197) in a pty, our own channel server.

What the pinned CLI does (its bundle, gateChannelServer; see docs/bots.md "Claude Code channels"):
a channel server is registered only when (1) it declares `claude/channel`, (2) the provider is
Anthropic's own API (not Bedrock/Vertex/Foundry), (3) the GrowthBook feature `tengu_harbor` is on,
(4) no managed settings block it, (5) it is named by --channels (approved plugins) or
--dangerously-load-development-channels (which a non-interactive `-p` session ignores). API-key
auth is not refused as such; the feature flag is the gate. Offline, the flag has its shipped
default, off, unless ~/.claude.json caches it (`cachedGrowthBookFeatures`, what Claude Code keeps
from its last fetch) and feature flags are evaluated at all, which CLAUDE_CODE_DISABLE_
NONESSENTIAL_TRAFFIC, DISABLE_TELEMETRY and DO_NOT_TRACK turn off.

- test_channels_are_off_as_shipped pins the gate: a future CLI that opens it is noticed;
- test_two_senders_one_session_then_restart: with the flag cached on, two chat users talk to one
  session through the channel, the bot restarts, each resumes their own thread, pending
  question answered; LEANCTX_CHANNEL_SENDER=user_id takes the user from the channel's attribute.
Network: only 127.0.0.1 (the fake model; every other request goes to a dead local proxy).
"""
from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shlex
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from leanctx.state.slug import slugify
from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use

pytestmark = pytest.mark.e2e

SERVER = Path(__file__).with_name("channel_server.py")
KEY = "sk-ant-fake-key-for-tests"
LEANCTX = f"{shlex.quote(sys.executable)} -m leanctx"
ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-B]|\x1b[=>78]")
WAIT = 90.0


class Session:
    """An interactive `claude` in a pseudo-terminal; `screen` is its output without escapes or
    whitespace (Ink draws spaces as cursor moves)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
        self.master, self.raw = master, b""
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.raw += chunk

    @property
    def screen(self) -> str:
        return re.sub(r"\s+", "", ANSI.sub(b"", self.raw).decode("utf-8", "replace"))

    def wait_for(self, check, what: str) -> None:
        end = time.monotonic() + WAIT
        while time.monotonic() < end:
            if check():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{what}: not seen (claude exit {self.proc.poll()}); screen:\n{self.screen[-3000:]}")

    def key(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        hostcli._kill_group(self.proc)
        try:
            self.proc.wait(10)
        finally:
            os.close(self.master)


def channel_home(hh: hostcli.HostHome, flag_cached: bool) -> Path:
    """~/.claude.json for an interactive run with no first-run dialogs, and the channel server."""
    spool = hh.root / "spool"
    spool.mkdir(exist_ok=True)
    path = hh.home / ".claude.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update({"hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
                 "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []}})
    data.setdefault("projects", {})[str(hh.proj)] = {"hasTrustDialogAccepted": True, "allowedTools": []}
    data.setdefault("mcpServers", {})["chan"] = {"type": "stdio", "command": sys.executable,
                                                 "args": [str(SERVER), str(spool), str(hh.root / "channel.log")]}
    if flag_cached:
        data["cachedGrowthBookFeatures"] = {"tengu_harbor": True}
    path.write_text(json.dumps(data, indent=1))
    return spool


def interactive_env(hh: hostcli.HostHome, base_url: str, extra: dict) -> dict:
    env = hostcli.claude_env(hh.home, base_url, extra)
    for name in ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_TELEMETRY"):
        env.pop(name)  # either one turns feature-flag evaluation off, and with it channels
    dead = "http://127.0.0.1:9"  # nothing listens: whatever is not the fake model fails locally
    env.update({"TERM": "xterm-256color", "HTTPS_PROXY": dead, "HTTP_PROXY": dead, "https_proxy": dead,
                "http_proxy": dead, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})
    env.pop("NO_COLOR", None)
    return env


def push(spool: Path, n: int, content: str, **meta: str) -> None:
    tmp = spool / f"{n:03d}.tmp"
    tmp.write_text(json.dumps({"content": content, "meta": meta}))
    tmp.rename(spool / f"{n:03d}.json")


def start(claude_cli: str, hh: hostcli.HostHome, env: dict, debug: Path) -> Session:
    """The bot: an interactive session listening to the development channel `chan`; its debug
    log says when the channel's handler is registered (a push before that is dropped)."""
    return Session([claude_cli, "--dangerously-load-development-channels", "server:chan", "--allowedTools", f"Bash {SHOW}",
                    "--debug-file", str(debug)], hh.proj, env)


def listening(s: Session, debug: Path) -> None:
    s.wait_for(lambda: "Iamusingthisforlocaldevelopment" in s.screen, "the development-channels dialog")
    s.key(b"\r")  # its first choice: "I am using this for local development"
    s.wait_for(lambda: debug.exists() and 'MCP server "chan": Channel notifications registered' in debug.read_text(),
               "the channel's notification handler")


def test_channels_are_off_as_shipped(claude_cli, host_home, lean):
    """Pinned CLI, API key, no cached feature flag: the channel is ignored, nothing reaches a hook."""
    hh = host_home
    lean.run("init", "--agent", "claude", "--bot", "--no-mcp")
    spool = channel_home(hh, flag_cached=False)
    with FakeAnthropic(script=["should not be asked"]) as srv:
        s = start(claude_cli, hh, interactive_env(hh, srv.base_url, {**lean.host_env, "LEANCTX_CHANNEL_SENDER": "user_id"}),
                  hh.root / "debug.txt")
        try:
            s.wait_for(lambda: "Channelsarenotcurrentlyavailable" in s.screen, "the CLI's notice 'Channels are not currently available'")
            push(spool, 0, "hello", user_id="111")
            s.wait_for(lambda: not any(spool.iterdir()), "the channel server pushing its message")
            s.wait_for(lambda: '"notifications/claude/channel"' in (hh.root / "channel.log").read_text(), "the push")
        finally:
            s.close()
        assert srv.main_requests == []  # the pushed message never became a turn
    assert "Channel notifications registered" not in (hh.root / "debug.txt").read_text()
    assert not (hh.home / ".cks" / "user" / slugify("111")).exists()


SHOW = "mcp__leanctx__state_show"


def _model(body: dict):
    """The scripted model: answers the newest channel message of the request. For ana it saves
    its question with `leanctx state pending` through Bash, for bob it looks at the thread with
    the state_show MCP tool; neither names the user: the tools follow the turn's sender."""
    last = body["messages"][-1]
    if isinstance(last["content"], list) and any(b.get("type") == "tool_result" for b in last["content"]):
        called = [b.get("name") for b in body["messages"][-2]["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        return "9 to 5." if called == [SHOW] else "Which plan? basic or pro"
    newest = json.dumps(body["messages"]).rsplit("<channel source=", 1)[-1].split("</channel>")[0]
    if "I'd like to subscribe" in newest:
        return tool_use("Bash", {"command": f"{LEANCTX} state pending --question 'Which plan?' --option basic --option pro"})
    if "opening hours" in newest:
        return tool_use(SHOW, {})
    for asked, answer in (("hi again", "Hello again, Bob."), ("\\npro\\n", "Pro it is.")):
        if asked in newest:
            return answer
    return "ok"


def _show_results(bodies: list) -> list[str]:
    """The text of every state_show result the model got (the request right after the call)."""
    out = []
    for body in bodies:
        msgs = body["messages"]
        if len(msgs) < 2 or not isinstance(msgs[-1]["content"], list) or not isinstance(msgs[-2]["content"], list):
            continue
        called = {b.get("id") for b in msgs[-2]["content"] if b.get("type") == "tool_use" and b.get("name") == SHOW}
        for b in msgs[-1]["content"]:
            if b.get("type") == "tool_result" and b.get("tool_use_id") in called:
                c = b.get("content")
                out.append(c if isinstance(c, str) else "".join(x.get("text", "") for x in c or []))
    return out


def test_two_senders_one_session_then_restart(claude_cli, host_home, lean):
    hh = host_home
    lean.run("init", "--agent", "claude", "--bot")
    spool = channel_home(hh, flag_cached=True)
    extra = {**lean.host_env, "LEANCTX_CHANNEL_SENDER": "user_id", "CKS_ACTIVE_USER": "operator"}

    def folder(user: str) -> Path:  # a channel sender's thread is named by the server and the id
        return hh.home / ".cks" / "user" / slugify(f'channel:["chan","{user}"]')

    def turns(user: str) -> list:
        p = folder(user) / "conversation-state.json"
        return [(t["role"], t["text"]) for t in json.loads(p.read_text())["recent_turns"]] if p.exists() else []

    def state(user: str) -> dict:
        return json.loads((folder(user) / "conversation-state.json").read_text())

    with FakeAnthropic(script=[_model] * 12) as srv:
        s = start(claude_cli, hh, interactive_env(hh, srv.base_url, extra), hh.root / "debug1.txt")
        try:
            listening(s, hh.root / "debug1.txt")
            push(spool, 0, "I'd like to subscribe", user="ana", user_id="111")
            s.wait_for(lambda: len(turns("111")) == 2, "ana's turn recorded")
            push(spool, 1, "what are your opening hours?", user="bob", user_id="222")
            s.wait_for(lambda: len(turns("222")) == 2, "bob's turn recorded")
        finally:
            s.close()
        bodies = list(srv.main_requests)
        first = [json.dumps(r) for r in bodies]
    assert turns("111") == [("user", "I'd like to subscribe"), ("agent", "Which plan? basic or pro")]
    assert state("111")["pending"]["question"] == "Which plan?"
    assert turns("222") == [("user", "what are your opening hours?"), ("agent", "9 to 5.")]
    assert not (hh.home / ".cks" / "user" / "operator").exists()  # CKS_ACTIVE_USER is not the chat's user
    assert not (hh.home / ".cks" / "user" / "111").exists() and not (hh.home / ".cks" / "user" / "222").exists()
    assert 'from user_id=\\"111\\"' in first[0] and '<channel source=\\"chan\\" user=\\"ana\\" user_id=\\"111\\">' in first[0]
    # bob's state_show, over the real MCP server Claude Code spawned: bob's thread, none of ana's
    shown = _show_results(bodies)
    assert len(shown) == 1, shown
    bob = json.loads(shown[0])
    assert bob["user_id"] == 'channel:["chan","222"]' and bob["recent_turns"][0]["text"] == "what are your opening hours?"
    for secret in ("subscribe", "Which plan"):
        assert secret not in shown[0], f"bob's state_show returned ana's {secret!r}"

    # --- the bot restarts (a new session); bob first, then ana answers her pending question
    with FakeAnthropic(script=[_model] * 12) as srv:
        s = start(claude_cli, hh, interactive_env(hh, srv.base_url, extra), hh.root / "debug2.txt")
        try:
            listening(s, hh.root / "debug2.txt")
            push(spool, 2, "hi again", user="bob", user_id="222")
            s.wait_for(lambda: len(turns("222")) == 4, "bob's second turn recorded")
            push(spool, 3, "pro", user="ana", user_id="111")
            s.wait_for(lambda: len(turns("111")) == 4, "ana's answer recorded")
        finally:
            s.close()
        bob_req, ana_req = (json.dumps(r) for r in srv.main_requests[:2])
    assert "opening hours" in bob_req and "[leanctx conversation state]" in bob_req
    for secret in ("subscribe", "Which plan"):
        assert secret not in bob_req, f"bob's request carried ana's {secret!r}"
    assert "answers your pending question" in ana_req and "Which plan?" in ana_req and "subscribe" in ana_req
    ana = state("111")
    assert ana["pending"] is None and ana["last_answer"]["answer"] == "pro" and ana["user_id"] == 'channel:["chan","111"]'
    assert turns("111")[-2:] == [("user", "pro"), ("agent", "Pro it is.")]
    assert turns("222")[-2:] == [("user", "hi again"), ("agent", "Hello again, Bob.")]
    assert not lean.hook_log.exists() or "Traceback" not in lean.hook_log.read_text()
