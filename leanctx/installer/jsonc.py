"""Text-preserving editor for JSON with comments (JSONC).

The installer adds and removes its own hook entries in config files that users also edit by hand
(Claude Code settings.json, Cursor and Codex hooks.json). Re-serializing such a file would destroy
the user's comments, key order and layout, so this module parses to a tree that remembers where
every value sits in the text and edits by splicing: every byte outside a spliced span survives.

Dialect: strict JSON plus `//` and `/* */` comments, trailing commas in objects and arrays and a
leading UTF-8 BOM. Duplicate keys are allowed and the last one wins, as with `json.loads`.

Host configs can be big (Claude Code's ~/.claude.json keeps every project's prompt history: tens
of MB), while we only ever edit a few top-level members. So text that is strict JSON, the usual
case, is validated by `json` at C speed without keeping any value; a container's entries are
located (by a shallow scanner that skips values by regex, building nothing) and a value decoded
only when an edit or a lookup reaches it. Text with comments takes the same path on a copy with
the comments blanked (same offsets). Only what `json` still rejects (trailing commas, or an error
to report) goes through the span-recording parser below, which builds the whole tree.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from json.decoder import scanstring

__all__ = ["Document", "JsoncError", "Path", "has_comments", "is_strict_json_utf8", "loads"]

Path = tuple[str | int, ...]
"""A location in the document: object keys (str) and array indexes (int), outermost first."""

_BOM = "\ufeff"
_BOM_BYTES = _BOM.encode("utf-8")
_UTF8_CHUNK = 1 << 16  # a chunk decodes to up to 4x its size: keep that small
_WS = re.compile(r"[ \t\r\n]*")
_HSPACE = re.compile(r"[ \t]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_INDENTED_LINE = re.compile(r"\n([ \t]+)[^ \t\r\n]")
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|(/[/*])', re.S)
# Shallow scanning of strict JSON (no comments): skip everything up to the next bracket, strings
# included, in one C-level match; and the end of a scalar or of a string. Quantifiers are
# possessive where Python has them (3.11+): otherwise the regex engine keeps a backtracking point
# per step of a match (per escape in a string: 300+ MB for a string of millions of `\n`).
_POSSESSIVE = sys.version_info >= (3, 11)
_PLUS = "+" if _POSSESSIVE else ""
_TO_BRACKET = re.compile(r'(?:[^"\[\]{}]+%s|"[^"\\]*%s(?:\\.[^"\\]*%s)*%s")*%s' % ((_PLUS,) * 5))
_STRING_TAIL = re.compile(r'[^"\\]*%s(?:\\.[^"\\]*%s)*%s"' % ((_PLUS,) * 3))
_SCALAR = re.compile(r"[-+.0-9A-Za-z]+")
# Up to the next `,` / `:` outside strings. With possessive quantifiers one match also steps over
# those that end a line, up to the first followed by something on the same line; without them
# `_strict_spacing` steps from separator to separator (one match over a whole big file would
# keep a backtracking point per step).
_TO_SEP = {
    sep: re.compile(
        r'(?:[^"%s]++|"[^"\\]*+(?:\\.[^"\\]*+)*+"|%s(?=[\r\n]))*+' % (sep, sep)
        if _POSSESSIVE
        else r'(?:[^"%s]+|"[^"\\]*(?:\\.[^"\\]*)*")*' % sep
    )
    for sep in ",:"
}
# Up to the next `/` outside strings (3.11+ only: see above), to find comments in C.
_TO_SLASH = re.compile(r'(?:[^"/]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+') if _POSSESSIVE else None
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS: dict[str, object] = {"true": True, "false": False, "null": None}


class JsoncError(ValueError):
    """Parse failure, located so the installer can point the user at the exact spot.

    `pos` is the 0-based offset in the text; `line` and `col` are 1-based, and `col` does not
    count a leading BOM (editors do not show it)."""

    def __init__(self, msg: str, text: str, pos: int) -> None:
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        if line == 1 and text.startswith(_BOM) and pos > 0:
            col -= 1
        super().__init__(f"{msg} at line {line} column {col}")
        self.msg, self.line, self.col, self.pos = msg, line, col, pos


_UNSET = object()
STRICT_FAST_PATH = True
"""Tests turn this off to check the lazy strict-JSON path against the full parser."""


class _Node:
    """A parsed value and its span [start, end) in the text. Containers also have entries, so an
    edit knows where each child, its key and its separating comma are.

    Nodes of strict-JSON text are lazy (`lazy` is set): `entries` is scanned on first use
    (`_scan_entries`), `value` taken from the parent's value or decoded from the span."""

    __slots__ = ("start", "end", "_value", "_entries", "_lazy")

    def __init__(self, start: int, end: int, value: object = _UNSET, entries: list[_Entry] | None = None, lazy: _Lazy | None = None) -> None:
        self.start, self.end, self._value, self._entries, self._lazy = start, end, value, entries, lazy

    @property
    def value(self) -> object:
        if self._value is _UNSET:
            assert self._lazy is not None
            lazy = self._lazy
            if lazy.utf8:  # the span's bytes, decoded: only this value is ever widened to str
                self._value = _STRICT.decode(lazy.text[self.start : self.end].encode("latin-1").decode("utf-8"))
            else:
                self._value = _STRICT.raw_decode(lazy.text, self.start)[0]  # no copy of the span
        return self._value

    @property
    def opener(self) -> str:
        """`{` for an object, `[` for an array, "" for a scalar; never decodes the value."""
        if self._lazy is not None:
            char = self._lazy.text[self.start]
            return char if char in "[{" else ""
        return "{" if isinstance(self._value, dict) else "[" if isinstance(self._value, list) else ""

    @property
    def entries(self) -> list[_Entry]:
        """Array elements or object members in text order; empty for scalars."""
        if self._entries is None:
            assert self._lazy is not None
            self._entries = _scan_entries(self, self._lazy)
        return self._entries


