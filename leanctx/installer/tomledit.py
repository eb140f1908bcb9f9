"""tomlkit helpers shared by the Codex writers (trust tables, the MCP server table).

Codex 0.171 reads a config.toml that starts with a UTF-8 byte order mark (`codex mcp list` lists
its servers), which tomlkit rejects: the mark is set aside before parsing and put back on the
text we write, so an edit keeps it and a removal gives the file back byte for byte."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import tomlkit
import tomlkit.exceptions
from tomlkit.items import InlineTable, Table
from tomlkit.toml_document import TOMLDocument

from leanctx.installer.files import ConfigError, ParseError


BOM = "\ufeff"


def load(text: str) -> TOMLDocument:
    """tomlkit's parse of `text` without its byte order mark (tomlkit's own errors)."""
    return tomlkit.parse(text[1:] if text.startswith(BOM) else text)


def dumps(doc: TOMLDocument, before: str) -> str:
    """`doc` as text, with the byte order mark `before` (the text it was parsed from) had."""
    return (BOM if before.startswith(BOM) else "") + tomlkit.dumps(doc)


def parse(path: Path, text: str) -> TOMLDocument:
    """A config.toml to edit; ConfigError naming the file, line and column when it is not TOML."""
    try:
        return load(text)
    except tomlkit.exceptions.ParseError as exc:
        reason = re.sub(r" at line \d+ col \d+$", "", str(exc))  # the spot is in the message's path:line:col
        raise ParseError(path, exc.line, exc.col, "TOML", reason) from None


def values(path: Path, text: str) -> dict:
    """A config.toml's plain values (dicts, lists, scalars) to read; ConfigError as `parse`."""
    return parse(path, text).unwrap()


def dumps_after_removal(doc: TOMLDocument, before: str) -> str:
    """Serialize `doc` after tables were removed from it.

    tomlkit separates an appended table with a blank line and leaves that line behind when the
    table is removed again; when the removed table ended the file, drop it, so a surgical removal
    gives back the file as it was (the byte-exact path restores the saved bytes anyway)."""
    text = dumps(doc, before)
    if text.endswith("\n\n") and not before.endswith("\n\n"):
        return text.rstrip("\n") + "\n"
    return text


def table_in(parent: object, value: dict) -> Table | InlineTable:
    """A table holding `value`, in the form its parent allows: inside an inline table
    (`mcp_servers = { docs = {…} }`) only an inline table may go."""
    table = tomlkit.inline_table() if isinstance(parent, InlineTable) else tomlkit.table()
    table.update(value)
    return table


@contextlib.contextmanager
def editing(path: Path, text: str, key: str) -> Iterator[None]:
    """Run a tomlkit edit of the `key` table; a shape tomlkit cannot edit is refused with the
    line that defines it, never a traceback (nothing is written: the edit is planned in memory)."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - tomlkit raises assorted types for shapes it cannot edit
        match = re.search(rf"^[ \t]*\[*[ \t]*\"?{re.escape(key)}\b", text, re.M)
        line = text.count("\n", 0, match.start()) + 1 if match else 1
        raise ConfigError(f"{path}:{line}: cannot edit the {key} table as written ({type(exc).__name__}); "
                          f"write it as [{key}.<name>] tables and run init again; left untouched") from None
