"""The hook path: under `python -I -S` the store runs on the standard library alone, and cheaply."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CYCLE = """
import sys
sys.path.insert(0, sys.argv[1])
from leanctx.state import api, validate
out = api.inbound("hello from the hook", session_id="s1", source="telegram")
api.reply("hi!", session_id="s1")
text = api.rehydrate()
assert "hello from the hook" in text and validate.use_fast()
print(out["state"]["revision"])
"""


def run_isolated(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", "-c", code, str(REPO)], env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_hook_cycle_imports_only_the_standard_library(cks_home: Path) -> None:
    env = dict(os.environ, CKS_ACTIVE_USER="alice")
    proc = run_isolated(CYCLE, env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "1"
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    top = {name.split(".")[0] for name in imported} - {"imported package"}
    assert "leanctx" in top
    # nothing third-party, and none of the stdlib modules the hook path avoids for start-up time
    assert not top & {"jsonschema", "redis", "click", "json", "re", "typing", "pathlib", "dataclasses", "copy"}, top
    stdlib = set(sys.stdlib_module_names)
    assert all(n in stdlib or n.startswith("_") for n in top - {"leanctx"}), top - stdlib
    ours = {n for n in imported if n.startswith("leanctx.state")}
    assert "leanctx.state.cli" not in ours and "leanctx.state.redisstore" not in ours


def test_what_the_hook_wrote_is_valid_for_jsonschema_and_the_cli_reads_it(cks_home: Path) -> None:
    env = dict(os.environ, CKS_ACTIVE_USER="alice")
    assert run_isolated(CYCLE, env).returncode == 0
    from leanctx.state import api
    from leanctx.state.validate import validate_jsonschema

    state = api.show(user="alice")  # this process: jsonschema validates on read
    validate_jsonschema(state)
    assert state["revision"] == 2 and state["source"] == "telegram"


def test_a_hook_cycle_on_redis_needs_no_third_party_module(redis_url: str, cks_home: Path) -> None:
    from leanctx.state.resp import Client

    Client(redis_url).call("FLUSHDB")
    env = dict(os.environ, CKS_ACTIVE_USER="alice", LEANCTX_STATE_URL=redis_url)
    proc = run_isolated(CYCLE, env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    top = {name.split(".")[0] for name in imported}
    assert "leanctx.state.redisstore" in imported and "leanctx.state.resp" in imported
    assert not top & {"redis", "jsonschema", "json", "re", "typing", "socket", "enum", "asyncio"}, top
    assert not cks_home.exists()
    assert Client(redis_url).call("EXISTS", "cks:user:alice:conversation-state") == 1