class _Lazy:
    """What the lazy nodes of one strict-JSON text share: the text, and the end of every container
    value scanned so far by its start, kept across edits that do not touch it (`Document._splice`),
    so a big member (a 5 MB permissions list) is skipped once per document, not once per edit.
    `utf8`: the text is UTF-8 bytes read as latin-1 (`Document.from_utf8`), so keys and values
    are decoded from their spans' bytes."""

    __slots__ = ("text", "ends", "utf8")

    def __init__(self, text: str, ends: dict[int, int] | None = None, utf8: bool = False) -> None:
        self.text, self.ends, self.utf8 = text, ends if ends is not None else {}, utf8


@dataclass(slots=True)
class _Entry:
    """One array element or object member: the text from `start` to `node.end`."""

    start: int  # the element's first character, or the key's opening quote for a member
    node: _Node
    key: str | None  # None for array elements
    comma: int | None = None  # offset of the comma that follows it, if any


def _value_end(lazy: _Lazy, start: int) -> int:
    """End of the strict-JSON value starting at `start`, without decoding it."""
    text = lazy.text
    char = text[start]
    if char == '"':
        return _STRING_TAIL.match(text, start + 1).end()
    if char not in "[{":
        return _SCALAR.match(text, start).end()
    known = lazy.ends.get(start)
    if known is not None:
        return known
    pos, depth = start, 0
    while True:
        pos = _TO_BRACKET.match(text, pos).end()
        depth += 1 if text[pos] in "[{" else -1
        pos += 1
        if not depth:
            lazy.ends[start] = pos
            return pos


def _scan_entries(node: _Node, lazy: _Lazy) -> list[_Entry]:
    """The entries of a container node of strict-JSON text (already validated by `json`), each
    child a lazy node; children's values come from the node's value (the last duplicate key is
    the one `json` kept; an earlier duplicate decodes its own span when asked)."""
    text = lazy.text
    if text[node.start] not in "[{":
        return []
    is_object = text[node.start] == "{"
    close = node.end - 1
    entries: list[_Entry] = []
    pos = _WS.match(text, node.start + 1).end()
    while pos < close:
        entry_start, key = pos, None
        if is_object:
            key, pos = scanstring(text, pos + 1)
            if lazy.utf8 and not key.isascii():
                key = _STRICT.decode(text[entry_start:pos].encode("latin-1").decode("utf-8"))
            pos = _WS.match(text, _WS.match(text, pos).end() + 1).end()  # past the colon
        end = _value_end(lazy, pos)
        entry = _Entry(entry_start, _Node(pos, end, lazy=lazy), key)
        entries.append(entry)
        pos = _WS.match(text, end).end()
        if text[pos] == ",":
            entry.comma = pos
            pos = _WS.match(text, pos + 1).end()
    value = node._value  # children take their values from a decoded parent, else decode their own span
    if isinstance(value, dict):
        last = {entry.key: entry for entry in entries}
        for key, entry in last.items():
            entry.node._value = value[key]
    elif isinstance(value, list):
        for entry, item in zip(entries, value):
            entry.node._value = item
    return entries


