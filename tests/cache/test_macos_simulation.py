"""The macOS code paths, simulated on Linux: what the platform lacks is taken away from the code
under test (no /proc), what it has instead is put in (F_GETPATH, a 104-byte
sun_path), and each path must fail closed: no stub it cannot justify, no file from outside the
workspace, a clear error instead of a crash. Real files, real symlink swaps, real sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.cache import Connection, ReadCache, Resolver, client, paths
from bench.support.oracle import payload
from leanctx.cache.scope import ID_ONLY
from leanctx.hooks import hostproc, publish

from .conftest import World, code
from .test_paths import _err, c, outside, swapped_read  # noqa: F401 - `c` and `outside` are fixtures


@pytest.fixture
def no_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS: no /proc/<pid>/stat for the host walk, no /proc/self/fd for descriptors or sockets."""
    monkeypatch.setattr(hostproc, "process_stat", lambda pid: None)
    monkeypatch.setattr(client, "FD_DIR", "/nonexistent/proc/self/fd")


# -- the host process (hooks/hostproc.py) -----------------------------------------------------------

def test_without_proc_no_host_is_named(no_proc) -> None:
    """A bare parent pid is the hook's `sh`, not the host, and without a start time it can be
    reused: naming it would let an unrelated process match this session's records."""
    assert hostproc.host_process() == {"pid": None, "name": None, "start_ticks": None}


def test_an_unreadable_ancestor_or_a_deep_shell_chain_names_no_host(monkeypatch) -> None:
    """The walk passes shells; an ancestor that cannot be read mid-walk (it exited, /proc hides
    it), or shells deeper than the walk looks, leave the host unknown, never a pid without ticks."""
    monkeypatch.setattr(hostproc, "process_stat", lambda pid: ("sh", pid + 1, 5) if pid == os.getppid() else None)
    assert hostproc.host_process()["pid"] is None
    monkeypatch.setattr(hostproc, "process_stat", lambda pid: ("bash", pid + 1, 5))
    assert hostproc.host_process()["pid"] is None


def _hook(data_dir: Path, event: str, conv: str, cwd: Path) -> None:
    """What the Claude Code hook does for one event, in this (simulated macOS) process."""
    publish.publish(str(data_dir), agents.get("claude").normalize(event, payload("claude", event, conv, str(cwd))))


def test_a_reused_pid_does_not_inherit_another_chats_reads(no_proc, tmp_path, monkeypatch) -> None:
    """On macOS the hook's parent pid is its `sh`, which exits; a later host process (another chat)
    can get that pid. Simulated here by a hook and an MCP server sharing a parent: conversation A
    reads a file; a different chat's MCP connection with the same parent pid must not be told
    `[unchanged]` for bytes only A received (the old code matched it to A's record by pid alone)."""
    for name in ("CLAUDE_CODE_SESSION_ID", "LEANCTX_SCOPE", "LEANCTX_CONVERSATION_SCOPE", "CURSOR_TASK_ID"):
        monkeypatch.delenv(name, raising=False)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.py").write_text(code(20))
    data = tmp_path / "data"
    _hook(data, "SessionStart", "chat-a", project)
    _hook(data, "UserPromptSubmit", "chat-a", project)
    resolver, cache = Resolver(str(data)), ReadCache(str(tmp_path / "state"))
    monkeypatch.chdir(project)  # MCP servers start in the project

    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "chat-a")
    chat_a = Connection.capture()
    assert cache.read(resolver.resolve(chat_a, fresh=True), str(project / "a.py"))["kind"] == "full"

    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "chat-b")
    chat_b = Connection.capture()
    scope_b = resolver.resolve(chat_b, fresh=True)
    first_b = cache.read(scope_b, str(project / "a.py"))
    assert first_b["kind"] == "full" and "def x_1" in first_b["text"], first_b
    assert scope_b.key is None and not scope_b.stub_ok and chat_b.host_pid is None


