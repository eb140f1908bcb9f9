"""Helpers to run the real host CLIs (Claude Code, Codex) offline against the fake model servers.

Nothing here talks to the network except through the URLs the caller passes in (the fake servers
on 127.0.0.1).  Every run gets an isolated ``HOME`` (and ``CODEX_HOME``/XDG dirs/TMPDIR under it),
and the environment is built from scratch, so variables of an enclosing agent session
(``CLAUDECODE``, ``CLAUDE_CODE_*``, ``CODEX_*``, real API keys ...) never leak into the host under test.

Typical use (pytest)::

    from tests.e2e import hostcli
    from tests.e2e.fake_anthropic import FakeAnthropic, tool_use, text

    claude = hostcli.require_cli("claude")            # pytest.skip() when not installed
    home = hostcli.make_home(tmp_path)                 # tmp_path/home, tmp_path/proj
    hostcli.write_claude_settings(home.home, {"hooks": {...}})
    with FakeAnthropic(script=[tool_use("Read", {"file_path": str(home.proj / "a.txt")}), text("ok")]) as srv:
        cp = hostcli.run_claude("read a.txt", home=home.home, cwd=home.proj, base_url=srv.base_url)
    assert cp.returncode == 0, cp.stderr

    with FakeOpenAI(script=["hello"]) as srv:
        hostcli.write_codex_config(home.home, srv.base_url)
        cp = hostcli.run_codex_exec("hi", home=home.home, cwd=home.proj)

CLI lookup order (``find_cli``): ``$LEANCTX_HOST_CLI_DIR/<name>`` (a ``node_modules/.bin``
folder), then ``<repo>/.ci/cache/node_modules/.bin/<name>``, then ``PATH``.

Facts these helpers rely on are recorded in ``tests/e2e/HOSTS_VERIFIED.md``.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence, Union

__all__ = [
    "REPO_ROOT",
    "HostHome",
    "find_cli",
    "require_cli",
    "cli_version",
    "make_home",
    "base_env",
    "claude_env",
    "codex_env",
    "write_claude_settings",
    "write_claude_json",
    "codex_config_toml",
    "write_codex_config",
    "write_codex_hooks",
    "run_claude",
    "run_codex_exec",
    "run_cli",
    "codex_app_server",
    "codex_hooks_list",
    "FAKE_OPENAI_KEY_ENV",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_OPENAI_KEY_ENV = "LEANCTX_FAKE_OPENAI_KEY"
DEFAULT_TIMEOUT = 120.0

PathLike = Union[str, os.PathLike]


# --------------------------------------------------------------------------------------------
# locating the CLIs
# --------------------------------------------------------------------------------------------
def _candidate_dirs() -> list[Path]:
    dirs = []
    env_dir = os.environ.get("LEANCTX_HOST_CLI_DIR")
    if env_dir:
        dirs.append(Path(env_dir))
    dirs.append(REPO_ROOT / ".ci" / "cache" / "node_modules" / ".bin")
    return dirs


# CLIs a package ships without a ``.bin`` link: name -> path inside node_modules
IN_PACKAGE = {"codebuddy": "@tencent-ai/agent-sdk/cli/bin/codebuddy"}


def find_cli(name: str) -> Optional[str]:
    """Absolute path of the ``claude`` / ``codex`` / ``codebuddy`` / ``droid`` executable, or None."""
    for d in _candidate_dirs():
        for p in (d / name, d.parent / IN_PACKAGE[name]) if name in IN_PACKAGE else (d / name,):
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
    return shutil.which(name)


def require_cli(name: str) -> str:
    """Like find_cli, but ``pytest.skip`` (or raise when pytest is absent) if it is missing."""
    path = find_cli(name)
    if path:
        return path
    msg = (f"host CLI {name!r} not found (set LEANCTX_HOST_CLI_DIR to a node_modules/.bin folder, "
           f"or install it into {REPO_ROOT / '.ci/cache'})")
    try:
        import pytest
    except ImportError:  # pragma: no cover
        raise FileNotFoundError(msg)
    pytest.skip(msg)
    raise AssertionError("unreachable")


def cli_version(name: str, timeout: float = 30) -> Optional[str]:
    """``claude --version`` -> '2.1.197 (Claude Code)', ``codex --version`` -> 'codex-cli 0.171.0'."""
    path = find_cli(name)
    if not path:
        return None
    home = Path(os.environ.get("TMPDIR", "/tmp")) / f"leanctx-version-home-{os.getpid()}"
    home.mkdir(parents=True, exist_ok=True)
    try:
        cp = subprocess.run([path, "--version"], env=base_env(home), capture_output=True, text=True,
                            timeout=timeout, stdin=subprocess.DEVNULL)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return (cp.stdout or "").strip() or None


# --------------------------------------------------------------------------------------------
# isolated homes and environments
# --------------------------------------------------------------------------------------------
@dataclass
class HostHome:
    root: Path
    home: Path  # $HOME for the host
    proj: Path  # a project dir to use as cwd

    @property
    def claude_dir(self) -> Path:
        return self.home / ".claude"

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"


def make_home(root: PathLike, project_files: Optional[Mapping[str, str]] = None) -> HostHome:
    """Create ``root/home`` (with .claude/ and .codex/) and ``root/proj`` (with ``a.txt`` by default)."""
    root = Path(root)
    home, proj = root / "home", root / "proj"
    for d in (home / ".claude", home / ".codex", home / "tmp", proj):
        d.mkdir(parents=True, exist_ok=True)
    files = {"a.txt": "hello world file\n"} if project_files is None else project_files
    for rel, content in files.items():
        p = proj / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    return HostHome(root, home, proj)


def base_env(home: PathLike, extra: Optional[Mapping[str, str]] = None) -> dict:
    """A clean environment: only PATH/locale from the caller; everything else points into ``home``."""
    home = Path(home)
    tmp = home / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "USER": os.environ.get("USER", "leanctx"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "SHELL": "/bin/sh",
        "TMPDIR": str(tmp),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }
    # Let a python hook/MCP server started by the host import the project under test.
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if extra:
        env.update({k: str(v) for k, v in extra.items()})
    return env


def claude_env(home: PathLike, base_url: str, extra: Optional[Mapping[str, str]] = None) -> dict:
    """Environment for an offline, non-interactive ``claude -p``.

    ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC`` (+ the telemetry/error-reporting/autoupdater
    switches) keeps Claude Code 2.1.197 from contacting anything but ANTHROPIC_BASE_URL; with it the
    only requests seen are ``HEAD /`` and ``POST /v1/messages?beta=true``.
    """
    env = base_env(home)
    env.update({
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-tests",
        "ANTHROPIC_BASE_URL": base_url,
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    })
    if extra:
        env.update({k: str(v) for k, v in extra.items()})
    return env


def codex_env(home: PathLike, extra: Optional[Mapping[str, str]] = None) -> dict:
    """Environment for an offline ``codex exec`` (pair with ``write_codex_config``)."""
    env = base_env(home)
    env.update({
        "CODEX_HOME": str(Path(home) / ".codex"),
        FAKE_OPENAI_KEY_ENV: "sk-fake-key-for-tests",
    })
    if extra:
        env.update({k: str(v) for k, v in extra.items()})
    return env


# --------------------------------------------------------------------------------------------
# config writers (test fixtures only -- leanctx's own writers are what the tests exercise)
# --------------------------------------------------------------------------------------------
def write_claude_settings(home: PathLike, settings: Union[Mapping, str]) -> Path:
    """Write ``$HOME/.claude/settings.json`` (a dict is dumped as JSON, a str is written verbatim)."""
    p = Path(home) / ".claude" / "settings.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(settings if isinstance(settings, str) else json.dumps(settings, indent=2) + "\n")
    return p


def write_claude_json(home: PathLike, data: Union[Mapping, str]) -> Path:
    """Write ``$HOME/.claude.json`` (user-scope MCP servers live under ``mcpServers``)."""
    p = Path(home) / ".claude.json"
    p.write_text(data if isinstance(data, str) else json.dumps(data, indent=2) + "\n")
    return p


def codex_config_toml(base_url: str, *, model: str = "gpt-5", hooks_feature: Optional[bool] = None,
                      top_level: str = "", tables: str = "") -> str:
    """config.toml text for a fake Responses provider at ``base_url`` (``FakeOpenAI.base_url``).

    ``hooks_feature=None`` writes no ``[features]`` table (hooks are on by default in 0.171);
    ``top_level`` is inserted before the first table, ``tables`` appended at the end.
    """
    out = [
        "# written by tests/e2e/hostcli.py",
        f'model = "{model}"',
        'model_provider = "leanctx_fake"',
        "check_for_update_on_startup = false",
    ]
    if top_level:
        out.append(top_level.rstrip("\n"))
    out += [
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[model_providers.leanctx_fake]",
        'name = "leanctx fake"',
        f'base_url = "{base_url}"',
        f'env_key = "{FAKE_OPENAI_KEY_ENV}"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
    ]
    if hooks_feature is not None:
        out += ["", "[features]", f"hooks = {'true' if hooks_feature else 'false'}"]
    text = "\n".join(out) + "\n"
    if tables:
        text += "\n" + tables.strip("\n") + "\n"
    return text


def write_codex_config(home: PathLike, base_url: str, **kw) -> Path:
    p = Path(home) / ".codex" / "config.toml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(codex_config_toml(base_url, **kw))
    return p


def write_codex_hooks(home: PathLike, hooks: Union[Mapping, str]) -> Path:
    """Write ``$CODEX_HOME/hooks.json``; a dict without a top-level "hooks" key is wrapped."""
    p = Path(home) / ".codex" / "hooks.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(hooks, str):
        p.write_text(hooks)
    else:
        data = hooks if "hooks" in hooks else {"hooks": dict(hooks)}
        p.write_text(json.dumps(data, indent=2) + "\n")
    return p


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------
def run_cli(args: Sequence[str], *, cwd: PathLike, env: Mapping[str, str], timeout: float = DEFAULT_TIMEOUT,
            input: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run a host CLI in its own process group; on timeout kill the whole group (hooks, MCP
    servers included) and raise ``subprocess.TimeoutExpired`` carrying the partial output."""
    proc = subprocess.Popen(
        list(args), cwd=str(cwd), env=dict(env), text=True,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(proc.args, timeout, output=out, stderr=err)
    finally:
        if proc.poll() is None:  # pragma: no cover
            _kill_group(proc)
    # A hook or MCP server may outlive the host; do not leave strays behind.
    _kill_group(proc, only_if_alive_children=True)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen, only_if_alive_children: bool = False) -> None:
    try:
        pgid = os.getpgid(proc.pid) if proc.poll() is None else proc.pid
    except ProcessLookupError:
        pgid = proc.pid
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if not only_if_alive_children:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass


def run_claude(prompt: str, *, home: PathLike, cwd: PathLike, base_url: str,
               allowed_tools: Iterable[str] = ("Read", "Bash", "Agent"),
               args: Sequence[str] = (), env_extra: Optional[Mapping[str, str]] = None,
               timeout: float = DEFAULT_TIMEOUT, cli: Optional[str] = None) -> subprocess.CompletedProcess:
    """``claude -p <prompt> --allowedTools ...`` in ``cwd`` with an isolated HOME.

    Slash commands work as the prompt, e.g. ``run_claude("/compact", args=["--continue"], ...)``
    compacts the previous session of that project (fires PreCompact, SessionStart(source=compact),
    PostCompact).
    """
    exe = cli or require_cli("claude")
    argv = [exe, "-p", prompt]
    tools = list(allowed_tools)
    if tools:
        argv += ["--allowedTools", ",".join(tools)]
    argv += list(args)
    return run_cli(argv, cwd=cwd, env=claude_env(home, base_url, env_extra), timeout=timeout)


def run_codex_exec(prompt: str, *, home: PathLike, cwd: PathLike, bypass_hook_trust: bool = True,
                   args: Sequence[str] = (), env_extra: Optional[Mapping[str, str]] = None,
                   timeout: float = DEFAULT_TIMEOUT, cli: Optional[str] = None) -> subprocess.CompletedProcess:
    """``codex exec --skip-git-repo-check [--dangerously-bypass-hook-trust] <prompt>``.

    The config must already exist (``write_codex_config``).  stdout carries only the final
    assistant message; hook progress (``hook: Stop Completed`` / ``Failed``) and warnings go to
    stderr.  Without ``bypass_hook_trust`` untrusted hooks are skipped silently.
    """
    exe = cli or require_cli("codex")
    argv = [exe, "exec", "--skip-git-repo-check"]
    if bypass_hook_trust:
        argv.append("--dangerously-bypass-hook-trust")
    argv += list(args) + [prompt]
    return run_cli(argv, cwd=cwd, env=codex_env(home, env_extra), timeout=timeout)


