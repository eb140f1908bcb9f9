"""`leanctx doctor`: prove, per agent, that the hooks are wired and work, and say how to fix them.

Nothing is assumed from what init once wrote: hosts rewrite their own settings (Claude Code's
`/model` save has reverted hooks), wrappers outlive their interpreter, and Codex silently skips
hooks the user has not trusted. So doctor re-reads every config, runs the wrapper for every wired
event exactly as the host would (`sh -c <command>` with a host-shaped payload, into a scratch data
dir so the real records are not disturbed), and reports what was last published for real.

The `--json` report is stable (schema 1); docs/commands.md describes its fields.

Every fix line is something that works when followed: a command that repairs the check (with the
flags of the profile that is installed, so following it changes nothing else), or the exact edit
(file, line, column, what to change) where init cannot help, such as a config it cannot parse.
"""

from __future__ import annotations

import calendar
import json
import shlex
import os
import subprocess
import tempfile
import time
from pathlib import Path

import leanctx
from leanctx import agents
from leanctx.agents.base import Agent, is_old_gate
from leanctx.hooks.publish import read_json, record_path
from leanctx.installer import files, hookconfig, manifest, wrapper
from leanctx.installer.files import ConfigError
from leanctx.installer.install import display

SCHEMA = 1
SMOKE_TIMEOUT_S = 10.0
OK, FAIL, WARN, INFO = "ok", "fail", "warn", "info"


def _check(name: str, status: str, detail: str, fix: str | None = None) -> dict:
    return {"name": name, "status": status, "detail": detail, "fix": fix}


def _where(project: Path | None) -> str:
    return f" --project {shlex.quote(str(project))}" if project is not None else ""


def init_command(agent: Agent, project: Path | None = None, profile=None, mcp: bool = True) -> str:
    """The init that states `profile` again (init states the whole profile: a bare init would
    take --bot or --guard out)."""
    flags = ""
    if profile is not None:
        flags = "".join(f for f, on in ((" --bot", profile.bot), (" --guard", profile.guard),
                                        (" --no-builtin-gate", profile.read_gate and not profile.builtin_read)) if on)
    return f"leanctx init --agent {agent.name}{_where(project)}{flags}{'' if mcp else ' --no-mcp'}"


def doctor_fix_command(agent: Agent, project: Path | None = None) -> str:
    """`doctor --fix` for one agent: it re-runs init with the profile installed (named, because a
    bare `doctor --fix` leaves alone an agent that is not installed)."""
    return f"leanctx doctor --agent {agent.name}{_where(project)} --fix"


def init_fix(agent: Agent, project: Path | None = None, profile=None, mcp: bool = True) -> str:
    return f"{init_command(agent, project, profile, mcp)}   (or: {doctor_fix_command(agent, project)})"


def refused_fix(exc: ConfigError, agent: Agent, home: Path, project: Path | None = None) -> str:
    """The fix for a file init refuses as it is (so neither init nor doctor --fix can help): the
    spot and what the parser wanted, then the init to run once it is corrected."""
    then = f"then run {init_command(agent, project)}"
    if isinstance(exc, files.ParseError):
        spot = f"{display(exc.path, home)}:{exc.line}:{exc.col}"
        wanted = f" ({exc.reason})" if exc.reason else ""
        return f"the file is not {exc.language} at {spot}{wanted}: correct it there, or move the file aside; {then}"
    return f"init refuses this file as it is: resolve what the line above says, {then}"


def wired_commands(agent: Agent, doc_value: dict) -> dict[str, list[str]]:
    """Event name -> our hook commands found for it in a parsed config."""
    found: dict[str, list[str]] = {}
    hooks = doc_value.get(agent.hooks_key[0]) if isinstance(doc_value, dict) else None
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        if isinstance(groups, list):
            cmds = [c for g in groups for c in agent.our_commands(g)]
            if cmds:
                found[event] = cmds
    return found


