"""Session savings: one scripted coding session through each real host CLI, four ways.

A scripted model (the repo's fake model servers, tests/e2e/fake_*.py) drives the real host CLI
offline through one realistic session: whole and ranged reads through the host's built-in reader,
shell reads (`cat`, `sed -n`, `head`), greps, edits and re-reads after them, a file changed by
another program, one compaction and one subagent (where the host has them); about 40% of the reads
ask again for text the conversation already holds. The model adapts as a real one must: an edit the
host refuses ("read it first", "modified since read") is followed by a read and the edit again; a
stub it cannot use is asked again.

Each host runs the session four ways, in the same run:
  (a) host alone          no leanctx at all
  (b) ctx_read only       `leanctx init`, the built-in reader gate off (LEANCTX_BUILTIN_GATE=0);
                          the model never calls ctx_read
  (c) gate                `leanctx init` as installed; the model never calls ctx_read
  (d) gate + ctx_read     as (c), and the model follows the read rule (every read is ctx_read)
A host whose built-in readers have no gate yet runs (a), (b), (d) and shows (c) as "not gated".

Figures, all taken from what the fake model server received (the request bodies), never from
leanctx's own counters:
  tool results   tokens (leanctx.cache.tokens: cl100k_base unless o200k is cached) of every tool
                 result the model received, each counted once, stubs included
  overhead       what leanctx adds to every request: tool definitions (the `tools` of the first
                 request of (b) minus that of (a)) and the rule text (the rest of the first
                 request's difference); counted against us, per request and over the session
  wrong stubs    a stub (`[unchanged]`, `[partly unchanged]`, byte-identical) for file lines whose
                 current bytes are not in the text the model received earlier in the same
                 request (the same conversation: compaction and subagents included)
  hook ms        the time the host waited for each pre/post tool hook of a gated call, timed by a
                 shell around the installed command, beside `python -I -S -c pass` (the floor of
                 bench/hook_latency.py) timed the same way in the same run

Targets: 0 wrong stubs; (c) at least 35% fewer tool-result tokens than host alone on a host without
native dedup; no way above host alone + the one-time overhead.

    python bench/session_savings.py [--hosts claude,codex] [--quick] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from leanctx.cache import tokens  # noqa: E402
from tests.e2e import hostcli  # noqa: E402

MODES = ("a", "b", "c", "d")
MODE_NAMES = {"a": "host alone", "b": "ctx_read only", "c": "gate", "d": "gate + ctx_read"}
HOST_TIMEOUT = 240.0
MIN_SAVING = 0.35

# --------------------------------------------------------------------------------------------
# the project the session works on
# --------------------------------------------------------------------------------------------


def _module(name: str, n: int, seed: int) -> str:
    out = [f'"""{name}: generated for the session benchmark."""', "from __future__ import annotations", "",
           "import json", "import os", "from dataclasses import dataclass", ""]
    for i in range(n):
        k = (i * 7 + seed) % 13
        out += [
            "", f"def handle_{name}_{i}(request: dict, limit: int = {k + 3}) -> dict:",
            f'    """Answer request kind {i} of {name} (limit {k + 3})."""',
            f"    items = [x for x in request.get('items', []) if x.get('kind') == {i}]",
            f"    if len(items) > limit:",
            f"        raise ValueError('too many items for handler {i}: %d' % len(items))",
            f"    total = sum(int(x.get('value', 0)) * {k + 1} for x in items)",
            f"    return {{'handler': {i}, 'total': total, 'count': len(items)}}",
        ]
    out += ["", "", "@dataclass", f"class {name.title()}Config:", "    path: str = os.getcwd()", "    verbose: bool = False", ""]
    return "\n".join(out) + "\n"


def project_files() -> dict[str, str]:
    readme = "# demo service\n\n" + "".join(f"* step {i}: run `make target{i}` and check the output of handler {i}\n"
                                             for i in range(70))
    tests_src = "import pytest\n\nfrom src import app\n\n" + "".join(
        f"\ndef test_handler_{i}():\n    assert app.handle_app_{i}({{'items': []}})['count'] == 0\n" for i in range(45))
    return {
        "src/app.py": _module("app", 18, 1),      # ~160 lines, each file under Codex's cut (~10 KB)
        "src/util.py": _module("util", 16, 5),
        "src/models.py": _module("models", 18, 9),
        "README.md": readme,
        "tests/test_app.py": tests_src,
        "src/api.py": _module("api", 12, 3),
        "docs/notes.md": "# notes\n\n" + "".join(f"- handler {i}: returns its total and count; limit {i % 5 + 3}\n" for i in range(60)),
    }


# --------------------------------------------------------------------------------------------
# the session: host-neutral steps, and the model that plays them
# --------------------------------------------------------------------------------------------


@dataclass
class Act:
    """One thing the model does. kind: read (the host's built-in reader; start/end None: whole),
    shell (command; path/start/end: what it reads, None for a grep), ctx_read, edit (old -> new),
    subagent (steps), compact."""
    kind: str
    path: str = ""
    start: Optional[int] = None
    end: Optional[int] = None
    command: str = ""
    old: str = ""
    new: str = ""
    steps: list = field(default_factory=list)
    redundant: bool = False  # asks again for text this conversation holds unchanged

    @property
    def is_read(self) -> bool:
        return self.kind in ("read", "ctx_read") or (self.kind == "shell" and bool(self.path))


def R(path, start=None, end=None, again=False):  # noqa: ANN001, ANN201, N802 - the session's short words
    return ("read", path, start, end, again)


def CAT(path, again=False):  # noqa: ANN001, ANN201, N802
    return ("cat", path, None, None, again)


def SED(path, start, end, again=False):  # noqa: ANN001, ANN201, N802
    return ("sed", path, start, end, again)


def HEAD(path, n, again=False):  # noqa: ANN001, ANN201, N802
    return ("head", path, 1, n, again)


def GREP(pattern):  # noqa: ANN001, ANN201, N802
    return ("grep", pattern)


def EDIT(path, old, new):  # noqa: ANN001, ANN201, N802
    return ("edit", path, old, new)


def OTHER(path, old, new):  # noqa: ANN001, ANN201, N802
    """Another program changes the file between two turns (no tool call)."""
    return ("other", path, old, new)


def session(quick: bool) -> list:
    if quick:
        return [
            R("src/app.py"), CAT("src/util.py"), R("src/app.py", 60, 110, again=True), HEAD("src/util.py", 40, again=True),
            GREP("def handle_app_1"), EDIT("src/app.py", "'handler': 7, ", "'handler': 7, 'edited': 1, "), R("src/app.py"),
            R("src/app.py", again=True), CAT("src/util.py", again=True), SED("src/models.py", 1, 60),
            SED("src/models.py", 20, 50, again=True),
        ]
    sub = [R("src/app.py"), CAT("src/util.py"), GREP("class "), R("src/app.py", 100, 140, again=True), R("src/models.py"),
           CAT("tests/test_app.py"), HEAD("src/util.py", 50, again=True)]
    return [
        GREP("def handle_app_1"), R("src/app.py"), R("src/util.py"), R("src/app.py", 60, 110, again=True),
        CAT("README.md"), SED("src/models.py", 1, 60), R("src/models.py"), HEAD("src/util.py", 40, again=True),
        GREP("class "), R("src/app.py", again=True),
        EDIT("src/app.py", "'handler': 7, ", "'handler': 7, 'edited': 1, "), R("src/app.py"), R("src/app.py", 1, 50, again=True),
        CAT("src/util.py", again=True), R("tests/test_app.py"),
        OTHER("src/util.py", "'handler': 8, ", "'handler': 8, 'changed': 1, "), R("src/util.py"),
        SED("src/models.py", 90, 130, again=True), GREP("import "),
        EDIT("src/models.py", "'handler': 12, ", "'handler': 12, 'edited': 1, "), SED("src/models.py", 1, 80),
        R("README.md", again=True), R("src/api.py"), CAT("docs/notes.md"), ("subagent", sub), R("src/app.py", again=True),
        ("compact",),
        R("src/app.py"), R("src/app.py", again=True), CAT("src/util.py"), HEAD("src/util.py", 30, again=True),
        EDIT("src/util.py", "'handler': 9, ", "'handler': 9, 'edited': 1, "), CAT("src/util.py"), R("src/models.py", 60, 140),
        SED("src/models.py", 80, 120, again=True), GREP("return "), R("tests/test_app.py"),
        EDIT("tests/test_app.py", "test_handler_3()", "test_handler_three()"), R("tests/test_app.py"),
        R("tests/test_app.py", again=True), CAT("README.md"), R("README.md", again=True), R("src/util.py", again=True),
        SED("src/api.py", 1, 50), R("docs/notes.md"),
        R("src/app.py", 110, 150, again=True), SED("src/app.py", 1, 40, again=True),
    ]


REFUSED_EDIT = re.compile(r"has not been read|read it first|must read|modified since read|has been modified since", re.I)


def play(steps: list, proj: Path, use_ctx: bool) -> Iterator[Act]:
    """The model: yields each act, receives the text the host gave it for that act."""
    for step in steps:
        kind = step[0]
        if kind == "other":
            p = proj / step[1]
            p.write_text(p.read_text().replace(step[2], step[3], 1))
            continue
        if kind == "compact":
            yield Act("compact")
            continue
        if kind == "subagent":
            yield Act("subagent", steps=step[1])
            continue
        if kind == "grep":
            yield Act("shell", command=f"grep -rn {shlex.quote(step[1])} src tests")
            continue
        if kind == "edit":
            _, path, old, new = step
            act = Act("edit", path=path, old=old, new=new)
            got = yield act
            if got is not None and REFUSED_EDIT.search(got):  # the host wants a fresh read first
                got = yield Act("read", path=path)
                if unwrapped(got).startswith("["):  # a stub or a diff: asked again right away, the content
                    yield Act("read", path=path)
                yield act
            continue
        _, path, start, end, again = step
        if use_ctx:
            yield Act("ctx_read", path=path, start=start, end=end, redundant=again)
        elif kind == "read":
            yield Act("read", path=path, start=start, end=end, redundant=again)
        else:
            command = {"cat": f"cat {path}", "sed": f"sed -n '{start},{end}p' {path}",
                       "head": f"head -n {end} {path}"}[kind]
            yield Act("shell", path=path, start=start, end=end, command=command, redundant=again)


# --------------------------------------------------------------------------------------------
# what the model received
# --------------------------------------------------------------------------------------------
NUMBERED = re.compile(r"^ *\d+(?:→|\t|: )", re.M)  # Claude Code, cat -n, OpenCode
OUTPUT = re.compile(r"^Output: ", re.M)  # Gemini CLI's shell output starts so
SPAN = re.compile(r"L(\d+)-(\d+)")


def strings(value) -> Iterator[str]:  # noqa: ANN001
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


WRAPPER = "<untrusted_context>\n"  # Gemini CLI puts this line before a tool's output
# what hosts put before a refused call's reason (a refusal carries our stub): Claude Code 2.1.332
# "PreToolUse:Read hook error: ", Codex 0.171.0 "Command blocked by PreToolUse hook: ", CodeBuddy
# and Droid "Error: ", Gemini CLI "Tool execution blocked: ", Copilot CLI "Denied by preToolUse hook: "
REFUSED = re.compile(r"^(?:PreToolUse:\w+ hook error: |Command blocked by PreToolUse hook: |Error: "
                     r"|Tool execution blocked: |Denied by preToolUse hook: )(?=\[)")


def unwrapped(text: str) -> str:
    """A tool result without the line a host puts before it."""
    text = text[len(WRAPPER):] if text.startswith(WRAPPER) else text
    return REFUSED.sub("", text, count=1)


def stub_regions(text: str, nlines: int) -> Optional[list[tuple[int, int]]]:
    """The line spans a stub says the conversation holds unchanged; None: not a stub."""
    head = unwrapped(text).split("\n", 1)[0]
    if head.startswith("[unchanged]"):
        m = re.match(r"\[unchanged\] .*? L(\d+)-(\d+) of ", head)
        return [(int(m[1]), int(m[2]))] if m else [(1, nlines)]
    if head.startswith("[partly unchanged]"):
        claimed = head.split(": ", 1)[1] if ": " in head else ""
        claimed = re.split(r" (?:was|were) already", claimed)[0]
        return [(int(a), int(b)) for a, b in SPAN.findall(claimed)]
    if "byte-identical to that copy" in head:
        return [(1, nlines)]
    return None


HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def apply_diff(old: str, diff: str) -> Optional[str]:
    """`old` with a unified diff applied, or None when the diff does not fit `old` exactly."""
    a = old.splitlines(keepends=True)
    if a and not a[-1].endswith("\n"):
        a[-1] += "\n"
    out: list[str] = []
    pos = 0
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1
    if i == len(lines):
        return None
    while i < len(lines):
        m = HUNK.match(lines[i])
        if not m:
            return None
        start = int(m[1]) - (0 if m[2] == "0" else 1)
        if start < pos:
            return None
        out += a[pos:start]
        pos = start
        i += 1
        while i < len(lines) and not lines[i].startswith("@@"):
            line = lines[i]
            tag, text = line[:1], line[1:]
            if tag in (" ", "-"):
                if pos >= len(a) or a[pos] != text:
                    return None
                if tag == " ":
                    out.append(text)
                pos += 1
            elif tag == "+":
                out.append(text)
            i += 1
    return "".join(out + a[pos:])


def received_texts(body: dict, leave_out: str) -> list[str]:
    """Every text the model received in this request (its conversation), line numbers stripped,
    plus each file text a `[changed]` diff in it makes of a text it held (diffs applied in turn)."""
    raw = [s for s in strings(body.get("messages") or body.get("input") or body.get("contents")) if s != leave_out]
    pool = []
    for s in raw:
        t = NUMBERED.sub("", OUTPUT.sub("", unwrapped(s)))
        pool.append(t)
        if "<content>\n" in t:  # OpenCode's read: the file's lines between its wrapper's lines
            inner = t.split("<content>\n", 1)[1].rsplit("\n</content>", 1)[0]
            pool.append(re.split(r"\n\n\((?:End of file|Showing lines|Output capped)", inner, maxsplit=1)[0] + "\n")
        if "\nOutput:\n" in t:  # Codex's shell output: the command's output follows its header
            pool.append(t.split("\nOutput:\n", 1)[1])
        if t.startswith("Command: ") and "\nStdout: " in t:  # CodeBuddy's Bash: stdout starts on its header's line
            pool.append(t.split("\nStdout: ", 1)[1])
        if "Result of calling the Read tool:\n" in t:  # Claude Code's files re-attached after a compaction, one text
            for part in t.split("Result of calling the Read tool:\n")[1:]:
                pool.append(part.split("\n\nCalled the ", 1)[0])
    for s in map(unwrapped, raw):
        if s.startswith("[changed]") and "\n@@ " in s:
            for old in list(pool):
                new = apply_diff(old, s)
                if new is not None:
                    pool.append(new)
    return pool


MIN_PIECE = 3


def covered(want: list[str], held: str) -> bool:
    """Are these lines, in order, in what the model received? Whole-line runs of at least
    MIN_PIECE lines (or the rest, when shorter), each found line-aligned in `held`: one copy, or
    several pieces (a range read and a `[partly unchanged]` answer's new lines)."""
    if not want:
        return False
    i = 0
    while i < len(want):
        j = i
        while j < len(want) and "\n" + "\n".join(want[i:j + 1]) + "\n" in held:
            j += 1
        if j == i or (j - i < MIN_PIECE and j < len(want)):
            return False
        i = j
    return True


@dataclass
class Call:
    conv: str
    act: Act
    call_id: str
    text: Optional[str] = None
    wrong: bool = False


@dataclass
class Run:
    host: str
    mode: str
    calls: list = field(default_factory=list)
    bodies: list = field(default_factory=list)
    first_body: Optional[dict] = None
    hook_ms: dict = field(default_factory=dict)
    error: str = ""

    def check(self, proj: Path, call: Call, body: dict) -> None:
        """Is a stub in `body` (the request that carries it) for lines the model holds?"""
        rel = call.act.path
        if not call.text or not rel:
            return
        path = proj / rel
        lines = path.read_text().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        regions = stub_regions(call.text, len(lines))
        if regions is None:
            return
        held = "\n" + "\n".join(received_texts(body, call.text)) + "\n"
        for a, b in regions:
            if not covered(lines[a - 1:b], held):
                call.wrong = True


# --------------------------------------------------------------------------------------------
# hosts
# --------------------------------------------------------------------------------------------
TIMER = ('in=$(cat); t0=$(date +%s%N); printf "%s" "$in" | {cmd}; rc=$?; t1=$(date +%s%N); '
         'tool=$(printf "%s" "$in" | sed -n \'s/.*"tool_\\?[nN]ame" *: *"\\([^"]*\\)".*/\\1/p\' | head -n 1); '
         'echo "{event} ${{tool:-?}} $t0 $t1" >> {log}; exit $rc')


def time_hooks(groups: dict, log: Path, events: tuple = ("PreToolUse", "PostToolUse")) -> None:
    """Wrap each pre/post tool hook command in a shell that times it (the hook's parent is
    still a shell under the host, as leanctx's process walk expects); logged as PreToolUse /
    PostToolUse whatever the host calls them."""
    for event, name in zip(events, ("PreToolUse", "PostToolUse")):
        for group in groups.get(event, []):
            for hook in group.get("hooks", []):
                hook["command"] = TIMER.format(cmd=hook["command"], event=name, log=shlex.quote(str(log)))


def time_settings_hooks(path: Path, log: Path, events: tuple) -> None:
    """time_hooks on a JSON-with-comments settings file (Gemini CLI, Qwen Code)."""
    from leanctx.installer import jsonc

    data = jsonc.loads(path.read_text())
    time_hooks(data["hooks"], log, events)
    path.write_text(json.dumps(data, indent=2))


def read_hook_log(log: Path) -> dict:
    out: dict = {}
    if log.exists():
        for line in log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                event, tool, t0, t1 = parts
                out.setdefault(f"{event} {tool}", []).append((int(t1) - int(t0)) / 1e6)
    return out


class Host:
    """One host CLI. A new host: a subclass with its CLI name, how it calls a tool and reads back
    the result, and how it runs a session; `hosts()` lists it."""
    name = ""
    agent = ""
    cli = ""
    native_dedup = False
    has_subagent = True  # the session's subagent step runs (the host has one the fake can drive)
    compacts = True  # the session's compaction step runs

    def gated(self) -> bool:
        from leanctx import agents

        host = agents.get(self.agent)
        return bool(getattr(host, "builtin_read_tools", ()) or getattr(host, "builtin_read_tool", None))

    def version(self) -> str:
        found = re.search(r"\d+\.\d+\.\d+", hostcli.cli_version(self.cli) or "")
        return found[0] if found else "?"

    # per host
    def call(self, act: Act, body: dict) -> tuple[str, object]:
        raise NotImplementedError

    def result(self, body: dict, call_id: str) -> Optional[str]:
        raise NotImplementedError

    def is_sub(self, body: dict) -> bool:
        raise NotImplementedError

    def compact(self, model: "Model", conv: dict, body: dict):  # noqa: ANN201
        raise NotImplementedError

    def look_at_tree(self, model: "Model", conv: dict, body: dict):  # noqa: ANN201
        """`ls src tests` as the main conversation's next call: the step whose answer a host that
        compacts on a full window compacts after (the window is reported full with it)."""
        act = Act("shell", command="ls src tests")
        call_id, item = self.call(act, body)
        call = Call("main", act, call_id)
        model.run.calls.append(call)
        conv["pending"] = call
        return item

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: "Model", log: Optional[Path]) -> None:
        """Configure the host for the fake model server (and leanctx when `log`: the hook timing
        log), run the whole session, leave every request body in run.bodies."""
        raise NotImplementedError


class Model:
    """Routes each request to its conversation's player (the parent's, or a subagent's), hands
    the player the result of its last call, and answers with its next act."""

    def __init__(self, host: Host, run: Run, proj: Path, steps: list, use_ctx: bool) -> None:
        self.host, self.run, self.proj, self.use_ctx = host, run, proj, use_ctx
        self.convs: dict = {"main": {"gen": play(steps, proj, use_ctx), "pending": None, "done": False, "started": False}}
        self.lock = threading.Lock()
        self.compacted = False
        self.paused = False  # the parent asked for a compaction (hosts that compact between runs)
        self.sub_steps: Optional[list] = None

    def answer(self, body: dict):  # noqa: ANN201
        with self.lock:
            self.run.bodies.append(body)
            if self.run.first_body is None:
                self.run.first_body = body
            name = "sub" if self.host.is_sub(body) else "main"
            if name == "sub" and "sub" not in self.convs:
                self.convs["sub"] = {"gen": play(self.sub_steps or [], self.proj, self.use_ctx), "pending": None,
                                     "done": False, "started": False}
            conv = self.convs[name]
            got = None
            pending = conv["pending"]
            if pending is not None:
                got = self.host.result(body, pending.call_id)
                pending.text = got
                self.run.check(self.proj, pending, body)
                conv["pending"] = None
            if conv["done"]:
                return "done"
            try:
                act = conv["gen"].send(got or "") if conv["started"] else next(conv["gen"])
                conv["started"] = True
            except StopIteration:
                conv["done"] = True
                return "subagent finished" if name == "sub" else "done"
            if act.kind == "compact":
                self.compacted = True
                return self.host.compact(self, conv, body)
            if act.kind == "subagent":
                self.sub_steps = act.steps
            call_id, item = self.host.call(act, body)
            call = Call(name, act, call_id)
            self.run.calls.append(call)
            conv["pending"] = call
            return item


def claude_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return str(content)


class Claude(Host):
    name, agent, cli = "Claude Code", "claude", "claude"
    native_dedup = True  # Read of an unchanged file: "File unchanged since last read"
    TOOLS = "Read,Edit,Bash,Agent,mcp__leanctx__ctx_read"

    def call(self, act: Act, body: dict) -> tuple[str, object]:
        from tests.e2e.fake_anthropic import tool_use

        p = str(self.proj / act.path) if act.path else ""
        if act.kind == "read":
            args: dict = {"file_path": p}
            if act.start is not None:
                args.update(offset=act.start, limit=act.end - act.start + 1)
            item = tool_use("Read", args)
        elif act.kind == "shell":
            item = tool_use("Bash", {"command": act.command, "description": "look at the code"})
        elif act.kind == "ctx_read":
            args = {"path": act.path}
            if act.start is not None:
                args.update(start_line=act.start, end_line=act.end)
            item = tool_use("mcp__leanctx__ctx_read", args)
        elif act.kind == "edit":
            item = tool_use("Edit", {"file_path": p, "old_string": act.old, "new_string": act.new})
        elif act.kind == "subagent":
            what = "Read src/app.py and src/util.py and list the handlers."
            item = tool_use("Agent", {"description": "list handlers", "prompt": what, "subagent_type": "general-purpose"})
        else:
            raise ValueError(act.kind)
        return item["id"], item

    def result(self, body: dict, call_id: str) -> Optional[str]:
        for message in reversed(body.get("messages") or []):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id") == call_id:
                    return claude_text(block).removeprefix("PreToolUse:Read hook error: ")
        return None

    def is_sub(self, body: dict) -> bool:
        from tests.e2e.fake_anthropic import is_subagent

        return is_subagent(body)

    def compact(self, model: Model, conv: dict, body: dict):  # noqa: ANN201
        model.paused = True  # this run ends here; /compact, then the session goes on
        return "pausing for a compaction"

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: Model, log: Optional[Path]) -> None:
        from tests.e2e.fake_anthropic import FakeAnthropic

        self.proj = hh.proj
        if log is not None:
            lean.run("init", "--agent", "claude")
            settings = hh.home / ".claude" / "settings.json"
            data = json.loads(settings.read_text())
            time_hooks(data["hooks"], log)
            settings.write_text(json.dumps(data, indent=2))
            lean.run("serve", "--detach")  # up before the fake model's instant first call
        with FakeAnthropic(script=[model.answer] * 400) as srv:
            cenv = hostcli.claude_env(hh.home, srv.base_url, env)
            argv = [hostcli.find_cli(self.cli), "--allowedTools", self.TOOLS, "--permission-mode", "acceptEdits"]
            prompt, extra = "work on the handlers", []
            while True:
                cp = hostcli.run_cli([argv[0], "-p", prompt, *argv[1:], *extra], cwd=hh.proj, env=cenv, timeout=HOST_TIMEOUT)
                if cp.returncode != 0:
                    run.error = f"claude exited {cp.returncode}: {cp.stderr[-400:]}"
                    return
                if not model.paused:
                    break
                model.paused = False
                cp = hostcli.run_cli([argv[0], "-p", "/compact", *argv[1:], "--continue"], cwd=hh.proj, env=cenv,
                                     timeout=HOST_TIMEOUT)
                if cp.returncode != 0 or not srv.compaction_requests:
                    run.error = f"/compact failed ({cp.returncode}): {cp.stderr[-400:]}"
                    return
                prompt, extra = "go on with the handlers", ["--continue"]
            run.bodies[:] = srv.requests  # every request, compaction included


