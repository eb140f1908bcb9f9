"""Filling a template's `@NAME@` placeholders in one pass.

Chained `str.replace` rescans what it inserted: an install path containing `@DATA_DIR@` was
itself replaced, breaking the shell quoting around it. One `re.sub` over all placeholders never
looks at an inserted value again. Each value must already be escaped for the template's language
(shlex for sh, JSON for JS); a placeholder without a value is an error rather than a template
shipped half filled.
"""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"@([A-Z][A-Z0-9_]*)@")


def fill(template: str, values: dict[str, str], name: str) -> str:
    unknown = sorted(set(PLACEHOLDER.findall(template)) - set(values))
    if unknown:
        raise ValueError(f"template {name}: no value for @{unknown[0]}@")
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def js_hook_runner() -> str:
    """`templates/js-hook-runner.js`: how a JS plugin or extension (OpenCode's, Pi's) runs one
    leanctx hook command, bounded in time, and reads its JSON answer; filled into both at
    `@HOOK_RUNNER@`, so the two hosts run hooks the same way."""
    from importlib import resources

    return resources.files("leanctx").joinpath("templates/js-hook-runner.js").read_text(encoding="utf-8")
