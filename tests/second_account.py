"""A real second local account for the tests that play another user on this machine.

CI runs as root, so a process is started as an unused uid through `setpriv` (no groups): the
kernel then treats it exactly as another account (its files, its sockets, /proc). Without root
or setpriv such a test skips, except under LEANCTX_REQUIRE_E2E=1, where it fails instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

OTHER = 4242  # an unused uid: "another local account"


def can_switch_uid() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("setpriv") is not None


needs_second_uid = pytest.mark.skipif(
    not can_switch_uid() and not os.environ.get("LEANCTX_REQUIRE_E2E"),
    reason="needs root and setpriv to act as a second local account")


def require() -> None:
    """Inside a test: skip it where this machine cannot switch uid (fail under LEANCTX_REQUIRE_E2E)."""
    if not can_switch_uid():
        if os.environ.get("LEANCTX_REQUIRE_E2E"):
            pytest.fail("LEANCTX_REQUIRE_E2E=1 but a second local account needs root and setpriv")
        pytest.skip("needs root and setpriv to act as a second local account")


def setpriv(uid: int, argv: list[str]) -> list[str]:
    """`argv` as run by `uid` (fails the test when this machine cannot switch uid)."""
    if not can_switch_uid():
        pytest.fail("a second local account is required here (root and setpriv)")
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]


def as_uid(uid: int, argv: list[str], env: dict, **kw) -> subprocess.CompletedProcess:
    """Run `argv` as `uid` to completion, output captured as text."""
    return subprocess.run(setpriv(uid, argv), capture_output=True, text=True, env=env, timeout=120, **kw)
