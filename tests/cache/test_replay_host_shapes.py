"""The replay's model of the other gated hosts' readers (bench/support/hostshapes.py) gives what
the real CLIs gave in the recorded runs (tests/fixtures/payloads/<host>/builtin/), and the
per-host traces run those reads through the host modules' own parsing: gated, refused, credited."""

from __future__ import annotations

import json
import os
import tempfile
from types import SimpleNamespace

import pytest

from bench.support.hostshapes import SHAPES
from bench.support.replay import Engine, Oracle, Ours, load_trace
from tests.conftest import PAYLOADS, REPO

BIG = "".join(f"def function_{i}(x):\n    return x * {i}\n\n" for i in range(200))  # the recorded runs' big.py
SMALL = "alpha\nbeta\ngamma\n"


def recorded(host: str, name: str) -> dict:
    return json.loads((PAYLOADS / host / "builtin" / name).read_text())


def shape(agent: str, base: str):  # noqa: ANN201
    eng = SimpleNamespace(base=base, t=1_800_000_000.0, calls=0, _gemini_chat=lambda *a: "", _qwen_chat=lambda *a: "")
    return SHAPES[agent](eng)


def host() -> SimpleNamespace:
    return SimpleNamespace(state={})


def test_gemini_read_file_and_shell_answers_are_the_recorded_ones(tmp_path) -> None:  # noqa: ANN001
    s = shape("gemini", str(tmp_path))
    ranged = recorded("gemini", "0.61.0.AfterTool.read_file.3.json")
    assert s.render_builtin(host(), ranged["tool_input"], BIG, None)[0]["llmContent"] == ranged["tool_response"]["llmContent"]
    whole = recorded("gemini", "0.61.0.AfterTool.read_file.4.json")
    assert s.render_builtin(host(), whole["tool_input"], SMALL, None)[0]["llmContent"] == whole["tool_response"]["llmContent"]
    shell = recorded("gemini", "0.61.0.AfterTool.run_shell_command.2.json")["tool_response"]["llmContent"]
    mine = s.render_shell("sed -n '2,3p' small.txt", "beta\ngamma\n")[0]["llmContent"]
    assert mine.split("Process Group PGID: ")[0] == shell.split("Process Group PGID: ")[0]


def test_qwen_read_file_and_shell_answers_are_the_recorded_ones(tmp_path) -> None:  # noqa: ANN001
    s = shape("qwen", str(tmp_path))
    (tmp_path / "big.py").write_text(BIG)
    ranged = recorded("qwen", "0.24.4.PostToolUse.read_file.2.json")
    args = dict(ranged["tool_input"], file_path=str(tmp_path / "big.py"))
    assert s.render_builtin(host(), args, BIG, None)[0]["llmContent"] == ranged["tool_response"]["llmContent"]
    (tmp_path / "small.txt").write_text(SMALL)
    h = host()
    whole = recorded("qwen", "0.24.4.PostToolUse.read_file.3.json")
    assert s.render_builtin(h, {"file_path": str(tmp_path / "small.txt")}, SMALL, None)[0] == {
        "llmContent": whole["tool_response"]["llmContent"], "returnDisplay": ""}
    # its own answer to the whole-file re-read of a file it read whole in this process
    again = recorded("qwen", "0.24.4.PostToolUse.read_file.4.json")["tool_response"]["llmContent"]
    assert s.render_builtin(h, {"file_path": str(tmp_path / "small.txt")}, SMALL, None)[0]["llmContent"] == again
    shell = recorded("qwen", "0.24.4.PostToolUse.run_shell_command.2.json")
    assert s.render_shell(shell["tool_input"]["command"], "beta\ngamma\n")[0]["llmContent"] == shell["tool_response"]["llmContent"]