def missing_on_path(commands: list[str]) -> list[str]:
    """The programs that project-level entries call by name (`leanctx-hook`, `leanctx`) and that
    are not on this PATH: the host would fail to start them."""
    import shlex
    import shutil

    missing = []
    for command in commands:
        try:
            program = shlex.split(command)[0] if command.strip() else ""
        except ValueError:
            continue
        if program and "/" not in program and shutil.which(program) is None and program not in missing:
            missing.append(program)
    return missing


def path_check(commands: list[str], where: str) -> dict | None:
    """A FAIL naming the programs `where`'s entries call by name that are not on PATH, or None."""
    missing = missing_on_path(commands)
    if not missing:
        return None
    return _check("on PATH", FAIL, f"{where} calls {', '.join(missing)} by name, which is not on PATH", path_fix())


def path_fix() -> str:
    """Name the folder that holds this installation's console scripts, when it does."""
    import sysconfig

    folder = Path(sysconfig.get_path("scripts"))
    here = f"add {folder} to the PATH the host starts with (it holds this installation's leanctx-hook), or " \
        if (folder / "leanctx-hook").exists() else ""
    return f"{here}install leanctx where the host finds it (`pipx install .` in a clone of leanctx)"


def _wrapper_checks(data_dir: Path, home: Path, agent_name: str | None = None) -> tuple[list[dict], bool]:
    path = wrapper.wrapper_path(data_dir)
    shown = display(path, home)
    fix = f"leanctx doctor{f' --agent {agent_name}' if agent_name else ''} --fix   (re-runs init, which rewrites the wrapper)"
    info = wrapper.read_info(path)
    if not info:
        return [_check("wrapper", FAIL, f"{shown} is missing", fix)], False
    if info.get("unreadable"):
        return [_check("wrapper", FAIL, info["unreadable"], f"remove {shown}, then " + fix)], False
    if info.get("foreign"):
        return [_check("wrapper", FAIL, f"{shown} is not a leanctx wrapper", f"move {shown} away, then " + fix)], False
    checks = []
    if not os.access(path, os.X_OK):
        return [_check("wrapper", FAIL, f"{shown} is not executable", f"chmod +x {shown}")], False
    checks.append(_check("wrapper", OK, f"{shown} (written by leanctx {info.get('version')})"))
    python = info.get("python") or ""
    if not (python and os.access(python, os.X_OK)):
        checks.append(_check("wrapper interpreter", FAIL, f"{display(python, home) if python else '?'} no longer exists", fix))
        return checks, False
    probe = subprocess.run(
        [python, "-I", "-S", "-c", "import sys; sys.path.insert(0, sys.argv[1]); import leanctx.hooks, leanctx; print(leanctx.__version__)", str(wrapper.package_root())],
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
    )
    if probe.returncode != 0:
        checks.append(_check("wrapper interpreter", FAIL, f"{display(python, home)} cannot import leanctx: {probe.stderr.strip()[-200:]}", fix))
        return checks, False
    checks.append(_check("wrapper interpreter", OK, f"{display(python, home)} imports leanctx {probe.stdout.strip()}"))
    if info.get("version") != leanctx.__version__:
        checks.append(_check("wrapper version", FAIL, f"wrapper from leanctx {info.get('version')}, installed leanctx is {leanctx.__version__}", fix))
    else:
        checks.append(_check("wrapper version", OK, f"wrapper and installed leanctx are both {leanctx.__version__}"))
    return checks, True


