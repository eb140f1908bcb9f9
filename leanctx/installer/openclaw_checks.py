"""OpenClaw's own checks: what in `openclaw.json` keeps our plugin from loading or from its
conversation hooks, and doctor's proof that the gateway loads it. Found by host name through
hostload.HOST_CHECKS.

Proof, not inference: `openclaw plugins inspect leanctx --runtime --json` loads the plugin the way
the gateway does (in the inspecting process, with the user's config) and lists the typed hooks it
registered and any registration OpenClaw blocked; doctor compares those with the events the plugin
file wires. A gateway started before the plugin file last changed still runs the old one: doctor
says to restart it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from leanctx.agents.base import Agent
from leanctx.agents.openclaw import STATE_TOOLS
from leanctx.installer import jsonc
from leanctx.installer.hostload import display

INSPECT_TIMEOUT = 90
START_SLACK_S = 2.0


def _config(agent: Agent, home: Path, read) -> tuple[Path, dict | None]:
    path = agent.openclaw_config(home)
    data = read(path)
    if data is None:
        return path, None
    try:
        value = jsonc.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, jsonc.JsoncError):
        return path, None  # init refuses it and doctor's config check names line and column
    return path, value if isinstance(value, dict) else None


def load_problems(agent: Agent, home: Path, project: Path | None, read) -> list[dict]:
    """Settings that make OpenClaw skip our plugin or withhold its conversation hooks."""
    if project is not None:
        return []
    path, config = _config(agent, home, read)
    if config is None:
        return []
    plugins = config.get("plugins") if isinstance(config.get("plugins"), dict) else {}
    pid = "leanctx"
    where = display(path, home)
    out = []

    def problem(name: str, reason: str, fix: str) -> None:
        out.append({"name": name, "path": path, "reason": reason, "fix": fix})

    if plugins.get("enabled") is False:
        problem("openclaw plugins enabled", "plugins.enabled is false: OpenClaw loads no plugin at all",
                f"set plugins.enabled to true (or delete it) in {where}, then restart the gateway")
    deny = plugins.get("deny")
    if isinstance(deny, list) and pid in deny:
        problem("openclaw plugin not denied", f"plugins.deny lists {pid!r}",
                f"take {pid!r} out of plugins.deny in {where}, then restart the gateway")
    allow = plugins.get("allow")
    if isinstance(allow, list) and pid not in allow:
        problem("openclaw plugin allowed", f"plugins.allow does not list {pid!r}, and only listed plugins load",
                "leanctx doctor --agent openclaw --fix (re-runs init with the profile installed; it adds the name to the list), "
                "then restart the gateway")
    entry = (plugins.get("entries") or {}).get(pid) if isinstance(plugins.get("entries"), dict) else None
    if isinstance(entry, dict):
        if entry.get("enabled") is False:
            problem("openclaw plugin enabled", f"plugins.entries.{pid}.enabled is false",
                    f"set plugins.entries.{pid}.enabled to true in {where}, then restart the gateway")
        hooks = entry.get("hooks") if isinstance(entry.get("hooks"), dict) else {}
        if hooks.get("allowConversationAccess") is not True:
            problem("openclaw conversation hooks", f"plugins.entries.{pid}.hooks.allowConversationAccess is not true: "
                    "OpenClaw withholds the prompt and reply hooks from the plugin",
                    f"set plugins.entries.{pid}.hooks.allowConversationAccess to true in {where}")
        if hooks.get("allowPromptInjection") is False:
            problem("openclaw prompt context", f"plugins.entries.{pid}.hooks.allowPromptInjection is false: "
                    "the thread cannot be handed back to the model",
                    f"delete plugins.entries.{pid}.hooks.allowPromptInjection in {where}")
    return out


def session_scope(agent: Agent, home: Path, read) -> dict | None:
    """With the bot profile: a doctor row when OpenClaw puts every direct message in one session
    (`session.dmScope` "main", its default), which would give everyone one thread."""
    if not _bot_installed(agent, home, read):
        return None
    path, config = _config(agent, home, read)
    if config is None:
        return None
    session = config.get("session") if isinstance(config.get("session"), dict) else {}
    scope = session.get("dmScope", "main")
    if scope != "main":
        return {"name": "openclaw one session per person", "status": "ok",
                "detail": f"session.dmScope is {scope!r}: each person's direct messages have a session of their own", "fix": None}
    return {"name": "openclaw one session per person", "status": "fail",
            "detail": "session.dmScope is 'main' (OpenClaw's default): every direct message, whoever sends it, goes "
                      "to one session, so everyone would share one thread",
            "fix": f"set session.dmScope to \"per-channel-peer\" in {display(path, home)}, then restart the gateway"}


def _bot_installed(agent: Agent, home: Path, read) -> bool:
    data = read(agent.hook_folder(home, None) / agent.hook_file_names()[0])
    return data is not None and b" --bot" in data


def _disk(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _openclaw() -> str | None:
    return shutil.which("openclaw")


def inspect(exe: str, env: dict | None = None) -> tuple[dict | None, str]:
    """OpenClaw's own runtime view of our plugin ({plugin, typedHooks, diagnostics}), or why not."""
    try:
        cp = subprocess.run([exe, "plugins", "inspect", "leanctx", "--runtime", "--json"], capture_output=True, text=True,
                            timeout=INSPECT_TIMEOUT, stdin=subprocess.DEVNULL, env=env)
    except subprocess.TimeoutExpired:
        return None, f"`openclaw plugins inspect leanctx --runtime` did not answer in {INSPECT_TIMEOUT} s"
    except OSError as exc:
        return None, f"{exe}: {exc}"
    try:
        value = json.loads(cp.stdout)
    except ValueError:
        last = (cp.stderr or cp.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"`openclaw plugins inspect leanctx --runtime` failed (exit {cp.returncode}): {last[0][:200]}"
    return (value, "") if isinstance(value, dict) else (None, "`openclaw plugins inspect` printed no JSON object")


def _state_dir_of(env: dict) -> str | None:
    """The state dir a process with this environment uses (as OpenClaw resolves it)."""
    state = (env.get("OPENCLAW_STATE_DIR") or "").strip()
    if state:
        return os.path.realpath(os.path.expanduser(state))
    home = env.get("HOME")
    return os.path.realpath(os.path.join(home, ".openclaw")) if home else None


def _gateway_started_before(plugin: Path, state_dir: Path) -> list[int]:
    """Running gateway processes of this state dir that started before the plugin file last changed."""
    try:
        import psutil
    except ImportError:
        return []
    try:
        changed = plugin.stat().st_mtime
    except OSError:
        return []
    stale = []
    for proc in psutil.process_iter(["pid", "cmdline", "create_time", "uids"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "openclaw" in cmd and "gateway" in cmd and proc.info["uids"] and proc.info["uids"].real == os.getuid():
                # a process's start time is known to the second only (the kernel's boot time is whole
                # seconds): a gateway started right after init is not "older"
                if proc.info["create_time"] < changed - START_SLACK_S and _state_dir_of(proc.environ()) == os.path.realpath(state_dir):
                    stale.append(proc.info["pid"])
        except (psutil.Error, TypeError, KeyError):
            continue
    return stale


def doctor_checks(agent: Agent, home: Path, project: Path | None = None) -> list[dict]:
    from leanctx.installer import hookfiles

    exe = _openclaw()
    if exe is None:
        return [{"name": "openclaw runtime", "status": "info",
                 "detail": "openclaw is not on PATH: the gateway's own load of the plugin was not checked",
                 "fix": "put the openclaw you run the gateway with on PATH and run doctor again"}]
    rows = []
    scope = session_scope(agent, home, _disk)
    if scope is not None:
        rows.append(scope)
    try:
        wired, _files = hookfiles.read_wired(agent, home, None)
    except Exception:  # noqa: BLE001 - the plugin file check of the generic doctor reports it
        wired = {"hooks": {}}
    want = set(wired["hooks"]) - {"state_tool"}  # the state tools are agent tools, not typed hooks
    tools_wanted = "state_tool" in wired["hooks"]
    if not want:
        return rows
    value, why = inspect(exe)
    fix = "leanctx doctor --agent openclaw --fix (re-runs init with the profile installed), then `openclaw gateway restart`"
    if value is None:
        rows.append({"name": "openclaw runtime", "status": "fail", "detail": why, "fix": fix})
        return rows
    plugin = value.get("plugin") if isinstance(value.get("plugin"), dict) else {}
    hooks = {h.get("name") for h in value.get("typedHooks") or [] if isinstance(h, dict)}
    missing = sorted(want - hooks)
    offered = {n for t in value.get("tools") or [] if isinstance(t, dict) for n in t.get("names") or [] if isinstance(n, str)}
    if tools_wanted:
        missing += sorted(set(STATE_TOOLS) - offered)
    blocked = [d.get("message") for d in value.get("diagnostics") or [] if isinstance(d, dict) and d.get("message")]
    if plugin.get("status") != "loaded":
        rows.append({"name": "openclaw runtime", "status": "fail",
                     "detail": f"OpenClaw does not load the plugin (status {plugin.get('status')!r}"
                               f"{': ' + plugin.get('error') if isinstance(plugin.get('error'), str) else ''})", "fix": fix})
    elif missing:
        rows.append({"name": "openclaw runtime", "status": "fail",
                     "detail": f"the plugin loads but OpenClaw did not register {', '.join(missing)}"
                               f"{' (' + '; '.join(blocked)[:300] + ')' if blocked else ''}", "fix": fix})
    else:
        rows.append({"name": "openclaw runtime", "status": "ok",
                     "detail": f"OpenClaw loads the plugin from {display(Path(plugin.get('source', '?')), home)} "
                               f"with all {len(want)} hooks registered"
                               f"{' and its ' + str(len(STATE_TOOLS)) + ' state tools' if tools_wanted else ''}", "fix": None})
    stale = _gateway_started_before(agent.hook_folder(home, None) / agent.hook_file_names()[0], agent.config_dir(home))
    if stale:
        rows.append({"name": "openclaw gateway current", "status": "fail",
                     "detail": f"the running gateway (pid {', '.join(map(str, stale))}) started before leanctx's plugin "
                               "last changed, so it still runs the old plugin",
                     "fix": "openclaw gateway restart (or restart the service that runs the gateway)"})
    return rows
