"""End to end: Codex CLI's shell reads under the read cache's rules, on the real CLI (0.171.0).

`leanctx init --agent codex --trust` wires the read gate's pre-tool entry for Codex's shell tool
too (`Bash` in its hooks), and a post-tool entry that credits what a plain read (`cat F`,
`sed -n 'A,Bp' F`, ...) printed. The scripted model uses only Codex's own tools (`exec_command`,
`apply_patch`); what it receives is read back from the requests the fake model server gets.

The model is `gpt-5.5`, one Codex knows (its bundled metadata): Codex then offers `apply_patch`
as well as `exec_command` (for a model it does not know, `gpt-5`, it offers no edit tool).
`--sandbox workspace-write` lets apply_patch write into the project.

Codex hands a PreToolUse refusal's reason to the model as the call's output, as
"Command blocked by PreToolUse hook: <reason>. Command: <the command>" (0.171.0, verified).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.e2e import hostcli
from tests.e2e.fake_openai import FakeOpenAI, function_call, is_subagent

pytestmark = pytest.mark.e2e

MODEL = "gpt-5.5"
LINES = 600
BLOCKED = "Command blocked by PreToolUse hook: "


def source(n: int = 200, tag: str = "") -> str:
    return "".join(f"def function_{i}(x):\n    return x * {i}{tag}\n\n" for i in range(n))


def shell(cmd: str, **args) -> dict:
    return function_call("exec_command", {"cmd": cmd, **args})


def patch(path: str, old: str, new: str) -> dict:
    text = f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"
    return {"type": "custom_tool_call", "name": "apply_patch", "input": text, "call_id": f"call_patch_{old}_{new}".replace(" ", "_")}


def outputs(bodies: list) -> dict:
    """call_id -> the output text Codex sent the model for it (last seen wins)."""
    found: dict = {}
    for body in bodies:
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output"):
                out = item.get("output")
                found[item["call_id"]] = out if isinstance(out, str) else json.dumps(out)
    return found


def got(out: dict, call: dict) -> str:
    """What the model received for a call: the refusal's reason (without what Codex puts around
    it), or the command's output (without the exec header), or apply_patch's report."""
    text = out[call["call_id"]]
    if text.startswith(BLOCKED):
        cmd = json.loads(call["arguments"])["cmd"]
        assert text.endswith(f". Command: {cmd}"), text[-200:]
        return text[len(BLOCKED):-len(f". Command: {cmd}")]
    if text.startswith("Chunk ID: "):
        head, sep, body = text.partition("\nOutput:\n")
        assert sep and "Process exited with code 0" in head, text[:300]
        return body
    return text


def is_content(text: str) -> bool:
    return "def function_199" in text and not text.startswith("[")


@pytest.fixture
def wired(host_home, lean):
    (host_home.proj / "big.py").write_text(source())
    return host_home


def run(codex_cli, hh, lean, run_host, script, *, top_level: str = "", server=None) -> list:
    with FakeOpenAI(script=script) as srv:
        if server is not None:
            server["srv"] = srv
        hostcli.write_codex_config(hh.home, srv.base_url, model=MODEL, top_level=top_level)
        if not (hh.codex_home / "hooks.json").exists():
            lean.run("init", "--agent", "codex", "--trust")
            # the daemon up before the fake model's instant first call (the MCP server starts it too)
            lean.run("serve", "--detach")
        cp, _ = run_host([codex_cli, "exec", "--skip-git-repo-check", "--sandbox", "workspace-write", "work on big.py"],
                         cwd=hh.proj, env=hostcli.codex_env(hh.home, lean.host_env))
        assert cp.returncode == 0, cp.stderr
        assert "hook: PreToolUse Failed" not in cp.stderr and "hook: PostToolUse Failed" not in cp.stderr, cp.stderr
        return srv.main_requests


def stop_daemon(lean) -> None:  # noqa: ANN001
    subprocess.run([sys.executable, "-m", "leanctx", "stop"], env=lean.env(), capture_output=True, timeout=60)


def test_shell_only_model_stub_edit_right_after_ask_again_changes_and_a_new_session(codex_cli, wired, lean, run_host):
    hh = wired
    big = hh.proj / "big.py"

    def change_by_another_program(body):  # noqa: ANN001 - the fake model's callable script item
        big.write_text(big.read_text().replace("return x * 9\n", "return x * 9 + 0\n"))
        return calls["changed"]

    calls = {
        "first": shell("cat big.py"),
        "stub": shell("cat big.py"),
        "diff": shell("cat big.py"),
        "again": shell("cat big.py"),
        "range": shell("sed -n '100,129p' big.py"),
        "range_again": shell("sed -n '100,129p' big.py"),
        "abs": shell(f"cat {big}"),
        "changed": shell("cat big.py"),
        "after_change": shell("cat big.py"),
        "numbered": shell("cat -n big.py"),
    }
    edit = patch("big.py", "    return x * 7", "    return x * 70")
    script = [
        calls["first"],                # content
        calls["stub"],                 # unchanged: the stub
        edit,                          # apply_patch right after the refusal
        calls["diff"],                 # after the model's own edit: a diff, never [unchanged]
        calls["again"],                # asked again right after: the content
        calls["range"],                # a held range: its stub
        calls["range_again"],          # asked again right after the stub: the content
        calls["abs"],                  # the same file by its absolute path: the stub
        change_by_another_program,     # changed by another program: never [unchanged]
        calls["after_change"],         # asked again right after: the content
        calls["numbered"],             # `cat -n` of a held file
        "done",
    ]
    try:
        bodies = run(codex_cli, hh, lean, run_host, script)
        out = outputs(bodies)
        assert is_content(got(out, calls["first"])) and got(out, calls["first"]) == source()
        stub = got(out, calls["stub"])
        assert stub.startswith(f"[unchanged] big.py {LINES} lines") and "run the same command again" in stub, stub[:300]
        assert "\n" not in stub  # one line: nothing for Codex's ". Command: …" to run into
        assert "Success" in got(out, edit), "apply_patch right after a refused re-read failed"
        diff = got(out, calls["diff"])
        assert diff.startswith("[changed] big.py") and "+    return x * 70" in diff, diff[:400]
        assert diff.endswith("\n[end]"), "Codex's '. Command: …' glued onto the diff's last line"
        again = got(out, calls["again"])
        assert is_content(again) and "x * 70\n" in again, "asking again right after a diff gave no content"
        assert got(out, calls["range"]).startswith(f"[unchanged] big.py L100-129 of {LINES} lines"), got(out, calls["range"])[:200]
        range_again = got(out, calls["range_again"])
        assert range_again.startswith("def function_33(x):") and range_again.count("\n") == 30, range_again[:200]
        assert got(out, calls["abs"]).startswith(f"[unchanged] big.py {LINES} lines"), got(out, calls["abs"])[:200]
        changed = got(out, calls["changed"])
        assert changed.startswith("[changed] big.py") and "+    return x * 9 + 0" in changed, changed[:300]
        after = got(out, calls["after_change"])
        assert is_content(after) and "x * 9 + 0\n" in after
        numbered = got(out, calls["numbered"])
        assert numbered.startswith(f"[unchanged] big.py {LINES} lines"), numbered[:200]  # same lines, numbered
        lean.assert_no_hook_errors()
        notes = lean.only_record("codex")["read_calls"]
        assert {c["call_id"] for c in calls.values()} <= set(notes), sorted(notes)
        # `leanctx stats` counts them as the shell's: 4 stubs (cat, sed -n, the absolute path,
        # cat -n) and 2 diffs; nothing went through ctx_read; one context
        st = json.loads(lean.run("stats", "--json").stdout)
        shell_stats = st["by_reader"]["shell"]
        assert (shell_stats["stubs"], shell_stats["diffs"]) == (4, 2) and "ctx_read" not in st["by_reader"], st["by_reader"]
        assert st["contexts"] == 1 and st["by_agent"]["codex"]["contexts"] == 1, st

        # a new `codex exec` is a new session: content again
        fresh = shell("cat big.py")
        out = outputs(run(codex_cli, hh, lean, run_host, [fresh, "done"]))
        assert is_content(got(out, fresh)), got(out, fresh)[:200]
        lean.assert_no_hook_errors()
    finally:
        stop_daemon(lean)


def test_after_codex_compacts_the_shell_read_is_content(codex_cli, wired, lean, run_host):
    """Codex compacts on its own when a response reports usage over its limit; what the shell
    printed before is summarised away, so the next read is content, not a stub."""
    hh = wired
    reads = [shell("cat big.py") for _ in range(4)]
    server: dict = {}

    def reporting(usage, item):  # noqa: ANN001, ANN202
        def build(body):  # noqa: ANN001, ANN202
            server["srv"].usage = usage
            return item
        return build

    over = {"input_tokens": 50000, "total_tokens": 50005}
    script = [reporting(None, reads[0]), reporting(None, reads[1]), reporting(over, reads[2]),
              reporting(None, reads[3]), reporting(None, "done")]
    try:
        bodies = run(codex_cli, hh, lean, run_host, script, top_level="model_auto_compact_token_limit = 20000", server=server)
        out = outputs(bodies)
        assert is_content(got(out, reads[0])) and got(out, reads[1]).startswith("[unchanged] big.py")
        rollouts = list((hh.codex_home / "sessions").rglob("rollout-*.jsonl"))
        assert any('"type":"compacted"' in p.read_text().replace(" ", "") for p in rollouts), "Codex did not compact"
        assert is_content(got(out, reads[3])), "a stub was served after Codex compacted the context"
        lean.assert_no_hook_errors()
    finally:
        stop_daemon(lean)


def test_doctor_checks_the_shell_entry_and_uninstall_gives_the_config_back(codex_cli, host_home, lean):
    hh = host_home
    config = hostcli.write_codex_config(hh.home, "http://127.0.0.1:9/v1",
                                        top_level="# my own comment\napproval_policy = \"never\"  # inline")
    original = config.read_bytes()
    lean.run("init", "--agent", "codex", "--trust")
    hooks = json.loads((hh.codex_home / "hooks.json").read_text())["hooks"]
    pre = [g for g in hooks["PreToolUse"] if "--builtin-read" in json.dumps(g)]
    post = [g for g in hooks.get("PostToolUse", []) if "--builtin-read" in json.dumps(g)]
    assert len(pre) == 1 and "Bash" in pre[0]["matcher"].split("|"), hooks["PreToolUse"]
    assert len(post) == 1 and post[0]["matcher"] == "Bash", hooks.get("PostToolUse")
    rc, report = lean.doctor("codex")
    checks = report["agents"][0]["checks"]
    gate = [c for c in checks if c["name"] == "built-in reader gate"]
    assert gate and "Bash gated like ctx_read" in gate[0]["detail"], json.dumps(checks, indent=1)
    wired = [c for c in checks if "PostToolUse" in c["name"] or "PreToolUse" in c["name"]]
    assert wired and all(c["status"] == "ok" for c in wired), json.dumps(checks, indent=1)
    # an entry removed by hand is reported
    doc = json.loads((hh.codex_home / "hooks.json").read_text())
    doc["hooks"]["PostToolUse"] = [g for g in doc["hooks"]["PostToolUse"] if "--builtin-read" not in json.dumps(g)]
    (hh.codex_home / "hooks.json").write_text(json.dumps(doc, indent=2) + "\n")
    rc, report = lean.doctor("codex")
    bad = [c for c in report["agents"][0]["checks"] if "PostToolUse" in c["name"] and c["status"] == "fail"]
    assert rc != 0 and bad, json.dumps(report["agents"][0]["checks"], indent=1)
    lean.run("init", "--agent", "codex", "--trust")  # puts it back
    lean.run("uninstall", "--agent", "codex")
    assert config.read_bytes() == original, "uninstall did not give config.toml back byte for byte"
    assert not (hh.codex_home / "hooks.json").exists()


def test_a_subagent_gets_no_stub_for_its_parents_shell_read_but_keeps_its_own(codex_cli, wired, lean, run_host):
    """`multi_agent_v1.spawn_agent` (offered to gpt-5, a model Codex has no metadata for): the
    subagent's shell calls carry its agent id in the hooks and land in its own rollout; what only
    its parent read is content for it, what it read itself is its stub, and the parent keeps its own."""
    hh = wired
    p_first, p_last = shell("cat big.py"), shell("cat big.py")
    s_first, s_second = shell("cat big.py"), shell("cat big.py")
    spawn = function_call("spawn_agent", {"message": "Read big.py with cat, twice."}, namespace="multi_agent_v1")
    sub_script = [s_first, s_second, "sub: done"]
    state = {"parent": 0, "sub": 0}

    def agent_id(body: dict) -> str:
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "function_call_output" and item["call_id"] == spawn["call_id"]:
                text = item["output"] if isinstance(item["output"], str) else json.dumps(item["output"])
                try:
                    data = json.loads(text)
                except ValueError:
                    return text.strip()
                return str(data.get("agent_id") or data.get("id") or data.get("target") or text)
        raise AssertionError("no spawn_agent output in the parent's request")

    def route(body: dict):  # noqa: ANN202
        if is_subagent(body):
            i = state["sub"]
            state["sub"] += 1
            return sub_script[i] if i < len(sub_script) else "sub: done"
        i = state["parent"]
        state["parent"] += 1
        if i == 0:
            return p_first
        if i == 1:
            return spawn
        if i == 2:
            return function_call("wait_agent", {"targets": [agent_id(body)], "timeout_ms": 60000}, namespace="multi_agent_v1")
        if i == 3:
            return p_last
        return "done"

    try:
        with FakeOpenAI(script=[route] * 12) as srv:
            hostcli.write_codex_config(hh.home, srv.base_url, model="gpt-5")
            lean.run("init", "--agent", "codex", "--trust")
            lean.run("serve", "--detach")
            cp, _ = run_host([codex_cli, "exec", "--skip-git-repo-check", "read big.py"], cwd=hh.proj,
                             env=hostcli.codex_env(hh.home, lean.host_env))
            assert cp.returncode == 0, cp.stderr
            out = outputs(srv.requests)
        assert state["sub"] >= 3, f"the subagent did not run its script: {state}\n{cp.stderr[-2000:]}"
        assert is_content(got(out, p_first))
        assert is_content(got(out, s_first)), "the subagent got a stub for bytes only its parent holds"
        assert got(out, s_second).startswith(f"[unchanged] big.py {LINES} lines"), got(out, s_second)[:200]
        assert got(out, p_last).startswith(f"[unchanged] big.py {LINES} lines"), got(out, p_last)[:200]
        notes = lean.only_record("codex")["read_calls"]
        assert notes[p_first["call_id"]]["agent_id"] is None and notes[s_first["call_id"]]["agent_id"], notes
        lean.assert_no_hook_errors()
    finally:
        stop_daemon(lean)
