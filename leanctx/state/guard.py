"""The multi-user guard: a PreToolUse-type check that keeps one user's bot turn out of the others' folders.

An always-on bot may serve several people from one machine. Their data live side by side under
`$CKS_HOME/user/<slug>/` (`CKS_HOME` defaults to `~/.cks`); the person being served right now is
`CKS_ACTIVE_USER`, through the one-to-one slug of leanctx.state.slug (`local` when unset; set but
empty: no active user, every user folder is denied). `decide()` looks at one tool call and returns None (allow) or the reason to show the model.
Each host module's `guard_output()` turns that into the host's deny form (leanctx/hooks/guard.py
wires the two together, with `leanctx.state.slug` for CKS_HOME and the slug). Standard library only: it runs inside the hook
process on every tool call, and it imports `shlex` and `fnmatch` (and through them `re`) only when a
shell command or a wildcard is actually there.

What is denied
--------------
"The zone" is `$CKS_HOME` itself, `$CKS_HOME/user` (listing it enumerates the users) and every
`$CKS_HOME/user/<name>` except the active user's folder. Everything else - the active user's
folder, other files in `$CKS_HOME` such as `$CKS_HOME/config.json`, the project, the rest of the
disk - is allowed, except that a *recursive* search or copy must not start at an ancestor of
`$CKS_HOME/user` (see "search roots").

Paths. Relative paths are resolved against the call's working directory (and, in a shell
command, against every directory the command `cd`s/`pushd`es/`-C`s into); `~`, `~user`, `~+`,
`$HOME`, `${HOME}`, `$CKS_HOME`, `$PWD`, `$CKS_ACTIVE_USER` (to what the shell holds: the sender
id itself, which for an id that is not its own slug is not the active folder; empty when unset,
so `${CKS_ACTIVE_USER:-local}` is `local`) and variables assigned earlier in the
same command (`HOME=...` included: `~` is then tried both ways) are expanded; `..` is normalised; and each path is judged twice, lexically and
after `os.path.realpath`, against every spelling of `$CKS_HOME/user` (as given, with `$CKS_HOME`
resolved, and resolved itself). So a symlink anywhere that points into another user's folder is
denied, and a symlink inside the active folder is judged by its target. Path comparison is
case-insensitive for the part leading to `$CKS_HOME/user` (a case-insensitive file system would
follow `~/.CKS/USER/bob`), while the active user's folder must be spelled exactly (`Alice` is not
`alice`: denied). Hosts report a session cwd that can lag behind the shell's (Claude Code and
Codex issues about stale hook `cwd`), so a relative `../<name>` that would reach an existing
other user's folder *from the active folder* is denied whatever the reported cwd. A shell or
unknown tool whose working directory is another user's folder or `$CKS_HOME/user` is denied
outright.

Wildcards (`*`, `?`, `[...]`, `{a,b}`, unknown `$VAR`). A pattern is followed component by
component against the path down to `$CKS_HOME/user`. It is denied when it can reach another
user's folder (`~/.cks/user/*/profile.md`, `~/.c*/user/bob`, `~/.cks/*/*/x`, `.../user/[ab]ob`),
when it can stop at `$CKS_HOME` or `$CKS_HOME/user`, when a `**` component starts at
`$CKS_HOME/user` or any of its ancestors (`**` from HOME or `/` can descend into every user's
folder; `**bold**` is an ordinary wildcard, as in bash and glob libraries), when a wildcard
that can match `..` (`.*`) climbs out of the active folder, and when `..` follows `**`. In shell
commands `*`, `?` and `[` do not match a leading dot (bash's default; `shopt -s dotglob` turns
that off), so `ls ~/*` is fine while `ls ~/.c*` is not; for the Glob/Grep tools they do. When a
pattern has no `**` and its fixed prefix is an existing folder, it is also expanded on disk
(bounded) and every match is judged by its real path, which catches `proj/*/profile.md` through
a planted symlink.

Search roots. Glob and Grep (and the shell's recursive walkers: `find`, `ls -R`, `grep -r`,
`rg`, `ag`, `ack`, `fd`, `tree`, `du`, `tar`, `zip -r`, `cp -r`, `scp -r`, `rsync`, `mv`,
`rm -r`, `chmod/chown -R`, `locate`) are denied when their root is in the zone, and when their
root is an ancestor of `$CKS_HOME/user` (HOME, `/`, or `$CKS_HOME` itself) unless the pattern
provably cannot enter the user tree: a Glob like `src/**/*.py` from HOME is allowed, `**/*.py`
from HOME is not; a Grep from HOME needs a `glob` anchored away from `$CKS_HOME`
(`src/**/*.py`). A deliberate extra: shell walkers from an ancestor are denied even when
they do not name `.cks` (`grep -r phone ~` reads every user's profile), with two provable
exceptions: a depth limit too shallow to list `$CKS_HOME/user/<name>` (`find ~ -maxdepth 1`,
`tree -L 2`, `du -d 1`, `rg/fd --max-depth`), and tools that skip hidden folders by default
(`rg`, `ag`, `fd`) when a folder between the root and `$CKS_HOME/user` is hidden (`~/.cks`) and
neither a hidden flag (`--hidden`, `-uu`, `-H`...) nor the hidden folder's name appears in the
command. Searches rooted in a project folder outside `$CKS_HOME` are always allowed.

Shell commands (Claude/CodeBuddy `Bash`, Codex `Bash`/`shell` with a string or an argv list,
Cursor `Shell`, and anything with a `command`): tokenised with `shlex` (falling back to a plain
split on unbalanced quotes), every token and every piece of it (split at quotes, `=`, `:`, `,`,
`;`, brackets, backticks...) is judged as a path, so `--file=~/.cks/user/bob/x`,
`python -c "open('/home/u/.cks/user/bob/x')"` and `echo $(cat ~/.cks/user/bob/x)` are denied; a
token that itself contains spaces or operators (`bash -c "..."`, `eval "..."`) is analysed again
as a command. `cd ~/.cks/user && cat bob/x` is denied twice over (the `cd` names the users'
folder; `bob/x` is resolved against the `cd` target). A piece that starts with an unknown
variable (`$DIR/bob/profile.md`) is denied when what follows spells `.cks/user`, `user/<existing
user>`, or starts with an existing other user's folder name. And any piece, wherever it starts,
that spells `<hidden CKS_HOME name>/user/<not the active user>` (`'/.cks/user/bob'` glued to
`expanduser('~')` in a `python -c`) is denied; this last heuristic is used only when the
`$CKS_HOME` folder name is hidden (the default `.cks`), since `data/user/...` is an ordinary path.

Other tools. File tools (Read, Write, Edit, MultiEdit, NotebookEdit, Cursor's Read, Write,
StrReplace, Delete...) are judged on their path keys (`file_path`, `path`, `notebook_path`,
`target_file`, `paths`, ...); a delete tool is also denied on an ancestor of the zone. Tools the
guard does not know have every string in their input scanned (nested, bounded): strings under
path-like keys as paths, `command`-like keys as shell commands, anything else piece by piece
where a piece looks like a path. A tool whose name says it searches (`search`, `grep`, `glob`,
`find`, `walk`, `tree`) is treated as a walker for its path-like values. If the analysis itself
fails, the call is denied (fail closed), with the error in the reason.

Known limits (why this is defense in depth, not the boundary)
-------------------------------------------------------------
A model with a shell can always build a path the guard never sees: `$(printf '\\x7e/.c%s' ks)`,
base64, a variable set in an earlier command or in the environment, a script written with the
Write tool (file contents are not scanned) and run later, a program (`python`, `node`, `perl`)
that walks the disk itself (`os.walk(os.path.expanduser('~'))`), `xargs` fed from another
command, a tar archive that extracts into `$CKS_HOME`, a hard link made earlier, an MCP server
that reads files on its own. Unknown variables in the middle of a path are taken as one unknown
component, not as several or as `..`. Relative paths are only as right as the cwd the host
reports (Codex does not pass `exec_command`'s `workdir`; Claude Code's cwd can drift); beyond
`../<existing user>` a stale cwd can make a relative path look harmless. Recursive tools that do
not follow symlinks (rg, the Glob/Grep tools, `find`, `grep -r`) are not checked for symlinks
planted deep in a project (recursive searches *inside the active folder* are: a link there into
the zone denies them). Tools are recognised by name and walkers by their usual flags; a
`~/.ripgreprc` with `--hidden`, a shell alias or function, or an unlisted walker is not seen. The
guard also errs the other way: it denies any mention of another user's folder, even in an
`echo`, and some legitimate walks of HOME. The strong boundary is one bot process (and ideally
one OS user) per person, as the CKS docs themselves recommend; the guard stops the easy and
accidental paths - including every bypass measured against the CKS user-memory-guard.
"""

