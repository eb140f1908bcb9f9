"""Doctor checks only Codex needs: the feature switch and hook trust (both fail silently in Codex)."""

from __future__ import annotations

from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import files
from leanctx.installer.files import ConfigError
from leanctx.installer.trust import _parse, config_toml, trust_report

# Codex 0.171 does not wait for MCP servers before its first turn; `leanctx mcp` needs 1-2 s to
# answer initialize (importing the MCP SDK). Verified: with this top-level key at 8000 the first
# request offers the leanctx tools, without it it does not. A global setting, so we suggest it.
GRACE_KEY = "mcp_optional_startup_grace_ms"
GRACE_SUGGESTED_MS = 3000
TRUST_FIX = "start `codex`, open /hooks and trust the leanctx hooks; on a headless machine: leanctx init --agent codex --trust"


def checks(agent: Agent, home: Path) -> list[dict]:
    out: list[dict] = []
    toml_path = config_toml(agent, home)
    try:
        data = files.read_bytes(files.resolve_target(toml_path, home).real)
        config = _parse(toml_path, files.decode(toml_path, data)) if data is not None else {}
    except ConfigError as exc:
        return [{"name": "codex config.toml", "status": "fail", "detail": str(exc), "fix": f"fix the TOML syntax in {toml_path}"}]
    features = config.get("features") or {}
    off = [k for k in ("hooks", "codex_hooks") if features.get(k) is False]
    if off:
        out.append({"name": "codex hooks feature", "status": "fail", "detail": f"[features] {off[0]} = false in {toml_path}: Codex runs no hooks",
                    "fix": f"set hooks = true under [features] in {toml_path}"})
    else:
        out.append({"name": "codex hooks feature", "status": "ok", "detail": "hooks are enabled"})
    from leanctx.installer.install import display

    out.extend(_startup_grace(config, display(toml_path, home)))
    hooks_path = agent.user_config_path(home)
    hooks_data = files.read_bytes(hooks_path)
    report = trust_report(agent, home, hooks_path, hooks_data.decode("utf-8") if hooks_data else "")
    bad = [r for r in report if r["status"] != "trusted"]
    if not report:
        return out
    if bad:
        detail = ", ".join(f"{r['event']} {r['status']}" for r in bad)
        out.append({"name": "codex hook trust", "status": "fail", "detail": f"Codex will skip these hooks: {detail}", "fix": TRUST_FIX})
    else:
        out.append({"name": "codex hook trust", "status": "ok", "detail": f"all {len(report)} leanctx hooks trusted"})
    return out


def _startup_grace(config: dict, toml_path: str) -> list[dict]:
    if not isinstance((config.get("mcp_servers") or {}).get("leanctx"), dict):
        return []
    grace = config.get(GRACE_KEY)
    if isinstance(grace, int) and not isinstance(grace, bool) and grace >= GRACE_SUGGESTED_MS:
        return [{"name": "codex mcp start-up", "status": "ok", "detail": f"{GRACE_KEY} = {grace}: the first turn waits for ctx_read"}]
    return [{"name": "codex mcp start-up", "status": "info",
             "detail": "Codex does not wait for MCP servers before its first turn, and leanctx's needs 1-2 s to start: "
                       "the first turn may not offer ctx_read",
             "fix": f"add `{GRACE_KEY} = {GRACE_SUGGESTED_MS}` at the top of {toml_path} (a global setting: it lets every "
                    "optional MCP server that long)"}]
