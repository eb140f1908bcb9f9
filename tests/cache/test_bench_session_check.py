"""The session bench's wrong-stub check (bench/session_savings.py): a stub counts as right only
when the request that carries it also carries the file's current lines, whole, in pieces, or as an
earlier copy plus a diff that turns it into them."""
from __future__ import annotations

import difflib

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
