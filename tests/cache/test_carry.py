"""Files Claude Code re-attached after a compaction are credited to the new epoch (carry.py).

The transcript lines are the real ones Claude Code 2.1.197 wrote for `/compact` in an offline run
(tests/cache/fixtures/claude_compact_transcript.jsonl, recorded by
tests/e2e/test_compaction_carry_e2e.py; the project path replaced by @PROJ@): f2, f4, f5, f6, f7
were re-attached whole after the `compact_boundary` line.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bench.support.oracle import read_gate
from leanctx.cache import carry

from .conftest import World, code

FIXTURE = Path(__file__).with_name("fixtures") / "claude_compact_transcript.jsonl"
ATTACHED = ["f2.py", "f7.py", "f6.py", "f5.py", "f4.py"]


def iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


def fixture_lines(world: World, boundary_ts: float) -> list[dict]:
    text = FIXTURE.read_text().replace("@PROJ@", str(world.root))
    out = []
    for line in text.splitlines():
        d = json.loads(line)
        if d.get("subtype") == "compact_boundary":
            d["timestamp"] = iso(boundary_ts)
        out.append(d)
    return out


def attached_text(lines: list[dict], name: str) -> str:
    for d in lines:
        att = d.get("attachment") or {}
        if att.get("type") == "file" and att["filename"].endswith("/" + name):
            return att["content"]["file"]["content"]
    raise KeyError(name)


def write_transcript(world: World, lines: list[dict], name: str = "t.jsonl") -> Path:
    p = world.tmp / "transcripts" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(d) + "\n" for d in lines))
    return p


def compacted(world: World, transcript: Path | None = None, extra_lines=(), conv: str = "s1"):
    """A session whose files f1..f7 + big.py exist as in the recorded run, compacted once (Claude
    Code's PreCompact then SessionStart(compact)), with the recorded transcript."""
    lines = fixture_lines(world, world.t + 0.5)
    for name in ATTACHED:
        world.write(name, attached_text(lines, name))
    world.write("f1.py", code(40, "f1"))
    world.write("big.py", code(400, "big"))
    if transcript is None:
        transcript = write_transcript(world, lines + list(extra_lines))
    h = world.host()
    world.session(h, conv, transcript_path=str(transcript))
    world.tick(0.4)
    world.hook(h, "compact", conv, transcript_path=str(transcript), trigger="manual")
    world.tick(0.2)
    world.hook(h, "start", conv, transcript_path=str(transcript), source="compact")
    world.hook(h, "prompt", conv, transcript_path=str(transcript), prompt="go on")
    return h, world.conn(h), lines, transcript


def test_reattached_unchanged_files_are_stubs_and_others_full(world: World) -> None:
    _, c, _, _ = compacted(world)
    for name in ("f4.py", "f6.py", "f7.py", "f2.py"):
        r = world.read(c, name)
        assert r["kind"] == "stub", (name, r["text"][:120])
    assert world.read(c, "f1.py")["kind"] == "full"  # read before the compaction, not re-attached
    assert world.read(c, "big.py")["kind"] == "full"


def test_a_reattached_file_changed_on_disk_is_a_diff_against_the_attached_bytes(world: World) -> None:
    _, c, lines, _ = compacted(world)
    old = attached_text(lines, "f5.py")
    world.write("f5.py", old.replace("return value + 510", "return value + 77510"))
    r = world.read(c, "f5.py")
    assert r["kind"] == "diff", r["text"][:200]
    assert "+    return value + 77510" in r["text"] and "-    return value + 510" in r["text"]
    assert world.read(c, "f5.py")["kind"] == "stub"  # now it holds the new bytes


def test_a_file_changed_and_changed_back_before_the_first_read_is_credited(world: World) -> None:
    """What counts is the bytes: equal to the attachment when the credit is made, so the stub."""
    _, c, lines, _ = compacted(world)
    world.write("f5.py", "something else\n")
    world.write("f5.py", attached_text(lines, "f5.py"))
    # the first read at this epoch credits f5 as unchanged (its bytes equal the attachment now)
    assert world.read(c, "f5.py")["kind"] == "stub"


def test_switched_off_sends_everything_again(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEANCTX_CARRY", "0")
    world.restart()
    _, c, _, _ = compacted(world)
    assert all(world.read(c, n)["kind"] == "full" for n in ATTACHED)


def test_no_compaction_counted_means_no_credit(world: World) -> None:
    """The transcript has a boundary, but this conversation's record counted no compaction (a
    forked or other session that copied the lines): nothing is credited."""
    lines = fixture_lines(world, world.t)
    for name in ATTACHED:
        world.write(name, attached_text(lines, name))
    t = write_transcript(world, lines)
    h = world.host()
    world.session(h, "other", transcript_path=str(t))
    c = world.conn(h)
    assert all(world.read(c, n)["kind"] == "full" for n in ATTACHED)


def test_a_second_compaction_without_a_new_boundary_credits_nothing(world: World) -> None:
    h, c, _, t = compacted(world)
    assert world.read(c, "f4.py")["kind"] == "stub"
    world.tick(5)
    world.hook(h, "compact", "s1", transcript_path=str(t))  # compacting again; its boundary is not written
    world.hook(h, "start", "s1", transcript_path=str(t), source="compact")
    assert world.read(c, "f6.py")["kind"] == "full"
    assert world.read(c, "f4.py")["kind"] == "full"


def test_two_compactions_in_a_row_credit_only_the_last_ones_files(world: World) -> None:
    h, c, lines, t = compacted(world)
    assert world.read(c, "f4.py")["kind"] == "stub"
    world.tick(5)
    boundary = dict(next(d for d in lines if d.get("subtype") == "compact_boundary"))
    boundary.update(uuid="second-boundary", timestamp=iso(world.t + 0.5))
    f7 = dict(next(d for d in lines if (d.get("attachment") or {}).get("filename", "").endswith("/f7.py")))
    f7.update(uuid="second-f7", parentUuid="second-boundary")  # Claude Code chains it to its boundary
    with t.open("a") as f:
        f.write(json.dumps(boundary) + "\n" + json.dumps(f7) + "\n")
    world.tick(1)
    world.hook(h, "compact", "s1", transcript_path=str(t))
    world.hook(h, "start", "s1", transcript_path=str(t), source="compact")
    assert world.read(c, "f7.py")["kind"] == "stub"
    assert world.read(c, "f4.py")["kind"] == "full"


def test_a_boundary_from_long_before_the_compaction_is_not_credited(world: World) -> None:
    lines = fixture_lines(world, world.t - 3600)  # an old boundary; this compaction's is not written
    for name in ATTACHED:
        world.write(name, attached_text(lines, name))
    t = write_transcript(world, lines)
    h, c, _, _ = compacted(world, transcript=t)
    assert all(world.read(c, n)["kind"] == "full" for n in ATTACHED)


def test_a_subagent_gets_content_for_reattached_files(world: World) -> None:
    h, c, _, _ = compacted(world)
    world.hook(h, "sub_start", "s1", sub="agent-1")
    read_gate(str(world.data), h, "s1", "agent-1", "call-1", str(world.root), world.t)
    scope = world.resolver.resolve(c, fresh=True, call_id="call-1")
    assert scope.carry is None
    assert world.cache.read(scope, "f4.py")["kind"] == "full"
    # the parent, named by its own note, still gets its stub
    read_gate(str(world.data), h, "s1", None, "call-2", str(world.root), world.t)
    assert world.cache.read(world.resolver.resolve(c, fresh=True, call_id="call-2"), "f4.py")["kind"] == "stub"


def test_a_partial_range_is_held_only_for_its_lines(world: World) -> None:
    lines = fixture_lines(world, world.t + 0.5)
    text = code(60, "p")
    world.write("part.py", text)
    pieces = text.split("\n")
    entry = json.loads(json.dumps(next(d for d in lines if (d.get("attachment") or {}).get("type") == "file")))
    entry["attachment"]["filename"] = str(world.path("part.py"))
    entry["attachment"]["content"]["file"].update(
        filePath=str(world.path("part.py")), content="\n".join(pieces[9:19]), startLine=10, numLines=10,
        totalLines=len(pieces))
    _, c, _, _ = compacted(world, extra_lines=[entry])
    assert world.read(c, "part.py", 12, 18)["kind"] == "stub"
    whole = world.read(c, "part.py")
    assert whole["kind"] in ("full", "pointer") and "p_1(" in whole["text"]


def test_a_range_whose_lines_differ_from_disk_is_not_held(world: World) -> None:
    lines = fixture_lines(world, world.t + 0.5)
    world.write("part.py", code(60, "p"))
    entry = json.loads(json.dumps(next(d for d in lines if (d.get("attachment") or {}).get("type") == "file")))
    entry["attachment"]["content"]["file"].update(
        filePath=str(world.path("part.py")), content="not these lines", startLine=10, numLines=1, totalLines=60)
    _, c, _, _ = compacted(world, extra_lines=[entry])
    assert world.read(c, "part.py", 10, 10)["kind"] == "full"


def test_a_too_large_file_noted_by_reference_is_not_held(world: World) -> None:
    ref = {"type": "attachment", "isSidechain": False, "attachment": {
        "type": "compact_file_reference", "filename": "@BIG@", "displayPath": "big.py"}}
    _, c, _, _ = compacted(world, extra_lines=[json.loads(json.dumps(ref).replace("@BIG@", str(world.path("big.py"))))])
    assert world.read(c, "big.py")["kind"] == "full"


def test_a_sidechain_attachment_is_not_held(world: World) -> None:
    lines = fixture_lines(world, world.t + 0.5)
    for d in lines:
        if (d.get("attachment") or {}).get("filename", "").endswith("/f4.py"):
            d["isSidechain"] = True
    t = write_transcript(world, lines)
    _, c, _, _ = compacted(world, transcript=t)
    assert world.read(c, "f4.py")["kind"] == "full"
    assert world.read(c, "f6.py")["kind"] == "stub"


@pytest.mark.parametrize("damage", ["missing", "garbage", "no_boundary", "bad_line", "fifo", "symlink", "bad_field"])
def test_an_unknown_or_unreadable_transcript_means_full_content(world: World, damage: str) -> None:
    lines = fixture_lines(world, world.t + 0.5)
    t = world.tmp / "transcripts" / "t.jsonl"
    t.parent.mkdir(parents=True, exist_ok=True)
    if damage == "garbage":
        t.write_bytes(os.urandom(4096))
    elif damage == "no_boundary":
        t.write_text("".join(json.dumps(d) + "\n" for d in lines if d.get("subtype") != "compact_boundary"))
    elif damage == "bad_line":
        t.write_text("".join(json.dumps(d) + "\n" + ('{"attachment": [broken\n' if d.get("subtype") else "") for d in lines))
    elif damage == "fifo":
        os.mkfifo(t)
    elif damage == "symlink":
        real = write_transcript(world, lines, "real.jsonl")
        t.symlink_to(real)
    elif damage == "bad_field":
        for d in lines:
            if (d.get("attachment") or {}).get("type") == "file":
                d["attachment"]["content"]["file"]["startLine"] = "1"
        t.write_text("".join(json.dumps(d) + "\n" for d in lines))
    _, c, _, _ = compacted(world, transcript=t)
    assert all(world.read(c, n)["kind"] == "full" for n in ATTACHED)


def test_the_tail_read_is_bounded(tmp_path: Path) -> None:
    """The boundary further back than the limit is not looked for (no full read of a big file)."""
    lines = FIXTURE.read_text().replace("@PROJ@", str(tmp_path)).splitlines()
    t = tmp_path / "t.jsonl"
    t.write_text("\n".join(lines) + "\n" + ('{"type":"user","message":{"content":"' + "x" * 5000 + '"}}\n') * 200)
    assert carry.last_boundary(str(t)) is not None
    assert carry.last_boundary(str(t), limit=512 << 10) is None
    found = carry.last_boundary(str(t), limit=4 << 20)
    assert found is not None and [os.path.basename(f.path) for f in found.files] == ATTACHED
    assert all(f.whole for f in found.files)


def test_a_half_written_last_line_is_ignored(tmp_path: Path) -> None:
    text = FIXTURE.read_text().replace("@PROJ@", str(tmp_path))
    t = tmp_path / "t.jsonl"
    t.write_text(text + '{"type":"attachment","isSidechain":false,"attachment":{"type":"file","filename":"/x')
    found = carry.last_boundary(str(t))
    assert found is not None and len(found.files) == 5


def test_stubs_survive_a_daemon_restart_in_the_same_epoch(world: World) -> None:
    _, c, _, _ = compacted(world)
    assert world.read(c, "f4.py")["kind"] == "stub"
    world.restart()
    assert world.read(c, "f6.py")["kind"] == "stub"


def test_a_restart_remembers_which_boundary_was_credited(world: World) -> None:
    """After a daemon restart, a compaction counted without a new boundary in the transcript
    (still being written) must not credit the old boundary's files to the new epoch."""
    h, c, _, t = compacted(world)
    assert world.read(c, "f4.py")["kind"] == "stub"
    world.restart()
    world.tick(5)
    world.hook(h, "compact", "s1", transcript_path=str(t))
    assert world.read(c, "f6.py")["kind"] == "full"


def test_another_session_gets_nothing_from_this_ones_compaction(world: World) -> None:
    """Session s1 compacted; s2 (another host process, its own transcript without a boundary, a
    compaction of its own counted) re-reads the same files: content, never s1's credit."""
    compacted(world)
    lines = [d for d in fixture_lines(world, world.t) if d.get("subtype") != "compact_boundary"]
    t2 = write_transcript(world, lines, "s2.jsonl")
    h2 = world.host()
    world.session(h2, "s2", transcript_path=str(t2))
    world.hook(h2, "compact", "s2", transcript_path=str(t2))
    c2 = world.conn(h2)
    assert all(world.read(c2, n)["kind"] == "full" for n in ATTACHED)


def test_a_boundary_written_after_the_first_read_is_still_credited(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """In one Claude Code process the boundary and the attachments reach the transcript after
    the turn's first reads (observed on 2.1.197 with an automatic compaction): the transcript is
    looked at again when it has grown, and only then."""
    lines = fixture_lines(world, world.t + 0.5)
    at = next(i for i, d in enumerate(lines) if d.get("subtype") == "compact_boundary")
    t = write_transcript(world, lines[:at])
    _, c, _, _ = compacted(world, transcript=t)
    looks = []
    real = carry.last_boundary
    monkeypatch.setattr(carry, "last_boundary", lambda path, *a: looks.append(path) or real(path, *a))
    assert world.read(c, "f1.py")["kind"] == "full"
    assert world.read(c, "f4.py")["kind"] == "full"  # nothing written yet
    assert len(looks) == 2  # looked again only because each call grew the transcript
    with t.open("a") as f:
        f.write("".join(json.dumps(d) + "\n" for d in lines[at:]))
    assert world.read(c, "f6.py")["kind"] == "stub"
    # its own full read in this epoch sits above the boundary in the transcript, which the model's
    # context may have lost: the transcript is the authority, so it is sent again (withhold)
    assert world.read(c, "f4.py")["kind"] == "full"
    assert len(looks) == 3


def test_a_transcript_that_never_shows_the_boundary_is_given_up(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [d for d in fixture_lines(world, world.t + 0.5) if d.get("subtype") != "compact_boundary"]
    t = write_transcript(world, lines)
    _, c, _, _ = compacted(world, transcript=t)
    looks = []
    real = carry.last_boundary
    monkeypatch.setattr(carry, "last_boundary", lambda path, *a: looks.append(path) or real(path, *a))
    for i in range(20):
        with t.open("a") as f:
            f.write(json.dumps({"type": "user", "n": i}) + "\n")
        assert world.read(c, "f4.py")["kind"] in ("full", "stub")
    assert len(looks) == 8
