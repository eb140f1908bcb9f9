"""The built-in reader gate in the cache core: Claude Code's `Read` answered by the same ledger and
the same rules as ctx_read ("gate" before the reader runs, "credit" after it delivered)."""

from __future__ import annotations

import dataclasses

from leanctx.cache.readcache import builtin_delivery_matches

from .conftest import World, code


def read_form(text: str, start: int = 1, count: int = 2000) -> str:
    """What Claude Code 2.1.197's Read hands its PostToolUse hook as `file.content`: the lines
    (split on "\\n", a final newline making an empty last line) joined with "\\n"."""
    return "\n".join(text.split("\n")[start - 1:start - 1 + count])


class Host:
    """One Claude Code session whose model uses the built-in Read (and sometimes ctx_read)."""

    def __init__(self, world: World, conv: str = "s1") -> None:
        self.world = world
        self.h = world.host()
        world.session(self.h, conv)
        self.conn = world.conn(self.h)
        self.n = 0

    def _call(self, name: str) -> tuple:
        scope = self.world.scope(self.conn)
        self.n += 1
        call = f"toolu_read{self.n:04d}"
        self.world.transcript_entry(scope.transcript, {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": call, "name": name, "input": {}}]}})
        return dataclasses.replace(scope, call_id=call), call

    def _result(self, scope, call: str, text: str) -> None:  # noqa: ANN001
        self.world.transcript_entry(scope.transcript, {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": call, "content": text}]}})

    def read(self, rel: str, offset: int | None = None, limit: int | None = None, delivered: str | None = None) -> dict:
        """One built-in Read: the gate's answer; when it lets the call through, the reader delivers
        (`delivered`, default: the file as it is now) and the post-tool hook credits it."""
        path = str(self.world.path(rel))
        start = offset or 1
        end = start + (limit or 2000) - 1
        scope, call = self._call("Read")
        gate = self.world.cache.read(scope, path, start, end, mode="gate")
        if gate["kind"] != "full":
            self._result(scope, call, gate["text"])
            return gate
        text = self.world.path(rel).read_text()
        got = delivered if delivered is not None else read_form(text, start, limit or 2000)
        self._result(scope, call, got)
        credit = self.world.cache.read(scope, path, start, start + got.count("\n"), mode="credit", delivered=got)
        return {**gate, "credit": credit["kind"], "text": got}

    def ctx_read(self, rel: str, start: int | None = None, end: int | None = None) -> dict:
        scope, call = self._call("mcp__leanctx__ctx_read")
        res = self.world.cache.read(scope, rel, start, end)
        self._result(scope, call, res["text"])
        return res


def test_an_unchanged_re_read_is_refused_with_the_stub_and_a_hint_for_the_built_in_reader(world: World) -> None:
    world.write("app.py", code(120))
    host = Host(world)
    first = host.read("app.py")
    assert first["kind"] == "full" and first["credit"] == "full"
    # a range inside what is held is the range stub
    part = host.read("app.py", 10, 20)
    assert part["kind"] == "stub" and "app.py L10-29 of 120 lines" in part["text"]
    other = Host(world, "s2")
    other.read("app.py")
    again = other.read("app.py")
    assert again["kind"] == "stub" and again["text"].startswith("[unchanged] app.py 120 lines")
    assert "fresh=true" not in again["text"] and "read it again right away" in again["text"]


def test_the_gate_sends_no_content_and_counts_nothing_when_it_lets_the_reader_run(world: World) -> None:
    world.write("app.py", code(50))
    host = Host(world)
    scope, _call = host._call("Read")
    gate = world.cache.read(scope, str(world.path("app.py")), 1, 2000, mode="gate")
    assert gate["kind"] == "full" and gate["text"] == ""
    assert world.cache.stats()["reads"] == 0


def test_asking_again_right_after_a_stub_returns_the_content_no_loop(world: World) -> None:
    world.write("app.py", code(80))
    host = Host(world)
    host.read("app.py")
    assert host.read("app.py")["kind"] == "stub"
    again = host.read("app.py")
    assert again["kind"] == "full" and again["credit"] == "full", "a model asking again right after a stub got it again"
    assert again["again"] is True  # the hook makes the host send it even where the host would not
    assert host.read("app.py")["kind"] == "stub", "once the content was sent, an unchanged re-read is a stub again"
    # lines of the refused window asked for again: the content; another part of the file right
    # after a refusal is no re-ask: its own stub
    assert host.read("app.py", 1, 10)["kind"] == "full"
    assert host.read("app.py", 40, 10)["kind"] == "stub"
    assert host.read("app.py", 60, 10)["kind"] == "stub"
    assert host.read("app.py", 65, 2)["kind"] == "full", "asking again for lines just refused must give them"
    # paging on past a refused window is a new read, not a re-ask
    assert host.read("app.py", 10, 20)["kind"] == "stub"
    assert host.read("app.py", 11, 20)["kind"] == "stub"
    assert host.read("app.py")["kind"] == "stub"
    # a change since the refusal is news, not a repeat: the diff, then (asked again) the content
    world.write("app.py", code(80).replace("return", "return  ", 1))
    assert host.read("app.py")["kind"] == "diff"
    assert host.read("app.py")["kind"] == "full"


def test_a_refused_read_asked_for_again_much_later_is_a_read_like_any_other(world: World) -> None:
    """The no-loop rule is for asking again soon after a refusal (within AGAIN_WITHIN reads of the
    context, its own included: a batch of parallel calls is answered before the model asks
    again). Many reads later, the same lines unchanged are a re-read the ledger answers."""
    from leanctx.cache.readcache import AGAIN_WITHIN

    others = iter(range(100))

    def other() -> str:  # a file this context never read: its first read, the content
        name = f"m{next(others)}.py"
        world.write(name, code(30, name))
        res = host.read(name)
        assert res["kind"] == "full"
        return name

    world.write("app.py", code(80))
    host = Host(world)
    host.read("app.py")
    assert host.read("app.py")["kind"] == "stub"
    other()
    other()  # two other reads between the refusal and the re-ask (a batch of three calls): a re-ask
    assert host.read("app.py")["kind"] == "full"
    assert host.read("app.py")["kind"] == "stub"
    for _ in range(AGAIN_WITHIN):
        other()
    later = host.read("app.py")
    assert later["kind"] == "stub", f"{AGAIN_WITHIN} reads after its refusal the same read is a re-read, not a re-ask"
    assert host.read("app.py")["kind"] == "full", "asked again right after that stub, the content comes"


def test_one_ledger_with_ctx_read_both_ways(world: World) -> None:
    world.write("a.py", code(90, "a"))
    world.write("b.py", code(90, "b"))
    host = Host(world)
    host.read("a.py")
    assert host.ctx_read("a.py")["kind"] == "stub", "a file read with Read was sent again by ctx_read"
    assert host.ctx_read("b.py")["kind"] == "full"
    assert host.read("b.py")["kind"] == "stub", "a file read with ctx_read was sent again by Read"


def test_what_the_reader_delivered_is_credited_only_when_it_equals_the_disk(world: World) -> None:
    world.write("app.py", code(60))
    host = Host(world)
    stale = host.read("app.py", delivered=read_form(code(60, "older")))
    assert stale["credit"] == "withheld"
    assert host.read("app.py")["kind"] == "full", "bytes the disk never held were credited"
    # Claude Code's own "file unchanged" answer carries no content: never credited
    assert host.read("app.py")["kind"] == "stub"


def test_a_change_by_another_program_is_a_diff_against_the_copy_in_context(world: World) -> None:
    world.write("app.py", code(200))
    host = Host(world)
    host.read("app.py")
    lines = code(200).splitlines(keepends=True)
    lines[100] = "CHANGED = 1\n"
    world.write("app.py", "".join(lines))
    diff = host.read("app.py")
    assert diff["kind"] == "diff" and "CHANGED = 1" in diff["text"] and "read it again right away" in diff["text"]
    assert host.read("app.py")["kind"] == "full", "asking again right after the diff must give the content"


def test_a_compaction_sends_everything_again(world: World) -> None:
    world.write("app.py", code(70))
    host = Host(world)
    host.read("app.py")
    world.hook(host.h, "compact", "s1")
    assert host.read("app.py")["kind"] == "full"


def test_another_conversation_and_an_unknown_caller_get_the_reader(world: World) -> None:
    world.write("app.py", code(70))
    Host(world).read("app.py")
    other = Host(world, "s2")
    assert other.read("app.py")["kind"] == "full"
    unknown = world.conn(None)
    gate = world.cache.read(world.scope(unknown), str(world.path("app.py")), 1, 2000, mode="gate")
    assert gate["kind"] == "full"


def test_a_ranged_read_is_credited_as_that_range(world: World) -> None:
    world.write("app.py", code(100))
    host = Host(world)
    assert host.read("app.py", 11, 30)["credit"] == "full"
    assert host.read("app.py", 15, 10)["kind"] == "stub"
    assert host.read("app.py", 1, 40)["kind"] in ("full", "pointer")


def test_delivery_forms() -> None:
    text = "a\nb\nc\n"  # Claude Code: 4 lines, the last one empty
    assert builtin_delivery_matches(text, (1, 3), 1, "a\nb\nc\n")  # the whole file, as Read gives it
    assert builtin_delivery_matches(text, (1, 3), 1, "a\nb\nc")  # lines 1-3 with limit 3
    assert builtin_delivery_matches(text, (2, 3), 2, "b\nc")
    assert not builtin_delivery_matches(text, (2, 3), 1, "b\nc")
    assert not builtin_delivery_matches(text, (1, 3), 1, "a\nb\nC\n")
    assert not builtin_delivery_matches("a\r\nb\r\n", (1, 2), 1, "a\nb\n"), "CRLF turned into LF is not the disk's bytes"
    long = "x" * 2001 + "\n"
    assert not builtin_delivery_matches(long, (1, 1), 1, long), "a line the host may cut is never credited"
    assert builtin_delivery_matches("a\nb", (1, 2), 1, "a\nb")  # no final newline


def test_a_window_reaching_past_what_is_held_gets_the_pointer_and_only_the_new_lines(world: World) -> None:
    world.write("app.py", code(100))
    host = Host(world)
    host.read("app.py", 1, 40)
    part = host.read("app.py", 1, 60)
    assert part["kind"] == "pointer" and part["text"].startswith("[partly unchanged] app.py L1-60 of 100 lines")
    assert "read it again right away" in part["text"] and "fresh=true" not in part["text"]
    more = host.read("app.py", 41, 30)  # reaches past the refused window: a new read, not a re-ask
    assert more["kind"] == "pointer" and "L41-60 was already sent" in more["text"], "the pointer's new lines are not held"


def test_after_a_rewind_past_the_read_the_content_comes_again(world: World) -> None:
    world.write("app.py", code(90))
    host = Host(world)
    scope = world.scope(host.conn)
    before = world.transcript_entry(scope.transcript, {"type": "user", "message": {"content": "go on"}})
    host.read("app.py")
    assert host.read("app.py")["kind"] == "stub"
    # the user rewinds to before the read: the chain continues from an earlier entry
    world.transcript_entry(scope.transcript, {"type": "user", "message": {"content": "edited prompt"}}, parent=before)
    assert host.read("app.py")["kind"] == "full", "a stub for a read the rewound context no longer holds"


def test_a_refusal_longer_than_the_host_hands_its_model_whole_is_never_given(world: World) -> None:
    """Found by the replay (Droid's Execute keeps 4,500 characters): a pointer carrying more new
    lines than the host hands its model whole would reach it cut, and, not remembered as a
    refusal, came back the same when asked again (a loop). The reader runs instead."""
    world.write("big.py", code(2400))
    host = Host(world)
    assert host.read("big.py", 1, 10)["credit"] == "full"
    first = host.read("big.py")
    assert first["kind"] == "full", first.get("text", "")[:200]
    assert host.read("big.py")["kind"] == "full"


def test_a_whole_file_output_trimmed_of_its_trailing_blank_lines_is_credited_as_the_lines_it_holds(world: World) -> None:
    """`cat app.py` through a shell that trims trailing blank lines (Gemini CLI, Copilot CLI): the
    model got the first k lines exactly, so those are held; a re-read is a pointer that sends only
    the blank lines, and an output that is not a prefix of the file now is credited nothing."""
    from leanctx.cache.readcache import delivered_prefix

    text = code(40) + "\n\n"
    world.write("app.py", text)
    host = Host(world)
    path = str(world.path("app.py"))

    def cat(delivered: str) -> tuple[dict, dict]:
        scope, call = host._call("Bash")
        gate = world.cache.read(scope, path, None, None, mode="gate", reader="shell")
        if gate["kind"] != "full":
            host._result(scope, call, gate["text"])
            return gate, {}
        host._result(scope, call, delivered)
        return gate, world.cache.read(scope, path, None, None, mode="credit", delivered=delivered, reader="shell")

    trimmed = text.rstrip("\n")
    gate, credit = cat(trimmed)
    assert gate["kind"] == "full" and credit["kind"] == "full" and credit["window"] == [1, 40]
    again, _ = cat(trimmed)
    assert again["kind"] == "pointer" and "L1-40 was already sent" in again["text"], again["text"]
    # a prefix of another version is not what the disk holds: nothing credited, the holding goes
    world.write("app.py", code(40, "other") + "\n\n")
    _, stale = cat(trimmed)
    assert stale["kind"] == "withheld"
    assert cat(trimmed)[0]["kind"] == "full"
    assert delivered_prefix("a\nb\n\n", "a\nb") == 2
    assert delivered_prefix("a\nb\n\n", "a\nb\n") == 2
    assert delivered_prefix("a\nb\n\n\n", "a\nb\n\n") == 3
    assert delivered_prefix("a\nb\n", "a\nb\n") is None  # the whole file: not a prefix
    assert delivered_prefix("a\nb\nc\n", "a\nB") is None
    assert delivered_prefix("ab\nc\n", "a") is None  # a cut inside a line
