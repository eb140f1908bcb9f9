"""The built-in reader gate's hook: Claude Code's Read payloads in, the refusal (or silence) out.

Parsing is checked against the payloads recorded from Claude Code 2.1.197; the whole path runs
with real processes: a real daemon, the hook run under `sh -c` as a host runs it (the test
process is the host), and a transcript the test writes as Claude Code writes each call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx.agents import claude
from leanctx.hooks import readgate
from leanctx.readers import Ask
from tests.cache.test_service_support import start_daemon, stop_any_daemon, subprocess_env
from tests.conftest import PAYLOADS

PRE = json.loads((PAYLOADS / "claude" / "PreToolUse.json").read_text())
POST = json.loads((PAYLOADS / "claude" / "PostToolUse.json").read_text())


def test_requested_and_delivered_read_the_recorded_payloads() -> None:
    assert claude.read_request(PRE["tool_input"]) == Ask("/home/user/proj/a.txt", 1, 2000)
    assert claude.read_request({"file_path": "/p/a.py", "offset": 5, "limit": 10}) == Ask("/p/a.py", 5, 14)
    got = claude.read_delivery(POST["tool_input"], POST["tool_response"])
    assert got == (Ask("/home/user/proj/a.txt", 1, 2), "hello world file\n")


@pytest.mark.parametrize("tool_input", [
    {"file_path": "a.py"},  # relative: not what Read takes
    {"file_path": "/p/a.py", "offset": 0},
    {"file_path": "/p/a.py", "limit": -1},
    {"file_path": "/p/a.py", "offset": "3"},
    {"file_path": "/p/doc.pdf", "pages": "1-2"},  # an argument we do not know: no opinion
    {"file_path": "/p/a\x00.py"},
    None,
])
def test_calls_the_gate_cannot_pin_down_are_left_alone(tool_input: object) -> None:
    assert claude.read_request(tool_input) is None


@pytest.mark.parametrize("response", [
    {"type": "file_unchanged", "file": {"filePath": "/home/user/proj/a.txt"}},  # Claude Code's own dedup answer
    {"type": "image", "file": {"base64": "...", "type": "image/png"}},
    {"type": "text", "file": {"filePath": "/home/user/proj/b.txt", "content": "x", "numLines": 1, "startLine": 1, "totalLines": 1}},
    {"type": "text", "file": {"filePath": "/home/user/proj/a.txt", "content": "", "numLines": 1, "startLine": 1, "totalLines": 1}},
    {"type": "text", "file": {"filePath": "/home/user/proj/a.txt", "content": "x", "numLines": 1, "startLine": 3, "totalLines": 9}},
    "text",
])
def test_only_text_the_reader_delivered_for_the_call_is_handed_on(response: object) -> None:
    assert claude.read_delivery(POST["tool_input"], response) is None


HOOK = [sys.executable, "-c", "from leanctx.hooks import run; run()"]


def run_hook(env: dict, event: str, payload: dict, *flags: str) -> str:
    cmd = " ".join([*(f"'{w}'" for w in HOOK), "claude", event, *flags])
    proc = subprocess.run(["/bin/sh", "-c", cmd], input=json.dumps(payload).encode(), env=env, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode()


class Session:
    """A Claude Code session as its hooks and transcript show it; the test process is its host."""

    def __init__(self, env: dict, proj: Path, conv: str = "sess-1") -> None:
        self.env, self.proj, self.conv = env, proj, conv
        self.transcript = proj / f"{conv}.jsonl"
        self.n = 0
        base = {"session_id": conv, "transcript_path": str(self.transcript), "cwd": str(proj)}
        self.base = base
        run_hook(env, "SessionStart", {**base, "hook_event_name": "SessionStart", "source": "startup"})
        run_hook(env, "UserPromptSubmit", {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go"})

    def entry(self, kind: str, part: dict, agent_id: str | None = None) -> None:
        """One transcript entry; a subagent's go to its own transcript, as Claude Code 2.1.x writes them."""
        self.n += 1
        uid = f"u{self.n}"
        path = self.transcript if agent_id is None else self.proj / self.conv / "subagents" / f"agent-{agent_id}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        tips = self.__dict__.setdefault("tips", {})
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"parentUuid": tips.get(path), "uuid": uid, "type": kind, "message": {"content": [part]}}) + "\n")
        tips[path] = uid

    def read(self, path: Path, flags: tuple = ("--read-gate", "--builtin-read"), agent_id: str | None = None, **extra: int) -> str:
        """One Read: PreToolUse; if not refused, the reader's PostToolUse. Returns what the model got."""
        call = f"toolu_{self.n:04d}"
        tool_input = {"file_path": str(path), **extra}
        base = {**self.base, **({"agent_id": agent_id, "agent_type": "general-purpose"} if agent_id else {})}
        self.entry("assistant", {"type": "tool_use", "id": call, "name": "Read", "input": tool_input}, agent_id)
        out = run_hook(self.env, "PreToolUse", {**base, "hook_event_name": "PreToolUse", "tool_name": "Read",
                                                 "tool_input": tool_input, "tool_use_id": call}, *flags)
        self.last = out
        if out and "updatedInput" in json.loads(out)["hookSpecificOutput"]:
            answer = json.loads(out)["hookSpecificOutput"]
            assert "permissionDecision" not in answer, "the re-ask must keep the host's own permission check"
            tool_input = answer["updatedInput"]
            extra = {k: v for k, v in tool_input.items() if k in ("offset", "limit")}
        elif out:
            answer = json.loads(out)["hookSpecificOutput"]
            assert answer["permissionDecision"] == "deny"
            self.entry("user", {"type": "tool_result", "tool_use_id": call, "content": answer["permissionDecisionReason"], "is_error": True},
                       agent_id)
            return answer["permissionDecisionReason"]
        text = path.read_text()
        lines = text.split("\n")
        start = extra.get("offset", 1)
        shown = lines[start - 1:start - 1 + extra.get("limit", 2000)]
        content = "\n".join(shown)
        self.entry("user", {"type": "tool_result", "tool_use_id": call, "content": content}, agent_id)
        response = {"type": "text", "file": {"filePath": str(path), "content": content, "numLines": len(shown),
                                             "startLine": start, "totalLines": len(lines)}}
        post_flags = ("--builtin-read",) if "--builtin-read" in flags else ()
        if post_flags:
            assert run_hook(self.env, "PostToolUse", {**base, "hook_event_name": "PostToolUse", "tool_name": "Read",
                                                      "tool_input": tool_input, "tool_response": response,
                                                      "tool_use_id": call}, *post_flags) == ""
        return content


    def bash(self, command: str, flags: tuple = ("--read-gate", "--builtin-read")) -> str:
        """One Bash call: PreToolUse; if not refused, the command runs for real in the project and
        the PostToolUse hook gets Claude Code's response shape. Returns what the model got."""
        call = f"toolu_{self.n:04d}"
        tool_input = {"command": command, "description": "read"}
        self.entry("assistant", {"type": "tool_use", "id": call, "name": "Bash", "input": tool_input})
        out = run_hook(self.env, "PreToolUse", {**self.base, "hook_event_name": "PreToolUse", "tool_name": "Bash",
                                                 "tool_input": tool_input, "tool_use_id": call}, *flags)
        self.last = out
        if out:
            answer = json.loads(out)["hookSpecificOutput"]
            assert answer["permissionDecision"] == "deny" and "updatedInput" not in answer
            self.entry("user", {"type": "tool_result", "tool_use_id": call, "content": answer["permissionDecisionReason"], "is_error": True})
            return answer["permissionDecisionReason"]
        ran = subprocess.run(["bash", "-c", command], cwd=self.proj, capture_output=True, text=True, timeout=30)
        self.entry("user", {"type": "tool_result", "tool_use_id": call, "content": ran.stdout + ran.stderr})
        response = {"stdout": ran.stdout, "stderr": ran.stderr, "interrupted": False, "isImage": False}
        assert run_hook(self.env, "PostToolUse", {**self.base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                                                  "tool_input": tool_input, "tool_response": response,
                                                  "tool_use_id": call}, "--builtin-read") == ""
        return ran.stdout + ran.stderr


