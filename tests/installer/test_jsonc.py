"""Tests for the text-preserving JSONC editor.

The installer edits files users maintain by hand, so the tests pin two things: the parse matches
`json` on the JSON subset (with errors pointing at the right spot), and edits touch only the bytes
they own — an append followed by removing the same item must give the original text back.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sys
import tracemalloc
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leanctx.installer import jsonc
from leanctx.installer.jsonc import Document, JsoncError, Path, has_comments, loads

PROPERTY = settings(max_examples=int(__import__("os").environ.get("JSONC_EXAMPLES", 200)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
MARK = "leanctx-test"  # generated keys never contain "-", so this key only appears in our items


def clone(value: object) -> object:
    """Deep copy that never shares subtrees (copy.deepcopy keeps generated aliasing)."""
    return json.loads(json.dumps(value))


def same(a: object, b: object) -> bool:
    """Equal as JSON text: unlike ==, True differs from 1 and key order counts."""
    return json.dumps(a) == json.dumps(b)


# -- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "msg", "line", "col"),
    [
        ("", "empty document", 1, 1),
        ("   ", "empty document", 1, 4),
        ("  \n // only a comment\n", "empty document", 3, 1),
        ("/* x */", "empty document", 1, 8),
        ("\ufeff", "empty document", 1, 1),
        ('{"a": "abc', "unterminated string", 1, 7),
        ('{\n  "a": "abc\n}', "unterminated string", 2, 8),
        ('{\n  "a": 1\n  "b": 2\n}', "expected ',' or '}', found '\"'", 3, 3),
        ("[1 2]", "expected ',' or ']', found '2'", 1, 4),
        ("{}\n// c\nx", "extra data after the document", 3, 1),
        ("[1] [2]", "extra data after the document", 1, 5),
        ("[\n  True\n]", "invalid literal 'True'", 2, 3),
        ("[tru]", "invalid literal 'tru'", 1, 2),
        ("[NaN]", "invalid literal 'NaN'", 1, 2),
        ("[-Infinity]", "expected a value, found '-'", 1, 2),
        ("{\n  /* never closed\n", "unterminated comment", 2, 3),
        ("{'a': 1}", "expected a property name in double quotes, found \"'\"", 1, 2),
        ("{a: 1}", "expected a property name in double quotes, found 'a'", 1, 2),
        ('{"a" 1}', "expected ':', found '1'", 1, 6),
        ("[1,,2]", "expected a value, found ','", 1, 4),
        ("[,]", "expected a value, found ','", 1, 2),
        ("{,}", "expected a property name in double quotes, found ','", 1, 2),
        ("[01]", "expected ',' or ']', found '1'", 1, 3),
        ("[.5]", "expected a value, found '.'", 1, 2),
        ("[1, 2", "unexpected end of input", 1, 6),
        ('{"a":', "unexpected end of input", 1, 6),
        ('["a\tb"]', "invalid control character in string", 1, 4),
        ('["\\x"]', "invalid escape in string", 1, 3),
        ('["\\u12"]', "invalid \\u escape in string", 1, 3),
        ("/ 1", "expected a value, found '/'", 1, 1),
        ('\ufeff{"a": tru}', "invalid literal 'tru'", 1, 7),
    ],
)
def test_parse_errors_are_located(text: str, msg: str, line: int, col: int) -> None:
    with pytest.raises(JsoncError) as caught:
        loads(text)
    error = caught.value
    assert (error.msg, error.line, error.col) == (msg, line, col)
    assert str(error) == f"{msg} at line {line} column {col}"
    assert isinstance(error, ValueError)
    with pytest.raises(JsoncError):
        Document(text)


def test_pathological_input_is_a_parse_error() -> None:
    with pytest.raises(JsoncError, match="nesting too deep at line 1 column 1"):
        loads("[" * 100_000)
    with pytest.raises(JsoncError, match="number too long at line 1 column 2"):
        loads("[" + "9" * 5000 + "]")


def test_error_pos_is_the_offset() -> None:
    with pytest.raises(JsoncError) as caught:
        loads('{\n  "a": 1\n  "b": 2\n}')
    assert caught.value.pos == 13


def test_comments_and_trailing_commas() -> None:
    text = """// leading
    {
      /* block */ "a": [1, 2, /* in */ 3,], // after
      "b": {"c": null,},
    } /* trailing */
    """
    assert loads(text) == {"a": [1, 2, 3], "b": {"c": None}}


def test_comment_markers_inside_strings_are_text() -> None:
    text = '{"url": "http://x", "glob": "src/*.py", "q": "\\"//", "end": "*/"}'
    assert loads(text) == json.loads(text)
    assert not has_comments(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1} // yes', True),
        ("/* x */{}", True),
        ('{"a": "/* no */"}', False),
        ('{"a": "\\\\"} // after an escaped backslash', True),
        ("{} /* unclosed", True),
        ("{", False),
    ],
)
def test_has_comments(text: str, expected: bool) -> None:
    assert has_comments(text) is expected


@pytest.mark.parametrize(
    "text",
    [
        "[-0, 0, 1.5e3, 1E-2, -12.25e+1, 123456789012345678901234567890]",
        '["\\ud83d\\ude00", "\\ud800", "\\u00e9\\n\\t\\/\\b\\f\\r\\"\\\\", "é"]',
        '{"a": 1, "a": 2, "b": {"c": 1, "c": [3]}}',
        "true",
        '"just a string"',
        "[[], {}, [[[]]]]",
    ],
)
def test_matches_json_on_plain_json(text: str) -> None:
    assert same(loads(text), json.loads(text))


def test_duplicate_keys_last_wins() -> None:
    assert loads('{"a": 1, "b": 0, "a": 2}') == {"a": 2, "b": 0}


def test_bom_is_allowed() -> None:
    assert loads('\ufeff// c\n{"a": 1}') == {"a": 1}
    doc = Document('\ufeff{\n  "a": []\n}\n')
    doc.append(("a",), 1)
    assert doc.text == '\ufeff{\n  "a": [\n    1\n  ]\n}\n'


# -- reading ------------------------------------------------------------------------------


def test_get_has_and_empty_containers() -> None:
    doc = Document('{"a": {"b": [1, {"c": null}]}, "e": [], "f": {/* c */}, "s": "x"}')
    assert doc.get(("a", "b", 1, "c")) is None
    assert doc.get(()) == doc.value
    assert doc.has(("a", "b", 0))
    assert not doc.has(("a", "b", 2))
    assert not doc.has(("a", "z"))
    assert not doc.has(("s", "x"))  # wrong type is "not there" for has
    with pytest.raises(KeyError):
        doc.get(("a", "z"))
    with pytest.raises(IndexError):
        doc.get(("a", "b", 5))
    with pytest.raises(IndexError):
        doc.get(("a", "b", -1))
    with pytest.raises(TypeError):
        doc.get(("s", "x"))
    with pytest.raises(TypeError, match="path steps must be str or int"):
        doc.get(("a", "b", True))
    assert not doc.has(("a", 1.5))
    assert doc.is_empty_container(("e",))
    assert doc.is_empty_container(("f",))
    assert not doc.is_empty_container(("a",))
    assert not doc.is_empty_container(("s",))
    assert not doc.is_empty_container(("missing",))


# -- appending ----------------------------------------------------------------------------

CLAUDE = """{
  // my settings
  "model": "opus",
  "hooks": {
    "Stop": [
      {
        "hooks": [{"type": "command", "command": "say done"}]
      }
    ]
  }
}
"""

OUR_GROUP = {"hooks": [{"type": "command", "command": "leanctx-hook stop"}]}


def test_append_to_claude_settings_and_remove_again() -> None:
    doc = Document(CLAUDE)
    assert doc.append(("hooks", "Stop"), OUR_GROUP) == []
    assert doc.text == CLAUDE.replace(
        """      }
    ]""",
        """      },
      {
        "hooks": [
          {
            "type": "command",
            "command": "leanctx-hook stop"
          }
        ]
      }
    ]""",
    )
    assert doc.value["hooks"]["Stop"][-1] == OUR_GROUP
    assert doc.remove_items(("hooks", "Stop"), lambda group: group == OUR_GROUP) == 1
    assert doc.text == CLAUDE


def test_append_creates_missing_containers_as_one_member() -> None:
    text = '{\n  "model": "opus" // favourite\n}\n'
    doc = Document(text)
    assert doc.append(("hooks", "Stop"), {"a": 1}) == [("hooks",), ("hooks", "Stop")]
    assert doc.text == (
        "{\n"
        '  "model": "opus", // favourite\n'
        '  "hooks": {\n'
        '    "Stop": [\n'
        "      {\n"
        '        "a": 1\n'
        "      }\n"
        "    ]\n"
        "  }\n"
        "}\n"
    )
    assert doc.append(("hooks", "Pre", "deep"), 2) == [("hooks", "Pre"), ("hooks", "Pre", "deep")]
    assert doc.get(("hooks", "Pre")) == {"deep": [2]}
    assert doc.remove_key(("hooks",))
    assert doc.text == text


def test_append_into_empty_file_object_and_back() -> None:
    doc = Document("{}\n")
    assert doc.append(("hooks", "Stop"), 1) == [("hooks",), ("hooks", "Stop")]
    assert doc.text == '{\n  "hooks": {\n    "Stop": [\n      1\n    ]\n  }\n}\n'
    assert doc.remove_items(("hooks", "Stop"), lambda v: v == 1) == 1
    assert doc.text == '{\n  "hooks": {\n    "Stop": []\n  }\n}\n'
    for created in reversed([("hooks",), ("hooks", "Stop")]):
        assert doc.is_empty_container(created)
        assert doc.remove_key(created)
    assert doc.text == "{}\n"


def test_append_into_empty_array_keeps_its_comments() -> None:
    text = '{\n  "a": [\n    // nothing yet\n  ],\n  "b": [ /* none */ ]\n}'
    doc = Document(text)
    doc.append(("a",), 1)
    doc.append(("b",), {"x": 2})
    assert doc.text == (
        "{\n"
        '  "a": [\n'
        "    // nothing yet\n"
        "    1\n"
        "  ],\n"
        '  "b": [ /* none */\n'
        "    {\n"
        '      "x": 2\n'
        "    }\n"
        "  ]\n"
        "}"
    )
    doc.remove_items(("a",), lambda v: True)
    assert doc.text.startswith('{\n  "a": [\n    // nothing yet\n  ],\n')


def test_tab_indented_file() -> None:
    doc = Document('{\n\t"a": [\n\t\t1\n\t]\n}')
    doc.append(("a",), {"x": [1]})
    assert doc.text == '{\n\t"a": [\n\t\t1,\n\t\t{\n\t\t\t"x": [\n\t\t\t\t1\n\t\t\t]\n\t\t}\n\t]\n}'
    doc.set_key(("b",), {})
    assert doc.text.endswith('\n\t],\n\t"b": {}\n}')


def test_four_space_indent_is_detected() -> None:
    doc = Document('{\n    /* note\n  odd */\n    "a": {}\n}')
    doc.set_key(("a", "k"), [1])
    assert doc.text == '{\n    /* note\n  odd */\n    "a": {\n        "k": [\n            1\n        ]\n    }\n}'


def test_crlf_is_reused() -> None:
    text = '{\r\n  "a": [\r\n    1 // one\r\n  ]\r\n}\r\n'
    doc = Document(text)
    doc.append(("a",), {"b": 2})
    doc.append(("c", "d"), 3)
    assert doc.text == (
        '{\r\n  "a": [\r\n    1, // one\r\n    {\r\n      "b": 2\r\n    }\r\n  ],\r\n'
        '  "c": {\r\n    "d": [\r\n      3\r\n    ]\r\n  }\r\n}\r\n'
    )
    assert doc.remove_key(("c",))
    assert doc.remove_items(("a",), lambda v: v == {"b": 2}) == 1
    assert doc.text == text


def test_minified_file_stays_minified() -> None:
    doc = Document('{"a":[1,2],"b":{"c":true},"e":{}}')
    doc.append(("a",), {"x": [1, 2]})
    doc.set_key(("b", "d"), [1, 2])
    doc.append(("e", "f"), 1)
    assert doc.append(("new", "list"), "é") == [("new",), ("new", "list")]
    assert doc.text == '{"a":[1,2,{"x":[1,2]}],"b":{"c":true,"d":[1,2]},"e":{"f":[1]},"new":{"list":["é"]}}'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a":[1]}', '{"a":[1,{"k":2}]}'),
        ('{"a": [1]}', '{"a": [1, {"k": 2}]}'),
        ("[[1]]", "[[1, {\"k\": 2}]]"),
        ("[[1],[2]]", '[[1,{"k":2}],[2]]'),
    ],
)
def test_separator_spacing_follows_the_file(text: str, expected: str) -> None:
    doc = Document(text)
    doc.append((0,) if text.startswith("[") else ("a",), {"k": 2})
    assert doc.text == expected


def test_one_line_container_in_pretty_file() -> None:
    doc = Document('{\n  "a": [1, 2],\n  "b": {"c": {}}\n}')
    doc.append(("a",), {"x": 1})
    doc.append(("b", "c", "d"), 1)
    assert doc.text == '{\n  "a": [1, 2, {"x": 1}],\n  "b": {"c": {"d": [1]}}\n}'


def test_append_after_entry_that_shares_the_bracket_line() -> None:
    doc = Document('{\n  "a": [{\n    "x": 1\n  }]\n}')
    doc.append(("a",), {"y": 2})
    assert doc.text == '{\n  "a": [{\n    "x": 1\n  }, {\n    "y": 2\n  }]\n}'


def test_append_with_trailing_comma() -> None:
    text = "[\n  1,\n]"
    doc = Document(text)
    doc.append((), 2)
    assert doc.text == "[\n  1,\n  2,\n]"
    doc.remove_items((), lambda v: v == 2)
    assert doc.text == text


def test_append_after_trailing_comment_keeps_comment_with_its_entry() -> None:
    text = "[\n  1, // one\n  2 /* two */ // still two\n]"
    doc = Document(text)
    doc.append((), 3)
    assert doc.text == "[\n  1, // one\n  2, /* two */ // still two\n  3\n]"
    doc.remove_items((), lambda v: v == 3)
    assert doc.text == text


def test_wrong_type_raises_and_leaves_text_alone() -> None:
    cases: list[tuple[str, Callable[[Document], object], str]] = [
        ('{"hooks": []}', lambda d: d.append(("hooks", "Stop"), 1), "('hooks',) is an array, expected an object"),
        ('{"hooks": {"Stop": "x"}}', lambda d: d.append(("hooks", "Stop"), 1), "('hooks', 'Stop') is a string"),
        ('{"hooks": {"Stop": {}}}', lambda d: d.append(("hooks", "Stop"), 1), "expected an array"),
        ('{"hooks": "s"}', lambda d: d.set_key(("hooks", "a"), 1), "('hooks',) is a string"),
        ('{"hooks": 1}', lambda d: d.remove_items(("hooks",), bool), "('hooks',) is a number"),
        ('{"hooks": null}', lambda d: d.remove_key(("hooks", "x")), "('hooks',) is null"),
        ('{"hooks": {"0": []}}', lambda d: d.append(("hooks", 0), 1), "('hooks',) is an object, expected an array"),
        ("[1]", lambda d: d.append(("a",), 1), "() is an array"),
        ('{"a": true}', lambda d: d.get(("a", "b")), "('a',) is a boolean"),
    ]
    for text, edit, message in cases:
        doc = Document(text)
        with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
            edit(doc)
        assert doc.text == text


def test_unserializable_items_leave_text_alone() -> None:
    doc = Document('{"a": [1]}')
    with pytest.raises(TypeError):
        doc.append(("a",), object())
    with pytest.raises(ValueError):
        doc.append(("a",), float("nan"))
    with pytest.raises(IndexError):
        doc.append(("b", 0), 1)
    with pytest.raises(IndexError):
        doc.append(("a", 3), 1)
    assert doc.text == '{"a": [1]}'


# -- removing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("[\n  1,\n  2,\n  3\n]", 2, "[\n  1,\n  3\n]"),
        ("[\n  1,\n  2,\n  3\n]", 1, "[\n  2,\n  3\n]"),
        ("[\n  1,\n  2,\n  3\n]", 3, "[\n  1,\n  2\n]"),
        ("[1, 2, 3,]", 3, "[1, 2,]"),
        ("[\n  1\n]", 1, "[]"),
        ("[ 1, ]", 1, "[]"),
        ("[\n  1, // one\n  2\n]", 2, "[\n  1 // one\n]"),
        ("[\n  1, // one\n  2\n]", 1, "[\n  // one\n  2\n]"),
        ("[\n  // first\n  1,\n  2\n]", 1, "[\n  // first\n  2\n]"),
        ("[\n  1,\n  // about two\n  2\n]", 2, "[\n  1\n  // about two\n]"),
        ("[\n  1,\n  /* a */ 2\n]", 2, "[\n  1\n  /* a */\n]"),
        ("[\n  1, /* a */ 2\n]", 2, "[\n  1 /* a */\n]"),
        ("[1, /* keep */ 2, 3]", 2, "[1, /* keep */ 3]"),
        ("[1 /* c */, 2]", 1, "[/* c */ 2]"),
        ("[\n  1 // only\n]", 1, "[\n  // only\n]"),
        ("[\n  // only\n  1,\n]", 1, "[\n  // only\n]"),
    ],
)
def test_remove_items_layouts(text: str, value: int, expected: str) -> None:
    doc = Document(text)
    assert doc.remove_items((), lambda v: v == value) == 1
    assert doc.text == expected


def test_remove_items_counts_and_missing_paths() -> None:
    doc = Document('{"a": [1, 2, 1, 3, 1]}')
    assert doc.remove_items(("a",), lambda v: v == 1) == 3
    assert doc.text == '{"a": [2, 3]}'
    assert doc.remove_items(("a",), lambda v: False) == 0
    assert doc.remove_items(("missing", "deeper"), lambda v: True) == 0
    assert doc.remove_items(("a",), lambda v: True) == 2
    assert doc.text == '{"a": []}'


def test_remove_key_takes_the_value_comments_and_keeps_others() -> None:
    text = '{\n  // about a\n  "a": {\n    // inner\n    "x": 1\n  },\n  "b": 2 // bee\n}'
    doc = Document(text)
    assert doc.remove_key(("a",))
    assert doc.text == '{\n  // about a\n  "b": 2 // bee\n}'
    assert not doc.remove_key(("a",))
    assert not doc.remove_key(("z", "y"))
    assert doc.remove_key(("b",))
    assert doc.text == "{\n  // about a\n  // bee\n}"
    assert doc.value == {}


def test_remove_key_drops_every_duplicate() -> None:
    doc = Document('{"a": 1, "b": 2, "a": 3}')
    assert doc.value == {"a": 3, "b": 2}
    assert doc.remove_key(("a",))
    assert doc.text == '{"b": 2}'


def test_set_key_then_remove_key_restores_text() -> None:
    text = '{\n  "x": 1, // one\n  "y": [\n    2\n  ]\n}\n'
    doc = Document(text)
    doc.set_key(("z",), {"deep": [1, 2]})
    assert doc.text == '{\n  "x": 1, // one\n  "y": [\n    2\n  ],\n  "z": {\n    "deep": [\n      1,\n      2\n    ]\n  }\n}\n'
    assert doc.remove_key(("z",))
    assert doc.text == text


def test_remove_index() -> None:
    doc = Document("[\n  1,\n  2,\n  3\n]")
    doc.remove_index((), 1)
    assert doc.text == "[\n  1,\n  3\n]"
    with pytest.raises(IndexError):
        doc.remove_index((), 2)
    with pytest.raises(IndexError):
        Document("{}").remove_index(("missing",), 0)


# -- replacing ----------------------------------------------------------------------------


def test_set_key_replaces_in_place() -> None:
    doc = Document('{\n  "timeout": 5, // seconds\n  "list": [\n    {"old": 1}, // keep me\n    2\n  ]\n}')
    doc.set_key(("timeout",), 10)
    doc.set_key(("list", 0), {"new": [1]})
    assert doc.text == (
        '{\n  "timeout": 10, // seconds\n  "list": [\n    {\n      "new": [\n        1\n      ]\n    }, // keep me\n'
        "    2\n  ]\n}"
    )
    doc.set_key(("list", 1), 3)
    assert doc.value == {"timeout": 10, "list": [{"new": [1]}, 3]}
    with pytest.raises(IndexError):
        doc.set_key(("list", 2), 4)


def test_set_key_with_equal_value_keeps_the_text() -> None:
    text = '{"a": {"b":   [1,2]}, "c": 1.0}'
    doc = Document(text)
    doc.set_key(("a",), {"b": [1, 2]})
    doc.set_key(("c",), 1.0)
    assert doc.text == text
    doc.set_key(("c",), 1)  # 1 and 1.0 are different JSON
    assert doc.text == '{"a": {"b":   [1,2]}, "c": 1}'


def test_set_key_on_duplicate_replaces_the_visible_one() -> None:
    doc = Document('{"a": 1, "a": 2}')
    doc.set_key(("a",), 3)
    assert doc.text == '{"a": 1, "a": 3}'
    assert doc.value == {"a": 3}


def test_comments_everywhere_survive_edits() -> None:
    text = """/* head */ {
  // 1
  "hooks" /* 2 */ : /* 3 */ { // 4
    "Stop": [ // 5
      /* 6 */ {"command": "theirs"} /* 7 */ , // 8
      {"command": "mine"} // 9
      // 10
    ], // 11
    /* 12 */
  }, // 13
  "k": "v://x" // 14
} // 15
"""
    doc = Document(text)
    doc.append(("hooks", "Stop"), {"command": "ours"})
    doc.append(("hooks", "Start"), {"command": "ours"})
    doc.set_key(("hooks", "Stop", 0, "extra"), True)
    doc.set_key(("top",), [1])
    for n in range(1, 16):
        assert f"/* {n} */" in doc.text or f"// {n}\n" in doc.text
    assert doc.remove_items(("hooks", "Stop"), lambda v: v == {"command": "ours"}) == 1
    assert doc.remove_key(("hooks", "Start"))
    assert doc.remove_key(("hooks", "Stop", 0, "extra"))
    assert doc.remove_key(("top",))
    assert doc.text == text
    assert has_comments(doc.text)


# -- properties ---------------------------------------------------------------------------

KEYS = st.text(alphabet='ab/*"\\ é\n', max_size=4)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet='xy/*"\\ é\n\t\u2028', max_size=6)
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=12
)
GAPS = [
    "",
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "\n    ",
    " // line {n}\n",
    "// with \"quote\" and /* {n}\n",
    "/* block {n} */",
    " /* multi {n}\n   line */ ",
    "/**/",
]


class Renderer:
    """Renders a value as JSONC with drawn layout, indentation, trailing commas and comments.

    The choices are drawn up front as two lists and cycled (cheap to generate, and they shrink
    towards plain JSON). Every comment is numbered `#n#`, so tests can check that each survives."""

    def __init__(self, nl: str, unit: str, gaps: list[str], flags: list[bool]) -> None:
        self.nl, self.unit = nl, unit
        self.gaps, self.flags = itertools.cycle(gaps), itertools.cycle(flags)
        self.counter = itertools.count()

    def __repr__(self) -> str:
        return f"Renderer(nl={self.nl!r}, unit={self.unit!r})"

    def gap(self) -> str:
        return next(self.gaps).format(n=f"#{next(self.counter)}#").replace("\n", self.nl)

    def document(self, value: object) -> str:
        return self.gap() + self.render(value, 0) + self.gap()

    def render(self, value: object, depth: int) -> str:
        if isinstance(value, dict):
            opener, closer = "{", "}"
            items = [
                json.dumps(k, ensure_ascii=False) + self.gap() + ":" + self.gap() + self.render(v, depth + 1)
                for k, v in value.items()
            ]
        elif isinstance(value, list):
            opener, closer = "[", "]"
            items = [self.render(v, depth + 1) for v in value]
        else:
            return json.dumps(value, ensure_ascii=False)
        if not items:
            return opener + self.gap() + closer
        trailing = next(self.flags)
        parts = [opener, self.gap()]
        if next(self.flags):  # one entry per line
            for i, item in enumerate(items):
                parts += [self.nl, self.unit * (depth + 1), item, self.gap()]
                if i < len(items) - 1 or trailing:
                    parts += [",", self.gap()]
            parts += [self.nl, self.unit * depth, closer]
        else:
            for i, item in enumerate(items):
                parts += [item, self.gap()]
                if i < len(items) - 1 or trailing:
                    parts += [",", self.gap()]
            parts.append(closer)
        return "".join(parts)


RENDERERS = st.builds(
    Renderer,
    st.sampled_from(["\n", "\r\n"]),
    st.sampled_from(["  ", "    ", "\t", " "]),
    st.lists(st.sampled_from(GAPS), min_size=1, max_size=30),
    st.lists(st.booleans(), min_size=1, max_size=8),
)


def container_paths(value: object, kind: type, path: Path = ()) -> Iterator[Path]:
    """Paths of the non-empty containers of type `kind` inside `value`."""
    if isinstance(value, kind) and value:
        yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from container_paths(child, kind, path + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from container_paths(child, kind, path + (index,))


@PROPERTY
@given(RENDERERS, VALUES)
def test_loads_matches_json_on_commented_renderings(renderer: Renderer, value: object) -> None:
    text = renderer.document(value)
    assert same(loads(text), json.loads(json.dumps(value)))
    assert same(Document(text).value, value)


def value_at(root: object, path: Path) -> object:
    for step in path:
        root = root[step]  # type: ignore[index]
    return root


@PROPERTY
@given(
    st.data(), RENDERERS, st.dictionaries(KEYS, VALUES, max_size=3), KEYS, st.lists(VALUES, min_size=1, max_size=3), VALUES
)
def test_append_then_remove_restores_text(
    data: st.DataObject, renderer: Renderer, root: dict, key: str, array: list, payload: object
) -> None:
    root[key] = array
    text = renderer.document(root)
    path = data.draw(st.sampled_from(list(container_paths(root, list))))
    item = {MARK: payload}
    doc = Document(text)
    assert doc.append(path, item) == []
    assert same(doc.get(path), [*value_at(root, path), item])  # type: ignore[misc]
    assert same(Document(doc.text).value, doc.value)
    assert doc.remove_items(path, lambda v: isinstance(v, dict) and MARK in v) == 1
    assert doc.text == text


@PROPERTY
@given(st.data(), RENDERERS, st.dictionaries(KEYS, VALUES, min_size=1, max_size=4), VALUES)
def test_set_key_then_remove_key_restores_any_rendered_text(
    data: st.DataObject, renderer: Renderer, root: dict, payload: object
) -> None:
    text = renderer.document(root)
    path = data.draw(st.sampled_from(list(container_paths(root, dict)))) + (MARK,)
    doc = Document(text)
    doc.set_key(path, payload)
    assert same(doc.get(path), payload)
    assert list(doc.get(path[:-1]))[-1] == MARK  # type: ignore[call-overload]
    assert same(Document(doc.text).value, doc.value)
    assert doc.remove_key(path)
    assert doc.text == text


# A plain-Python model of the edit API; the document must agree with it after every step.

SMALL_KEYS = st.sampled_from(["a", "b", "c"])
SMALL_VALUES = st.recursive(
    st.sampled_from([None, True, 0, 1, "x", "//", []]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(SMALL_KEYS, inner, max_size=2),
    max_leaves=5,
)
PATHS = st.lists(SMALL_KEYS | st.sampled_from([0, 1]), max_size=3).map(tuple)


class Model:
    """The edit API on a plain Python value, written the obvious way."""

    def __init__(self, value: dict) -> None:
        self.value = clone(value)

    def _walk(self, path: Path) -> tuple[object, int]:
        """Deepest existing node along `path` and how many steps reached it."""
        node: object = self.value
        for depth, step in enumerate(path):
            if isinstance(step, str):
                if not isinstance(node, dict):
                    raise TypeError(path[:depth])
                if step not in node:
                    return node, depth
                node = node[step]
            else:
                if not isinstance(node, list):
                    raise TypeError(path[:depth])
                if not 0 <= step < len(node):
                    return node, depth
                node = node[step]
        return node, len(path)

    def _create(self, node: object, path: Path, depth: int, leaf: object) -> list[Path]:
        missing = path[depth:]
        if not all(isinstance(step, str) for step in missing):
            raise IndexError(path)
        for key in reversed(missing[1:]):
            leaf = {key: leaf}
        assert isinstance(node, dict)
        node[missing[0]] = leaf
        return [path[:end] for end in range(depth + 1, len(path) + 1)]

    def append(self, path: Path, item: object) -> list[Path]:
        node, depth = self._walk(path)
        if depth < len(path):
            return self._create(node, path, depth, [item])
        if not isinstance(node, list):
            raise TypeError(path)
        node.append(item)
        return []

    def set_key(self, path: Path, value: object) -> None:
        if not path:
            raise ValueError(path)
        node, depth = self._walk(path)
        if depth < len(path):
            self._create(node, path, depth, value)
        else:
            value_at(self.value, path[:-1])[path[-1]] = value  # type: ignore[index]

    def remove_key(self, path: Path) -> bool:
        if not path or not isinstance(path[-1], str):
            raise TypeError(path)
        _, depth = self._walk(path)
        if depth < len(path):
            return False
        del value_at(self.value, path[:-1])[path[-1]]  # type: ignore[attr-defined]
        return True

    def remove_items(self, path: Path, predicate: Callable[[object], bool]) -> int:
        node, depth = self._walk(path)
        if depth < len(path):
            return 0
        if not isinstance(node, list):
            raise TypeError(path)
        kept = [v for v in node if not predicate(v)]
        removed = len(node) - len(kept)
        node[:] = kept
        return removed


def is_scalar(value: object) -> bool:
    return not isinstance(value, (dict, list))


OPERATIONS = st.one_of(
    st.tuples(st.just("append"), PATHS, SMALL_VALUES),
    st.tuples(st.just("set_key"), PATHS, SMALL_VALUES),
    st.tuples(st.just("remove_key"), PATHS),
    st.tuples(st.just("remove_items"), PATHS, st.just(is_scalar)),
)


@PROPERTY
@given(RENDERERS, st.dictionaries(SMALL_KEYS, SMALL_VALUES, max_size=3), st.lists(OPERATIONS, max_size=8))
def test_edit_sequences_agree_with_a_model(renderer: Renderer, root: dict, operations: list) -> None:
    doc = Document(renderer.document(root))
    model = Model(root)
    for name, *arguments in operations:
        before_text, before_value = doc.text, clone(model.value)
        try:
            expected = getattr(model, name)(*arguments)
        except (TypeError, IndexError, ValueError) as error:
            model.value = before_value
            with pytest.raises(type(error)):
                getattr(doc, name)(*arguments)
            assert doc.text == before_text
        else:
            assert getattr(doc, name)(*arguments) == expected
        assert same(doc.value, model.value)
        assert same(Document(doc.text).value, doc.value)
        assert same(loads(doc.text), doc.value)


@PROPERTY
@given(RENDERERS, st.dictionaries(SMALL_KEYS, SMALL_VALUES, max_size=3), st.lists(PATHS, max_size=5))
def test_appends_keep_every_comment(renderer: Renderer, root: dict, paths: list) -> None:
    text = renderer.document(root)
    doc = Document(text)
    for path in paths:
        try:
            doc.append(path, {"c": "/* not a comment */"})
        except (TypeError, IndexError):
            continue
    for n in range(next(renderer.counter)):
        assert text.count(f"#{n}#") == doc.text.count(f"#{n}#")


# -- the strict-JSON fast path ------------------------------------------------------------
# Strict JSON (the usual host file, and the big one: ~/.claude.json) is decoded by `json` and
# scanned lazily; everything else goes through the span-recording parser. Both must agree on every
# value and every edit, byte for byte.


@contextlib.contextmanager
def full_parser_only() -> Iterator[None]:
    jsonc.STRICT_FAST_PATH = False
    try:
        yield
    finally:
        jsonc.STRICT_FAST_PATH = True


def strict_render(value: object, draw: Callable, depth: int = 0) -> str:
    """Strict JSON with drawn layout, ASCII or raw unicode strings, and (for objects drawn as pairs)
    duplicate keys."""
    indent = draw(st.sampled_from([None, 2, 4, "\t"]))
    sep = draw(st.sampled_from([(",", ":"), (", ", ": "), (",", ": ")]))
    ascii_only = draw(st.booleans())
    if isinstance(value, Pairs):
        inner = [json.dumps(k, ensure_ascii=ascii_only) + sep[1] + strict_render(v, draw, depth + 1) for k, v in value]
        opener, closer = "{", "}"
    elif isinstance(value, list):
        inner = [strict_render(v, draw, depth + 1) for v in value]
        opener, closer = "[", "]"
    else:
        return json.dumps(value, ensure_ascii=ascii_only)
    if not inner:
        return opener + closer
    if indent is None:
        return opener + sep[0].join(inner) + closer
    pad = "\n" + (indent if isinstance(indent, str) else " " * indent) * (depth + 1)
    end = "\n" + (indent if isinstance(indent, str) else " " * indent) * depth
    return opener + pad + ("," + pad).join(inner) + end + closer


class Pairs(list):
    """An object drawn as a list of (key, value) pairs, so keys may repeat."""


STRICT_VALUES = st.recursive(
    SCALARS | st.text(alphabet="a\u00e9\u65e5\U0001f680\x7f\u2028", max_size=4),
    lambda inner: st.lists(inner, max_size=4) | st.lists(st.tuples(SMALL_KEYS | KEYS, inner), max_size=4).map(Pairs),
    max_leaves=14,
)


@PROPERTY
@given(st.data(), STRICT_VALUES, st.booleans(), st.lists(OPERATIONS, max_size=8))
def test_fast_path_and_full_parser_agree(data: st.DataObject, value: object, bom: bool, operations: list) -> None:
    text = ("\ufeff" if bom else "") + strict_render(Pairs([("a", value)]), data.draw) + data.draw(st.sampled_from(["", "\n", " \r\n"]))
    expected = json.loads(text.removeprefix("\ufeff"))
    fast = Document(text)
    with full_parser_only():
        full = Document(text)
        assert same(loads(text), expected)
    assert same(fast.value, expected) and same(full.value, expected) and same(loads(text), expected)
    edit_both(fast, full, operations)
    assert same(fast.value, json.loads(fast.text.removeprefix("\ufeff")))


@PROPERTY
@given(st.data(), STRICT_VALUES, st.booleans(), st.lists(OPERATIONS, max_size=8))
def test_utf8_bytes_and_decoded_text_agree(data: st.DataObject, value: object, bom: bool, operations: list) -> None:
    """`Document.from_utf8` holds strict JSON as its bytes read as latin-1 (a big ~/.claude.json
    at one byte a character): every key, value, edit and error is the decoded text's."""
    text = ("\ufeff" if bom else "") + strict_render(Pairs([("a", value), ("\u00e9\U0001f680", value)]), data.draw) + "\n"
    expected = json.loads(text.removeprefix("\ufeff"))
    fast = Document.from_utf8(text.encode("utf-8"))
    with full_parser_only():
        full = Document(text)
    assert fast.data == text.encode("utf-8") and not fast.edited
    for key in expected:
        assert same(fast.get((key,)), expected[key])
    assert same(fast.value, expected)
    edit_both(fast, full, operations)
    assert fast.data == full.text.encode("utf-8")
    for key, item in json.loads(full.text.removeprefix("\ufeff")).items():
        assert same(fast.get((key,)), item)


