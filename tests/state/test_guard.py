"""The multi-user guard (leanctx/state/guard.py), table-driven against a real CKS_HOME on disk.

The tree (built once per module):

    <T>/home                       HOME
    <T>/home/.cks                  CKS_HOME (default spelling ~/.cks)
    <T>/home/.cks/config.json      not user data: allowed
    <T>/home/.cks/user/alice/      the active user: profile.md, "my notes.md", notes/a.md,
                                   peek -> ../bob (a symlink into bob's folder),
                                   outlink -> <T>/home/proj (a symlink pointing out)
    <T>/home/.cks/user/bob/        another user: profile.md, "my notes.md"
    <T>/home/.cks/user/alice2/     the prefix-confusion neighbour
    <T>/home/proj/                 a project: src/main.py, README.md,
                                   bobdata -> ../.cks/user/bob, usersdir -> ../.cks/user
    <T>/srv/cks/user/{alice,bob}/  a CKS_HOME relocated outside HOME (rows marked "R")
    <T>/cksalias -> home/.cks      CKS_HOME given through a symlink (rows marked "L")

Placeholders in the table: <H> home, <C> ~/.cks, <U> ~/.cks/user, <A> alice, <B> bob, <P> project,
<R> relocated CKS_HOME, <S> its parent, <L> the alias.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from leanctx.state import guard
from leanctx.state.guard import decide

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "payloads" / "claude" / "PreToolUse.json"

ALLOW, DENY = "allow", "deny"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    t = tmp_path_factory.mktemp("guard").resolve()
    home = t / "home"
    cks = home / ".cks"
    users = cks / "user"
    alice, bob = users / "alice", users / "bob"
    for d in (alice / "notes", bob, users / "alice2", home / "proj" / "src", t / "srv" / "cks" / "user" / "alice",
              t / "srv" / "cks" / "user" / "bob"):
        d.mkdir(parents=True)
    (cks / "config.json").write_text("{}")
    (alice / "profile.md").write_text("alice")
    (alice / "my notes.md").write_text("alice notes")
    (alice / "notes" / "a.md").write_text("a")
    (bob / "profile.md").write_text("bob's phone number")
    (bob / "my notes.md").write_text("bob notes")
    (users / "alice2" / "x.md").write_text("x")
    (home / "proj" / "src" / "main.py").write_text("print(1)\n")
    (home / "proj" / "README.md").write_text("readme")
    (t / "srv" / "cks" / "user" / "bob" / "profile.md").write_text("bob")
    os.symlink("../bob", alice / "peek")
    os.symlink(str(home / "proj"), alice / "outlink")
    os.symlink("../.cks/user/bob", home / "proj" / "bobdata")
    os.symlink("../.cks/user", home / "proj" / "usersdir")
    os.symlink("home/.cks", t / "cksalias")
    return {
        "<H>": str(home), "<C>": str(cks), "<U>": str(users), "<A>": str(alice), "<B>": str(bob),
        "<P>": str(home / "proj"), "<R>": str(t / "srv" / "cks"), "<S>": str(t / "srv"),
        "<L>": str(t / "cksalias"),
    }


def fill(value, tree: dict[str, str]):
    if isinstance(value, str):
        for key in sorted(tree, key=len, reverse=True):
            value = value.replace(key, tree[key])
        return value
    if isinstance(value, dict):
        return {k: fill(v, tree) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, tree) for v in value]
    return value


def B(cmd, **extra):
    return ("Bash", {"command": cmd, **extra})


# (id, (tool, input), cwd, expected[, CKS_HOME placeholder])
ROWS = [
    # --- every bypass measured against the CKS user-memory-guard (landscape.md §1.2) ---
    ("L12-glob-doublestar-profiles-from-home", ("Glob", {"pattern": "**/.cks/user/*/profile.md", "path": "<H>"}), "<P>", DENY),
    ("L12-grep-path-home-cks", ("Grep", {"pattern": "phone", "path": "<H>/.cks"}), "<P>", DENY),
    ("L12-bash-cat-star-profile", B("cat ~/.cks/user/*/profile.md"), "<P>", DENY),
    ("L12-bash-ls-users", B("ls ~/.cks/user/"), "<P>", DENY),
    ("L12-read-bare-base", ("Read", {"file_path": "<U>"}), "<P>", DENY),
    ("L12-read-alice2-prefix", ("Read", {"file_path": "<U>/alice2/x.md"}), "<P>", DENY),
    ("L12-read-traversal", ("Read", {"file_path": "<A>/../bob/profile.md"}), "<P>", DENY),
    ("L12-read-bob", ("Read", {"file_path": "<B>/profile.md"}), "<P>", DENY),
    ("L12-bash-cat-bob", B("cat ~/.cks/user/bob/profile.md"), "<P>", DENY),
    # --- spellings of HOME and CKS_HOME, quoting ---
    ("bash-dollar-home", B("cat $HOME/.cks/user/bob/profile.md"), "<P>", DENY),
    ("bash-brace-home", B("cat ${HOME}/.cks/user/bob/profile.md"), "<P>", DENY),
    ("bash-cks-home-var", B("cat $CKS_HOME/user/bob/profile.md"), "<P>", DENY),
    ("read-tilde", ("Read", {"file_path": "~/.cks/user/bob/profile.md"}), "<P>", DENY),
    ("read-dollar-home", ("Read", {"file_path": "$HOME/.cks/user/bob/profile.md"}), "<P>", DENY),
    ("read-brace-home", ("Read", {"file_path": "${HOME}/.cks/user/bob/profile.md"}), "<P>", DENY),
    ("bash-quoted-tilde", B('cat "~/.cks/user/bob/profile.md"'), "<P>", DENY),
    ("bash-path-with-spaces", B("cat '<B>/my notes.md'"), "<P>", DENY),
    ("bash-split-quotes", B("cat ~/.cks/us\"er\"/b'o'b/profile.md"), "<P>", DENY),
    ("bash-backslash", B("cat ~/.cks/user/b\\ob/profile.md"), "<P>", DENY),
    ("bash-tilde-plus", B("cat ~+/../.cks/user/bob/profile.md"), "<P>", DENY),
    ("bash-option-value", B("mytool --input=~/.cks/user/bob/profile.md"), "<P>", DENY),
    ("bash-redirect-write", B("echo hi > ~/.cks/user/bob/profile.md"), "<P>", DENY),
    # --- wildcards ---
    ("bash-glob-question", B("cat ~/.cks/user/b?b/profile.md"), "<P>", DENY),
    ("bash-glob-bracket", B("cat ~/.cks/user/[ab]ob/profile.md"), "<P>", DENY),
    ("bash-glob-two-levels", B("ls ~/.cks/*/*/profile.md"), "<P>", DENY),
    ("bash-glob-in-cks-name", B("cat ~/.c*/user/bob/profile.md"), "<P>", DENY),
    ("bash-brace-expansion", B("cat ~/.cks/user/{alice,bob}/profile.md"), "<P>", DENY),
    ("bash-glob-users-dir", B("ls ~/.cks/use?"), "<P>", DENY),
    ("bash-dotstar-climbs", B("cat ~/.cks/user/alice/.*/bob/profile.md"), "<P>", DENY),
    ("bash-home-star-no-dotglob", B("ls ~/*"), "<P>", ALLOW),
    ("bash-home-star-dotglob", B("shopt -s dotglob; ls ~/*"), "<P>", DENY),
    # --- traversal and cd ---
    ("bash-dotdot-sibling", B("cat ~/.cks/user/alice/../bob/profile.md"), "<P>", DENY),
    ("bash-relative-sibling", B("cat ../bob/profile.md"), "<A>", DENY),
    ("read-relative-sibling", ("Read", {"file_path": "../bob/profile.md"}), "<A>", DENY),
    ("bash-sibling-climb-stale-cwd", B("cat ../bob/profile.md"), "<P>", DENY),
    ("bash-parent-readme-in-project", B("cat ../README.md && ls .. && cd .."), "<P>/src", ALLOW),
    ("bash-cd-users-then-relative", B("cd ~/.cks/user && cat bob/profile.md"), "<P>", DENY),
    ("bash-cd-active-then-climb", B("cd ~/.cks/user/alice && cat ../bob/profile.md"), "<P>", DENY),
    ("bash-cd-cks", B("cd ~/.cks && ls"), "<P>", DENY),
    ("bash-pushd-dotdot", B("pushd ~/.cks/user/alice/.. && ls"), "<P>", DENY),
    ("bash-var-assigned-then-used", B("D=~/.cks/user; cat $D/bob/profile.md"), "<P>", DENY),
    ("bash-unknown-var-then-user", B("cat $SOMEDIR/bob/profile.md"), "<P>", DENY),
    ("bash-unknown-var-then-cks", B("ls $X/.cks/user"), "<P>", DENY),
    # --- symlinks ---
    ("read-project-symlink-into-bob", ("Read", {"file_path": "<P>/bobdata/profile.md"}), "<P>", DENY),
    ("bash-relative-symlink-into-bob", B("cat bobdata/profile.md"), "<P>", DENY),
    ("bash-glob-through-symlink", B("cat proj/*/profile.md"), "<H>", DENY),
    ("read-active-symlink-to-bob", ("Read", {"file_path": "<A>/peek/profile.md"}), "<P>", DENY),
    ("read-active-symlink-pointing-out", ("Read", {"file_path": "<A>/outlink/src/main.py"}), "<P>", ALLOW),
    ("grep-symlink-to-users-dir", ("Grep", {"pattern": "x", "path": "<P>/usersdir"}), "<P>", DENY),
    ("glob-active-tree-with-link-to-bob", ("Glob", {"pattern": "**/*.md", "path": "<A>"}), "<P>", DENY),
    ("bash-ls-active-star-with-link", B("ls ~/.cks/user/alice/*"), "<P>", DENY),
    # --- case tricks ---
    ("bash-upper-case-tree", B("cat ~/.CKS/USER/bob/profile.md"), "<P>", DENY),
    ("read-upper-other-user", ("Read", {"file_path": "<U>/BOB/profile.md"}), "<P>", DENY),
    ("read-active-wrong-case", ("Read", {"file_path": "<U>/Alice/profile.md"}), "<P>", DENY),
    # --- CKS_HOME relocated outside HOME (R) and given through a symlink (L) ---
    ("R-bash-cat-bob", B("cat <R>/user/bob/profile.md"), "<P>", DENY, "<R>"),
    ("R-bash-cks-var-glob", B("cat $CKS_HOME/user/*/profile.md"), "<P>", DENY, "<R>"),
    ("R-home-cks-is-not-the-store", B("cat ~/.cks/user/bob/profile.md"), "<P>", ALLOW, "<R>"),
    ("R-grep-home-not-an-ancestor", B("grep -r phone ~"), "<P>", ALLOW, "<R>"),
    ("R-grep-from-parent", B("grep -r phone <S>"), "<P>", DENY, "<R>"),
    ("R-rg-from-parent-no-hidden-dir", B("rg phone <S>"), "<P>", DENY, "<R>"),
    ("R-home-reassigned", B("HOME=<S>; cat ~/cks/user/bob/profile.md"), "<P>", DENY, "<R>"),
    ("R-read-active", ("Read", {"file_path": "<R>/user/alice/profile.md"}), "<P>", ALLOW, "<R>"),
    ("L-real-path-of-bob", ("Read", {"file_path": "<C>/user/bob/profile.md"}), "<P>", DENY, "<L>"),
    ("L-alias-path-of-bob", B("cat <L>/user/bob/profile.md"), "<P>", DENY, "<L>"),
    ("L-alias-active", ("Read", {"file_path": "<L>/user/alice/profile.md"}), "<P>", ALLOW, "<L>"),
    # --- Glob / Grep search roots ---
    ("glob-project-doublestar", ("Glob", {"pattern": "**/*.py", "path": "<P>"}), "<P>", ALLOW),
    ("glob-home-doublestar", ("Glob", {"pattern": "**/*.py", "path": "<H>"}), "<P>", DENY),
    ("glob-home-anchored-away", ("Glob", {"pattern": "proj/**/*.py", "path": "<H>"}), "<P>", ALLOW),
    ("glob-star-dir-from-above-home", ("Glob", {"pattern": "*/.cks/user/*", "path": "<H>/.."}), "<P>", DENY),
    ("glob-absolute-pattern", ("Glob", {"pattern": "<U>/*/profile.md"}), "<P>", DENY),
    ("glob-default-root-cwd", ("Glob", {"pattern": "**/*.py"}), "<P>", ALLOW),
    ("glob-active-flat", ("Glob", {"pattern": "*.md", "path": "<A>"}), "<P>", ALLOW),
    ("grep-project", ("Grep", {"pattern": "TODO", "path": "<P>"}), "<P>", ALLOW),
    ("grep-home-no-glob", ("Grep", {"pattern": "phone", "path": "<H>"}), "<P>", DENY),
    ("grep-home-basename-glob", ("Grep", {"pattern": "phone", "path": "<H>", "glob": "*.md"}), "<P>", DENY),
    ("grep-home-anchored-glob", ("Grep", {"pattern": "x", "path": "<H>", "glob": "proj/**/*.py"}), "<P>", ALLOW),
    ("grep-home-include-key", ("Grep", {"pattern": "phone", "path": "~", "include": "*.md"}), "<P>", DENY),
    ("grep-active-subfolder", ("Grep", {"pattern": "a", "path": "<A>/notes"}), "<P>", ALLOW),
    ("grep-bob", ("Grep", {"pattern": "a", "path": "<B>"}), "<P>", DENY),
    ("grep-cwd-in-cks", ("Grep", {"pattern": "a"}), "<C>", DENY),
    # --- shell walkers ---
    ("bash-grep-r-home", B("grep -r phone ~"), "<P>", DENY),
    ("bash-find-home", B("find ~ -name profile.md"), "<P>", DENY),
    ("bash-find-home-shallow", B("find ~ -maxdepth 1 -name '*.txt'"), "<P>", ALLOW),
    ("bash-rg-home-skips-hidden", B("rg phone ~"), "<P>", ALLOW),
    ("bash-rg-home-hidden", B("rg --hidden phone ~"), "<P>", DENY),
    ("bash-rg-home-uu", B("rg -uu phone ~"), "<P>", DENY),
    ("bash-ls-R-home", B("ls -laR ~"), "<P>", DENY),
    ("bash-tar-home", B("tar czf /tmp/all.tgz ~"), "<P>", DENY),
    ("bash-du-cks", B("du -a ~/.cks"), "<P>", DENY),
    ("bash-grep-r-dot-from-home", B("grep -rn TODO ."), "<H>", DENY),
    ("bash-grep-r-dot-in-project", B("grep -rn TODO ."), "<P>", ALLOW),
    ("bash-find-dot-in-project", B("find . -name '*.py'"), "<P>", ALLOW),
    ("bash-rm-rf-home", B("rm -rf ~"), "<P>", DENY),
    ("bash-newline-separated-walker", B("ls\nfind ~ -name x"), "<P>", DENY),
    # --- shell forms: argv lists, nested shells, code, substitutions ---
    ("argv-bash-lc", ("Bash", {"command": ["bash", "-lc", "cat ~/.cks/user/bob/profile.md"]}), "<P>", DENY),
    ("argv-plain-allowed", ("Bash", {"command": ["ls", "-la", "<P>"]}), "<P>", ALLOW),
    ("codex-shell-workdir-cd", ("shell", {"command": ["bash", "-lc", "cd ~/.cks/user && cat bob/profile.md"], "workdir": "<P>"}), "<P>", DENY),
    ("codex-shell-workdir-relative", ("shell", {"command": ["cat", "../bob/profile.md"], "workdir": "<A>"}), "<P>", DENY),
    ("bash-python-open", B("python3 -c \"print(open('<B>/profile.md').read())\""), "<P>", DENY),
    ("bash-command-substitution", B("echo $(cat ~/.cks/user/bob/profile.md)"), "<P>", DENY),
    ("bash-backticks", B("echo `cat ~/.cks/user/bob/profile.md`"), "<P>", DENY),
    ("bash-sudo-wrapper", B("sudo -u root cat <B>/profile.md"), "<P>", DENY),
    ("bash-python-concatenated-path", B("python3 -c \"import os; os.system('cat ' + os.path.expanduser('~') + '/.cks/user/bob/x')\""), "<P>", DENY),
    ("bash-find-names-cks", B("find ~ -path '*/.cks/user/*'"), "<P>", DENY),
    ("bash-substitution-as-component", B("cat ~/.cks/user/$(echo bob)/profile.md"), "<P>", DENY),
    ("bash-unknown-var-as-user", B('cat ~/.cks/user/"$U"/profile.md'), "<P>", DENY),
    ("bash-locate", B("locate profile.md"), "<P>", DENY),
    ("bash-eval-string", B("eval \"cd ~/.cks/user; cat bob/profile.md\""), "<P>", DENY),
    # --- Cursor payload shapes ---
    ("cursor-shell-cwd-relative", ("Shell", {"command": "cat ../bob/profile.md", "cwd": "<A>", "timeout": 30}), "<P>", DENY),
    ("cursor-shell-allowed", ("Shell", {"command": "ls -la src", "cwd": "<P>"}), "<P>", ALLOW),
    ("cursor-read-target-file", ("Read", {"target_file": "<B>/profile.md"}), "<P>", DENY),
    ("cursor-strreplace", ("StrReplace", {"path": "<B>/profile.md", "old_string": "a", "new_string": "b"}), "<P>", DENY),
    ("cursor-delete-home", ("Delete", {"path": "<H>"}), "<P>", DENY),
    ("cursor-delete-project-file", ("Delete", {"path": "<P>/README.md"}), "<P>", ALLOW),
    ("cursor-glob-implicit-doublestar", ("Glob", {"glob_pattern": "*.md", "target_directory": "<H>"}), "<P>", DENY),
    ("cursor-glob-project", ("Glob", {"glob_pattern": "*.py", "target_directory": "<P>"}), "<P>", ALLOW),
    # --- Claude / CodeBuddy file tools ---
    ("write-bob", ("Write", {"file_path": "<B>/new.md", "content": "x"}), "<P>", DENY),
    ("write-active", ("Write", {"file_path": "<A>/new.md", "content": "mentions <B> in text"}), "<P>", ALLOW),
    ("edit-bob", ("Edit", {"file_path": "<B>/profile.md", "old_string": "a", "new_string": "b"}), "<P>", DENY),
    ("multiedit-bob", ("MultiEdit", {"file_path": "<B>/profile.md", "edits": []}), "<P>", DENY),
    ("notebookedit-bob", ("NotebookEdit", {"notebook_path": "<B>/nb.ipynb", "new_source": ""}), "<P>", DENY),
    ("generic-paths-list", ("Read", {"paths": ["<P>/README.md", "<B>/profile.md"]}), "<P>", DENY),
    # --- unknown tools ---
    ("unknown-nested-path", ("mcp__fs__read_text", {"args": {"options": [{"target": "~/.cks/user/bob/profile.md"}]}}), "<P>", DENY),
    ("unknown-path-in-prose", ("mcp__notes__add", {"note": "see <B>/profile.md for details"}), "<P>", DENY),
    ("unknown-search-tool-from-home", ("mcp__search__find_files", {"root": "<H>", "pattern": "*"}), "<P>", DENY),
    ("unknown-harmless", ("mcp__weather__get", {"query": "weather in Paris", "units": "metric"}), "<P>", ALLOW),
    ("unknown-json-string-args", ("mcp__x__y", {"toolArgs": json.dumps({"path": "<B>/profile.md"})}), "<P>", DENY),
    ("codex-apply-patch", ("apply_patch", {"input": "*** Begin Patch\n*** Update File: ../bob/profile.md\n@@\n-a\n+b\n*** End Patch"}), "<A>", DENY),
    ("codex-apply-patch-argv", ("Bash", {"command": ["apply_patch", "*** Begin Patch\n*** Add File: ../.cks/user/bob/x.md\n+hi\n*** End Patch"]}), "<P>", DENY),
    ("codex-apply-patch-project", ("apply_patch", {"input": "*** Begin Patch\n*** Update File: src/main.py\n@@\n-a\n+b\n*** End Patch"}), "<P>", ALLOW),
    ("bash-heredoc-script", B("python3 - <<'EOF'\nimport os\nprint(os.listdir('<U>'))\nEOF"), "<P>", DENY),
    ("bash-in-bob-folder", B("ls"), "<B>", DENY),
    ("bash-in-users-folder", B("ls"), "<U>", DENY),
    # --- allowed controls ---
    ("read-active-profile", ("Read", {"file_path": "<A>/profile.md"}), "<P>", ALLOW),
    ("read-active-relative", ("Read", {"file_path": "profile.md"}), "<A>", ALLOW),
    ("read-project-file", ("Read", {"file_path": "<P>/src/main.py"}), "<P>", ALLOW),
    ("read-cks-config", ("Read", {"file_path": "<C>/config.json"}), "<P>", ALLOW),
    ("bash-ls-project", B("ls -la"), "<P>", ALLOW),
    ("bash-ls-home", B("ls -la ~"), "<P>", ALLOW),
    ("bash-cat-active", B("cat ~/.cks/user/alice/profile.md | wc -l"), "<P>", ALLOW),
    ("bash-cd-active", B("cd ~/.cks/user/alice && cat profile.md && ls notes"), "<P>", ALLOW),
    ("bash-active-via-vars", B("cat $CKS_HOME/user/$CKS_ACTIVE_USER/profile.md"), "<P>", ALLOW),
    ("bash-dev-loop", B("git status && python -m pytest -q tests/ && git diff HEAD~1 -- src"), "<P>", ALLOW),
    ("bash-leanctx-pending", B('leanctx state pending --question "Which one?" --option a --option b'), "<P>", ALLOW),
    ("bash-url-and-env", B('export PATH=$HOME/.local/bin:$PATH && curl -s "https://example.com/a?b=1&c=2"'), "<P>", ALLOW),
    ("bash-bold-markdown-from-home", B('echo "**bold**"'), "<H>", ALLOW),
    ("bash-commit-message-mentions-words", B('git commit -m "fix: user/bob handling in the .cks parser"'), "<P>", ALLOW),
    ("bash-cks-prefix-neighbour", B("cat ~/.cks2/user/bob/x ~/.cks/user2/bob"), "<P>", ALLOW),
    ("bash-active-subfolder-glob", B("ls ~/.cks/user/alice/notes/*.md"), "<P>", ALLOW),
    ("bash-rg-from-home-cwd", B("rg TODO"), "<H>", ALLOW),
    ("todowrite-text-only", ("TodoWrite", {"todos": [{"content": "never read <B>/profile.md"}]}), "<P>", ALLOW),
]


# Rows whose reason must say something specific (the path and why), not just "denied".
REASONS = {
    "L12-glob-doublestar-profiles-from-home": "'**' can descend from <H>",
    "L12-bash-cat-star-profile": "its wildcard '*' can match any user's folder",
    "L12-bash-ls-users": "it names the users' folder <U> itself",
    "L12-read-alice2-prefix": "another user's folder (<U>/alice2)",
    "L12-read-traversal": "resolves to <B>/profile.md",
    "bash-glob-through-symlink": "it matches <P>/bobdata/profile.md",
    "glob-active-tree-with-link-to-bob": "symlink <A>/peek",
    "bash-grep-r-home": "'grep' walks recursively from <H>",
    "bash-cd-active-then-climb": "'../bob/profile.md' (resolves to <B>/profile.md)",
    "codex-apply-patch": "'../bob/profile.md' (resolves to <B>/profile.md)",
    "codex-apply-patch-argv": "<B>/x.md",
    "bash-unknown-var-then-user": "after an unknown variable",
    "cursor-delete-home": "would take <U> with it",
    "bash-in-bob-folder": "working directory",
}


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_table(row, tree):
    name, (tool, tool_input), cwd, expected = row[:4]
    cks = fill(row[4] if len(row) > 4 else "<C>", tree)
    reason = decide(tool, fill(tool_input, tree), cks_home=cks, active_slug="alice", cwd=fill(cwd, tree),
                    home=tree["<H>"])
    if expected == ALLOW:
        assert reason is None, reason
    else:
        assert reason is not None, f"{name}: allowed"
        assert reason.startswith("leanctx guard: denied"), reason
        assert "alice" in reason  # names what is open to this conversation
        assert "could not analyse" not in reason
        if name in REASONS:
            assert fill(REASONS[name], tree) in reason, reason


def test_table_size():
    assert len(ROWS) >= 60
    assert sum(1 for r in ROWS if r[3] == ALLOW) >= 20


def test_reason_names_the_path_and_why(tree):
    reason = decide("Bash", {"command": "cat ~/.cks/user/*/profile.md"}, cks_home=tree["<C>"],
                    active_slug="alice", cwd=tree["<P>"], home=tree["<H>"])
    assert "~/.cks/user/*/profile.md" in reason
    assert "can match any user's folder" in reason
    reason = decide("Read", {"file_path": "<P>/bobdata/profile.md".replace("<P>", tree["<P>"])},
                    cks_home=tree["<C>"], active_slug="alice", cwd=tree["<P>"], home=tree["<H>"])
    assert f"resolves to {tree['<B>']}/profile.md" in reason
    assert "another user's folder" in reason


def test_no_valid_active_user_denies_every_user_folder(tree):
    for slug in ("", ".", "..", "a" * 65):
        reason = decide("Read", {"file_path": f"{tree['<A>']}/profile.md"}, cks_home=tree["<C>"],
                        active_slug=slug, cwd=tree["<P>"], home=tree["<H>"])
        assert reason is not None, slug
    assert decide("Read", {"file_path": f"{tree['<P>']}/README.md"}, cks_home=tree["<C>"], active_slug="",
                  cwd=tree["<P>"], home=tree["<H>"]) is None


def test_internal_error_fails_closed(tree, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("synthetic")

    monkeypatch.setattr(guard, "_decide", boom)
    reason = decide("Read", {"file_path": "/x"}, cks_home=tree["<C>"], active_slug="alice", cwd="/", home=tree["<H>"])
    assert "denied to be safe" in reason and "synthetic" in reason


# --------------------------------------------------------------------------- through the real hook entry


def _hook(agent: str, event: str, payload: dict, tree, monkeypatch, tmp_path, user: str = "alice") -> str:
    """What the hook prints for one payload, with the bot's environment (leanctx.hooks.handle)."""
    from leanctx.hooks import handle

    monkeypatch.setenv("HOME", tree["<H>"])
    monkeypatch.setenv("CKS_HOME", tree["<C>"])
    monkeypatch.setenv("CKS_ACTIVE_USER", user)
    return handle(agent, event, json.dumps(payload).encode(), str(tmp_path / "data"), ("--guard",))


