"""Instructions for the model that init installs: a file of ours, or a marked block.

Two texts, each located by the host module:
- the bot profile's conversation-state protocol: a skill for Claude Code and CodeBuddy
  (`skills/leanctx-conversation-state/SKILL.md`), a marked block in Codex's AGENTS.md, a Cursor
  project rule (`.cursor/rules/*.mdc`; Cursor keeps user-level rules in its settings, not a file);
- the read rule (use `ctx_read`): a marked block in CLAUDE.md / AGENTS.md / CODEBUDDY.md, a
  Cursor project rule.
Blocks live in files shared with the user's own text and come out again without a trace; a
block is replaced where it stands, so init twice is init once. At user level the texts name this
installation's `leanctx` by absolute path (a bot's shell may not have it on PATH): its console
script, or the data dir's wrapper; in a project's files, which a team commits, plain `leanctx`.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from leanctx import paths, templating
from leanctx.agents.base import MCP_SERVER, Agent
from leanctx.installer import files, manifest
from leanctx.installer.files import ConfigError
from leanctx.installer.install import Change, already_there, plan_removal



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
ORDER = (CONVERSATION_STATE, CTX_READ)  # the order of our blocks when they share a file


def leanctx_command(project: Path | None = None, data_dir: Path | None = None) -> str:
    """This installation's `leanctx`, as a shell word: the console script beside this Python,
    else the data dir's wrapper (`leanctx-hook cli`). Never `python -m leanctx`, which imports
    from the shell's current folder (a repository's own `leanctx/` would run).

    In a project's files (committed and shared with a team) the word is plain `leanctx`, found on
    PATH: a path of this machine would be wrong on every other one."""
    if project is not None:
        return "leanctx"
    script = Path(sys.executable).parent / "leanctx"
    if script.exists():
        return shlex.quote(str(script))
    return f"{shlex.quote(str(paths.wrapper_path(data_dir)))} cli"


def part_name(spec: Text) -> str:
    """The manifest's name for this text's part of a file."""
    return f"instructions:{spec.name}"


def _body(spec: Text, project: Path | None = None, server: str = MCP_SERVER, how: str = "",
          data_dir: Path | None = None) -> tuple[str, str]:
    """(front matter, body) of a template, rendered for this installation, the name its MCP
    server is registered under, and how this host's model reaches a deferred MCP tool (`how`)."""
    text = resources.files("leanctx").joinpath(f"templates/{spec.template}").read_text(encoding="utf-8")
    values = {"HOW": f"\n{how}" if how else "", "LEANCTX": leanctx_command(project, data_dir), "SERVER": server}
    text = templating.fill(text, values, spec.template)
    _, front, body = text.split("---\n", 2)
    return front, body.lstrip("\n")


def render(spec: Text, path: Path, kind: str, project: Path | None = None, server: str = MCP_SERVER, note: str = "",
           data_dir: Path | None = None) -> str:
    """The text as installed; `note` is what this host's model needs on top (how it reaches a
    deferred tool), put where the template says (@HOW@)."""
    front, body = _body(spec, project, server, note, data_dir)
    if kind == "block":
        return f"{spec.marker}\n{body.rstrip()}\n{spec.end_marker}\n"
    if path.suffix == ".mdc":  # a Cursor rule: always applied
        description = next(line for line in front.splitlines() if line.startswith("description:"))
        return f"---\n{description}\nalwaysApply: true\n---\n{spec.marker}\n{body}"
    return f"---\n{front}---\n{spec.marker}\n{body}"


def _span(spec: Text, text: str) -> tuple[int, int] | None:
    """Where the block is: from its marker to the end of its end marker's line."""
    start = text.find(spec.marker)
    end = text.find(spec.end_marker, start) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    end += len(spec.end_marker)
    return start, end + 1 if text[end : end + 1] == "\n" else end


def _without_block(spec: Text, text: str) -> str:
    """The text without the block and the blank line that separates it from its neighbour."""
    span = _span(spec, text)
    if span is None:
        return text
    start, end = span
    if start > 0 and text[start - 2 : start] == "\n\n":
        start -= 1  # the blank line we put before the block
    elif start == 0 and text[end : end + 1] == "\n":
        end += 1  # first in the file: the blank line after it
    return text[:start] + text[end:]


def _with_block(spec: Text, text: str, block: str) -> str:
    """The text with the block: replaced where it is, else before the next of our blocks (so
    the blocks keep one order however often the profile changes), else at the end."""
    span = _span(spec, text)
    if span is not None:
        return text[: span[0]] + block + text[span[1] :]
    later = [s for s in ORDER[ORDER.index(spec) + 1 :] if _span(s, text) is not None]
    if later:
        at = min(_span(s, text)[0] for s in later)  # type: ignore[index]
        return text[:at] + block + "\n" + text[at:]
    if not text:
        return block
    return text + ("" if text.endswith("\n") else "\n") + "\n" + block


def plan(
    agent: Agent, home: Path, data_dir: Path, project: Path | None, want: bool, spec: Text = CONVERSATION_STATE,
    server: str = MCP_SERVER,
) -> Change | None:
    """Install (`want`) or take out one instruction text for `agent` at that level."""
    located = spec.locate(agent, home, project)
    if located is None:
        return None
    path, kind = located
    target = files.resolve_target(path, home, project)
    again = lambda: plan(agent, home, data_dir, project, want, spec, server)  # noqa: E731
    if not want:
        return plan_removal(agent, part_name(spec), target, data_dir, lambda text, record: _removed(spec, kind, text, record), again)
    old = files.read_bytes(target.real)
    text = files.decode(target.path, old) if old is not None else ""
    note = agent.read_rule_note(server) if spec is CTX_READ else ""
    if kind == "file":
        if old is not None and spec.marker not in text:
            raise ConfigError(f"{path}: exists and is not leanctx's; move it away and run init again")
        new = render(spec, path, kind, project, server, note, data_dir).encode("utf-8")
    else:
        new = _with_block(spec, text, render(spec, path, kind, project, server, note, data_dir)).encode("utf-8")
    if new == old:
        return already_there(agent, part_name(spec), target, data_dir, old)
    files.check_writable(target.real)
    return Change(agent, target, old, new, replan=again, part=part_name(spec), stale=spec.marker in text)


def _removed(spec: Text, kind: str, text: str, record: manifest.Manifest | None) -> str | None:
    if spec.marker not in text:
        return text
    if kind == "file":
        return None  # the whole file is ours
    rest = _without_block(spec, text)
    if record is not None and not record.existed_before and not rest.strip():
        return None
    return rest