def _check_utf8(data: bytes | memoryview) -> None:
    """UnicodeDecodeError unless `data` is UTF-8, checked a chunk at a time: a decoded copy of
    a big file would take up to four times its size."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    try:
        for start in range(0, len(data), _UTF8_CHUNK):
            decoder.decode(view[start : start + _UTF8_CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        codecs.decode(data, "utf-8")  # raises again, with the offset in the whole file
        raise


def is_strict_json_utf8(data: bytes, bom_ok: bool = False) -> bool:
    """True if `data` is UTF-8 strict JSON (a leading BOM only with `bom_ok`), checked without
    building its values or a decoded copy of it (the text is read as latin-1: every JSON token is
    ASCII, and UTF-8 bytes are never control characters)."""
    view = memoryview(data)[3 if bom_ok and data.startswith(_BOM_BYTES) else 0 :]
    try:
        _check_utf8(view)
    except UnicodeDecodeError:
        return False
    text = str(view, "latin-1")
    start = _WS.match(text).end()
    try:
        end = _VALIDATOR.raw_decode(text, start)[1]
    except (ValueError, RecursionError):
        return False
    return _WS.match(text, end).end() == len(text)


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _discard(pairs: list) -> None:
    return None


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
# Checks the syntax at C speed but keeps no objects: a big file's values are never all built.
_VALIDATOR = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_discard)


def _strict_root(text: str, ends: dict[int, int] | None = None, decode: bool = False, utf8: bool = False) -> _Node | None:
    """The lazy root node if `text` is strict JSON (a BOM allowed), else None; `ends` are
    container ends already known in this text. Its value is decoded only with `decode`."""
    if not STRICT_FAST_PATH:
        return None
    start = _WS.match(text, 1 if text.startswith(_BOM) else 0).end()
    try:
        value, end = (_STRICT if decode else _VALIDATOR).raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    if _WS.match(text, end).end() != len(text):
        return None
    return _Node(start, end, value if decode else _UNSET, lazy=_Lazy(text, ends, utf8))


def _comment_end(text: str, pos: int) -> int | None:
    """Where the comment starting at `pos` ends (a `//` comment at its newline); None when no
    comment starts there, -1 when a `/*` is never closed."""
    if text.startswith("//", pos):
        end = text.find("\n", pos)
        return len(text) if end == -1 else end
    if text.startswith("/*", pos):
        end = text.find("*/", pos + 2)
        return -1 if end == -1 else end + 2
    return None


def _blank_comments(text: str) -> tuple[str, list[tuple[int, int]]] | None:
    """`text` with each comment replaced by spaces (so every offset stays), and the comments'
    spans; None if that cannot be done at C speed (Python 3.10) or the text is broken (the full
    parser then reports where). A file with comments then takes the strict-JSON fast path."""
    if _TO_SLASH is None:
        return None
    comments: list[tuple[int, int]] = []
    pieces: list[str] = []
    pos = done = 0
    while True:
        pos = _TO_SLASH.match(text, pos).end()
        if pos >= len(text) or text[pos] != "/":
            break
        end = _comment_end(text, pos)
        if end is None or end < 0:
            return None
        comments.append((pos, end))
        pieces += [text[done:pos], " " * (end - pos)]
        pos = done = end
    if pos < len(text):  # an unterminated string
        return None
    pieces.append(text[done:])
    return "".join(pieces), comments


class _Parser:
    """Recursive-descent parser that records spans, comments, commas and colons."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.comments: list[tuple[int, int]] = []
        self.commas: list[int] = []
        self.colons: list[int] = []

    def parse(self) -> _Node:
        text = self.text
        pos = self._skip(1 if text.startswith(_BOM) else 0)
        if pos == len(text):
            raise JsoncError("empty document", text, pos)
        try:
            root = self._value(pos)
        except RecursionError:  # a config tool should report garbage, not crash on it
            raise JsoncError("nesting too deep", text, pos) from None
        pos = self._skip(root.end)
        if pos != len(text):
            raise JsoncError("extra data after the document", text, pos)
        return root

    def _error(self, expected: str, pos: int) -> JsoncError:
        if pos >= len(self.text):
            return JsoncError("unexpected end of input", self.text, pos)
        return JsoncError(f"expected {expected}, found {self.text[pos]!r}", self.text, pos)

    def _skip(self, pos: int) -> int:
        """Skip whitespace and comments, recording each comment's span."""
        text = self.text
        while True:
            pos = _WS.match(text, pos).end()
            end = _comment_end(text, pos)
            if end is None:
                return pos
            if end < 0:
                raise JsoncError("unterminated comment", text, pos)
            self.comments.append((pos, end))
            pos = end

    def _value(self, pos: int) -> _Node:
        text = self.text
        char = text[pos : pos + 1]
        if char in ("{", "["):
            return self._container(pos)
        if char == '"':
            string, end = self._string(pos)
            return _Node(pos, end, string, [])
        if number := _NUMBER.match(text, pos):
            literal = number.group()
            try:
                value = float(literal) if number.group(1) or number.group(2) else int(literal)
            except ValueError:  # more digits than int() accepts (sys.get_int_max_str_digits)
                raise JsoncError("number too long", text, pos) from None
            return _Node(pos, number.end(), value, [])
        if word := _WORD.match(text, pos):
            if word.group() not in _LITERALS:
                raise JsoncError(f"invalid literal {word.group()!r}", text, pos)
            return _Node(pos, word.end(), _LITERALS[word.group()], [])
        raise self._error("a value", pos)

    def _container(self, start: int) -> _Node:
        text = self.text
        is_object = text[start] == "{"
        close = "}" if is_object else "]"
        entries: list[_Entry] = []
        pos = self._skip(start + 1)
        while not text.startswith(close, pos):
            entry_start, key = pos, None
            if is_object:
                if not text.startswith('"', pos):
                    raise self._error("a property name in double quotes", pos)
                key, pos = self._string(pos)
                pos = self._skip(pos)
                if not text.startswith(":", pos):
                    raise self._error("':'", pos)
                self.colons.append(pos)
                pos = self._skip(pos + 1)
            entry = _Entry(entry_start, self._value(pos), key)
            entries.append(entry)
            pos = self._skip(entry.node.end)
            if text.startswith(",", pos):
                entry.comma = pos
                self.commas.append(pos)
                pos = self._skip(pos + 1)
            elif not text.startswith(close, pos):
                raise self._error(f"',' or '{close}'", pos)
        value: object
        if is_object:
            value = {entry.key: entry.node.value for entry in entries}
        else:
            value = [entry.node.value for entry in entries]
        return _Node(start, pos + 1, value, entries)

    def _string(self, start: int) -> tuple[str, int]:
        """Decode the string literal opening at `start`; return it and the offset after it."""
        text = self.text
        chunks: list[str] = []
        pos = start + 1
        while True:
            plain = _PLAIN.match(text, pos)
            chunks.append(plain.group())
            pos = plain.end()
            char = text[pos : pos + 1]
            if char == '"':
                return "".join(chunks), pos + 1
            if char in ("", "\n", "\r"):  # a raw line break almost always means a missing quote
                raise JsoncError("unterminated string", text, start)
            if char != "\\":
                raise JsoncError("invalid control character in string", text, pos)
            escape = text[pos + 1 : pos + 2]
            if escape == "u":
                code, pos = self._unicode_escape(pos)
                if 0xD800 <= code < 0xDC00 and text.startswith("\\u", pos) and _HEX4.match(text, pos + 2):
                    low = int(text[pos + 2 : pos + 6], 16)
                    if 0xDC00 <= low < 0xE000:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        pos += 6
                chunks.append(chr(code))
            elif escape in _ESCAPES:
                chunks.append(_ESCAPES[escape])
                pos += 2
            else:
                raise JsoncError("invalid escape in string", text, pos)

    def _unicode_escape(self, pos: int) -> tuple[int, int]:
        if not _HEX4.match(self.text, pos + 2):
            raise JsoncError("invalid \\u escape in string", self.text, pos)
        return int(self.text[pos + 2 : pos + 6], 16), pos + 6


