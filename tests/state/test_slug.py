"""CKS_ACTIVE_USER -> slug: one-to-one over every id, plain ids keep their folder, refusals, CKS_HOME."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from leanctx.state import api
from leanctx.state import slug as slugmod
from leanctx.state.errors import BadSlug
from leanctx.state.slug import MAX_SLUG, active_slug, check_slug, is_hashed, slugify, user_dir

COLLIDED_BEFORE = [("Анна", "Иван"), ("Ana", "ana"), ("ann@x.com", "ann-x.com"), ("a/b", "a b"), ("TG:42", "tg-42"),
                   ("Zoë", "zo-"), ("...", "---"), ("x" * 65, "x" * 66)]


def h(user_id: str) -> str:
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:20]


@pytest.mark.parametrize("plain", ["local", "alice", "tg-123456789", "under_score-dash", "-rf", "0", "x" * 64,
                                   "ana--0123456789abcdef012"])  # 19 hex digits: not the hashed shape
def test_an_id_that_already_is_a_slug_keeps_its_folder(plain: str) -> None:
    assert slugify(plain) == plain
    assert check_slug(plain) == plain


@pytest.mark.parametrize(("raw", "slug"), [
    ("Ana", f"ana--{h('Ana')}"), ("Иван", f"u--{h('Иван')}"), ("ann@x.com", f"ann-x-com--{h('ann@x.com')}"),
    ("TG:42", f"tg-42--{h('TG:42')}"), ("Zoë", f"zoe--{h('Zoë')}"), ("../etc", f"etc--{h('../etc')}"),
    (".", f"u--{h('.')}"), ("..", f"u--{h('..')}"), ("x" * 65, "x" * 40 + f"--{h('x' * 65)}"),
    ("ana--0123456789abcdef0123", f"ana-0123456789abcdef0123--{h('ana--0123456789abcdef0123')}"),
    ("@ana:matrix.org", f"ana-matrix-org--{h('@ana:matrix.org')}"),
])
def test_every_other_id_gets_a_readable_part_and_the_hash_of_the_exact_id(raw: str, slug: str) -> None:
    """The documented rule, spelled out: anyone can recompute a slug with sha256sum."""
    assert slugify(raw) == slug
    assert is_hashed(slug) and check_slug(slug) == slug


@pytest.mark.parametrize(("a", "b"), COLLIDED_BEFORE)
def test_ids_that_shared_a_slug_before_no_longer_do(a: str, b: str) -> None:
    assert slugify(a) != slugify(b)


def _slug_shape(s: str) -> bool:
    return 0 < len(s) <= MAX_SLUG and set(s) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-")


ids = st.text(min_size=1, max_size=90).filter(lambda s: s.strip() != "")
slug_like = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=70)
hashed_looking = st.builds(lambda a, hx: f"{a}--{hx}", st.text(alphabet="abc-_0", max_size=40),
                           st.text(alphabet="0123456789abcdef", min_size=20, max_size=20))
any_id = st.one_of(ids, slug_like, hashed_looking, st.sampled_from([x for pair in COLLIDED_BEFORE for x in pair]))


@settings(max_examples=3000, deadline=None)
@given(any_id, any_id)
@example("Анна", "Иван")
@example("ana", "Ana")
@example("ana", f"ana--{h('Ana')}")  # a plain id spelled like Ana's slug is hashed again, never Ana's folder
@example(f"ana--{h('Ana')}", "Ana")
@example("\udcff", "\\xff")  # an undecodable byte from the environment is not its escape text
def test_distinct_ids_never_share_a_slug(a: str, b: str) -> None:
    sa, sb = slugify(a), slugify(b)
    assert _slug_shape(sa) and _slug_shape(sb)
    assert (sa == sb) == (a == b)


@settings(max_examples=1000, deadline=None)
@given(any_id)
def test_a_slug_is_its_id_exactly_when_the_id_is_plain(a: str) -> None:
    s = slugify(a)
    assert (s == a) == (_slug_shape(a) and not is_hashed(a))
    assert is_hashed(s) != (s == a)  # hashed slugs and plain ones are disjoint: the injectivity proof
    assert slugify(s) == s or is_hashed(s)  # a plain slug maps to itself; a hashed one only by --slug


@pytest.mark.parametrize(("raw", "message"), [
    ("", "is empty"), (" ", "is empty"), ("\t\n", "is empty"), ("x" * 1025, "at most 1024"),
])
def test_slugify_refuses(raw: str, message: str) -> None:
    with pytest.raises(BadSlug, match=message):
        slugify(raw)


def test_check_slug_refuses_what_is_not_already_a_slug() -> None:
    for bad in ("Alice", "a/b", "..", "", "x" * 65, "é"):
        with pytest.raises(BadSlug):
            check_slug(bad)


def test_active_slug_from_the_environment(cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert active_slug() == "local"  # unset: the single-user default
    monkeypatch.setenv("CKS_ACTIVE_USER", "TG:42")
    assert active_slug() == slugify("TG:42")
    assert active_slug("bob") == "bob"  # an explicit user wins
    for empty in ("", "  "):
        monkeypatch.setenv("CKS_ACTIVE_USER", empty)
        with pytest.raises(BadSlug, match="CKS_ACTIVE_USER is set but empty"):
            active_slug()


def test_cks_home_defaults_to_home_dot_cks(cks_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CKS_HOME")
    assert slugmod.cks_home() == str(cks_home)  # $HOME/.cks
    monkeypatch.setenv("CKS_HOME", "~/elsewhere")
    assert slugmod.cks_home() == str(cks_home.parent / "elsewhere")
    assert user_dir("bob") == str(cks_home.parent / "elsewhere" / "user" / "bob")


@pytest.mark.parametrize("bad", ["", " ", "x" * 1025])
def test_a_bad_active_user_writes_nothing(cks_home: Path, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv("CKS_ACTIVE_USER", bad)
    for call in (lambda: api.inbound("hi"), lambda: api.reply("hi"), lambda: api.set_pending("q?", ["a"]),
                 lambda: api.end_thread(), lambda: api.reset(), lambda: api.show()):
        with pytest.raises(BadSlug):
            call()
    assert not cks_home.exists()
    with pytest.raises(BadSlug):
        api.inbound("hi", user="")
    assert not cks_home.exists()
