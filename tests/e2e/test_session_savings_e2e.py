"""bench/session_savings.py in --quick mode on the real Codex CLI (offline, the fake model
server): the scripted session runs each way, every stub the model got was for bytes it held, and
the report has the host-alone column beside the others. No timing is asserted."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import session_savings

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "session_savings.py"


def test_quick_session_has_no_wrong_stub_and_the_host_alone_column(codex_cli, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEANCTX_", "CODEX_", "CLAUDE"))}
    env["TMPDIR"] = str(tmp_path)
    cp = subprocess.run([sys.executable, str(BENCH), "--hosts", "codex", "--quick", "--json", "--floor-runs", "4"],
                        capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert cp.returncode in (0, 1), cp.stderr
    (res,) = json.loads(cp.stdout)
    modes = res["modes"]
    assert {"a", "b", "d"} <= set(modes), sorted(modes)
    for mode, row in modes.items():
        assert not row["error"], (mode, row["error"])
        assert row["answered"] == row["tool_calls"] >= 10, (mode, row["calls"])
        assert row["wrong_stubs"] == 0, (mode, row["calls"])
    assert modes["a"]["stubs"] == 0 and modes["b"]["stubs"] == 0  # no ctx_read call, no gate: no stub
    assert modes["d"]["stubs"] >= 3, modes["d"]["calls"]  # the checker had stubs to check
    assert modes["d"]["result_tokens"] < modes["a"]["result_tokens"]
    assert modes["b"]["overhead_tools_per_request"] > 0  # our tool definitions, measured from the requests
    table = session_savings.host_table(res)
    assert "(a) host alone" in table.splitlines()[1]
    summary = session_savings.summary_table([res])
    assert "| host | host alone |" in summary
    assert cp.returncode == (1 if session_savings.check(res) else 0)
