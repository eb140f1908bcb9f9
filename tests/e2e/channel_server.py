"""A Claude Code channel for the e2e tests: a stdio MCP server declaring the `claude/channel`
capability that pushes each `<spool>/*.json` file ({"content": ..., "meta": {...}}) as a
`notifications/claude/channel` notification, in name order, then deletes it. Standard library
only; argv: SPOOL_DIR LOG_FILE (every message in and out, one JSON line each).

The protocol, as Claude Code 2.1.197 implements it (its bundle: ChannelMessageNotificationSchema
and gateChannelServer): the server's initialize result declares
`capabilities.experimental["claude/channel"]`; a notification's params are {content: string,
meta?: {string: string}}; Claude Code registers the handler only for servers named by
--channels / --dangerously-load-development-channels, in an interactive session.
"""
import json
import os
import sys
import threading
import time

SPOOL, LOG = sys.argv[1], sys.argv[2]
LOCK = threading.Lock()


def log(direction, obj):
    with open(LOG, "a") as f:
        f.write(json.dumps([direction, obj]) + "\n")


def send(obj):
    with LOCK:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()
    log("out", obj)


def pump():
    while True:
        for name in sorted(os.listdir(SPOOL)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(SPOOL, name)
            with open(path) as f:
                params = json.load(f)
            os.unlink(path)
            send({"jsonrpc": "2.0", "method": "notifications/claude/channel", "params": params})
        time.sleep(0.1)


def main():
    started = False
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        log("in", msg)
        method, ident = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
                "capabilities": {"experimental": {"claude/channel": {}}, "tools": {}},
                "serverInfo": {"name": "leanctx-test-channel", "version": "1"}}})
        elif method == "notifications/initialized" and not started:
            started = True
            threading.Thread(target=pump, daemon=True).start()
        elif ident is not None:
            result = {"tools": []} if method == "tools/list" else {} if method == "ping" else None
            if result is None:
                send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}})
            else:
                send({"jsonrpc": "2.0", "id": ident, "result": result})


main()
