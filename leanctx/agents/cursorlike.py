"""The "cursor-like" family: a JSON file whose `hooks` object maps each event to a flat list of
entries `{"command": …, <timeout key>?, "matcher"?, <host keys>}`, one command per entry, no
nested handler groups (Cursor's `hooks.json`, Windsurf's `hooks.json`, a Kiro CLI agent file).

What differs between them is data: where the file lives, the timeout's key and unit, the extra
keys a host's entry carries. A host module sets those and overrides only what its host really
does differently (its payload, its answers).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, ClassVar

from leanctx.agents.base import Agent, EventSpec, command_of_entry


class CursorLikeAgent(Agent):
    """A flat hook list per event in one JSON file (see the module note)."""

    family = "cursor-like"
    #: the user config folder, relative to HOME, and the hooks file in it
    config_home: ClassVar[str] = ""
    hooks_file: ClassVar[str] = "hooks.json"
    #: the project's hooks file, relative to the project ("" = none)
    project_hooks: ClassVar[str] = ""
    #: the entry's timeout key (None: the host documents none, we write none) and its unit
    timeout_key: ClassVar[str | None] = "timeout"
    timeout_ms: ClassVar[bool] = False
    #: keys every entry of ours carries besides command/timeout/matcher (e.g. Windsurf's show_output)
    entry_keys: ClassVar[dict[str, Any]] = {}

    def config_dir(self, home: Path) -> Path:
        return home / self.config_home

    def user_config_path(self, home: Path) -> Path:
        return self.config_dir(home) / self.hooks_file

    def project_config_path(self, project: Path) -> Path | None:
        return project / self.project_hooks if self.project_hooks else None

    def hook_group(self, command: str, spec: EventSpec) -> dict:
        entry: dict[str, Any] = {"command": command}
        if self.timeout_key is not None:
            entry[self.timeout_key] = self.timeout * 1000 if self.timeout_ms else self.timeout
        if spec.matcher is not None:
            entry["matcher"] = spec.matcher
        entry.update(self.entry_keys)
        return entry

    def group_commands(self, group: object) -> list[str]:
        return command_of_entry(group)
