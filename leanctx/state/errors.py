"""The errors of the conversation-state store; the CLI turns each into exit 2 with its message."""

from __future__ import annotations


class StateError(Exception):
    """Base: something the caller must be told about; nothing was written."""


class BadSlug(StateError):
    """A user id that cannot name a folder under $CKS_HOME/user/."""


class ForeignThread(StateError):
    """The state at a slug keeps another sender id's thread (defence in depth: slugs are one-to-one)."""


class BadInput(StateError):
    """An argument over a cap or empty where it must not be (question, option, summary...)."""


class StateInvalid(StateError):
    """A document that does not match schema.json; the message starts with the JSON path."""


class UnsafePath(StateError):
    """The user folder resolves outside $CKS_HOME/user/<slug>/ (a symlink); refused."""


class StateBusy(StateError):
    """Another writer kept the state locked (or kept winning the compare-and-swap) too long."""


class SchemaError(Exception):
    """schema.json uses a keyword the stdlib validator does not interpret (a bug, not user input)."""


class StoreUnavailable(StateError):
    """The configured store cannot be reached (Redis down, bad LEANCTX_STATE_URL)."""


class StoreNotOurs(StoreUnavailable):
    """The Redis on a local address is run by another account (LEANCTX_REDIS_OWNER); nothing was sent."""
