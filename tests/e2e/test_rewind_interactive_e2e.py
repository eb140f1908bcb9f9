"""End to end: the interactive `/rewind` of the real Claude Code, in a pseudo-terminal, offline.

The terminal UI reads `ctx_read` content in one turn, answers two more, then `/rewind` (or Esc
Esc on the empty input box: the same picker) goes back to the point before the message that asked for the read and
restores the conversation only. The session id stays, no hook fires, and the read is no longer in
the context; the message comes back into the input box and is sent again. The read it makes must
be the content, not an `[unchanged]` stub: the transcript's `parentUuid` chain no longer holds
the earlier `tool_result`.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_anthropic import FakeAnthropic, tool_use
from tests.e2e.test_cache_e2e import READ, tool_results
from tests.e2e.tty import ENTER, ESC, UP, Terminal

pytestmark = pytest.mark.e2e

RULE = r"─{20,}"
EMPTY_INPUT = rf"{RULE}\n❯\n{RULE}"
BUSY = r"esctointerrupt|runningstophook"  # the footer and spinner while a turn runs (2.1.197, 2.1.332)


def converse(term: Terminal, exchanges) -> None:  # noqa: ANN001
    """Each (prompt, answer): submit the prompt, wait for the scripted answer and for the turn to end."""
    for prompt, answer in exchanges:
        term.submit(prompt)
        term.wait_for(answer)
        term.wait_for(EMPTY_INPUT, absent=BUSY)


@pytest.fixture
def interactive(host_home, lean):
    lean.run("init", "--agent", "claude")
    (host_home.proj / "big.py").write_text("".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200)))
    # what a user has done once before: onboarding, the custom API key approved, the folder trusted
    config = host_home.home / ".claude.json"
    data = json.loads(config.read_text()) if config.exists() else {}
    key = hostcli.claude_env(host_home.home, "http://127.0.0.1:9")["ANTHROPIC_API_KEY"]
    data.update({"hasCompletedOnboarding": True,
                 "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                 "projects": {str(host_home.proj): {"hasTrustDialogAccepted": True,
                                                    "hasCompletedProjectOnboarding": True}}})
    config.write_text(json.dumps(data, indent=2))
    yield host_home
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def full(result: str) -> bool:
    return "def function_199" in result


def open_with_command(term: Terminal) -> None:
    term.submit("/rewind")


def open_with_esc_esc(term: Terminal) -> None:
    term.send(ESC)
    time.sleep(0.2)  # pacing only: two separate key presses, not one escape sequence
    term.send(ESC)


@pytest.mark.parametrize("open_picker", [open_with_command, open_with_esc_esc], ids=["/rewind", "esc-esc"])
def test_after_an_interactive_rewind_the_lost_read_is_full_again(claude_cli, interactive, lean, open_picker):
    hh = interactive
    script = ["ANSWER-ONE", tool_use(READ, {"path": "big.py"}), "ANSWER-TWO", "ANSWER-THREE",
              tool_use(READ, {"path": "big.py"}), "ANSWER-FOUR"]
    with FakeAnthropic(script=script) as srv:
        env = hostcli.claude_env(hh.home, srv.base_url, {"TERM": "xterm-256color"})
        with Terminal([claude_cli, "--allowedTools", READ], cwd=hh.proj, env=env) as term:
            term.wait_for(EMPTY_INPUT, absent=BUSY)
            converse(term, (("say hello", "ANSWER-ONE"), ("read big.py", "ANSWER-TWO"), ("next one", "ANSWER-THREE")))
            open_picker(term)
            # the picker: the messages sent, each over "No code changes", then "(current)" selected
            term.wait_for(r"Entertocontinue")
            term.wait_for(r"❯\(current\)")
            term.send(UP)
            term.wait_for(r"❯nextone\nNocodechanges")
            term.send(UP)
            term.wait_for(r"❯readbig\.py\nNocodechanges")
            term.send(ENTER)
            term.wait_for(r"thismessage:\n│readbig\.py\n(.|\n)*❯1\.Restoreconversation")  # the message named, option 1 selected
            term.send(ENTER)
            # the conversation is back before that message, and the message is in the input box
            term.wait_for(rf"{RULE}\n❯readbig\.py\n{RULE}", absent=r"Restoreconversation|ANSWER-THREE")
            term.send(ENTER)
            term.wait_for("ANSWER-FOUR")
            term.wait_for(EMPTY_INPUT, absent=BUSY)
        bodies = srv.main_requests
    assert len(bodies) == 6, len(bodies)
    assert full(tool_results(bodies[2])[0])  # the read before the rewind: content
    after = bodies[5]  # the turn after the read made once the conversation was rewound
    rewound = json.dumps(bodies[4]["messages"])
    assert "ANSWER-ONE" in rewound and "ANSWER-TWO" not in rewound and "def function_199" not in rewound, \
        "the rewind did not drop the first read from the context"
    assert full(tool_results(after)[0]), f"a stub for content the rewound context lost: {tool_results(after)[0][:200]}"
    (transcript,) = [t for t in (hh.home / ".claude" / "projects").rglob("*.jsonl") if "subagents" not in t.parts]
    record = lean.only_record("claude")
    assert record["conversation_id"] == transcript.stem and record.get("compactions", 0) == 0  # no hook told us
