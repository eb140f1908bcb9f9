"""End to end: `leanctx init --agent codex`, then the real Codex CLI (`codex exec`) offline.

Codex talks to tests/e2e/fake_openai.py on 127.0.0.1 and runs in a temp HOME (CODEX_HOME =
HOME/.codex); leanctx's data dir (LEANCTX_HOME) is inside that HOME.  What the host really sent is
taken from Codex itself: the "session id:" banner on stderr, the rollout file it writes under
~/.codex/sessions, its "hook: <Event> Completed" progress lines, and the process tree (an MCP
server it spawns records its parent).
"""
from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.e2e import hostcli
from tests.e2e.conftest import CLI_TIMEOUT, missing, netns_prefix
from tests.e2e.fake_openai import FakeOpenAI, shell_call

pytestmark = pytest.mark.e2e

HOOK_PROBLEMS = re.compile(r"failed to parse hooks|hooks\.json|hook: \w+ Failed|clamping", re.I)


def users_config(base_url: str, probe_argv: list) -> str:
    """A hand-written config.toml: comments everywhere, the fake provider, unrelated user tables."""
    command, *args = probe_argv
    args_toml = ", ".join(json.dumps(a) for a in args)
    return f"""\
# ~/.codex/config.toml -- written by hand, please keep my comments.
#   (leanctx must never rewrite this file just to wire its hooks)

model = "gpt-5"                   # the model I use
model_provider = "leanctx_fake"   # see [model_providers.leanctx_fake] below
check_for_update_on_startup = false

# No telemetry, please.
[analytics]
enabled = false   # really

# --- my provider ---------------------------------------------------------------------------
[model_providers.leanctx_fake]
name = "leanctx fake"
base_url = "{base_url}"   # local only
env_key = "{hostcli.FAKE_OPENAI_KEY_ENV}"
wire_api = "responses"
request_max_retries = 0   # fail fast
stream_max_retries = 0

# --- a profile I switch to sometimes -------------------------------------------------------
[profiles.work]
model = "gpt-5"   # same model, different day
model_provider = "leanctx_fake"

# my MCP server (a probe that records which process started it)
[mcp_servers.probe]
command = {json.dumps(command)}
args = [{args_toml}]   # inline comment on an array
startup_timeout_sec = 20
tool_timeout_sec = 60

[mcp_servers.probe.env]
FOO = "bar"   # secret-ish

# trailing comment at the end of the file
"""


def rollout_files(hh) -> list:
    return sorted((hh.codex_home / "sessions").rglob("rollout-*.jsonl"))


def banner_session_id(stderr: str) -> str:
    m = re.search(r"^session id: (\S+)$", stderr, re.M)
    assert m, f"no session id banner on stderr:\n{stderr}"
    return m.group(1)


def codex_exec(run_host, cli, hh, prompt, *, bypass=True, env_extra=None):
    argv = [cli, "exec", "--skip-git-repo-check"] + (["--dangerously-bypass-hook-trust"] if bypass else []) + [prompt]
    cp, pid = run_host(argv, cwd=hh.proj, env=hostcli.codex_env(hh.home, env_extra))
    assert cp.returncode == 0, f"codex exec -> {cp.returncode}\n{cp.stderr}"
    return cp, pid


