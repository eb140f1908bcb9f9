"""The fake Telegram Bot API keeps Telegram's getUpdates contract (the OpenClaw harness relies on
it to tell a redelivered update from a new one)."""
from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

from tests.e2e.fake_telegram import FakeTelegram


def call(tg: FakeTelegram, method: str, **params):
    req = urllib.request.Request(f"{tg.api_root}/bot{tg.token}/{method}", data=json.dumps(params).encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


def test_offset_confirms_and_unconfirmed_updates_come_again():
    with FakeTelegram() as tg:
        m1 = tg.post_message(1001, "one")
        tg.post_message(1002, "two")
        got = call(tg, "getUpdates", timeout=0)["result"]
        assert [u["message"]["text"] for u in got] == ["one", "two"]
        assert got[0]["message"]["message_id"] == m1 and got[0]["message"]["chat"]["id"] == 1001
        # not confirmed yet: handed out again (what a bot killed before confirming sees on restart)
        assert [u["update_id"] for u in call(tg, "getUpdates", timeout=0)["result"]] == [u["update_id"] for u in got]
        # offset = last update_id + 1 confirms both
        assert call(tg, "getUpdates", offset=got[1]["update_id"] + 1, timeout=0)["result"] == []
        assert tg.pending_updates() == []


def test_long_poll_waits_for_a_message_and_a_newer_poll_ends_the_older_one():
    with FakeTelegram() as tg:
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", call(tg, "getUpdates", timeout=20)))
        t.start()
        tg.wait_poll(0, timeout=10)
        tg.post_message(1001, "late")
        t.join(15)
        assert [u["message"]["text"] for u in out["r"]["result"]] == ["late"]

        t2 = threading.Thread(target=lambda: out.__setitem__("old", call(tg, "getUpdates", offset=10**10, timeout=20)))
        t2.start()
        tg.wait_poll(1, timeout=10)
        assert call(tg, "getUpdates", offset=10**10, timeout=0)["result"] == []
        t2.join(15)
        assert out["old"]["error_code"] == 409


def test_bot_messages_are_what_the_user_sees():
    with FakeTelegram() as tg:
        assert call(tg, "getMe")["result"]["is_bot"] is True
        r = call(tg, "sendMessage", chat_id=1001, text="<b>hi</b> &amp; bye", parse_mode="HTML")["result"]
        call(tg, "editMessageText", chat_id=1001, message_id=r["message_id"], text="hello")
        assert tg.replies(1001) == ["hello"] and tg.messages(1001)[0].edits == ["hi & bye"]
        assert call(tg, "getUpdates", timeout=0)["ok"] and call(tg, "someNewMethod")["ok"]
        assert tg.unknown_methods == [("someNewMethod", {})]