def test_copilot_view_and_bash_answers_are_the_recorded_ones(tmp_path) -> None:  # noqa: ANN001
    s = shape("copilot", str(tmp_path))
    big = "".join(f"line {i} of big\n" for i in range(1, 41))
    posts = [json.loads(line)["payload"] for line in (PAYLOADS / "copilot" / "builtin" / "hooks.jsonl").read_text().splitlines()
             if json.loads(line)["event"] == "postToolUse"]
    ranged = next(p for p in posts if p["toolArgs"].get("view_range") == [3, 5])
    assert s.render_builtin(host(), ranged["toolArgs"], big, None)[0] == {"resultType": "success",
                                                                         "textResultForLlm": ranged["toolResult"]["textResultForLlm"]}
    whole = next(p for p in posts if p["toolName"] == "view" and "view_range" not in p["toolArgs"])
    text = whole["toolResult"]["textResultForLlm"]
    assert s.render_builtin(host(), whole["toolArgs"], text, None)[0]["textResultForLlm"] == text
    numbered = next(p for p in posts if p["toolName"] == "bash" and p["toolArgs"]["command"] == "cat -n big.txt")
    stdout = "".join(f"{i:6d}\tline {i} of big\n" for i in range(1, 41))
    mine = s.render_shell("cat -n big.txt", stdout)[1]
    assert mine.split("\n<shellId: ")[0] == numbered["toolResult"]["textResultForLlm"].split("\n<shellId: ")[0]


def test_opencode_read_answers_are_the_recorded_ones(tmp_path) -> None:  # noqa: ANN001
    s = shape("opencode", str(tmp_path))
    text = "".join(f"line {i}\tx  \n" for i in range(1, 31))
    after = json.loads((PAYLOADS / "opencode" / "tool.execute.after.read-window.json").read_text())
    assert s.render_builtin(host(), after["input"]["args"], text, None)[1] == after["output"]["output"]
    whole = json.loads((PAYLOADS / "opencode" / "tool.execute.after.json").read_text())
    assert s.render_builtin(host(), whole["input"]["args"], "hello world file\n", None)[1] == whole["output"]["output"]


@pytest.mark.parametrize("agent", ["codebuddy", "droid"])
def test_codebuddy_and_droid_read_and_shell_answers_are_the_recorded_ones(agent: str, tmp_path) -> None:  # noqa: ANN001
    s = shape(agent, str(tmp_path))
    texts = {"small.txt": SMALL, "big.py": BIG, "nonl.txt": "one\ntwo"}
    seen = 0
    for r in json.loads((PAYLOADS / agent / "builtin" / "reads.json").read_text()):
        post = r.get("post")
        if post is None:
            continue
        args = post["tool_input"]
        if post["tool_name"] == "Read" and os.path.basename(args["file_path"]) in texts:
            mine = s.render_builtin(host(), args, texts[os.path.basename(args["file_path"])], None)[0]
        elif agent == "droid" and post["tool_name"] == "Execute" and args["command"] in ("cat small.txt", "cat nonl.txt"):
            mine = s.render_shell(args["command"], texts[args["command"][4:]])[0]
        else:
            continue
        assert mine == post["tool_response"], (args, mine, post["tool_response"])
        seen += 1
    assert seen >= 3


HOSTS = ("gemini", "qwen", "copilot", "opencode", "codebuddy", "droid")


@pytest.mark.parametrize("agent", HOSTS)
def test_each_hosts_traces_gate_and_credit_its_own_readers(agent: str) -> None:
    """The recorded-style trace of each host: its reads are replayed as its own built-in and
    shell reads (not ctx_read), some are refused with a stub, none wrongly."""
    with tempfile.TemporaryDirectory() as base:
        ours, oracle = Ours(), Oracle()
        Engine(base, [ours, oracle]).run(load_trace(str(REPO / "bench" / "traces" / f"{agent}-builtin-readers.jsonl")))
    assert ours.reads_by[(agent, "builtin")] >= 10 and ours.reads_by[(agent, "shell")] >= 8
    assert ours.kinds["stub"] + ours.kinds["pointer"] >= 2 and ours.wrong == oracle.wrong == 0


def test_every_gated_host_has_its_reader_traces() -> None:
    names = {p.stem for p in (REPO / "bench" / "traces").glob("*.jsonl")}
    assert {f"{a}-builtin-readers" for a in HOSTS} <= names
    assert {"gemini-builtin-hashed-call-ids", "copilot-builtin-log-ids", "droid-builtin-transcript-ids",
            "opencode-builtin-line-numbers", "qwen-builtin-idle-clear", "codebuddy-builtin-bash-never-credited"} <= names