@pytest.fixture
def daemon_env(home: Path, data_dir: Path, tmp_path: Path):
    env = subprocess_env(home, data_dir, CLAUDE_CODE_SESSION_ID="sess-1")
    proc = start_daemon(env, tmp_path / "daemon.log")
    yield env
    proc.terminate()
    proc.wait(20)
    stop_any_daemon(data_dir)


def test_a_re_read_is_refused_with_the_stub_and_asking_again_gives_the_content(daemon_env: dict, tmp_path: Path, data_dir: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    big = proj / "big.py"
    big.write_text("".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(150)))
    s = Session(daemon_env, proj)
    first = s.read(big)
    assert "def f149" in first
    stub = s.read(big)
    assert stub.startswith("[unchanged] big.py 450 lines") and "read it again right away" in stub
    assert "def f149" in s.read(big), "asking again right after the stub did not give the content"
    # one more line than the host would read anyway: Claude Code's own "file unchanged" note for
    # a re-read of the same range cannot stand in for the content
    assert json.loads(s.last)["hookSpecificOutput"]["updatedInput"] == {"file_path": str(big), "limit": 2001}
    assert s.read(big, offset=100, limit=20).startswith("[unchanged] big.py L100-119 of 450 lines")
    assert "def f37" in s.read(big, offset=110, limit=10), "lines just refused, asked for again, did not come"
    assert json.loads(s.last)["hookSpecificOutput"]["updatedInput"]["limit"] == 11
    assert s.read(big).startswith("[unchanged] big.py 450 lines"), "after the content came, a re-read is a stub again"
    log = data_dir / "logs" / "hooks.log"
    assert not log.exists() or "Error" not in log.read_text()