# --------------------------------------------------------------------------------------------
# codex app-server (JSON-RPC over stdio): hooks/list, config/batchWrite
# --------------------------------------------------------------------------------------------
def codex_app_server(home: PathLike, cwd: PathLike, calls: Sequence[tuple], *, timeout: float = 90,
                     cli: Optional[str] = None) -> list:
    """Run ``codex app-server`` once, send ``initialize`` then each ``(method, params)``; return the
    list of JSON-RPC responses (``{"id":..,"result":..}`` or ``{"error":..}``), in order.
    ``timeout`` only guards against a hang: on a loaded 2-core machine the app-server has taken
    over 30 s to answer its first call.

    Useful calls (0.171): ``("hooks/list", {"cwds": [str(cwd)]})`` -> per hook ``key``,
    ``currentHash``, ``trustStatus`` (untrusted|trusted|modified|managed), ``enabled``;
    ``("config/batchWrite", {"edits": [{"keyPath": 'hooks.state."<key>".trusted_hash',
    "value": "<sha256:..>", "mergeStrategy": "replace"}]})`` -> trusts a hook exactly like /hooks.
    """
    import select

    exe = cli or require_cli("codex")
    proc = subprocess.Popen([exe, "app-server"], cwd=str(cwd), env=codex_env(home), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + timeout

    def send(obj):
        proc.stdin.write(json.dumps(obj) + "\n")
        proc.stdin.flush()

    def recv(want_id):
        while time.monotonic() < deadline:
            r, _, _ = select.select([proc.stdout], [], [], 0.2)
            if not r:
                continue
            line = proc.stdout.readline()
            if not line:
                break
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("id") == want_id and ("result" in msg or "error" in msg):
                return msg
        raise TimeoutError(f"codex app-server: no response to id {want_id}")

    try:
        send({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "leanctx-tests", "version": "0"}}})
        recv(0)
        send({"method": "initialized"})
        out = []
        for i, (method, params) in enumerate(calls, 1):
            send({"id": i, "method": method, "params": params})
            out.append(recv(i))
        return out
    finally:
        try:
            proc.stdin.close()
        except Exception:
            pass
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            _kill_group(proc)


def codex_hooks_list(home: PathLike, cwd: PathLike, **kw) -> list:
    """The hook entries Codex itself discovers for ``cwd`` (see ``codex_app_server``)."""
    resp = codex_app_server(home, cwd, [("hooks/list", {"cwds": [str(cwd)]})], **kw)[0]
    data = resp.get("result", {}).get("data", [])
    return [h for d in data for h in d.get("hooks", [])]


if __name__ == "__main__":  # quick self-check: python -m tests.e2e.hostcli
    for n in ("claude", "codex"):
        print(n, find_cli(n), cli_version(n))
    sys.exit(0)


def printed_ids(stdout: str, key: str) -> set:
    """The values of `key` in a host's JSON-lines output (`opencode run --format json`'s
    `sessionID`, `cline --json`'s `taskId`): the ids the host itself reported."""
    found = set()
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get(key), str):
            found.add(event[key])
    return found
