"""Registering leanctx's MCP server (`leanctx mcp`) in each host's MCP config, and taking it out.

Same rules as the hooks: the entry is edited in place (JSON through the span-keeping editor,
Codex's config.toml through tomlkit), other servers and comments are untouched, init twice is
init once, uninstall removes our entry and the `mcpServers` table if we created it. An entry of
the same name that we did not write (told apart by its command) is the user's: init refuses and
uninstall leaves it. The server is spawned without a shell, so at user level the entry names
the data dir's wrapper by absolute path; it runs this installation's Python isolated from the
folder the host starts it in.
Claude Code rewrites ~/.claude.json itself on every start (and replaces a file it cannot parse
with defaults), so we never leave it unparseable: every write is atomic.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import tomlkit

from leanctx import paths
from leanctx.agents.base import MCP_BOT_ARGS, Agent
from leanctx.installer import files, hookconfig, manifest, tomledit
from leanctx.installer.files import ConfigError
from leanctx.installer.install import MAX_ATTEMPTS, Change, already_there, plan_removal
from leanctx.installer.tomledit import dumps_after_removal

SERVER = "leanctx"  # the default server name; `init --mcp-name NAME` registers ours under NAME
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what Claude Code and Codex accept as a server name


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ConfigError(f"--mcp-name {name!r}: use 1-64 letters, digits, '-' or '_' (what the hosts accept as a server name)")
    return name


def server_command(project: Path | None = None, bot: bool = False, data_dir: Path | None = None) -> tuple[str, list[str]]:
    """At user level the data dir's wrapper (`<data dir>/bin/leanctx-hook mcp`), which starts
    this installation's Python isolated from the folder the host runs it in (`python -m` would
    import a repository's own `leanctx/` or `json.py` from there); in a project's files
    (committed, shared with a team) the `leanctx` console script found on PATH, so no path of
    this machine is written (a console script puts its own bin folder first on sys.path, never
    the current one). The bot profile's command says so (`--profile bot`: the state tools too)."""
    profile = list(MCP_BOT_ARGS) if bot else []
    if project is not None:
        return "leanctx", ["mcp", *profile]
    return str(paths.wrapper_path(data_dir)), ["mcp", *profile]


def is_module_form(entry: object) -> bool:
    """`<python> -m leanctx mcp`, what init registered before: it imports from the host's folder."""
    if not isinstance(entry, dict):
        return False
    args = launch(entry)[1]
    return isinstance(args, list) and args[:3] == ["-m", "leanctx", "mcp"]


def wanted_entry(agent: Agent, data_dir: Path | None = None, project: Path | None = None, bot: bool = False) -> dict:
    """The entry for this installation. When init ran with a LEANCTX_HOME other than the default,
    the user-level entry carries it, or the server the host spawns (without that variable) would
    look for the hooks' records in the default place while the wrapper publishes them in
    LEANCTX_HOME. A project entry never does: it is a path of this machine, and the project's
    hooks (`leanctx-hook` on PATH) use the host's environment the same way."""
    entry = agent.mcp_entry(*server_command(project, bot, data_dir))
    if project is None and data_dir is not None and Path(data_dir) != paths.default_data_dir():
        entry[agent.mcp_env_key] = {"LEANCTX_HOME": str(data_dir)}
    return entry


def by_hand(agent: Agent, data_dir: Path | None = None, project: Path | None = None, bot: bool = False) -> str | None:
    """What the user adds by hand to register our server on a host whose MCP file init does not
    edit (Goose's YAML `config.yaml`: no YAML editor here keeps the file as it was, byte for
    byte); None where init registers it itself."""
    template = getattr(agent, "mcp_by_hand", "")
    if not template or project is not None:
        return None
    from leanctx import templating

    command, args = server_command(None, bot, data_dir)
    env = wanted_entry(agent, data_dir, None, bot).get(agent.mcp_env_key) or {}
    values = {"SERVER": SERVER, "COMMAND": json.dumps(command), "ARGS": ", ".join(map(json.dumps, args)),
              "ENVS": json.dumps(env)}  # JSON strings and objects are YAML flow scalars and mappings
    return templating.fill(template, values, f"{agent.name} mcp_by_hand")


def launch(entry: dict) -> tuple[object, object, object]:
    """(command, args, env) of a server entry in either shape: `{command, args, env}`, or
    OpenCode's `{command: [program, *args], environment}`."""
    command = entry.get("command")
    if isinstance(command, list):
        return (command[0] if command else None), command[1:], entry.get("environment")
    return command, entry.get("args"), entry.get("env")


