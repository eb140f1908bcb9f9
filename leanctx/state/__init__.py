"""Conversation state: the live thread of each user, so an always-on bot resumes mid-thread.

`$CKS_HOME/user/<slug>/conversation-state.json` (or Redis when `LEANCTX_STATE_URL` says so).
Modules, one job each:
  schema.json  the document's JSON Schema (draft 2020-12), shipped as package data
  validate.py  validate(state): jsonschema on the CLI/API path, a stdlib interpreter on the hook path
  slug.py      CKS_ACTIVE_USER -> one-to-one slug, CKS_HOME, the user folder (never written through a symlink)
  protocol.py  pure functions on the state dict: inbound, reply, pending, summary, end of thread
  render.py    the text a restarted session gets (rehydrate), the answer line, the history digest
  backend.py   which store (file or Redis), and the contract both keep
  filestore.py the default store: atomic files, a per-user lock plus compare-and-swap, quarantine
  redisstore.py the scale-out store: WATCH/MULTI compare-and-swap
  resp.py      the minimal Redis client it talks through (RESP2 on the C _socket module)
  guard.py     the multi-user guard hook (PreToolUse): keeps a turn out of other users' folders
  api.py       plain functions (CLI, hooks, and the MCP server later)
  cli.py       `leanctx state ...`

Everything but cli.py is what the hook path may import: standard library only,
and none of json/re/pathlib/typing/socket, like the rest of the hook path (redisstore.py and
resp.py only when LEANCTX_STATE_URL selects Redis). This file stays import-free for that reason.
"""