def smoke(agent: Agent, event: str, command: str, cwd: Path, project: Path | None = None) -> dict:
    """Run one hook command as the host would, into a scratch data dir; check exit, output, record."""
    payload = agent.synthetic_payload(event, str(cwd))
    with tempfile.TemporaryDirectory(prefix="leanctx-doctor-") as scratch:
        # everything the hook writes goes to the scratch dir: records, and the bot profile's state
        env = dict(os.environ, LEANCTX_HOME=scratch, CKS_HOME=os.path.join(scratch, "cks"), CKS_ACTIVE_USER="doctor")
        for name in ("LEANCTX_DISABLED", "LEANCTX_STATE_URL"):
            env.pop(name, None)
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", command],
                input=json.dumps(payload).encode(),
                capture_output=True,
                env=env,
                cwd=str(cwd),
                timeout=SMOKE_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            return _check(f"smoke {event}", FAIL, f"did not finish within {SMOKE_TIMEOUT_S:.0f} s",
                          f"{doctor_fix_command(agent, project)}   (rewrites the wrapper and the entries); if it still hangs, "
                          f"run it by hand: leanctx hook {agent.name} {event} < payload.json")
        ms = (time.perf_counter() - started) * 1000
        stdout = proc.stdout.decode("utf-8", "replace")
        problem = None
        if proc.returncode != 0:
            problem = f"exit code {proc.returncode}: {proc.stderr.decode('utf-8', 'replace').strip()[-200:]}"
        else:
            problem = agent.check_output(event, stdout)
        if problem is None and agent.stderr_is_output and proc.stderr.strip():
            text = proc.stderr.decode("utf-8", "replace").strip()[-200:]
            problem = f"wrote to stderr, which {agent.display_name} takes as the hook's answer: {text}"
        normalized = agent.normalize(event, payload)
        conv = normalized.conversation_id
        if problem is None and conv and normalized.kind not in ("pre_tool", "post_tool", "state_tool"):  # the gates and tools publish nothing
            published = read_json(record_path(Path(scratch), agent.name, conv))
            if not published or published.get("last_event") != event:
                log = Path(scratch) / "logs" / "hooks.log"
                detail = log.read_text(errors="replace").strip()[-200:] if log.exists() else "no record, no log"
                problem = f"nothing published ({detail})"
    if problem:
        return _check(f"smoke {event}", FAIL, problem, f"{doctor_fix_command(agent, project)}   (rewrites the wrapper and the entries)")
    return {**_check(f"smoke {event}", OK, f"exit 0, valid output, published, {ms:.0f} ms"), "ms": round(ms, 1)}


def last_published(agent: Agent, data_dir: Path) -> dict | None:
    folder = data_dir / "conversations" / agent.name
    newest: dict | None = None
    for path in folder.glob("*.json"):
        record = read_json(path)
        if record and (newest is None or record.get("updated_ts", 0) > newest.get("updated_ts", 0)):
            newest = record
    if newest is None:
        return None
    return {
        "conversation_id": newest.get("conversation_id"),
        "session_id": newest.get("session_id"),
        "transcript_path": newest.get("transcript_path"),
        "last_event": newest.get("last_event"),
        "updated_at": newest.get("updated_at"),
        "age_s": round(time.time() - float(newest.get("updated_ts") or 0), 1),
        "compactions": newest.get("compactions", 0),
        "active_subagents": sorted(newest.get("active_subagents") or {}),
    }


def installed_profile(wired: dict[str, list[str]]):
    """The profile init was run with, read back from the flags in our commands."""
    from leanctx.installer.install import Profile

    words = {w for cmds in wired.values() for c in cmds for w in c.split()}
    # the built-in reader gate comes with the read gate (a host with no ctx_read pre-tool event of
    # its own, OpenCode, carries only --builtin-read)
    return Profile(bot="--bot" in words, guard="--guard" in words, read_gate="--read-gate" in words or "--builtin-read" in words,
                   builtin_read="--builtin-read" in words)


