"""What Gemini CLI and its fork Qwen Code share (hosts-gemini-qwen-copilot-opencode.md §1-2).

Both keep hooks and MCP servers in one `settings.json` (`~/.<host>/settings.json` and the
project's `.<host>/settings.json`), MCP entries without a `type`, a handler `timeout` in
milliseconds (verified in runs: a Claude-style `10` kills the hook after 10 ms), and an
instructions file in the config folder and at the project root (`GEMINI.md` / `QWEN.md`) that
every session loads. Their event names and answer forms differ: each host module sets those.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

from leanctx.agents.base import ClaudeShapeAgent, is_our_command


class GeminiShapeAgent(ClaudeShapeAgent):
    """Gemini CLI's settings layout; a host module adds its folder, events and answer forms."""

    mcp_type = None  # `mcpServers.<name> = {command, args}`: no transport key
    timeout_unit_ms = True
    json_comments_ok = True  # comment-json: comments pass, a trailing comma or a byte order mark does not
    json_bom_ok = False  # verified: Gemini 0.61 exits 52, Qwen 0.15 renames the file
    #: what the host does to a settings file it cannot parse (for doctor's warning)
    broken_settings_effect: str = ""

    def project_config_path(self, project: Path) -> Path:
        return project / self.config_home / self.settings_file

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        # the MCP servers live in the same settings file as the hooks (a part of their own)
        path = self.user_config_path(home) if project is None else self.project_config_path(project)
        return path, "json", ("mcpServers",)

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        # no skills folder the host reads by itself: the bot's protocol is a marked block in the
        # instructions file every session loads, beside the read rule
        return self.rules_path(home, project)

    def unparseable_effect(self, path: Path, home: Path) -> str:
        return self.broken_settings_effect or super().unparseable_effect(path, home)

    def hooks_switched_off(self, settings: dict) -> tuple[str, str, str] | None:
        """(why this settings document keeps our hooks from running, the change that turns them
        back on, the top-level key that holds the switch), or None when it does not."""
        return None


def disabled_ours(names: object) -> list[str]:
    """Our commands in a host's list of disabled hook names/commands."""
    return [n for n in names if is_our_command(n)] if isinstance(names, list) else []



# --- their built-in readers (recorded: tests/fixtures/payloads/{gemini,qwen}/builtin/) ---------

MAX_LINE = 10**9
MAX_PATH_CHARS = 4096


def count(value: object, low: int = 1) -> int | None:
    """A whole number >= `low` as a tool input holds it (JSON numbers may arrive as 3.0), else None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= MAX_LINE:
        return value
    return None


def file_path(value: object, cwd: object, relative_ok: bool) -> str | None:
    """The absolute path a tool's `file_path` names; a relative one only against an absolute cwd
    (the folder the host resolves it against), never one the host may reinterpret (`@…`)."""
    import os

    if not isinstance(value, str) or not 0 < len(value) <= MAX_PATH_CHARS or "\x00" in value:
        return None
    if os.path.isabs(value):
        return os.path.normpath(value)
    if not relative_ok or value.startswith(("@", "~")) or not isinstance(cwd, str) or not os.path.isabs(cwd):
        return None
    return os.path.normpath(os.path.join(cwd, value))


def shell_dir(value: object, cwd: object, relative_ok: bool) -> str | None:
    """The folder a shell call runs in: its own directory argument, else the session's cwd."""
    if value is None:
        return cwd if isinstance(cwd, str) else None
    return file_path(value, cwd, relative_ok)


def settings_mention(paths: list, word: bytes) -> bool:
    """Does any of these settings files mention `word`? One we cannot read: it may (doubt)."""
    for path in paths:
        try:
            with open(path, "rb") as f:
                if word in f.read(1 << 22):
                    return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False


def ranged_delivery(asked: tuple, text: object, head: str, body_mark: str) -> tuple[str, int, int | None, str] | None:
    """(path, first line, last line or None for the end, text) from a read_file result: the
    whole file as it is (asked from line 1), or `head` "A-B of N..." `body_mark` and lines A..B.
    Gemini CLI and Qwen Code word the head differently, and shape it alike."""
    if not isinstance(text, str) or not text:
        return None
    if not text.startswith(head):
        # the whole file, as it is: only when it starts at line 1 (any other start has the head)
        return (asked[0], 1, None, text) if asked[1] == 1 else None
    status, sep, body = text[len(head):].partition(body_mark)
    lines, _, _rest = status.partition(" of ")
    first, dash, last = lines.partition("-")
    start, end = count(int(first)) if first.isdigit() else None, count(int(last)) if last.isdigit() else None
    if not sep or not dash or start != asked[1] or end is None or end < start or not body:
        return None
    return asked[0], start, end, body

