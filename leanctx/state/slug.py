"""Which user, and which folder: CKS_ACTIVE_USER -> slug -> $CKS_HOME/user/<slug>/.

The slug rule is the kit's (user-memory skill): lowercase, keep `[a-z0-9_-]`, anything else
becomes `-`. What cannot name a folder safely (empty, `.`, `..`, over 64 characters) is refused
with BadSlug before anything is written.

The store never writes outside `$CKS_HOME/user/<slug>/`: `user/` and `<slug>/` must be real
folders (a symlink there is refused before anything is created through it), and every file
operation then goes through a descriptor of the verified folder, so swapping the folder for a
symlink afterwards cannot redirect a write. `$CKS_HOME` itself may be a symlink: that is the
operator's choice of where the tree lives.
"""

from __future__ import annotations

import os
import stat

from leanctx.state.errors import BadSlug, UnsafePath

MAX_SLUG = 64
DEFAULT_USER = "local"
_KEEP = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def slugify(raw: str) -> str:
    """The kit's slug of a sender id; BadSlug when it cannot name a folder."""
    if not isinstance(raw, str):
        raise BadSlug(f"user id must be text, got {type(raw).__name__}")
    if raw in ("", ".", ".."):
        raise BadSlug(f"user id {raw!r} cannot name a user folder; give the trusted sender id")
    slug = "".join(c if c in _KEEP else "-" for c in raw.lower())
    if slug in ("", ".", ".."):
        raise BadSlug(f"user id {raw!r} gives the slug {slug!r}, which cannot name a user folder")
    if len(slug) > MAX_SLUG:
        raise BadSlug(f"user id {raw[:80]!r} gives a slug of {len(slug)} characters; at most {MAX_SLUG} are allowed")
    return slug


def check_slug(slug: str) -> str:
    """A slug handed to a store must already be in slug form (it names a folder or a key)."""
    if slugify(slug) != slug:
        raise BadSlug(f"{slug!r} is not a slug (lowercase a-z, 0-9, _ and - only)")
    return slug


def active_slug(user: str | None = None) -> str:
    """`user` when given, else CKS_ACTIVE_USER (unset or empty: `local`, as the kit's `${…:-local}`)."""
    if user is None:
        user = os.environ.get("CKS_ACTIVE_USER") or DEFAULT_USER
    return slugify(user)


def cks_home() -> str:
    env = os.environ.get("CKS_HOME")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(os.path.abspath(home), ".cks")


def users_root() -> str:
    return os.path.join(cks_home(), "user")


def user_dir(slug: str) -> str:
    """The folder's path as configured (for messages); open_user_dir() is what writes go through."""
    return os.path.join(users_root(), check_slug(slug))


def open_user_dir(slug: str, create: bool) -> int | None:
    """A descriptor of the verified real `$CKS_HOME/user/<slug>/`; None when absent and not `create`.

    Folders we create are 0700. UnsafePath when `user/` or `<slug>/` is a symlink or not a folder."""
    check_slug(slug)
    home = cks_home()
    if create:
        os.makedirs(home, mode=0o700, exist_ok=True)
    elif not os.path.isdir(home):
        return None
    real_home = os.path.realpath(home)
    for path in (os.path.join(real_home, "user"), os.path.join(real_home, "user", slug)):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:  # a concurrent writer made it: check it like any existing one
                st = os.lstat(path)
            else:
                os.chmod(path, 0o700)
                continue
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(f"{path} is a symlink (to {os.path.realpath(path)}); conversation state is only "
                             f"written inside {os.path.join(home, 'user')}/<slug>/, refusing")
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(f"{path} is not a folder; refusing")
    target = os.path.join(real_home, "user", slug)
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(target, flags)
    except OSError as exc:
        raise UnsafePath(f"{target}: cannot open the user folder safely ({exc.strerror}); refusing") from None
    expected = os.stat(target)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (expected.st_dev, expected.st_ino) or os.path.realpath(target) != target:
        os.close(fd)
        raise UnsafePath(f"{target} changed while it was being opened (a symlink swap?); refusing")
    return fd
