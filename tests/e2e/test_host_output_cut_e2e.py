"""Every host cuts a long tool result before its model sees it; a re-read of such a file must be
content, never the `[unchanged]` stub (leanctx/cache/hostcaps.py).

One run per host, offline against the fake model, with the real CLI: the model reads one file
past the host's limit twice. The first answer reaches the model cut (the host keeps a part, or
saves it to a file and shows a preview: asserted, so a host that stops cutting shows up here),
and the second is content again.
"""
from __future__ import annotations

import json
import subprocess

import pytest

from leanctx.cache import hostcaps
from tests.e2e import test_cline_e2e as cline
from tests.e2e import test_codebuddy_e2e as codebuddy
from tests.e2e import test_droid_e2e as droid
from tests.e2e.conftest import codebuddy_cli, codex_cli, droid_cli  # noqa: F401 - fixtures
from tests.e2e.fake_gemini_chat import call
from tests.e2e.fake_openai import FakeOpenAI, chat_results, function_call
from tests.e2e.settings_home import wire
from tests.e2e.test_cline_e2e import cline_cli, cline_home  # noqa: F401 - fixtures
from tests.e2e.test_codex_cache_e2e import codex_wired, exec_codex, outputs_by_call, read_call  # noqa: F401
from tests.e2e.test_copilot_e2e import copilot_cli, copilot_home, run_copilot  # noqa: F401 - fixtures
from tests.e2e.test_copilot_e2e import read_call as copilot_read
from tests.e2e.test_gemini_e2e import READ as GEMINI_READ
from tests.e2e.test_gemini_e2e import USER_SETTINGS as GEMINI_SETTINGS
from tests.e2e.test_gemini_e2e import gemini_cli, run_gemini  # noqa: F401
from tests.e2e.test_opencode_e2e import READ as OPENCODE_READ
from tests.e2e.test_opencode_e2e import USER_CONFIG as OPENCODE_CONFIG
from tests.e2e.test_opencode_e2e import opencode_cli, run_opencode  # noqa: F401
from tests.e2e.test_qwen_e2e import READ as QWEN_READ
from tests.e2e.test_qwen_e2e import SEARCH as QWEN_SEARCH
from tests.e2e.test_qwen_e2e import USER_SETTINGS as QWEN_SETTINGS
from tests.e2e.test_qwen_e2e import qwen_cli, run_qwen  # noqa: F401

pytestmark = pytest.mark.e2e


def long_file(hh, agent: str, times: float = 1.5) -> str:
    """A file past `agent`'s limit: `times` its characters (and its lines), as `long.txt`."""
    chars, lines = hostcaps.limit(agent)
    n = int(max(chars * times / 25, (lines or 0) * times))
    text = "".join(f"line {i:06d} " + "y" * 11 + "\n" for i in range(n))
    (hh.proj / "long.txt").write_text(text)
    return text


def check(text: str, first: str, second: str) -> None:
    assert text not in first, "the host handed the whole file over"
    assert "[unchanged]" not in second, second[:300]  # content again (cut again by the host)


def test_codex_cuts_a_long_answer_and_the_re_read_is_content(codex_cli, codex_wired, lean, run_host):
    text = long_file(codex_wired, "codex")
    first, second = read_call("long.txt"), read_call("long.txt")
    _, bodies, _ = exec_codex(codex_cli, codex_wired, lean, run_host, [first, second, "done"], prompt="read long.txt")
    out = outputs_by_call(bodies)
    check(text, out[first["call_id"]], out[second["call_id"]])


def test_copilot_cuts_a_long_answer_and_the_re_read_is_content(copilot_cli, copilot_home, lean, run_host):
    text = long_file(copilot_home, "copilot")
    lean.run("init", "--agent", "copilot")
    first, second = copilot_read("long.txt"), copilot_read("long.txt")
    _, bodies, _ = run_copilot(copilot_cli, copilot_home, run_host, [first, second, "done"], prompt="read long.txt")
    out = outputs_by_call(bodies)
    assert out[first["call_id"]].startswith("Output too large to read at once"), out[first["call_id"]][:300]
    check(text, out[first["call_id"]], out[second["call_id"]])


def test_gemini_cuts_a_long_answer_and_the_re_read_is_content(gemini_cli, host_home, lean, run_host):
    text = long_file(host_home, "gemini")
    wire(host_home, lean, "gemini", GEMINI_SETTINGS)
    _, results = run_gemini(gemini_cli, host_home, lean, run_host,
                            [call(GEMINI_READ, {"path": "long.txt"}), call(GEMINI_READ, {"path": "long.txt"}), "done"],
                            prompt="read long.txt")
    assert results[0][1].startswith("Output too large."), results[0][1][:300]
    check(text, results[0][1], results[1][1])


