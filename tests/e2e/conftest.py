"""Shared fixtures for the end-to-end tests that drive real host CLIs offline.

Makes ``from tests.e2e import hostcli`` importable regardless of pytest's import mode, and offers:

* ``host_home``  -> hostcli.HostHome under tmp_path (home/ with .claude/.codex, proj/a.txt)
* ``claude_cli`` / ``codex_cli`` -> path of the CLI.  When the CLI (or the ``node`` its launcher
  needs) is missing the test is skipped -- unless ``LEANCTX_REQUIRE_E2E`` is set (and not "0"),
  in which case it fails: CI that is meant to exercise the real hosts must not go green by skipping.
* ``lean``       -> runs the real ``leanctx`` (``python -m leanctx``) with HOME and LEANCTX_HOME in
  the temp home, and reads what the hooks published.
* ``diag``       -> a diagnostic hook command that appends, per event, the payload the host sent,
  the hook's process ancestry and a snapshot of leanctx's conversation records.
* ``mcp_probe``  -> a minimal stdio MCP server that records its parent process (the host).
* ``run_host``   -> like hostcli.run_cli but also returns the pid of the process it started.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping, Optional, Sequence

import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from tests.e2e import hostcli  # noqa: E402

CLI_TIMEOUT = 90.0  # every host CLI run is bounded (at most 120 s each)


# --------------------------------------------------------------------------------------------
# locating the CLIs: skip, or fail under LEANCTX_REQUIRE_E2E
# --------------------------------------------------------------------------------------------
def require_e2e() -> bool:
    return os.environ.get("LEANCTX_REQUIRE_E2E", "").strip() not in ("", "0")


def missing(reason: str) -> None:
    """Skip the test, or fail it when the e2e tests are required to run."""
    if require_e2e():
        pytest.fail(f"LEANCTX_REQUIRE_E2E is set but {reason}", pytrace=False)
    pytest.skip(reason)


def _needs_node(path: str) -> bool:
    """True when the CLI is a script run by node (``#!/usr/bin/env node``), e.g. codex.js."""
    try:
        with open(os.path.realpath(path), "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"node" in first


def _cli(name: str) -> str:
    modules = hostcli.REPO_ROOT / ".ci" / "cache" / "node_modules"
    pinned = modules / hostcli.IN_PACKAGE[name] if name in hostcli.IN_PACKAGE else modules / ".bin" / name
    if not os.environ.get("LEANCTX_HOST_CLI_DIR") and not pinned.exists() and shutil.which("npm"):
        from tests.e2e import install_clis

        problem = install_clis.ensure()  # the pinned versions, once per machine (npm caches)
        if problem:
            missing(problem)
    path = hostcli.find_cli(name)
    if not path:
        missing(f"host CLI {name!r} not found (set LEANCTX_HOST_CLI_DIR to a node_modules/.bin folder, "
                f"or install it into {hostcli.REPO_ROOT / '.ci/cache'})")
    if _needs_node(path) and not shutil.which("node"):
        missing(f"{path} needs node, which is not on PATH")
    return path


@pytest.fixture
def host_home(tmp_path):
    return hostcli.make_home(tmp_path)


@pytest.fixture
def claude_cli():
    return _cli("claude")


@pytest.fixture
def codex_cli():
    return _cli("codex")


@pytest.fixture
def codebuddy_cli():
    return _cli("codebuddy")


@pytest.fixture
def droid_cli():
    return _cli("droid")


# --------------------------------------------------------------------------------------------
# helper scripts run by the hosts (diagnostic hook, MCP probe)
# --------------------------------------------------------------------------------------------
_PROC_STAT_SRC = '''
def proc_stat(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            raw = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    name = raw[raw.find("(") + 1: raw.rfind(")")]
    fields = raw[raw.rfind(")") + 2:].split()
    return {"pid": pid, "name": name, "ppid": int(fields[1]), "start_ticks": int(fields[19])}
'''

# argv: EVENT LOGFILE DATA_DIR.  Prints nothing, exits 0.
DIAG_HOOK_SRC = "import glob, json, os, sys\n" + _PROC_STAT_SRC + r'''
event, log, data_dir = sys.argv[1], sys.argv[2], sys.argv[3]
raw = sys.stdin.read()
chain, pid = [], os.getpid()
for _ in range(10):
    st = proc_stat(pid)
    if st is None:
        break
    chain.append(st)
    if st["ppid"] <= 1:
        break
    pid = st["ppid"]
snapshot = {}
for path in glob.glob(os.path.join(data_dir, "conversations", "*", "*.json")):
    try:
        with open(path) as f:
            snapshot[path] = json.load(f)
    except (OSError, ValueError) as exc:
        snapshot[path] = repr(exc)
with open(log, "a") as f:
    f.write(json.dumps({"event": event, "payload": json.loads(raw or "null"), "chain": chain,
                        "snapshot": snapshot}) + "\n")
'''

# argv: OUTFILE.  Records its parent (the host), then answers initialize / tools/list.
MCP_PROBE_SRC = "import json, os, sys\n" + _PROC_STAT_SRC + r'''
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"pid": os.getpid(), "parent": proc_stat(os.getppid())}) + "\n")
for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
        continue
    method = msg["method"]
    if method == "initialize":
        version = (msg.get("params") or {}).get("protocolVersion") or "2025-06-18"
        reply = {"result": {"protocolVersion": version, "capabilities": {"tools": {}},
                            "serverInfo": {"name": "probe", "version": "0"}}}
    elif method == "tools/list":
        reply = {"result": {"tools": []}}
    elif method == "ping":
        reply = {"result": {}}
    else:
        reply = {"error": {"code": -32601, "message": "method not found"}}
    sys.stdout.write(json.dumps(dict(reply, jsonrpc="2.0", id=msg["id"])) + "\n")
    sys.stdout.flush()
'''


class Diag:
    """A diagnostic hook: ``command(event)`` for a host config, ``entries()`` to read what it saw."""

    def __init__(self, root: Path, data_dir: Path) -> None:
        self.script = root / "diag_hook.py"
        self.log = root / "diag.jsonl"
        self.data_dir = data_dir
        self.script.write_text(DIAG_HOOK_SRC)

    def command(self, event: str) -> str:
        return f"{sys.executable} {self.script} {event} {self.log} {self.data_dir}"

    def group(self, event: str) -> dict:
        return {"hooks": [{"type": "command", "command": self.command(event), "timeout": 10}]}

    def entries(self, event: Optional[str] = None) -> list:
        if not self.log.exists():
            return []
        out = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [e for e in out if event is None or e["event"] == event]

    def payloads(self, event: Optional[str] = None) -> list:
        return [e["payload"] for e in self.entries(event)]

    def events(self) -> list:
        return [e["event"] for e in self.entries()]


class McpProbe:
    def __init__(self, root: Path) -> None:
        self.script = root / "mcp_probe.py"
        self.out = root / "mcp_probe.jsonl"
        self.script.write_text(MCP_PROBE_SRC)
        self.argv = [sys.executable, str(self.script), str(self.out)]

    def starts(self) -> list:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]


# --------------------------------------------------------------------------------------------
# leanctx itself
# --------------------------------------------------------------------------------------------
class Lean:
    """The real ``leanctx`` command and its data dir inside a temp HOME."""

    def __init__(self, home: hostcli.HostHome) -> None:
        self.hh = home
        self.home = home.home
        # Deliberately not the platformdirs default (~/.local/share/leanctx): a host that runs
        # without LEANCTX_HOME in its environment must still publish here (the wrapper bakes it in).
        self.data = home.home / "leanctx-data"

    def env(self, extra: Optional[Mapping[str, str]] = None) -> dict:
        env = hostcli.base_env(self.home, {"LEANCTX_HOME": str(self.data)})
        if extra:
            env.update(extra)
        return env

    @property
    def host_env(self) -> dict:
        """What to add to a host's environment so its hooks see the same data dir."""
        return {"LEANCTX_HOME": str(self.data)}

    def run(self, *args: str, ok: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        cp = subprocess.run([sys.executable, "-m", "leanctx", *args], env=self.env(), cwd=str(self.hh.proj),
                            capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if ok:
            assert cp.returncode == 0, f"leanctx {' '.join(args)} -> {cp.returncode}\n{cp.stdout}\n{cp.stderr}"
        return cp

    def doctor(self, agent: str) -> tuple:
        cp = self.run("doctor", "--agent", agent, "--json", ok=False)
        try:
            report = json.loads(cp.stdout)
        except ValueError:
            raise AssertionError(f"doctor printed no JSON (rc {cp.returncode}):\n{cp.stdout}\n{cp.stderr}")
        return cp.returncode, report

    def records(self, agent: str) -> dict:
        """conversation file stem -> record, for every published conversation of `agent`."""
        folder = self.data / "conversations" / agent
        return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))} if folder.is_dir() else {}

    def only_record(self, agent: str) -> dict:
        recs = self.records(agent)
        assert len(recs) == 1, f"expected exactly one {agent} conversation record, got {sorted(recs)}"
        return next(iter(recs.values()))

    @property
    def active_transcript(self) -> Optional[dict]:
        p = self.data / "active_transcript.json"
        return json.loads(p.read_text()) if p.exists() else None

    @property
    def hook_log(self) -> Path:
        return self.data / "logs" / "hooks.log"

    def assert_no_hook_errors(self) -> None:
        log = self.hook_log
        assert not log.exists(), f"hook errors were logged:\n{log.read_text()}"

    @property
    def wrapper(self) -> Path:
        return self.data / "bin" / "leanctx-hook"

    def state(self) -> dict:
        """Every file under conversations/ and active_transcript.json -> bytes (to prove 'nothing new')."""
        out = {}
        for p in sorted(self.data.rglob("*")) if self.data.exists() else []:
            if p.is_file() and (p.name == "active_transcript.json" or "conversations" in p.parts):
                out[str(p.relative_to(self.data))] = p.read_bytes()
        return out


