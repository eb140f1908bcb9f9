"""Users never share a thread: through the real `leanctx state` command and the real hook wrapper.

Ids that shared one slug before it was one-to-one (`Анна`/`Иван` -> `----`, `Ana`/`ana`,
`ann@x.com`/`ann-x.com`, `a/b`/`a b`) are two users; CKS_ACTIVE_USER set but empty is nobody
(refused by the CLI, nothing recorded by the hooks), never `local`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from leanctx import agents
from leanctx.installer import wrapper
from leanctx.state import protocol
from leanctx.state.slug import slugify
from tests.conftest import PAYLOADS, REPO, run_cli

COLLIDED_BEFORE = [("Анна", "Иван"), ("Ana", "ana"), ("ann@x.com", "ann-x.com"), ("a/b", "a b")]


def state(*args: str, user: str | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("CKS_ACTIVE_USER", None)
    if user is not None:
        env["CKS_ACTIVE_USER"] = user
    return run_cli("state", *args, input=input, env=env)


@pytest.mark.parametrize(("first", "second"), COLLIDED_BEFORE)
def test_two_ids_that_collided_keep_two_threads(first: str, second: str, cks_home: Path) -> None:
    assert state("summary", f"{first} asked about invoices", user=first).returncode == 0
    shown = state("show", user=second)
    assert shown.returncode == 0, shown.stderr
    assert f"{first} asked" not in shown.stdout and shown.stdout.endswith("No conversation in progress.\n")
    assert state("summary", f"{second} asked about the VPS", user=second).returncode == 0
    assert state("summary", user=first).stdout == f"{first} asked about invoices\n"
    assert state("summary", "--user", second).stdout == f"{second} asked about the VPS\n"
    listed = state("list").stdout.splitlines()
    assert len(listed) == 2 and len({line.split(" ", 1)[0] for line in listed}) == 2
    for user in (first, second):
        assert any(line.startswith(f"{slugify(user)} (id {user}): revision 1") for line in listed), listed
    rows = {r["id"]: r["slug"] for r in json.loads(state("list", "--json").stdout)}
    assert rows == {first: slugify(first), second: slugify(second)}


def test_an_existing_plain_folder_keeps_working_and_a_slug_is_never_hashed_again(cks_home: Path) -> None:
    """`~/.cks/user/alice/` from before (no id kept in it) is alice's; `--slug` reaches a hashed
    slug's thread, while the same text as `--user` is another id (hashed again), not Ana's."""
    folder = cks_home / "user" / "alice"
    folder.mkdir(parents=True)
    old = {**protocol.fresh("alice", "telegram", "2026-06-07T19:40:00.000Z"), "revision": 3,
           "thread_summary": "alice from before"}
    (folder / "conversation-state.json").write_text(json.dumps(old))
    assert state("summary", user="alice").stdout == "alice from before\n"
    assert state("list").stdout.startswith("alice (id alice): revision 3")
    assert state("summary", "Ana's thread", user="Ana").returncode == 0
    ana = slugify("Ana")
    assert state("summary", "--slug", ana).stdout == "Ana's thread\n"
    assert state("summary", "--user", ana).stdout == "No summary yet.\n"
    assert state("summary", "mine", "--user", ana).returncode == 0
    assert state("summary", "--slug", ana).stdout == "Ana's thread\n"
    assert len(json.loads(state("list", "--json").stdout)) == 3


@pytest.mark.parametrize("empty", ["", " ", "\t"])
def test_the_cli_refuses_an_empty_cks_active_user(empty: str, cks_home: Path) -> None:
    for args in (["summary", "hello"], ["show"], ["pending", "--question", "ok?"], ["end"], ["reset"]):
        r = state(*args, user=empty)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith("leanctx: CKS_ACTIVE_USER is set but empty: export the trusted sender id, "
                                   "or unset it for the single-user default `local`\n"), r.stderr
        assert "Traceback" not in r.stderr
    assert not cks_home.exists()
    assert state("summary", "mine", user=None).returncode == 0  # unset: `local`
    assert state("list").stdout.startswith("local (id local): revision 1")


def test_state_slug_prints_the_folder_name_of_a_sender_id(cks_home: Path) -> None:
    """What a script or skill uses instead of re-deriving the rule: `$CKS_HOME/user/$(leanctx state slug)/`."""
    assert state("slug", user="Анна").stdout == slugify("Анна") + "\n"
    assert state("slug", "--user", "ann@x.com").stdout == slugify("ann@x.com") + "\n"
    assert state("slug").stdout == "local\n"
    r = state("slug", user="")
    assert r.returncode == 2 and "CKS_ACTIVE_USER is set but empty" in r.stderr
    assert not cks_home.exists()


def _bot_cases() -> list[tuple[str, str, Path]]:
    documented = REPO / "tests" / "fixtures" / "documented"
    return [("claude", "SessionStart", PAYLOADS / "claude" / "SessionStart.json"),
            ("claude", "UserPromptSubmit", PAYLOADS / "claude" / "UserPromptSubmit.json"),
            ("claude", "Stop", PAYLOADS / "claude" / "Stop.json"),
            ("codex", "UserPromptSubmit", PAYLOADS / "codex" / "UserPromptSubmit.json"),
            ("cursor", "beforeSubmitPrompt", documented / "cursor" / "beforeSubmitPrompt.json"),
            ("codebuddy", "UserPromptSubmit", PAYLOADS / "codebuddy" / "UserPromptSubmit.json"),
            ("droid", "SessionStart", PAYLOADS / "droid" / "SessionStart.json")]


@pytest.mark.parametrize(("agent", "event", "payload"), _bot_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_bot_hooks_record_nothing_for_an_empty_cks_active_user(agent: str, event: str, payload: Path,
                                                                  cks_home: Path, tmp_path: Path) -> None:
    """The installed hook, run as the host runs it: exit 0, the host's plain answer, one log line,
    and no thread anywhere (above all not `local`'s)."""
    data = tmp_path / "data"
    path = wrapper.wrapper_path(data)
    path.parent.mkdir(parents=True)
    path.write_text(wrapper.render(data))
    path.chmod(0o755)
    body = payload.read_bytes()
    host = agents.get(agent)
    plain = host.output(host.normalize(event, json.loads(body)))

    def fire(user: str | None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "CKS_ACTIVE_USER"}
        if user is not None:
            env["CKS_ACTIVE_USER"] = user
        return subprocess.run(["/bin/sh", "-c", wrapper.command(path, agent, event, ("--bot",))], input=body,
                              capture_output=True, env=env, timeout=30)

    for empty in ("", "  "):
        proc = fire(empty)
        assert proc.returncode == 0 and proc.stderr == b""
        assert proc.stdout.decode() == plain
    assert not (cks_home / "user").exists()
    log = (data / "logs" / "hooks.log").read_text().splitlines()
    assert len(log) == 2 and all(f"{agent} {event}: bot profile: nothing recorded: CKS_ACTIVE_USER is set but empty"
                                 in line for line in log), log
    if event != "SessionStart":  # the control: the same hook records when the variable is unset
        assert fire(None).returncode == 0
        assert (cks_home / "user" / "local" / "conversation-state.json").exists()