def test_qwen_cuts_a_long_answer_and_the_re_read_is_content(qwen_cli, host_home, lean, run_host):
    text = long_file(host_home, "qwen")
    wire(host_home, lean, "qwen", QWEN_SETTINGS)
    first, second = call(QWEN_READ, {"path": "long.txt"}), call(QWEN_READ, {"path": "long.txt"})
    _, results = run_qwen(qwen_cli, host_home, lean, run_host, [QWEN_SEARCH, first, second, "done"], prompt="read long.txt")
    assert results[first["id"]].startswith("Tool output was too large"), results[first["id"]][:300]
    check(text, results[first["id"]], results[second["id"]])


def test_codebuddy_cuts_a_long_answer_and_the_re_read_is_content(codebuddy_cli, host_home, lean, run_host):
    text = long_file(host_home, "codebuddy", 2.5)  # seen whole at 60,000 characters, cut at 100,000
    cb = host_home.home / ".codebuddy"
    cb.mkdir()
    (cb / "settings.json").write_text(json.dumps({"model": "default-model"}))
    lean.run("init", "--agent", "codebuddy")
    first, second = codebuddy.deferred_read("long.txt"), codebuddy.deferred_read("long.txt")
    with codebuddy.FakeChat(script=[first, second, "done"]) as srv:
        codebuddy.run(codebuddy_cli, host_home, srv, run_host, prompt="read long.txt")
        out = srv.tool_results()
    check(text, out[first["id"]], out[second["id"]])


def test_droid_cuts_a_long_answer_and_the_re_read_is_content(droid_cli, host_home, lean, run_host):
    text = long_file(host_home, "droid")
    first, second = (droid.tool_call(droid.READ, {"path": "long.txt"}) for _ in range(2))
    with droid.FakeChat(script=[droid.WhenLoaded([first, second, "done"])] * 30) as srv:
        factory = host_home.home / ".factory"
        factory.mkdir()
        (factory / "settings.json").write_text(json.dumps(droid.byok_settings(srv.base_url), indent=4))
        lean.run("init", "--agent", "droid")
        droid.run(droid_cli, host_home, run_host, prompt="read long.txt")
        out = srv.tool_results()
    check(text, out[first["id"]], out[second["id"]])


def test_cline_cuts_a_long_answer_and_the_re_read_is_content(cline_cli, cline_home, lean, run_host):
    hh = cline_home
    text = long_file(hh, "cline")
    first, second = (function_call(cline.READ, {"path": "long.txt"}) for _ in range(2))
    turns = cline.WhenOffered([first, second, "done"])
    with FakeOpenAI(script=[turns] * 12, model="fake-model") as srv:
        auth = subprocess.run([cline_cli, "auth", "-p", "openai", "-k", "sk-fake", "-b", srv.base_url, "-m", "fake-model"],
                              env=cline.cline_env(hh, lean), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert auth.returncode == 0, auth.stderr
        tap_log = cline.install_tap(hh)
        lean.run("init", "--agent", "cline")
        cline.run_offered(cline_cli, hh, lean, run_host, "read long.txt", turns, tap_log)
        out = chat_results(srv)
    assert len(out[first["call_id"]]) <= 8000, len(out[first["call_id"]])  # the result's JSON, cut
    check(text, out[first["call_id"]], out[second["call_id"]])


def test_opencode_cuts_a_long_answer_and_the_re_read_is_content(opencode_cli, host_home, lean, run_host):
    hh = host_home
    text = long_file(hh, "opencode")
    first, second = function_call(OPENCODE_READ, {"path": "long.txt"}), function_call(OPENCODE_READ, {"path": "long.txt"})
    config_dir = hh.home / ".config" / "opencode"
    config_dir.mkdir(parents=True)
    with FakeOpenAI(script=[first, second, "done"], model="fake-model") as srv:
        (config_dir / "opencode.json").write_text(OPENCODE_CONFIG.replace("@URL@", srv.base_url))
        lean.run("init", "--agent", "opencode")
        run_opencode(opencode_cli, hh, lean, run_host, "read long.txt twice")
        out = chat_results(srv)
    assert "The tool call succeeded but the output was truncated." in out[first["call_id"]], out[first["call_id"]][-500:]
    check(text, out[first["call_id"]], out[second["call_id"]])
