"""`leanctx state …` through click's runner, and once as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from leanctx.state.backend import Backend
from leanctx.state.cli import state
from leanctx.state.slug import slugify

from .conftest import raw_value


def run(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(state, list(args), input=input, catch_exceptions=False)


def test_pending_set_show_and_clear(store: Backend) -> None:
    r = run("pending", "--question", "Single-user or shared bot?", "--option", "single", "--option", "shared")
    assert r.exit_code == 0, r.output
    assert "next message is its answer" in r.output
    r = run("pending")
    assert r.output == "Pending since " + json.loads(raw_value(store, "local"))["pending"]["asked_ts"] + \
        ": Single-user or shared bot?\nOptions: single, shared\n"
    shown = json.loads(run("pending", "--json").output)
    assert shown["question"] == "Single-user or shared bot?" and shown["options"] == ["single", "shared"]
    assert "PENDING QUESTION" in run("show").output
    assert run("clear-pending").exit_code == 0
    assert run("pending").output == "No pending question.\n"
    assert json.loads(run("pending", "--json").output) is None


def test_show_summary_end_history_reset_and_list(store: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    from leanctx.state import api

    monkeypatch.setenv("CKS_ACTIVE_USER", "TG:42")
    api.inbound("how do I add the bot?", source="telegram")
    api.reply("Create it with BotFather.")
    assert run("summary", "Setting up the Telegram bot.").exit_code == 0
    assert run("summary").output == "Setting up the Telegram bot.\n"
    assert run("summary", "-", input="From stdin.\n").exit_code == 0
    slug = slugify("TG:42")
    assert run("summary", "--user", "TG:42").output == "From stdin.\n"
    assert run("summary", "--slug", slug).output == "From stdin.\n"
    assert run("summary", "--user", "tg-42").output == "No summary yet.\n"  # another user now
    assert run("active", "--feature", "telegram-setup").exit_code == 0
    out = run("show").output
    assert out.startswith(f"# {slug} (id TG:42): ") and "From stdin." in out and "user: how do I add the bot?" in out
    assert "Active work: feature telegram-setup" in out
    full = json.loads(run("show", "--json").output)
    assert full["user_slug"] == slug and full["user_id"] == "TG:42" and full["turn_count"] == 2
    rows = json.loads(run("list", "--json").output)
    assert rows == [{"id": "TG:42", "slug": slug, "user": slug, "revision": full["revision"], "turn_count": 2,
                     "pending": None, "last_updated": full["last_updated"], "corrupt_files": 0}]
    assert run("list").output.startswith(f"{slug} (id TG:42): revision ")
    out = run("end").output
    assert "conversation ended (2 turns, telegram)" in out and f"appended to the history of {slug}" in out
    assert "conversation ended" in run("history").output
    assert run("end").output.startswith("The thread was empty")
    assert run("reset", "--json").exit_code == 0
    assert run("show", "--user", "nobody").output.endswith("No conversation in progress.\n")


@pytest.mark.parametrize(("args", "message"), [
    (["pending", "--question", ""], "the question is empty"),
    (["pending", "--question", "q" * 1001], "at most 1000"),
    (["pending", "--question", "ok?", *sum((["--option", str(i)] for i in range(11)), [])], "11 options; at most 10"),
    (["pending", "--question", "ok?", "--option", "o" * 201], "at most 200"),
    (["pending", "--question", "ok?", "--option", " "], "an option is empty"),
    (["summary", "s" * 2001], "at most 2000"),
    (["active", "--feature", "f" * 201], "at most 200"),
    (["pending", "--user", "", "--question", "ok?"], "user id '' is empty"),
    (["show", "--user", " "], "user id ' ' is empty"),
    (["reset", "--user", "x" * 1025], "at most 1024"),
    (["reset", "--slug", "Ana"], "'Ana' is not a slug"),
    (["reset", "--slug", "a/b"], "is not a slug"),
    (["summary", "hi", "--slug", "ana", "--user", "ana"], "give a user id or a slug, not both"),
    (["pending", "--option", "a"], "--option needs --question"),
])
def test_bad_input_exits_2_and_writes_nothing(store: Backend, cks_home: Path, args: list[str], message: str) -> None:
    r = CliRunner().invoke(state, args)
    assert r.exit_code == 2, r.output
    assert message in r.output
    assert not cks_home.exists()
    assert store.list_users() == []


def test_a_real_process(cks_home: Path) -> None:
    cmd = [sys.executable, "-c", "from leanctx.state.cli import state; state()"]
    env = dict(os.environ, CKS_ACTIVE_USER="alice")
    p = subprocess.run([*cmd, "pending", "--question", "Which host?", "--option", "vps", "--option", "home"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    written = json.loads((cks_home / "user" / "alice" / "conversation-state.json").read_text())
    assert written["pending"]["options"] == ["vps", "home"]
    p = subprocess.run([*cmd, "pending", "--question", ""], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr == "leanctx: the question is empty\nleanctx: nothing was written.\n"
