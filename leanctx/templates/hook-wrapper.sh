#!/bin/sh
# leanctx hook wrapper. Written by `leanctx init`; rewritten on every init, so do not edit.
# Host configs call this file by its stable path; an upgrade rewrites it, never their entries.
# leanctx-wrapper: 1
# leanctx-version: @VERSION@
LEANCTX_PYTHON=@PYTHON@
LEANCTX_SRC=@SRC@
if [ -z "${LEANCTX_HOME:-}" ]; then
    LEANCTX_HOME=@DATA_DIR@
    export LEANCTX_HOME
fi
case " @STDERR_IS_OUTPUT@ " in
    *" ${1:-} "*)  # this host takes a hook's stderr as its answer: ours goes to the hook log
        exec 2>/dev/null
        leanctx_umask=$(umask)
        umask 077
        mkdir -p "$LEANCTX_HOME/logs"
        command exec 2>>"$LEANCTX_HOME/logs/hooks.log"
        umask "$leanctx_umask"
        ;;
esac
if [ ! -x "$LEANCTX_PYTHON" ]; then
    echo "leanctx: hook skipped: the Python that installed leanctx is gone ($LEANCTX_PYTHON); reinstall leanctx and run 'leanctx init', or run 'leanctx uninstall'" >&2
    exit 0
fi
exec "$LEANCTX_PYTHON" -I -S -c '
import sys
sys.path.insert(0, sys.argv.pop(1))
try:
    from leanctx.hooks import run
except BaseException as exc:
    sys.stderr.write("leanctx: hook skipped: cannot import leanctx (%s); run: leanctx doctor\n" % exc)
    raise SystemExit(0)
run()
' "$LEANCTX_SRC" "$@"