class Codex(Host):
    name, agent, cli = "Codex", "codex", "codex"
    NS = "mcp__leanctx"
    OVER = {"input_tokens": 50000, "total_tokens": 50005}

    def call(self, act: Act, body: dict) -> tuple[str, object]:
        from tests.e2e.fake_openai import function_call, shell_call

        if act.kind == "read":  # no built-in file reader: the model reads with its shell
            act.command = f"cat {act.path}" if act.start is None else f"sed -n '{act.start},{act.end}p' {act.path}"
            act.kind = "shell"
        if act.kind == "shell":
            item = shell_call(act.command)(body)
        elif act.kind == "ctx_read":
            args: dict = {"path": act.path}
            if act.start is not None:
                args.update(start_line=act.start, end_line=act.end)
            item = function_call("ctx_read", args, namespace=self.NS)
        elif act.kind == "edit":
            script = (f"import pathlib; p = pathlib.Path({act.path!r}); "
                      f"p.write_text(p.read_text().replace({act.old!r}, {act.new!r}, 1))")
            item = shell_call(f"python3 -c {shlex.quote(script)}")(body)
        elif act.kind == "subagent":
            item = function_call("spawn_agent", {"message": "Read src/app.py and src/util.py and list the handlers."},
                                 namespace="multi_agent_v1")
        elif act.kind == "wait":
            item = function_call("wait_agent", {"targets": [act.command], "timeout_ms": 120000}, namespace="multi_agent_v1")
        else:
            raise ValueError(act.kind)
        return item["call_id"], item

    def result(self, body: dict, call_id: str) -> Optional[str]:
        from tests.e2e.fake_openai import function_outputs

        for item in function_outputs(body):
            if item.get("call_id") == call_id:
                out = item.get("output")
                if isinstance(out, list):
                    parts = [c.get("text", "") for c in out if isinstance(c, dict)]
                    if parts and parts[0].startswith("Wall time:"):
                        parts = parts[1:]
                    return "".join(parts)
                return str(out)
        return None

    def is_sub(self, body: dict) -> bool:
        from tests.e2e.fake_openai import is_subagent

        return is_subagent(body)

    def compact(self, model: Model, conv: dict, body: dict):  # noqa: ANN201
        # a look at the tree, answered as the window is full: Codex compacts before the next turn
        self.srv.usage = self.OVER
        self.reset_usage = True
        return self.look_at_tree(model, conv, body)

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: Model, log: Optional[Path]) -> None:
        from tests.e2e.fake_openai import FakeOpenAI

        self.proj = hh.proj
        self.reset_usage = False
        waits: dict = {}

        def answer(body: dict):  # noqa: ANN202
            if self.reset_usage and not self.is_sub(body):
                self.srv.usage, self.reset_usage = None, False
            with model.lock:  # a spawn's result: the parent waits for its subagent before going on
                pending = model.convs["main"]["pending"]
                out = self.result(body, pending.call_id) if pending is not None and pending.act.kind == "subagent" else None
                if out is not None and pending.call_id not in waits:
                    try:
                        data = json.loads(out)
                        agent = str(data.get("agent_id") or data.get("id") or data.get("target") or out)
                    except ValueError:
                        agent = out.strip()
                    waits[pending.call_id] = agent
                    pending.text = out
                    run.bodies.append(body)
                    call_id, item = self.call(Act("wait", command=agent), body)
                    wait = Call("main", Act("wait"), call_id)
                    run.calls.append(wait)
                    model.convs["main"]["pending"] = wait
                    return item
            return model.answer(body)

        with FakeOpenAI(script=[answer] * 400) as srv:
            self.srv = srv
            hostcli.write_codex_config(hh.home, srv.base_url, top_level="model_auto_compact_token_limit = 20000")
            if log is not None:
                lean.run("init", "--agent", "codex", "--trust")
                hooks = hh.codex_home / "hooks.json"
                data = json.loads(hooks.read_text())
                time_hooks(data["hooks"], log)
                hooks.write_text(json.dumps(data, indent=2))
                lean.run("serve", "--detach")
            cp = hostcli.run_cli([hostcli.find_cli(self.cli), "exec", "--skip-git-repo-check",
                                  "--dangerously-bypass-hook-trust", "--sandbox", "danger-full-access", "work on the handlers"], cwd=hh.proj,
                                 env=hostcli.codex_env(hh.home, env), timeout=HOST_TIMEOUT)
            if cp.returncode != 0:
                run.error = f"codex exited {cp.returncode}: {cp.stderr[-400:]}"
            elif model.compacted and not srv.compaction_requests:
                run.error = "Codex did not compact"
            run.bodies[:] = srv.requests


