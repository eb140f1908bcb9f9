"""Kilo Code CLI (npm `@kilocode/cli`, binary `kilo`): a fork of OpenCode with its plugin API.

Everything but the names is OpenCode's (agents/opencode.py): the plugin events and their
arguments, the `read` and `bash` tools and what they return, the `mcp` table's entries, JSONC.
Verified on 7.7.7 in real runs (tests/e2e/test_kilo_e2e.py, offline against a fake model): the
plugin loads from `~/.config/kilo/plugins/` (project: `.kilo/plugins/`), session.created,
chat.message, the tool hooks and session.idle fire in `kilo run`, and `kilo run --format json`
prints the session id the plugin names. From its bundle (7.7.7): the config folder is
`$XDG_CONFIG_HOME/kilo`, its files `kilo.json`, `kilo.jsonc`, `opencode.json`, `opencode.jsonc`
(and a legacy `config.json`); `KILO_CONFIG_DIR` only adds a folder to the ones it reads, and a
project's `.opencode/` is not read (`.kilo/` and the legacy `.kilocode/` are).
"""

from __future__ import annotations

from leanctx.agents.opencode import OpenCode


class Kilo(OpenCode):
    name = "kilo"
    display_name = "Kilo Code"
    binaries = ("kilo", "kilocode")
    checked_against = "Kilo Code CLI 7.7.7 (real CLI, end-to-end tests)"
    support = {
        "verified": "run, 7.7.7",
        "hooks": "plugin `~/.config/kilo/plugins/leanctx.js` / `DIR/.kilo/plugins/`",
        "mcp": "`kilo.json` `mcp` (or the user's `kilo.jsonc`, `opencode.json[c]`)",
        "rule": "`AGENTS.md` block",
        "call_id": "no",
        "bot": "prompts only",
        "guard": "yes",
    }
    verified_version = "7.7.7"
    version_command = ("kilo", "--version")
    config_folder = "kilo"
    project_folder = ".kilo"
    # kilo.json first (Kilo's own name); a user who keeps one of the others gets the server there
    config_files = ("kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc")


AGENT = Kilo()