def check_agent(agent: Agent, home: Path, data_dir: Path, wrapper_ok: bool, explicit: bool, project: Path | None = None,
                elsewhere: list[Path] = ()) -> dict:
    """One agent at one level: user (project None) or the project-level config in `project`.
    `elsewhere`: projects where this agent has an install, named instead of a user-level init."""
    from leanctx.installer import hostload
    from leanctx.installer.install import config_path, hook_commands

    try:
        path = config_path(agent, home, project)
    except ConfigError as exc:
        return {"agent": agent.name, "display_name": agent.display_name, "detected": agent.detect(home), "config_path": "-",
                "installed": False, "checks": [_check("config", FAIL if explicit else INFO, str(exc))], "last_published": None,
                "ok": not explicit}
    detected = agent.detect(home)
    # an agent not on this machine and not asked for: nothing to do, so no hint
    fix = init_fix(agent, project) if explicit or detected else None
    if elsewhere and project is None:
        fix = "; ".join(f"project install in {p}: run leanctx doctor{_where(p)}" for p in elsewhere)
    result: dict = {
        "agent": agent.name,
        "display_name": agent.display_name,
        "detected": detected,
        "config_path": display(path, home),
        "installed": False,
        "checks": [],
        "last_published": None,
    }
    checks: list[dict] = result["checks"]
    missing = False
    try:
        if agent.hook_file_mode is not None:  # OpenCode's plugin, Cline's hook files
            from leanctx.installer import hookfiles

            path = agent.hook_folder(home, project)
            result["config_path"] = display(path, home)
            value, held = hookfiles.read_wired(agent, home, project)
            if not held:
                missing = True
                raise ConfigError(f"{display(path, home)} holds no hook file of leanctx's")
            parsed = f"{', '.join(p.name for p in held)} in {display(path, home)}"
        else:
            target = files.resolve_target(path, home, project)
            data = files.read_bytes(target.real)
            if data is None:
                missing = True
                raise ConfigError(f"{display(path, home)} does not exist")
            value = hookconfig.parse(path, files.decode(path, data)).value
            parsed = f"{display(path, home)} parses"
    except ConfigError as exc:
        status = FAIL if explicit or not missing else INFO  # there but unusable (a FIFO, a loop): a failure
        if missing:
            checks.append(_check("config", status, str(exc), fix))
        else:  # init refuses it as it is: the fix is the user's edit, and doctor --fix leaves it alone
            checks.append({**_check("config", status, str(exc), refused_fix(exc, agent, home, project)), "init_refuses": True})
        result["ok"] = status != FAIL
        return result
    checks.append(_check("config", OK, parsed))
    version = version_check(agent)
    if version is not None:
        checks.append(version)
    wired = wired_commands(agent, value)
    files_run = {event: Path(group["file"]) for event, groups in value.get("hooks", {}).items() for group in groups
                 if isinstance(group, dict) and group.get("executable")} if agent.hook_file_mode is not None else {}
    result["installed"] = bool(wired)
    if not wired and not explicit:
        checks.append(_check("events", INFO, "detected, but leanctx is not wired here", fix))
        result["ok"] = True
        return result
    profile = installed_profile(wired)
    from leanctx.installer import mcpreg

    # as doctor --fix decides it: a host with no read gate event of its own still has the server
    mcp = profile.read_gate or bool(mcpreg.recorded_names(agent, home, data_dir, project))
    fix = init_fix(agent, project, profile, mcp)
    command_for = hook_commands(data_dir, agent, project)  # project files: leanctx-hook on PATH, no wrapper
    on_path = path_check([c for cmds in wired.values() for c in cmds], display(path, home))
    if on_path:
        checks.append(on_path)
    runnable = wrapper_ok if project is None else on_path is None
    result["profile"] = profile.name
    result["read_gate"] = profile.read_gate
    result["builtin_read"] = profile.builtin_read
    checks.append(_check("profile", INFO, {"coding": "coding: ids only, no prompts or replies recorded",
                                           "bot": "bot: prompts and replies recorded in conversation-state",
                                           "guard": "guard: multi-user guard on tool calls",
                                           "bot+guard": "bot+guard: conversation-state and the multi-user guard"}[profile.name]))
    if agent.builtin_read_tools and profile.read_gate:
        from leanctx.hooks.readgate import ENV as GATE_ENV, switched_off

        tools = " and ".join(agent.builtin_read_tools)
        if not profile.builtin_read:
            detail = (f"built-in {tools} not gated (init --no-builtin-gate, or an install from before "
                      f"the gate): only ctx_read gets stubs")
        elif switched_off():
            detail = f"built-in {tools} gated, but switched off here by {GATE_ENV}={os.environ.get(GATE_ENV)}"
        else:
            detail = f"built-in {tools} gated like ctx_read (the pre-tool hook refuses an unchanged re-read, the post-tool hook credits)"
        checks.append(_check("built-in reader gate", INFO, detail))
    for spec, flags in profile.events(agent):
        cmds = wired.get(spec.name, [])
        want = command_for(spec.name, flags)
        old_gate = next((c for c in cmds if is_old_gate(c)), None)
        if old_gate is not None:  # never contacted: whoever holds that port would get the call
            checks.append(_check(f"event {spec.name}", FAIL, f"the old http read gate {old_gate.split(' ', 1)[0]}: any local account "
                                 "that binds that port while the daemon is down answers it, and the host obeys the answer",
                                 fix))
            continue
        if not cmds:
            checks.append(_check(f"event {spec.name}", FAIL, "not wired", fix))
        elif want not in cmds:
            checks.append(_check(f"event {spec.name}", FAIL, f"wired to another wrapper: {cmds[0]}", fix))
        else:
            checks.append(_check(f"event {spec.name}", OK, "wired to our wrapper"))
            if runnable:
                # a hook file the host executes itself (Cline's) is smoke-run as the host runs it
                ran = shlex.quote(str(files_run[spec.name])) if spec.name in files_run else want
                checks.append(smoke(agent, spec.name, ran, project if project is not None else home, project))
    for problem in hostload.problems(agent, home, project, hostload.disk_reader(home, project)):
        checks.append(_check(problem.name, FAIL if problem.severity == hostload.FAIL else INFO,
                             f"{agent.display_name} will not load {display(problem.path, home)}: {problem.reason}"
                             if problem.severity == hostload.FAIL else problem.reason, problem.fix))
    checks.extend(agent_specific_checks(agent, home, project))
    from leanctx import doctor_mcp

    checks.extend(doctor_mcp.checks(agent, home, data_dir, project, bot=profile.bot, profile=profile, mcp=mcp))
    result["last_published"] = last_published(agent, data_dir)
    lp = result["last_published"]
    if lp:
        checks.append(_check("last published", INFO, f"{lp['last_event']} of {lp['conversation_id']}, {lp['age_s']:.0f} s ago"))
    else:
        checks.append(_check("last published", INFO, f"nothing yet: start {agent.display_name} once (hooks load at session start)"))
    result["ok"] = all(c["status"] != FAIL for c in checks)
    return result