class Gemini(Host):
    """Gemini CLI: read_file (start_line/end_line), run_shell_command, replace, invoke_agent (its
    subagent runs in the same process: its requests are known by the task prompt they start with).
    Compression: Gemini compresses on its own before a request once the answer before it reported
    a prompt over its threshold, and keeps the history from its last user prompt on; within one
    `-p` run that prompt is the first message and nothing is compressed, so the session pauses
    there and goes on in a second run (`--resume latest`), whose first call is answered as if the
    prompt filled the window (tests/e2e/test_gemini_compression_e2e.py does the same)."""
    name, agent, cli = "Gemini CLI", "gemini", "gemini"
    READ_TOOL, SHELL, EDIT, CTX = "read_file", "run_shell_command", "replace", "mcp_leanctx_ctx_read"
    HOOK_EVENTS = ("BeforeTool", "AfterTool")
    SETTINGS = ('{\n  // the user\'s own settings\n  "security": {"auth": {"selectedType": "gemini-api-key"}},\n'
                '  "privacy": {"usageStatisticsEnabled": false}\n}\n')
    SUB_MARK = "SUBAGENT-TASK: read src/app.py and src/util.py and list the handlers."
    FULL = 1_000_000  # a reported prompt this big is over either CLI's compression threshold
    SUMMARY_PROMPT: Optional[int] = None  # the prompt a compression's summary reports (None: the fake's)

    def call(self, act: Act, body: dict) -> tuple[str, object]:
        from tests.e2e.fake_gemini_chat import call

        p = str(self.proj / act.path) if act.path else ""
        if act.kind == "read":
            args: dict = {"file_path": p}
            if act.start is not None:
                args.update(start_line=act.start, end_line=act.end)
            item = call(self.READ_TOOL, args)
        elif act.kind == "shell":
            item = call(self.SHELL, {"command": act.command})
        elif act.kind == "ctx_read":
            args = {"path": act.path}
            if act.start is not None:
                args.update(start_line=act.start, end_line=act.end)
            item = call(self.CTX, args)
        elif act.kind == "edit":
            item = call(self.EDIT, {"file_path": p, "old_string": act.old, "new_string": act.new, "instruction": "edit"})
        elif act.kind == "subagent":
            item = self.spawn()
        else:
            raise ValueError(act.kind)
        self.last_ids[self.is_sub(body)] = item["id"]
        return item["id"], item

    def spawn(self) -> dict:
        from tests.e2e.fake_gemini_chat import call

        return call("invoke_agent", {"agent_name": "generalist", "prompt": self.SUB_MARK})

    def result(self, body: dict, call_id: str) -> Optional[str]:
        """The tool result the request ends with: the answer to its conversation's one call of the
        last turn (Gemini makes its own call ids); a refusal without the JSON Gemini puts it in."""
        from tests.e2e.fake_gemini_chat import gemini_tool_results

        contents = body.get("contents") or []
        if call_id != self.last_ids.get(self.is_sub(body)) or not contents:
            return None
        found = gemini_tool_results({"contents": contents[-1:]})
        if not found:
            return None
        text = found[-1][1]
        if text.startswith('{"error": '):
            try:
                return str(json.loads(text)["error"])
            except (ValueError, KeyError):
                return text
        return text

    def is_sub(self, body: dict) -> bool:
        """A subagent's request: a user message of its own (not a tool's answer) holds the task
        prompt; the parent has that prompt only in its call's arguments."""
        for content in body.get("contents") or []:
            if content.get("role") == "user":
                for part in content.get("parts") or []:
                    if isinstance(part, dict) and self.SUB_MARK in str(part.get("text") or ""):
                        return True
        return False

    def compact(self, model: Model, conv: dict, body: dict):  # noqa: ANN201
        model.paused = True  # this run ends here; the next one (a resume) compresses at its first call
        return "pausing for a compaction"

    def fill_window(self, model: Model, conv: dict, body: dict):  # noqa: ANN201
        """A look at the tree, answered as if the prompt filled the window: the CLI compresses
        before the request that carries its output (no read's answer is lost to it)."""
        self.full_now = True  # this answer's reported prompt (the fake has read its own by now)
        return self.look_at_tree(model, conv, body)

    def env(self, hh: hostcli.HostHome, srv, env: dict) -> dict:  # noqa: ANN001
        return hostcli.base_env(hh.home, {**env, "GEMINI_API_KEY": "fake-key", "GEMINI_CLI_TRUST_WORKSPACE": "true",
                                          "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{srv.port}"})

    def argv(self, prompt: str = "work on the handlers") -> list:
        return ["-p", prompt, "--output-format", "json", "--approval-mode", "yolo"]

    def answering(self, model: Model, answer: Callable) -> Callable:
        """The model's answer, with Gemini's own steps: a subagent ends by calling complete_task,
        and the first call after the pause fills the window."""
        from tests.e2e.fake_gemini_chat import call

        def answer_(body: dict):  # noqa: ANN202
            if self.fill_next and not self.is_sub(body):
                with model.lock:
                    self.fill_next = False
                    model.run.bodies.append(body)
                    return self.fill_window(model, model.convs["main"], body)
            out = answer(body)
            if out == "subagent finished":
                item = call("complete_task", {"result": {"response": "listed the handlers"}})
                self.last_ids[True] = item["id"]
                return item
            return out

        return answer_

    def is_compressed(self, srv) -> bool:  # noqa: ANN001
        from tests.e2e.fake_gemini_chat import is_compaction

        return any(is_compaction(r.body) for r in srv.log if isinstance(r.body, dict))

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: Model, log: Optional[Path]) -> None:
        from tests.e2e.fake_gemini_chat import FakeGeminiChat, is_compaction

        host = self  # the fake reports the prompt sizes this driver asks for

        class Fake(FakeGeminiChat):
            def answer_with_usage(self, body: dict) -> tuple:
                # the CLI's loop check (a side request) hears "no loop": a scripted session repeats itself on purpose
                if self._kind(body) == "side" and "Please analyze the conversation history" in json.dumps(body):
                    answer = {"unproductive_state_analysis": "steady progress", "unproductive_state_confidence": 0}
                    return "side", [{"text": json.dumps(answer)}], self.side_prompt_tokens
                kind, parts, tokens = super().answer_with_usage(body)
                if kind == "main" and host.full_now:
                    host.full_now, tokens = False, host.FULL
                elif kind != "main" and host.SUMMARY_PROMPT and is_compaction(body):
                    tokens = host.SUMMARY_PROMPT
                return kind, parts, tokens

        FakeGeminiChat = Fake  # noqa: N806
        self.proj, self.last_ids, self.fill_next, self.full_now = hh.proj, {}, False, False
        settings = hh.home / f".{self.agent}" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(self.SETTINGS)
        if log is not None:
            lean.run("init", "--agent", self.agent)
            time_settings_hooks(settings, log, self.HOOK_EVENTS)
            lean.run("serve", "--detach")
        with FakeGeminiChat([self.answering(model, model.answer)] * 400) as srv:
            self.srv = srv
            argv = self.argv()
            while True:
                cp = hostcli.run_cli([hostcli.find_cli(self.cli), *argv], cwd=hh.proj, env=self.env(hh, srv, env),
                                     timeout=HOST_TIMEOUT)
                if cp.returncode != 0:
                    run.error = f"{self.cli} exited {cp.returncode}: {cp.stderr[-400:]}"
                    break
                if not model.paused:
                    break
                model.paused, self.fill_next = False, True
                argv = [*self.argv("go on with the handlers"), "--resume", "latest"]
            if not run.error and model.compacted and not self.is_compressed(srv):
                run.error = f"{self.name} did not compress"
            run.bodies[:] = [r.body for r in srv.log if r.kind in ("main", "side")]


