"""Shell reads the gate recognises: each form is run for real (coreutils, sed) on real files, and
what `shell_content` makes of its output must be exactly what the daemon credits for that span."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from leanctx.cache.readcache import builtin_delivery_matches, window_of
from leanctx.cache.paths import line_count
from leanctx.readers import Ask, shell_ask, shell_content, words

FORMS = [
    ("cat {f}", dict(start=1, end=None)),
    ("cat -- {f}", dict(start=1, end=None)),
    ("cat -n {f}", dict(start=1, end=None, numbered=True)),
    ("nl -ba {f}", dict(start=1, end=None, numbered=True)),
    ("nl -b a {f}", dict(start=1, end=None, numbered=True)),
    ("head {f}", dict(start=1, end=10)),
    ("head -n 7 {f}", dict(start=1, end=7)),
    ("head -n7 {f}", dict(start=1, end=7)),
    ("head -7 {f}", dict(start=1, end=7)),
    ("head --lines=7 {f}", dict(start=1, end=7)),
    ("tail {f}", dict(last=10)),
    ("tail -n 4 {f}", dict(last=4)),
    ("tail -4 {f}", dict(last=4)),
    ("tail -n +5 {f}", dict(start=5, end=None)),
    ("sed -n '3,9p' {f}", dict(start=3, end=9)),
    ('sed -n "3,9p" {f}', dict(start=3, end=9)),
    ("sed -n 3,9p {f}", dict(start=3, end=9)),
    ("sed -n '6p' {f}", dict(start=6, end=6)),
    ("sed -n '4,$p' {f}", dict(start=4, end=None)),
]


def _span(ask: Ask, text: str) -> tuple[int | None, int | None]:
    n = line_count(text)
    if ask.last is not None:
        return (max(1, n - ask.last + 1), None) if n else (None, None)
    return ask.start, ask.end


@pytest.mark.parametrize("form,want", FORMS, ids=[f for f, _ in FORMS])
def test_each_form_names_its_span_and_its_real_output_is_credited_as_those_lines(tmp_path: Path, form: str, want: dict) -> None:
    rnd = random.Random(form)
    for trial in range(6):
        lines = [("x" * rnd.randint(0, 30)) + f" {i}" for i in range(rnd.randint(12, 40))]
        text = "\n".join(lines) + ("\n" if trial % 2 == 0 else "")
        f = tmp_path / f"file {trial}.py"
        f.write_text(text)
        quoted = f"'{f}'"
        ask = shell_ask(form.format(f=quoted), None)
        assert ask == Ask(str(f), **{"start": 1, "end": None, **want}, reader="shell")
        out = subprocess.run(["bash", "-c", form.format(f=quoted)], capture_output=True, text=True, check=True).stdout
        content = shell_content(ask, out)
        start, end = _span(ask, text)
        window = window_of(line_count(text), start, end)
        assert builtin_delivery_matches(text, window, None, content), (form, trial)
        # and one changed character anywhere in the output is not the file any more
        if content:
            i = rnd.randrange(len(content))
            bad = content[:i] + ("#" if content[i] != "#" else "@") + content[i + 1:]
            assert not builtin_delivery_matches(text, window, None, bad)


def test_a_relative_file_needs_an_absolute_working_directory(tmp_path: Path) -> None:
    assert shell_ask("cat src/a.py", str(tmp_path)) == Ask(str(tmp_path / "src" / "a.py"), reader="shell")
    assert shell_ask("cat ../b.py", str(tmp_path / "src")) == Ask(str(tmp_path / "b.py"), reader="shell")
    assert shell_ask("cat ../../b.py", str(tmp_path / "src" / "x")) == Ask(str(tmp_path / "b.py"), reader="shell")
    # `..` after a name: through a symlink the kernel goes elsewhere than the cleaned-up name
    link = tmp_path / "link"
    (tmp_path / "elsewhere" / "sub").mkdir(parents=True)
    link.symlink_to(tmp_path / "elsewhere" / "sub")
    (tmp_path / "elsewhere" / "b.py").write_text("the file the shell reads\n")
    (tmp_path / "b.py").write_text("the file the cleaned name names\n")
    out = subprocess.run(["cat", "link/../b.py"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert out == "the file the shell reads\n"
    for command in ("cat link/../b.py", f"cat {link}/../b.py", "cat ./link/../b.py", "cat /proj/../etc/x"):
        assert shell_ask(command, str(tmp_path)) is None, command
    assert shell_ask("cat src/a.py", None) is None
    assert shell_ask("cat src/a.py", "relative/dir") is None


@pytest.mark.parametrize("command", [
    "cat a.py | head", "cat a.py; rm -rf x", "cat a.py && echo", "cat a.py > b", "cat < a.py", "cat a.py b.py",
    "cat $HOME/a.py", "cat ~/a.py", "cat *.py", "cat a?.py", "cat `x`", "cat $(x)", "cat \"$X\"", "cat 'a.py",
    "cat a.py\nrm x", "cat a.py #c", "cat -A a.py", "cat -v a.py", "cat", "nl a.py", "nl -bt a.py",
    "head -c 10 a.py", "head -n 0 a.py", "head -n x a.py", "head -n a.py", "tail -f a.py", "tail -n +0 a.py",
    "sed 's/a/b/' a.py", "sed -n '3,1p' a.py", "sed -n '1,3d' a.py", "sed -n '/x/p' a.py", "sed -n 3,9p",
    "sed -i -n 3p a.py", "grep x a.py", "python a.py", "cat a\\ b.py", "cat \"a\\b.py\"", "cat -- -n",
    "cat /proc/self/../a\x00", "", "   ", "cat " + "a" * 5000,
])
def test_anything_but_a_plain_read_of_one_file_is_not_a_read(command: str) -> None:
    assert shell_ask(command, "/proj") is None


def test_quoted_names_keep_their_spaces_and_plain_words_split_on_blanks() -> None:
    assert words("cat  'my file.py'") == ["cat", "my file.py"]
    assert words('sed -n "1,2p" "a b"') == ["sed", "-n", "1,2p", "a b"]
    assert words("cat 'it''s'") == ["cat", "its"]
    assert words("cat 'a$b'") == ["cat", "a$b"]  # single quotes: no expansion
    assert words('cat "a$b"') is None


def test_numbered_output_must_number_every_line_from_the_first() -> None:
    ask = Ask("/p/a", numbered=True, reader="shell")
    assert shell_content(ask, "     1\tx\n     2\ty\n") == "x\ny"
    assert shell_content(ask, "     1\tx\n     3\ty\n") is None
    assert shell_content(ask, "x\ny\n") is None
    assert shell_content(ask, "") is None
    assert shell_content(Ask("/p/a", reader="shell"), "") is None


WRAPPED = [(form, want) for form, want in FORMS if "'" not in form and '"' not in form]


@pytest.mark.parametrize("shell", ["bash -c", "bash -lc", "sh -c", "zsh -c"])
@pytest.mark.parametrize("form,want", WRAPPED, ids=[f for f, _ in WRAPPED])
def test_a_read_as_the_one_script_of_a_shell_is_the_same_read(tmp_path: Path, shell: str, form: str, want: dict) -> None:
    """`bash -lc 'sed -n 3,9p f'` (a model may write its command so; Codex's older shell tool ran
    every command as `bash -lc <script>`): the same span, and its real output credits it."""
    f = tmp_path / "a file.py"
    text = "".join(f"line {i}\n" for i in range(30))
    f.write_text(text)
    script = form.format(f=f'"{f}"')
    ask = shell_ask(f"{shell} '{script}'", None)
    assert ask == shell_ask(script, None) == Ask(str(f), **{"start": 1, "end": None, **want}, reader="shell")
    if shell.startswith("zsh") and subprocess.run(["sh", "-c", "command -v zsh"], capture_output=True).returncode:
        return  # no zsh here: the parse is checked, the run is not
    out = subprocess.run(["sh", "-c", f"{shell} '{script}'"], capture_output=True, text=True, check=True).stdout
    start, end = _span(ask, text)
    assert builtin_delivery_matches(text, window_of(line_count(text), start, end), None, shell_content(ask, out))


@pytest.mark.parametrize("command", [
    "bash -c 'cat a.py; rm x'", "bash -c 'cat $A'", "bash -lc 'cat a.py' extra", "bash -x -c 'cat a.py'",
    "bash -c", "bash -c ''", "python -c 'cat a.py'", "bash -c 'bash -c cat'", "bash -c \"sh -c 'cat a.py'\"",
    "bash -i -c 'cat a.py'", "bash 'cat a.py'", "bash -c 'cat a.py | head'", "env bash -c 'cat a.py'",
])
def test_a_wrapped_script_that_is_not_a_plain_read_is_not_a_read(command: str) -> None:
    assert shell_ask(command, "/proj") is None