def test_two_processes_on_one_session_id_without_host_facts_share_no_stubs(no_proc, tmp_path, monkeypatch) -> None:
    """What remains on macOS once no bare pid is named: `claude --resume S` in a second terminal
    while the first still runs S gives two MCP servers with the same CLAUDE_CODE_SESSION_ID and no
    host facts anywhere. On Linux the record's host tells them apart; here the session id is all
    there is, and any process can be started with it, so the daemon's shared resolver serves no
    stub on it (an MCP server's own in-process cache serves only itself)."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.py").write_text(code(40))
    os.utime(project / "a.py", (1e9, 1e9))
    data = tmp_path / "data"
    _hook(data, "SessionStart", "S", project)
    _hook(data, "UserPromptSubmit", "S", project)
    resolver, cache = Resolver(str(data), shared=True), ReadCache(str(tmp_path / "state"))
    first = Connection("mcp-1", {"CLAUDE_CODE_SESSION_ID": "S"}, None, None, str(project))
    second = Connection("mcp-2", {"CLAUDE_CODE_SESSION_ID": "S"}, None, None, str(project))
    assert cache.read(resolver.resolve(first, fresh=True), "a.py")["kind"] == "full"
    assert cache.read(resolver.resolve(first, fresh=True), "a.py")["kind"] == "full"
    assert cache.read(resolver.resolve(second, fresh=True), "a.py")["kind"] == "full"
    assert resolver.resolve(second, fresh=True).reason == ID_ONLY


# -- the descriptor check (cache/paths.py): F_GETPATH instead of /proc/self/fd ----------------------

F_GETPATH = 50  # its value on macOS


def _fake_fcntl(monkeypatch, get_path) -> None:
    """An fcntl module with F_GETPATH: `get_path(fd)` is what the kernel would say (bytes), or raises."""
    fake = types.SimpleNamespace(F_GETPATH=F_GETPATH, fcntl=lambda fd, cmd, buf: get_path(fd).ljust(len(buf), b"\0"))
    monkeypatch.setattr(paths, "fcntl", fake)


def _kernel_path(fd: int) -> bytes:
    """What macOS's F_GETPATH answers: where the open descriptor really is (read here from /proc)."""
    return os.fsencode(os.readlink(f"/proc/self/fd/{fd}"))


def test_f_getpath_is_used_and_an_honest_answer_reads(world: World, c, monkeypatch) -> None:
    asked = []
    _fake_fcntl(monkeypatch, lambda fd: asked.append(fd) or _kernel_path(fd))
    assert world.read(c, "src/ok.py")["kind"] == "full"
    assert asked, "F_GETPATH was not consulted"


def test_a_root_reached_through_a_symlink_reads_with_f_getpath(world: World, monkeypatch) -> None:
    """macOS's /tmp and /var are symlinks into /private, and F_GETPATH names the /private path:
    roots are resolved first, so a workspace given by its symlinked name still reads."""
    alias = world.tmp / "var"
    alias.symlink_to(world.tmp, target_is_directory=True)
    world.write("src/ok.py", code(20))
    h = world.host()
    world.session(h, "s1", cwd=str(alias / "proj"))
    _fake_fcntl(monkeypatch, _kernel_path)
    r = world.read(world.conn(h, cwd=str(alias / "proj")), "src/ok.py")
    assert r["kind"] == "full" and r["path"] == "src/ok.py"


def test_f_getpath_naming_a_place_outside_the_roots_is_refused(world: World, c, monkeypatch) -> None:
    """The descriptor check overrides the walk: a path outside the roots is never returned."""
    _fake_fcntl(monkeypatch, lambda fd: b"/etc/hostname")
    _err(world.read(c, "src/ok.py"), "outside_roots")
    _fake_fcntl(monkeypatch, lambda fd: b"")  # an empty or relative answer is no proof either
    _err(world.read(c, "src/ok.py"), "outside_roots")
    _fake_fcntl(monkeypatch, lambda fd: b"src/ok.py")
    _err(world.read(c, "src/ok.py"), "outside_roots")


