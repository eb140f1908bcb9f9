"""Drive an interactive host CLI (Claude Code's terminal UI) in a pseudo-terminal, standard library only.

    term = Terminal([claude, "--allowedTools", tool], cwd=proj, env=env)
    term.wait_for(IDLE)                   # a regular expression over the screen as it is now
    term.submit("read big.py")            # type, then Enter
    term.wait_for("ANSWER-1")
    term.close()                          # kills the whole process group

The program's output is applied to a small screen model (`Screen`: printable characters, CR, LF
with scrolling, backspace, cursor movement, erase in line/display, save/restore cursor; colours
and modes ignored), because a terminal UI such as Ink redraws by moving the cursor and rewriting
only the cells that changed: the byte stream alone does not say what is shown. `wait_for` matches
against the screen's non-blank rows with all whitespace removed, joined by newlines (so "? for
shortcuts" reads "?forshortcuts"). Each wait is bounded (generous timeouts; a miss raises with
the screen), and nothing is timed.
"""
from __future__ import annotations

import codecs
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import threading
import time
import unicodedata
from typing import Mapping, Sequence

TOKENS = re.compile(r"\x1b\[([0-9;?<>=]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\"
                    r"|\x1b[()][0-9A-Za-z]|\x1b([@-Z\\-_=>78])|([\r\n\b])|([^\x00-\x1f\x7f\x1b]+)|[\x00-\x1f\x7f]")
ENTER = "\r"
UP = "\x1b[A"
DOWN = "\x1b[B"
ESC = "\x1b"


class Screen:
    """The cells a terminal of `rows` x `cols` shows after the output fed to it."""

    def __init__(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols
        self.cells = [[" "] * cols for _ in range(rows)]
        self.y = self.x = 0
        self.saved = (0, 0)

    def _line_feed(self) -> None:
        if self.y == self.rows - 1:
            self.cells.pop(0)
            self.cells.append([" "] * self.cols)
        else:
            self.y += 1

    def _put(self, ch: str) -> None:
        width = 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 0 if unicodedata.combining(ch) else 1
        if width == 0:
            return
        if self.x + width > self.cols:
            self.x = 0
            self._line_feed()
        self.cells[self.y][self.x] = ch
        if width == 2 and self.x + 1 < self.cols:
            self.cells[self.y][self.x + 1] = ""
        self.x += width

    def _csi(self, params: str, final: str) -> None:
        nums = [int(p) if p.isdigit() else 0 for p in params.lstrip("?<>=").split(";")] if params else []
        n = max(1, nums[0]) if nums else 1
        if params.startswith(("?", "<", ">", "=")):
            return  # modes and queries
        if final == "A":
            self.y = max(0, self.y - n)
        elif final in "Be":
            self.y = min(self.rows - 1, self.y + n)
        elif final in "Ca":
            self.x = min(self.cols - 1, self.x + n)
        elif final == "D":
            self.x = max(0, self.x - n)
        elif final == "E":
            self.y, self.x = min(self.rows - 1, self.y + n), 0
        elif final == "F":
            self.y, self.x = max(0, self.y - n), 0
        elif final in "G`":
            self.x = min(self.cols - 1, n - 1)
        elif final == "d":
            self.y = min(self.rows - 1, n - 1)
        elif final in "Hf":
            row = nums[0] if nums and nums[0] else 1
            col = nums[1] if len(nums) > 1 and nums[1] else 1
            self.y, self.x = min(self.rows, row) - 1, min(self.cols, col) - 1
        elif final == "K":
            mode = nums[0] if nums else 0
            a, b = {0: (self.x, self.cols), 1: (0, self.x + 1), 2: (0, self.cols)}.get(mode, (0, 0))
            self.cells[self.y][a:b] = [" "] * (b - a)
        elif final == "J":
            mode = nums[0] if nums else 0
            self._csi("", "K") if mode == 0 else None
            rows = range(self.y + 1, self.rows) if mode == 0 else range(0, self.y) if mode == 1 else range(self.rows)
            for r in rows:
                self.cells[r] = [" "] * self.cols
        elif final == "X":
            self.cells[self.y][self.x:self.x + n] = [" "] * min(n, self.cols - self.x)

    def feed(self, text: str) -> None:
        for m in TOKENS.finditer(text):
            params, final, esc, ctl, printable = m.group(1), m.group(2), m.group(3), m.group(4), m.group(5)
            if final is not None:
                self._csi(params or "", final)
            elif esc == "7":
                self.saved = (self.y, self.x)
            elif esc == "8":
                self.y, self.x = self.saved
            elif ctl == "\r":
                self.x = 0
            elif ctl == "\n":
                self._line_feed()
            elif ctl == "\b":
                self.x = max(0, self.x - 1)
            elif printable:
                for ch in printable:
                    self._put(ch)

    def text(self) -> str:
        """The non-blank rows, each without whitespace, joined by newlines."""
        rows = (re.sub(r"\s+", "", "".join(r)) for r in self.cells)
        return "\n".join(r for r in rows if r)


class Terminal:
    def __init__(self, argv: Sequence[str], *, cwd, env: Mapping[str, str], rows: int = 50, cols: int = 200) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(
            list(argv), cwd=str(cwd), env=dict(env), stdin=slave, stdout=slave, stderr=slave, close_fds=True,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self._master = master
        self.screen = Screen(rows, cols)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="tty-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self._master], [], [], 0.2)
                if ready:
                    data = os.read(self._master, 65536)
                    if not data:
                        return
                    with self._lock:
                        self.screen.feed(self._decoder.decode(data))
                elif self.proc.poll() is not None:
                    return
            except OSError:  # the other side closed (EIO)
                return

    def shown(self) -> str:
        """The screen now (see Screen.text)."""
        with self._lock:
            return self.screen.text()

    def wait_for(self, pattern: str, timeout: float = 120.0, absent: str | None = None) -> re.Match:
        """Wait until the screen shows `pattern` (and, if given, not `absent`)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            shown = self.shown()
            found = rx.search(shown)
            if found and not (absent and re.search(absent, shown)):
                return found
            if self.proc.poll() is not None or time.monotonic() > deadline:
                state = f"exited with {self.proc.returncode}" if self.proc.poll() is not None else f"{timeout:.0f} s passed"
                raise AssertionError(f"{pattern!r} was not shown ({state}); the screen:\n{shown}")
            time.sleep(0.1)

    def send(self, keys: str) -> None:
        os.write(self._master, keys.encode())

    def submit(self, text: str) -> None:
        """Type `text` and press Enter (a separate write: pasted text with a newline is not submitted)."""
        self.send(text)
        time.sleep(0.3)  # pacing only: the input box takes the text before the Enter (no assertion waits on it)
        self.send(ENTER)

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self._reader.join(5)
        try:
            os.close(self._master)
        except OSError:
            pass

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
