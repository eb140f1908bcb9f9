"""The session bench's wrong-stub check (bench/session_savings.py): a stub counts as right only
when the request that carries it also carries the file's current lines, whole, in pieces, or as an
earlier copy plus a diff that turns it into them."""
from __future__ import annotations

import difflib
import json

from bench import session_savings as bench

OLD = "".join(f"line {i}\n" for i in range(1, 41))
NEW = OLD.replace("line 20\n", "line 20 changed\n")


def stub_call(rel: str, text: str) -> bench.Call:
    call = bench.Call("main", bench.Act("read", path=rel), "call_2")
    call.text = text
    return call


def body(*results: str) -> dict:
    return {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"call_{i}", "content": r}
                                                      for i, r in enumerate(results)]}]}


def numbered(text: str) -> str:
    return "".join(f"{i}\t{line}\n" for i, line in enumerate(text.splitlines(), 1))


def check(tmp_path, on_disk: str, *received: str, stub: str = "[unchanged] f.py 40 lines · already sent") -> bool:
    (tmp_path / "f.py").write_text(on_disk)
    call = stub_call("f.py", stub)
    bench.Run("host", "c").check(tmp_path, call, body(*received, stub))
    return call.wrong


def test_a_stub_for_bytes_the_model_got_is_right(tmp_path):
    assert not check(tmp_path, NEW, numbered(NEW))


def test_a_stub_for_a_file_changed_since_is_wrong(tmp_path):
    assert check(tmp_path, NEW, numbered(OLD))


def test_a_diff_against_the_held_copy_makes_the_current_bytes_held(tmp_path):
    diff = "[changed] f.py (40 lines now) changed on disk\n" + "".join(
        difflib.unified_diff(OLD.splitlines(True), NEW.splitlines(True), "a/f.py", "b/f.py"))
    assert not check(tmp_path, NEW, OLD, diff)
    assert check(tmp_path, NEW, "".join(f"other {i}\n" for i in range(40)), diff)  # the diff fits no copy


def test_a_range_stub_needs_only_that_range_and_pieces_may_cover_it(tmp_path):
    stub = "[unchanged] f.py L5-30 of 40 lines · already sent"
    first = "".join(OLD.splitlines(True)[:18])
    rest = "@@ L19-40 @@\n" + "".join(NEW.splitlines(True)[18:])
    assert not check(tmp_path, NEW, first, rest, stub=stub)
    assert check(tmp_path, NEW, first, stub=stub)


def test_a_pointer_claims_only_its_held_spans(tmp_path):
    stub = "[partly unchanged] f.py L1-40 of 40 lines: L1-10 was already sent earlier; only the new lines follow"
    assert bench.stub_regions(stub, 40) == [(1, 10)]
    assert not check(tmp_path, NEW, numbered("".join(NEW.splitlines(True)[:10])), stub=stub)
    assert check(tmp_path, "changed\n" + NEW, numbered(NEW), stub=stub)


def opencode_read(text: str) -> str:
    lines = "".join(f"{i}: {line}\n" for i, line in enumerate(text.splitlines(), 1))
    return f"<path>/p/f.py</path>\n<type>file</type>\n<content>\n{lines}\n(End of file - total 40 lines)\n</content>"


def test_a_diff_applies_to_the_file_inside_a_hosts_read_wrapper_and_refusal_prefixes(tmp_path):
    """OpenCode wraps a read in <path>/<content> lines and hosts put their own words before a
    refusal's reason: the check must see through both, or it flags a right stub as wrong."""
    diff = "[changed] f.py (40 lines now) changed on disk\n" + "".join(
        difflib.unified_diff(OLD.splitlines(True), NEW.splitlines(True), "a/f.py", "b/f.py"))
    for prefix in ("", "Denied by preToolUse hook: ", "Tool execution blocked: ", "Error: "):
        assert not check(tmp_path, NEW, opencode_read(OLD), prefix + diff), prefix
    assert check(tmp_path, NEW, opencode_read(OLD))  # without the diff the model does not hold the change


