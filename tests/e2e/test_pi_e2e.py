"""End to end with the real Pi coding agent (`pi -p`, 0.73.1), offline against the fake Chat
Completions server (a `models.json` provider in Pi's agent dir): init (the extension) -> one
scripted run -> the record names the session id Pi wrote in its session file's header -> the
second ctx_read of the session is the `[unchanged]` stub, a new session gets content -> doctor
passes -> uninstall gives the user's files back byte for byte.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.e2e import hostcli
from tests.e2e.conftest import _cli
from tests.e2e.fake_openai import FakeOpenAI, chat_results, function_call

pytestmark = pytest.mark.e2e

READ = "ctx_read"  # the name our extension registers leanctx's ctx_read under
TIMEOUT = 150.0


@pytest.fixture
def pi_cli():
    return _cli("pi")


def pi_env(hh, lean) -> dict:
    return hostcli.base_env(hh.home, {**lean.host_env, "PI_OFFLINE": "1", "PI_SKIP_VERSION_CHECK": "1", "PI_TELEMETRY": "0"})


def models_json(base_url: str) -> str:
    return json.dumps({"providers": {"fake": {
        "baseUrl": base_url, "api": "openai-completions", "apiKey": "sk-fake",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "fake-model"}]}}}, indent=2) + "\n"


def run_pi(cli, hh, lean, run_host, prompt: str):
    argv = [cli, "-p", "--provider", "fake", "--model", "fake-model", prompt]
    cp, _ = run_host(argv, cwd=hh.proj, env=pi_env(hh, lean), timeout=TIMEOUT)
    assert cp.returncode == 0, f"pi -> {cp.returncode}\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}"
    return cp


def session_headers(agent_dir) -> dict:
    """{session id: session file} from the `{"type": "session", "id": ...}` header line Pi
    writes first in each of its session files."""
    found = {}
    for path in (agent_dir / "sessions").rglob("*.jsonl"):
        first = path.read_text().splitlines()[0]
        header = json.loads(first)
        assert header["type"] == "session", first
        found[header["id"]] = str(path)
    return found


def test_pi_extension_publishes_the_session_and_second_read_is_a_stub(pi_cli, host_home, lean, run_host):
    hh = host_home
    content = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
    (hh.proj / "big.py").write_text(content)
    agent_dir = hh.home / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    first, second = function_call(READ, {"path": "big.py"}), function_call(READ, {"path": "big.py"})
    again = function_call(READ, {"path": "big.py"})
    offered = []

    def turn(item):
        def build(body: dict):
            offered.append(READ in {(t.get("function") or {}).get("name") for t in body.get("tools") or []})
            return item
        return build

    with FakeOpenAI(script=[turn(first), turn(second), turn("Read it twice."), turn(again), turn("Read it again.")],
                    model="fake-model") as srv:
        models = agent_dir / "models.json"
        models.write_text(models_json(srv.base_url))
        before = {models: models.read_bytes()}
        lean.run("init", "--agent", "pi")
        assert (agent_dir / "extensions" / "leanctx.js").exists()
        run_pi(pi_cli, hh, lean, run_host, "read big.py twice")
        sessions = session_headers(agent_dir)
        assert len(sessions) == 1, sessions
        out = chat_results(srv)
        assert offered and all(offered), "Pi did not offer ctx_read to the model"
        assert "def function_199" in out[first["call_id"]], out
        assert out[second["call_id"]].startswith("[unchanged]"), out[second["call_id"]][:300]
        rec = lean.only_record("pi")
        sid = next(iter(sessions))
        assert rec["conversation_id"] == rec["session_id"] == sid, (rec, sessions)
        assert rec["transcript_path"] == sessions[sid]
        assert rec["cwd"] == str(hh.proj) and rec["stopped_at"]
        assert rec["host"]["pid"] and rec["host"]["name"], rec["host"]
        lean.assert_no_hook_errors()
        # a second `pi -p` is a new session and a new process: content again
        run_pi(pi_cli, hh, lean, run_host, "read big.py again")
        assert len(session_headers(agent_dir)) == 2
        assert "def function_199" in chat_results(srv)[again["call_id"]]
        assert len(lean.records("pi")) == 2
    code, report = lean.doctor("pi")
    assert code == 0 and report["agents"][0]["ok"], json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", "pi")
    assert {p: p.read_bytes() for p in before} == before
    assert not (agent_dir / "extensions").exists()
    assert not (agent_dir / "AGENTS.md").exists()


def test_pi_guard_blocks_a_read_of_another_users_folder_with_the_reason(pi_cli, host_home, lean, run_host, tmp_path):
    """`init --guard`: the extension's tool_call handler returns `{block: true, reason}` for Pi's
    own `read` of another user's file; Pi 0.73.1 skips the tool and the model gets the reason as
    the call's (error) result. A read of a file of the project still runs."""
    hh = host_home
    users = tmp_path / "cks" / "user"
    (users / "bob").mkdir(parents=True)
    (users / "bob" / "notes.md").write_text("bob's secret notes\n")
    (hh.proj / "mine.txt").write_text("the project's own file\n")
    agent_dir = hh.home / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    theirs = function_call("read", {"path": str(users / "bob" / "notes.md")})
    ours = function_call("read", {"path": "mine.txt"})
    with FakeOpenAI(script=[theirs, ours, "done"], model="fake-model") as srv:
        (agent_dir / "models.json").write_text(models_json(srv.base_url))
        lean.run("init", "--agent", "pi", "--guard")
        env = dict(pi_env(hh, lean), CKS_HOME=str(tmp_path / "cks"), CKS_ACTIVE_USER="ana")
        argv = [pi_cli, "-p", "--provider", "fake", "--model", "fake-model", "read two files"]
        cp, _ = run_host(argv, cwd=hh.proj, env=env, timeout=TIMEOUT)
        assert cp.returncode == 0, cp.stderr[-3000:]
        out = chat_results(srv)
    assert "secret" not in out[theirs["call_id"]] and "bob" in out[theirs["call_id"]], out
    assert "the project's own file" in out[ours["call_id"]], out
    lean.run("uninstall", "--agent", "pi")