def version_check(agent: Agent) -> dict | None:
    """The host CLI on PATH against the versions leanctx was verified on: newer is a note, older
    than the oldest known to work fails (leanctx/hostversions.py). None: the host has no CLI to ask."""
    from leanctx import hostversions

    if not agent.version_command:
        return None
    binary, version, why = hostversions.installed(agent)
    if version is None:
        docs = "" if agent.verified_version else f"; leanctx supports {agent.display_name} from documentation only"
        return _check("version", INFO, f"not checked: {why}{docs}")
    verdict, sentence = hostversions.verdict(agent, version)
    if verdict == "older":
        return _check("version", FAIL, f"{sentence} ({binary})", hostversions.upgrade_hint(agent))
    return _check("version", OK if verdict == "ok" else INFO, sentence)


def agent_specific_checks(agent: Agent, home: Path, project: Path | None = None) -> list[dict]:
    from leanctx.installer.hostload import host_checks

    return [{**_check(c["name"], c["status"], c["detail"], c.get("fix")), **({"init_refuses": True} if c.get("init_refuses") else {})}
            for c in host_checks(agent, "doctor_checks", home, project)]


def state_checks(home: Path) -> list[dict]:
    """The bot profile's conversation-state store: reachable, and any damaged state moved aside."""
    from leanctx.state import api
    from leanctx.state.errors import StateError, StoreNotOurs

    try:
        users = api.list_users()
        corrupt = {u: api.corrupt_files(slug=u) for u in users}
    except StoreNotOurs as exc:  # the refusal names the owner and the setting that accepts it
        return [_check("conversation state", FAIL, "store refused: another account runs it", str(exc))]
    except (StateError, OSError) as exc:
        from leanctx.state.backend import redact
        from leanctx.state.slug import cks_home

        url = os.environ.get("LEANCTX_STATE_URL")
        fix = (f"start the Redis at {redact(url)} or correct LEANCTX_STATE_URL" if url else
               f"make {display(cks_home(), home)} a folder you own and can write, or set CKS_HOME to one")
        return [_check("conversation state", FAIL, f"store unreachable: {exc}", fix)]
    from leanctx.state.backend import redact
    from leanctx.state.slug import cks_home

    url = os.environ.get("LEANCTX_STATE_URL")
    where = f"Redis {redact(url)}" if url else display(cks_home(), home)
    out = [_check("conversation state", OK, f"{len(users)} user(s) in {where}")]
    for user in users:
        silent = _unrecorded(api.show(slug=user))
        if silent:
            out.append(_check(f"conversation state {user} hooks", WARN, silent, ISOLATION_FIX))
    for user, paths in corrupt.items():
        if paths:
            out.append(_check(f"conversation state {user}", WARN,
                              f"{len(paths)} damaged state(s) moved aside, the thread restarted: {display(paths[-1], home)}",
                              f"read {display(paths[-1], home)} for what was lost, then delete it"
                              + (f" (and the {len(paths) - 1} older one(s) beside it)" if len(paths) > 1 else "")))
    return out


