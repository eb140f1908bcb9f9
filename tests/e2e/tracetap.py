"""Record a real host run as a replay trace (bench/support/replay.py format).

A "tap" is a user hook of our own test (a foreign hook, beside leanctx's) on every event leanctx
listens to, plus a PreToolUse hook for `ctx_read`: it appends each payload the host sends, with
its event name and time, to a log. `to_trace()` turns that log into a trace: the host's own
payloads as `hook` events, and every ctx_read call (its PreToolUse payload names the session,
the subagent if any, the arguments and the call id) as a `read`. The ground truth of who made a
read is the host's own word in that payload, not a guess.

With `builtin=True` the tap also logs the host's own readers (Claude Code's Read and Bash: the
tools its module gates, `Agent.builtin_read_tools`) before and after they run, and `to_trace()`
turns each such call its module can name as a read into a `read` with `reader` "builtin" or
"shell", with what the host really delivered (its post-tool payload's Read content or stdout) as
`delivered` when the call ran.

`sanitize()` replaces the run's temporary folders with placeholders, so a trace can be kept in
bench/traces/ and replayed anywhere (`python bench/cache_replay.py` loads them).
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

TAP_SRC = r'''
import json, os, sys, time
event, log = sys.argv[1], sys.argv[2]
data = sys.stdin.read()
# the host process: the parent of the shell the host ran this command through
stat = open(f"/proc/{os.getppid()}/stat").read()
host = int(stat.rsplit(")", 1)[1].split()[1])
with open(log, "a") as f:
    f.write(json.dumps({"t": time.time(), "event": event, "host": host, "payload": json.loads(data)}) + "\n")
'''

READ_TOOL = "mcp__leanctx__ctx_read"


def install_tap(config: Path, root: Path, agent: str = "claude", builtin: bool = False) -> Path:
    """Add the tap to a host's hooks file, after leanctx's entries: ~/.claude/settings.json,
    $CODEX_HOME/hooks.json, ~/.gemini or ~/.qwen settings.json,
    ~/.codebuddy/settings.json, ~/.factory/settings.json (all Claude-shaped; each host's own
    event names, from its agent module). Returns the log path.
    In Codex the tap is not trusted: run it with --dangerously-bypass-hook-trust."""
    from leanctx import agents
    from leanctx.installer import jsonc

    host = agents.get(agent)
    script, log = root / "tap.py", root / "tap.jsonl"
    script.write_text(TAP_SRC)
    doc = jsonc.loads(config.read_text())  # the user's comments go: the test restores the file after
    read_tool = host.read_tool()
    if builtin:
        read_tool = "|".join((read_tool, *host.builtin_read_tools))
    _add_tap(doc.setdefault("hooks", {}), tuple(e.name for e in host.events), script, log,
             host.read_gate_event.name, read_tool)
    if builtin and host.builtin_read_post_event is not None:
        post = host.builtin_read_post_event
        command = f"{sys.executable} {script} {post.name} {log}"
        doc["hooks"].setdefault(post.name, []).append({"matcher": post.matcher, "hooks": [{"type": "command", "command": command}]})
    config.write_text(json.dumps(doc, indent=2) + "\n")
    return log


def _add_tap(hooks: dict, events: tuple, script: Path, log: Path, read_event: str = "PreToolUse",
             read_tool: str = READ_TOOL) -> None:
    """One tap group per event (and the pre-tool event for ctx_read), after what is there; idempotent."""
    for event in events + (read_event,):
        command = f"{sys.executable} {script} {event} {log}"
        groups = hooks.setdefault(event, [])
        if any(h.get("command") == command for g in groups for h in g.get("hooks", [])):
            continue
        group: dict = {"hooks": [{"type": "command", "command": command}]}
        if event == read_event:
            group["matcher"] = read_tool
        groups.append(group)


def to_trace(log: Path, proj: Path, files: dict[str, str], agent: str = "claude", call_ids: bool = True) -> list[dict]:
    """A tap log of a Claude-shaped host (its pre-tool hook narrowed to ctx_read is the read) as
    a trace. `call_ids`: the host sends the pre-tool hook's `tool_use_id` to the MCP server too
    (Claude Code, Codex); Qwen's is its own and reaches no MCP server, Gemini has none."""
    from leanctx import agents

    host = agents.get(agent)
    read_event = host.read_gate_event.name

    def host_env(p: dict) -> dict:
        sid = p.get("session_id")
        return {"CLAUDE_CODE_SESSION_ID": sid} if agent == "claude" and sid else {}

    # what each built-in read that ran delivered, by call id (its post-tool payload)
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    post_event = host.builtin_read_post_event.name if host.builtin_read_post_event is not None else None
    delivered = {}
    for e in entries:
        p = e["payload"]
        if e["event"] == post_event and p.get("tool_name") in host.builtin_read_tools:
            response = p.get("tool_response")
            if isinstance(response, str):  # Codex: the output as one string
                delivered[p.get("tool_use_id")] = response
            elif p.get("tool_name") == "Bash" and isinstance(response, dict) and isinstance(response.get("stdout"), str):
                delivered[p.get("tool_use_id")] = response["stdout"]
            elif isinstance(response, dict) and isinstance(response.get("file"), dict) \
                    and isinstance(response["file"].get("content"), str):
                delivered[p.get("tool_use_id")] = response["file"]["content"]

    def read_of(e: dict) -> dict | None:
        p = e["payload"]
        if e["event"] != read_event:
            return None
        call = {"conv": p.get("session_id"), "sub": p.get("agent_id"), "args": p.get("tool_input") or {},
                "call_id": p.get("tool_use_id") if call_ids else None}
        if host.is_read_tool(p.get("tool_name")):
            return call
        if p.get("tool_name") not in host.builtin_read_tools:
            return None
        ask = host.builtin_read_ask(host.normalize(e["event"], p))
        if ask is None:
            return None  # not a read the host module can name: it ran, and the cache learned nothing
        args = call["args"]
        if ask.reader == "shell":
            read = {"reader": "shell", "path": ask.path, "command": args.get("command")}
        else:
            offset, limit = args.get("offset"), args.get("limit")
            read = {"reader": "builtin", "path": ask.path, "start": offset,
                    "end": (offset or 1) + limit - 1 if limit is not None else None}
        if p.get("tool_use_id") in delivered:
            read["delivered"] = delivered[p.get("tool_use_id")]
        return dict(call, reader=read)

    keep = (lambda e: e["event"] != post_event) if post_event else None
    return tap_trace(log, proj, files, agent, read_of, host_env=host_env, hook_too=True, keep=keep)


