"""What leanctx itself puts into a model's context, in tokens: charged against the savings.

Two texts reach every context of a host that uses leanctx:
- the tool definition: ctx_read as our MCP server's `tools/list` answer carries it (the very
  JSON the server writes, `mcpserver.tools_for("coding")`, compact separators);
- the read rule init installs (templates/ctx-read-rule.md, rendered as init renders it for that
  host: marker lines, the host's note on how its model reaches the tool, a Cursor rule's front
  matter). It is charged whether or not init installed it there (never less than it costs); a
  host we cannot name is charged the longest rendering.

Both are counted with the tokenizer that counts the reads (tokens.py), so savings and overhead
are in one unit: tokens put into a context once. A context (readcache.py) is one conversation
or subagent in one host process, and again each time a compaction rebuilds it. The counts are
taken once per process and tokenizer (the texts are fixed for an installed version).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from leanctx.cache import tokens

_memo: dict[tuple, int] = {}
_lock = threading.Lock()


def tool_definition_text() -> str:
    """ctx_read's definition exactly as `tools/list` serialises it."""
    from leanctx.cache.mcpserver import tools_for

    return json.dumps(tools_for("coding"), ensure_ascii=False, separators=(",", ":"))


_RULES: dict[str, str] | None = None


def _rules() -> dict[str, str]:
    """The read rule as init renders it for each host ('' where no host module installs one)."""
    global _RULES
    if _RULES is None:
        from leanctx.agents import all_agents
        from leanctx.installer import instructions

        texts = {}
        for a in all_agents():
            located = a.rules_path(Path("home"), Path("project"))
            if located is None:
                texts[a.name] = ""
                continue
            path, kind = located
            texts[a.name] = instructions.render(instructions.CTX_READ, path, kind, project=Path("project"),
                                                note=a.read_rule_note())
        _RULES = texts
    return _RULES


def rule_text(agent: str | None) -> str:
    """The read rule as init writes it for `agent`; for an unknown host, the longest rendering
    of any host."""
    texts = _rules()
    if agent in texts:
        return texts[agent]
    return max(texts.values(), key=tokens.count, default="")


def _count(key: tuple, make) -> int:  # noqa: ANN001
    with _lock:
        hit = _memo.get(key)
    if hit is not None:
        return hit
    n = tokens.count(make())
    with _lock:
        _memo[key] = n
    return n


def tool_tokens() -> int:
    return _count(("tool", tokens.name()), tool_definition_text)


def rule_tokens(agent: str | None) -> int:
    return _count(("rule", agent or "", tokens.name()), lambda: rule_text(agent))


def per_context(agent: str | None) -> dict:
    """{"tool": n, "rule": n}: what one context of `agent` is charged."""
    try:
        rule = rule_tokens(agent)
    except Exception:  # noqa: BLE001 - never fail a read over this: charge the template as it ships
        from importlib import resources

        rule = _count(("template", tokens.name()),
                      lambda: resources.files("leanctx").joinpath("templates/ctx-read-rule.md").read_text(encoding="utf-8"))
    return {"tool": tool_tokens(), "rule": rule}


def warm() -> None:
    """Count in the background what the first read would otherwise wait for (the daemon calls it
    at start: rendering the rules imports the host modules, tens of ms)."""

    def run() -> None:
        try:
            per_context(None)
        except Exception:  # noqa: BLE001 - the read that needs it will count it (or charge the template)
            pass

    threading.Thread(target=run, name="leanctx-overhead", daemon=True).start()


def reset() -> None:
    """Forget the counts (tests, or after the tokenizer changed)."""
    global _RULES
    with _lock:
        _memo.clear()
        _RULES = None