def _denied(out: str) -> bool:
    return out != "" and json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.fixture
def collided(tmp_path: Path) -> dict[str, str]:
    """Users whose ids shared one slug before it was one-to-one: Анна/Иван (`----`), Ana/ana (`ana`)."""
    from leanctx.state.slug import slugify

    home = tmp_path / "home"
    folders = {}
    for user in ("Анна", "Иван", "Ana", "ana"):
        folder = home / ".cks" / "user" / slugify(user)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "profile.md").write_text(f"{user}'s phone number")
        folders[user] = str(folder)
    (home / "proj").mkdir()
    return {"<H>": str(home), "<C>": str(home / ".cks"), "<P>": str(home / "proj"), **folders}


@pytest.mark.parametrize(("active", "other"), [("Анна", "Иван"), ("Иван", "Анна"), ("Ana", "ana"), ("ana", "Ana")])
def test_users_whose_slugs_collided_are_two_users_to_the_guard(active, other, collided, monkeypatch, tmp_path):
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "cwd": collided["<P>"], "tool_name": "Read",
               "tool_input": {"file_path": f"{collided[other]}/profile.md"}}
    assert _denied(_hook("claude", "PreToolUse", payload, collided, monkeypatch, tmp_path, user=active))
    payload["tool_input"] = {"file_path": f"{collided[active]}/profile.md"}
    assert _hook("claude", "PreToolUse", payload, collided, monkeypatch, tmp_path, user=active) == ""


