"""End to end: Codex's shell reads under the read gate in the interactive Codex TUI, in a pseudo-terminal, offline.

The headless `codex exec` runs (test_codex_shell_read_e2e.py) are not the whole story: the TUI
runs its turns in an app-server (by default a background daemon it starts, with `--no-daemon` in
its own process), so the hooks run there, and it sends requests of its own (a thread title).
Four turns of a model that uses only `exec_command` and `apply_patch`: the content; an unchanged
re-read refused with the stub and an apply_patch edit right after it; after that edit a diff and
the content when it runs `cat` again; a stub, and the output when it runs the same command again
right after it. What the model got is read from the requests the fake model server received.

A new user of Codex 0.171.0 first gets, in a git repository, a folder trust screen ("Trust and
continue", saved as `[projects."<dir>"] trust_level = "trusted"`), then for `gpt-5.5` a model
upgrade notice ("Meet GPT-6 Sol"; "Use existing model" is saved under `[notice.model_migrations]`).
The first test answers both in the terminal; the second starts from a config that holds those
answers, like the Claude Code tests' onboarding flags. Both screens discard pending terminal input
as they open: a key pressed then is lost, or Codex exits with "Error: timed out discarding
buffered terminal input" (seen here). Hook trust is what `leanctx init --trust` wrote
(codex_trust_notes.md).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_openai import FakeOpenAI, default_classify, turn_metadata
from tests.e2e.test_codex_cache_e2e import output_text, read_call
from tests.e2e.test_codex_shell_read_e2e import LINES, MODEL, got, is_content, outputs, patch, shell, source, stop_daemon
from tests.e2e.tty import DOWN, ENTER, Terminal

pytestmark = pytest.mark.e2e

IDLE = r"›AskCodextodoanything\n(.*\n)?.*\?forshortcuts"  # the empty composer and its footer
READY = r"›AskCodextodoanything\nGPT-5\.5default·"  # the composer over the status line (model, effort, cwd)
BUSY = r"esctointerrupt"
TITLE = '{"title": "Read big file"}'


def answered(proj) -> str:  # noqa: ANN001
    """What Codex 0.171.0 writes into config.toml once a user trusted the folder and answered the
    "Meet GPT-6 Sol" notice for gpt-5.5 with "Use existing model"."""
    return f'[projects."{proj}"]\ntrust_level = "trusted"\n\n[notice.model_migrations]\n"gpt-5.5" = "gpt-6-sol"'


def classify(body: dict) -> str:
    """The TUI asks the model for a thread title in a thread of its own (turn metadata
    `thread_source: "thread_title"`, with a tool list): not a turn of the scripted conversation."""
    if turn_metadata(body).get("thread_source") == "thread_title":
        return "side"
    return default_classify(body)


def start(term: Terminal) -> None:
    """Wait until the session is ready: the composer over the model's status line (the composer
    shows first, while the session loads). The screens Codex shows a new user first are answered
    as a user would: the folder trust screen of a git repository ("Trust and continue"), then the
    model upgrade notice ("Use existing model")."""
    while True:
        shown = term.wait_for(rf"Trustandcontinue|Useexistingmodel|{READY}").group(0)
        if "Trustandcontinue" not in shown and "Useexistingmodel" not in shown:
            return
        time.sleep(1.5)  # pacing only: as such a screen opens, Codex discards pending input for up to 1 s
        if "Trustandcontinue" in shown:
            term.wait_for(r"›1\.Trustandcontinue")
            term.send(ENTER)
            term.wait_for(r"Useexistingmodel|GPT-5\.5default·", absent=r"Trustandcontinue")
        else:
            term.send(DOWN)
            term.wait_for(r"›2\.Useexistingmodel")
            term.send(ENTER)
            term.wait_for(READY, absent=r"Useexistingmodel")


def converse(term: Terminal, exchanges) -> None:  # noqa: ANN001
    """Each (prompt, answer): submit the prompt, wait for the scripted answer and for the turn to end."""
    for prompt, answer in exchanges:
        term.submit(prompt)
        term.wait_for(answer)
        term.wait_for(IDLE, absent=BUSY)


def stop_app_server_daemon(cli: str, hh, lean) -> None:  # noqa: ANN001
    """The TUI's background app-server outlives it (its own session): stop it the way Codex offers
    (`codex app-server daemon stop`); that leaves its updater loop running, which is ended by the
    pid Codex recorded for it. Then drop the copy of Codex it installed into CODEX_HOME/packages."""
    state = hh.codex_home / "app-server-daemon"
    subprocess.run([cli, "app-server", "daemon", "stop"], cwd=str(hh.proj), env=hostcli.codex_env(hh.home, lean.host_env),
                   capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    try:
        pid = int(json.loads((state / "daemon-updater.pid").read_text())["pid"])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            ours = str(hh.codex_home).encode() in f.read()
        if ours:
            os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    shutil.rmtree(hh.codex_home / "packages", ignore_errors=True)


@pytest.mark.parametrize("daemon", [True, False], ids=["app-server-daemon", "no-daemon"])
def test_tui_shell_read_stub_edit_right_after_diff_and_output_when_run_again(codex_cli, host_home, lean, daemon):
    hh = host_home
    big = hh.proj / "big.py"
    big.write_text(source())
    subprocess.run(["git", "init", "-q", str(hh.proj)], check=True, capture_output=True, timeout=60)  # the trust screen's case
    calls = {name: shell("cat big.py") for name in ("first", "stub", "diff", "again", "stub2", "rerun")}
    edit = patch("big.py", "    return x * 7", "    return x * 70")
    script = [
        calls["first"], "ANSWER-ONE",                  # content
        calls["stub"], edit, "ANSWER-TWO",             # unchanged: the stub; apply_patch right after it
        calls["diff"], calls["again"], "ANSWER-THREE",  # after the model's own edit a diff; run again: content
        calls["stub2"], calls["rerun"], "ANSWER-FOUR",  # unchanged: the stub; run again right after: output
    ]
    argv = [codex_cli, "--sandbox", "workspace-write"] + ([] if daemon else ["--no-daemon"])
    try:
        with FakeOpenAI(script=script, classify=classify, side_text=TITLE) as srv:
            hostcli.write_codex_config(hh.home, srv.base_url, model=MODEL)
            lean.run("init", "--agent", "codex", "--trust")
            lean.run("serve", "--detach")  # the daemon up before the fake model's instant first call
            env = hostcli.codex_env(hh.home, {**lean.host_env, "TERM": "xterm-256color"})
            with Terminal(argv, cwd=hh.proj, env=env) as term:
                start(term)
                converse(term, (("show big.py", "ANSWER-ONE"),))
                converse(term, (("show it again and fix function 7", "ANSWER-TWO"),))
                assert "Blockedbyhook" in term.shown(), term.shown()  # how the TUI shows the refusal
                converse(term, (("show it", "ANSWER-THREE"), ("show it once more", "ANSWER-FOUR")))
            bodies = srv.main_requests
        config = (hh.codex_home / "config.toml").read_text()
        assert all(part in config for part in answered(hh.proj).split("\n\n")), "the screens' answers were not saved as expected"
        assert len(bodies) == len(script), f"{len(bodies)} scripted turns ran, not {len(script)}"
        out = outputs(bodies)
        assert got(out, calls["first"]) == source()
        stub = got(out, calls["stub"])  # got() checks Codex's "Command blocked by PreToolUse hook: …" around it
        assert stub.startswith(f"[unchanged] big.py {LINES} lines") and "run the same command again" in stub, stub[:300]
        assert "Success" in got(out, edit), f"apply_patch right after a refused re-read failed: {got(out, edit)[:300]}"
        assert "    return x * 70\n" in big.read_text(), "the edit did not reach the file"
        diff = got(out, calls["diff"])
        assert diff.startswith("[changed] big.py") and "+    return x * 70" in diff, diff[:400]
        again = got(out, calls["again"])
        assert is_content(again) and again == big.read_text(), "running it again right after the diff gave no content"
        assert got(out, calls["stub2"]).startswith(f"[unchanged] big.py {LINES} lines"), got(out, calls["stub2"])[:200]
        assert got(out, calls["rerun"]) == big.read_text(), "running it again right after the stub gave no output"
        lean.assert_no_hook_errors()
        notes = lean.only_record("codex")["read_calls"]
        assert {c["call_id"] for c in calls.values()} <= set(notes), sorted(notes)
        shell_stats = json.loads(lean.run("stats", "--json").stdout)["by_reader"]["shell"]
        assert (shell_stats["stubs"], shell_stats["diffs"]) == (2, 1), shell_stats
    finally:
        stop_daemon(lean)
        if daemon:
            stop_app_server_daemon(codex_cli, hh, lean)


def received(bodies: list, call: dict) -> str:
    """What the model got for a call: a shell call's as `got` reads it, an MCP call's text."""
    if not call.get("namespace"):
        return got(outputs(bodies), call)
    items = [i for b in bodies for i in b.get("input") or [] if isinstance(i, dict)
             and i.get("type") == "function_call_output" and i.get("call_id") == call["call_id"]]
    assert items, f"no output for {call['call_id']}"
    return output_text(items[-1])


@pytest.mark.parametrize("reader", ["shell", "ctx_read"])
def test_two_tui_sessions_on_one_app_server_daemon_each_get_only_their_own_stubs(codex_cli, host_home, lean, reader):
    """A second `codex` started while the first runs talks to the same background app-server: one
    host process runs both sessions' hooks and MCP calls. Each session's reads are its own: the
    second's first read (`cat`, or `ctx_read`) is content although the first session holds the
    file, and the first keeps its stub."""
    hh = host_home
    (hh.proj / "big.py").write_text(source())

    def read() -> dict:
        return shell("cat big.py") if reader == "shell" else read_call("big.py")

    first = {"read": read(), "reread": read()}
    second = {"read": read(), "reread": read()}
    plans = [[first["read"], "ANSWER-A1", first["reread"], "ANSWER-A2"], [second["read"], second["reread"], "ANSWER-B1"]]
    queues: dict = {}

    def route(body: dict):  # noqa: ANN202 - each session its own script, in the order the sessions first ask
        session = (body.get("client_metadata") or {}).get("session_id")
        if session not in queues:
            queues[session] = plans[len(queues)] if len(queues) < len(plans) else []
        return queues[session].pop(0) if queues[session] else "done"

    argv = [codex_cli, "--sandbox", "workspace-write"]
    try:
        with FakeOpenAI(script=[route] * 7, classify=classify, side_text=TITLE) as srv:
            hostcli.write_codex_config(hh.home, srv.base_url, model=MODEL, tables=answered(hh.proj))
            lean.run("init", "--agent", "codex", "--trust")
            lean.run("serve", "--detach")
            env = hostcli.codex_env(hh.home, {**lean.host_env, "TERM": "xterm-256color"})
            with Terminal(argv, cwd=hh.proj, env=env) as one:
                start(one)
                converse(one, (("show big.py", "ANSWER-A1"),))
                with Terminal(argv, cwd=hh.proj, env=env) as two:
                    start(two)
                    converse(two, (("show big.py twice", "ANSWER-B1"),))
                converse(one, (("show it again", "ANSWER-A2"),))
            bodies = srv.main_requests
        assert len(queues) == 2 and not any(queues.values()), queues
        assert is_content(received(bodies, first["read"])) and is_content(received(bodies, second["read"])), \
            "a stub in a session that never read the file"
        for call in (second["reread"], first["reread"]):
            assert received(bodies, call).startswith(f"[unchanged] big.py {LINES} lines"), received(bodies, call)[:200]
        records = lean.records("codex")
        assert len(records) == 2, sorted(records)
        hosts = {(r["host"]["pid"], r["host"]["start_ticks"]) for r in records.values()}
        assert len(hosts) == 1, f"the two sessions did not share one app-server: {hosts}"
        lean.assert_no_hook_errors()
    finally:
        stop_daemon(lean)
        stop_app_server_daemon(codex_cli, hh, lean)
