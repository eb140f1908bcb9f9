"""schema.json, and the two validators that enforce it: they must accept and reject the same documents."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from leanctx.state import validate as v
from leanctx.state.errors import SchemaError, StateInvalid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TS = "2026-06-07T19:40:00.000Z"


def sample() -> dict:
    return {
        "schema_version": 1, "revision": 3, "user_slug": "alice", "source": "telegram",
        "thread_summary": "Helping set up the Telegram bot.",
        "recent_turns": [{"role": "user", "text": "how do I add the bot?", "ts": TS, "session_id": "s1"},
                         {"role": "agent", "text": "Create it with BotFather.", "ts": TS}],
        "turn_count": 2, "active_feature": "telegram-setup", "active_phase": None,
        "pending": {"type": "clarify", "question": "Single-user or shared bot?", "options": ["single", "shared"], "asked_ts": TS},
        "last_answer": None, "last_updated": TS,
    }


def verdicts(doc: object) -> tuple[bool, bool]:
    """(stdlib says valid, jsonschema says valid)."""
    out = []
    for fn in (v.validate_stdlib, v.validate_jsonschema):
        try:
            fn(doc)
            out.append(True)
        except StateInvalid:
            out.append(False)
    return out[0], out[1]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = v.schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_additional_properties_is_false_on_every_object() -> None:
    schema = v.schema()
    objects = [schema] + [d for d in schema["$defs"].values() if "properties" in d]
    assert len(objects) == 4
    assert all(o["additionalProperties"] is False for o in objects)


def test_the_sample_document_is_valid_for_both() -> None:
    assert verdicts(sample()) == (True, True)


@pytest.mark.parametrize("keyword", ["pattern", "format", "anyOf", "uniqueItems", "if", "patternProperties", "$dynamicRef"])
def test_the_stdlib_validator_refuses_keywords_it_does_not_implement(keyword: str) -> None:
    schema = copy.deepcopy(v.schema())
    schema["$defs"]["turn"]["properties"]["text"][keyword] = "x"
    with pytest.raises(SchemaError, match=f"keyword '{re_escape(keyword)}' is not supported"):
        v.check_keywords(schema, schema, "#")


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_the_stdlib_validator_refuses_remote_references() -> None:
    schema = {"$ref": "https://example.org/other.json"}
    with pytest.raises(SchemaError, match="only local"):
        v.check_keywords(schema, schema, "#")


@pytest.mark.parametrize(("mutate", "path"), [
    (lambda d: d["recent_turns"][1].__setitem__("text", "x" * 4001), "$.recent_turns[1].text"),
    (lambda d: d["recent_turns"][0].__setitem__("role", "system"), "$.recent_turns[0].role"),
    (lambda d: d["pending"]["options"].append(""), "$.pending.options[2]"),
    (lambda d: d.__setitem__("revision", -1), "$.revision"),
    (lambda d: d.__setitem__("schema_version", 2), "$.schema_version"),
    (lambda d: d["pending"].__setitem__("extra", 1), "$.pending"),
    (lambda d: d.pop("turn_count"), "$"),
])
def test_both_validators_name_the_json_path(mutate, path: str) -> None:  # type: ignore[no-untyped-def]
    doc = sample()
    mutate(doc)
    for fn in (v.validate_stdlib, v.validate_jsonschema):
        with pytest.raises(StateInvalid) as info:
            fn(doc)
        assert str(info.value).startswith(path + ":"), (fn.__name__, str(info.value))


def test_validate_switches_on_the_fast_path_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(v, "validate_stdlib", lambda s: calls.append("stdlib"))
    monkeypatch.setattr(v, "validate_jsonschema", lambda s, validator=None: calls.append("jsonschema"))
    monkeypatch.setattr(v, "FAST", None)
    monkeypatch.delenv("LEANCTX_FAST_PATH", raising=False)
    v.validate(sample())
    monkeypatch.setenv("LEANCTX_FAST_PATH", "1")
    v.validate(sample())
    monkeypatch.delenv("LEANCTX_FAST_PATH")
    monkeypatch.setattr(v, "FAST", True)
    v.validate(sample())
    assert calls == ["jsonschema", "stdlib", "stdlib"]


def test_the_fast_path_never_imports_jsonschema() -> None:
    code = f"import sys\nfrom leanctx.state import validate\nvalidate.validate({sample()!r})\nprint('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, LEANCTX_FAST_PATH="1"), cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# --- differential: generated documents and near misses -------------------------------------------------


def around(lo: int, hi: int, char: str = "a") -> st.SearchStrategy[str]:
    """Mostly valid strings (any characters, or exactly at a cap), sometimes one character under
    the minimum or over the maximum (multi-byte characters count as one)."""
    valid = st.text(min_size=lo, max_size=min(hi, lo + 12)) | st.sampled_from([char * lo, char * hi])
    near = st.sampled_from([char * n for n in (lo - 1, hi + 1) if n >= 0])
    return st.integers(0, 39).flatmap(lambda k: near if k == 0 else valid)


def nullable(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.none() | strategy


TIMESTAMP = st.sampled_from([TS, "2026-06-07T19:40:00Z"]) | around(20, 40, "2")
SESSION = around(1, 200, "s")
TURN = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "agent"]), "text": around(0, 4000, "é"), "ts": TIMESTAMP},
    optional={"session_id": SESSION})
OPTIONS = st.lists(around(1, 200, "o"), max_size=3) | st.integers(9, 11).map(lambda n: ["o"] * n)
PENDING = nullable(st.fixed_dictionaries(
    {"type": st.just("clarify"), "question": around(1, 1000, "q"), "options": OPTIONS, "asked_ts": TIMESTAMP},
    optional={"session_id": SESSION}))
ANSWER = nullable(st.fixed_dictionaries(
    {"question": around(1, 1000, "q"), "options": OPTIONS, "answer": around(0, 4000), "answered_ts": TIMESTAMP}))
TURNS = st.lists(TURN, max_size=3) | st.sampled_from([49, 50, 50, 51]).map(lambda n: [{"role": "user", "text": "", "ts": TS}] * n)
DOC = st.fixed_dictionaries({
    "schema_version": st.sampled_from([1, 1, 1.0]),
    "revision": st.integers(0, 2**40) | st.sampled_from([0.0, 7.0]),
    "user_slug": around(1, 64, "u"),
    "source": nullable(around(0, 64, "t")),
    "thread_summary": around(0, 2000, "s"),
    "recent_turns": TURNS,
    "turn_count": st.integers(0, 10**6),
    "active_feature": nullable(around(0, 200, "f")), "active_phase": nullable(around(0, 200, "p")),
    "pending": PENDING, "last_answer": ANSWER, "last_updated": TIMESTAMP,
})
JUNK = st.sampled_from([None, True, False, 0, -1, 1, 1.0, 1.5, -0.5, 2**70, "", "x", "clarify", "user", [], [1], {},
                        {"role": "user"}]).map(copy.deepcopy)


def paths(doc: object, here: tuple = ()) -> list[tuple]:
    out = [here]
    if isinstance(doc, dict):
        for k, item in doc.items():
            out += paths(item, here + (k,))
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            out += paths(item, here + (i,))
    return out


def _at(doc: object, path: tuple) -> object:
    for step in path:
        doc = doc[step]  # type: ignore[index]
    return doc


@st.composite
def near_misses(draw: st.DrawFn) -> object:
    """A generated document, then up to three small damages, each where it fits: a replaced
    value, a dropped key, an extra key, an extra list item."""
    doc = copy.deepcopy(draw(DOC))  # no shared sub-objects: each damage hits one place
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        everywhere = paths(doc)
        kind = draw(st.sampled_from(["replace", "replace", "drop", "add", "add", "append"]))
        if kind == "replace":
            where = draw(st.sampled_from(everywhere))
            if not where:
                doc = draw(JUNK)
                break
            _at(doc, where[:-1])[where[-1]] = draw(JUNK)  # type: ignore[index]
        elif kind == "drop":
            keys = [w for w in everywhere if w and isinstance(_at(doc, w[:-1]), dict)]
            if keys:
                where = draw(st.sampled_from(keys))
                del _at(doc, where[:-1])[where[-1]]  # type: ignore[attr-defined]
        elif kind == "add":
            objects = [w for w in everywhere if isinstance(_at(doc, w), dict)]
            if objects:
                target = _at(doc, draw(st.sampled_from(objects)))
                target[draw(st.sampled_from(["extra", "Role", "session_id", "type", "role", "pending"]))] = draw(JUNK)  # type: ignore[index]
        else:
            lists = [w for w in everywhere if isinstance(_at(doc, w), list)]
            if lists:
                _at(doc, draw(st.sampled_from(lists))).append(draw(JUNK))  # type: ignore[attr-defined]
    return doc


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=near_misses())
@example(doc={**sample(), "revision": True})
@example(doc={**sample(), "schema_version": True})
@example(doc={**sample(), "revision": 3.0})
@example(doc={**sample(), "revision": 3.5})
@example(doc={**sample(), "pending": {**sample()["pending"], "type": "Clarify"}})
def test_stdlib_and_jsonschema_agree(doc: object) -> None:
    fast, full = verdicts(doc)
    assert fast == full, json.dumps(doc)[:2000]


def full_sample() -> dict:
    """The sample with every optional part present, so every schema location exists."""
    doc = sample()
    doc["pending"]["session_id"] = "s2"
    doc["last_answer"] = {"question": "Which host?", "options": ["vps", "home"], "answer": "vps", "answered_ts": TS}
    return doc


LENGTHS = (0, 1, 19, 20, 40, 41, 63, 64, 65, 199, 200, 201, 999, 1000, 1001, 1999, 2000, 2001, 3999, 4000, 4001)


def single_damages() -> list[tuple[str, object]]:
    """Every single damage of the full sample: each value replaced by each junk value and by
    strings of every boundary length, each key dropped, an extra key on each object, an extra
    item in each list."""
    junk = [None, True, False, 0, -1, 1, 1.0, 1.5, 2**70, "", "1", "x", "clarify", "user", "agent", [], [1], {}, {"role": "user"}]
    out: list[tuple[str, object]] = []
    base = full_sample()
    for where in paths(base):
        values = junk + ["é" * n for n in LENGTHS]
        for value in values:
            doc = copy.deepcopy(base)
            if where:
                _at(doc, where[:-1])[where[-1]] = copy.deepcopy(value)  # type: ignore[index]
            else:
                doc = copy.deepcopy(value)
            out.append((f"{where} = {str(value)[:20]}", doc))
        target = _at(base, where)
        if where and isinstance(_at(base, where[:-1]), dict):
            doc = copy.deepcopy(base)
            del _at(doc, where[:-1])[where[-1]]  # type: ignore[attr-defined]
            out.append((f"drop {where}", doc))
        if isinstance(target, dict):
            for key in ("extra", "Role", "session_id", "type"):
                doc = copy.deepcopy(base)
                _at(doc, where)[key] = "x"  # type: ignore[index]
                out.append((f"{where} + {key}", doc))
        if isinstance(target, list):
            for item in (copy.deepcopy(target[0]) if target else "x", "x", None):
                doc = copy.deepcopy(base)
                _at(doc, where).append(copy.deepcopy(item))  # type: ignore[attr-defined]
                out.append((f"{where} + item", doc))
    return out


def test_every_single_damage_of_a_full_document_gets_the_same_verdict() -> None:
    damages = single_damages()
    assert len(damages) > 1000
    disagree = [name for name, doc in damages if len(set(verdicts(doc))) != 1]
    assert disagree == []
    valid = sum(verdicts(doc)[0] for _, doc in damages)
    assert 0 < valid < len(damages)


def test_the_generator_produces_both_verdicts() -> None:
    """Guard against a differential test that only ever sees valid (or only invalid) documents."""
    seen = []

    @settings(max_examples=200, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(doc=near_misses())
    def collect(doc: object) -> None:
        seen.append(verdicts(doc)[1])

    collect()
    assert 0.1 < sum(seen) / len(seen) < 0.9, sum(seen) / len(seen)
