"""Registry of supported hosts: one module per host, each exposing `AGENT`.

Modules are imported lazily by name so the hook fast path loads exactly one host module.
Adding a host = adding `leanctx/agents/<name>.py` with an `AGENT` and one line here.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~3 ms

if TYPE_CHECKING:
    from leanctx.agents.base import Agent

AGENT_MODULES: dict[str, str] = {
    "claude": "leanctx.agents.claude",
    "codex": "leanctx.agents.codex",
    "cursor": "leanctx.agents.cursor",
    "codebuddy": "leanctx.agents.codebuddy",
    "gemini": "leanctx.agents.gemini",
    "qwen": "leanctx.agents.qwen",
    "copilot": "leanctx.agents.copilot",
    "opencode": "leanctx.agents.opencode",
    "kilo": "leanctx.agents.kilo",
    "cline": "leanctx.agents.cline",
    "droid": "leanctx.agents.droid",
    "pi": "leanctx.agents.pi",
    "openclaw": "leanctx.agents.openclaw",
    "crush": "leanctx.agents.crush",
    "goose": "leanctx.agents.goose",
    "antigravity": "leanctx.agents.antigravity",
    "windsurf": "leanctx.agents.windsurf",
    "kiro": "leanctx.agents.kiro",
    "amp": "leanctx.agents.amp",
    "auggie": "leanctx.agents.auggie",
    "vscode": "leanctx.agents.vscode",
}


class UnknownAgent(KeyError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"unknown agent {self.name!r}; known agents: {', '.join(names())}"


def names() -> list[str]:
    return list(AGENT_MODULES)


def get(name: str) -> Agent:
    try:
        module = AGENT_MODULES[name]
    except KeyError:
        raise UnknownAgent(name) from None
    __import__(module)  # not importlib.import_module: `import importlib` pulls in `warnings` (~0.5 ms a hook)
    return sys.modules[module].AGENT


def all_agents() -> list[Agent]:
    return [get(n) for n in AGENT_MODULES]
