"""Hook time of a gated call: the built-in reader gate's installed hooks, a live daemon, the floor.

`bench/session_savings.py` times every hook inside real host sessions, where the host's own
writes and the fake model share the machine; this script isolates the gate so that its own cost
can be compared with the interpreter's start-up, round by round in the same run:

1. `leanctx init --agent claude` and `--agent codex` into a temporary HOME (nothing of yours is
   touched), and the cache daemon (`serve`) started on that data dir;
2. a session of each host opened through the installed SessionStart hook, this process being
   the host (the hook walks up past `sh` to it, as it walks up to the real CLI);
3. each round, for each gated reader: the post-tool hook of a read under a new call id (the
   daemon credits it: op "credit"), then the pre-tool hook of the same read under another new
   id (the daemon answers with the stub and the hook refuses the call: op "gate"). The host's
   log shows each call before its hook runs, as once the host has written it (Claude Code's
   transcript, Codex's rollout): a call that comes before the host's own write waits for it, up
   to the host's flush interval, which these rows leave out (docs/cache.md);
4. beside them `python -I -S -c pass` (the floor) and the same pre-tool hook with no daemon
   running (`hook_latency.py`'s built-in row: the process alone), all interleaved, and the
   CPU time (user + system) of each hook process from the kernel's accounting of children.

Every timed pre-tool row is checked to have refused with the stub, every post-tool row to have
been credited (the next stub proves it): anything else stops the script.

Usage: python bench/gate_latency.py [--runs N]
Target: a gated call's hook p50 <= 1.5x the floor's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET = 1.5
TIPS: dict[Path, str] = {}


def hook_command(home: Path, agent: str, event: str) -> str:
    """The built-in-read command init wrote for `agent`'s `event` (bench/hook_latency.py's lookup)."""
    from leanctx import agents
    from leanctx.installer import jsonc

    host = agents.get(agent)
    config = jsonc.loads(host.user_config_path(home).read_text()) if host.user_config_path(home).suffix == ".json" else None
    if config is None:  # Codex keeps its hooks in hooks.json beside config.toml
        config = json.loads((home / ".codex" / "hooks.json").read_text())
    for group in config["hooks"][event]:
        for command in host.group_commands(group):
            if "leanctx-hook" in command and (event not in ("PreToolUse", "PostToolUse") or "--builtin-read" in command):
                return command
    raise SystemExit(f"init wrote no leanctx {event} hook for {agent}")


class Reader:
    """One gated reader of one host: its payloads, and the host's log entry for each call."""

    def __init__(self, name: str, agent: str, session: str, log: Path, proj: Path, target: Path,
                 tool: str, tool_input: dict, response) -> None:  # noqa: ANN001
        self.name, self.agent, self.session, self.log, self.proj = name, agent, session, log, proj
        self.target, self.tool, self.tool_input, self.response = target, tool, tool_input, response
        self.n = 0

    @property
    def tip(self) -> str | None:  # the newest entry of the log, shared by the readers that write it
        return TIPS.get(self.log)

    @tip.setter
    def tip(self, uid: str) -> None:
        TIPS[self.log] = uid

    def payload(self, event: str, call_id: str) -> bytes:
        body = {"session_id": self.session, "transcript_path": str(self.log), "cwd": str(self.proj),
                "hook_event_name": event, "tool_name": self.tool, "tool_input": self.tool_input, "tool_use_id": call_id}
        if self.agent == "codex":
            body.update(turn_id="bench-turn", model="gpt-5", permission_mode="bypassPermissions")
        if event == "PostToolUse":
            body["tool_response"] = self.response(self.target.read_text(encoding="utf-8"))
        return json.dumps(body).encode()

    def written(self, call_id: str, with_result: bool) -> None:
        """What the host writes to its log for one call before (and after) it runs the hooks."""
        with self.log.open("a", encoding="utf-8") as f:
            if self.agent == "codex":
                f.write(json.dumps({"timestamp": "t", "type": "response_item", "payload": {
                    "type": "function_call", "name": "exec_command", "call_id": call_id}}) + "\n")
                if with_result:
                    f.write(json.dumps({"timestamp": "t", "type": "response_item", "payload": {
                        "type": "function_call_output", "call_id": call_id, "output": "..."}}) + "\n")
                return
            parts = [("assistant", {"type": "tool_use", "id": call_id, "name": self.tool, "input": self.tool_input})]
            if with_result:
                parts.append(("user", {"type": "tool_result", "tool_use_id": call_id, "content": "..."}))
            for kind, part in parts:
                uid = f"{call_id}-{kind}"
                f.write(json.dumps({"parentUuid": self.tip, "uuid": uid, "type": kind, "sessionId": self.session,
                                    "message": {"role": kind, "content": [part]}}) + "\n")
                self.tip = uid

    def next_id(self) -> str:
        self.n += 1
        return f"{'call' if self.agent == 'codex' else 'toolu'}_bench_{self.name.split()[1].lower()}_{self.n}"


