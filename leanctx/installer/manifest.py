"""What we changed in each host config, so uninstall can take exactly that back out.

One JSON file per config in `<data dir>/installed/`. It remembers whether the config existed
before our first install, a backup of its bytes then (the baseline), the hash of the bytes we
last wrote, the containers and folders we created, and which of our parts the file holds: one
config can hold several (two marked blocks in AGENTS.md, the MCP entry and the trust tables in
config.toml, the same `.mcp.json` entry for Claude Code and CodeBuddy). Uninstall restores the
baseline byte-for-byte only when it takes out the last of those parts and the file still holds
exactly what we wrote; otherwise it removes that one part surgically and keeps everything else.

A record written before parts were tracked has `parts` None (unknown): it is only ever removed
from surgically, since the file may hold parts the record cannot name.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from leanctx import safedir
from leanctx.installer import files


@dataclass
class Manifest:
    path: str
    agent: str
    existed_before: bool
    baseline_sha256: str | None
    baseline_backup: str | None
    installed_sha256: str | None = None
    created: list[list] = field(default_factory=list)
    created_dirs: list[str] = field(default_factory=list)
    parts: list[list[str]] | None = None  # [agent, part] pairs; None: an old record, unknown

    def holds(self, agent: str, part: str) -> bool:
        return self.parts is not None and [agent, part] in self.parts

    def others(self, agent: str, part: str) -> list[list[str]] | None:
        """The parts other than (agent, part) this file holds; None when unknown (old record)."""
        return None if self.parts is None else [p for p in self.parts if p != [agent, part]]

    def agents(self) -> set[str]:
        return {self.agent} if self.parts is None else {a for a, _ in self.parts}

    def baseline_bytes(self) -> bytes | None:
        """The bytes from before our first install, if still provably available."""
        if not self.existed_before or not self.baseline_backup or not self.baseline_sha256:
            return None
        try:
            data = files.read_bytes(Path(self.baseline_backup))
        except files.ConfigError:
            return None
        if data is None:
            return None
        return data if hashlib.sha256(data).hexdigest() == self.baseline_sha256 else None


def manifest_path(data_dir: Path, config: Path) -> Path:
    digest = hashlib.sha256(str(config).encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return data_dir / "installed" / f"{digest}.json"


def keep_baseline(data_dir: Path, config: Path, data: bytes) -> Path:
    """Keep the pre-install bytes beside the manifest (rolling backups may be pruned)."""
    path = manifest_path(data_dir, config).with_suffix(".orig")
    safedir.make_private(path.parent)
    safedir.write_private(path, data)
    return path


def _from_file(path: Path) -> Manifest | None:
    """A record as saved; unreadable or damaged: None. Damaged `parts` count as unknown (an
    old record), so removals stay surgical."""
    try:
        record = Manifest(**json.loads(_read(path)))
    except (OSError, ValueError, TypeError):
        return None
    parts = record.parts
    if parts is not None and not (
        isinstance(parts, list) and all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in parts)
    ):
        record.parts = None
    return record


def load(data_dir: Path, config: Path) -> Manifest | None:
    """The record for `config` (callers pass its real path), or one an older leanctx keyed by the
    path as typed that resolves to the same file (`--project .`, a symlinked folder)."""
    for path in [manifest_path(data_dir, config), *_legacy(data_dir, config)]:
        record = _from_file(path)
        if record is not None:
            record.path = str(config)
            return record
    return None


def save(data_dir: Path, manifest: Manifest) -> None:
    path = manifest_path(data_dir, Path(manifest.path))
    safedir.make_private(path.parent)
    tmp = path.with_name(path.name + ".tmp")
    safedir.write_private(tmp, json.dumps(asdict(manifest), indent=1).encode("utf-8"))
    os.replace(tmp, path)
    for old in _legacy(data_dir, Path(manifest.path)):  # now kept under the real path's key
        old.unlink(missing_ok=True)


def delete(data_dir: Path, config: Path) -> None:
    record = load(data_dir, config)
    if record is not None and record.baseline_backup and Path(record.baseline_backup).parent == data_dir / "installed":
        Path(record.baseline_backup).unlink(missing_ok=True)  # kept under an older key
    for path in [manifest_path(data_dir, config), *_legacy(data_dir, config)]:
        path.unlink(missing_ok=True)
        path.with_suffix(".orig").unlink(missing_ok=True)


def _read(path: Path) -> bytes:
    """A record's bytes; never blocks on something that is not a regular file."""
    try:
        return files.read_bytes(path) or b""
    except files.ConfigError as exc:
        raise OSError(str(exc)) from None


def _legacy(data_dir: Path, config: Path) -> list[Path]:
    """Records keyed by another spelling of `config`'s real path (relative ones resolve against
    the current folder, where `--project .` was typed)."""
    real = os.path.realpath(config)
    own = manifest_path(data_dir, config)
    found = []
    for path in sorted((data_dir / "installed").glob("*.json")):
        if path == own:
            continue
        try:
            recorded = json.loads(_read(path)).get("path")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(recorded, str) and recorded != str(config) and os.path.realpath(recorded) == real:
            found.append(path)
    return found


def all_manifests(data_dir: Path) -> list[Manifest]:
    records = (_from_file(path) for path in sorted((data_dir / "installed").glob("*.json")))
    return [r for r in records if r is not None]
