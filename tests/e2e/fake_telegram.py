"""A fake Telegram Bot API server, enough for a real bot (OpenClaw's grammY long poller) to talk
to two users offline.

Usage::

    tg = FakeTelegram(token="123:abc").start()              # TCP on 127.0.0.1, or unix_path=...
    mid = tg.post_message(1001, "hello")                    # user 1001 writes in a private chat
    tg.wait_replies(1001, 1, timeout=60)                    # the bot's texts in chat 1001
    tg.calls                                                # every (method, params) the bot made

The bot is configured with ``apiRoot`` = ``tg.api_root`` and calls ``<root>/bot<TOKEN>/<method>``.
State (queued updates, the confirmed offset, what the bot sent) lives here, so it survives any
number of restarts of the bot.

``getUpdates`` follows Telegram: ``offset`` confirms (drops) every update whose ``update_id`` is
below it, a negative ``offset`` keeps only the last ``-offset`` updates, ``limit`` caps the batch,
and an empty queue holds the request up to ``timeout`` seconds. A newer ``getUpdates`` ends a
pending one with 409 Conflict, as Telegram does. Unconfirmed updates are given again to the next
poll (so an update handed to a bot killed before it confirmed is redelivered). Unknown methods are
logged (``unknown_methods``) and answered ``ok: true, result: true``.
"""
from __future__ import annotations

import html
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeTelegram", "BotMessage"]


@dataclass
class BotMessage:
    """One message the bot sent; ``text`` is its current text (after edits), ``edits`` the earlier ones."""

    chat_id: int
    message_id: int
    text: str
    method: str
    at: float
    edits: list = field(default_factory=list)
    deleted: bool = False
    params: dict = field(default_factory=dict)


