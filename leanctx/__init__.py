"""leanctx: hooks, installer and doctor for AI coding agents and always-on bots.

Kept import-free on purpose: the hook fast path imports this package on every host event.
"""

__version__ = "0.1.0"