class Qwen(Gemini):
    """Qwen Code (a Gemini CLI fork on Chat Completions): read_file (offset from 0, limit),
    run_shell_command, edit, agent (its subagent runs in the same process); MCP tools are
    deferred, so the model loads ctx_read with tool_search first, as the installed read rule tells
    it. Qwen compresses within one run (it can split its history after the last tool answer)."""
    name, agent, cli = "Qwen Code", "qwen", "qwen"
    native_dedup = True  # its FileReadCache answers an unchanged re-read of read_file
    READ_TOOL, SHELL, EDIT, CTX = "read_file", "run_shell_command", "edit", "mcp__leanctx__ctx_read"
    HOOK_EVENTS = ("PreToolUse", "PostToolUse")
    SETTINGS = ('{\n  // the user\'s own settings\n  "security": {"auth": {"selectedType": "openai"}},\n'
                '  "model": {"name": "fake-model"},\n  "privacy": {"usageStatisticsEnabled": false},\n  "$version": 4\n}\n')
    # the summary's reported prompt: Qwen takes a compression whose new count, before - (this -
    # 1000) + summary output, comes out higher than before as failed (tests/e2e/fake_gemini_chat.py)
    SUMMARY_PROMPT = 600_000

    def call(self, act: Act, body: dict) -> tuple[str, object]:
        from tests.e2e.fake_gemini_chat import call, offered_tools

        if act.kind == "read" and act.start is not None:
            item = call(self.READ_TOOL, {"file_path": str(self.proj / act.path), "offset": act.start - 1,
                                         "limit": act.end - act.start + 1})
            return item["id"], item
        if act.kind == "ctx_read" and self.CTX not in offered_tools(body):
            self.held[self.is_sub(body)] = act  # loaded first; the read follows on the next request
            item = call("tool_search", {"query": f"select:{self.CTX}"})
            return item["id"], item
        return super().call(act, body)

    def spawn(self) -> dict:
        from tests.e2e.fake_gemini_chat import call

        return call("agent", {"subagent_type": "general-purpose", "description": "list handlers", "prompt": self.SUB_MARK})

    def result(self, body: dict, call_id: str) -> Optional[str]:
        from tests.e2e.fake_gemini_chat import chat_tool_results

        return chat_tool_results(body).get(call_id)

    def is_sub(self, body: dict) -> bool:
        for message in body.get("messages") or []:
            if isinstance(message, dict) and message.get("role") == "user" and self.SUB_MARK in json.dumps(message.get("content")):
                return True
        return False

    def compact(self, model: Model, conv: dict, body: dict):  # noqa: ANN201
        return self.fill_window(model, conv, body)

    def env(self, hh: hostcli.HostHome, srv, env: dict) -> dict:  # noqa: ANN001
        return hostcli.base_env(hh.home, {**env, "OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": srv.chat_url,
                                          "OPENAI_MODEL": "fake-model"})

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: Model, log: Optional[Path]) -> None:
        self.held = {}
        answer = model.answer

        def loading(body: dict):  # noqa: ANN202
            sub = self.is_sub(body)
            with model.lock:  # tool_search answered: the held ctx_read goes out now
                conv = model.convs.get("sub" if sub else "main") or {}
                pending, held = conv.get("pending"), self.held.get(sub)
                if held is not None and pending is not None and pending.act is held:
                    self.held[sub] = None
                    pending.act, pending.text = Act("tool_search"), self.result(body, pending.call_id)
                    run.bodies.append(body)
                    call_id, item = self.call(held, body)
                    call = Call(pending.conv, held, call_id)
                    run.calls.append(call)
                    conv["pending"] = call
                    return item
            return answer(body)

        model.answer = loading
        super().run(run, hh, lean, env, model, log)


