#!/bin/sh
# leanctx hook wrapper. Written by `leanctx init`; rewritten on every init, so do not edit.
# Host configs call this file by its stable path; an upgrade rewrites it, never their entries.
# It also starts leanctx's MCP server (`mcp`) and CLI (`cli`) the same way: isolated from the current folder.
# leanctx-wrapper: 1
# leanctx-version: @VERSION@
LEANCTX_PYTHON=@PYTHON@
LEANCTX_SRC=@SRC@
if [ -z "${LEANCTX_HOME:-}" ]; then
    LEANCTX_HOME=@DATA_DIR@
    export LEANCTX_HOME
fi
case "${1:-}" in
    mcp|cli)  # `leanctx-hook mcp [--profile P]` is the MCP server; `leanctx-hook cli ARGS` is `leanctx ARGS`
        [ "$1" = cli ] && shift
        if [ ! -x "$LEANCTX_PYTHON" ]; then
            printf '%s\n' "leanctx: the Python that installed leanctx is gone ($LEANCTX_PYTHON); reinstall leanctx and run 'leanctx init'" >&2
            exit 1
        fi
        # isolated (-I): nothing in the folder a host started us in is imported; the package root is put on sys.path
        exec "$LEANCTX_PYTHON" -I -c @BOOT@ "$LEANCTX_SRC" leanctx "$@"
        ;;
esac
leanctx_skip() {  # one line about a skipped hook: stderr, or the hook log for a host that reads stderr
    if [ -n "${LEANCTX_QUIET_STDERR:-}" ]; then
        (umask 077 && mkdir -p "$LEANCTX_HOME/logs" && printf '%s\n' "$1" >>"$LEANCTX_HOME/logs/hooks.log") 2>/dev/null
    else
        printf '%s\n' "$1" >&2
    fi
}
case " @STDERR_IS_OUTPUT@ " in
    *" ${1:-} "*)  # this host takes a hook's stderr as its answer (Gemini CLI): nothing goes there
        LEANCTX_QUIET_STDERR=1
        export LEANCTX_QUIET_STDERR
        exec 2>/dev/null
        ;;
esac
if [ ! -x "$LEANCTX_PYTHON" ]; then
    leanctx_skip "leanctx: hook skipped: the Python that installed leanctx is gone ($LEANCTX_PYTHON); reinstall leanctx and run 'leanctx init', or run 'leanctx uninstall'"
    exit 0
fi
exec "$LEANCTX_PYTHON" -I -S -c '
import sys
sys.path.insert(0, sys.argv.pop(1))
try:
    from leanctx.hooks import run
except BaseException as exc:
    import os
    line = "leanctx: hook skipped: cannot import leanctx (%s); run: leanctx doctor\n" % exc
    try:
        if os.environ.get("LEANCTX_QUIET_STDERR"):
            os.umask(0o077)  # a data dir made here is 0700 and the log 0600, like leanctx makes them
            os.makedirs(os.path.join(os.environ["LEANCTX_HOME"], "logs"), 0o700, exist_ok=True)
            with open(os.path.join(os.environ["LEANCTX_HOME"], "logs", "hooks.log"), "a") as log:
                log.write(line)
        else:
            sys.stderr.write(line)
    except BaseException:
        pass
    raise SystemExit(0)
run()
' "$LEANCTX_SRC" "$@"
