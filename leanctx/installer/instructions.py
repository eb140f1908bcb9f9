"""The bot profile's instructions for the model: a skill file, or a marked block.

Claude Code and CodeBuddy get a skill (`skills/leanctx-conversation-state/SKILL.md`), Codex a
marked block in AGENTS.md (its instructions file, shared with the user's own text), Cursor a
project rule (`.cursor/rules/*.mdc`; Cursor keeps user-level rules in its settings, not a file).
The text tells the model the protocol and the exact `leanctx state …` commands, with the absolute
path of this installation's `leanctx`, since a bot's shell may not have it on PATH.
"""

from __future__ import annotations

import shlex
import sys
from importlib import resources
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import files, manifest
from leanctx.installer.files import ConfigError
from leanctx.installer.install import Change, plan_removal

MARKER = "<!-- leanctx:conversation-state -->"
END_MARKER = "<!-- /leanctx:conversation-state -->"


def leanctx_command() -> str:
    """This installation's `leanctx`, as a shell word (the console script, else `python -m`)."""
    script = Path(sys.executable).parent / "leanctx"
    if script.exists():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m leanctx"


def _body() -> tuple[str, str]:
    """(front matter, body) of the skill template, rendered for this installation."""
    text = resources.files("leanctx").joinpath("templates/conversation-state-skill.md").read_text(encoding="utf-8")
    text = text.replace("@LEANCTX@", leanctx_command())
    _, front, body = text.split("---\n", 2)
    return front, body.lstrip("\n")


def render(path: Path, kind: str) -> str:
    front, body = _body()
    if kind == "block":
        return f"{MARKER}\n{body.rstrip()}\n{END_MARKER}\n"
    if path.suffix == ".mdc":  # a Cursor rule: always applied
        description = next(line for line in front.splitlines() if line.startswith("description:"))
        return f"---\n{description}\nalwaysApply: true\n---\n{MARKER}\n{body}"
    return f"---\n{front}---\n{MARKER}\n{body}"


def _without_block(text: str) -> str:
    start = text.find(MARKER)
    end = text.find(END_MARKER, start)
    if start < 0 or end < 0:
        return text
    end += len(END_MARKER)
    if text[end : end + 1] == "\n":
        end += 1
    if start > 0 and text[start - 1 : start] == "\n" and text[start - 2 : start] == "\n\n":
        start -= 1  # the blank line we put before the block
    return text[:start] + text[end:]


def _with_block(text: str, block: str) -> str:
    text = _without_block(text)
    if not text:
        return block
    return text + ("" if text.endswith("\n") else "\n") + "\n" + block


def plan(agent: Agent, home: Path, data_dir: Path, project: Path | None, want: bool) -> Change | None:
    """Install (`want`) or take out the instructions for `agent` at that level."""
    located = agent.instructions_path(home, project)
    if located is None:
        return None
    path, kind = located
    target = files.resolve_target(path, home)
    if not want:
        return plan_removal(agent, target, data_dir, lambda text, record: _removed(kind, text, record),
                            lambda: plan(agent, home, data_dir, project, want))
    old = files.read_bytes(target.real)
    text = files.decode(target.path, old) if old is not None else ""
    if kind == "file":
        if old is not None and MARKER not in text:
            raise ConfigError(f"{path}: exists and is not leanctx's; move it away to install the bot profile")
        new = render(path, kind).encode("utf-8")
    else:
        new = _with_block(text, render(path, kind)).encode("utf-8")
    if new == old:
        return None
    files.check_writable(target.real)
    return Change(agent, target, old, new, replan=lambda: plan(agent, home, data_dir, project, want))


def _removed(kind: str, text: str, record: manifest.Manifest | None) -> str | None:
    if MARKER not in text:
        return text
    if kind == "file":
        return None  # the whole file is ours
    rest = _without_block(text)
    if record is not None and not record.existed_before and not rest.strip():
        return None
    return rest