def test_utf8_bytes_that_are_not_utf8_or_not_strict() -> None:
    with pytest.raises(UnicodeDecodeError) as error:
        Document.from_utf8(b'{"a": "\xc3\x28"}')
    assert error.value.start == 7  # the offset in the whole file, as the message names it
    doc = Document.from_utf8('{"\u00e9": [1, 2,],}'.encode("utf-8"))  # trailing commas: the decoded text
    assert doc.get(("\u00e9",)) == [1, 2]
    with pytest.raises(JsoncError):
        Document.from_utf8(b'{"a": }')
    assert jsonc.is_strict_json_utf8('{"\u00e9": "\U0001f680"}'.encode("utf-8"))
    assert jsonc.is_strict_json_utf8(b'\xef\xbb\xbf{}', bom_ok=True) and not jsonc.is_strict_json_utf8(b'\xef\xbb\xbf{}')
    assert not jsonc.is_strict_json_utf8(b'{"a": "\xff"}') and not jsonc.is_strict_json_utf8(b'{"a": NaN}')
    assert not jsonc.is_strict_json_utf8(b"[" * 100_000) and not jsonc.is_strict_json_utf8(b"")


def edit_both(fast: Document, full: Document, operations: list) -> None:
    """Apply `operations` to both documents: same results, errors, text and value after each."""
    for name, *arguments in operations:
        outcomes = []
        for doc in (fast, full):
            with contextlib.ExitStack() as stack:
                if doc is full:
                    stack.enter_context(full_parser_only())
                try:
                    outcomes.append(("ok", getattr(doc, name)(*arguments)))
                except (TypeError, IndexError, ValueError) as error:
                    outcomes.append((type(error), None))
        assert outcomes[0] == outcomes[1], name
        assert fast.text == full.text
        assert same(fast.value, full.value)


