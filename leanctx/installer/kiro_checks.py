"""Kiro CLI runs the hooks of one agent only, the one a session uses: init writes an agent of
ours (`leanctx`, agents/kiro.py), which the user has to pick. doctor says so on an info row (which
agent a user's sessions pick is not in a file leanctx knows). Found by host name through
hostload.HOST_CHECKS."""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.base import Agent


def doctor_checks(agent: Agent, home: Path, project: Path | None = None) -> list[dict]:
    return [{"name": "kiro runs the leanctx agent", "status": "info", "detail": agent.init_hint, "fix": None}]