def test_switched_off_and_without_the_flag_every_read_runs(daemon_env: dict, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    f = proj / "a.py"
    f.write_text("x = 1\n" * 300)
    s = Session(daemon_env, proj)
    s.read(f)
    s.env = {**daemon_env, readgate.ENV: "0"}
    assert s.read(f).startswith("x = 1"), "LEANCTX_BUILTIN_GATE=0 still refused the read"
    s.env = daemon_env
    assert s.read(f, flags=("--read-gate",)).startswith("x = 1"), "a read gate without --builtin-read refused Read"


def test_no_daemon_no_output_and_no_daemon_started(home: Path, data_dir: Path, tmp_path: Path) -> None:
    env = subprocess_env(home, data_dir, CLAUDE_CODE_SESSION_ID="sess-1")
    proj = tmp_path / "proj"
    proj.mkdir()
    f = proj / "a.py"
    f.write_text("x = 1\n" * 300)
    s = Session(env, proj)
    assert s.read(f).startswith("x = 1") and s.read(f).startswith("x = 1")
    assert not (data_dir / "leanctx.sock").exists(), "the hook started a daemon"


def test_the_hook_speaks_the_daemons_socket_name_and_protocol() -> None:
    from leanctx.cache import client

    assert readgate.SOCKET_NAME == client.SOCKET_NAME and readgate.PROTOCOL == client.PROTOCOL


def test_a_subagent_gets_no_stub_for_its_parents_read_but_keeps_its_own(daemon_env: dict, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    f = proj / "a.py"
    f.write_text("".join(f"value_{i} = {i}\n" for i in range(400)))
    s = Session(daemon_env, proj)
    assert s.read(f).startswith("value_0")
    assert s.read(f, agent_id="agent-7").startswith("value_0"), "a subagent got a stub for what only its parent read"
    assert s.read(f, agent_id="agent-7").startswith("[unchanged] a.py 400 lines"), "the subagent lost its own stub"
    assert s.read(f).startswith("[unchanged] a.py 400 lines"), "the parent lost its stub while its subagent ran"


def test_the_daemon_serves_the_gate_only_to_a_verified_caller_and_checks_what_it_is_handed(tmp_path: Path) -> None:
    """The ops are answered only for a caller the kernel names (never from the request's facts),
    and a credit needs the delivered text as a string."""
    from leanctx.cache import client
    from leanctx.cache.service import CacheCore, Daemon

    daemon = Daemon(str(tmp_path))
    daemon.core = CacheCore(str(tmp_path), None)
    conn = {"connection_id": "hook-1", "env": {"CLAUDE_CODE_SESSION_ID": "s1"}, "host_pid": os.getpid(),
            "host_start_ticks": 1, "cwd": str(tmp_path)}

    def answer(op: str, args: dict) -> dict:
        line = json.dumps({"v": client.PROTOCOL, "op": op, "conn": conn, "args": args}).encode() + b"\n"
        return json.loads(daemon.handle_line(line, None)[0])

    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    assert answer("gate", {"path": str(f), "start_line": 1, "end_line": 2000})["code"] == "unverified"
    assert answer("credit", {"path": str(f), "start_line": 1, "end_line": 1, "content": "x = 1\n"})["code"] == "unverified"
    assert answer("credit", {"path": str(f), "start_line": 1, "end_line": 1, "content": 5})["code"] == "bad_request"
    assert answer("gate", {"path": "", "start_line": 1})["code"] == "bad_request"


def test_shell_reads_share_one_ledger_with_read_and_a_stub_never_traps_the_model(daemon_env: dict, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    f = proj / "mod.py"
    f.write_text("".join(f"def g{i}():\n    return {i}\n" for i in range(200)))
    s = Session(daemon_env, proj)
    assert "def g199" in s.bash("cat mod.py")
    stub = s.bash("cat mod.py")
    assert stub.startswith("[unchanged] mod.py 400 lines") and "run the same command again right away" in stub
    assert "def g199" in s.bash("cat mod.py"), "running the command again right after its stub gave no output"
    assert s.bash("sed -n '10,30p' mod.py").startswith("[unchanged] mod.py L10-30 of 400 lines")
    assert s.bash("tail -n 50 mod.py").startswith("[unchanged] mod.py L351-400 of 400 lines")
    assert s.read(f).startswith("[unchanged] mod.py 400 lines"), "what cat delivered did not count for Read"
    # lines inside the window just refused, asked for by any reader: the content comes (no loop)
    assert s.bash("tail -n 50 mod.py").endswith("    return 199\n")
    # a pipe, a grep: they run, and are never credited
    assert "def g5()" in s.bash("cat mod.py | head -n 20")
    f.write_text(f.read_text().replace("return 7\n", "return 70\n"))
    diff = s.bash("cat mod.py")
    assert diff.startswith("[changed] mod.py") and "+    return 70" in diff, "an edit on disk did not give a diff"
    assert "return 70" in s.bash("cat -n mod.py")
    assert s.bash("nl -ba mod.py").startswith("[unchanged] mod.py 400 lines"), "a numbered listing was not credited"


def test_a_shell_read_the_model_did_not_see_whole_or_clean_is_not_credited(daemon_env: dict, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "a.py").write_text("".join(f"a_{i} = {i}\n" for i in range(300)))
    (proj / "blank.py").write_text("\n\n" + "".join(f"b_{i} = {i}\n" for i in range(300)))
    (proj / "huge.py").write_text("".join(f"h_{i} = '{'x' * 80}'\n" for i in range(600)))  # over Bash's 30,000 characters
    s = Session(daemon_env, proj)
    s.bash("cat a.py missing.py")  # two files, an error on stderr
    assert s.bash("cat a.py").startswith("a_0 = 0"), "a run with stderr was credited"
    s.bash("cat blank.py")
    assert s.bash("cat blank.py").startswith("\n\nb_0"), "output with leading blank lines was credited"
    s.bash("cat huge.py")
    assert s.bash("cat huge.py").startswith("h_0"), "output longer than Bash hands the model was credited"
    s.bash("cd / && cat " + str(proj / "a.py"))
    assert s.bash("cat a.py").startswith("[unchanged] a.py"), "cat a.py was credited once and is not a stub now"
