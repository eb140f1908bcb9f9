"""CKS_ACTIVE_USER -> slug (the kit's rule), refusals, and CKS_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from leanctx.state import api
from leanctx.state import slug as slugmod
from leanctx.state.errors import BadSlug
from leanctx.state.slug import active_slug, check_slug, slugify, user_dir


@pytest.mark.parametrize(("raw", "slug"), [
    ("local", "local"), ("Alice", "alice"), ("tg:123456789", "tg-123456789"), ("a b/c", "a-b-c"),
    ("../etc", "---etc"), ("Zoë", "zo-"), ("under_score-dash", "under_score-dash"), ("...", "---"),
    ("x" * 64, "x" * 64), ("user@example.com", "user-example-com"),
])
def test_slugify_like_the_kit(raw: str, slug: str) -> None:
    assert slugify(raw) == slug
    assert check_slug(slug) == slug


@pytest.mark.parametrize(("raw", "message"), [
    ("", "cannot name a user folder"), (".", "cannot name a user folder"), ("..", "cannot name a user folder"),
    ("x" * 65, "a slug of 65 characters; at most 64"), ("é" * 70, "at most 64"),
])
def test_slugify_refuses(raw: str, message: str) -> None:
    with pytest.raises(BadSlug, match=message):
        slugify(raw)


def test_check_slug_refuses_what_is_not_already_a_slug() -> None:
    for bad in ("Alice", "a/b", "..", ""):
        with pytest.raises(BadSlug):
            check_slug(bad)


def test_active_slug_from_the_environment(cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert active_slug() == "local"
    monkeypatch.setenv("CKS_ACTIVE_USER", "")
    assert active_slug() == "local"  # the kit's ${CKS_ACTIVE_USER:-local}
    monkeypatch.setenv("CKS_ACTIVE_USER", "TG:42")
    assert active_slug() == "tg-42"
    assert active_slug("Bob") == "bob"  # an explicit user wins
    monkeypatch.setenv("CKS_ACTIVE_USER", "..")
    with pytest.raises(BadSlug):
        active_slug()


def test_cks_home_defaults_to_home_dot_cks(cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CKS_HOME")
    assert slugmod.cks_home() == str(cks_home)  # $HOME/.cks
    monkeypatch.setenv("CKS_HOME", "~/elsewhere")
    assert slugmod.cks_home() == str(cks_home.parent / "elsewhere")
    assert user_dir("bob") == str(cks_home.parent / "elsewhere" / "user" / "bob")


@pytest.mark.parametrize("bad", ["..", ".", "x" * 65])
def test_a_bad_active_user_writes_nothing(cks_home: Path, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("CKS_ACTIVE_USER", bad)
    for call in (lambda: api.inbound("hi"), lambda: api.reply("hi"), lambda: api.set_pending("q?", ["a"]),
                 lambda: api.end_thread(), lambda: api.reset()):
        with pytest.raises(BadSlug):
            call()
    assert not cks_home.exists()
    with pytest.raises(BadSlug):
        api.inbound("hi", user="")
    assert not cks_home.exists()
