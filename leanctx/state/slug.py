"""Which user, and which folder: CKS_ACTIVE_USER (the sender id) -> slug -> $CKS_HOME/user/<slug>/.

The slug is one-to-one: two different sender ids never share a folder (a Redis key), so one
user's thread can never be shown to, or merged with, another's.

- A *plain* id, `[a-z0-9_-]{1,64}` that does not end like a hashed slug (below), is its own slug:
  the kit's slug of an id that already is one, so existing `~/.cks/user/<id>/` folders keep
  working.
- Every other id (capitals, `@`, `:`, `/`, spaces, any non-ASCII letter, more than 64
  characters, or a plain-looking id that ends like a hashed slug) gets the *hashed* slug
  `<readable>--<hash>`: `<hash>` is the first 20 hex digits of SHA-256 over the exact id's UTF-8
  bytes (lone surrogates, which only a non-UTF-8 environment produces, as `surrogatepass`);
  `<readable>` is the id folded to ASCII (NFKD, accents dropped), lowercased, every run of
  other characters turned into one `-`, trimmed to 40 characters, or `u` when nothing is left.
  `Ana` -> `ana--<hash>`, `Иван` -> `u--<hash>`, `ann@x.com` -> `ann-x-com--<hash>`.

Why it is one-to-one: plain slugs are never of the hashed shape (`--` then exactly 20 hex digits
at the end), and hashed slugs always are, so a plain id and a hashed one never meet; two plain
ids differ by themselves; two hashed ones differ by their hash unless SHA-256 truncated to 80
bits collides (about 1.5 billion ids for a one-in-a-million chance; and a state keeps its exact
id, so even then the second id is refused, not merged: see api.Target). The
readable part is for people only and plays no part in the proof. Every slug is 1-64 characters
of `[a-z0-9_-]`: a safe folder name and Redis key part, never `.`, `..` or an option-like `-x`
unless the plain id itself is one.

Refused (BadSlug, nothing written): an id that is empty or only whitespace (a channel adapter that
exported no sender id must not merge everyone into one user), or longer than 1,024 characters.
CKS_ACTIVE_USER unset means `local`; set but empty is refused like any empty id, and so is one
starting with `channel:`, the form of a channel sender's thread (state/channel.py thread_id), so
the operator's user and a chat sender never share a thread.

The store never writes outside `$CKS_HOME/user/<slug>/`: `user/` and `<slug>/` must be real
folders (a symlink there is refused before anything is created through it), and every file
operation then goes through a descriptor of the verified folder, so swapping the folder for a
symlink afterwards cannot redirect a write. `$CKS_HOME` itself may be a symlink: that is the
operator's choice of where the tree lives, as long as it and every folder on its way is ours
(leanctx/safedir.py): one another account owns or can write is refused.
"""

from __future__ import annotations

import os
import stat

from leanctx import safedir
from leanctx.state.errors import BadSlug, UnsafePath

MAX_SLUG = 64
MAX_ID = 1024
DEFAULT_USER = "local"
HASH_HEX = 20
HASH_SEP = "--"
READABLE_MAX = MAX_SLUG - len(HASH_SEP) - HASH_HEX - 2  # 40: room to spare
ENV = "CKS_ACTIVE_USER"
THREAD_PREFIX = "channel:"  # channel senders' threads: channel:["SERVER","ID"] (state/channel.py)
_KEEP = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_HEX = frozenset("0123456789abcdef")


def is_slug(text: str) -> bool:
    """1-64 characters of `[a-z0-9_-]`: a name `$CKS_HOME/user/` may hold (plain or hashed)."""
    return isinstance(text, str) and 0 < len(text) <= MAX_SLUG and all(c in _KEEP for c in text)


def is_hashed(slug: str) -> bool:
    """Ends in `--` and exactly 20 lowercase hex digits: the shape only hashed slugs have."""
    n = HASH_HEX + len(HASH_SEP)
    return len(slug) >= n and slug[-n:-HASH_HEX] == HASH_SEP and all(c in _HEX for c in slug[-HASH_HEX:])


def is_plain(user_id: str) -> bool:
    """An id that is its own slug."""
    return is_slug(user_id) and not is_hashed(user_id)


