"""Checks only Codex needs: the feature switch, our MCP server's switch, folder and hook trust
(each makes Codex skip our part silently). Found by host name through hostload.HOST_CHECKS."""

from __future__ import annotations

import os
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.installer import files, tomledit
from leanctx.installer.files import ConfigError
from leanctx.installer.hostload import FAIL, NOTE, toml_line, where
from leanctx.installer.install import config_path
from leanctx.installer.mcpreg import is_ours
from leanctx.installer.trust import config_toml, trust_report

TRUST_FIX = "start `codex`, open /hooks and trust the leanctx hooks; on a headless machine: {init} --trust"


def doctor_checks(agent: Agent, home: Path, project: Path | None = None) -> list[dict]:
    """Codex silently skips hooks that are not trusted (and a config.toml it cannot parse)."""
    out: list[dict] = []
    toml_path = config_toml(agent, home)
    try:
        data = files.read_bytes(files.resolve_target(toml_path, home).real)
        if data is not None:
            tomledit.values(toml_path, files.decode(toml_path, data))
    except ConfigError as exc:
        from leanctx.doctor import refused_fix

        return [{"name": "codex config.toml", "status": "fail", "detail": str(exc), "fix": refused_fix(exc, agent, home, project),
                 "init_refuses": True}]
    hooks_path = config_path(agent, home, project)
    hooks_data = files.read_bytes(hooks_path)
    report = trust_report(agent, home, hooks_path, hooks_data.decode("utf-8") if hooks_data else "")
    bad = [r for r in report if r["status"] != "trusted"]
    if not report:
        return out
    if bad:
        detail = ", ".join(f"{r['event']} {r['status']}" for r in bad)
        out.append({"name": "codex hook trust", "status": "fail", "detail": f"Codex will skip these hooks: {detail}",
                    "fix": TRUST_FIX.format(init=_init_again(agent, home, project, hooks_data))})
    else:
        out.append({"name": "codex hook trust", "status": "ok", "detail": f"all {len(report)} leanctx hooks trusted"})
    return out


def _init_again(agent: Agent, home: Path, project: Path | None, hooks_data: bytes | None) -> str:
    """The init that states the installed profile again (a bare one would take --bot out)."""
    from leanctx import doctor, paths
    from leanctx.installer import hookconfig, mcpreg

    try:
        value = hookconfig.parse(config_path(agent, home, project), hooks_data or b"{}").value
    except ConfigError:
        return doctor.init_command(agent, project)
    profile = doctor.installed_profile(doctor.wired_commands(agent, value))
    mcp = profile.read_gate or bool(mcpreg.recorded_names(agent, home, paths.data_dir(), project))
    return doctor.init_command(agent, project, profile, mcp)


def _read_toml(path: Path, data: bytes | None) -> dict:
    """A config.toml's values; {} when missing or unparseable (init refuses those on its own)."""
    if data is None:
        return {}
    try:
        return tomledit.values(path, data.decode("utf-8"))
    except (ConfigError, UnicodeDecodeError):
        return {}


def _hooks_switch(config: dict) -> tuple[str, bool] | None:
    """The [features] key that decides whether hooks run in one config layer, and its value.
    Verified on 0.171: `hooks` wins over the older `codex_hooks` when both are set."""
    features = config.get("features")
    if not isinstance(features, dict):
        return None
    for key in ("hooks", "codex_hooks"):
        if isinstance(features.get(key), bool):
            return key, features[key]
    return None


def load_problems(agent: Agent, home: Path, project: Path | None, read) -> list[dict]:
    """What stops Codex loading our hooks or MCP server, all silent in 0.171 (HOSTS_VERIFIED.md f)."""
    user_toml = config_toml(agent, home)
    layers = [user_toml] + ([project / ".codex" / "config.toml"] if project is not None else [])
    texts = {path: read(path) for path in layers}
    configs = {path: _read_toml(path, data) for path, data in texts.items()}
    out: list[dict] = []
    deciding = None
    for path in layers:  # the project layer overrides the user's
        switch = _hooks_switch(configs[path])
        if switch is not None:
            deciding = (path, *switch)
    if deciding is not None and deciding[2] is False:
        path, key, _ = deciding
        line = toml_line(texts[path].decode("utf-8", "replace"), "features", key)
        out.append({"name": "codex hooks feature", "path": path, "reason": f"[features] {key} = false: Codex runs no hooks",
                    "fix": f"set hooks = true under [features] in {where(path, home, line)}"})
    mcp_path = layers[-1]  # the MCP servers of this level live in its own config.toml
    mcp_data = texts[mcp_path]
    servers = configs[mcp_path].get("mcp_servers")
    for name, server in (servers.items() if isinstance(servers, dict) else ()):
        if is_ours(server) and server.get("enabled") is False:  # `init --mcp-name` may have named it otherwise
            line = toml_line((mcp_data or b"").decode("utf-8", "replace"), "mcp_servers", name, "enabled")
            out.append({"name": "codex mcp server enabled", "path": mcp_path,
                        "reason": f"[mcp_servers.{name}] enabled = false: Codex does not start leanctx's MCP server (no ctx_read)",
                        "fix": f"delete enabled = false under [mcp_servers.{name}] in {where(mcp_path, home, line)}"})
    if project is not None:
        out.extend(_project_trust(configs[user_toml], texts[user_toml], user_toml, project, home))
    return out


def _project_trust(config: dict, data: bytes | None, user_toml: Path, project: Path, home: Path) -> list[dict]:
    """Codex reads a project's .codex/ only when the folder is trusted (verified on 0.171:
    "Untrusted project-local configuration is disabled"); new folders are asked about at start."""
    projects = config.get("projects") if isinstance(config.get("projects"), dict) else {}
    names = [str(project), os.path.realpath(project)]
    entry = next((projects[n] for n in names if isinstance(projects.get(n), dict)), {})
    level = entry.get("trust_level")
    if level == "trusted":
        return []
    shown = str(project)
    if level is None:
        return [{"name": "codex project trust", "path": user_toml, "severity": NOTE,
                 "reason": f"Codex loads {shown}/.codex (our hooks and MCP server) only once you trust the folder",
                 "fix": f"start `codex` in {shown} and trust the folder when asked"}]
    line = next((n for n in (toml_line((data or b"").decode("utf-8", "replace"), "projects", name, "trust_level") for name in names) if n), None)
    return [{"name": "codex project trust", "path": user_toml, "severity": FAIL,
             "reason": f'{shown} is marked trust_level = "{level}": Codex ignores its .codex/ folder',
             "fix": f'set trust_level = "trusted" under [projects."{shown}"] in {where(user_toml, home, line)}'}]
