"""validate(state): schema.json enforced on every read and write of a conversation state.

Two interpreters of the same schema.json:
- jsonschema's Draft202012Validator on the CLI/API path (the reference implementation);
- a small standard-library interpreter for the hook path, which runs inside the host on every
  event under `python -I -S` and must not import jsonschema (nor json/re: see leanctx/hooks).
  It knows exactly the keywords schema.json uses and refuses a schema with any other keyword
  (SchemaError), so a keyword added to the schema can never be silently skipped on that path.
A hypothesis test (tests/state/test_validate.py) pins that both accept and reject the same
documents.

The stdlib one is chosen when `LEANCTX_FAST_PATH=1` (the hook sets it), when the interpreter runs
without site-packages (`-S`), when the module flag `FAST` is True, or when jsonschema is absent.
"""

from __future__ import annotations

import os
import sys

from leanctx import fastjson
from leanctx.state.errors import SchemaError, StateInvalid

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.json")

# None: decide from the environment; True: always the stdlib validator; False: jsonschema if importable.
FAST: bool | None = None

_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description"})
_KEYWORDS = frozenset({"type", "const", "enum", "properties", "required", "additionalProperties", "items",
                       "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "$ref", "$defs"})
_TYPES = frozenset({"null", "boolean", "object", "array", "string", "number", "integer"})

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the hook path does not import typing
if TYPE_CHECKING:
    from collections.abc import Callable

    Checker = Callable[[object, object], "str | None"]

_schema: dict | None = None
_jsonschema_validator: object = None  # a Draft202012Validator once built; False when jsonschema is missing


def schema() -> dict:
    """schema.json, parsed once (package data read by path: no importlib.resources on the hook path)."""
    global _schema
    if _schema is None:
        with open(SCHEMA_PATH, encoding="utf-8") as f:
            loaded = fastjson.loads(f.read())
        if not isinstance(loaded, dict):
            raise SchemaError(f"{SCHEMA_PATH}: not a JSON object")
        check_keywords(loaded, loaded, "#")
        _schema = loaded
    return _schema


def use_fast() -> bool:
    if FAST is not None:
        return FAST
    return os.environ.get("LEANCTX_FAST_PATH", "") == "1" or bool(sys.flags.no_site)


def validate(state: object) -> None:
    """Raise StateInvalid('<json path>: <what>') unless `state` matches schema.json."""
    if not use_fast():
        validator = _full_validator()
        if validator is not None:
            validate_jsonschema(state, validator)
            return
    validate_stdlib(state)


def validate_jsonschema(state: object, validator: object = None) -> None:
    from jsonschema.exceptions import best_match

    validator = validator or _full_validator()
    if validator is None:
        raise SchemaError("jsonschema is not installed")
    error = best_match(validator.iter_errors(state))  # type: ignore[attr-defined]
    if error is not None:
        raise StateInvalid(f"{error.json_path}: {error.message}")


def _full_validator() -> object:
    global _jsonschema_validator
    if _jsonschema_validator is None:
        try:
            from jsonschema import Draft202012Validator
        except ImportError:
            _jsonschema_validator = False
        else:
            _jsonschema_validator = Draft202012Validator(schema())
    return _jsonschema_validator or None


# --- the stdlib interpreter -------------------------------------------------------------------


def check_keywords(node: object, root: dict, where: str) -> None:
    """Refuse any schema construct the interpreter below does not implement exactly."""
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        raise SchemaError(f"{where}: a schema must be an object or a boolean")
    for key, value in node.items():
        if key in _ANNOTATIONS:
            continue
        if key not in _KEYWORDS:
            raise SchemaError(f"{where}: keyword {key!r} is not supported by leanctx's stdlib validator; "
                              "implement it in leanctx/state/validate.py before using it in schema.json")
        if key == "type":
            names = value if isinstance(value, list) else [value]
            if not names or any(n not in _TYPES for n in names):
                raise SchemaError(f"{where}/type: unknown type in {value!r}")
        elif key in ("properties", "$defs"):
            if not isinstance(value, dict):
                raise SchemaError(f"{where}/{key}: must be an object")
            for name, sub in value.items():
                check_keywords(sub, root, f"{where}/{key}/{name}")
        elif key in ("additionalProperties", "items"):
            check_keywords(value, root, f"{where}/{key}")
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                raise SchemaError(f"{where}/required: must be a list of names")
        elif key == "enum":
            if not isinstance(value, list):
                raise SchemaError(f"{where}/enum: must be a list")
        elif key in ("minItems", "maxItems", "minLength", "maxLength"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SchemaError(f"{where}/{key}: must be a non-negative integer")
        elif key in ("minimum", "maximum"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise SchemaError(f"{where}/{key}: must be a number")
        elif key == "$ref":
            _resolve(root, value, where)


def _resolve(root: dict, ref: object, where: str) -> object:
    prefix = "#/$defs/"
    if not isinstance(ref, str) or not ref.startswith(prefix) or "/" in ref[len(prefix):]:
        raise SchemaError(f"{where}/$ref: only local '#/$defs/<name>' references are supported, got {ref!r}")
    defs = root.get("$defs")
    name = ref[len(prefix):]
    if not isinstance(defs, dict) or name not in defs:
        raise SchemaError(f"{where}/$ref: {ref!r} does not exist")
    return defs[name]


def validate_stdlib(state: object) -> None:
    global _compiled
    if _compiled is None:
        root = schema()
        _compiled = _compile(root, root, {})
    error = _compiled(state, None)
    if error is not None:
        raise StateInvalid(error)


# The schema is compiled once into nested checker closures: check(value, path) -> error or None.
# A path is a linked pair (parent path, key) or None for the root, formatted only on an error.
_compiled = None


def _compile(node: object, root: dict, refs: dict) -> Checker:
    if node is True:
        return _accept
    if node is False:
        return lambda value, path: f"{_format(path)}: not allowed here"
    assert isinstance(node, dict)
    checks: list[Checker] = []
    if "$ref" in node:
        checks.append(_compile_ref(node["$ref"], root, refs))
    if "type" in node:
        checks.append(_type_check(node["type"] if isinstance(node["type"], list) else [node["type"]]))
    if "const" in node:
        const = node["const"]
        checks.append(lambda v, p: None if _equal(v, const) else f"{_format(p)}: must be {const!r}, got {_short(v)}")
    if "enum" in node:
        options = node["enum"]
        checks.append(lambda v, p: None if any(_equal(v, o) for o in options)
                      else f"{_format(p)}: {_short(v)} is not one of {options!r}")
    if "minLength" in node or "maxLength" in node:
        checks.append(_length_check(node.get("minLength", 0), node.get("maxLength")))
    if "minimum" in node or "maximum" in node:
        checks.append(_range_check(node.get("minimum"), node.get("maximum")))
    if "minItems" in node or "maxItems" in node or "items" in node:
        items = _compile(node["items"], root, refs) if "items" in node else None
        checks.append(_array_check(node.get("minItems", 0), node.get("maxItems"), items))
    if "properties" in node or "required" in node or "additionalProperties" in node:
        props = {k: _compile(v, root, refs) for k, v in node.get("properties", {}).items()}
        extra = node.get("additionalProperties", True)
        checks.append(_object_check(tuple(node.get("required", ())), props, extra,
                                    None if isinstance(extra, bool) else _compile(extra, root, refs)))
    if not checks:
        return _accept
    if len(checks) == 1:
        return checks[0]
    chain = tuple(checks)

    def all_of(value: object, path: object) -> str | None:
        for check in chain:
            error = check(value, path)
            if error is not None:
                return error
        return None

    return all_of


def _accept(value: object, path: object) -> None:
    return None


def _compile_ref(ref: str, root: dict, refs: dict) -> Checker:
    """Each $defs entry compiled once; a cell allows a definition to refer to itself."""
    if ref not in refs:
        cell: list[Checker] = [_accept]
        refs[ref] = cell
        cell[0] = _compile(_resolve(root, ref, "#"), root, refs)
    cell = refs[ref]
    return lambda value, path: cell[0](value, path)


def _type_check(names: list[str]) -> Checker:
    label = " or ".join(names)
    tests = tuple(_TYPE_TESTS[n] for n in names)

    def check(value: object, path: object) -> str | None:
        for test in tests:
            if test(value):
                return None
        return f"{_format(path)}: {_short(value)} is not of type {label}"

    return check


def _length_check(low: int, high: int | None) -> Checker:
    def check(value: object, path: object) -> str | None:
        if isinstance(value, str):
            if len(value) < low:
                return f"{_format(path)}: shorter than {low} characters"
            if high is not None and len(value) > high:
                return f"{_format(path)}: longer than {high} characters ({len(value)})"
        return None

    return check


def _range_check(low: float | None, high: float | None) -> Checker:
    def check(value: object, path: object) -> str | None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if low is not None and value < low:
                return f"{_format(path)}: {value!r} is less than the minimum {low!r}"
            if high is not None and value > high:
                return f"{_format(path)}: {value!r} is more than the maximum {high!r}"
        return None

    return check


def _array_check(low: int, high: int | None, items: Checker | None) -> Checker:
    def check(value: object, path: object) -> str | None:
        if not isinstance(value, list):
            return None
        if len(value) < low:
            return f"{_format(path)}: fewer than {low} items"
        if high is not None and len(value) > high:
            return f"{_format(path)}: more than {high} items ({len(value)})"
        if items is not None:
            for i, item in enumerate(value):
                error = items(item, (path, i))
                if error is not None:
                    return error
        return None

    return check


def _object_check(required: tuple, props: dict, extra: object, extra_check: Checker | None) -> Checker:
    def check(value: object, path: object) -> str | None:
        if not isinstance(value, dict):
            return None
        for name in required:
            if name not in value:
                return f"{_format(path)}: required property {name!r} is missing"
        for key, item in value.items():
            sub = props.get(key)
            if sub is None:
                if extra is True:
                    continue
                if extra is False:
                    return f"{_format(path)}: unexpected property {key!r}"
                sub = extra_check
            error = sub(item, (path, key))  # type: ignore[misc]
            if error is not None:
                return error
        return None

    return check


def _is_integer(value: object) -> bool:
    # JSON Schema counts 1.0 as an integer, as jsonschema does; booleans are not numbers
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


_TYPE_TESTS = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": _is_integer,
}


def _equal(a: object, b: object) -> bool:
    """JSON equality: booleans are not numbers, 1 == 1.0, containers compared element-wise."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _format(path: object) -> str:
    """jsonschema's json_path spelling: `$.name[3]`, and `['other key']` for non-identifiers."""
    keys = []
    while path is not None:
        path, key = path  # type: ignore[misc]
        keys.append(key)
    out = "$"
    for key in reversed(keys):
        if isinstance(key, int):
            out += f"[{key}]"
        elif key and key[0].isascii() and key[0].isalpha() and all(c == "_" or (c.isascii() and c.isalnum()) for c in key):
            out += "." + key
        else:
            out += "['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"
    return out


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