class OpenCode(Host):
    """OpenCode (`opencode run`, Chat Completions): read (offset, limit), bash, edit; leanctx is a
    plugin there, not command hooks, so no hook time is taken. The subagent is its `task` tool (a
    child session, its requests known by the task prompt they start with); the compaction is its
    own automatic one, once a reply reports the model's window full (the model's `limit` below)."""
    name, agent, cli = "OpenCode", "opencode", "opencode"
    CTX = "leanctx_ctx_read"
    SUB_MARK = "SUBAGENT-TASK: read src/app.py and src/util.py and list the handlers."
    # OpenCode compacts once a reply's usage reaches the window less the output tokens
    FULL = {"prompt_tokens": 199000, "completion_tokens": 5, "total_tokens": 199005}
    CONFIG = """{
  // the user's own settings
  "$schema": "https://opencode.ai/config.json",
  "provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                        "options": {"baseURL": "@URL@", "apiKey": "sk-fake", "includeUsage": true},
                        "models": {"fake-model": {"name": "Fake Model", "tool_call": true,
                                                  "limit": {"context": 200000, "output": 4000}}}}},
  "model": "fake/fake-model",
  "autoupdate": false,
  "share": "disabled",
  "permission": {"*": "allow"}
}
"""

    def call(self, act: Act, body: dict) -> tuple[str, object]:
        from tests.e2e.fake_openai import function_call

        p = str(self.proj / act.path) if act.path else ""
        if act.kind == "read":
            args: dict = {"filePath": p}
            if act.start is not None:
                args.update(offset=act.start, limit=act.end - act.start + 1)
            item = function_call("read", args)
        elif act.kind == "shell":
            item = function_call("bash", {"command": act.command, "description": "look at the code"})
        elif act.kind == "ctx_read":
            args = {"path": act.path}
            if act.start is not None:
                args.update(start_line=act.start, end_line=act.end)
            item = function_call(self.CTX, args)
        elif act.kind == "edit":
            item = function_call("edit", {"filePath": p, "oldString": act.old, "newString": act.new})
        elif act.kind == "subagent":
            item = function_call("task", {"description": "list handlers", "prompt": self.SUB_MARK, "subagent_type": "general"})
        else:
            raise ValueError(act.kind)
        return item["call_id"], item

    def result(self, body: dict, call_id: str) -> Optional[str]:
        from tests.e2e.fake_openai import chat_tool_outputs

        return chat_tool_outputs(body).get(call_id)

    def is_sub(self, body: dict) -> bool:
        users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
        return bool(users) and self.SUB_MARK in json.dumps(users[0].get("content"))

    @staticmethod
    def is_compaction(body: dict) -> bool:
        """Its summary request: no tools, the history as one user message in `<conversation>`."""
        return "messages" in body and not body.get("tools") and any(
            isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)
            and "<conversation>" in m["content"] for m in body["messages"])

    def compact(self, model: Model, conv: dict, body: dict):  # noqa: ANN201
        # a look at the tree, answered as the window is full: OpenCode compacts before the next turn
        self.full = True
        return self.look_at_tree(model, conv, body)

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: Model, log: Optional[Path]) -> None:
        from tests.e2e.fake_openai import FakeOpenAI

        self.proj = hh.proj
        self.full = False

        def usage(kind: str, body: dict) -> Optional[dict]:
            if kind == "main" and self.full:
                self.full = False
                return self.FULL
            return None

        with FakeOpenAI(script=[model.answer] * 400, model="fake-model", chat_usage=usage) as srv:
            config = hh.home / ".config" / "opencode" / "opencode.json"
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(self.CONFIG.replace("@URL@", srv.base_url))
            if log is not None:
                lean.run("init", "--agent", self.agent)
                lean.run("serve", "--detach")
            oc_env = hostcli.base_env(hh.home, {
                **env, "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                # its background npm install of the plugin package fails at once, offline
                "npm_config_registry": "http://127.0.0.1:9/", "npm_config_offline": "true"})
            cp = hostcli.run_cli([hostcli.find_cli(self.cli), "run", "work on the handlers", "--format", "json"],
                                 cwd=hh.proj, env=oc_env, timeout=HOST_TIMEOUT)
            if cp.returncode != 0:
                run.error = f"opencode exited {cp.returncode}: {cp.stderr[-400:]}"
            elif model.compacted and not any(isinstance(b, dict) and self.is_compaction(b) for b in srv.requests):
                run.error = "OpenCode did not compact"
            run.bodies[:] = srv.requests


