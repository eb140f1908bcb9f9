"""Run the real OpenClaw gateway offline against a fake Telegram Bot API and a fake model.

Usage::

    h = OpenClawHarness(tmp_path)               # writes the base openclaw.json; nothing runs yet
    subprocess.run([... "leanctx", "init", "--agent", "openclaw"], env=h.env)  # optional: same HOME
    h.start()                                   # returns once the gateway polls Telegram (seconds)
    a, b = h.users                              # two Telegram users (private chats, chat id = user id)
    mid = h.send(a, "hello")                    # a writes to the bot; Telegram message_id
    h.reply(a)                                  # -> "reply to: hello" (the next new bot message)
    h.model_requests()                          # every answered turn's request body, in order
    turn_text(body)                             # the user's words of one such request
    h.settle(); h.kill9(); h.start()            # kill -9 between turns, restart (h.restart() = kill9+start)
    h.stall_next_model_request(); h.send(a, "x"); h.wait_stalled(); h.kill9(); h.release(); h.start()
    h.stop()

``read_tool="__ctx_read"``: a message ``read FILE`` makes the fake model call that tool and answer
with the first line of its result (tests/e2e/fake_echo_chat.py).
``h.env`` is the environment the gateway runs with (HOME = the temp home, Node 24 and ``openclaw``
first on PATH); add LEANCTX_HOME etc. for leanctx. ``h.sessions()``: session key -> session id. ``h.config_path`` is ``$HOME/.openclaw/openclaw.json``.
``probe_hooks=True`` also loads tests/e2e/openclaw_probe, a plugin that logs every hook event
with its context: ``h.hook_events("before_prompt_build")``. The base config disables unneeded
bundled plugins through ``plugins.entries`` (no ``plugins.allow``: an installer adding a plugin
does not have to list the others).

The gateway runs in a network namespace of its own (tests/e2e/netns.py): 127.0.0.1 there has the
fake Telegram on TG_PORT and the fake model on MODEL_PORT, relayed to unix sockets served by
this process, so the fakes and their logs outlive every kill and restart of the gateway. State
lives under ``root``: ``home/`` is HOME (OpenClaw's default state dir ``home/.openclaw`` with
``openclaw.json``, and the agent workspace), ``gateway-<n>.log`` each run's output.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from tests.e2e import install_clis, netns
from tests.e2e.fake_echo_chat import EchoChat, message_text
from tests.e2e.fake_telegram import FakeTelegram

TG_PORT = 18081  # loopback ports inside the gateway's namespace (private to it)
MODEL_PORT = 18082
GATEWAY_PORT = 18789
BOT_TOKEN = "123456789:LEANCTX-e2e-fake-token"
USERS = (1001, 1002)
PROVIDER, MODEL = "fake", "fake-model"
# bundled plugins 2026.9.6 loads by default that no test here needs (telegram stays), e.g.
# memory-core adds a "dreaming" cron job; disabling them did not measurably speed up a start.
# Disabled through their entries, not an allowlist, so a plugin an installer adds still loads.
UNNEEDED_PLUGINS = ("anthropic", "browser", "canvas", "cua-computer", "device-pair", "file-transfer", "geolocation",
                    "github", "linux-node", "memory-core", "ollama", "openai", "talk-voice", "xai")

_DROP_ENV_PREFIXES = ("OPENCLAW_", "TELEGRAM_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "NODE_OPTIONS",
                      "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
                      "all_proxy", "no_proxy")


INTERNAL_CONTEXT = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"


def user_words(text: str) -> str:
    """What the Telegram user typed, out of the user message OpenClaw builds around it: a
    ``[time] Conversation info: ... ```json {sender} ``` `` header before, a ``Runtime: ...`` line after."""
    text = re.sub(r"^\[[^\]\n]*\]\s*", "", text)
    if text.startswith("Conversation info:"):
        m = re.match(r"Conversation info:[^\n]*\n```[a-z]*\n.*?\n```\n?", text, re.S)
        if m:
            text = text[m.end():]
    cut = text.rfind("\n\nRuntime: ")
    if cut >= 0:
        text = text[:cut]
    return text.strip()


def turn_text(body: dict) -> str:
    """The words of the user's turn in an OpenClaw model request (its last user message that is
    not OpenClaw's internal-context block)."""
    for m in reversed(body.get("messages") or []):
        if isinstance(m, dict) and m.get("role") == "user":
            text = message_text(m)
            if not text.startswith(INTERNAL_CONTEXT):
                return user_words(text)
    return ""


def problem() -> Optional[str]:
    """Why the harness cannot run here (None: it can)."""
    why = install_clis.ensure_openclaw()
    if why:
        return why
    return netns.problem()


