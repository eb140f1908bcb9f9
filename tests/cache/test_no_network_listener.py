"""The daemon holds no TCP or UDP socket: its only endpoint is the Unix socket in the data dir.

A port on 127.0.0.1 is open to every local account (one can bind it while the daemon is down
and answer in its place), so nothing of leanctx may listen on one. This starts a real daemon
for a data dir that an older install left its http read gate's port and secret in, lets it
serve, and compares the socket inodes among its open descriptors with /proc/net/{tcp,udp}{,6}.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from leanctx.cache import client

from .conftest import _support

NET_TABLES = ("/proc/net/tcp", "/proc/net/tcp6", "/proc/net/udp", "/proc/net/udp6")


def socket_inodes(pid: int) -> set[int]:
    """The inodes of every socket among a process's open descriptors."""
    found: set[int] = set()
    folder = f"/proc/{pid}/fd"
    for fd in os.listdir(folder):
        try:
            target = os.readlink(f"{folder}/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[len("socket:["):-1]))
    return found


def network_inodes() -> dict[int, str]:
    """inode -> table line of every TCP/UDP socket on this machine (IPv4 and IPv6)."""
    found: dict[int, str] = {}
    for table in NET_TABLES:
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) > 9:
                        found[int(parts[9])] = f"{table}: {line.strip()}"
        except FileNotFoundError:  # a kernel without IPv6
            continue
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd") or not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc")
def test_the_running_daemon_holds_no_tcp_or_udp_socket(env: dict, data_dir: Path, tmp_path: Path) -> None:
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    with socket.socket() as probe:  # a free port, written where the old http read gate kept its settings
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (data_dir / "read_gate.json").write_text(json.dumps({"port": port, "secret": "a" * 64}))
    (data_dir / "read_gate.json").chmod(0o600)
    proc = _support.start_daemon(env, tmp_path / "daemon.log")
    try:
        probe = client.ServiceClient(data_dir, timeout=20.0)
        try:
            assert isinstance(probe.request("status"), dict)  # it serves
        finally:
            probe.close()
        held = socket_inodes(proc.pid)
        assert held, "the daemon holds no socket at all: not the process serving the data dir"
        on_network = {i: line for i, line in network_inodes().items() if i in held}
        assert on_network == {}, f"the daemon holds TCP/UDP sockets: {on_network}"
        # its one endpoint: a Unix socket, 0600, in the 0700 data dir
        sock = Path(client.socket_path(str(data_dir)))
        assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    finally:
        proc.terminate()
        proc.wait(10)