class FakeTelegram:
    def __init__(self, token: str = "123456789:TEST-fake-token", *, bot_id: int = 7000000001,
                 bot_username: str = "leanctx_e2e_bot", host: str = "127.0.0.1", port: int = 0,
                 unix_path: Optional[str] = None) -> None:
        self.token = token
        self.bot = {"id": bot_id, "is_bot": True, "first_name": "LeanctxE2E", "username": bot_username,
                    "can_join_groups": True, "can_read_all_group_messages": False,
                    "supports_inline_queries": False, "can_connect_to_business": False,
                    "has_main_web_app": False, "has_topics_enabled": False}
        self._host, self._port, self.unix_path = host, port, unix_path
        self._cond = threading.Condition()
        self._updates: list = []  # unconfirmed updates, ascending update_id
        self._next_update_id = 500000001
        self._next_msg: dict = {}  # chat id -> next message_id
        self.sent: list = []  # BotMessage, in order
        self.calls: list = []  # (time, method, params)
        self.unknown_methods: list = []
        self.polls = 0  # getUpdates requests received
        self.delivered: list = []  # (update_id, poll number) each time an update was handed out
        self._poll_gen = 0
        self._server: Any = None

    # ---- what a test does ----------------------------------------------------------------------
    def post_message(self, user_id: int, text: str, *, first_name: Optional[str] = None) -> int:
        """A private-chat text message from ``user_id`` (chat id = user id); returns its message_id."""
        with self._cond:
            mid = self._msg_id(user_id)
            user = {"id": user_id, "is_bot": False, "first_name": first_name or f"User{user_id}",
                    "username": f"user{user_id}", "language_code": "en"}
            chat = {"id": user_id, "type": "private", "first_name": user["first_name"], "username": user["username"]}
            update = {"update_id": self._next_update_id,
                      "message": {"message_id": mid, "from": user, "chat": chat, "date": int(time.time()),
                                  "text": text}}
            self._next_update_id += 1
            self._updates.append(update)
            self._cond.notify_all()
            return mid

    def replies(self, chat_id: int) -> list:
        """The current texts of the bot's messages in ``chat_id`` (not deleted), in order."""
        with self._cond:
            return [m.text for m in self.sent if m.chat_id == chat_id and not m.deleted]

    def messages(self, chat_id: Optional[int] = None) -> list:
        with self._cond:
            return [m for m in self.sent if chat_id is None or m.chat_id == chat_id]

    def pending_updates(self) -> list:
        """Updates the bot has not confirmed yet."""
        with self._cond:
            return list(self._updates)

    def methods(self) -> list:
        with self._cond:
            return [c[1] for c in self.calls]

    def wait(self, predicate: Callable[[], Any], timeout: float, what: str = "condition") -> Any:
        """Wait until ``predicate()`` (called under the lock) is truthy; returns it, or raises TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = predicate()
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"fake Telegram: no {what} within {timeout:g} s")
                self._cond.wait(min(left, 1.0))

    def wait_replies(self, chat_id: int, count: int, timeout: float = 60.0) -> list:
        def got():
            r = [m.text for m in self.sent if m.chat_id == chat_id and not m.deleted]
            return r if len(r) >= count else None
        return self.wait(got, timeout, f"{count} bot message(s) in chat {chat_id}")

    def wait_poll(self, after: int, timeout: float = 60.0) -> int:
        """Wait until a getUpdates beyond the ``after``-th one arrives; returns the poll count."""
        return self.wait(lambda: self.polls if self.polls > after else None, timeout, "getUpdates poll")

    # ---- lifecycle -------------------------------------------------------------------------------
    @property
    def api_root(self) -> str:
        assert self._server is not None and self.unix_path is None, "TCP server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> "FakeTelegram":
        handler = _make_handler(self)
        if self.unix_path:
            from tests.e2e.netns import UnixHTTPServer, unix_handler

            self._server = UnixHTTPServer(self.unix_path, unix_handler(handler))
        else:
            self._server = ThreadingHTTPServer((self._host, self._port), handler)
            self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-telegram", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            with self._cond:
                self._poll_gen += 1
                self._cond.notify_all()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeTelegram":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- Bot API ---------------------------------------------------------------------------------
    def _msg_id(self, chat_id: int) -> int:
        n = self._next_msg.get(chat_id, 1)
        self._next_msg[chat_id] = n + 1
        return n

    def _chat(self, chat_id: Any) -> dict:
        try:
            cid = int(chat_id)
        except (TypeError, ValueError):
            cid = 0
        return {"id": cid, "type": "private" if cid > 0 else "supergroup", "first_name": f"User{cid}"}

    def _get_updates(self, params: dict) -> tuple:
        offset = _int(params.get("offset"), 0)
        limit = max(1, min(100, _int(params.get("limit"), 100)))
        timeout = max(0, _int(params.get("timeout"), 0))
        deadline = time.monotonic() + timeout
        with self._cond:
            self.polls += 1
            self._poll_gen += 1
            gen = self._poll_gen
            poll_no = self.polls
            self._cond.notify_all()  # an older pending poll ends in 409
            if offset > 0:
                self._updates = [u for u in self._updates if u["update_id"] >= offset]
            elif offset < 0:
                self._updates = self._updates[offset:]
            while True:
                if gen != self._poll_gen:
                    return 409, {"ok": False, "error_code": 409,
                                 "description": "Conflict: terminated by other getUpdates request; "
                                                "make sure that only one bot instance is running"}
                batch = self._updates[:limit]
                left = deadline - time.monotonic()
                if batch or left <= 0:
                    for u in batch:
                        self.delivered.append((u["update_id"], poll_no))
                    return 200, {"ok": True, "result": batch}
                self._cond.wait(min(left, 1.0))

    def _call(self, method: str, p: dict) -> tuple:
        m = method.lower()
        if m == "getupdates":
            return self._get_updates(p)
        with self._cond:
            self.calls.append((time.time(), method, p))
            self._cond.notify_all()
            if m == "getme":
                return 200, {"ok": True, "result": self.bot}
            if m == "sendmessage":
                chat_id = _int(p.get("chat_id"), 0)
                mid = self._msg_id(chat_id)
                text = shown_text(p)
                self.sent.append(BotMessage(chat_id, mid, text, method, time.time(), params=p))
                self._cond.notify_all()
                return 200, {"ok": True, "result": {"message_id": mid, "from": self.bot, "chat": self._chat(chat_id),
                                                    "date": int(time.time()), "text": text}}
            if m == "editmessagetext":
                chat_id, mid = _int(p.get("chat_id"), 0), _int(p.get("message_id"), 0)
                for msg in self.sent:
                    if msg.chat_id == chat_id and msg.message_id == mid:
                        if msg.text == shown_text(p):
                            return 400, {"ok": False, "error_code": 400, "description":
                                         "Bad Request: message is not modified: specified new message content "
                                         "and reply markup are exactly the same as a current content and reply "
                                         "markup of the message"}
                        msg.edits.append(msg.text)
                        msg.text = shown_text(p)
                        self._cond.notify_all()
                        return 200, {"ok": True, "result": {"message_id": mid, "from": self.bot,
                                                            "chat": self._chat(chat_id), "date": int(msg.at),
                                                            "edit_date": int(time.time()), "text": msg.text}}
                return 400, {"ok": False, "error_code": 400, "description": "Bad Request: message to edit not found"}
            if m in ("deletemessage", "deletemessages"):
                chat_id = _int(p.get("chat_id"), 0)
                ids = p.get("message_ids") or [p.get("message_id")]
                ids = {_int(i, 0) for i in (ids if isinstance(ids, list) else [ids])}
                for msg in self.sent:
                    if msg.chat_id == chat_id and msg.message_id in ids:
                        msg.deleted = True
                self._cond.notify_all()
                return 200, {"ok": True, "result": True}
            if m == "getwebhookinfo":
                return 200, {"ok": True, "result": {"url": "", "has_custom_certificate": False,
                                                    "pending_update_count": len(self._updates)}}
            if m in ("getmycommands",):
                return 200, {"ok": True, "result": []}
            if m == "getchat":
                return 200, {"ok": True, "result": self._chat(p.get("chat_id"))}
            if m in ("deletewebhook", "setmycommands", "deletemycommands", "sendchataction", "setmessagereaction",
                     "setmydescription", "setmyshortdescription", "setchatmenubutton", "sendmessagedraft",
                     "answercallbackquery", "setmyname", "close", "logout"):
                return 200, {"ok": True, "result": True}
            self.unknown_methods.append((method, p))
            return 200, {"ok": True, "result": True}


def shown_text(params: dict) -> str:
    """The text a user sees for a sendMessage/editMessageText call: HTML markup (``parse_mode``
    HTML) rendered to plain text, as Telegram does; other modes are kept as sent."""
    text = str(params.get("text", ""))
    if str(params.get("parse_mode", "")).lower() == "html":
        return html.unescape(re.sub(r"<[^>]*>", "", text))
    return text


def _int(v: Any, default: int) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _make_handler(tg: FakeTelegram) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def _params(self) -> dict:
            url = urlsplit(self.path)
            params = {k: v[-1] for k, v in parse_qs(url.query).items()}
            n = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(n) if n else b""
            ctype = (self.headers.get("content-type") or "").lower()
            if raw and "json" in ctype:
                try:
                    body = json.loads(raw)
                    if isinstance(body, dict):
                        params.update(body)
                except ValueError:
                    pass
            elif raw and "x-www-form-urlencoded" in ctype:
                params.update({k: v[-1] for k, v in parse_qs(raw.decode()).items()})
            elif raw and "multipart/form-data" in ctype:
                params["_multipart_bytes"] = len(raw)
            for k in ("chat_id", "message_id", "offset", "limit", "timeout"):
                if isinstance(params.get(k), str) and params[k].lstrip("-").isdigit():
                    params[k] = int(params[k])
            return params

        def _answer(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the bot went away (killed) while its poll was held
                self.close_connection = True

        def _handle(self) -> None:
            params = self._params()
            parts = urlsplit(self.path).path.strip("/").split("/")
            if len(parts) < 2 or not parts[-2].startswith("bot"):
                return self._answer(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            if parts[-2][3:] != tg.token:
                return self._answer(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
            status, obj = tg._call(parts[-1], params)
            self._answer(status, obj)

        do_GET = do_POST = _handle

    return Handler
