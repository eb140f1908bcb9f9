"""Starting leanctx's own Python processes so that nothing in the current folder can run.

Hosts start our MCP server in the session's folder, often a cloned repository. `python -m` and
`python -c` put that folder first on sys.path, so a repository holding `leanctx/`, `json.py` or
`socket.py` would run as the user. Every interpreter we start runs isolated (`-I`: no current
folder, no PYTHON* variables, no user site-packages) with BOOT, which puts this installation's
package root on sys.path explicitly, then the absolute folders of PYTHONPATH (a relative one, such
as `.`, would name the current folder again), adds back the user site-packages a plain interpreter outside
a venv would use (so a `pip install --user` install still finds its dependencies), then runs a
module as `python -m` would. `-P` would do the first part alone, but only from Python 3.11.
Standard library only: a hook may start the daemon.
"""

from __future__ import annotations

import sys
from pathlib import Path

# argv after `-c BOOT`: <package root> <module> [args...]
BOOT = """\
import os, site, sys
sys.path.insert(0, sys.argv.pop(1))
sys.path[1:1] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
if sys.prefix == sys.base_prefix and os.getuid() == os.geteuid():
    user = site.getusersitepackages()
    if os.path.isdir(user):
        n = len(sys.path)
        site.addsitedir(user)
        added = sys.path[n:]
        del sys.path[n:]
        sys.path[1:1] = added
import runpy
runpy.run_module(sys.argv.pop(1), run_name="__main__", alter_sys=True)
"""


def package_root() -> Path:
    """The folder to put on sys.path so `import leanctx` finds this installation."""
    import leanctx

    return Path(leanctx.__file__).resolve().parent.parent


def argv(module: str, *args: str, python: str | None = None) -> list[str]:
    """`python -m module args...`, run isolated from the current folder."""
    return [python or sys.executable, "-I", "-c", BOOT, str(package_root()), module, *args]
