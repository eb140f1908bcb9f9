"""The conversation-scoped read cache (full reads, stubs, range pointers, diffs): the API the service builds on.

Nothing here talks to a socket or to MCP; `service.py`, `client.py` and `mcpserver.py` do, on top of
these three calls:

```python
from leanctx.cache import Connection, Resolver, ReadCache

conn = Connection.capture()            # in the stdio MCP server, once at start-up:
                                       #   connection_id, env (CONNECTION_ENV names only),
                                       #   host_pid / host_start_ticks (the parent, shells skipped,
                                       #   same walk as the hooks), cwd
resolver = Resolver(data_dir)          # in the daemon (data_dir = leanctx.paths.data_dir())
cache = ReadCache(state_dir)           # state_dir: where read_index.json lives (None = memory only)
                                       #   dedup=None -> env LEANCTX_DEDUP (default on)
                                       #   max_file_bytes=2_000_000, allow=(extra readable folders,)
                                       #   autosave_s=5.0 (save() on a read when dirty and older)

# every ctx_read:
scope = resolver.resolve(conn, fresh=True)     # ALWAYS fresh right before a read: the stub gate
result = cache.read(scope, path, start_line, end_line, fresh)
# result: {"kind": "full"|"stub"|"diff"|"pointer"|"error", "text": str, "path": str (relative to
#          the workspace root), "lines": int, "tokens_raw": int, "tokens_sent": int,
#          "tokenizer": str, "fingerprint": str, "window": [s, e] | None,
#          "claims": {"fingerprint", "spans"} (stub/pointer/diff only), "code": str (errors only)}
# give the model result["text"]; kind "error" is a normal tool answer, not an exception.

cache.stats()     # reads, full, stubs, diffs, pointers, errors, cold_stubs, withheld, tokens_raw,
                  # tokens_sent, rereads, tokens_reread, contexts, tokens_overhead (= tokens_tool +
                  # tokens_rule), tokens_saved (net: raw - sent - reread - overhead), by_reader{},
                  # by_agent{}, by_conversation{} (each with by_reader{}), overhead_per_context{},
                  # counting (the rule in words), withheld_reasons{},
                  # conversations, entries, files, dedup, index{path, quarantined, ...},
                  # tokenizer, tokens_exact, tokenizer_note (one sentence), exact_counts (how to
                  # get them, None when exact), counted_with (tokenizers behind the totals)
cache.save()      # persist the index (on shutdown, and whenever convenient); never file contents
resolver.resolve(conn)   # (not fresh) cached for 3 s: fine for status displays, never for reads
```

`Connection.to_dict()/from_dict()` carry a connection over the daemon's socket (from_dict keeps
only CONNECTION_ENV names). `Connection` has, besides the fields in the issue, `cwd` (default None).
`Scope` has, besides the fields in the issue, `cwd` (where relative paths resolve) and `persist`
(may deliveries under this key outlive the daemon; False for legacy `conn:` keys and unknown
callers). `Resolver(data_dir, clock, persist=True)` keeps the last good copy of every record in
`<data dir>/conversations/.last_good.json` (persist=False: memory only). `ReadCache` also takes
`autosave_s` and `clock`.

Where the MCP server must come from for host matching to work: its parent (shells skipped) must
be the host process itself (Claude Code and Codex spawn stdio servers directly). A launcher in
between that is not a shell (npx, uv run, a Python wrapper) becomes the "host" and matches no
record: every read is then an unknown caller (content, never a stub).

The rules live in the module docstrings: scope.py (who is asking, when a stub is allowed),
readcache.py (stub / pointer / diff / full, what is recorded), dedup.py (range algebra and caps),
paths.py (path safety), index.py (persisted index, quarantine), tokens.py (tokenizer choice),
stubs.py (the exact texts). The ground truth, simulated hosts and the trace format of
bench/cache_replay.py are test/bench support in bench/support/ (not shipped).
"""

__all__ = ["CONNECTION_ENV", "Connection", "ReadCache", "Resolver", "Scope"]


def __getattr__(name: str) -> object:
    """The API above, loaded on first use: `leanctx mcp` imports `leanctx.cache.client` on the
    path the host waits for, and must not pay for the read cache there."""
    if name == "ReadCache":
        from leanctx.cache.readcache import ReadCache

        return ReadCache
    if name in __all__:
        from leanctx.cache import scope

        return getattr(scope, name)
    raise AttributeError(f"module 'leanctx.cache' has no attribute {name!r}")