def test_a_root_in_another_case_than_on_disk_is_refused(world: World, c, monkeypatch) -> None:
    """APFS ignores case: F_GETPATH names the folder as stored (`Proj`), the root says `proj`.
    Not the same string, so refused rather than guessed equal."""
    def stored_case(fd: int) -> bytes:
        return _kernel_path(fd).replace(b"/proj/", b"/Proj/")

    _fake_fcntl(monkeypatch, stored_case)
    _err(world.read(c, "src/ok.py"), "outside_roots")


def test_f_getpath_failing_leaves_the_walk_as_the_proof(world: World, c, outside, monkeypatch) -> None:  # noqa: F811
    """F_GETPATH raising (a deleted file, an odd file system): the O_NOFOLLOW walk alone decides,
    and a real folder-for-symlink swap is still refused."""
    def fail(fd: int) -> bytes:
        raise OSError(9, "Bad file descriptor")

    _fake_fcntl(monkeypatch, fail)
    assert world.read(c, "src/ok.py")["kind"] == "full"
    _err(swapped_read(world, c, outside), "changed")


def test_without_the_walk_f_getpath_failing_is_unverified(world: World, c, monkeypatch) -> None:
    def fail(fd: int) -> bytes:
        raise OSError(9, "Bad file descriptor")

    monkeypatch.setattr(paths, "CAN_WALK", False)
    _fake_fcntl(monkeypatch, fail)
    assert "no way to prove" in _err(world.read(c, "src/ok.py"), "unverified")


def test_without_the_walk_f_getpath_catches_a_real_swap(world: World, c, outside, monkeypatch) -> None:  # noqa: F811
    """No openat walk, F_GETPATH as on macOS: a folder swapped for a symlink out is refused."""
    monkeypatch.setattr(paths, "CAN_WALK", False)
    _fake_fcntl(monkeypatch, _kernel_path)
    _err(swapped_read(world, c, outside), "outside_roots")


# -- the daemon's socket (cache/client.py): 104-byte sun_path, no /proc to shorten it --------------

def _deep(tmp_path: Path, size: int) -> Path:
    """A folder whose socket path (`<folder>/leanctx.sock`) is exactly `size` bytes."""
    base = str(tmp_path)
    pad = size - len(os.fsencode(base)) - len("/leanctx.sock") - 1
    folder = Path(base) / ("d" * pad)
    folder.mkdir()
    assert len(os.fsencode(client.socket_path(folder))) == size
    return folder