def rpc_session(cli, hh, lean, commands: list, timeout: float = TIMEOUT) -> list:
    """`pi --mode rpc`: send each command (a JSON line on stdin) and wait for what ends it (the
    prompt's `agent_end` event; the response of any other command, and of a prompt that runs an
    extension's `/command`); returns every line Pi printed.
    The timeout only guards against a hang."""
    import queue
    import subprocess
    import threading
    import time

    argv = [cli, "--mode", "rpc", "--provider", "fake", "--model", "fake-model"]
    proc = subprocess.Popen(argv, cwd=str(hh.proj), env=pi_env(hh, lean), text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    lines: queue.Queue = queue.Queue()  # a reader thread: select() on a buffered pipe misses lines

    def pump():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen = []
    deadline = time.monotonic() + timeout
    try:
        for command in commands:
            command = command() if callable(command) else command  # one that needs what came before
            proc.stdin.write(json.dumps(command) + "\n")
            proc.stdin.flush()
            done = False
            while not done:
                try:
                    line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                except queue.Empty:
                    raise AssertionError(f"pi --mode rpc hung after {command}: {seen[-5:]}") from None
                assert line is not None, f"pi --mode rpc exited: {seen[-5:]}"
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                seen.append(event)
                if command["type"] == "prompt" and not command["message"].startswith("/"):
                    done = event.get("type") == "agent_end"
                else:
                    done = event.get("type") == "response" and event.get("command") == command["type"]
                    assert not done or event.get("success"), event
        proc.stdin.close()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(5)
    return seen


def test_pi_after_a_compaction_the_next_read_is_content(pi_cli, host_home, lean):
    """`pi --mode rpc`: a prompt reads big.py, the `compact` command compacts the session (Pi
    0.73.1 runs `session_before_compact` and `session_compact`, which our extension forwards), and
    in the next prompt the model's read of the file is content, not the stub; the read after it
    is the stub again."""
    hh = host_home
    content = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))
    (hh.proj / "big.py").write_text(content)
    agent_dir = hh.home / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    first, after, again = (function_call(READ, {"path": "big.py"}) for _ in range(3))
    with FakeOpenAI(script=[first, "Read it.", after, again, "done"], model="fake-model") as srv:
        (agent_dir / "models.json").write_text(models_json(srv.base_url))
        lean.run("init", "--agent", "pi")
        rpc_session(pi_cli, hh, lean, [{"type": "prompt", "message": "read big.py"}, {"type": "compact"},
                                       {"type": "prompt", "message": "read big.py twice"}])
        out = chat_results(srv)
        summaries = [r for r in srv.log if isinstance(r.body, dict) and "context summarization" in json.dumps(r.body)]
    assert len(summaries) == 1, "Pi did not compact"
    rec = lean.only_record("pi")
    # counted twice: session_before_compact (awaited before the summary) and session_compact
    assert rec["compactions"] == 2, rec
    assert "def function_199" in out[first["call_id"]]
    assert "def function_199" in out[after["call_id"]], out[after["call_id"]][:300]
    assert out[again["call_id"]].startswith("[unchanged]"), out[again["call_id"]][:300]


def test_pi_bot_profile_records_turns_and_a_new_session_gets_the_thread(pi_cli, host_home, lean, run_host, tmp_path):
    """`init --agent pi --bot` on the real pi: each prompt and its reply (agent_end's last assistant
    message) recorded; the next `pi -p`, a new session, gets the thread as a message of the
    extension's (before_agent_start's `message`) in its first request, once."""
    hh = host_home
    agent_dir = hh.home / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    seen = []

    def answer(text):
        def build(body: dict):
            seen.append(body)
            return text
        return build

    with FakeOpenAI(script=[answer("The blue mug, size M."), answer("It is 12 euros.")], model="fake-model") as srv:
        (agent_dir / "models.json").write_text(models_json(srv.base_url))
        lean.run("init", "--agent", "pi", "--bot")
        env = {**pi_env(hh, lean), "CKS_HOME": str(tmp_path / "cks"), "CKS_ACTIVE_USER": "ana"}
        for prompt in ("which mug did I pick", "and the price"):
            cp, _ = run_host([pi_cli, "-p", "--provider", "fake", "--model", "fake-model", prompt], cwd=hh.proj, env=env, timeout=TIMEOUT)
            assert cp.returncode == 0, cp.stderr[-2000:]
    first, second = (json.dumps(b["messages"]) for b in seen)
    assert "[leanctx conversation state]" not in first
    assert second.count("[leanctx conversation state]") == 1 and "The blue mug, size M." in second
    shown = subprocess.run([sys.executable, "-m", "leanctx", "state", "show", "--json"], capture_output=True, text=True,
                           env={**lean.env(), "CKS_HOME": str(tmp_path / "cks"), "CKS_ACTIVE_USER": "ana"}, timeout=60)
    state = json.loads(shown.stdout)
    assert [(t["role"], t["text"]) for t in state["recent_turns"]] == [
        ("user", "which mug did I pick"), ("agent", "The blue mug, size M."), ("user", "and the price"), ("agent", "It is 12 euros.")]
    lean.assert_no_hook_errors()