def is_ours(entry: object) -> bool:
    """An entry we wrote, recognised by what it runs (`<data dir>/bin/leanctx-hook mcp`,
    `leanctx mcp`, and the older `<python> -m leanctx mcp` that init replaces, each with or
    without `--profile bot|coding`) whatever the host did to the file's formatting; one with
    other environment is the user's."""
    if not isinstance(entry, dict):
        return False
    command, args, env = launch(entry)
    if not isinstance(command, str) or env not in (None, {}) and (not isinstance(env, dict) or set(env) != {"LEANCTX_HOME"}):
        return False
    if isinstance(args, list) and args[-2:] in (["--profile", "bot"], ["--profile", "coding"]):
        args = args[:-2]
    name = Path(command.replace("\\", "/")).name
    return args == ["-m", "leanctx", "mcp"] or (args == ["mcp"] and name in ("leanctx", paths.WRAPPER_NAME))


def part_name(name: str) -> str:
    return f"mcp:{name}"


def recorded_names(agent: Agent, home: Path, data_dir: Path, project: Path | None, path: Path | None = None) -> list[str]:
    """The server names this agent's install registered in that file (default: the one the host
    reads now; none when the host has no MCP file at this level), from its manifest."""
    if path is None:
        config = agent.mcp_config(home, project)
        if config is None:
            return []
        path = config[0]
    path = files.resolve_target(path, home, project).real
    record = manifest.load(data_dir, path)
    if record is None or record.parts is None:
        return []
    return [p.split(":", 1)[1] for a, p in record.parts if a == agent.name and p.startswith("mcp:")]


def chosen_name(agent: Agent, home: Path, data_dir: Path, project: Path | None, explicit: str | None = None) -> str:
    """`--mcp-name`, else the name an earlier init chose, else `leanctx`."""
    if explicit is not None:
        return check_name(explicit)
    return next(iter(recorded_names(agent, home, data_dir, project)), SERVER)


def registered(agent: Agent, home: Path, project: Path | None, name: str = SERVER) -> dict | None:
    """The entry named `name` as the host will read it now, or None."""
    if agent.mcp_config(home, project) is None:
        return None
    path, fmt, key = agent.mcp_config(home, project)
    data = files.read_bytes(files.resolve_target(path, home, project).real)
    if data is None:
        return None
    if fmt == "toml":
        value = tomledit.values(path, files.decode(path, data))
        servers = value.get(key[0])
        entry = servers.get(name) if isinstance(servers, dict) else None
    else:  # only the entry is decoded: ~/.claude.json is tens of MB
        doc = hookconfig.parse(path, data)
        entry = doc.get(key + (name,)) if doc.has(key) and isinstance(doc.get(key), dict) and doc.has(key + (name,)) else None
    return entry if isinstance(entry, dict) else None


def _refuse_foreign(path: Path, name: str, entry: object) -> None:
    if entry is not None and not is_ours(entry):
        hint = "rename yours, or run init with --mcp-name NAME to register leanctx's under another name"
        raise ConfigError(f"{path}: has an MCP server named {name!r} that leanctx did not write; {hint}")


def plan_register(agent: Agent, home: Path, data_dir: Path, project: Path | None, name: str = SERVER,
                  bot: bool = False) -> Change | None:
    if agent.mcp_config(home, project) is None:  # the host reads MCP servers from no file at this level
        return None
    path, fmt, key = agent.mcp_config(home, project)
    target = files.resolve_target(path, home, project)
    entry = wanted_entry(agent, data_dir, project, bot)
    created: list = []
    if fmt == "json":
        old, new, created, stale = _register_json(target, key, name, entry)
    else:
        old = files.read_bytes(target.real)
        text = files.decode(target.path, old) if old is not None else ""
        doc = tomledit.parse(target.path, text)
        servers = doc.get(key[0])
        if servers is not None and not isinstance(servers, dict):
            raise ConfigError(f"{path}: {key[0]} is not a table; left untouched")
        current = servers.get(name) if servers is not None else None
        _refuse_foreign(path, name, current.unwrap() if current is not None else None)
        stale = current is not None
        if current is None or current.unwrap() != entry:
            with tomledit.editing(path, text, key[0]):
                if servers is None:
                    servers = tomlkit.table(is_super_table=True)
                    doc[key[0]] = servers
                    created.append(list(key))
                servers[name] = tomledit.table_in(servers, entry)
        new = tomledit.dumps(doc, text).encode("utf-8")
    if new == old:
        return already_there(agent, part_name(name), target, data_dir, old)
    files.check_writable(target.real)
    return Change(agent, target, old, new, created, replan=lambda: plan_register(agent, home, data_dir, project, name, bot),
                  part=part_name(name), stale=stale)