ISOLATION_FIX = ('the host runs without the leanctx hooks: on the Claude Agent SDK pass setting_sources including '
                 '"user" (or "project" for `init --project`) to ClaudeAgentOptions, not setting_sources=[] '
                 '(isolation mode), or use leanctx.bot.claude_sdk_binding (in a clone of leanctx: python -m pip install ".[sdk]"); '
                 'elsewhere run `leanctx init --agent <host> --bot`')
STALE_PENDING_S = 600  # a question asked this long ago with no turn recorded since: no Stop hook ran


def _unrecorded(state: dict) -> str | None:
    """Why `state` looks written by `leanctx state` alone, with no bot hook recording turns: the
    state CLI was used but no turn was ever recorded, or a question was saved and no turn (its
    reply, Stop) was recorded since. None when hooks are evidently running."""
    from leanctx.state import protocol

    turns = state.get("recent_turns") or []
    pending = state.get("pending")
    if not state.get("turn_count") and not turns and not protocol.is_empty(state):
        what = "a pending question" if pending else "a summary or active work"
        return f"holds {what} but no turn was ever recorded: no bot hook runs for this user"
    if not pending:
        return None
    asked = pending.get("asked_ts") or ""
    if any((t.get("ts") or "") >= asked for t in turns):
        return None
    try:
        age = time.time() - calendar.timegm(time.strptime(asked[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    if age < STALE_PENDING_S:
        return None  # a turn may be running right now
    return (f"pending question {pending.get('question', '')[:60]!r} was saved {age / 60:.0f} min ago and no turn "
            "has been recorded since: no Stop hook ran, so it will never be answered")


def _data_dir_check(data_dir: Path, home: Path) -> dict:
    from leanctx import safedir

    try:
        safedir.make_private(data_dir)
        with tempfile.NamedTemporaryFile(dir=data_dir, prefix=".doctor-"):
            pass
    except OSError as exc:
        return _check("data dir", FAIL, f"{display(data_dir, home)} is not writable: {exc.strerror}", f"make {display(data_dir, home)} a folder you can write, or set LEANCTX_HOME to one")
    return _check("data dir", OK, f"{display(data_dir, home)} is writable")


def _caller_check() -> dict:
    """Can the cache daemon learn who is asking on this system (cache/peer.py)? Tried on a
    socket pair to ourselves: the same kernel calls the daemon makes for every MCP server."""
    import socket

    from leanctx.cache import peer

    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        who = peer.peer_of(a)
        ident = peer.identify(who)
        if who is not None:
            who.close()
    finally:
        a.close()
        b.close()
    if isinstance(ident, str):  # nothing to fix: a property of this system, said as such
        return _check("caller verification", WARN, f"the cache daemon cannot verify callers here: {ident}; reads still work: "
                      "each MCP server then serves itself in-process (stubs only for what it sent)")
    return _check("caller verification", OK, "the cache daemon learns who is asking from the kernel (peer pid, "
                  "its environment, working directory and host process)")


def run(home: Path, data_dir: Path, agent_name: str | None, fix: bool = False, project: Path | None = None) -> dict:
    report = build(home, data_dir, agent_name, project)
    if fix and not report["ok"] and (report["installed"] or agent_name):
        report = _fix(report, home, data_dir, agent_name, project)
    for agent_report in report["agents"]:  # internal: what --fix leaves alone
        for check in agent_report["checks"]:
            check.pop("init_refuses", None)
    return report


def _fix(report: dict, home: Path, data_dir: Path, agent_name: str | None, project: Path | None) -> dict:
    """Re-run init for each failing agent with the profile it has; an agent with a file init
    refuses as it is (one it cannot parse) is left alone and named, with the edit that helps."""
    import click

    from leanctx.installer import mcpreg
    from leanctx.installer.commands import run_init
    from leanctx.installer.install import Profile

    broken_reports = [a for a in report["agents"] if not a["ok"]]
    if not broken_reports and any(c["status"] == FAIL for c in report["checks"]):
        broken_reports = [a for a in report["agents"] if a["installed"]]
    say = lambda message: click.echo(message, err=True)  # noqa: E731 - keep --json stdout clean
    skipped = [a for a in broken_reports if any(c.get("init_refuses") for c in a["checks"])]
    for a in skipped:
        check = next(c for c in a["checks"] if c.get("init_refuses"))
        say(f"leanctx: doctor --fix leaves {a['display_name']} alone: init would refuse the same way ({check['detail']})")
        say(f"  fix: {check['fix']}")
    broken_reports = [a for a in broken_reports if a not in skipped]
    broken = [agents.get(a["agent"]) for a in broken_reports]
    report_fix = 0

    for a in broken_reports:  # each with the profile it was installed with, MCP server included or not
        agent = agents.get(a["agent"])
        name = a.get("profile", "coding")
        profile = Profile(bot="bot" in name, guard="guard" in name, read_gate=a.get("read_gate", True),
                          builtin_read=a.get("builtin_read", True))
        mcp = a.get("read_gate", True) or bool(mcpreg.recorded_names(agent, home, data_dir, project))
        report_fix = run_init([agent], home, data_dir, project, dry_run=False, say=say, profile=profile, mcp=mcp) or report_fix
    report = build(home, data_dir, agent_name, project)
    report["fixed"] = [a.name for a in broken]
    report["skipped"] = [a["agent"] for a in skipped]
    report["fix_exit_code"] = report_fix
    return report


def project_installs(home: Path, data_dir: Path) -> dict[str, list[Path]]:
    """Agent name -> project folders with a recorded install of it (from the install manifests)."""
    found: dict[str, list[Path]] = {}
    for record in manifest.all_manifests(data_dir):
        try:
            agent = agents.get(record.agent)
        except agents.UnknownAgent:
            continue
        config = Path(record.path)
        if config == agent.user_config_path(home):
            continue
        for folder in config.parents:
            if agent.project_config_path(folder) == config:
                found.setdefault(agent.name, [])
                if folder not in found[agent.name]:
                    found[agent.name].append(folder)
                break
    return found


def build(home: Path, data_dir: Path, agent_name: str | None, project: Path | None = None) -> dict:
    from leanctx import safedir

    unsafe = safedir.problem(data_dir)
    if unsafe:  # nothing in a data dir another account could plant files in is read, run or written
        fix = "use a data dir only you own and can write (LEANCTX_HOME=<a folder of yours>), then leanctx init"
        return {"schema": SCHEMA, "leanctx_version": leanctx.__version__, "data_dir": display(data_dir, home),
                "project": str(project) if project is not None else None, "installed": False, "ok": False,
                "checks": [_check("data dir", FAIL, unsafe, fix)], "agents": [], "start": fix}
    checks = [_data_dir_check(data_dir, home), _caller_check()]
    wrapper_checks, wrapper_ok = _wrapper_checks(data_dir, home, agent_name)
    selected = [agents.get(agent_name)] if agent_name else agents.all_agents()
    elsewhere = project_installs(home, data_dir) if project is None else {}
    results = [check_agent(a, home, data_dir, wrapper_ok, agent_name is not None, project, elsewhere.get(a.name, []))
               for a in selected]
    any_installed = any(r["installed"] for r in results)
    if (any_installed or agent_name) and project is None:  # a project install calls leanctx-hook on PATH instead
        checks.extend(wrapper_checks)
    if any("bot" in r.get("profile", "") for r in results):
        checks.extend(state_checks(home))
    report = {
        "schema": SCHEMA,
        "leanctx_version": leanctx.__version__,
        "data_dir": display(data_dir, home),
        "project": str(project) if project is not None else None,
        "installed": any_installed,
        "ok": any_installed and all(c["status"] != FAIL for c in checks) and all(r["ok"] for r in results),
        "checks": checks,
        "agents": results,
    }
    if project is None:
        report["project_installs"] = [{"agent": name, "project": str(folder)} for name, folders in elsewhere.items() for folder in folders]
    if not any_installed:
        report["start"] = _how_to_start(home, agent_name, project, report.get("project_installs") or [], results)
    return report


def _how_to_start(home: Path, agent_name: str | None, project: Path | None, installs: list[dict], results: list[dict] = ()) -> str:
    """What to run when nothing is installed where doctor looked (for a host whose file init
    refuses as it is, the edit that comes first)."""
    if installs:
        folders = list(dict.fromkeys(i["project"] for i in installs))
        return "; ".join(f"leanctx doctor --project {folder}" for folder in folders)
    detected = [a.name for a in agents.all_agents() if a.detect(home)]
    name = agent_name or (detected[0] if len(detected) == 1 else "claude" if not detected else "|".join(detected))
    refused = [c["fix"] for r in results if r["agent"] == name for c in r["checks"] if c.get("init_refuses")]
    return refused[0] if refused else f"leanctx init --agent {name}{_where(project)}"


_MARK = {OK: "ok  ", FAIL: "FAIL", WARN: "warn", INFO: "info"}


def render(report: dict) -> str:
    lines = [f"leanctx {report['leanctx_version']}  data dir {report['data_dir']}"]
    for c in report["checks"]:
        lines.append(_line(c, "  "))
    if not report["agents"] and report["checks"][0]["status"] == FAIL and report["checks"][0]["name"] == "data dir":
        lines.append("Nothing else was checked: fix the data dir first.")
        return "\n".join(lines)
    for a in report["agents"]:
        state = ("ok" if a.get("installed") else "not installed") if a["ok"] else "FAILING"
        lines.append(f"{a['display_name']} ({a['agent']}): {state}  {a['config_path']}")
        for c in _fold_smoke(a["checks"]):
            lines.append(_line(c, "  "))
    installs = report.get("project_installs") or []
    by_folder: dict[str, list[str]] = {}
    for install in installs:
        by_folder.setdefault(install["project"], []).append(install["agent"])
    if not report["installed"] and installs:
        lines.append("leanctx is installed only at project level here; check each project:")
    elif installs:
        lines.append("Project installs (not checked here):")
    for folder, names in by_folder.items():
        lines.append(f"  {', '.join(names)} in {folder}: run leanctx doctor --project {folder}")
    if not report["installed"] and not installs:
        where = f"in {report['project']}" if report.get("project") else "here"
        lines.append(f"leanctx is not installed for any agent {where}. Start with: {report['start']}")
    elif report["installed"]:
        lines.append("All good." if report["ok"] else "Some checks failed; each says how to fix it.")
    return "\n".join(lines)


def _fold_smoke(checks: list[dict]) -> list[dict]:
    """For the eye only (--json keeps both): an event that is wired and whose smoke run passed is
    one line; any other outcome of either stays on its own line with its fix."""
    out: list[dict] = []
    for c in checks:
        prev = out[-1] if out else None
        if (prev is not None and c["status"] == OK and prev["status"] == OK and not prev.get("fix")
                and prev["name"].startswith("event ") and c["name"] == "smoke " + prev["name"][len("event "):]):
            out[-1] = {**prev, "detail": f"{prev['detail']}; smoke run: {c['detail']}"}
        else:
            out.append(c)
    return out


def _line(check: dict, indent: str) -> str:
    text = f"{indent}[{_MARK[check['status']]}] {check['name']}: {check['detail']}"
    if check.get("fix"):
        label = "fix" if check["status"] in (FAIL, WARN) else "hint"
        text += f"\n{indent}       {label}: {check['fix']}"
    return text
