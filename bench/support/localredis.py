"""A private, throw-away redis-server on 127.0.0.1 (the tests and bench/state_bench.py use it).

No persistence (`--save ""`, no AOF), a free port, its own working folder; stopped on exit.
The readiness probe speaks RESP over a plain socket, so starting it needs no redis-py.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time


def server_path() -> str | None:
    return shutil.which("redis-server")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = s.recv(64)
            return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")  # up, and asking for a password
    except OSError:
        return False


class LocalRedis:
    """`with LocalRedis() as url:` -> `redis://127.0.0.1:<port>/0`."""

    def __init__(self, exe: str | None = None, extra_args: tuple[str, ...] = (), as_uid: int | None = None) -> None:
        """`as_uid`: run the server as that account (setpriv; the caller must be root), with a unix
        socket `redis.sock` in its working folder as well."""
        self.exe = exe or server_path()
        self.extra_args = extra_args
        self.as_uid = as_uid
        self.proc: subprocess.Popen | None = None
        self.workdir: str | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_path(self) -> str:
        return os.path.join(self.workdir or "", "redis.sock")

    def start(self, timeout: float = 10.0) -> str:
        if not self.exe:
            raise FileNotFoundError("redis-server is not installed (Debian: apt-get install redis-server)")
        self.workdir = tempfile.mkdtemp(prefix="leanctx-redis-")
        prefix: list[str] = []
        extra = list(self.extra_args)
        if self.as_uid is not None:
            os.chown(self.workdir, self.as_uid, self.as_uid)
            prefix = ["setpriv", f"--reuid={self.as_uid}", f"--regid={self.as_uid}", "--clear-groups"]
            extra += ["--unixsocket", self.socket_path, "--unixsocketperm", "777"]
        last_error = ""
        for _ in range(5):
            self.port = _free_port()
            self.proc = subprocess.Popen(
                [*prefix, self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", self.workdir, "--daemonize", "no", "--loglevel", "warning", "--databases", "16",
                 *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                if _ping(self.port):
                    return self.url
                time.sleep(0.02)
            if self.proc.poll() is not None:
                last_error = self._stderr()
            self._kill()  # port taken meanwhile, or too slow: try another port
        raise RuntimeError(f"redis-server did not start: {last_error}")

    def stop(self) -> None:
        self._kill()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()

    def _stderr(self) -> str:
        try:
            return (self.proc.stderr.read() if self.proc and self.proc.stderr else b"").decode(errors="replace")[-500:]
        except (OSError, ValueError):
            return ""

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":  # manual trial: prints the URL, runs until Ctrl-C
    with LocalRedis() as url:
        print(url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    os._exit(0)
