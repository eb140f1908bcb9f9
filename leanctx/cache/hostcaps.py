"""How long a tool result each host hands its model whole.

Every host cuts a long MCP tool result before the model sees it: it keeps the head (or head and
tail), or saves the whole text to a file and gives the model a preview and the file's path. The
model then holds only part of what `ctx_read` sent, so a later `[unchanged]` stub would point at
bytes it never had. An answer longer than its host's limit is therefore never credited to the
conversation (readcache.py; what it was sent whole before stays held): the next read sends the
content again, which the host cuts the same way, as it would without leanctx.

Lengths are measured as the answer's JSON string (`json.dumps`, ASCII escapes), which is never
shorter than its characters, its UTF-8 bytes or the JSON a host serialises it into. Each limit
sits at or below the longest answer seen whole in a run of the host (offline, fake model, the
real CLI; `tests/e2e/test_host_output_cut_e2e.py`) and below the shortest seen cut:

| host | seen whole | seen cut | how it cuts |
|---|---|---|---|
| Claude Code 2.1.197 | (not run) | (not run) | a result over `MAX_MCP_OUTPUT_TOKENS` (default 25,000) goes to a file; results up to 50,000 characters are never counted (its code: `length/4 <= 0.5 * limit`) |
| Codex 0.171.0 | 10,400 bytes | 12,000 bytes | head and tail kept, ~12,000 characters |
| Gemini CLI 0.61.0 | 20,000 | 40,000 | over 40,000 characters (`DEFAULT_TRUNCATE_TOOL_OUTPUT_THRESHOLD`, with its `<untrusted_context>` wrapper): first 8,000 and last 32,000 kept |
| Qwen Code 0.15.10 | 20,000 | 40,000 | over 25,000 characters (`TRUNCATE_TOOL_OUTPUT_THRESHOLD`; 1,000 lines `TRUNCATE_TOOL_OUTPUT_LINES`): saved to a file, a part shown |
| Copilot CLI 1.0.102 | 20,000 | 24,000 | saved to a file, 500 characters shown |
| CodeBuddy 2.117.0 | 60,000 | 100,000 | saved to a file ("exceeds maximum allowed tokens") |
| Droid 0.215.0 | 40,000 | 49,000 | cut to ~40,000 characters |
| Cline 3.0.65 | — | 10,400 | the result's JSON (`{"content":[...]}`) cut to 8,000 characters |
| OpenCode 1.18.33 | 2,000 lines | 3,000 lines | over 2,000 lines or 51,200 bytes (`Truncate` MAX_LINES/MAX_BYTES): head kept, the rest saved to a file |

A host not listed (Cursor, no runnable CLI here) or not known (`LEANCTX_SCOPE` without a record,
`LEANCTX_CONVERSATION_SCOPE=0` without a record of its host) gets the smallest limit. Not seen:
a limit the user lowered in the host's own settings (`MAX_MCP_OUTPUT_TOKENS`, Gemini's and
Qwen's `tools.truncateToolOutputThreshold`, OpenCode's `tool_output`), or one a host's remote
flags change.
"""

from __future__ import annotations

import json

# (longest answer credited, as its JSON string's length; most lines, or None)
_LIMITS: dict[str, tuple[int, int | None]] = {
    "claude": (50_000, None),
    "codex": (10_000, None),
    "gemini": (39_000, None),
    "qwen": (20_000, 1_000),
    "copilot": (20_000, None),
    "codebuddy": (50_000, None),
    "droid": (39_000, None),
    "cline": (7_800, None),
    "opencode": (50_000, 2_000),
    # Kilo Code 7.7.7 keeps OpenCode's `Truncate` (2,000 lines, 51,200 bytes: read in its bundle)
    "kilo": (50_000, 2_000),
    # Pi 0.73.1: its agent loop hands a custom tool's result (our extension's ctx_read) to the
    # model as the tool returned it (only its built-in tools cut their own output); an 8,000-
    # character file seen whole in a run (tests/e2e/test_pi_e2e.py)
    "pi": (50_000, None),
}
DEFAULT = (7_800, 1_000)  # the smallest of the above
# A host's own reader and its shell cut by their own rules. Where a host module has not measured
# them, the host's MCP limit above stands in, and the smallest one for a host we do not know.
_BUILTIN_LIMITS: dict[str, tuple[int, int | None]] = {
    # CodeBuddy Code 2.117.0's Read: a 58,240-character file seen whole (61,445 with its line
    # numbers); a 95,000-character one refused ("exceeds maximum allowed tokens (20000)")
    "codebuddy": (58_000, None),
    # Droid 0.215.0's Read: 58,240 characters seen whole; it cuts at 60,000 itself, with a note
    "droid": (58_000, None),
    # Pi 0.73.1's read cuts its own output (2,000 lines or 51,200 bytes, whole lines, with a note)
    # and its agent loop hands the model that result, or an extension's block reason, as it is: a
    # 2,000-line window (52,892 as JSON) seen whole in a run (tests/e2e/test_pi_builtin_read_e2e.py);
    # 54,000 holds any ASCII window it can return
    "pi": (54_000, None),
}
_SHELL_LIMITS: dict[str, tuple[int, int | None]] = {
    # Claude Code's Bash keeps 30,000 characters of output (BASH_MAX_OUTPUT_LENGTH's default)
    "claude": (29_000, None),
    # Codex 0.171.0 cuts exec_command output by the model's budget: whole at 9,984 characters and
    # cut at 10,976 for a model it has no metadata for (gpt-5), whole at 40,000 and cut at 49,984
    # for gpt-5.5; the smaller stands (its cut output starts "Warning: truncated output")
    "codex": (10_000, None),
    # CodeBuddy Code 2.117.0's Bash: 30,000 characters of output seen whole, 30,010 kept as a
    # `<persisted-output>` preview (MAX_SHELL_OUTPUT_LENGTH; BASH_MAX_OUTPUT_LENGTH moves it)
    "codebuddy": (29_000, None),
    # Droid 0.215.0's Execute: 4,500 characters seen whole; 10,985 cut to head and tail (8,010)
    "droid": (4_500, None),
    # Pi 0.73.1's bash keeps the last 2,000 lines or 51,200 bytes of output, a cut one marked in
    # its details (never credited); what it keeps reaches the model as it is (the read's limit)
    "pi": (54_000, None),
}


def limit(agent: str | None, reader: str = "ctx_read") -> tuple[int, int | None]:
    table = _SHELL_LIMITS if reader == "shell" else _BUILTIN_LIMITS if reader == "builtin" else {}
    return table.get(agent or "") or _LIMITS.get(agent or "", DEFAULT)


def passes_whole(agent: str | None, text: str, reader: str = "ctx_read") -> bool:
    """Does the host hand the model this answer (from this reader) uncut?"""
    chars, lines = limit(agent, reader)
    if len(text) > chars:  # a JSON string is never shorter than the text: no need to encode
        return False
    if lines is not None and text.count("\n") >= lines:
        return False
    return len(json.dumps(text)) <= chars