def test_cks_active_user_in_a_command_is_the_sender_id_as_the_shell_expands_it(collided, monkeypatch, tmp_path):
    """`$CKS_ACTIVE_USER` holds `Ana`: the shell reads `user/Ana/`, which is not Ana's folder
    (`ana--<hash>`), and on a case-insensitive disk would be ana's: denied. For a plain id it is
    the active folder, as before."""
    cmd = {"session_id": "s", "hook_event_name": "PreToolUse", "cwd": collided["<P>"], "tool_name": "Bash",
           "tool_input": {"command": "cat $CKS_HOME/user/$CKS_ACTIVE_USER/profile.md"}}
    monkeypatch.setenv("CKS_HOME", collided["<C>"])
    assert _denied(_hook("claude", "PreToolUse", cmd, collided, monkeypatch, tmp_path, user="Ana"))
    assert _hook("claude", "PreToolUse", cmd, collided, monkeypatch, tmp_path, user="ana") == ""


@pytest.mark.parametrize(("user", "command", "expected"), [
    # unset: the shell expands `$CKS_ACTIVE_USER` to nothing, so this reads user/ana/profile.md (ana's)
    (None, "cat $CKS_HOME/user/$CKS_ACTIVE_USER/ana/profile.md", DENY),
    (None, "cat $CKS_HOME/user/${CKS_ACTIVE_USER}/ana/profile.md", DENY),
    (None, "cat $CKS_HOME/user/${CKS_ACTIVE_USER:-local}/profile.md", ALLOW),  # the kit's spelling: local's own
    (None, "cat $CKS_HOME/user/${CKS_ACTIVE_USER:-ana}/profile.md", DENY),
    ("ana", "cat $CKS_HOME/user/${CKS_ACTIVE_USER:-local}/profile.md", ALLOW),
    ("ana", "cat $CKS_HOME/user/${CKS_ACTIVE_USER#a}/profile.md", DENY),  # a form not interpreted: unknown
    ("Ana", "cat $CKS_HOME/user/${CKS_ACTIVE_USER:-local}/profile.md", DENY),  # user/Ana/ is not Ana's folder
])
def test_cks_active_user_expands_as_in_the_shell(user, command, expected, collided, monkeypatch, tmp_path):
    from leanctx.hooks import handle

    (Path(collided["<C>"]) / "user" / "local").mkdir()
    monkeypatch.setenv("HOME", collided["<H>"])
    monkeypatch.setenv("CKS_HOME", collided["<C>"])
    if user is None:
        monkeypatch.delenv("CKS_ACTIVE_USER", raising=False)
    else:
        monkeypatch.setenv("CKS_ACTIVE_USER", user)
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "cwd": collided["<P>"], "tool_name": "Bash",
               "tool_input": {"command": command}}
    out = handle("claude", "PreToolUse", json.dumps(payload).encode(), str(tmp_path / "data"), ("--guard",))
    assert (DENY if _denied(out) else ALLOW) == expected, out


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_active_user_owns_no_folder(empty, collided, monkeypatch, tmp_path):
    """CKS_ACTIVE_USER set but empty is no user, not `local`: every user folder is denied."""
    local = Path(collided["<C>"]) / "user" / "local"
    local.mkdir()
    payload = {"session_id": "s", "hook_event_name": "PreToolUse", "cwd": collided["<P>"], "tool_name": "Read",
               "tool_input": {"file_path": f"{local}/profile.md"}}
    out = _hook("claude", "PreToolUse", payload, collided, monkeypatch, tmp_path, user=empty)
    assert _denied(out) and "(none: no valid active user)" in out
    payload["tool_input"] = {"file_path": f"{collided['<P>']}/README.md"}
    assert _hook("claude", "PreToolUse", payload, collided, monkeypatch, tmp_path, user=empty) == ""
    monkeypatch.delenv("CKS_ACTIVE_USER")  # unset: `local`, whose folder it is
    from leanctx.hooks import handle

    payload["tool_input"] = {"file_path": f"{local}/profile.md"}
    assert handle("claude", "PreToolUse", json.dumps(payload).encode(), str(tmp_path / "data"), ("--guard",)) == ""


