"""What a host's own reader or shell command reads, and what its output stands for.

The read gate (hooks/readgate.py) answers a host's built-in reads the way `ctx_read` is answered,
so each host module (agents/<host>.py) turns its tool calls into an `Ask`: one file, one span of
lines. Shell commands are recognised here, once for every host, and only in their plainest forms:

    cat F          cat -n F        nl -ba F
    head F         head -n N F     head -N F
    tail -n N F    tail -N F       tail -n +K F
    sed -n 'Ap' F  sed -n 'A,Bp' F sed -n 'A,$p' F

each also as the one script of `bash -c '…'` / `bash -lc '…'` (or sh, zsh; once, not nested),
with F one file, named plainly (letters, digits, `/._-+,@:%=`, or quoted without `$`, backquotes
or backslashes). Anything else (a pipe, `;`, `&&`, a redirection, a glob, a variable, a second file,
an option we do not know) is not a read of a file's content as far as the cache goes: it runs and
is never credited. A relative F needs the absolute working directory the host reports.

`shell_content` undoes the only formatting these commands add (`cat -n`/`nl -ba` line numbers,
and the final newline) and returns None for any output without exactly that shape; the daemon then
credits it only when it equals the file's lines on disk at that moment.

Standard library only, no `re` or `shlex` (the hook path is timed): a tiny tokenizer that refuses
rather than guesses.
"""

from __future__ import annotations

import os

MAX_COMMAND_CHARS = 4096
MAX_PATH_CHARS = 4096
MAX_LINE = 10**9
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,@:%=")
_QUOTED_BAD = frozenset("$`\\!\n\r\x00")
SHELLS = ("bash", "sh", "zsh")  # `<shell> -c '<script>'` / `-lc`: the script is what runs


class Ask:
    """One file and the span of its lines a call reads. `end` None: to the end of the file.
    `last`: the last N lines (`tail -n N`), start/end unused. `numbered`: each output line
    carries `%6d\\t` (`cat -n`, `nl -ba`). `reader`: "builtin" or "shell" (stats, stub wording)."""

    __slots__ = ("path", "start", "end", "last", "numbered", "reader")

    def __init__(self, path: str, start: int = 1, end: int | None = None, last: int | None = None,
                 numbered: bool = False, reader: str = "builtin") -> None:
        self.path, self.start, self.end, self.last = path, start, end, last
        self.numbered, self.reader = numbered, reader

    def args(self) -> dict:
        """The daemon's gate/credit arguments for this span."""
        if self.last is not None:
            return {"path": self.path, "last_lines": self.last, "reader": self.reader}
        return {"path": self.path, "start_line": self.start, "end_line": self.end, "reader": self.reader}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ask) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        return "Ask(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


def line_number(value: object) -> int | None:
    """A positive line number or count from a tool call's JSON, else None (a bool is no number)."""
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_LINE:
        return value
    return None


def abs_path(value: object) -> str | None:
    """An absolute path from a tool call's JSON, else None."""
    if isinstance(value, str) and 0 < len(value) <= MAX_PATH_CHARS and "\x00" not in value and os.path.isabs(value):
        return value
    return None


def offset_limit_ask(tool_input: object, default_limit: int) -> Ask | None:
    """The span of a `Read {file_path, offset, limit}` call (Claude Code, CodeBuddy, Droid: lines
    from 1, `default_limit` lines when it names none); None when we cannot say for sure (a
    relative path, an offset or limit that is not a positive whole number, an argument we do not
    know: a PDF's pages, an image's quality)."""
    if not isinstance(tool_input, dict) or set(tool_input) - {"file_path", "offset", "limit"}:
        return None
    path = abs_path(tool_input.get("file_path"))
    offset, limit = tool_input.get("offset"), tool_input.get("limit")
    start = 1 if offset is None else line_number(offset)
    count = default_limit if limit is None else line_number(limit)
    if path is None or start is None or count is None:
        return None
    return Ask(path, start, start + count - 1)


def words(command: str) -> list[str] | None:
    """Split a one-line command into words; None for anything but plain and quoted words
    separated by spaces (no operator, expansion, escape or comment can survive this)."""
    if not isinstance(command, str) or not command or len(command) > MAX_COMMAND_CHARS:
        return None
    out: list[str] = []
    i, n = 0, len(command)
    while i < n:
        c = command[i]
        if c in " \t":
            i += 1
            continue
        word = []
        while i < n and command[i] not in " \t":
            c = command[i]
            if c in "'\"":
                j = command.find(c, i + 1)
                if j < 0:
                    return None
                inner = command[i + 1:j]
                if c == '"' and any(ch in _QUOTED_BAD for ch in inner):
                    return None
                if "\n" in inner or "\r" in inner or "\x00" in inner:
                    return None
                word.append(inner)
                i = j + 1
            elif c in _PLAIN or (ord(c) > 127 and c.isprintable()):
                word.append(c)
                i += 1
            else:
                return None
        out.append("".join(word))
    return out or None