def _register_json(target: files.Target, key: tuple, name: str, entry: dict) -> tuple[bytes | None, bytes, list, bool]:
    """(old bytes, new bytes, containers created, stale) for a JSON config. ~/.claude.json is
    tens of MB: it is edited as bytes (never decoded whole), and its old bytes are let go while
    the edit runs and read again after it (the same, by hash, or the edit is redone), so the old
    bytes, the old text and the new text are never all held at once."""
    path = target.path
    for _ in range(MAX_ATTEMPTS):
        first = files.read_bytes(target.real)
        digest = files.sha256(first)
        doc = hookconfig.parse(path, first if first is not None and first.strip() else b"{}\n")
        del first
        if doc.has(key) and not isinstance(doc.get(key), dict):
            raise ConfigError(f"{path}: {key[0]} is not an object; left untouched")
        _refuse_foreign(path, name, doc.get(key + (name,)) if doc.has(key + (name,)) else None)
        stale = doc.has(key + (name,))
        # every missing container on the way (OpenClaw's servers sit under `mcp.servers`)
        created = [list(key[:n]) for n in range(1, len(key) + 1) if not doc.has(key[:n])]
        if not doc.has(key + (name,)) or doc.get(key + (name,)) != entry:
            doc.set_key(key + (name,), entry)
        new = doc.data if doc.edited else None
        del doc
        old = files.read_bytes(target.real)
        if files.sha256(old) == digest:
            return old, old if new is None else new, created, stale
    raise ConfigError(f"{path}: keeps changing while we read it; close the host and try again")


def plan_unregister(agent: Agent, home: Path, data_dir: Path, project: Path | None, name: str = SERVER,
                    path: Path | None = None) -> Change | None:
    """Take our entry named `name` out of `path` (default: the file the host reads now); an
    entry we cannot prove ours (by its command) stays."""
    config = agent.mcp_config(home, project)
    if config is None:
        return None
    current, fmt, key = config
    path = path or current
    target = files.resolve_target(path, home, project)

    def surgical(text: str | bytes, record: manifest.Manifest | None) -> str | bytes | None:
        created = {tuple(c) for c in record.created} if record else set()
        if isinstance(text, str):  # toml
            doc = tomledit.parse(target.path, text)
            servers = doc.get(key[0])
            if not isinstance(servers, dict) or name not in servers or not is_ours(servers[name].unwrap()):
                return text
            with tomledit.editing(path, text, key[0]):
                del servers[name]
                if not servers and tuple(key) in created:
                    del doc[key[0]]
            new_text = dumps_after_removal(doc, text)
            empty = not new_text.strip()
        else:
            jdoc = hookconfig.parse(target.path, text)  # the bytes, never decoded whole (tens of MB)
            if not jdoc.has(key + (name,)) or not is_ours(jdoc.get(key + (name,))):
                return text
            jdoc.remove_key(key + (name,))
            for n in range(len(key), 0, -1):  # innermost first, each only when init created it
                if tuple(key[:n]) in created and jdoc.has(key[:n]) and jdoc.is_empty_container(key[:n]):
                    jdoc.remove_key(key[:n])
            empty = jdoc.is_empty_container(())
            new_text = jdoc.data
        if record is not None and not record.existed_before and empty:
            return None
        return new_text

    again = lambda: plan_unregister(agent, home, data_dir, project, name, path)  # noqa: E731
    return plan_removal(agent, part_name(name), target, data_dir, surgical, again, raw=fmt != "toml")


def plan_unregister_all(agent: Agent, home: Path, data_dir: Path, project: Path | None, keep: str | None = None) -> list[Change]:
    """Take out every name this agent's install registered (and `leanctx`), except `keep` in the
    file the host reads now. An entry of ours in another of the host's candidate files (one it
    no longer reads, e.g. CodeBuddy after the user created a file it reads first) goes too."""
    changes = [plan_unregister(agent, home, data_dir, project, n)
               for n in dict.fromkeys(recorded_names(agent, home, data_dir, project) + [SERVER]) if n != keep]
    for other, names in recorded_elsewhere(agent, home, data_dir, project).items():
        changes += [plan_unregister(agent, home, data_dir, project, n, other) for n in names]
    return [c for c in changes if c is not None]


def recorded_elsewhere(agent: Agent, home: Path, data_dir: Path, project: Path | None) -> dict[Path, list[str]]:
    """The host's other candidate MCP files that still hold a server of ours (by manifest). A
    candidate we may not write through (a symlink out of HOME, a folder) holds nothing of ours:
    we never wrote it, and it must not stop an uninstall."""
    config = agent.mcp_config(home, project)
    if config is None:  # no MCP file at this level (Cline's projects): nothing elsewhere either
        return {}
    current = config[0]
    found = {}
    for other in agent.mcp_config_files(home, project):
        if other == current:
            continue
        try:
            names = recorded_names(agent, home, data_dir, project, other)
        except ConfigError:
            continue
        if names:
            found[other] = names
    return found