def loads(text: str) -> object:
    """Parse JSONC text into Python values, like `json.loads` for the JSON subset."""
    root = _strict_root(text, decode=True)
    return (root if root is not None else _Parser(text).parse()).value


def has_comments(text: str) -> bool:
    """True if the text has a `//` or `/* */` comment outside strings; works on invalid text too,
    so callers can warn before touching a file whose comments a plain JSON tool would drop."""
    return any(match.group(1) for match in _STRING_OR_COMMENT.finditer(text))


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def _wrong_type(where: Path, value: object, expected: str) -> TypeError:
    return TypeError(f"{where!r} is {_kind(value)}, expected {expected}")


def _child_index(node: _Node, step: object, where: Path) -> int | None:
    """Index of the entry `step` addresses in `node`, None if absent.

    A step of the wrong kind for the container is a TypeError, never "absent": silently creating
    a sibling structure would hide a broken config from the user."""
    if isinstance(step, str):
        if node.opener != "{":
            raise _wrong_type(where, node.value, "an object")
        indexes = [i for i, entry in enumerate(node.entries) if entry.key == step]
        return indexes[-1] if indexes else None  # the last duplicate is the one `value` shows
    if isinstance(step, int) and not isinstance(step, bool):
        if node.opener != "[":
            raise _wrong_type(where, node.value, "an array")
        return step if 0 <= step < len(node.entries) else None
    raise TypeError(f"path steps must be str or int, got {step!r}")