def test_exec_with_bypass_publishes_session_and_leaves_config_alone(codex_cli, host_home, lean, mcp_probe, run_host):
    hh = host_home
    config = hh.codex_home / "config.toml"
    hooks_json = hh.codex_home / "hooks.json"
    with FakeOpenAI(script=[shell_call("cat a.txt"), "The file says hello."]) as srv:
        original = users_config(srv.base_url, mcp_probe.argv).encode()
        config.write_bytes(original)
        assert not hooks_json.exists()

        lean.run("init", "--agent", "codex")
        registered = config.read_bytes()
        # init adds only its MCP server table: every byte (and comment) of the user's file stays
        assert registered.startswith(original), "init changed the user's config.toml"
        assert b"[mcp_servers.leanctx]" in registered[len(original):]
        assert hooks_json.exists()

        cp, node_pid = codex_exec(run_host, codex_cli, hh, "read a.txt", env_extra=lean.host_env)
        assert cp.stdout.strip() == "The file says hello."
        assert "hello world file" in srv.all_text(), "the scripted shell call did not run"
        bodies = srv.all_text()
        assert "leanctx-hook" not in bodies and str(lean.data) not in bodies, "hook output reached the model"

    # Codex parsed our hooks.json and ran our hooks (they are the only hooks configured).
    for event in ("SessionStart", "UserPromptSubmit", "Stop"):
        assert f"hook: {event} Completed" in cp.stderr, f"{event} did not run:\n{cp.stderr}"
    problems = [line for line in cp.stderr.splitlines() if HOOK_PROBLEMS.search(line)]
    assert not problems, "Codex complained about our hooks:\n" + "\n".join(problems)

    # What the host really sent: the banner and the rollout file name carry the session id.
    session_id = banner_session_id(cp.stderr)
    rollouts = rollout_files(hh)
    assert len(rollouts) == 1 and rollouts[0].name.endswith(f"-{session_id}.jsonl"), rollouts

    lean.assert_no_hook_errors()
    rec = lean.only_record("codex")
    assert rec["agent"] == "codex"
    assert rec["session_id"] == session_id and rec["conversation_id"] == session_id
    assert rec["transcript_path"] == str(rollouts[0])
    assert rec["cwd"] == str(hh.proj)
    assert rec["source"] == "startup"
    assert rec["turn_id"]
    assert rec["stopped_at"], "Stop was not published"
    assert rec["last_event"] == "SessionEnd" and rec["ended_at"]
    # The host is the native codex binary (a child of the node launcher we started), and it is the
    # same process that spawned the MCP server.
    host = rec["host"]
    assert host["name"] == "codex"
    assert host["pid"] != node_pid
    probes = mcp_probe.starts()
    assert probes, "Codex did not start the MCP server"
    assert {(p["parent"]["pid"], p["parent"]["start_ticks"]) for p in probes} == {(host["pid"], host["start_ticks"])}
    assert {p["parent"]["ppid"] for p in probes} == {node_pid}

    slot = lean.active_transcript
    assert slot["agent"] == "codex" and slot["session_id"] == session_id
    assert slot["transcript_path"] == str(rollouts[0])

    # Codex's own tools still work with our hooks.json in place, and nobody rewrote config.toml.
    env = hostcli.codex_env(hh.home)
    mcp = subprocess.run([codex_cli, "mcp", "list", "--json"], cwd=hh.proj, env=env, capture_output=True,
                         text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
    assert mcp.returncode == 0, mcp.stderr
    servers = {s["name"]: s for s in json.loads(mcp.stdout)}
    assert servers["probe"]["enabled"] is True
    assert servers["probe"]["transport"]["env"] == {"FOO": "bar"}
    assert servers["leanctx"]["enabled"] is True, "codex mcp list does not show leanctx after init"
    assert servers["leanctx"]["transport"]["args"] == ["mcp"]
    assert not [line for line in mcp.stderr.splitlines() if HOOK_PROBLEMS.search(line)], mcp.stderr
    assert config.read_bytes() == registered, "config.toml changed"
    lean.run("uninstall", "--agent", "codex")
    assert config.read_bytes() == original, "uninstall did not give config.toml back byte for byte"


def test_codex_doctor_does_not_flag_our_hooks(codex_cli, host_home, lean):
    """`codex doctor` probes the internet (latest version, provider): run it with no network at all."""
    prefix = netns_prefix()
    if prefix is None:
        missing("cannot isolate `codex doctor` from the network (unshare -n / -rn unavailable)")
    hh = host_home
    hostcli.write_codex_config(hh.home, "http://127.0.0.1:9/v1",
                               tables="# a user table with a comment\n[profiles.work]\nmodel = \"gpt-5\"  # same\n")
    original = (hh.codex_home / "config.toml").read_bytes()
    lean.run("init", "--agent", "codex")
    registered = (hh.codex_home / "config.toml").read_bytes()
    assert registered.startswith(original)
    cp = subprocess.run(prefix + [codex_cli, "doctor", "--json"], cwd=hh.proj, env=hostcli.codex_env(hh.home),
                        capture_output=True, text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
    try:
        report = json.loads(cp.stdout)
    except ValueError:
        raise AssertionError(f"codex doctor --json printed no JSON (rc {cp.returncode}):\n{cp.stdout}\n{cp.stderr}")
    # It does run: it loaded the config (and fails only on the unreachable provider / update probe).
    assert report["checks"]["config.load"]["status"] == "ok", report["checks"]["config.load"]
    for cid, check in report["checks"].items():
        if check.get("status") != "ok":
            text = json.dumps(check)
            assert "hook" not in text.lower(), f"codex doctor complains about hooks in {cid}: {text}"
    bad = [line for line in cp.stderr.splitlines() if HOOK_PROBLEMS.search(line)]
    assert not bad, "codex doctor warns about our hooks:\n" + "\n".join(bad)
    mcp_check = report["checks"].get("mcp.config")
    assert mcp_check is None or mcp_check["status"] == "ok", f"codex doctor rejects our MCP entry: {mcp_check}"
    assert (hh.codex_home / "config.toml").read_bytes() == registered


def test_untrusted_hooks_do_not_run_without_bypass(codex_cli, host_home, lean, run_host):
    hh = host_home
    with FakeOpenAI(script=["hello without hooks"]) as srv:
        hostcli.write_codex_config(hh.home, srv.base_url)
        lean.run("init", "--agent", "codex")
        cp, _ = codex_exec(run_host, codex_cli, hh, "hi", bypass=False, env_extra=lean.host_env)
        assert cp.stdout.strip() == "hello without hooks"
    assert banner_session_id(cp.stderr)
    assert "hook:" not in cp.stderr, cp.stderr
    # Codex skipped every one of our hooks without a word: nothing was published.
    assert lean.records("codex") == {}
    assert lean.active_transcript is None
    lean.assert_no_hook_errors()
    # ... which is exactly why leanctx doctor has to say so.
    rc, report = lean.doctor("codex")
    assert rc != 0 and report["ok"] is False
    checks = report["agents"][0]["checks"]
    trust = [c for c in checks if "trust" in (c["name"] + " " + c["detail"]).lower() and c["status"] == "fail"]
    assert trust, "doctor did not report the untrusted hooks:\n" + json.dumps(checks, indent=2)
    assert trust[0]["fix"]


def test_uninstall_removes_the_hooks_file_init_created(codex_cli, host_home, lean, run_host):
    hh = host_home
    hooks_json = hh.codex_home / "hooks.json"
    with FakeOpenAI(script=["with hooks", "after uninstall"]) as srv:
        hostcli.write_codex_config(hh.home, srv.base_url,
                                   top_level="# my own comment\napproval_policy = \"never\"  # inline")
        config = hh.codex_home / "config.toml"
        original = config.read_bytes()
        assert not hooks_json.exists()
        lean.run("init", "--agent", "codex")
        assert hooks_json.exists()
        codex_exec(run_host, codex_cli, hh, "hi", env_extra=lean.host_env)
        assert len(lean.records("codex")) == 1

        lean.run("uninstall", "--agent", "codex")
        assert not hooks_json.exists(), "init created hooks.json, uninstall must remove it"
        assert hh.codex_home.is_dir(), "~/.codex existed before init and must stay"
        assert config.read_bytes() == original
        assert not lean.wrapper.exists()

        state = lean.state()
        cp, _ = codex_exec(run_host, codex_cli, hh, "hi again", env_extra=lean.host_env)
        assert cp.stdout.strip() == "after uninstall"
    assert "hook:" not in cp.stderr, cp.stderr
    assert lean.state() == state, "leanctx published something after uninstall"
    assert config.read_bytes() == original
    lean.assert_no_hook_errors()


def test_a_config_toml_with_a_byte_order_mark_is_edited_and_keeps_it(codex_cli, host_home, lean, run_host):
    """Codex 0.171 reads a config.toml that starts with a UTF-8 BOM: init edits it (MCP entry and
    hook trust), the mark stays, Codex lists both servers and runs our trusted hooks, and
    uninstall gives the bytes back."""
    hh = host_home
    env = hostcli.codex_env(hh.home)

    def servers() -> dict:
        cp = subprocess.run([codex_cli, "mcp", "list", "--json"], cwd=hh.proj, env=env, capture_output=True,
                            text=True, timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)
        assert cp.returncode == 0, cp.stderr
        return {s["name"]: s for s in json.loads(cp.stdout)}

    with FakeOpenAI(script=["with hooks"]) as srv:
        config = hostcli.write_codex_config(hh.home, srv.base_url)
        config.write_bytes(b"\xef\xbb\xbf" + config.read_bytes() + b'\n[mcp_servers.docs]\ncommand = "docs-mcp"\n')
        original = config.read_bytes()
        assert set(servers()) == {"docs"}  # Codex itself reads the file with its mark
        lean.run("init", "--agent", "codex", "--trust")
        text = config.read_bytes()
        assert text.startswith(b"\xef\xbb\xbf") and text.count(b"\xef\xbb\xbf") == 1
        listed = servers()
        assert set(listed) == {"docs", "leanctx"} and listed["leanctx"]["enabled"] is True
        cp, _ = codex_exec(run_host, codex_cli, hh, "hi", bypass=False, env_extra=lean.host_env)
        assert cp.stdout.strip() == "with hooks"
    assert len(lean.records("codex")) == 1  # the trust written into the marked file is the one Codex reads
    lean.run("uninstall", "--agent", "codex")
    assert config.read_bytes() == original