def gemini_body(*results: dict) -> dict:
    """A Gemini API request: the prompt, then each call of the model and its answer."""
    contents: list = [{"role": "user", "parts": [{"text": "work on the handlers"}]}]
    for response in results:
        contents += [{"role": "model", "parts": [{"functionCall": {"name": "read_file", "args": {"file_path": "f.py"}}}]},
                     {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": response}}]}]
    return {"contents": contents}


def test_gemini_refusal_is_read_out_of_its_error_json(tmp_path):
    """Gemini CLI hands the model a refused call as `{"error": "Tool execution blocked: <text>"}`:
    the bench must take the stub out of it, or it never checks a gated stub on Gemini."""
    (tmp_path / "f.py").write_text(NEW)
    host = bench.Gemini()
    host.last_ids = {False: "call_2"}
    stub = "[unchanged] f.py 40 lines · already sent"
    for held, wrong in ((NEW, False), (OLD, True)):
        request = gemini_body({"output": held}, {"error": "Tool execution blocked: " + stub})
        call = stub_call("f.py", "")
        call.call_id, call.text = "call_2", host.result(request, "call_2")
        assert bench.stub_regions(call.text, 40) == [(1, 40)], call.text
        bench.Run("Gemini CLI", "c").check(tmp_path, call, request)
        assert call.wrong is wrong


def test_gemini_and_qwen_subagent_requests_are_told_by_their_task_prompt():
    """A subagent's own request starts from the task prompt as a user message; the parent holds
    it only in its call's arguments (and its answer), so it stays the parent's."""
    gemini, qwen = bench.Gemini(), bench.Qwen()
    parent = {"contents": [{"role": "user", "parts": [{"text": "work on the handlers"}]},
                           {"role": "model", "parts": [{"functionCall": {"name": "invoke_agent", "args": {
                               "agent_name": "generalist", "prompt": gemini.SUB_MARK}}}]}]}
    sub = {"contents": [{"role": "user", "parts": [{"text": f"Your task:\n{gemini.SUB_MARK}"}]}]}
    assert not gemini.is_sub(parent) and gemini.is_sub(sub)
    parent = {"messages": [{"role": "user", "content": "work on the handlers"},
                           {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                               "name": "agent", "arguments": json.dumps({"prompt": qwen.SUB_MARK})}}]},
                           {"role": "tool", "tool_call_id": "c1", "content": f"done: {qwen.SUB_MARK}"}]}
    sub = {"messages": [{"role": "system", "content": "You are a subagent"}, {"role": "user", "content": qwen.SUB_MARK}]}
    assert not qwen.is_sub(parent) and qwen.is_sub(sub)


def test_gemini_and_qwen_compressions_count_once():
    from tests.e2e.fake_gemini_chat import is_compaction

    system = {"parts": [{"text": "distill the history into a <state_snapshot>"}]}
    summary = {"systemInstruction": system, "contents": [{"role": "user", "parts": [{"text": "Generate a new <state_snapshot>"}]}]}
    second_look = {"systemInstruction": system, "contents": [
        {"role": "user", "parts": [{"text": "Critically evaluate the <state_snapshot> you just generated."}]}]}
    qwen = {"messages": [{"role": "system", "content": "distill the history into a <state_snapshot>"},
                         {"role": "user", "content": "First, reason in your scratchpad."}]}
    turn = dict(summary, tools=[{"functionDeclarations": [{"name": "read_file"}]}])
    assert is_compaction(summary) and is_compaction(qwen)
    assert not is_compaction(second_look) and not is_compaction(turn)


def test_a_diff_against_a_file_claude_code_re_attached_after_a_compaction_is_seen(tmp_path):
    """Claude Code puts every file it re-attaches after a compaction into one text, each after
    "Called the Read tool ... Result of calling the Read tool:"; a later diff applies to one of
    them, and the stub after it is right (this was flagged wrong while the text stayed whole)."""
    other = "".join(f"other {i}\n" for i in range(1, 30))
    attached = "".join(f"Called the Read tool with the following input: {{\"file_path\":\"{name}\"}}\n"
                       f"Result of calling the Read tool:\n{numbered(text)}\n"
                       for name, text in (("other.py", other), ("f.py", OLD), ("more.py", other)))
    diff = "[changed] f.py (40 lines now) changed on disk\n" + "".join(
        difflib.unified_diff(OLD.splitlines(True), NEW.splitlines(True), "a/f.py", "b/f.py"))
    assert not check(tmp_path, NEW, attached, diff)
    assert check(tmp_path, NEW, attached), "without the diff the model holds only the older version"
