"""tomlkit helpers shared by the Codex writers (trust tables, the MCP server table)."""

from __future__ import annotations

import tomlkit
from tomlkit.toml_document import TOMLDocument


def dumps_after_removal(doc: TOMLDocument, before: str) -> str:
    """Serialize `doc` after tables were removed from it.

    tomlkit separates an appended table with a blank line and leaves that line behind when the
    table is removed again; when the removed table ended the file, drop it, so a surgical removal
    gives back the file as it was (the byte-exact path restores the saved bytes anyway)."""
    text = tomlkit.dumps(doc)
    if text.endswith("\n\n") and not before.endswith("\n\n"):
        return text.rstrip("\n") + "\n"
    return text
