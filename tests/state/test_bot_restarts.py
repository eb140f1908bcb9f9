"""A bot that restarts keeps one thread: through the installed hook wrapper with recorded Claude
payloads and the real `leanctx state` command.

- resumed restarts (SessionStart source=resume) of a session whose transcript already holds the
  thread get only the open question, never another `[leanctx conversation state]` block (Claude
  Code keeps each one in the transcript, so they stacked without bound);
- kill -9 inside the turn that saved a question, then the chat layer redelivers the message: that
  message is not the answer (the user never saw the question), it is recorded once, and the later
  real answer is the one kept in `last_answer`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from leanctx.installer import wrapper
from leanctx.state import api
from tests.conftest import PAYLOADS, run_cli

USER = "tg:4242"
BLOCK = "[leanctx conversation state]"


class Bot:
    """The `init --bot` Claude hooks as Claude Code runs them, for one user."""

    def __init__(self, data: Path, **env: str) -> None:
        self.data = data
        self.path = wrapper.wrapper_path(data)
        self.path.parent.mkdir(parents=True)
        self.path.write_text(wrapper.render(data))
        self.path.chmod(0o755)
        self.env = {k: v for k, v in os.environ.items() if k != "CKS_ACTIVE_USER"} | (env or {"CKS_ACTIVE_USER": USER})

    def fire(self, event: str, session: str, **fields: str) -> str:
        payload = json.loads((PAYLOADS / "claude" / f"{event}.json").read_text()) | {"session_id": session} | fields
        proc = subprocess.run(["/bin/sh", "-c", wrapper.command(self.path, "claude", event, ("--bot",))],
                              input=json.dumps(payload).encode(), capture_output=True, env=self.env, timeout=60)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
        out = proc.stdout.decode()
        return json.loads(out)["hookSpecificOutput"]["additionalContext"] if out.strip() else ""

    def ask(self, question: str, *options: str) -> None:
        """What the model does through Bash: `leanctx state pending`."""
        args = [a for o in options for a in ("--option", o)]
        proc = run_cli("state", "pending", "--question", question, *args, env=self.env)
        assert proc.returncode == 0, proc.stderr

    def state(self) -> dict:
        proc = run_cli("state", "show", "--json", env=self.env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)


@pytest.fixture
def bot(cks_home: Path, tmp_path: Path) -> Bot:
    return Bot(tmp_path / "data")


def test_five_resumed_restarts_send_exactly_one_block(bot: Bot) -> None:
    bot.fire("UserPromptSubmit", "old", prompt="hi, I run a bakery")  # an earlier session's thread
    bot.fire("Stop", "old", last_assistant_message="Hello! How can I help?")
    outputs = [bot.fire("SessionStart", "S", source="startup")]
    outputs.append(bot.fire("UserPromptSubmit", "S", prompt="I'd like to subscribe"))
    bot.ask("Which plan?", "basic", "pro")
    outputs.append(bot.fire("Stop", "S", last_assistant_message="Which plan? basic or pro"))
    resumes = []
    for _ in range(5):  # kill -9 between turns, restart with resume=S
        resumes.append(bot.fire("SessionStart", "S", source="resume"))
    outputs += resumes
    assert sum(out.count(BLOCK) for out in outputs) == 1
    for out in resumes:  # what the transcript lacks still reaches the model
        assert "PENDING QUESTION" in out and "Which plan?" in out and "bakery" not in out
    answer = bot.fire("UserPromptSubmit", "S", prompt="pro")
    assert "answers your pending question" in answer and '"pro"' in answer
    after = bot.fire("SessionStart", "S", source="resume")
    assert BLOCK not in after and "answered your earlier question" in after and "PENDING" not in after
    state = bot.state()
    assert state["pending"] is None and state["last_answer"]["answer"] == "pro"


def test_resume_still_gets_the_whole_thread_when_the_transcript_lacks_it(bot: Bot) -> None:
    """Compaction summarised the transcript; another session recorded turns since; a resumed
    session with no recorded turn: each gets the full block."""
    bot.fire("UserPromptSubmit", "S", prompt="I'd like to subscribe")
    bot.fire("Stop", "S", last_assistant_message="Sure, which plan?")
    assert BLOCK in bot.fire("SessionStart", "S", source="compact")
    assert BLOCK in bot.fire("SessionStart", "never-recorded", source="resume")
    bot.fire("UserPromptSubmit", "T", prompt="actually, cancel")
    assert BLOCK in bot.fire("SessionStart", "S", source="resume")
    assert BLOCK not in bot.fire("SessionStart", "T", source="resume")


def test_a_crash_mid_turn_and_redelivery_record_the_real_answer(bot: Bot) -> None:
    """The exact sequence of the SDK run: the model saved the question, then kill -9 before the
    reply reached the user; the chat layer sends the original message again in a fresh session."""
    bot.fire("SessionStart", "A", source="startup")
    bot.fire("UserPromptSubmit", "A", prompt="I'd like to subscribe")
    bot.ask("Which plan?", "basic", "pro")
    # kill -9: no Stop. The restart is a fresh session; the message comes again.
    bot.fire("SessionStart", "B", source="startup")
    again = bot.fire("UserPromptSubmit", "B", prompt="I'd like to subscribe")
    assert "answers your pending question" not in again
    state = bot.state()
    assert state["pending"] is None and state["last_answer"] is None
    assert [t["text"] for t in state["recent_turns"]] == ["I'd like to subscribe"]
    bot.ask("Which plan?", "basic", "pro")  # the redone turn asks again, and this time it is sent
    bot.fire("Stop", "B", last_assistant_message="Which plan? basic or pro")
    answer = bot.fire("UserPromptSubmit", "B", prompt="pro")
    assert "answers your pending question" in answer and "which is the option" in answer
    state = bot.state()
    assert state["pending"] is None
    assert state["last_answer"]["question"] == "Which plan?" and state["last_answer"]["answer"] == "pro"
    assert [(t["role"], t["text"]) for t in state["recent_turns"]] == [
        ("user", "I'd like to subscribe"), ("agent", "Which plan? basic or pro"), ("user", "pro")]


def test_a_stop_without_reply_text_arms_the_question(bot: Bot) -> None:
    bot.fire("UserPromptSubmit", "A", prompt="I'd like to subscribe")
    bot.ask("Which plan?", "basic", "pro")
    payload = json.loads((PAYLOADS / "claude" / "Stop.json").read_text())
    del payload["last_assistant_message"]
    proc = subprocess.run(["/bin/sh", "-c", wrapper.command(bot.path, "claude", "Stop", ("--bot",))],
                          input=json.dumps(payload).encode(), capture_output=True, env=bot.env, timeout=60)
    assert proc.returncode == 0
    assert "answers your pending question" in bot.fire("UserPromptSubmit", "A", prompt="basic")
    assert bot.state()["last_answer"]["answer"] == "basic"


def test_a_question_set_between_turns_is_answerable_at_once(cks_home: Path) -> None:
    """A bot on the API that records the reply first and then the question (or has no turns yet)."""
    api.set_pending("Which plan?", ["basic", "pro"], user=USER)
    assert api.inbound("pro", user=USER)["answered"]["answer"] == "pro"
    api.reply("Which size?", user=USER)
    api.set_pending("Which size?", user=USER)
    assert api.inbound("large", user=USER)["answered"]["answer"] == "large"


def test_a_redelivered_message_id_is_recorded_once(cks_home: Path) -> None:
    first = api.inbound("yes", user=USER, message_id="m-1")
    api.reply("Done.", user=USER)
    again = api.inbound("yes", user=USER, message_id="m-1")
    assert again["answered"] is None and again["state"]["turn_count"] == first["state"]["turn_count"] + 1
    other = api.inbound("yes", user=USER, message_id="m-2")  # same text, another message
    assert other["state"]["turn_count"] == 3
    assert [t.get("message_id") for t in other["state"]["recent_turns"]] == ["m-1", None, "m-2"]


def test_the_state_cli_records_a_redelivered_message_once(bot: Bot) -> None:
    """A bot without hooks drives the same protocol from a shell: inbound / pending / reply."""
    def state_cli(*args: str) -> subprocess.CompletedProcess:
        proc = run_cli("state", *args, env=bot.env)
        assert proc.returncode == 0, proc.stderr
        return proc

    state_cli("inbound", "I'd like to subscribe", "--message-id", "tg-1")
    assert "after this turn's reply" in state_cli("pending", "--question", "Which plan?", "--option", "pro").stdout
    assert state_cli("inbound", "I'd like to subscribe", "--message-id", "tg-1").stdout == ""  # crash, redelivery
    state_cli("pending", "--question", "Which plan?", "--option", "pro")
    state_cli("reply", "Which plan? basic or pro")
    out = json.loads(state_cli("inbound", "pro", "--message-id", "tg-2", "--json").stdout)
    assert out["answered"]["answer"] == "pro" and "answers your pending question" in out["answer_context"]
    state = bot.state()
    assert state["last_answer"]["answer"] == "pro" and state["turn_count"] == 3
    bad = run_cli("state", "inbound", "x", "--message-id", "", env=bot.env)
    assert bad.returncode == 0 and bad.stderr == ""  # an empty id is no id


def test_the_same_text_twice_in_one_session_is_two_turns(cks_home: Path) -> None:
    """Without message ids only a repeat sent to another (restarted) session is a redelivery."""
    api.inbound("yes", user=USER, session_id="S")
    assert api.inbound("yes", user=USER, session_id="S")["state"]["turn_count"] == 2
    assert api.inbound("yes", user=USER, session_id="T")["state"]["turn_count"] == 2
    assert api.inbound("yes", user=USER)["state"]["turn_count"] == 3  # no session, no id: nothing to go by