def base_config(root: Path, users: Iterable[int], *, dm_scope: Optional[str] = "per-channel-peer") -> dict:
    """The smallest openclaw.json that starts a gateway with Telegram and the fake model."""
    cfg: dict = {
        "gateway": {"mode": "local", "port": GATEWAY_PORT, "bind": "loopback",
                    "auth": {"mode": "token", "token": "leanctx-e2e-gateway-token"}},
        "agents": {"defaults": {"model": {"primary": f"{PROVIDER}/{MODEL}"},
                                "workspace": str(root / "home" / "workspace"),
                                "heartbeat": {"every": "0m"}}},  # no turns the test did not ask for
        "models": {"mode": "replace", "providers": {PROVIDER: {
            "baseUrl": f"http://127.0.0.1:{MODEL_PORT}/v1", "apiKey": "fake-local", "api": "openai-completions",
            "timeoutSeconds": 600,
            "models": [{"id": MODEL, "name": "Fake model", "reasoning": False, "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": 128000, "maxTokens": 4096}]}}},
        "channels": {"telegram": {"enabled": True, "botToken": BOT_TOKEN, "apiRoot": f"http://127.0.0.1:{TG_PORT}",
                                  "dmPolicy": "allowlist", "allowFrom": [str(u) for u in users],
                                  "streaming": {"mode": "off"}}},
        "plugins": {"entries": {p: {"enabled": False} for p in UNNEEDED_PLUGINS}},
        "logging": {"file": str(root / "openclaw.log")},
    }
    if dm_scope:
        cfg["session"] = {"dmScope": dm_scope}
    return cfg


def _descendants(root: int) -> list:
    """Pids of every live descendant of ``root`` (from /proc)."""
    parent: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = [], [root]
    while frontier:
        kids = [p for p, pp in parent.items() if pp in frontier]
        found += kids
        frontier = kids
    return found


PROBE_PLUGIN = Path(__file__).resolve().parent / "openclaw_probe"
PROBE_ID = "leanctx-e2e-probe"


def add_probe(cfg: dict, out: Path) -> None:
    """Load the test-only hook probe plugin (tests/e2e/openclaw_probe), logging to ``out``."""
    plugins = cfg.setdefault("plugins", {})
    paths = plugins.setdefault("load", {}).setdefault("paths", [])
    paths.append(str(PROBE_PLUGIN))
    plugins.setdefault("entries", {})[PROBE_ID] = {
        "enabled": True, "hooks": {"allowConversationAccess": True}, "config": {"out": str(out)}}