def tap_trace(log: Path, proj: Path, files: dict[str, str], agent: str, read_of, host_env=None, hook_too: bool = False,
              keep=None) -> list[dict]:
    """A tap log (`{t, event, host, payload}` lines) as a trace. `read_of(entry)` says whether an
    entry is a ctx_read, as {conv, sub, args, call_id} in the host's own words (None: a hook
    event); `hook_too`: a read entry is a hook event as well (Claude Code's PreToolUse).
    Each host pid becomes a host of the trace, in order of appearance; `keep(entry)` False leaves
    an entry out."""
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    entries = [e for e in entries if keep is None or keep(e)]
    entries.sort(key=lambda e: e["t"])
    trace: list[dict] = [{"op": "root", "path": str(proj)}]
    trace += [{"op": "write", "path": rel, "text": text} for rel, text in files.items()]
    hosts: dict[int, str] = {}  # host pid -> its name in the trace (each host process in turn)
    last = entries[0]["t"] if entries else 0.0
    for e in entries:
        if e["t"] > last:
            trace.append({"op": "tick", "s": round(e["t"] - last, 3)})
            last = e["t"]
        p = e["payload"]
        if e["host"] not in hosts:
            hosts[e["host"]] = h = f"h{len(hosts) + 1}"
            trace.append({"op": "host", "host": h, "agent": agent, "gate": False, "env": host_env(p) if host_env else {}})
        h = hosts[e["host"]]
        read = read_of(e)
        if read is None or hook_too:
            trace.append({"op": "hook", "host": h, "event": e["event"], "payload": p})
        if read is not None and read.get("reader"):  # a built-in or shell read
            trace.append({"op": "read", "host": h, "conv": read["conv"], "sub": read.get("sub"), **read["reader"],
                          "call_id": read.get("call_id")})
        elif read is not None:
            args = read["args"]
            trace.append({"op": "read", "host": h, "conv": read["conv"], "sub": read.get("sub"), "path": args.get("path"),
                          "start": args.get("start_line"), "end": args.get("end_line"), "fresh": bool(args.get("fresh")),
                          "call_id": read.get("call_id")})
    return trace