def test_a_socket_path_over_the_macos_limit_is_a_clear_error(no_proc, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(client, "SUN_PATH_MAX", 104)
    fits = _deep(tmp_path, 103)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        client.bind(s, client.socket_path(fits))  # 103 bytes + NUL: binds where it is
        assert os.path.exists(client.socket_path(fits))
    long = _deep(tmp_path, 104)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s, pytest.raises(OSError) as bind_err:
        client.bind(s, client.socket_path(long))
    assert "104 bytes, over this platform's 103-byte limit" in bind_err.value.strerror
    assert "LEANCTX_HOME" in bind_err.value.strerror
    assert not os.listdir(long), "nothing bound anywhere"
    with pytest.raises(client.DaemonUnavailable, match="over this platform's 103-byte limit"):
        client.ServiceClient(long, connect_timeout=0.2).request("status")


# `python -m leanctx ARGS` in a process that looks like macOS to the socket code
_MACOS_CLI = ("import runpy, sys; from leanctx.cache import client; client.FD_DIR = '/nonexistent/proc/self/fd'; "
              "client.SUN_PATH_MAX = 104; sys.argv = ['leanctx', *sys.argv[1:]]; runpy.run_module('leanctx', run_name='__main__')")


def test_the_daemon_refuses_to_start_on_a_socket_path_too_long(home, tmp_path) -> None:
    """`leanctx serve` in such a data dir: one line naming the limit and the way out, exit 2,
    no traceback, no socket left behind."""
    data = _deep(tmp_path, 110)
    env = dict(os.environ, LEANCTX_HOME=str(data))
    r = subprocess.run([sys.executable, "-c", _MACOS_CLI, "serve"], capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"leanctx: cannot start the daemon in {data}: the socket path is" in r.stderr
    assert "103-byte limit" in r.stderr and "set LEANCTX_HOME to a shorter folder" in r.stderr
    assert "Traceback" not in r.stderr
    assert not [n for n in os.listdir(data) if n.startswith(client.SOCKET_NAME)]


def test_linux_still_reaches_a_long_socket_path_through_proc(tmp_path) -> None:
    """The other side of the same branch: with /proc, a path of any length is bound."""
    long = _deep(tmp_path, 150)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        client.bind(s, client.socket_path(long))
    assert os.path.exists(client.socket_path(long))


# -- the data dir (paths.py via platformdirs): `~/Library/Application Support/leanctx` -------------

def test_hooks_run_from_a_data_dir_with_a_space(home: Path, tmp_path: Path) -> None:
    """The macOS data dir has a space in it: the hook command written into the host's config runs
    through `sh -c` as the host runs it, and the record lands in that data dir."""
    import json

    data = home / "Library" / "Application Support" / "leanctx"
    env = dict(os.environ, LEANCTX_HOME=str(data), CLAUDE_CONFIG_DIR=str(home / ".claude"))
    (home / ".claude").mkdir()
    from tests.conftest import run_cli

    r = run_cli("init", "--agent", "claude", env=env)
    assert r.returncode == 0, r.stderr
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert "'" in command and "Application Support" in command
    project = tmp_path / "proj"
    project.mkdir()
    done = subprocess.run(["sh", "-c", command], input=json.dumps(payload("claude", "SessionStart", "spaced", str(project))),
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (data / "conversations" / "claude" / "spaced.json").is_file()


if sys.platform != "linux":  # the simulations read the truth from /proc to play the macOS kernel
    pytestmark = pytest.mark.skip("simulates macOS with Linux's /proc")


# -- the daemon's peer identity (cache/peer.py) without /proc: LOCAL_PEERPID and psutil ---------------


class _DarwinSocket:
    """A socket as macOS answers getsockopt(SOL_LOCAL=0, LOCAL_PEERPID=2): the peer's pid, or an error."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid

    def getsockopt(self, level: int, opt: int, buflen: int = 0) -> bytes:
        import struct

        if (level, opt) != (0, 2) or self.pid is None:
            raise OSError(42, "Protocol not available")
        return struct.pack("i", self.pid)


def test_macos_peer_pid_comes_from_local_peerpid(monkeypatch) -> None:
    from leanctx.cache import peer

    monkeypatch.setattr(peer, "_LINUX", False)
    monkeypatch.setattr(peer, "sys", types.SimpleNamespace(platform="darwin"))
    who = peer.peer_of(_DarwinSocket(4242))
    assert who is not None and who.pid == 4242 and who.pidfd is None
    assert peer.peer_of(_DarwinSocket(None)) is None  # the kernel would not say: unverified, never guessed
    assert "platform" in peer.identify(None)


def test_macos_identity_names_no_host_and_refuses_a_reused_pid(monkeypatch, tmp_path) -> None:
    """Through psutil (what macOS has): the process's own environment and cwd, no host (so the
    shared daemon serves it no stub on a session id alone), and a process younger than the accept
    is a reused pid."""
    import time

    from leanctx.cache import peer

    monkeypatch.setattr(peer, "_LINUX", False)
    env = dict(os.environ, CLAUDE_CODE_SESSION_ID="S-mac", OTHER_SECRET="x")
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], env=env, cwd=tmp_path,
                             stdin=subprocess.PIPE)
    try:
        time.sleep(0.05)
        ident = peer.identify(peer.Peer(child.pid, None, time.time()))
        assert not isinstance(ident, str), ident
        assert ident.env == {"CLAUDE_CODE_SESSION_ID": "S-mac"} and ident.cwd == str(tmp_path)
        assert (ident.host_pid, ident.host_start_ticks) == (None, None)
        assert "pid reused" in peer.identify(peer.Peer(child.pid, None, time.time() - 3600))
    finally:
        child.stdin.close()
        child.wait(10)
    assert "cannot read process" in peer.identify(peer.Peer(child.pid, None, time.time()))