class Copilot(Codex):
    """GitHub Copilot CLI (`copilot -p`, Responses API): view (view_range), bash, edit; a `task`
    subagent runs in the same process, its requests known by the task prompt they start with."""
    name, agent, cli = "Copilot CLI", "copilot", "copilot"
    compacts = False
    CTX = "leanctx-ctx_read"
    SUB_MARK = "SUBAGENT-TASK: read src/app.py and src/util.py and list the handlers."

    def call(self, act: Act, body: dict) -> tuple[str, object]:
        from tests.e2e.fake_openai import function_call

        p = str(self.proj / act.path) if act.path else ""
        if act.kind == "read":
            args: dict = {"path": p}
            if act.start is not None:
                args["view_range"] = [act.start, act.end]
            item = function_call("view", args)
        elif act.kind == "shell":
            item = function_call("bash", {"command": act.command, "description": "look at the code"})
        elif act.kind == "ctx_read":
            args = {"path": act.path}
            if act.start is not None:
                args.update(start_line=act.start, end_line=act.end)
            item = function_call(self.CTX, args)
        elif act.kind == "edit":
            item = function_call("edit", {"path": p, "old_str": act.old, "new_str": act.new})
        elif act.kind == "subagent":
            item = function_call("task", {"name": "reader", "description": "list handlers", "agent_type": "general-purpose",
                                          "prompt": self.SUB_MARK, "mode": "sync"})
        else:
            raise ValueError(act.kind)
        return item["call_id"], item

    def is_sub(self, body: dict) -> bool:
        return any(isinstance(i, dict) and i.get("role") == "user" and self.SUB_MARK in json.dumps(i)
                   for i in body.get("input") or [])

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: Model, log: Optional[Path]) -> None:
        from tests.e2e.fake_openai import FakeOpenAI

        self.proj = hh.proj
        with FakeOpenAI(script=[model.answer] * 400) as srv:
            if log is not None:
                lean.run("init", "--agent", self.agent)
                hooks = hh.home / ".copilot" / "hooks" / "leanctx.json"
                data = json.loads(hooks.read_text())
                for event, entries in data["hooks"].items():
                    name = {"preToolUse": "PreToolUse", "preMcpToolCall": "PreToolUse", "postToolUse": "PostToolUse"}.get(event)
                    for entry in entries if name else ():
                        entry["bash"] = TIMER.format(cmd=entry["bash"], event=name, log=shlex.quote(str(log)))
                hooks.write_text(json.dumps(data, indent=2))
                lean.run("serve", "--detach")
            cenv = hostcli.base_env(hh.home, {**env, "COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": srv.base_url,
                                               "COPILOT_PROVIDER_API_KEY": "sk-fake", "COPILOT_PROVIDER_WIRE_API": "responses",
                                               "COPILOT_MODEL": "gpt-4.1"})
            cp = hostcli.run_cli([hostcli.find_cli(self.cli), "-p", "work on the handlers", "--allow-all-tools",
                                  "--allow-all-paths", "--disable-client-telemetry"], cwd=hh.proj, env=cenv, timeout=HOST_TIMEOUT)
            if cp.returncode != 0:
                run.error = f"copilot exited {cp.returncode}: {(cp.stdout + cp.stderr)[-400:]}"
            run.bodies[:] = srv.requests


class CodeBuddy(Host):
    """CodeBuddy Code (`codebuddy -p`, Chat Completions): Claude Code's tool names (Read, Bash,
    Edit, Agent); its MCP tools are deferred and called through DeferExecuteTool, as the read rule
    says. It compacts on its own before a request once the last reported prompt size is past 92%
    of the model's window: the compaction step answers a look at the tree with such a size, and
    the summary request (its own system prompt) gets a summary."""
    name, agent, cli = "CodeBuddy", "codebuddy", "codebuddy"
    SUB_PROMPT = "Read src/app.py and src/util.py and list the handlers."
    OVER = {"prompt_tokens": 10_000_000, "completion_tokens": 5, "total_tokens": 10_000_005}
    SUMMARY = ("<analysis>handlers read and edited</analysis><conversation_history_summary>The user asked to work on "
               "the handlers in src/; files were read and edited.</conversation_history_summary>")

    def call(self, act: Act, body: dict) -> tuple[str, object]:
        from tests.e2e.fake_chat import tool_call

        p = str(self.proj / act.path) if act.path else ""
        if act.kind == "read":
            args: dict = {"file_path": p}
            if act.start is not None:
                args.update(offset=act.start, limit=act.end - act.start + 1)
            item = tool_call("Read", args)
        elif act.kind == "shell":
            item = tool_call("Bash", {"command": act.command, "description": "look at the code"})
        elif act.kind == "ctx_read":
            args = {"path": act.path}
            if act.start is not None:
                args.update(start_line=act.start, end_line=act.end)
            item = tool_call("DeferExecuteTool", {"toolName": "mcp__leanctx__ctx_read", "params": args})
        elif act.kind == "edit":
            item = tool_call("Edit", {"file_path": p, "old_string": act.old, "new_string": act.new})
        elif act.kind == "subagent":
            item = tool_call("Agent", {"description": "list handlers", "prompt": self.SUB_PROMPT, "subagent_type": "general-purpose"})
        else:
            raise ValueError(act.kind)
        return item["id"], item

    def result(self, body: dict, call_id: str) -> Optional[str]:
        from tests.e2e.fake_openai import chat_tool_outputs

        return chat_tool_outputs(body).get(call_id)

    def is_sub(self, body: dict) -> bool:
        """The subagent's requests start with its prompt as the user's message."""
        for m in body.get("messages") or []:
            if isinstance(m, dict) and m.get("role") == "user":
                return self.SUB_PROMPT in json.dumps(m.get("content"))
        return False

    @staticmethod
    def classify(body: dict) -> str:
        messages = body.get("messages") or []
        if messages and isinstance(messages[0], dict) and "summarizing conversations" in json.dumps(messages[0].get("content")):
            return "compact"
        return "main" if body.get("tools") else "side"

    def compact(self, model: Model, conv: dict, body: dict):  # noqa: ANN201
        # a look at the tree, answered as the window is full: CodeBuddy compacts before the next request
        act = Act("shell", command="ls src tests")
        call_id, item = self.call(act, body)
        self.over = call_id
        call = Call("main", act, call_id)
        model.run.calls.append(call)
        conv["pending"] = call
        return item

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: Model, log: Optional[Path]) -> None:
        from tests.e2e.fake_chat import FakeChat

        self.proj = hh.proj
        self.over: Optional[str] = None
        cb = hh.home / ".codebuddy"
        cb.mkdir(parents=True, exist_ok=True)
        settings = cb / "settings.json"
        settings.write_text(json.dumps({"model": "default-model"}, indent=4))
        if log is not None:
            lean.run("init", "--agent", self.agent)
            data = json.loads(settings.read_text())
            time_hooks(data["hooks"], log)
            settings.write_text(json.dumps(data, indent=4))
            lean.run("serve", "--detach")

        def usage(kind: str, body: dict, items: list):  # noqa: ANN202
            return self.OVER if self.over is not None and any(i.get("id") == self.over for i in items) else None

        with FakeChat(script=[model.answer] * 400, classify=self.classify, side_text=self.SUMMARY, usage=usage) as srv:
            cenv = hostcli.base_env(hh.home, {
                **env, "CODEBUDDY_API_KEY": "sk-fake", "CODEBUDDY_BASE_URL": srv.base_url,
                "CODEBUDDY_SKIP_BUILTIN_MARKETPLACE": "1", "GIT_ALLOW_PROTOCOL": "file",
                "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"})
            cp = hostcli.run_cli(["node", hostcli.find_cli(self.cli), "-p", "work on the handlers",
                                  "--dangerously-skip-permissions"], cwd=hh.proj, env=cenv, timeout=HOST_TIMEOUT)
            if cp.returncode != 0:
                run.error = f"codebuddy exited {cp.returncode}: {cp.stderr[-400:]}"
            run.bodies[:] = srv.requests


class Pi(Host):
    """Pi (`pi --mode rpc`, Chat Completions): read (offset, limit), bash, edit; leanctx is an
    extension there, not command hooks, so no hook time is taken. No subagents ("No sub-agents" in
    its README). The compaction is its `compact` command between two prompts: the first prompt ends
    at the session's compaction step, then `compact`, then a second prompt goes on."""
    name, agent, cli = "Pi", "pi", "pi"
    has_subagent = False

    def version(self) -> str:
        # `pi --version` prints it on stderr
        path = hostcli.find_cli(self.cli)
        cp = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                            env=hostcli.base_env(Path(tempfile.gettempdir()))) if path else None
        found = re.search(r"\d+\.\d+\.\d+", (cp.stdout + cp.stderr) if cp else "")
        return found[0] if found else "?"

    def call(self, act: Act, body: dict) -> tuple[str, object]:
        from tests.e2e.fake_openai import function_call

        p = str(self.proj / act.path) if act.path else ""
        if act.kind == "read":
            args: dict = {"path": p}
            if act.start is not None:
                args.update(offset=act.start, limit=act.end - act.start + 1)
            item = function_call("read", args)
        elif act.kind == "shell":
            item = function_call("bash", {"command": act.command})
        elif act.kind == "ctx_read":
            args = {"path": act.path}
            if act.start is not None:
                args.update(start_line=act.start, end_line=act.end)
            item = function_call("ctx_read", args)
        elif act.kind == "edit":
            item = function_call("edit", {"path": p, "edits": [{"oldText": act.old, "newText": act.new}]})
        else:
            raise ValueError(act.kind)
        return item["call_id"], item

    def result(self, body: dict, call_id: str) -> Optional[str]:
        from tests.e2e.fake_openai import chat_tool_outputs

        return chat_tool_outputs(body).get(call_id)

    def is_sub(self, body: dict) -> bool:
        return False

    @staticmethod
    def is_compaction(body: dict) -> bool:
        """Its summary request: no tools, its summariser's system prompt."""
        return "messages" in body and not body.get("tools") and "context summarization" in json.dumps(body.get("messages"))

    def compact(self, model: Model, conv: dict, body: dict):  # noqa: ANN201
        model.paused = True  # this prompt ends here; `compact`, then the session goes on
        return "pausing for a compaction"

    def run(self, run: Run, hh: hostcli.HostHome, lean: "Lean", env: dict, model: Model, log: Optional[Path]) -> None:
        import types

        from tests.e2e.fake_openai import FakeOpenAI
        from tests.e2e.test_pi_e2e import models_json, rpc_session

        self.proj = hh.proj
        agent_dir = hh.home / ".pi" / "agent"
        agent_dir.mkdir(parents=True, exist_ok=True)
        with FakeOpenAI(script=[model.answer] * 400, model="fake-model") as srv:
            (agent_dir / "models.json").write_text(models_json(srv.base_url))
            if log is not None:
                lean.run("init", "--agent", self.agent)
                lean.run("serve", "--detach")
            compacted = []

            def compact_if_asked() -> dict:
                if not model.paused:
                    return {"type": "get_state"}
                model.paused = False
                compacted.append(True)
                return {"type": "compact"}

            def go_on() -> dict:
                return {"type": "prompt", "message": "go on with the handlers"} if compacted else {"type": "get_state"}

            try:
                rpc_session(hostcli.find_cli(self.cli), hh, types.SimpleNamespace(host_env=env),
                            [{"type": "prompt", "message": "work on the handlers"}, compact_if_asked, go_on],
                            timeout=HOST_TIMEOUT)
            except AssertionError as exc:
                run.error = f"pi --mode rpc: {str(exc)[-400:]}"
            if compacted and not any(isinstance(b, dict) and self.is_compaction(b) for b in srv.requests):
                run.error = run.error or "Pi did not compact"
            run.bodies[:] = srv.requests