def sanitize(trace: list[dict], replacements: dict[str, str]) -> list[dict]:
    """The trace with every occurrence of each temporary folder replaced (longest first)."""
    text = json.dumps(trace)
    for old in sorted(replacements, key=len, reverse=True):
        text = text.replace(json.dumps(old)[1:-1], json.dumps(replacements[old])[1:-1])
    return json.loads(text)


def replay(trace: list[dict], base: Path) -> dict:
    """Replay through ours and the oracle: per-policy read kinds and wrong-stub counts."""
    from bench.support.replay import Engine, Oracle, Ours

    ours, oracle = Ours(), Oracle()
    Engine(str(base), [ours, oracle]).run(trace)
    return {"ours": ours, "oracle": oracle}


def check_replay(trace: list[dict], hh, expected: list[str], name: str, *, host: str, source: str,
                 ordered: bool = True, withheld: str | None = None) -> None:
    """The real run, replayed: ours answers as the real run did, 0 wrong stubs, ours == oracle
    (or, with `withheld`, short of it only by stubs that rule withholds: a host without per-call
    ids, its subagent window open).
    With LEANCTX_RECORD_TRACES=DIR the trace is kept (temporary folders scrubbed) as DIR/NAME.jsonl."""
    got = replay(trace, hh.root / f"replay-{name}")
    seq = got["ours"].sequence
    assert (seq if ordered else sorted(seq)) == (expected if ordered else sorted(expected)), \
        f"the replay answered {seq}, the real run {expected}"
    assert got["ours"].wrong == 0 and got["oracle"].wrong == 0, (got["ours"].wrong_examples, got["oracle"].wrong_examples)
    if withheld is None:
        assert got["ours"].tokens == got["oracle"].tokens, "ours fell short of the oracle on a real run"
    else:
        short = got["ours"].tokens - got["oracle"].tokens
        assert short > 0 and dict(got["ours"].why) == {f"withheld: {withheld}": short}, dict(got["ours"].why)
    keep = os.environ.get("LEANCTX_RECORD_TRACES")
    if keep:
        # the hosts' per-project folder names spell the path with dashes: Claude Code every other
        # character, Droid keeps "_", CodeBuddy also drops the leading one
        slugs = {}
        for kept in ("", "_"):
            slug = re.sub(rf"[^A-Za-z0-9{kept}]", "-", str(hh.proj))
            slugs.update({slug: "-home-user-proj", slug.lstrip("-"): "home-user-proj"})
        clean = sanitize(trace, {str(hh.proj): "/home/user/proj", str(hh.home): "/home/user",
                                 str(hh.root): "/home/user/run",
                                 sys.executable: "/usr/bin/python3",  # Gemini's BeforeTool names the MCP command
                                 **slugs})
        with open(os.path.join(keep, f"{name}.jsonl"), "w") as f:
            f.write(f"# recorded from tests/e2e/{os.path.basename(source)} ({name}) with the real {host}\n")
            f.writelines(json.dumps(ev) + "\n" for ev in clean)