@pytest.fixture
def lean(host_home):
    lean = Lean(host_home)
    yield lean
    # the MCP server a host spawned may have started the cache daemon for this data dir: stop it
    subprocess.run([sys.executable, "-m", "leanctx", "stop", "--force"], env=lean.env(), capture_output=True, timeout=60)


@pytest.fixture
def bobs_secret(host_home) -> str:
    """Another user's file in CKS_HOME (~/.cks/user/bob/profile.md), for the multi-user guard
    tests; returns the secret it holds, which must never reach the model."""
    bob = host_home.home / ".cks" / "user" / "bob"
    bob.mkdir(parents=True)
    (bob / "profile.md").write_text("bob's phone: 555-0100\n")
    return "555-0100"


@pytest.fixture
def diag(tmp_path, lean):
    return Diag(tmp_path, lean.data)


@pytest.fixture
def mcp_probe(tmp_path):
    return McpProbe(tmp_path)


# --------------------------------------------------------------------------------------------
# running a host and knowing its pid
# --------------------------------------------------------------------------------------------
def _run_host(argv: Sequence[str], *, cwd, env: Mapping[str, str], timeout: float = CLI_TIMEOUT):
    """hostcli.run_cli, but returns (CompletedProcess, pid of the process started)."""
    proc = subprocess.Popen(list(argv), cwd=str(cwd), env=dict(env), text=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        hostcli._kill_group(proc)
        out, err = proc.communicate()
        raise AssertionError(f"{argv[0]} did not finish within {timeout:.0f} s\nstdout:\n{out}\nstderr:\n{err}")
    finally:
        if proc.poll() is None:  # pragma: no cover
            hostcli._kill_group(proc)
    hostcli._kill_group(proc, only_if_alive_children=True)  # strays: hooks, MCP servers
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), proc.pid


@pytest.fixture
def run_host():
    return _run_host


# --------------------------------------------------------------------------------------------
# network isolation for commands that would reach the internet (codex doctor's update probe)
# --------------------------------------------------------------------------------------------
def netns_prefix() -> Optional[list]:
    """``unshare`` argv prefix giving a child no network at all (not even the host's loopback)."""
    exe = shutil.which("unshare")
    if not exe:
        return None
    for prefix in ([exe, "-n"], [exe, "-r", "-n"]):
        try:
            cp = subprocess.run(prefix + ["true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if cp.returncode == 0:
            return prefix
    return None
