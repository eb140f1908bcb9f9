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

from leanctx.state.errors import SchemaError, StateInvalid

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema.json")

# None: decide from the environment; True: always the stdlib validator; False: jsonschema if importable.
FAST: bool | None = None

_ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description"})
_KEYWORDS = frozenset({"type", "const", "enum", "properties", "required", "additionalProperties", "items",
                       "minItems", "maxItems", "minLength", "maxLength", "minimum", "maximum", "$ref", "$defs"})
_TYPES = frozenset({"null", "boolean", "object", "array", "string", "number", "integer"})

_schema: dict | None = None
_jsonschema_validator: object = None  # a Draft202012Validator once built; False when jsonschema is missing


def schema() -> dict:
    """schema.json, parsed once (package data read by path: no importlib.resources on the hook path)."""
    global _schema
    if _schema is None:
        from leanctx.hooks import fastjson

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
    root = schema()
    error = _check(root, state, "$", root)
    if error is not None:
        raise StateInvalid(error)


def _is_type(value: object, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if name == "number":
        return isinstance(value, (int, float))
    # integer: JSON Schema counts 1.0 as an integer, as jsonschema does
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _equal(a: object, b: object) -> bool:
    """JSON equality: booleans are not numbers, 1 == 1.0, containers compared element-wise."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _child(path: str, key: str) -> str:
    """jsonschema's json_path spelling: `.name` for identifiers, `['other key']` otherwise."""
    ident = bool(key) and key[0].isascii() and key[0].isalpha() and all(
        c == "_" or (c.isascii() and c.isalnum()) for c in key)
    return f"{path}.{key}" if ident else f"{path}['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']"


def _check(node: object, value: object, path: str, root: dict) -> str | None:
    """The first violation as '<json path>: <what>', or None."""
    if node is True:
        return None
    if node is False:
        return f"{path}: not allowed here"
    assert isinstance(node, dict)
    if "$ref" in node:
        error = _check(_resolve(root, node["$ref"], path), value, path, root)
        if error is not None:
            return error
    if "type" in node:
        names = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not any(_is_type(value, n) for n in names):
            return f"{path}: {_short(value)} is not of type {' or '.join(names)}"
    if "const" in node and not _equal(value, node["const"]):
        return f"{path}: must be {node['const']!r}, got {_short(value)}"
    if "enum" in node and not any(_equal(value, option) for option in node["enum"]):
        return f"{path}: {_short(value)} is not one of {node['enum']!r}"
    if isinstance(value, str):
        if "minLength" in node and len(value) < node["minLength"]:
            return f"{path}: shorter than {node['minLength']} characters"
        if "maxLength" in node and len(value) > node["maxLength"]:
            return f"{path}: longer than {node['maxLength']} characters ({len(value)})"
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in node and value < node["minimum"]:
            return f"{path}: {value!r} is less than the minimum {node['minimum']!r}"
        if "maximum" in node and value > node["maximum"]:
            return f"{path}: {value!r} is more than the maximum {node['maximum']!r}"
    elif isinstance(value, list):
        if "minItems" in node and len(value) < node["minItems"]:
            return f"{path}: fewer than {node['minItems']} items"
        if "maxItems" in node and len(value) > node["maxItems"]:
            return f"{path}: more than {node['maxItems']} items ({len(value)})"
        if "items" in node:
            for i, item in enumerate(value):
                error = _check(node["items"], item, f"{path}[{i}]", root)
                if error is not None:
                    return error
    elif isinstance(value, dict):
        for name in node.get("required", ()):
            if name not in value:
                return f"{path}: required property {name!r} is missing"
        properties = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                error = _check(properties[key], item, _child(path, key), root)
            else:
                error = _check(extra, item, _child(path, key), root) if extra is not True else None
                if error is not None and extra is False:
                    error = f"{path}: unexpected property {key!r}"
            if error is not None:
                return error
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