from __future__ import annotations

import os

__all__ = ["decide"]

_INF = 1 << 30
_MAGIC_CHARS = frozenset("*?[]{}")
_PIECE_SPLIT = str.maketrans({c: "\0" for c in " \t\n\r\f\v'\"=,:;()<>|&`"})
_OPERATOR_CHARS = frozenset(";&|()")
_MAX_STRINGS = 2000
_MAX_DEPTH = 4
_DISK_MATCHES = 256
_LINK_SCAN = 5000

_SHELL_TOOLS = frozenset(
    {"bash", "shell", "sh", "run_terminal_cmd", "terminal", "exec_command", "local_shell",
     "run_shell_command", "execute_command", "container.exec", "run_command", "powershell"}
)
_FILE_TOOLS = frozenset(
    {"read", "write", "edit", "multiedit", "notebookedit", "notebookread", "strreplace",
     "delete", "ls", "list_dir", "listdirectory", "list_directory", "view", "read_file",
     "write_file", "edit_file", "create", "search_replace", "delete_file", "readfile",
     "writefile", "editnotebook", "read_many_files", "remove", "rm", "move", "copy"}
)
_DELETE_TOOLS = frozenset({"delete", "delete_file", "remove", "rm", "move"})
_GLOB_TOOLS = frozenset({"glob", "glob_file_search", "find_files", "file_search"})
_GREP_TOOLS = frozenset({"grep", "search", "grep_search", "ripgrep", "search_files"})
_TEXT_TOOLS = frozenset(
    {"todowrite", "todoread", "exitplanmode", "askuserquestion", "websearch", "web_search"}
)
_PATH_KEYS = frozenset(
    {"file_path", "path", "notebook_path", "target_file", "paths", "filepath", "file",
     "files", "filename", "target_directory", "target_directories", "directory", "dir",
     "folder", "root", "old_path", "new_path", "source", "destination", "src", "dst", "dest",
     "target", "absolute_path", "relative_workspace_path", "uri", "cwd", "workdir",
     "working_directory", "location"}
)
_COMMAND_KEYS = frozenset({"command", "cmd", "script", "commandline", "command_line", "argv"})
_WALKER_WORDS = ("search", "grep", "glob", "find", "walk", "tree", "recursive")


class _Deny(Exception):
    pass


# --------------------------------------------------------------------------- path helpers