HOSTS: dict[str, Callable[[], Host]] = {"claude": Claude, "codex": Codex, "gemini": Gemini, "qwen": Qwen, "opencode": OpenCode,
                                        "copilot": Copilot, "codebuddy": CodeBuddy, "pi": Pi}


def hosts() -> dict[str, Host]:
    """Every host the bench can drive; a host whose gate lands later needs no change here
    (`Host.gated` asks its agent module)."""
    return {key: make() for key, make in HOSTS.items()}


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------
class Lean:
    """The real `leanctx` command with HOME and its data dir inside the session's temp home."""

    def __init__(self, hh: hostcli.HostHome) -> None:
        self.hh = hh
        self.data = hh.home / "leanctx-data"
        self.host_env = {"LEANCTX_HOME": str(self.data)}

    def run(self, *args: str) -> None:
        env = hostcli.base_env(self.hh.home, self.host_env)
        cp = subprocess.run([sys.executable, "-m", "leanctx", *args], env=env, cwd=str(self.hh.proj),
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if cp.returncode != 0:
            raise RuntimeError(f"leanctx {' '.join(args)} -> {cp.returncode}\n{cp.stdout}\n{cp.stderr}")

    def stop(self) -> None:
        env = hostcli.base_env(self.hh.home, self.host_env)
        subprocess.run([sys.executable, "-m", "leanctx", "stop", "--force"], env=env, capture_output=True, timeout=60)

    def hook_errors(self) -> str:
        log = self.data / "logs" / "hooks.log"
        return log.read_text() if log.exists() else ""


def run_mode(host: Host, mode: str, steps: list, root: Path) -> tuple[Run, Path]:
    """One session, one way. Every mode uses the same paths (the folder is made anew), so the
    request bodies differ only by what leanctx adds."""
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    hh = hostcli.make_home(root, project_files())
    lean = Lean(hh)
    run = Run(host.name, mode)
    model = Model(host, run, hh.proj, steps, use_ctx=mode == "d")
    env = dict(lean.host_env)
    if mode == "b":
        env["LEANCTX_BUILTIN_GATE"] = "0"
    log = root / "hook-times.log" if mode != "a" else None
    try:
        host.run(run, hh, lean, env, model, log)
    except Exception as exc:  # a host that hangs or fails: the row says so
        run.error = f"{type(exc).__name__}: {str(exc)[-300:]}"
    finally:
        if mode != "a":
            lean.stop()
    if log is not None:
        run.hook_ms = read_hook_log(log)
        errors = lean.hook_errors()
        if errors:
            run.error = run.error or f"hook errors: {errors[-300:]}"
    return run, hh.proj


def floor_ms(root: Path, n: int) -> list[float]:
    """`python -I -S -c pass` (bench/hook_latency.py's floor), timed by the same shell."""
    log = root / "floor.log"
    log.unlink(missing_ok=True)
    cmd = TIMER.format(cmd=f"{shlex.quote(sys.executable)} -I -S -c pass", event="floor", log=shlex.quote(str(log)))
    for _ in range(n):
        subprocess.run(["/bin/sh", "-c", cmd], input=b'{"tool_name": "python"}', capture_output=True, check=True)
    return read_hook_log(log).get("floor python", [])


# --------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------
NATIVE_UNCHANGED = re.compile(r"file (?:\S+ )?unchanged since", re.I)  # Claude Code's own answer to a Read it dedups


def count(text: str) -> int:
    return tokens.count(text)


def body_parts(body: Optional[dict]) -> tuple[int, int]:
    """(tokens of the tool definitions, tokens of the rest a model reads: system and messages)."""
    if not body:
        return 0, 0
    tools_part = count(json.dumps(body.get("tools") or [], ensure_ascii=False, sort_keys=True))
    rest = {k: body.get(k) for k in ("system", "instructions", "messages", "input", "systemInstruction", "contents")
            if k in body}
    return tools_part, count(json.dumps(rest, ensure_ascii=False, sort_keys=True))


def tool_sizes(body: Optional[dict]) -> dict:
    """Tool name -> tokens of its definition in a request (a namespace or a Gemini declaration
    list counts as one entry per tool it holds)."""
    sizes: dict = {}
    for t in (body or {}).get("tools") or []:
        if not isinstance(t, dict):
            continue
        inner = t.get("functionDeclarations") or (t.get("tools") if t.get("type") == "namespace" else None)
        if inner:
            for d in inner:
                sizes[f"{t.get('name', '')}.{d.get('name')}".lstrip(".")] = count(json.dumps(d, sort_keys=True))
        else:
            name = t.get("name") or (t.get("function") or {}).get("name") or t.get("type") or "?"
            sizes[name] = count(json.dumps(t, sort_keys=True))
    return sizes


def tool_names(body: Optional[dict]) -> set:
    return set(tool_sizes(body))


def figures(host: Host, run: Run, base: Optional[Run]) -> dict:
    calls = [c for c in run.calls if c.act.kind != "wait"]
    for c in calls:  # a result that reached only the compaction request (Codex compacts mid-turn)
        for body in run.bodies if c.text is None else ():
            if isinstance(body, dict):
                c.text = host.result(body, c.call_id)
                if c.text is not None:
                    break
    received = [c for c in calls if c.text is not None]
    result_tokens = sum(count(c.text) for c in received)
    stubs = [c for c in received if stub_regions(c.text, 10**6) is not None]
    diffs = [c for c in received if unwrapped(c.text).startswith("[changed]") and c not in stubs]
    native = [c for c in received if NATIVE_UNCHANGED.search(c.text[:200])]
    requests = [b for b in run.bodies if isinstance(b, dict) and b.get("tools")]
    tools_t, rest_t = body_parts(run.first_body)
    out = {
        "mode": run.mode, "error": run.error, "tool_calls": len(calls), "answered": len(received),
        "reads": sum(c.act.is_read for c in calls), "asked_again": sum(c.act.redundant for c in calls),
        "ctx_read_calls": sum(c.act.kind == "ctx_read" for c in calls),
        "result_tokens": result_tokens, "stub_tokens": sum(count(c.text) for c in stubs),
        "stubs": len(stubs), "diffs": len(diffs), "host_unchanged_notes": len(native),
        "wrong_stubs": sum(c.wrong for c in calls), "requests": len(requests),
        "compactions": sum(1 for b in run.bodies if isinstance(b, dict) and _is_compaction(b)),
        "subagent_requests": sum(1 for b in run.bodies if isinstance(b, dict) and b.get("tools") and host.is_sub(b)),
        "hook_ms": {k: round(statistics.median(v), 1) for k, v in sorted(run.hook_ms.items())},
        "hook_calls": {k: len(v) for k, v in sorted(run.hook_ms.items())},
        "_tools_tokens": tools_t, "_rest_tokens": rest_t,
        "calls": [f"{c.conv:4} {c.act.kind:8} {c.act.path or c.act.command[:30]:18} {c.act.start or ''}-{c.act.end or ''}"
                  f"{' again' if c.act.redundant else '      '} {count(c.text or ''):6} {'WRONG ' if c.wrong else ''}"
                  f"{(c.text or '<none>')[:90]!r}" for c in calls],
    }
    if base is not None:
        mine, theirs = tool_names(run.first_body), tool_names(base.first_body)
        out["tools_added"], out["tools_removed"] = sorted(mine - theirs), sorted(theirs - mine)
        ours, host_alone = tool_sizes(run.first_body), tool_sizes(base.first_body)
        out["tool_tokens_changed"] = {k: ours.get(k, 0) - host_alone.get(k, 0) for k in sorted(set(ours) | set(host_alone))
                                      if ours.get(k, 0) != host_alone.get(k, 0)}
        base_tools, base_rest = body_parts(base.first_body)
        out["overhead_tools_per_request"] = tools_t - base_tools
        out["overhead_rule_per_request"] = rest_t - base_rest
    return out


def _is_compaction(body: dict) -> bool:
    from tests.e2e import fake_anthropic, fake_gemini_chat, fake_openai

    return (fake_anthropic.is_compaction(body) or fake_openai.is_compaction(body) or fake_gemini_chat.is_compaction(body)
            or OpenCode.is_compaction(body) or CodeBuddy.classify(body) == "compact" or Pi.is_compaction(body))


def bench_host(host: Host, quick: bool, root: Path, floor_runs: int) -> dict:
    steps = session(quick)
    if quick or not host.has_subagent:
        steps = [s for s in steps if s[0] != "subagent"]
    if not host.compacts:
        steps = [s for s in steps if s[0] != "compact"]
    gated = host.gated()
    runs: dict[str, Run] = {}
    floor: list[float] = []
    for mode in MODES:
        if mode == "c" and not gated:
            continue
        runs[mode], _ = run_mode(host, mode, steps, root / host.agent)
        floor += floor_ms(root, max(1, floor_runs // 4))  # between the sessions: the same machine load
    base = runs["a"]
    rows = {m: figures(host, r, base if m != "a" else None) for m, r in runs.items()}
    a_tokens = rows["a"]["result_tokens"]
    for m, row in rows.items():
        row["vs_host_alone"] = (row["result_tokens"] - a_tokens) / a_tokens if a_tokens else 0.0
        once = row.get("overhead_tools_per_request", 0) + row.get("overhead_rule_per_request", 0)
        row["overhead_per_request"] = once
        row["overhead_session"] = once * row["requests"]
        row["within_host_alone_plus_overhead"] = row["result_tokens"] <= a_tokens + max(once, 0)
    return {"host": host.name, "agent": host.agent, "version": host.version(), "gated": gated,
            "native_dedup": host.native_dedup, "quick": quick, "modes": rows,
            "floor_ms": round(statistics.median(floor), 1) if floor else None, "tokenizer": tokens.name()}


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{x * 100:+.0f}%"


def gated_hook_ms(row: dict) -> Optional[str]:
    """p50 ms the host waited for each tool's hooks: `Read 77/68` (pre-tool / post-tool)."""
    ms = row["hook_ms"]
    tools = dict.fromkeys(k.split(" ", 1)[1] for k in ms)
    if not tools:
        return None
    short = lambda t: "ctx_read" if t.endswith("ctx_read") else "gated call" if t == "?" else t  # noqa: E731
    return ", ".join(f"{short(t)} {ms.get('PreToolUse ' + t, 0):.0f}" + (f"/{ms['PostToolUse ' + t]:.0f}" if "PostToolUse " + t in ms else "")
                     for t in tools)


def host_table(res: dict) -> str:
    rows = res["modes"]
    cols = [m for m in MODES]
    head = f"{res['host']} {res['version']}" + (" (quick)" if res["quick"] else "")
    a = rows["a"]
    lines = [f"## {head}: {a['tool_calls']} tool calls, {a['reads']} reads ({a['asked_again']} asked again), "
             f"{a['compactions']} compaction(s), {a['subagent_requests']} subagent requests; tokens: {res['tokenizer']}"]
    widths = [34] + [16] * len(cols)

    def line(label: str, cells: list[str]) -> str:
        return f"| {label:<{widths[0]}} | " + " | ".join(f"{c:>{w}}" for c, w in zip(cells, widths[1:])) + " |"

    def cell(m: str, fn) -> str:  # noqa: ANN001
        if m not in rows:
            return "not gated"
        return fn(rows[m])

    lines.append(line("", [f"({m}) {MODE_NAMES[m]}" for m in cols]))
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines.append(line("tool-result tokens", [cell(m, lambda r: f"{r['result_tokens']:,}") for m in cols]))
    lines.append(line("vs host alone", [cell(m, lambda r: "-" if r["mode"] == "a" else _pct(r["vs_host_alone"])) for m in cols]))
    lines.append(line("tool calls (ctx_read)", [cell(m, lambda r: f"{r['tool_calls']} ({r['ctx_read_calls']})") for m in cols]))
    lines.append(line("our stubs / diffs", [cell(m, lambda r: f"{r['stubs']} / {r['diffs']}") for m in cols]))
    lines.append(line("host's own unchanged notes", [cell(m, lambda r: str(r["host_unchanged_notes"])) for m in cols]))
    lines.append(line("WRONG stubs", [cell(m, lambda r: str(r["wrong_stubs"])) for m in cols]))
    lines.append(line("stub text tokens (ours)", [cell(m, lambda r: f"{r['stub_tokens']:,}") for m in cols]))
    lines.append(line("overhead / request: tools + rule", [cell(m, lambda r: "-" if r["mode"] == "a" else
                                                                 f"{r['overhead_tools_per_request']:,} + {r['overhead_rule_per_request']:,}") for m in cols]))
    lines.append(line("requests (overhead x requests)", [cell(m, lambda r: f"{r['requests']}" + ("" if r["mode"] == "a" else f" ({r['overhead_session']:,})")) for m in cols]))
    lines.append(line("<= host alone + overhead", [cell(m, lambda r: "-" if r["mode"] == "a" else ("yes" if r["within_host_alone_plus_overhead"] else "NO")) for m in cols]))
    lines.append(line(f"hook p50 ms pre/post (floor {res['floor_ms']})",
                      [cell(m, lambda r: gated_hook_ms(r) or "-") for m in cols]))
    errors = [f"({m}) {r['error']}" for m, r in rows.items() if r["error"]]
    if errors:
        lines.append("errors: " + "; ".join(errors))
    return "\n".join(lines)


def summary_table(results: list[dict]) -> str:
    lines = ["## Summary: tool-result tokens the model received, per host (same run)",
             "| host | host alone | ctx_read only | gate | gate + ctx_read | gate vs alone | wrong stubs | "
             "overhead / request | hook p50 ms pre/post, gate (floor) | targets |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for res in results:
        rows = res["modes"]
        val = lambda m: f"{rows[m]['result_tokens']:,}" if m in rows else "not gated"  # noqa: E731
        c = rows.get("c")
        wrong = sum(r["wrong_stubs"] for r in rows.values())
        over = rows["b"]["overhead_per_request"] if "b" in rows else 0
        hook = gated_hook_ms(c) if c else gated_hook_ms(rows.get("d", {"hook_ms": {}}))
        ok = check(res)
        lines.append(f"| {res['host']} {res['version']} | {val('a')} | {val('b')} | {val('c')} | {val('d')} | "
                     f"{_pct(c['vs_host_alone']) if c else 'not gated'} | {wrong} | {over:,} | "
                     f"{hook or '-'} ({res['floor_ms']}) | {'met' if not ok else '; '.join(ok)} |")
    return "\n".join(lines)


def check(res: dict) -> list[str]:
    """The targets this host's figures miss (empty: all met)."""
    missed = []
    rows = res["modes"]
    for m, r in rows.items():
        if r["error"]:
            missed.append(f"({m}) did not finish")
        if r["wrong_stubs"]:
            missed.append(f"({m}) {r['wrong_stubs']} wrong stubs")
        if m != "a" and not r["within_host_alone_plus_overhead"]:
            missed.append(f"({m}) above host alone + overhead")
    c = rows.get("c")
    if c and not res["native_dedup"] and c["vs_host_alone"] > -MIN_SAVING:
        missed.append(f"(c) saves {-c['vs_host_alone'] * 100:.0f}% < {MIN_SAVING * 100:.0f}%")
    return missed


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="claude,codex", help=f"comma-separated, of: {','.join(HOSTS)}")
    parser.add_argument("--quick", action="store_true", help="a short session (no compaction, no subagent)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of tables")
    parser.add_argument("--floor-runs", type=int, default=30)
    parser.add_argument("--save", type=Path, help="also write the figures as JSON to this file")
    parser.add_argument("--calls", action="store_true", help="also list every call and what the model got")
    args = parser.parse_args(argv)
    chosen = [h.strip() for h in args.hosts.split(",") if h.strip()]
    unknown = [h for h in chosen if h not in HOSTS]
    if unknown:
        parser.error(f"unknown host(s): {', '.join(unknown)}")
    all_hosts = hosts()
    results = []
    with tempfile.TemporaryDirectory(prefix="leanctx-session-") as tmp:
        for key in chosen:
            host = all_hosts[key]
            if not hostcli.find_cli(host.cli):
                print(f"{host.name}: CLI {host.cli!r} not found, skipped", file=sys.stderr)
                continue
            results.append(bench_host(host, args.quick, Path(tmp), args.floor_runs))
            if args.calls:
                for m, row in results[-1]["modes"].items():
                    print(f"--- {host.name} ({m})", file=sys.stderr)
                    for c in row["calls"]:
                        print(f"  {c}", file=sys.stderr)
    if args.save:
        args.save.write_text(json.dumps(results, indent=2) + "\n")
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for res in results:
            print(host_table(res) + "\n")
        print(summary_table(results))
    return 1 if any(check(r) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
