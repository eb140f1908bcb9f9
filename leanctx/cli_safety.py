"""What keeps every `leanctx` command from ending in a traceback or stopping half-way.

- stdout and stderr go through writers that drop output once the reader is gone
  (`leanctx init | head -1`): a closed pipe must never stop an install between two files, and
  Python's final flush must not complain about it either.
- The last-resort handler turns any exception a command did not handle into one line naming the
  log file that holds the traceback: exit 2 when the cause is the user's input or environment
  (a config we refuse, a state-store error, an OS error on their files), 1 for our own bugs.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1
LOG_NAME = "cli.log"


class _PipeTolerantRaw(io.RawIOBase):
    """A file descriptor whose writes are dropped (reported as done) once the reader went away."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.reader_gone = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data) -> int:  # type: ignore[override]
        if not self.reader_gone:
            try:
                return os.write(self._fd, data)
            except (BrokenPipeError, ConnectionResetError):
                self.reader_gone = True
            except BlockingIOError:
                raise
            except OSError:
                self.reader_gone = True  # EIO from a vanished terminal: same thing
        return len(data)

    def close(self) -> None:  # the fd belongs to the process, not to us
        super().close()


def _tolerant(stream):
    """A text stream like `stream` (encoding, buffering) on a pipe-tolerant writer of its fd."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return stream  # not a real file (a test runner's capture): leave it
    return io.TextIOWrapper(
        io.BufferedWriter(_PipeTolerantRaw(fd)),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=stream.line_buffering,
        write_through=getattr(stream, "write_through", False),
    )


def tolerate_closed_output() -> None:
    """Swap sys.stdout and sys.stderr for pipe-tolerant ones (once, at the start of a command)."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(getattr(stream, "buffer", None), io.BufferedWriter) and isinstance(
            getattr(stream.buffer, "raw", None), _PipeTolerantRaw
        ):
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
        setattr(sys, name, _tolerant(stream))


def is_bad_input(exc: BaseException) -> bool:
    """The user's input or environment, not our bug: refusals, state-store errors, OS errors."""
    from leanctx.installer.files import ConfigError

    if isinstance(exc, (ConfigError, OSError)):
        return True
    try:
        from leanctx.state.errors import StateError
    except Exception:  # noqa: BLE001 - the handler itself must never fail
        return False
    return isinstance(exc, StateError)


def report(exc: BaseException) -> int:
    """Log the traceback, print one line, and return the exit code for `exc`."""
    log = _write_log(exc)
    where = f" (details in {log})" if log else ""
    bad_input = is_bad_input(exc)
    if isinstance(exc, OSError) and exc.strerror:
        message = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        message = str(exc) if bad_input else f"internal error: {type(exc).__name__}: {exc}"
    message = " ".join(message.split()) or type(exc).__name__
    try:
        sys.stderr.write(f"leanctx: {message}{where}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return EXIT_BAD_INPUT if bad_input else EXIT_INTERNAL


def _write_log(exc: BaseException) -> Path | None:
    """Append the traceback to `<data dir>/logs/cli.log` (rotated at 1 MiB), else to a fresh
    private temp file. Only the command's name and where it failed are kept: never its arguments
    nor the exception's message, which can quote a user's text (`state summary "..."`); the
    message went to stderr already."""
    import tempfile
    import time
    import traceback

    text = f"--- {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} leanctx {command_path(sys.argv[1:])}\n"
    text += "Traceback (most recent call last):\n" + "".join(traceback.format_tb(exc.__traceback__))
    text += f"{type(exc).__module__}.{type(exc).__qualname__} (message not logged)\n"
    try:
        from leanctx import logfile, paths, safedir

        base = paths.data_dir()
        if safedir.problem(base) is None:
            path = base / "logs" / LOG_NAME
            logfile.append(str(path), text)
            return path
    except Exception:  # noqa: BLE001 - the data dir may be the very problem: fall back to a temp file
        pass
    try:
        fd, name = tempfile.mkstemp(prefix="leanctx-error-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(text)
        return Path(name)
    except Exception:  # noqa: BLE001
        return None


def command_path(argv: list[str]) -> str:
    """The subcommand names at the start of `argv` (`state summary`), none of its arguments."""
    try:
        import click

        from leanctx.cli import main

        words: list[str] = []
        group = main
        for word in argv:
            if not isinstance(group, click.Group) or word not in group.commands:
                break
            words.append(word)
            group = group.commands[word]
        return " ".join(words)
    except Exception:  # noqa: BLE001 - the handler itself must never fail
        return ""
