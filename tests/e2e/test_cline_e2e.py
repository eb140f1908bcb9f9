"""End to end with the real Cline CLI (`cline --json`), offline against the fake Chat Completions
server: init (hook files + MCP entry) -> one scripted run -> the record names the session Cline
keeps (its folder under ~/.cline/data/sessions) and the task it reported -> the second ctx_read
of the session is content again (Cline compacts without a hook: no stubs), a new session gets
content -> doctor passes -> uninstall gives the user's files back byte for byte.

Every Cline run leaves a detached hub daemon (`cline --cline-hub-daemon`, reparented to init);
the test ends the ones started under its HOME, by pid. A tap of the test's own (executable hook
files in ~/Documents/Cline/Hooks, the other folder Cline runs hooks from) logs each payload Cline
sends: the recorded trace for the replay bench.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from leanctx.cache.scope import SILENT_COMPACTION
from tests.e2e import hostcli, tracetap
from tests.e2e.conftest import McpProbe, _cli
from tests.e2e.fake_openai import FakeOpenAI, chat_results, function_call

pytestmark = pytest.mark.e2e

READ = "leanctx__ctx_read"  # Cline names an MCP tool <server>__<tool>
TIMEOUT = 120.0
TAP_EVENTS = ("TaskStart", "TaskComplete", "PreToolUse")

TAP_SRC = r'''
import json, os, sys, time
event, log = sys.argv[1], sys.argv[2]
payload = json.loads(sys.stdin.read())
if event == "PreToolUse" and (payload.get("tool_call") or {}).get("name") != "@READ@":
    sys.exit(0)
with open(log, "a") as f:  # the hook file execs this: our parent is the cline process itself
    f.write(json.dumps({"t": time.time(), "event": event, "host": os.getppid(), "payload": payload}) + "\n")
'''


@pytest.fixture
def cline_cli():
    return _cli("cline")


def hub_daemons(home) -> list:
    """Pids of the Cline hub daemons started under `home` (matched by their HOME)."""
    want = f"HOME={home}".encode()
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if b"--cline-hub-daemon" in argv and want in env:
            found.append(int(pid))
    return found


def end_hub_daemons(home) -> None:
    pids = hub_daemons(home)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") and _alive(p) for p in pids):
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def cline_home(host_home):
    yield host_home
    end_hub_daemons(host_home.home)
    assert hub_daemons(host_home.home) == []


def cline_env(hh, lean) -> dict:
    return hostcli.base_env(hh.home, lean.host_env)


def install_tap(hh) -> object:
    folder = hh.home / "Documents" / "Cline" / "Hooks"
    folder.mkdir(parents=True)
    script, log = hh.root / "tap.py", hh.root / "tap.jsonl"
    script.write_text(TAP_SRC.replace("@READ@", READ))
    for event in TAP_EVENTS:
        hook = folder / event
        hook.write_text(f"#!/bin/sh\nexec {sys.executable} {script} {event} {log}\n")
        hook.chmod(0o755)
    return log


def read_of(entry: dict):
    """A tap entry that is a ctx_read, in Cline's words: its PreToolUse payload names the session,
    the call id and the arguments (the tap logs PreToolUse for ctx_read only)."""
    p = entry["payload"]
    call = p.get("tool_call") or {}
    if entry["event"] != "PreToolUse":
        return None
    return {"conv": p["sessionContext"]["rootSessionId"], "args": call.get("input") or {}, "call_id": call.get("id")}


class WhenOffered:
    """The scripted turns, served only to a request that offers ctx_read. Cline loads MCP servers
    while the task starts and runs it with whatever was ready (verified on 3.0.65): on a loaded
    machine a slow `leanctx mcp` start leaves our tools out of that whole run. Such a run gets
    "done" and is counted in `missed`; the script waits for the next run."""

    def __init__(self, script: list) -> None:
        self.script, self.i, self.missed = script, 0, 0

    def __call__(self, body: dict):
        if READ not in {(t.get("function") or {}).get("name") for t in body.get("tools") or []}:
            self.missed += 1
            return "done"
        item = self.script[self.i] if self.i < len(self.script) else "done"
        self.i += 1
        return item


def run_offered(cli, hh, lean, run_host, prompt: str, turns: WhenOffered, tap_log):
    """run_cline until a run is offered ctx_read (3 tries); a run that was not leaves no trace
    behind: its record and its tap entries are dropped, as if it had not happened."""
    sessions = hh.home / ".cline" / "data" / "sessions"
    for _ in range(3):
        known, missed = set(os.listdir(sessions)) if sessions.exists() else set(), turns.missed
        cp = run_cline(cli, hh, lean, run_host, prompt)
        if turns.missed == missed:
            return cp
        for session in set(os.listdir(sessions)) - known:
            for stem, rec in lean.records("cline").items():
                if rec["conversation_id"] == session:
                    (lean.data / "conversations" / "cline" / f"{stem}.json").unlink()
            lines = tap_log.read_text().splitlines(keepends=True)
            tap_log.write_text("".join(l for l in lines if session not in l))
    raise AssertionError("Cline never offered leanctx's tools in 3 runs")


def run_cline(cli, hh, lean, run_host, prompt: str):
    cp, pid = run_host([cli, "--json", prompt], cwd=hh.proj, env=cline_env(hh, lean), timeout=TIMEOUT)
    assert cp.returncode == 0, f"cline -> {cp.returncode}\n{cp.stdout[-3000:]}\n{cp.stderr[-3000:]}"
    return cp


def test_cline_hook_files_publish_the_session_and_second_read_is_content(cline_cli, cline_home, lean, run_host, tmp_path):
    hh = cline_home
    # Cline cuts a result whose JSON passes 8,000 characters (hostcaps.py): 150 functions fit
    content = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(150))
    (hh.proj / "big.py").write_text(content)
    first, second, again = (function_call(READ, {"path": "big.py"}) for _ in range(3))
    turns = WhenOffered([first, second, "Read it twice.", again, "Read it again."])
    with FakeOpenAI(script=[turns] * 12, model="fake-model") as srv:
        auth = subprocess.run([cline_cli, "auth", "-p", "openai", "-k", "sk-fake", "-b", srv.base_url, "-m", "fake-model"],
                              env=cline_env(hh, lean), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert auth.returncode == 0, auth.stderr
        settings = hh.home / ".cline" / "data" / "settings" / "cline_mcp_settings.json"
        probe = McpProbe(tmp_path)
        settings.write_text(json.dumps({"mcpServers": {"probe": {"type": "stdio", "command": probe.argv[0], "args": probe.argv[1:],
                                                                 "disabled": False, "autoApprove": []}}}, indent=2) + "\n")
        tap_log = install_tap(hh)
        before = {p: p.read_bytes() for p in [settings, *(f for f in sorted((hh.home / "Documents").rglob("*")) if f.is_file())]}
        lean.run("init", "--agent", "cline")
        hooks = hh.home / ".cline" / "hooks"
        assert all(os.access(hooks / name, os.X_OK) for name in ("TaskStart", "TaskComplete"))
        cp = run_offered(cline_cli, hh, lean, run_host, "read big.py twice", turns, tap_log)
        out = chat_results(srv)
        assert "def function_149" in out.get(first["call_id"], ""), (out, cp.stdout[-2000:])
        # Cline compacts without a hook leanctx receives (scope.SILENT_COMPACTION): never a stub
        assert "def function_149" in out[second["call_id"]], out[second["call_id"]][:300]
        rec = lean.only_record("cline")
        sessions = sorted(os.listdir(hh.home / ".cline" / "data" / "sessions"))
        assert rec["conversation_id"] == rec["session_id"] and rec["conversation_id"] in sessions, (rec, sessions)
        assert rec["turn_id"] in hostcli.printed_ids(cp.stdout, "taskId") and rec["last_event"] == "TaskComplete"
        assert rec["cwd"] == str(hh.proj) and rec["host"]["name"] == "cline"
        assert probe.starts(), "the user's own MCP server was not started beside ours"
        lean.assert_no_hook_errors()
        # a second run is a new Cline session and process: content again
        run_offered(cline_cli, hh, lean, run_host, "read big.py again", turns, tap_log)
        assert "def function_149" in chat_results(srv)[again["call_id"]]
        assert len(lean.records("cline")) == 2
    # the model's call id is the test's, not the MCP server's: this host sends the server no call id
    # (its `_meta` holds only a progressToken), so the replay must not see one either
    trace = [dict(e, call_id=None) if e["op"] == "read" else e
             for e in tracetap.tap_trace(tap_log, hh.proj, {"big.py": content}, "cline", read_of)]
    tracetap.check_replay(trace, hh, ["full", "full", "full"], "cline-two-sessions", host="Cline CLI", source=__file__,
                          withheld=SILENT_COMPACTION["cline"])
    code, report = lean.doctor("cline")
    assert code == 0 and report["agents"][0]["ok"], json.dumps(report, indent=1)[-3000:]
    lean.run("uninstall", "--agent", "cline")
    assert {p: p.read_bytes() for p in before} == before
    assert not hooks.exists() and not (hh.home / ".cline" / "rules").exists()


def test_cline_project_hooks_run_from_the_project(cline_cli, cline_home, lean, run_host):
    """`init --project`: hook files in <proj>/.cline/hooks calling `leanctx-hook` from PATH; Cline
    has no project-level MCP file, so no server entry is written there."""
    hh = cline_home
    bindir = os.path.dirname(sys.executable)
    with FakeOpenAI(script=["done"], model="fake-model") as srv:
        env = dict(cline_env(hh, lean), PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
        auth = subprocess.run([cline_cli, "auth", "-p", "openai", "-k", "sk-fake", "-b", srv.base_url, "-m", "fake-model"],
                              env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert auth.returncode == 0, auth.stderr
        lean.run("init", "--agent", "cline", "--project", str(hh.proj))
        assert os.access(hh.proj / ".cline" / "hooks" / "TaskStart", os.X_OK)
        cp, _ = run_host([cline_cli, "--json", "say hello"], cwd=hh.proj, env=env, timeout=TIMEOUT)
        assert cp.returncode == 0, cp.stderr[-3000:]
    rec = lean.only_record("cline")
    assert rec["conversation_id"] == sorted(os.listdir(hh.home / ".cline" / "data" / "sessions"))[0]
    assert rec["turn_id"] in hostcli.printed_ids(cp.stdout, "taskId")
    lean.run("uninstall", "--agent", "cline", "--project", str(hh.proj))
    assert not (hh.proj / ".cline").exists()