def _norm(path: str) -> str:
    path = os.path.normpath(path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return path


def _comps(path: str) -> list[str]:
    return [c for c in path.split("/") if c and c != "."]


def _magic(comp: str) -> bool:
    return any(c in _MAGIC_CHARS for c in comp) or "$" in comp or "`" in comp


def _kind(comp: str) -> str:
    if comp == "..":
        return "up"
    if comp in ("**", "***"):
        return "star2"  # only a whole `**` component recurses; `**bold**` is just `*bold*`
    if "$" in comp or "`" in comp:
        return "var"
    if any(c in _MAGIC_CHARS for c in comp):
        return "wild"
    return "lit"


def _fnmatch(name: str, pattern: str) -> bool:
    from fnmatch import fnmatchcase

    return fnmatchcase(name.casefold(), pattern.casefold())


def _wild_matches(pattern: str, name: str, dot_rule: bool) -> bool:
    if "{" in pattern or "}" in pattern:
        return True
    if dot_rule and name.startswith(".") and not pattern.startswith((".", "[")):
        return False
    return _fnmatch(name, pattern)


def _wild_can_be_up(pattern: str) -> bool:
    """Whether a wildcard component can match `..`: only one that starts with a dot can (bash before
    5.2 lists `.` and `..` for `.*`; directory scans in tools never return them)."""
    if "{" in pattern or "}" in pattern:
        return ".." in pattern
    return pattern.startswith((".", "[")) and _fnmatch("..", pattern)


def _expand_vars(text: str, variables: dict[str, str]) -> str:
    """Substitute `$NAME` / `${NAME}` / `${NAME:-word}` / `${NAME-word}` for known names as the
    shell would; unknown names and other `${…}` forms stay as written (judged as unknown)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "$":
            out.append(c)
            i += 1
            continue
        if i + 1 < n and text[i + 1] == "{":
            j = text.find("}", i + 2)
            if j < 0:
                out.append(text[i:])
                break
            inner = text[i + 2 : j]
            k = 0
            while k < len(inner) and (inner[k].isalnum() or inner[k] == "_"):
                k += 1
            name, op = inner[:k], inner[k:]
            if name in variables and (op == "" or op.startswith((":-", "-"))):
                value = variables[name]
                if op.startswith(":-") and value == "":
                    value = _expand_vars(op[2:], variables)
                out.append(value)
            else:
                out.append(text[i : j + 1])
            i = j + 1
            continue
        j = i + 1
        while j < n and (text[j].isalnum() or text[j] == "_"):
            j += 1
        name = text[i + 1 : j]
        if name and name in variables:
            out.append(variables[name])
            i = j
        else:
            out.append(text[i:j] if name else "$")
            i = j if name else i + 1
    return "".join(out)


def _os_user_home(name: str) -> str | None:
    try:
        import pwd

        return pwd.getpwnam(name).pw_dir
    except (ImportError, KeyError, OSError):
        return None


# --------------------------------------------------------------------------- the zone


class _Spelling:
    """One spelling of `$CKS_HOME/user`: its components, and from which chain index a root is denied."""

    __slots__ = ("comps", "cf", "n", "g", "text")

    def __init__(self, text: str, g: int) -> None:
        self.text = text
        self.comps = _comps(text)
        self.cf = [c.casefold() for c in self.comps]
        self.n = len(self.comps)
        self.g = g

    def node(self, k: int) -> str:
        return "/" + "/".join(self.comps[:k])


class _Zone:
    def __init__(self, cks_home: str, active_slug: str, home: str, active_id: str | None = None) -> None:
        home = home or os.path.expanduser("~")
        self.home = _norm(os.path.abspath(home))
        cks = cks_home or os.path.join(self.home, ".cks")
        cks = _expand_vars(cks, {"HOME": self.home})
        if cks == "~" or cks.startswith("~/"):
            cks = self.home + cks[1:]
        self.cks = _norm(os.path.abspath(cks))
        self.cks_real = os.path.realpath(self.cks)
        self.user_dir = self.cks.rstrip("/") + "/user"
        slug = active_slug or ""
        valid = slug not in ("", ".", "..") and "/" not in slug and "\0" not in slug and len(slug) <= 64
        self.active = slug if valid else None
        spellings: dict[tuple[str, ...], _Spelling] = {}
        cands = [(self.user_dir, len(_comps(self.cks))),
                 (self.cks_real.rstrip("/") + "/user", len(_comps(self.cks_real)))]
        user_real = os.path.realpath(self.user_dir)
        cands.append((user_real, len(_comps(user_real))))
        for text, g in cands:
            sp = _Spelling(text, g)
            key = tuple(sp.cf)
            if key not in spellings or spellings[key].g > g:
                spellings[key] = sp
        self.spellings = list(spellings.values())
        self._others: list[str] | None = None
        self.variables = {"HOME": self.home, "CKS_HOME": self.cks}
        if active_id is not None:  # what the shell holds: the sender id, '' when unset or empty
            self.variables["CKS_ACTIVE_USER"] = active_id
        elif self.active:
            self.variables["CKS_ACTIVE_USER"] = self.active

    def active_dir(self) -> str:
        return f"{self.user_dir}/{self.active}" if self.active else "(none: no valid active user)"

    def others(self) -> list[str]:
        """Names in `$CKS_HOME/user` other than the active one (for the unknown-variable heuristic)."""
        if self._others is None:
            names: set[str] = set()
            for sp in self.spellings:
                try:
                    names.update(os.listdir(sp.text))
                except OSError:
                    pass
            names.discard(self.active or "")
            self._others = sorted(names)
        return self._others

    # ---- states: ('c', k) chain node k; ('a', d) depth d in the active folder;
    # ---- ('o', k, d) off the chain, d below node k; ('x', why) denied.

    def start(self, sp: _Spelling, comps: list[str]) -> tuple:
        n, length = sp.n, len(comps)
        m, lim = 0, min(length, n)
        while m < lim and comps[m].casefold() == sp.cf[m]:
            m += 1
        if m == length:
            return ("c", m)
        if m == n:
            first = comps[n]
            if self.active is not None and first == self.active:
                return ("a", length - n - 1)
            return ("x", self._other_why(sp, first))
        return ("o", m, length - m)

    def _other_why(self, sp: _Spelling, name: str) -> str:
        if _magic(name):
            return f"its wildcard {name!r} can match any user's folder in {sp.text}"
        return f"it is inside another user's folder ({sp.text}/{name})"

    def step(self, sp: _Spelling, st: tuple, comp: str, dot_rule: bool) -> list[tuple]:
        kind = _kind(comp)
        tag = st[0]
        out: list[tuple] = []
        if tag == "c":
            k = st[1]
            if kind == "up":
                return [("c", max(k - 1, 0))]
            if k == sp.n:
                if kind == "lit" and self.active is not None and comp == self.active:
                    return [("a", 0)]
                if kind in ("lit", "wild", "var"):
                    return [("x", self._other_why(sp, comp))]
                return [("x", f"'**' from {sp.text} reaches every user's folder")]
            if kind == "star2":
                return [("x", f"'**' can descend from {sp.node(k)} into every user's folder under {sp.text}")]
            if kind == "lit":
                return [("c", k + 1) if comp.casefold() == sp.cf[k] else ("o", k, 1)]
            if kind == "var" or _wild_matches(comp, sp.comps[k], dot_rule):
                out.append(("c", k + 1))
            out.append(("o", k, 1))
            if kind == "wild" and _wild_can_be_up(comp):
                out.append(("c", max(k - 1, 0)))
            return out
        if tag == "a":
            d = st[1]
            if kind == "up":
                if d >= _INF:
                    return [("x", "'..' after '**' can climb out of the active user's folder")]
                return [("c", sp.n) if d == 0 else ("a", d - 1)]
            if kind == "star2":
                return [("a", _INF)]
            out.append(("a", d + 1 if d < _INF else _INF))
            if kind == "wild" and _wild_can_be_up(comp):
                out.extend(self.step(sp, st, "..", dot_rule))
            return out
        # off the chain
        k, d = st[1], st[2]
        if kind == "up":
            if d >= _INF:
                return [("x", "'..' after '**' can climb anywhere")]
            return [("c", k) if d == 1 else ("o", k, d - 1)]
        if kind == "star2":
            return [("o", k, _INF)]
        out.append(("o", k, d + 1 if d < _INF else _INF))
        if kind == "wild" and _wild_can_be_up(comp):
            out.extend(self.step(sp, st, "..", dot_rule))
        return out

    def run(self, sp: _Spelling, st: tuple, rest: list[str], dot_rule: bool) -> tuple[str | None, set]:
        states = {st}
        for comp in rest:
            nxt: set = set()
            for s in states:
                if s[0] == "x":
                    return s[1], set()
                nxt.update(self.step(sp, s, comp, dot_rule))
            states = nxt
        for s in states:
            if s[0] == "x":
                return s[1], set()
        return None, states

    def final_why(self, sp: _Spelling, st: tuple) -> str | None:
        if st[0] != "c" or st[1] < sp.g:
            return None
        if st[1] == sp.n:
            return f"it names the users' folder {sp.text} itself (listing it enumerates every user)"
        return f"it names {sp.node(st[1])}, which holds every user's folder"


class _Analysis:
    """The result of following one (possibly wildcarded) absolute path: (spelling, final state) pairs."""

    __slots__ = ("finals",)

    def __init__(self) -> None:
        self.finals: list[tuple[_Spelling, tuple]] = []

    def ancestors(self) -> list[tuple[_Spelling, int]]:
        return [(sp, st[1]) for sp, st in self.finals if st[0] == "c"]


def _follow(
    zone: _Zone, path: str, *, dot_rule: bool, label: str, disk: bool = True, shown: str | None = None
) -> _Analysis:
    """Judge an absolute path or pattern; raise _Deny, or return where it can end up.

    `shown` is how the caller spelled it (`~/.cks/user/bob`), for the reason; `path` is absolute.
    """
    shown = path if shown is None else shown
    raw = [c for c in path.split("/") if c and c != "."]
    i = 0
    while i < len(raw) and not _magic(raw[i]):
        i += 1
    prefix, rest = raw[:i], raw[i:]
    prefix_text = "/" + "/".join(prefix)
    lex = _norm(prefix_text)
    try:
        real = os.path.realpath(prefix_text)
    except (OSError, ValueError):
        real = lex
    result = _Analysis()
    for p in dict.fromkeys((lex, real)):
        pc = _comps(p)
        for sp in zone.spellings:
            st = zone.start(sp, pc)
            resolved = p if not rest else path
            if st[0] == "x":
                _deny(zone, label, shown, p, st[1])
            why, finals = zone.run(sp, st, rest, dot_rule)
            if why:
                _deny(zone, label, shown, resolved, why)
            for f in finals:
                fw = zone.final_why(sp, f)
                if fw:
                    _deny(zone, label, shown, resolved, fw)
                result.finals.append((sp, f))
    if any(_kind(c) == "star2" for c in rest) and any(st[0] == "a" for _, st in result.finals):
        _check_links(zone, real, label, shown)
    if rest and disk and not any(_kind(c) in ("star2", "var") or "{" in c or "}" in c for c in rest):
        if sum(1 for c in rest if _kind(c) == "wild") <= 3 and os.path.isdir(real):
            _check_disk(zone, real + "/" + "/".join(rest), shown, label)
    return result


def _check_links(zone: _Zone, root: str, label: str, shown: str) -> None:
    """A recursive search inside the active folder: deny if a symlink below `root` leads into the zone.

    User folders are small; the walk is bounded (`_LINK_SCAN` entries) and never follows links.
    """
    seen = 0
    try:
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                seen += 1
                if seen > _LINK_SCAN:
                    return
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    continue
                real = os.path.realpath(path)
                for sp in zone.spellings:
                    st = zone.start(sp, _comps(real))
                    why = st[1] if st[0] == "x" else zone.final_why(sp, st)
                    if why:
                        _deny(zone, label, shown, None,
                              f"the search would pass the symlink {path} -> {real}: {why}")
    except OSError:
        return


def _check_disk(zone: _Zone, pattern: str, shown: str, label: str) -> None:
    import glob

    try:
        for count, match in enumerate(glob.iglob(pattern)):
            if count >= _DISK_MATCHES:
                break
            real = os.path.realpath(match)
            for sp in zone.spellings:
                st = zone.start(sp, _comps(real))
                if st[0] == "x":
                    _deny(zone, label, shown, real, f"it matches {match}, whose real path is in the zone: {st[1]}")
                fw = zone.final_why(sp, st)
                if fw:
                    _deny(zone, label, shown, real, f"it matches {match}: {fw}")
    except OSError:
        pass


def _deny(zone: _Zone, label: str, shown: str, resolved: str | None, why: str) -> None:
    where = f" (resolves to {resolved})" if resolved and resolved != shown else ""
    raise _Deny(
        f"leanctx guard: denied {label} {shown!r}{where}: {why}. "
        f"This conversation may only use {zone.active_dir()}/ under {zone.user_dir}/; "
        "other users' folders are private to them (multi-user bot isolation)."
    )


# --------------------------------------------------------------------------- words and pieces


class _Scope:
    """What a path string is resolved against: working directories and known variables."""

    def __init__(self, zone: _Zone, cwds: list[str], dot_rule: bool = True) -> None:
        self.zone = zone
        self.cwds = list(dict.fromkeys(cwds))
        self.variables = dict(zone.variables)
        self.variables["PWD"] = cwds[0]
        self.dot_rule = dot_rule

    def tilde(self, piece: str) -> str | None:
        """Expand a leading `~`; None when it names an unknown user (an unknown location)."""
        if not piece.startswith("~"):
            return piece
        head, sep, tail = piece[1:].partition("/")
        if head == "":
            base = self.variables.get("HOME") or self.zone.home
        elif head == "+":
            base = self.cwds[0]
        elif head == "-":
            return None
        else:
            base = _os_user_home(head)
            if base is None:
                return None
        return base + ("/" + tail if sep else "")

    def absolutes(self, piece: str) -> list[str]:
        if piece.startswith("/"):
            return [piece]
        return [c.rstrip("/") + "/" + piece for c in self.cwds]


def _pieces(word: str) -> list[str]:
    """The word's pieces (split at quotes, spaces, `=`, `:`, brackets...), then the whole word."""
    parts = [p for p in word.translate(_PIECE_SPLIT).split("\0") if p]
    if word and word not in parts:
        parts.append(word)
    return list(dict.fromkeys(parts))


def _check_piece(scope: _Scope, piece: str, label: str, *, pathish: bool = True) -> None:
    if not piece or piece.startswith("-") or "\n" in piece:
        return  # options, and multi-line text (scripts, patches: their pieces are checked instead)
    if not pathish and any(c.isspace() for c in piece):
        _check_spelled(scope.zone, piece, label)
        return
    spellings = [scope.tilde(piece)]
    if piece.startswith("~/") and scope.variables.get("HOME") != scope.zone.home:
        spellings.append(scope.zone.home + piece[1:])  # the command reassigned HOME: try both
    for p in spellings:
        if p is None or p.startswith(("$", "`")):
            _check_tail(scope.zone, piece, label)
        elif pathish or "/" in p or p in (".", ".."):
            for absolute in scope.absolutes(p):
                _follow(scope.zone, absolute, dot_rule=scope.dot_rule, label=label, shown=piece)
            if p.startswith("../"):
                _check_stale_cwd(scope.zone, p, label)
    _check_spelled(scope.zone, piece, label)


def _check_stale_cwd(zone: _Zone, rel: str, label: str) -> None:
    """`../bob/x` is denied even when the reported cwd is elsewhere: hosts report a session cwd that
    can lag behind the shell's (a `cd` into the active folder in an earlier call), so a climb that
    would reach an existing other user's folder from the active folder is refused too."""
    if zone.active is None:
        return
    target = _norm(f"{zone.user_dir}/{zone.active}/{rel}")
    for sp in zone.spellings:
        st = zone.start(sp, _comps(target))
        if st[0] == "x":
            rest = target[len(sp.text) + 1 :] if target.startswith(sp.text + "/") else ""
            name = rest.split("/", 1)[0]
            if name and name in zone.others():
                _deny(zone, label, rel, target,
                      f"run from the active user's folder (where an earlier `cd` may have left the shell; hosts "
                      f"can report a stale cwd) it reaches another user's folder ({name})")


def _check_spelled(zone: _Zone, piece: str, label: str) -> None:
    """A piece that spells `.cks/user/<other>` anywhere (`'/.cks/user/bob'` glued to a home in code).

    Only for a hidden `$CKS_HOME` name like the default `.cks`: a plain name (`data/user/...`)
    would match ordinary project paths.
    """
    if "/" not in piece:
        return
    comps = [c for c in piece.split("/") if c and c != "."]
    cf = [c.casefold() for c in comps]
    for sp in zone.spellings:
        if sp.n < 2 or not sp.comps[-2].startswith("."):
            continue
        a, b = sp.cf[-2], sp.cf[-1]
        for j in range(len(cf) - 1):
            if cf[j] != a or cf[j + 1] != b:
                continue
            rest = os.path.normpath("/".join(comps[j + 2 :]) or ".")
            first = rest.split("/", 1)[0]
            if first != zone.active:
                what = "the users' folder itself" if first in (".", "..") else f"another user's folder ({first})"
                _deny(zone, label, piece, None, f"it spells {sp.comps[-2]}/{sp.comps[-1]}/..., which names {what}")


def _check_tail(zone: _Zone, piece: str, label: str) -> None:
    """A path that starts at an unknown place (`$DIR/...`, `~nobody/...`): judge what follows it."""
    comps = [c for c in piece.split("/") if c and c != "."]
    last = 0
    for i, c in enumerate(comps):
        if "$" in c or "`" in c or (i == 0 and c.startswith("~")):
            last = i
    tail = comps[last + 1 :]
    if not tail:
        return
    others = zone.others()
    tcf = [c.casefold() for c in tail]
    for sp in zone.spellings:
        user_cf = sp.cf[-1] if sp.n else ""
        cks_cf = sp.cf[-2] if sp.n >= 2 else None
        for j, c in enumerate(tcf):
            nxt = tail[j + 1] if j + 1 < len(tail) else None
            if cks_cf is not None and c == cks_cf and (nxt is None or nxt.casefold() == user_cf):
                _deny(zone, label, piece, None, f"after an unknown variable it spells {sp.comps[-2]}/{sp.comps[-1]}")
            if c == user_cf and nxt is not None and (nxt in others or _magic(nxt)):
                _deny(zone, label, piece, None, f"after an unknown variable it names another user's folder ({sp.comps[-1]}/{nxt})")
        if tail[0] in others:
            _deny(zone, label, piece, None, f"after an unknown variable it names another user's folder ({tail[0]})")


# --------------------------------------------------------------------------- shell commands


def _tokens(command: str) -> list[str]:
    import shlex

    text = command.replace("\r\n", "\n").replace("\n", " ; ")
    for attempt in (text, text + '"', text + "'"):
        try:
            lexer = shlex.shlex(attempt, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            lexer.commenters = ""
            return list(lexer)
        except ValueError:
            continue
    return [t.strip("'\"") for t in text.split()]


def _is_operator(token: str) -> bool:
    return bool(token) and all(c in _OPERATOR_CHARS for c in token)


def _is_redirect(token: str) -> bool:
    return bool(token) and all(c in "<>&" for c in token) and ("<" in token or ">" in token)


def _assignment(token: str) -> tuple[str, str] | None:
    name, eq, value = token.partition("=")
    if eq and name and (name[0].isalpha() or name[0] == "_") and all(c.isalnum() or c == "_" for c in name):
        return name, value
    return None


_WRAPPERS = frozenset(
    {"sudo", "doas", "env", "nice", "nohup", "time", "command", "builtin", "exec", "stdbuf",
     "ionice", "chronic", "unbuffer", "setsid", "then", "do", "else", "elif", "if", "while",
     "until", "!", "{", "timeout", "xargs", "caffeinate", "export", "declare", "local",
     "readonly", "typeset", "eval", "watch", "strace", "ltrace", "nocorrect", "noglob"}
)
_WRAPPER_ARGS = {
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-R"},
    "doas": {"-u", "-C"},
    "env": {"-u", "-C", "-S", "--unset", "--chdir"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p"},
    "stdbuf": {"-i", "-o", "-e"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "xargs": {"-I", "-i", "-n", "-P", "-L", "-l", "-d", "-E", "-e", "-s", "-a", "--arg-file",
              "--delimiter", "--max-args", "--max-procs", "--replace"},
    "watch": {"-n", "-d", "--interval"},
    "strace": {"-o", "-e", "-p", "-s"},
}


def _command_start(seg: list[str]) -> int:
    """Index of the command word in a segment, after assignments and wrappers (sudo, env, xargs...)."""
    i = 0
    while i < len(seg):
        tok = seg[i]
        assign = _assignment(tok)
        if assign:
            i += 1
            continue
        name = os.path.basename(tok)
        if name not in _WRAPPERS:
            return i
        i += 1
        takes = _WRAPPER_ARGS.get(name, set())
        while i < len(seg) and seg[i].startswith("-") and seg[i] != "-":
            opt = seg[i]
            i += 1
            if opt in takes and i < len(seg):
                i += 1
            if opt == "--":
                break
        if name == "timeout" and i < len(seg):
            i += 1
        if name in ("nice",) and i < len(seg) and seg[i].lstrip("-").isdigit():
            i += 1
    return i


def _short_flags(args: list[str]) -> set[str]:
    flags: set[str] = set()
    for a in args:
        if a == "--":
            break
        if a.startswith("-") and not a.startswith("--") and len(a) > 1:
            flags.update(a[1:])
    return flags


def _positionals(args: list[str], takes: set[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            out.extend(args[i:])
            break
        if _is_redirect(a):
            i += 1
            continue
        if a.startswith("-") and a != "-":
            if a in takes and "=" not in a:
                i += 1
            continue
        out.append(a)
    return out


def _opt_value(args: list[str], names: tuple[str, ...]) -> str | None:
    for i, a in enumerate(args):
        for name in names:
            if a == name and i + 1 < len(args):
                return args[i + 1]
            if name.startswith("--") and a.startswith(name + "="):
                return a[len(name) + 1 :]
            if not name.startswith("--") and a.startswith(name) and len(a) > len(name) and a[len(name) :].isdigit():
                return a[len(name) :]
    return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


_GREP_TAKES = {"-e", "-f", "-m", "-A", "-B", "-C", "-d", "-D", "--regexp", "--file", "--max-count",
               "--after-context", "--before-context", "--context", "--include", "--exclude",
               "--exclude-dir", "--directories", "--devices", "--label", "--binary-files",
               "--exclude-from", "--color", "--colour"}
_RG_TAKES = {"-e", "-f", "-g", "-t", "-T", "-m", "-A", "-B", "-C", "-d", "-M", "-j", "-r", "-E",
             "--regexp", "--file", "--glob", "--iglob", "--type", "--type-not", "--max-count",
             "--after-context", "--before-context", "--context", "--max-depth", "--max-columns",
             "--threads", "--replace", "--encoding", "--pre", "--pre-glob", "--sort", "--sortr",
             "--type-add", "--type-clear", "--color", "--colors", "--max-filesize",
             "--path-separator", "--context-separator", "--ignore-file", "--engine",
             "--dfa-size-limit", "--regex-size-limit"}
_AG_TAKES = {"-G", "-g", "-A", "-B", "-C", "-m", "--depth", "--ignore", "--file-search-regex",
             "--max-count", "--after", "--before", "--context", "-p", "--path-to-ignore"}
_FD_TAKES = {"-e", "-E", "-t", "-d", "-x", "-X", "-S", "-c", "-j", "--extension", "--exclude",
             "--type", "--max-depth", "--min-depth", "--exact-depth", "--exec", "--exec-batch",
             "--size", "--changed-within", "--changed-before", "--owner", "--base-directory",
             "--search-path", "--color", "--threads", "--max-results"}
_TREE_TAKES = {"-L", "-P", "-I", "-o", "-H", "-T", "--filelimit", "--charset", "--sort"}
_DU_TAKES = {"-d", "-B", "-t", "--max-depth", "--block-size", "--threshold", "--exclude", "-X"}
_FIND_EXPR_START = ("-", "(", "!", ")", ",")


class _Walker:
    __slots__ = ("roots", "maxdepth", "skips_hidden", "shows_hidden")

    def __init__(self, roots, maxdepth=None, skips_hidden=False, shows_hidden=False):
        self.roots = roots or ["."]
        self.maxdepth = maxdepth
        self.skips_hidden = skips_hidden
        self.shows_hidden = shows_hidden


def _walker(cmd: str, args: list[str]) -> _Walker | None:
    """If this command walks folders recursively, where from and how deep; else None."""
    flags = _short_flags(args)
    longs = {a.split("=", 1)[0] for a in args if a.startswith("--")}
    if cmd == "find":
        roots = []
        i = 0
        while i < len(args) and args[i] in ("-H", "-L", "-P") or (i < len(args) and args[i].startswith("-O")):
            i += 1
        for a in args[i:]:
            if a.startswith(_FIND_EXPR_START):
                break
            roots.append(a)
        return _Walker(roots, maxdepth=_int(_opt_value(args, ("-maxdepth",))))
    if cmd == "ls":
        if "R" in flags or "--recursive" in longs:
            return _Walker(_positionals(args, set()))
        return None
    if cmd == "tree":
        return _Walker(_positionals(args, _TREE_TAKES), maxdepth=_int(_opt_value(args, ("-L",))))
    if cmd == "du":
        if "s" in flags or "--summarize" in longs:
            return None
        return _Walker(_positionals(args, _DU_TAKES), maxdepth=_int(_opt_value(args, ("-d", "--max-depth"))))
    if cmd in ("grep", "egrep", "fgrep", "zgrep", "rgrep", "ack", "ack-grep"):
        recursive = cmd in ("rgrep", "ack", "ack-grep") or bool(flags & {"r", "R"}) or bool(
            longs & {"--recursive", "--dereference-recursive"}
        ) or _opt_value(args, ("-d", "--directories")) == "recurse"
        if not recursive:
            return None
        pos = _positionals(args, _GREP_TAKES)
        if _opt_value(args, ("-e", "--regexp", "-f", "--file")) is None and pos:
            pos = pos[1:]
        return _Walker(pos)
    if cmd in ("rg", "ripgrep"):
        pos = _positionals(args, _RG_TAKES)
        if "--files" not in longs and _opt_value(args, ("-e", "--regexp", "-f", "--file")) is None and pos:
            pos = pos[1:]
        u_count = sum(a.count("u") for a in args if a.startswith("-") and not a.startswith("--"))
        shows = "." in flags or "--hidden" in longs or u_count >= 2 or sum(a == "--unrestricted" for a in args) >= 2
        return _Walker(pos, maxdepth=_int(_opt_value(args, ("-d", "--max-depth"))), skips_hidden=True, shows_hidden=shows)
    if cmd == "ag":
        pos = _positionals(args, _AG_TAKES)
        if pos:
            pos = pos[1:]
        shows = "u" in flags or bool(longs & {"--hidden", "--unrestricted"})
        return _Walker(pos, maxdepth=_int(_opt_value(args, ("--depth",))), skips_hidden=True, shows_hidden=shows)
    if cmd in ("fd", "fdfind"):
        pos = _positionals(args, _FD_TAKES)
        pos = pos[1:] if pos else pos
        base = _opt_value(args, ("--base-directory", "--search-path"))
        if base:
            pos.append(base)
        shows = bool(flags & {"H", "u"}) or bool(longs & {"--hidden", "--unrestricted"})
        depth = _opt_value(args, ("-d", "--max-depth", "--exact-depth"))
        return _Walker(pos, maxdepth=_int(depth), skips_hidden=True, shows_hidden=shows)
    if cmd in ("tar", "bsdtar", "gtar"):
        pos = [a for a in _positionals(args, {"-C", "--directory", "-T", "--files-from", "-X", "--exclude-from"})]
        if args and not args[0].startswith("-") and args[0].isalpha() and pos and pos[0] == args[0]:
            pos = pos[1:]
        return _Walker(pos) if pos else None
    if cmd in ("zip",):
        if "r" in flags or "--recurse-paths" in longs:
            return _Walker(_positionals(args, {"-x", "-i", "-b", "-t", "-tt", "-n"}))
        return None
    if cmd in ("7z", "7za", "7zr"):
        pos = _positionals(args, set())
        return _Walker(pos[1:]) if len(pos) > 1 else None
    if cmd in ("cp", "scp", "rsync", "mv", "rm", "chmod", "chown", "chgrp", "setfacl"):
        recursive = cmd in ("rsync", "mv") or bool(flags & {"r", "R"}) or bool(
            longs & {"--recursive", "--archive"}
        ) or (cmd == "cp" and "a" in flags)
        if not recursive:
            return None
        pos = _positionals(args, {"-t", "--target-directory", "-e", "-i", "-P", "-o", "-F", "-S", "--reference"})
        if cmd in ("chmod", "chown", "chgrp", "setfacl") and pos:
            pos = pos[1:]
        elif cmd in ("cp", "scp", "rsync", "mv") and len(pos) >= 2 and _opt_value(args, ("-t", "--target-directory")) is None:
            pos = pos[:-1]
        return _Walker(pos) if pos else None
    if cmd in ("locate", "plocate", "mlocate", "slocate"):
        return _Walker(["/"])
    return None


def _check_walker(scope: _Scope, cwd: str, cmd: str, walker: _Walker, raw: str, label: str) -> None:
    zone = scope.zone
    root_scope = _Scope(zone, [cwd], dot_rule=scope.dot_rule)
    raw_cf = raw.casefold()
    for root in walker.roots:
        word = _expand_vars(root, scope.variables) if "$" in root else root
        p = root_scope.tilde(word)
        if p is None or p.startswith(("$", "`")):
            continue
        for absolute in root_scope.absolutes(p):
            analysis = _follow(zone, absolute, dot_rule=scope.dot_rule, label=label, shown=root)
            if any(st[0] == "a" for _, st in analysis.finals) and not _magic(absolute):
                _check_links(zone, os.path.realpath(absolute), label, root)
            for sp, k in analysis.ancestors():
                if walker.maxdepth is not None and walker.maxdepth <= sp.n - k:
                    continue
                hidden = [c for c in sp.comps[k : sp.n] if c.startswith(".")]
                if walker.skips_hidden and hidden and not walker.shows_hidden and not any(
                    h.casefold() in raw_cf for h in hidden
                ):
                    continue
                _deny(
                    zone, label, root, absolute if _magic(absolute) else _norm(absolute),
                    f"'{cmd}' walks recursively from {sp.node(k)}, an ancestor of {sp.text}, so it can read or "
                    "list every user's folder; search a project folder, or the active user's folder, instead",
                )


def _check_shell(scope: _Scope, command, label: str, depth: int = 0) -> None:
    zone = scope.zone
    if isinstance(command, (list, tuple)):
        tokens = [str(t) for t in command]
        raw = " ".join(tokens)
        segments = [tokens]
    else:
        raw = str(command)
        if not raw.strip():
            return
        tokens = _tokens(raw)
        segments, cur = [], []
        for tok in tokens:
            if _is_operator(tok):
                if cur:
                    segments.append(cur)
                cur = []
            else:
                cur.append(tok)
        if cur:
            segments.append(cur)
    if "dotglob" in raw or "GLOB_DOTS" in raw.upper():
        scope.dot_rule = False
    # pass 1: assignments and directory changes, in order
    initial = list(scope.cwds)
    seq_cwds: list[str] = []
    cwd = scope.cwds[0]
    for seg in segments:
        seq_cwds.append(cwd)
        for tok in seg:
            assign = _assignment(tok)
            if assign:
                name, value = assign
                value = _expand_vars(value, scope.variables)
                scope.variables[name] = scope.tilde(value) or value
        start = _command_start(seg)
        if start >= len(seg):
            continue
        cmd = os.path.basename(seg[start])
        args = seg[start + 1 :]
        targets: list[str] = []
        if cmd in ("cd", "pushd", "chdir"):
            pos = [a for a in args if not (a.startswith("-") and a != "-")]
            targets.append(pos[0] if pos else "~")
        if any(a.startswith("-") for a in args):
            for opt in ("-C", "--directory", "--git-dir", "--work-tree", "--chdir", "--base-directory"):
                value = _opt_value(args, (opt,))
                if value:
                    targets.append(value)
        for target in targets:
            if target == "-":
                continue
            word = _expand_vars(target, scope.variables) if "$" in target else target
            p = scope.tilde(word)
            if p is None or _magic(p):
                continue
            new = _norm(p if p.startswith("/") else cwd.rstrip("/") + "/" + p)
            if new not in scope.cwds:
                scope.cwds.append(new)
            if cmd in ("cd", "pushd", "chdir"):
                cwd = new
    # pass 2: every token and every piece of it, first against the starting directory, then
    # against every directory the command can move into
    moved = scope.cwds[len(initial):]
    for cwds in (initial, moved):
        if not cwds:
            continue
        sub = _Scope(zone, cwds, scope.dot_rule)
        sub.variables = scope.variables
        for tok in dict.fromkeys(tokens):
            if _is_operator(tok) or _is_redirect(tok):
                continue
            word = _expand_vars(tok, scope.variables) if "$" in tok else tok
            for piece in _pieces(word):
                _check_piece(sub, piece, label)
    for tok in dict.fromkeys(tokens):
        if _is_operator(tok) or _is_redirect(tok):
            continue
        if depth < _MAX_DEPTH and any(c in tok for c in " \t\n;&|<>`") and tok != raw:
            _check_shell(_Scope(zone, scope.cwds, scope.dot_rule), tok, label, depth + 1)
    # pass 3: recursive walkers
    for seg, seg_cwd in zip(segments, seq_cwds):
        start = _command_start(seg)
        if start >= len(seg):
            continue
        cmd = os.path.basename(seg[start])
        walker = _walker(cmd, seg[start + 1 :])
        if walker is not None:
            _check_walker(scope, seg_cwd, cmd, walker, raw, f"{label} ({cmd})")


# --------------------------------------------------------------------------- tools


def _strings(value, key: str = "", depth: int = 0, out: list | None = None) -> list[tuple[str, str]]:
    out = [] if out is None else out
    if len(out) >= _MAX_STRINGS or depth > 8:
        return out
    if isinstance(value, str):
        out.append((key, value))
    elif isinstance(value, dict):
        for k, v in value.items():
            _strings(v, str(k), depth + 1, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _strings(v, key, depth + 1, out)
    return out


def _path_values(tool_input: dict) -> list[tuple[str, str]]:
    out = []
    for key, value in tool_input.items():
        if key.lower() in _PATH_KEYS:
            for _, s in _strings(value, key):
                out.append((key, s))
    return out


def _resolve_one(scope: _Scope, raw: str, label: str) -> list[str]:
    """The absolute spellings of a tool's path value; [] (after the unknown-variable check) when
    it starts at an unknown place."""
    word = _expand_vars(raw, scope.variables) if "$" in raw else raw
    p = scope.tilde(word)
    if p is None or p.startswith(("$", "`")):
        _check_tail(scope.zone, word, label)
        return []
    return scope.absolutes(p)


def _check_file_tool(scope: _Scope, name: str, tool_input: dict) -> None:
    delete = name.lower() in _DELETE_TOOLS
    for key, raw in _path_values(tool_input):
        label = f"{name} {key}"
        for absolute in _resolve_one(scope, raw, label):
            analysis = _follow(scope.zone, absolute, dot_rule=False, label=label, disk=False, shown=raw)
            if delete:
                for sp, k in analysis.ancestors():
                    _deny(scope.zone, label, raw, absolute, f"deleting or moving it would take {sp.text} with it")


def _search_roots(scope: _Scope, tool_input: dict) -> list[str]:
    roots: list[str] = []
    for key in ("path", "target_directory", "target_directories", "directory", "dir", "root",
                "search_path", "cwd"):
        if key in tool_input:
            roots.extend(s for _, s in _strings(tool_input[key]) if s)
    return roots or [scope.cwds[0]]


def _check_root(scope: _Scope, raw: str, label: str) -> list[tuple[_Analysis, str]]:
    out = []
    for absolute in _resolve_one(scope, raw, label):
        out.append((_follow(scope.zone, absolute, dot_rule=False, label=label, shown=raw), absolute))
    return out


def _check_glob_tool(scope: _Scope, name: str, tool_input: dict) -> None:
    patterns = [(k, s) for k in ("pattern", "glob_pattern", "glob", "patterns") if k in tool_input
                for _, s in _strings(tool_input[k])]
    for raw_root in _search_roots(scope, tool_input):
        label = f"{name} path"
        for analysis, root_abs in _check_root(scope, raw_root, label):
            if not patterns:
                for sp, k in analysis.ancestors():
                    _deny(scope.zone, label, raw_root, root_abs, f"a search from {sp.node(k)} can reach {sp.text}")
            for key, pat in patterns:
                if key == "glob_pattern" and not pat.startswith(("**/", "/", "~", "$")):
                    pat = "**/" + pat  # Cursor's glob search is recursive: it prepends **/
                word = _expand_vars(pat, scope.variables) if "$" in pat else pat
                p = scope.tilde(word)
                if p is None or p.startswith(("$", "`")):
                    _check_tail(scope.zone, word, f"{name} {key}")
                    continue
                full = p if p.startswith("/") else root_abs.rstrip("/") + "/" + p
                _follow(scope.zone, full, dot_rule=False, label=f"{name} {key}", disk=False,
                        shown=f"{pat} (from {raw_root})")


def _check_grep_tool(scope: _Scope, name: str, tool_input: dict) -> None:
    globs = [s for k in ("glob", "include", "glob_pattern", "includes", "file_pattern") if k in tool_input
             for _, s in _strings(tool_input[k]) if s]
    positive = [g for g in globs if not g.startswith("!")]
    for raw_root in _search_roots(scope, tool_input):
        label = f"{name} path"
        for analysis, root_abs in _check_root(scope, raw_root, label):
            ancestors = analysis.ancestors()
            if any(st[0] == "a" for _, st in analysis.finals) and not _magic(root_abs):
                _check_links(scope.zone, os.path.realpath(root_abs), label, raw_root)
            if not ancestors:
                continue
            for sp, k in ancestors:
                if not positive:
                    _deny(scope.zone, label, raw_root, root_abs,
                          f"a recursive search from {sp.node(k)} (an ancestor of {sp.text}) reads every user's "
                          "folder; give a project path, or a glob anchored away from it (e.g. 'src/**/*.py')")
            for g in positive:
                body = g.lstrip("/")
                if "/" not in body.rstrip("/"):
                    body = "**/" + body  # a glob without a slash matches at any depth (ripgrep semantics)
                _follow(scope.zone, root_abs.rstrip("/") + "/" + body, dot_rule=False,
                        label=f"{name} glob", disk=False, shown=f"{g} (from {raw_root})")


def _check_unknown(scope: _Scope, name: str, tool_input: dict) -> None:
    lname = name.lower()
    walker = any(w in lname for w in _WALKER_WORDS)
    for key, value in _strings(tool_input):
        lkey = key.lower()
        label = f"{name} {key}" if key else name
        if lkey in _COMMAND_KEYS:
            _check_shell(_Scope(scope.zone, scope.cwds, scope.dot_rule), value, label)
            continue
        pathish = lkey in _PATH_KEYS or lkey.endswith(("path", "file", "dir", "directory", "folder"))
        if pathish:
            if walker:
                for analysis, absolute in _check_root(scope, value, label):
                    for sp, k in analysis.ancestors():
                        _deny(scope.zone, label, value, absolute,
                              f"a tool that searches from {sp.node(k)} (an ancestor of {sp.text}) can reach every user's folder")
            else:
                _check_piece(scope, value, label)
        for piece in _pieces(value):
            _check_piece(scope, piece, label, pathish=False)
        if "*** Begin Patch" in value:
            for line in value.splitlines():
                for marker in ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "):
                    if line.startswith(marker):
                        _check_piece(scope, line[len(marker) :].strip(), f"{name} patch")


def _cwd_gate(zone: _Zone, cwd: str, name: str) -> None:
    """A shell or unknown tool running *inside* another user's folder (or the users' folder) is denied."""
    for p in dict.fromkeys((cwd, os.path.realpath(cwd))):
        for sp in zone.spellings:
            st = zone.start(sp, _comps(p))
            if st[0] == "x" or (st[0] == "c" and st[1] == sp.n):
                why = st[1] if st[0] == "x" else f"it is the users' folder {sp.text}"
                _deny(zone, f"{name} in working directory", cwd, p, why)


def _decide(zone: _Zone, tool_name: str, tool_input: dict, cwd: str) -> None:
    lname = tool_name.lower()
    if lname.startswith("mcp:"):
        lname = lname[4:]
    scope = _Scope(zone, [cwd])
    if lname in _TEXT_TOOLS:
        return
    if lname in _FILE_TOOLS:
        _check_file_tool(scope, tool_name, tool_input)
        return
    if lname in _GLOB_TOOLS:
        _check_glob_tool(scope, tool_name, tool_input)
        return
    if lname in _GREP_TOOLS:
        _check_grep_tool(scope, tool_name, tool_input)
        return
    _cwd_gate(zone, cwd, tool_name)
    if lname in _SHELL_TOOLS or "command" in tool_input:
        extra = []
        for key in ("cwd", "workdir", "working_directory", "directory"):
            value = tool_input.get(key)
            if isinstance(value, str) and value:
                for absolute in _resolve_one(scope, value, f"{tool_name} {key}"):
                    _follow(zone, absolute, dot_rule=False, label=f"{tool_name} {key}", disk=False, shown=value)
                    _cwd_gate(zone, absolute, tool_name)
                    extra.append(_norm(absolute))
        shell_scope = _Scope(zone, extra + [cwd])
        command = tool_input.get("command", tool_input.get("cmd", ""))
        _check_shell(shell_scope, command, f"{tool_name} command")
        rest = {k: v for k, v in tool_input.items() if k not in ("command", "cmd")}
        if rest:
            _check_unknown(scope, tool_name, rest)
        return
    _check_unknown(scope, tool_name, tool_input)


def decide(
    tool_name: str,
    tool_input: dict,
    *,
    cks_home: str,
    active_slug: str,
    cwd: str | None,
    home: str,
    active_id: str | None = None,
) -> str | None:
    """None = allow; else the reason to show the model (names the path/pattern and why).

    `active_slug` names the active user's folder ('' or None: there is none, every user folder is
    denied); `active_id` is what `$CKS_ACTIVE_USER` holds in the command's shell (the sender id, ''
    when unset; None: the slug, for callers that know only the slug)."""
    try:
        zone = _Zone(cks_home, active_slug, home, active_id)
        if not isinstance(tool_input, dict):
            tool_input = {"input": tool_input}
        base = cwd or os.getcwd()
        base = _abs_cwd(zone, base)
        _decide(zone, str(tool_name or ""), tool_input, base)
    except _Deny as deny:
        return str(deny)
    except Exception as exc:  # noqa: BLE001 - fail closed: a guard that crashes must not let the call through
        return (
            f"leanctx guard: could not analyse this {tool_name} call ({type(exc).__name__}: {exc}); "
            "denied to be safe."
        )
    return None


def _abs_cwd(zone: _Zone, cwd: str) -> str:
    """The working directory as an absolute, normalised path (`~` and `$HOME` expanded)."""
    cwd = _expand_vars(cwd, zone.variables) if "$" in cwd else cwd
    if cwd == "~" or cwd.startswith("~/"):
        cwd = zone.home + cwd[1:]
    return _norm(os.path.abspath(cwd))