def _same(a: object, b: object) -> bool:
    """Equal as JSON text, so True != 1 and key order counts."""
    return json.dumps(a) == json.dumps(b)


class Document:
    """A JSONC text plus its parse tree, edited by splicing text so untouched bytes survive.

    Inserted text follows the file's own style: indent unit (first indented line, default two
    spaces), newline style, and separator spacing for one-line containers. After every edit the
    whole text is parsed again (validated by `json` when it is strict JSON, so a big file costs
    little), so `value` always matches `text` and a broken splice can never be stored. `value` and
    what `get` returns are the parsed values themselves: treat them as read-only.

    Removing the only entry of a container leaves `[]` / `{}` with no whitespace inside (comments
    inside it are kept), so append-then-remove restores the text byte for byte only when the
    container was non-empty before (or was written exactly `[]` / `{}`)."""

    def __init__(self, text: str) -> None:
        self._setup(text, None)

    @classmethod
    def from_utf8(cls, data: bytes) -> Document:
        """The document of UTF-8 `data` (UnicodeDecodeError if it is not UTF-8), held as latin-1
        text when it is strict JSON (comments allowed): one byte a character whatever the script,
        where a decoded str takes four for a file with one emoji. Offsets are then byte offsets,
        keys and values are decoded from their spans' bytes, and `data` gives the edited bytes
        without a decoded copy of the whole file ever being made. It keeps no reference to `data`.
        `edited` tells whether any edit was made."""
        _check_utf8(data)
        if not data.startswith(_BOM_BYTES):
            doc = cls.__new__(cls)
            try:
                doc._setup(data.decode("latin-1"), data)
                return doc
            except JsoncError:
                pass  # trailing commas, or broken: the full parser on the decoded text (and its located errors)
        return cls(data.decode("utf-8"))

    def _setup(self, text: str, data: bytes | None) -> None:
        self._utf8, self.edited = data is not None, False
        parser = self._load(text)
        first_newline = text.find("\n")
        self._nl = "\r\n" if first_newline > 0 and text[first_newline - 1] == "\r" else "\n"
        self._unit = self._detect_unit()
        # A file with only one kind of separator on a line (e.g. `{"a":1}`) decides both.
        if parser is None:
            items, keys = self._strict_spacing(","), self._strict_spacing(":")
        else:
            items, keys = self._spacing(parser.commas), self._spacing(parser.colons)
        self._item_sep = ", " if (keys is not False if items is None else items) else ","
        self._key_sep = ": " if (items is not False if keys is None else keys) else ":"

    @property
    def text(self) -> str:
        return self._text.encode("latin-1").decode("utf-8") if self._utf8 else self._text

    @property
    def data(self) -> bytes:
        """The text as UTF-8 bytes (a new copy: callers of a big file keep `edited` in mind)."""
        return self._text.encode("latin-1" if self._utf8 else "utf-8")

    @property
    def value(self) -> object:
        """The whole document decoded (on first use, for strict JSON)."""
        return self._root.value

    @property
    def is_object(self) -> bool:
        """True if the top level is an object; cheap, unlike `value` on a big file."""
        return self._root.opener == "{"

    def get(self, path: Path) -> object:
        """Value at `path`: KeyError/IndexError if absent, TypeError if a step meets the wrong type."""
        path = tuple(path)
        nodes = self._locate(path)
        if len(nodes) <= len(path):
            missing = path[len(nodes) - 1]
            raise (IndexError if isinstance(missing, int) else KeyError)(path[: len(nodes)])
        return nodes[-1].value

    def has(self, path: Path) -> bool:
        """True if `get(path)` would succeed."""
        try:
            self.get(path)
        except (KeyError, IndexError, TypeError):
            return False
        return True

    def is_empty_container(self, path: Path) -> bool:
        """True for an existing `{}` or `[]` (comments inside do not count); False otherwise."""
        try:
            nodes = self._locate(tuple(path))  # never decodes the container (the root of a big file)
        except TypeError:
            return False
        if len(nodes) <= len(path):
            return False
        return nodes[-1].opener != "" and not nodes[-1].entries

    def append(self, path: Path, item: object) -> list[Path]:
        """Append `item` to the array at `path`, creating missing containers on the way.

        The missing part becomes one member of the deepest existing object (objects for every
        missing key, an array for the last), so it is a single splice. Returns the created
        container paths, outermost first, so an uninstall can drop exactly those again."""
        path = tuple(path)
        nodes = self._locate(path)
        if len(nodes) > len(path):
            if nodes[-1].opener != "[":
                raise _wrong_type(path, nodes[-1].value, "an array")
            self._insert(nodes, None, item)
            return []
        return self._create(path, nodes, [item])

    def set_key(self, path: Path, value: object) -> None:
        """Replace the value at `path` in place (an object member or an array element), or add
        the member at the end of its object, creating missing parent objects like `append`.
        Setting a value equal to the current one leaves the text untouched."""
        path = tuple(path)
        if not path:
            raise ValueError("set_key needs a non-empty path")
        nodes = self._locate(path)
        if len(nodes) <= len(path):
            self._create(path, nodes, value)
            return
        old = nodes[-1]
        if _same(old.value, value):
            return
        new = self._render(value, self._line_indent(old.start), compact=self._one_line(nodes[-2]))
        self._splice([(old.start, old.end, new)])

    def remove_key(self, path: Path) -> bool:
        """Remove the object member at `path` (every duplicate of it), its value's comments
        included. False if it is absent."""
        path = tuple(path)
        if not path or not isinstance(path[-1], str):
            raise TypeError(f"remove_key needs a path ending in a key, got {path!r}")
        removed = False
        while len(nodes := self._locate(path)) > len(path):
            self._remove_entry(nodes[-2], self._index_of(nodes[-2], nodes[-1]))
            removed = True
        return removed

    def remove_index(self, path: Path, index: int) -> None:
        """Remove element `index` of the array at `path` (IndexError if it does not exist)."""
        path = tuple(path)
        node = self._array(path)
        if node is None or not 0 <= index < len(node.entries):
            raise IndexError(path + (index,))
        self._remove_entry(node, index)

    def remove_items(self, path: Path, predicate: Callable[[object], bool]) -> int:
        """Remove every element of the array at `path` whose value satisfies `predicate`.
        Returns how many were removed; a missing array counts as none."""
        path = tuple(path)
        node = self._array(path)
        if node is None:
            return 0
        node.value  # noqa: B018  (decoded once here, so the elements take their values from it)
        doomed = [i for i, element in enumerate(node.entries) if predicate(element.node.value)]
        for index in reversed(doomed):  # from the end, so earlier indexes stay valid
            self._remove_entry(self._locate(path)[-1], index)
        return len(doomed)

    # -- locating -------------------------------------------------------------------------

    def _load(self, text: str, ends: dict[int, int] | None = None) -> _Parser | None:
        """Parse `text` and make it the document; the parser used, None for strict JSON (lazy)."""
        parser = None
        comments: list[tuple[int, int]] = []
        root = _strict_root(text, ends, utf8=self._utf8)
        if root is None and STRICT_FAST_PATH and (blanked := _blank_comments(text)) is not None and blanked[1]:
            root = _strict_root(blanked[0], ends, utf8=self._utf8)  # comments but otherwise strict: scan the blanked copy
            comments = blanked[1]
        if root is None and self._utf8:
            raise JsoncError("not strict JSON", text, 0)  # from_utf8 falls back to the decoded text
        if root is None:
            parser = _Parser(text)
            root = parser.parse()
            comments = parser.comments
        self._text, self._root = text, root
        self._comments = comments
        self._comment_starts = [start for start, _ in self._comments]
        return parser

    def _locate(self, path: Path) -> list[_Node]:
        """Nodes along `path` from the root, stopping before the first missing step."""
        nodes = [self._root]
        for depth, step in enumerate(path):
            index = _child_index(nodes[-1], step, path[:depth])
            if index is None:
                break
            nodes.append(nodes[-1].entries[index].node)
        return nodes

    def _array(self, path: Path) -> _Node | None:
        nodes = self._locate(path)
        if len(nodes) <= len(path):
            return None
        if nodes[-1].opener != "[":
            raise _wrong_type(path, nodes[-1].value, "an array")
        return nodes[-1]

    @staticmethod
    def _index_of(parent: _Node, child: _Node) -> int:
        return next(i for i, entry in enumerate(parent.entries) if entry.node is child)

    # -- style ----------------------------------------------------------------------------

    def _detect_unit(self) -> str:
        """Indent unit from the first indented line that is not inside a block comment."""
        for match in _INDENTED_LINE.finditer(self._text):
            token = match.end() - 1
            i = bisect_right(self._comment_starts, token) - 1
            if i >= 0 and self._comment_starts[i] < token < self._comments[i][1]:
                continue
            indent = match.group(1)
            return "\t" if indent[0] == "\t" else " " * (len(indent) - len(indent.lstrip(" ")))
        return "  "

    def _spacing(self, offsets: list[int]) -> bool | None:
        """Whether the first comma/colon followed by something on the same line has a space after
        it; None if there is no such separator."""
        for offset in offsets:
            after = self._text[offset + 1 : offset + 2]
            if after not in ("\r", "\n"):
                return after in (" ", "\t")
        return None

    def _strict_spacing(self, sep: str) -> bool | None:
        """`_spacing` for strict JSON text, which has no separator list: a C-level scan (of the
        copy with comments blanked, when there are comments; the character after is the real one)."""
        text, pos = self._root._lazy.text, 0
        while True:
            pos = _TO_SEP[sep].match(text, pos).end()
            if pos >= len(text):
                return None
            after = self._text[pos + 1 : pos + 2]
            if after not in ("\r", "\n"):
                return after in (" ", "\t")
            pos += 1

    def _render(self, value: object, indent: str, compact: bool) -> str:
        """Serialize a new value; continuation lines start with `indent`."""
        if compact:
            return self._as_held(json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(self._item_sep, self._key_sep)))
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, indent=self._unit, separators=(",", self._key_sep))
        return self._as_held(text.replace("\n", self._nl + indent))

    def _entry_text(self, key: str | None, value: object, indent: str, compact: bool) -> str:
        body = self._render(value, indent, compact)
        return body if key is None else self._as_held(json.dumps(key, ensure_ascii=False)) + self._key_sep + body

    def _as_held(self, new: str) -> str:
        """New text in the form the document holds its text (UTF-8 bytes as latin-1 for `from_utf8`)."""
        return new.encode("utf-8").decode("latin-1") if self._utf8 else new

    # -- text geometry --------------------------------------------------------------------

    def _line_start(self, pos: int) -> int:
        return self._text.rfind("\n", 0, pos) + 1

    def _line_indent(self, pos: int) -> str:
        return _HSPACE.match(self._text, self._line_start(pos)).group()

    def _starts_line(self, pos: int) -> bool:
        return not self._text[self._line_start(pos) : pos].strip(" \t")

    def _one_line(self, node: _Node) -> bool:
        return self._text.find("\n", node.start, node.end) == -1

    def _has_comment(self, start: int, end: int) -> bool:
        """True if a comment starts in [start, end) (callers pass gaps between tokens)."""
        i = bisect_left(self._comment_starts, start)
        return i < len(self._comment_starts) and self._comment_starts[i] < end

    def _comments_end_line(self, start: int, newline: int) -> bool:
        """True if [start, newline) holds a comment and none runs past the line end."""
        first = bisect_left(self._comment_starts, start)
        last = bisect_left(self._comment_starts, newline)
        return last > first and self._comments[last - 1][1] <= newline

    # -- editing --------------------------------------------------------------------------

    def _splice(self, edits: list[tuple[int, int, str]]) -> None:
        """Replace non-overlapping [start, end) spans and re-parse; on a parse failure nothing changes.

        Strict JSON re-parses at C speed (`json`), so a big file costs little per edit; the old
        tree is dropped first so two trees of a big file are never held at once."""
        old = self._text
        edits = sorted(edits)
        # Containers wholly before the first edit keep their offsets, those wholly after it move.
        lo, hi, delta = edits[0][0], max(end for _, end, _ in edits), sum(len(new) - (end - start) for start, end, new in edits)
        lazy = self._root._lazy
        ends = None if lazy is None else {
            start + (0 if end <= lo else delta): end + (0 if end <= lo else delta)
            for start, end in lazy.ends.items()
            if end <= lo or start >= hi
        }
        self._root, self.edited = None, True  # type: ignore[assignment]
        text, done = "", 0
        for start, end, new in edits:  # `+=` grows the one new string in place: no copy of pieces
            text += old[done:start]
            text += new
            done = end
        text += old[done:]
        try:
            self._load(text, ends)
        except JsoncError:
            self._load(old)
            raise

    def _create(self, path: Path, nodes: list[_Node], leaf: object) -> list[Path]:
        """Insert `leaf` at `path`, wrapping it in one object per missing key after the first."""
        depth = len(nodes) - 1
        missing = path[depth:]
        if not all(isinstance(step, str) for step in missing):
            raise IndexError(f"{path[: depth + 1]!r} does not exist and array slots are never created")
        value = leaf
        for key in reversed(missing[1:]):
            value = {key: value}
        self._insert(nodes, str(missing[0]), value)
        return [path[:end] for end in range(depth + 1, len(path) + 1)]

    def _insert(self, nodes: list[_Node], key: str | None, value: object) -> None:
        """Add an element (key None) or member as the last entry of `nodes[-1]`, in its layout."""
        node, text = nodes[-1], self._text
        close = node.end - 1
        entries = node.entries
        if not entries:
            # Filled compactly only inside a one-line parent; a lone `{}` file gets expanded.
            if len(nodes) > 1 and self._one_line(nodes[-2]):
                new = self._entry_text(key, value, "", compact=True)
            else:
                outer = self._line_indent(node.start)
                inner = outer + self._unit
                new = self._nl + inner + self._entry_text(key, value, inner, compact=False) + self._nl + outer
            kept = text[node.start + 1 : close].rstrip(" \t\r\n")  # comments stay, blank tail goes
            self._splice([(node.start + 1, close, kept + new)])
            return
        last = entries[-1]
        # New text goes where the last entry's comma is (or would be): an existing trailing comma
        # then ends the new entry, and the removal span [comma before, entry end) is exactly what
        # was inserted, so removing the entry again restores the text.
        anchor = last.node.end if last.comma is None else last.comma
        indent = self._line_indent(last.start)
        newline = text.find("\n", anchor)
        if self._one_line(node):
            edits = [(anchor, anchor, self._item_sep + self._entry_text(key, value, "", compact=True))]
        elif anchor <= newline < close and self._comments_end_line(anchor, newline):
            # `last, // note`: the note stays with `last`; the new entry gets a line of its own,
            # and removal (which keeps comments) takes exactly that line and one comma.
            line = indent + self._entry_text(key, value, indent, compact=False)
            edits = [(newline + 1, newline + 1, line + ("," if last.comma is not None else "") + self._nl)]
            if last.comma is None:
                edits.append((anchor, anchor, ","))
        elif self._starts_line(last.start):
            edits = [(anchor, anchor, "," + self._nl + indent + self._entry_text(key, value, indent, compact=False))]
        else:  # e.g. `[{ ... }]`: continue on the line where the last entry ends
            new = self._entry_text(key, value, self._line_indent(last.node.end), compact=False)
            edits = [(anchor, anchor, self._item_sep + new)]
        self._splice(edits)

    def _remove_entry(self, node: _Node, index: int) -> None:
        """Remove entry `index` of `node`, undoing exactly what `_insert` added when possible."""
        entries = node.entries
        entry = entries[index]
        start, end = entry.start, entry.node.end
        close = node.end - 1
        if len(entries) == 1:
            if self._has_comment(node.start + 1, start) or self._has_comment(end, close):
                edits = self._cut(start, end, entry.comma)
            else:
                edits = [(node.start + 1, close, "")]
        else:
            if index > 0:
                comma = entries[index - 1].comma
                assert comma is not None
                gap, span = (comma, start), (comma, end)
            else:
                gap, span = (end, entries[1].start), (start, entries[1].start)
            if self._has_comment(*gap):
                edits = self._cut(start, end, entry.comma if entry.comma is not None else entries[index - 1].comma)
            else:
                edits = [(span[0], span[1], "")]
        self._splice(edits)

    def _cut(self, start: int, end: int, comma: int | None) -> list[tuple[int, int, str]]:
        """Edits that delete an entry and one adjacent comma but keep the comments around it.

        An entry alone on its line(s) takes its line with it; otherwise the blanks on one side go,
        so no stray spaces or empty lines are left behind."""
        text = self._text
        edits: list[tuple[int, int, str]] = []
        if comma is not None:
            if comma >= end and not text[end:comma].strip(" \t\r\n"):
                end = comma + 1
            else:
                edits.append((comma, comma + 1, ""))
        line_start = self._line_start(start)
        line_end = text.find("\n", end)
        blank_before = not text[line_start:start].strip(" \t")
        blank_after = line_end != -1 and not text[end:line_end].strip(" \t\r")
        if blank_before and blank_after:
            start, end = line_start, line_end + 1
        elif blank_after:
            start = line_start + len(text[line_start:start].rstrip(" \t"))
        else:
            end = _HSPACE.match(text, end).end()
        edits.append((start, end, ""))
        return edits


def strict_json_spots(text: str) -> list[tuple[str, int, int]]:
    """What a strict JSON parser rejects in JSONC text that parses: (what, line, column) for a
    leading byte order mark, every comment and every trailing comma, in file order. Raises
    JsoncError when the text is not even JSONC."""
    parser = _Parser(text)
    parser.parse()
    spots = [("byte order mark", 0)] if text.startswith(_BOM) else []
    spots += [("comment", start) for start, _ in parser.comments]
    scratch = _Parser(text)  # skips to the next token without recording the comments again
    spots += [("trailing comma", c) for c in parser.commas if text.startswith(("}", "]"), scratch._skip(c + 1))]
    located = []
    for what, pos in sorted(spots, key=lambda spot: spot[1]):
        where = JsoncError(what, text, pos)  # for its line/column arithmetic only
        located.append((what, where.line, 1 if what == "byte order mark" else where.col))
    return located