@pytest.mark.parametrize("agent", ["claude", "codebuddy", "codex"])
def test_recorded_claude_payload_denied_and_allowed(agent, tree, monkeypatch, tmp_path):
    payload = json.loads(FIXTURE.read_text())
    payload["cwd"] = tree["<P>"]
    payload["tool_input"] = {"file_path": f"{tree['<B>']}/profile.md"}
    out = json.loads(_hook(agent, "PreToolUse", payload, tree, monkeypatch, tmp_path))
    assert out["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "leanctx guard" in out["hookSpecificOutput"]["permissionDecisionReason"]
    payload["tool_input"] = {"file_path": f"{tree['<A>']}/profile.md"}
    assert _hook(agent, "PreToolUse", payload, tree, monkeypatch, tmp_path) == ""  # never a bare "allow"


def test_codex_and_cursor_payloads(tree, monkeypatch, tmp_path):
    codex = {"session_id": "s", "turn_id": "t", "hook_event_name": "PreToolUse", "cwd": tree["<P>"],
             "tool_name": "Bash", "tool_input": {"command": ["bash", "-lc", "ls ~/.cks/user"]}, "tool_use_id": "c1"}
    out = _hook("codex", "PreToolUse", codex, tree, monkeypatch, tmp_path)
    assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    codex["tool_input"] = {"command": ["bash", "-lc", "ls src"]}
    assert _hook("codex", "PreToolUse", codex, tree, monkeypatch, tmp_path) == ""
    cursor = {"conversation_id": "c", "generation_id": "g", "hook_event_name": "preToolUse", "tool_name": "Shell",
              "tool_input": {"command": "cat ~/.cks/user/*/profile.md", "cwd": tree["<P>"]},
              "workspace_roots": [tree["<P>"]]}
    out = json.loads(_hook("cursor", "preToolUse", cursor, tree, monkeypatch, tmp_path))
    assert out["permission"] == "deny" and out["user_message"] == out["agent_message"] and "leanctx guard" in out["agent_message"]
    cursor["tool_input"]["command"] = "cat ~/.cks/user/alice/profile.md"
    assert _hook("cursor", "preToolUse", cursor, tree, monkeypatch, tmp_path) == ""


def test_guard_event_needs_the_guard_flag(tree, monkeypatch, tmp_path):
    """A PreToolUse entry without --guard is not ours to answer (the plain profile never wires it)."""
    from leanctx.hooks import handle

    with pytest.raises(ValueError, match="not wired"):
        handle("claude", "PreToolUse", b"{}", str(tmp_path), ())


def test_light_imports():
    """The hook path: importing the guard and judging a plain file path pull in no re/json/shlex."""
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import leanctx.state.guard as g; "
        "g.decide('Read', {'file_path': '/etc/hosts'}, cks_home='/nonexistent/.cks', active_slug='a', cwd='/', home='/nonexistent'); "
        "print(sorted(m for m in ('re', 'json', 'shlex', 'fnmatch', 'glob') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