def _count(text: str) -> int | None:
    if text.isdigit() and len(text) <= 9:
        value = int(text)
        return value if 1 <= value <= MAX_LINE else None
    return None


def _climbs_after_a_name(word: str) -> bool:
    """`..` after a folder name (or anywhere in an absolute path): through a symlink it leads where
    the kernel says, not where the cleaned-up name says. Leading `..` of a relative name climb out
    of the working directory the host reports, which is a real path (getcwd)."""
    named = os.path.isabs(word)
    for part in word.split("/"):
        if part == "..":
            if named:
                return True
        elif part not in ("", "."):
            named = True
    return False


def _file(word: str, cwd: str | None) -> str | None:
    if not word or word.startswith("-") or "\x00" in word or _climbs_after_a_name(word):
        return None
    if os.path.isabs(word):
        return os.path.normpath(word)
    if not cwd or not os.path.isabs(cwd):
        return None
    return os.path.normpath(os.path.join(cwd, word))


def _lines_option(args: list[str]) -> tuple[str, list[str]] | None:
    """`-n N`, `-nN`, `-N`, `--lines=N` at the front: (N as written, the rest); ("", args) if none."""
    if not args:
        return "", args
    a = args[0]
    if a == "-n" and len(args) >= 2:
        return args[1], args[2:]
    if a.startswith("--lines="):
        return a[len("--lines="):], args[1:]
    if a.startswith("-n") and len(a) > 2:
        return a[2:], args[1:]
    if a.startswith("-") and a[1:].isdigit():
        return a[1:], args[1:]
    return "", args


def _sed_span(script: str) -> tuple[int, int | None] | None:
    if not script.endswith("p"):
        return None
    body = script[:-1]
    first, comma, last = body.partition(",")
    start = _count(first)
    if start is None:
        return None
    if not comma:
        return start, start
    if last == "$":
        return start, None
    end = _count(last)
    return (start, end) if end is not None and end >= start else None


def shell_ask(command: str, cwd: str | None) -> Ask | None:
    """The one file span a plain read command prints; None for any other command."""
    argv = words(command)
    if not argv:
        return None
    prog, args = argv[0], argv[1:]
    if prog in SHELLS and len(args) == 2 and args[0] in ("-c", "-lc"):
        # `bash -lc 'cat F'`: the one quoted script, read by the same rules (never nested)
        inner = words(args[1])
        return shell_ask(args[1], cwd) if inner and inner[0] not in SHELLS else None
    if args and args[0] == "--" and prog != "sed":
        args = args[1:]
    if prog == "cat":
        numbered = bool(args) and args[0] == "-n"
        args = args[1:] if numbered else args
        if len(args) != 1:
            return None
        path = _file(args[0], cwd)
        return Ask(path, numbered=numbered, reader="shell") if path else None
    if prog == "nl":
        if args[:1] == ["-ba"]:
            args = args[1:]
        elif args[:2] == ["-b", "a"]:
            args = args[2:]
        else:
            return None  # plain `nl` leaves blank lines unnumbered: another shape
        if len(args) != 1:
            return None
        path = _file(args[0], cwd)
        return Ask(path, numbered=True, reader="shell") if path else None
    if prog in ("head", "tail"):
        got = _lines_option(args)
        if got is None:
            return None
        written, rest = got
        if len(rest) != 1:
            return None
        path = _file(rest[0], cwd)
        if path is None:
            return None
        if prog == "head":
            count = 10 if written == "" else _count(written)
            return Ask(path, 1, count, reader="shell") if count else None
        if written.startswith("+"):
            start = _count(written[1:])
            return Ask(path, start, None, reader="shell") if start else None
        count = 10 if written == "" else _count(written)
        return Ask(path, last=count, reader="shell") if count else None
    if prog == "sed":
        if len(args) != 3 or args[0] != "-n":
            return None
        span = _sed_span(args[1])
        path = _file(args[2], cwd)
        if span is None or path is None:
            return None
        return Ask(path, span[0], span[1], reader="shell")
    return None


def shell_content(ask: Ask, output: str) -> str | None:
    """The file text `output` stands for: numbers stripped from a numbered listing, one final
    newline dropped. None when the output has not exactly that shape (or is empty)."""
    if not isinstance(output, str) or not output:
        return None
    text = output[:-1] if output.endswith("\n") else output
    if not ask.numbered:
        return text or None
    lines = text.split("\n")
    plain = []
    for i, line in enumerate(lines, start=ask.start):
        prefix = f"{i:6d}\t"
        if not line.startswith(prefix):
            return None
        plain.append(line[len(prefix):])
    return "\n".join(plain) or None
