"""Kilo Code CLI (npm `@kilocode/cli`, binary `kilo`): a fork of OpenCode with its plugin API.

Everything but the names is OpenCode's (agents/opencode.py): the plugin events and their
arguments, the `read` and `bash` tools and what they return, the `mcp` table's entries, JSONC.
Verified on 7.7.7 in real runs (the OpenCode e2e tests run on both hosts, offline): the
plugin loads from `~/.config/kilo/plugins/` (project: `.kilo/plugins/`), session.created,
chat.message, the tool hooks and session.idle fire in `kilo run`, and `kilo run --format json`
prints the session id the plugin names. From its bundle (7.7.7): the config folder is
`$XDG_CONFIG_HOME/kilo`, its files `kilo.jsonc`, `kilo.json`, `opencode.jsonc`, `opencode.json`
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
        "mcp": "`kilo.jsonc` `mcp` (or the user's `kilo.json`, `opencode.json[c]`)",
        "rule": "`AGENTS.md` block",
        "call_id": "no",
        "bot": "prompts only",
        "guard": "yes",
    }
    verified_version = "7.7.7"
    version_command = ("kilo", "--version")
    config_folder = "kilo"
    project_folder = ".kilo"
    # in the order Kilo's own config writer picks them (`globalTarget`, `projectTarget` in its
    # 7.7.7 bundle): the first the user keeps, else a new kilo.jsonc
    config_files = ("kilo.jsonc", "kilo.json", "opencode.jsonc", "opencode.json")
    legacy_config_files = ("config.json", "config")
    # On its first start Kilo adds `"permission": {"bash": "allow"}` to a user config with no bash
    # rule, then writes this marker; with no config it writes only the marker (`migrateBashPermission`
    # in the 7.7.7 bundle, seen in a run). A config init creates gets the marker with it, so Kilo's
    # shell permissions stay what they would have been without leanctx.
    first_start_markers = (".bash-permission-migrated",)


AGENT = Kilo()