# A host process per host, as in real use (each CLI is its own process): the hooks it runs walk up
# to it, and two hosts' sessions never look like two chats of one process. It times each hook run
# itself, so the pipe between it and this script is not in the figures.
RUNNER = r"""
import json, resource, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(["/bin/sh", "-c", job["command"]], input=job["stdin"].encode(), env=job["env"],
                          cwd=job["cwd"], capture_output=True)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    print(json.dumps({"wall": wall, "cpu": cpu, "rc": proc.returncode, "out": proc.stdout.decode(),
                      "err": proc.stderr.decode()[-300:]}), flush=True)
"""


class Host:
    """A stand-in host process that runs hook commands as the CLI does (`sh -c`, payload on stdin)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def run(self, command: str, stdin: bytes, env: dict, cwd: Path) -> tuple[float, float, str]:
        """(wall ms, CPU ms of the hook's processes, stdout) of one hook run."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"command": command, "stdin": stdin.decode(), "env": env, "cwd": str(cwd)}) + "\n")
        self.proc.stdin.flush()
        res = json.loads(self.proc.stdout.readline())
        if res["rc"] != 0:
            raise SystemExit(f"hook exited {res['rc']}: {res['err']}")
        return res["wall"], res["cpu"], res["out"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


def main() -> None:  # noqa: PLR0915 - one linear script
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60, help="timed rounds (after 3 warm-ups)")
    args = ap.parse_args()
    from leanctx.cache import client

    tmp = Path(tempfile.mkdtemp(prefix="leanctx-gate-bench-"))
    home, proj = tmp / "home", tmp / "proj"
    home.mkdir()
    proj.mkdir()
    data_dir = home / ".local" / "share" / "leanctx"
    target = proj / "module.py"
    # (no blank line at the end: a shell read's trailing blank lines may be trimmed by the host, so
    # such an output is never credited)
    # (and under Codex's 10,000 characters: a longer answer is cut before the model sees it)
    target.write_text("\n".join(f"def function_{i}(x):\n    return x * {i} + {i % 7}  # line {i}\n" for i in range(150)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX", "CURSOR", "LEANCTX_"))}
    env.update(HOME=str(home), LEANCTX_HOME=str(data_dir))
    for agent in ("claude", "codex"):
        subprocess.run([sys.executable, "-m", "leanctx", "init", "--agent", agent], env=env, check=True, capture_output=True)
    os.environ["HOME"] = str(home)  # for the config lookups
    daemon_log = open(tmp / "daemon.log", "ab")  # noqa: SIM115 - closed at the end
    daemon = subprocess.Popen([sys.executable, "-m", "leanctx.cache.cli", "serve"], env=env, stdin=subprocess.DEVNULL,
                              stdout=daemon_log, stderr=daemon_log)
    hosts: dict[str, Host] = {}
    try:
        if not client.wait_for_socket(data_dir, 30):
            raise SystemExit(f"daemon did not start: {(tmp / 'daemon.log').read_text()}")
        text = target.read_text(encoding="utf-8")
        nlines = len(text.splitlines())
        codex_target = proj / "codex_read.py"
        codex_target.write_text(text)
        sessions = {"claude": str(uuid.uuid4()), "codex": str(uuid.uuid4())}
        logs = {"claude": proj / "transcript.jsonl",
                "codex": home / ".codex" / "sessions" / f"rollout-2026-12-02T00-00-00-{sessions['codex']}.jsonl"}
        logs["codex"].parent.mkdir(parents=True, exist_ok=True)
        for agent in ("claude", "codex"):
            hosts[agent] = Host()
            logs[agent].write_text("")
            start = json.dumps({"session_id": sessions[agent], "transcript_path": str(logs[agent]), "cwd": str(proj),
                                "hook_event_name": "SessionStart", "source": "startup", "model": "gpt-5"}).encode()
            hosts[agent].run(hook_command(home, agent, "SessionStart"), start, env, proj)
        cat = {"command": "cat module.py"}
        readers = [
            Reader("claude Read", "claude", sessions["claude"], logs["claude"], proj, target, "Read",
                   {"file_path": str(target)},
                   lambda t: {"type": "text", "file": {"filePath": str(target), "content": t, "numLines": nlines,
                                                       "startLine": 1, "totalLines": nlines}}),
            Reader("claude Bash", "claude", sessions["claude"], logs["claude"], proj, target, "Bash", cat,
                   lambda t: {"stdout": t, "stderr": "", "interrupted": False, "isImage": False}),
            # its own file: the rounds' edit of module.py (the diff row) is Claude Code's conversation's
            Reader("codex Bash", "codex", sessions["codex"], logs["codex"], proj, codex_target, "Bash",
                   {"command": "cat codex_read.py"}, lambda t: t),
        ]
        commands = {(r.agent, ev): hook_command(home, r.agent, ev) for r in readers for ev in ("PreToolUse", "PostToolUse")}
        wall: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}

        # Claude Code gives its hooks CLAUDE_CODE_SESSION_ID (2.1.197), which tells them at once that
        # the caller is Claude Code itself, not Cursor running Claude Code's hooks
        host_env = {"claude": dict(env, CLAUDE_CODE_SESSION_ID=sessions["claude"]), "codex": env}

        def timed(name: str, agent: str, command: str, stdin: bytes, warm: bool, env_: dict | None = None) -> str:
            w, c, out = hosts[agent].run(command, stdin, env_ or host_env[agent], proj)
            if not warm:
                wall.setdefault(name, []).append(w)
                cpu.setdefault(name, []).append(c)
            return out

        no_daemon = dict(env, LEANCTX_HOME=str(tmp / "no-daemon"), CLAUDE_CODE_SESSION_ID=sessions["claude"])  # the process alone: no socket to ask
        floor_cmd = f"exec {sys.executable} -I -S -c pass"
        def refused(r: Reader, call_id: str, text: str) -> None:
            """The refusal's result as the host writes it to its log."""
            with r.log.open("a", encoding="utf-8") as f:
                if r.agent == "codex":
                    f.write(json.dumps({"timestamp": "t", "type": "response_item", "payload": {
                        "type": "function_call_output", "call_id": call_id, "output": text}}) + "\n")
                else:
                    f.write(json.dumps({"parentUuid": r.tip, "uuid": f"{call_id}-user", "type": "user",
                                        "message": {"role": "user", "content": [
                                            {"type": "tool_result", "tool_use_id": call_id, "content": text}]}}) + "\n")
                    r.tip = f"{call_id}-user"

        def read_through(r: Reader, warm: bool, first: bool = False) -> None:
            """A read the gate lets run (the first one, or the same one asked again right after its
            stub), then its post-tool hook, which the daemon credits."""
            call_id = r.next_id()
            r.written(call_id, with_result=False)
            out = timed(f"{r.name}: pre-tool, {'first read' if first else 'asked again'} (runs)", r.agent,
                        commands[(r.agent, "PreToolUse")], r.payload("PreToolUse", call_id), warm)
            if "[unchanged]" in out:
                raise SystemExit(f"{r.name}: a read asked again right after its stub was refused again: {out[:200]!r}")
            refused(r, call_id, r.target.read_text(encoding="utf-8"))
            timed(f"{r.name}: post-tool, credited", r.agent, commands[(r.agent, "PostToolUse")],
                  r.payload("PostToolUse", call_id), warm)

        for agent in ("claude", "codex"):  # each conversation reads the file once; its other readers hold it then
            read_through(next(r for r in readers if r.agent == agent), warm=True, first=True)
        for round_no in range(args.runs + 3):
            warm = round_no < 3
            timed("python -I -S -c pass (floor)", "claude", floor_cmd, b"", warm)
            for r in readers:
                gate_id = r.next_id()
                r.written(gate_id, with_result=False)
                out = timed(f"{r.name}: pre-tool, stub", r.agent, commands[(r.agent, "PreToolUse")],
                            r.payload("PreToolUse", gate_id), warm)
                if "[unchanged]" not in out:
                    stats = subprocess.run([sys.executable, "-m", "leanctx", "stats", "--json"], env=env,
                                           capture_output=True, text=True).stdout
                    raise SystemExit(f"{r.name}: the gate did not refuse with the stub: {out[:200]!r}\n"
                                     f"daemon log: {(tmp / 'daemon.log').read_text()[-500:]}\nstats: {stats[-1500:]}")
                refused(r, gate_id, out)
                read_through(r, warm)
            # an edit by another program, then the same Read: the answer is a diff against the copy
            # the conversation holds, and the daemon writes its index before it answers (a held
            # version was replaced: readcache._save_replaced)
            r0 = readers[0]
            lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
            lines[len(lines) // 2] = f"    return {round_no}  # edited\n"
            target.write_text("".join(lines))
            gate_id = r0.next_id()
            r0.written(gate_id, with_result=False)
            out = timed("claude Read: pre-tool, diff after an edit (index written)", "claude",
                        commands[("claude", "PreToolUse")], r0.payload("PreToolUse", gate_id), warm)
            if "[changed]" not in out:
                raise SystemExit(f"after an edit the gate did not answer with the diff: {out[:200]!r}")
            refused(r0, gate_id, out)
            read_through(r0, warm)  # the model reads it again after the diff (the no-loop rule lets it)
            timed("claude Read: pre-tool, no daemon (the process alone)", "claude", commands[("claude", "PreToolUse")],
                  r0.payload("PreToolUse", r0.next_id()), warm, no_daemon)
    finally:
        for h in hosts.values():
            h.close()
        daemon.terminate()
        daemon.wait(10)
        daemon_log.close()
    for log_dir in (data_dir, tmp / "no-daemon"):
        hook_log = log_dir / "logs" / "hooks.log"
        if hook_log.exists():
            raise SystemExit(f"a hook logged an error during the benchmark:\n{hook_log.read_text()[-500:]}")

    floor = statistics.median(wall["python -I -S -c pass (floor)"])
    floor_cpu = statistics.median(cpu["python -I -S -c pass (floor)"])
    print(f"gated-call hook time, {args.runs} interleaved rounds, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"file {nlines} lines")
    print(f"{'row':56} {'p50 ms':>7} {'p95 ms':>7} {'/ floor':>8} {'CPU ms':>7} {'/ floor':>8}")
    gated = []
    for name, values in wall.items():
        p50, c50 = statistics.median(values), statistics.median(cpu[name])
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        if ": p" in name and "no daemon" not in name:
            gated.append(p50 / floor)
        print(f"{name:56} {p50:7.1f} {p95:7.1f} {p50 / floor:7.2f}x {c50:7.1f} {c50 / floor_cpu:7.2f}x")
    worst = max(gated)
    print(f"worst gated hook p50 / floor: {worst:.2f}x (target <= {TARGET:.2f}x): {'met' if worst <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