@PROPERTY
@given(RENDERERS, st.dictionaries(SMALL_KEYS, SMALL_VALUES, max_size=3), st.lists(OPERATIONS, max_size=8))
def test_commented_documents_fast_and_full_agree(renderer: Renderer, root: dict, operations: list) -> None:
    """Comments (without trailing commas) also take the fast path, on a copy with them blanked."""
    text = renderer.document(root)
    fast = Document(text)
    with full_parser_only():
        full = Document(text)
    assert fast._comments == full._comments
    edit_both(fast, full, operations)


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[-Infinity]", '{"a": 1} x', "\ufeff", "[1,]"])
def test_what_json_accepts_but_jsonc_does_not_stays_an_error(text: str) -> None:
    if text == "[1,]":
        assert loads(text) == [1]  # trailing comma: the full parser accepts it
        return
    with pytest.raises(JsoncError):
        Document(text)


def test_edits_far_from_a_big_member_keep_it_intact() -> None:
    """A big untouched member (Claude Code's `projects` history) is skipped, not rebuilt, and
    survives several edits byte for byte, its known span moved along with the edits before it."""
    projects = {f"/p/{i}": {"history": [{"display": f"prompt {j} \"q\" é 🚀 ]}}", "pastedContents": {}} for j in range(20)]} for i in range(200)}
    text = json.dumps({"mcpServers": {"x": {"command": "x"}}, "projects": projects, "hooks": {}}, ensure_ascii=False, indent=2) + "\n"
    doc = Document(text)
    doc.set_key(("mcpServers", "leanctx"), {"command": "leanctx"})
    doc.append(("hooks", "Stop"), {"hooks": []})
    doc.append(("hooks", "Stop"), {"hooks": [1]})
    doc.set_key(("z",), [1, 2])
    body = json.dumps(projects, ensure_ascii=False, indent=2).replace("\n", "\n  ")
    assert body in doc.text
    assert doc.get(("projects",)) == projects
    assert doc.remove_items(("hooks", "Stop"), lambda v: True) == 2
    assert doc.remove_key(("mcpServers", "leanctx")) and doc.remove_key(("z",)) and doc.remove_key(("hooks", "Stop"))
    assert doc.text == text


@pytest.mark.skipif(sys.version_info < (3, 11), reason="possessive regex quantifiers are 3.11+")
def test_skipping_strings_of_millions_of_escapes_takes_no_memory() -> None:
    """A pasted file in the history is one string with a `\\n` per line; skipping it must not make
    the regex engine keep a backtracking point per escape (it took 370 MB for this 8 MB file)."""
    text = json.dumps({"projects": {"a": ["\n" * 3_000_000, {"x": "\\" * 1_000_000}]}, "mcpServers": {}}, indent=2)
    tracemalloc.start()
    try:
        doc = Document(text)
        doc.set_key(("mcpServers", "leanctx"), {"command": "x"})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert json.loads(doc.text)["mcpServers"] == {"leanctx": {"command": "x"}}
    assert peak < 4 * len(text)  # the new text and transients; was 45x