def check_id(user_id: object) -> str:
    """The sender id itself, or BadSlug when no user may have it (empty, blank, too long)."""
    if not isinstance(user_id, str):
        raise BadSlug(f"user id must be text, got {type(user_id).__name__}")
    if not user_id.strip():
        raise BadSlug(f"user id {user_id!r} is empty; give the trusted sender id")
    if len(user_id) > MAX_ID or len(stored_id(user_id)) > MAX_ID:
        raise BadSlug(f"user id {user_id[:40]!r}... is {len(user_id)} characters long; at most {MAX_ID} are allowed")
    return user_id


def slugify(user_id: str) -> str:
    """The one-to-one slug of a sender id (see the module docstring); BadSlug when it is refused."""
    check_id(user_id)
    if is_plain(user_id):
        return user_id
    return f"{_readable(user_id)}{HASH_SEP}{_sha256_hex(user_id)[:HASH_HEX]}"


def _readable(user_id: str) -> str:
    """A hint for people: the id folded to `[a-z0-9_-]`, at most 40 characters; `u` when empty."""
    import unicodedata  # only for ids that are not plain slugs

    out: list[str] = []
    for c in unicodedata.normalize("NFKD", user_id).lower():
        if c in _KEEP and c != "-":
            out.append(c)
        elif not unicodedata.combining(c) and out and out[-1] != "-":
            out.append("-")
    text = "".join(out)[:READABLE_MAX].strip("-")
    return text or "u"


def _sha256_hex(text: str) -> str:
    data = text.encode("utf-8", "surrogatepass")
    try:  # the C module alone: hashlib costs ~2 ms of OpenSSL start-up on the hook path
        from _sha2 import sha256  # type: ignore[import-not-found]  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[import-not-found, no-redef]  # Python 3.10, 3.11
        except ImportError:
            from hashlib import sha256  # type: ignore[assignment]
    return sha256(data).hexdigest()


def stored_id(user_id: str) -> str:
    """The id as kept beside its state: itself, or, when it holds undecodable bytes (a non-UTF-8
    environment), those bytes as `\\xNN` escapes, so the state stays valid UTF-8."""
    try:
        user_id.encode("utf-8")
        return user_id
    except UnicodeEncodeError:
        try:
            raw = user_id.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raw = user_id.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "backslashreplace")


def check_slug(slug: str) -> str:
    """A slug handed to a store must already be in slug form (it names a folder or a key)."""
    if not is_slug(slug):
        raise BadSlug(f"{slug!r} is not a slug (1-{MAX_SLUG} characters: lowercase a-z, 0-9, _ and - only)")
    return slug


def active_id() -> str:
    """CKS_ACTIVE_USER: unset is `local` (the single-user default); set but empty or blank is
    refused, so an adapter that exported no sender id never lands everyone in `local`."""
    raw = os.environ.get(ENV)
    if raw is None:
        return DEFAULT_USER
    if not raw.strip():
        raise BadSlug(f"{ENV} is set but empty: export the trusted sender id, or unset it for the "
                      f"single-user default `{DEFAULT_USER}`")
    if raw.startswith(THREAD_PREFIX):
        raise BadSlug(f"{ENV}={raw[:40]!r} starts with {THREAD_PREFIX!r}, which names channel senders' threads; "
                      f"choose another id")
    return check_id(raw)


def active_slug(user: str | None = None) -> str:
    """The slug of `user` when given, else of CKS_ACTIVE_USER (see active_id)."""
    return slugify(active_id() if user is None else user)


def cks_home() -> str:
    env = os.environ.get("CKS_HOME")
    if env:
        return os.path.abspath(os.path.expanduser(env))
    home = os.environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(os.path.abspath(home), ".cks")


def checked_cks_home() -> str:
    """`$CKS_HOME`, or UnsafePath when another account owns it, can write into it, or can swap a
    folder on its path (it could plant or read any user's thread)."""
    home = cks_home()
    reason = safedir.problem(home, "CKS_HOME")
    if reason:
        raise UnsafePath(reason)
    return home


def users_root() -> str:
    return os.path.join(cks_home(), "user")


def user_dir(slug: str) -> str:
    """The folder's path as configured (for messages); open_user_dir() is what writes go through."""
    return os.path.join(users_root(), check_slug(slug))


def open_user_dir(slug: str, create: bool) -> int | None:
    """A descriptor of the verified real `$CKS_HOME/user/<slug>/`; None when absent and not `create`.

    Folders we create are 0700. UnsafePath when `user/` or `<slug>/` is a symlink or not a folder."""
    check_slug(slug)
    home = checked_cks_home()
    if create:
        safedir.make_private(home)
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
