"""Instructions for the model that init installs: a file of ours, or a marked block.

Two texts, each located by the host module:
- the bot profile's conversation-state protocol: a skill for Claude Code and CodeBuddy
  (`skills/leanctx-conversation-state/SKILL.md`), a marked block in Codex's AGENTS.md, a Cursor
  project rule (`.cursor/rules/*.mdc`; Cursor keeps user-level rules in its settings, not a file);
- the read rule (use `ctx_read`): a marked block in CLAUDE.md / AGENTS.md / CODEBUDDY.md, a
  Cursor project rule.
Blocks live in files shared with the user's own text and come out again without a trace. The
texts name this installation's `leanctx` by absolute path: a bot's shell may not have it on PATH.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import files, manifest
from leanctx.installer.files import ConfigError
from leanctx.installer.install import Change, plan_removal



@dataclass(frozen=True)
class Text:
    """One instruction text: its name (in the markers), template, and where each host keeps it."""

    name: str
    template: str
    locate: Callable[[Agent, Path, Path | None], tuple[Path, str] | None]

    @property
    def marker(self) -> str:
        return f"<!-- leanctx:{self.name} -->"

    @property
    def end_marker(self) -> str:
        return f"<!-- /leanctx:{self.name} -->"


CONVERSATION_STATE = Text("conversation-state", "conversation-state-skill.md", lambda a, home, project: a.instructions_path(home, project))
CTX_READ = Text("ctx-read", "ctx-read-rule.md", lambda a, home, project: a.rules_path(home, project))


def leanctx_command() -> str:
    """This installation's `leanctx`, as a shell word (the console script, else `python -m`)."""
    script = Path(sys.executable).parent / "leanctx"
    if script.exists():
        return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m leanctx"


def _body(spec: Text) -> tuple[str, str]:
    """(front matter, body) of a template, rendered for this installation."""
    text = resources.files("leanctx").joinpath(f"templates/{spec.template}").read_text(encoding="utf-8")
    text = text.replace("@LEANCTX@", leanctx_command())
    _, front, body = text.split("---\n", 2)
    return front, body.lstrip("\n")


def render(spec: Text, path: Path, kind: str) -> str:
    front, body = _body(spec)
    if kind == "block":
        return f"{spec.marker}\n{body.rstrip()}\n{spec.end_marker}\n"
    if path.suffix == ".mdc":  # a Cursor rule: always applied
        description = next(line for line in front.splitlines() if line.startswith("description:"))
        return f"---\n{description}\nalwaysApply: true\n---\n{spec.marker}\n{body}"
    return f"---\n{front}---\n{spec.marker}\n{body}"


def _without_block(spec: Text, text: str) -> str:
    start = text.find(spec.marker)
    end = text.find(spec.end_marker, start)
    if start < 0 or end < 0:
        return text
    end += len(spec.end_marker)
    if text[end : end + 1] == "\n":
        end += 1
    if start > 0 and text[start - 1 : start] == "\n" and text[start - 2 : start] == "\n\n":
        start -= 1  # the blank line we put before the block
    return text[:start] + text[end:]


def _with_block(spec: Text, text: str, block: str) -> str:
    text = _without_block(spec, text)
    if not text:
        return block
    return text + ("" if text.endswith("\n") else "\n") + "\n" + block


def plan(agent: Agent, home: Path, data_dir: Path, project: Path | None, want: bool, spec: Text = CONVERSATION_STATE) -> Change | None:
    """Install (`want`) or take out one instruction text for `agent` at that level."""
    located = spec.locate(agent, home, project)
    if located is None:
        return None
    path, kind = located
    target = files.resolve_target(path, home, project)
    again = lambda: plan(agent, home, data_dir, project, want, spec)  # noqa: E731
    if not want:
        return plan_removal(agent, target, data_dir, lambda text, record: _removed(spec, kind, text, record), again)
    old = files.read_bytes(target.real)
    text = files.decode(target.path, old) if old is not None else ""
    if kind == "file":
        if old is not None and spec.marker not in text:
            raise ConfigError(f"{path}: exists and is not leanctx's; move it away and run init again")
        new = render(spec, path, kind).encode("utf-8")
    else:
        new = _with_block(spec, text, render(spec, path, kind)).encode("utf-8")
    if new == old:
        return None
    files.check_writable(target.real)
    return Change(agent, target, old, new, replan=again)


def _removed(spec: Text, kind: str, text: str, record: manifest.Manifest | None) -> str | None:
    if spec.marker not in text:
        return text
    if kind == "file":
        return None  # the whole file is ours
    rest = _without_block(spec, text)
    if record is not None and not record.existed_before and not rest.strip():
        return None
    return rest