class OpenClawHarness:
    def __init__(self, root: os.PathLike, *, users: Iterable[int] = USERS, dm_scope: Optional[str] = "per-channel-peer",
                 config: Optional[Mapping] = None, probe_hooks: bool = False, log_level: Optional[str] = None,
                 read_tool: Optional[str] = None) -> None:
        self.root = Path(root)
        self.users = tuple(users)
        self.home = self.root / "home"
        self.state_dir = self.home / ".openclaw"
        self.config_path = self.state_dir / "openclaw.json"
        self.workspace = self.home / "workspace"
        for d in (self.state_dir, self.workspace):
            d.mkdir(parents=True, exist_ok=True)
        # unix socket paths must stay under 108 bytes: a short temp dir, not the (deep) test root
        self._sock_dir = sock_dir = Path(tempfile.mkdtemp(prefix="oc-"))
        self.telegram = FakeTelegram(BOT_TOKEN, unix_path=str(sock_dir / "telegram.sock")).start()
        self.model = EchoChat(extract=turn_text, unix_path=str(sock_dir / "model.sock"), read_tool=read_tool).start()
        cfg = dict(config) if config is not None else base_config(self.root, self.users, dm_scope=dm_scope)
        self.probe_path = self.root / "hook-events.jsonl"
        if probe_hooks:
            add_probe(cfg, self.probe_path)
        self.config_path.write_text(json.dumps(cfg, indent=2) + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP_ENV_PREFIXES)}
        path = os.pathsep.join([str(install_clis.node24_bin()), os.path.dirname(install_clis.openclaw_bin()),
                                env.get("PATH", "")])
        env.update(HOME=str(self.home), PATH=path,
                   OPENCLAW_OFFLINE="1", OPENCLAW_DISABLE_BONJOUR="1", OPENCLAW_NO_AUTO_UPDATE="1")
        if log_level:
            env["OPENCLAW_LOG_LEVEL"] = log_level
        self.env = env
        self.proc: Optional[subprocess.Popen] = None
        self.runs = 0
        self.startup_seconds: list = []
        self._seen: dict = {u: 0 for u in self.users}  # per chat: bot messages already returned by reply()

    # ---- gateway lifecycle ---------------------------------------------------------------------
    @property
    def log_path(self) -> Path:
        return self.root / f"gateway-{self.runs}.log"

    def gateway_argv(self) -> list:
        return [install_clis.openclaw_bin(), "gateway", "run"]

    def start(self, timeout: float = 180.0) -> float:
        """Start the gateway; returns once it has made a getUpdates poll (seconds it took)."""
        assert self.proc is None or self.proc.poll() is not None, "gateway already running"
        self.runs += 1
        polls = self.telegram.polls
        argv = netns.wrap({TG_PORT: self.telegram.unix_path, MODEL_PORT: self.model.unix_path}, self.gateway_argv())
        t0 = time.monotonic()
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, env=self.env, cwd=str(self.workspace), stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = t0 + timeout
        while self.telegram.polls <= polls:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode} before polling:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill9()
                raise TimeoutError(f"gateway did not poll Telegram within {timeout:g} s:\n{self.log_tail()}")
            try:
                self.telegram.wait_poll(polls, timeout=0.2)
            except TimeoutError:
                pass
        took = time.monotonic() - t0
        self.startup_seconds.append(took)
        return took

    def kill9(self) -> None:
        """SIGKILL the gateway and everything it started (its process group and any descendant in a
        session of its own), then reap it."""
        if self.proc is None:
            return
        family = _descendants(self.proc.pid)  # some helpers run in a session of their own
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in family:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)

    def stop_gateway(self, timeout: float = 120.0) -> float:
        """A clean stop, as a redeploy does it (SIGTERM, as systemd sends): the gateway drains and
        exits; whatever is still alive after `timeout` is killed. Returns the seconds it took.
        Unclean boots (kill -9) count toward OpenClaw's crash-loop breaker (3 within 5 minutes
        keep the channels down on the next start), clean ones do not."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        took = time.monotonic() - t0
        self.kill9()  # descendants a clean stop left behind, if any
        return took

    def settle(self, timeout: float = 120.0) -> None:
        """Wait until the gateway has finished its turns: no Telegram update left in its ingress
        queue and no outbound reply whose delivery it has not recorded yet (read from its state
        database, read-only). A kill -9 "between turns" means settle() then kill9(): killed right
        after a reply reached Telegram but before OpenClaw recorded it, the reply stays in state
        ``send_attempt_started``, and the next run will not resend it nor cleanly answer that chat."""
        import sqlite3

        db = self.state_dir / "state" / "openclaw.sqlite"
        deadline = time.monotonic() + timeout
        while True:
            busy = None
            if db.exists():
                try:
                    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
                    try:
                        busy = con.execute(
                            "SELECT (SELECT count(*) FROM delivery_queue_entries WHERE status = 'pending')"
                            " + (SELECT count(*) FROM channel_ingress_events"
                            " WHERE status NOT IN ('completed', 'failed'))").fetchone()[0]
                    finally:
                        con.close()
                except sqlite3.Error as e:
                    busy = f"state database not readable: {e}"
            if not busy:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"gateway not settled within {timeout:g} s ({busy})")
            time.sleep(0.2)

    def restart(self, timeout: float = 180.0) -> float:
        self.kill9()
        return self.start(timeout)

    def stop(self) -> None:
        """End the gateway (SIGKILL: tests do not depend on a graceful shutdown) and the fakes."""
        self.kill9()
        self.model.release()
        self.telegram.stop()
        self.model.stop()
        shutil.rmtree(self._sock_dir, ignore_errors=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    # ---- talking -------------------------------------------------------------------------------
    def send(self, user: int, text: str) -> int:
        """A private message from ``user`` to the bot; returns its Telegram message_id."""
        return self.telegram.post_message(user, text)

    def reply(self, user: int, timeout: float = 90.0) -> str:
        """The next bot message in ``user``'s chat not returned before (waits for it)."""
        n = self._seen.setdefault(user, 0)
        texts = self.telegram.wait_replies(user, n + 1, timeout)
        self._seen[user] = n + 1
        return texts[n]

    def replies(self, user: int) -> list:
        return self.telegram.replies(user)

    def hook_events(self, hook: Optional[str] = None) -> list:
        """What the probe plugin logged (``probe_hooks=True``): dicts with hook, pid, ctx, event."""
        try:
            lines = self.probe_path.read_text().splitlines()
        except OSError:
            return []
        events = [json.loads(line) for line in lines if line.strip()]
        return [e for e in events if hook is None or e["hook"] == hook]

    def sessions(self) -> dict:
        """session key -> current session id, from the main agent's state database (read-only)."""
        import sqlite3

        db = self.state_dir / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
        if not db.exists():
            return {}
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return dict(con.execute("SELECT session_key, current_session_id FROM session_nodes").fetchall())
        finally:
            con.close()

    def model_requests(self) -> list:
        """Every main (agent turn) request body the fake model answered, in order."""
        return self.model.main_requests

    def stall_next_model_request(self) -> None:
        self.model.stall_next()

    def wait_stalled(self, timeout: float = 90.0) -> dict:
        return self.model.wait_stalled(timeout)

    def release(self) -> None:
        self.model.release()

    def __enter__(self) -> "OpenClawHarness":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
