"""Big host configs as the hosts write them, for the big-config test and bench/big_config.py.

Claude Code keeps every project's prompt history in ~/.claude.json (2-space indent, raw UTF-8),
so users with months of history have files of tens of MB; a settings.json can grow big too with
a long permissions list. Seeded, so every run builds the same bytes.
"""

from __future__ import annotations

import json
import random

WORDS = (
    "fix the failing test in the parser refactor module so that config loads faster add a flag "
    "explain why the build breaks on CI résumé naïve café Größe 日本語のテキスト 中文提示 emoji ✅ 🚀"
).split()


ASCII_WORDS = [w for w in WORDS if w.isascii()]


def _sentence(rng: random.Random, n: int, words: list[str] = WORDS) -> str:
    return " ".join(rng.choice(words) for _ in range(n))


def _project(rng: random.Random, i: int, words: list[str]) -> dict:
    history = []
    for _ in range(rng.randint(20, 100)):
        entry: dict = {"display": _sentence(rng, rng.randint(5, 60), words), "pastedContents": {}}
        if rng.random() < 0.1:
            entry["pastedContents"] = {"1": {"id": 1, "type": "text", "content": _sentence(rng, 200, words) + "\n\tline two \"quoted\""}}
        history.append(entry)
    return {
        "allowedTools": ["Bash(npm test:*)", "Edit"] if i % 3 == 0 else [],
        "history": history,
        "mcpContextUris": [],
        "mcpServers": {},
        "enabledMcpjsonServers": [],
        "disabledMcpjsonServers": [],
        "hasTrustDialogAccepted": bool(i % 2),
        "projectOnboardingSeenCount": rng.randint(0, 4),
        "hasClaudeMdExternalIncludesApproved": False,
        "hasClaudeMdExternalIncludesWarningShown": False,
        "lastCost": round(rng.random() * 3, 6),
        "lastAPIDuration": rng.randint(1000, 900000),
        "lastDuration": rng.randint(1000, 9000000),
        "lastLinesAdded": rng.randint(0, 900),
        "lastLinesRemoved": rng.randint(0, 400),
        "lastTotalInputTokens": rng.randint(0, 10**6),
        "lastTotalOutputTokens": rng.randint(0, 10**5),
        "lastSessionId": f"{rng.getrandbits(128):032x}",
        "exampleFiles": ["src/main.py", "src/cli.py", "tests/test_app.py"],
    }


def claude_json(size: int, seed: int = 8, ascii_only: bool = False) -> str:
    """A ~/.claude.json of about `size` bytes, written the way Claude Code writes it (raw UTF-8:
    one emoji makes Python hold the whole decoded text at 4 bytes a character)."""
    rng = random.Random(seed)
    words = ASCII_WORDS if ascii_only else WORDS
    doc: dict = {
        "numStartups": 412,
        "installMethod": "native",
        "autoUpdates": True,
        "tipsHistory": {f"tip-{i}": rng.randint(1, 400) for i in range(40)},
        "userID": f"{rng.getrandbits(256):064x}",
        "firstStartTime": "2025-03-02T10:11:12.000Z",
        "projects": {},
        "oauthAccount": {"accountUuid": "00000000-0000-0000-0000-000000000000", "emailAddress": "dev@example.com"},
        "hasCompletedOnboarding": True,
        "lastReleaseNotesSeen": "2.1.197",
    }
    total = 1000
    i = 0
    while total < size:
        project = _project(rng, i, words)
        doc["projects"][f"/home/dev/work/project-{i}-{_sentence(rng, 1, words)}"] = project
        total += len(json.dumps(project, ensure_ascii=False, indent=2).encode()) + 50
        i += 1
    return json.dumps(doc, ensure_ascii=False, indent=2)


def settings_json(size: int, seed: int = 9) -> str:
    """A ~/.claude/settings.json of about `size` bytes: permissions, env, the user's own hooks."""
    rng = random.Random(seed)
    allow, total = [], 0
    while total < size:
        rule = f"Bash({_sentence(rng, rng.randint(1, 6))}:*)"
        allow.append(rule)
        total += len(rule.encode()) + 8
    doc = {
        "$schema": "https://json.schemastore.org/claude-code-settings.json",
        "permissions": {"allow": allow, "deny": ["Read(./.env)"]},
        "env": {"FOO": "bar"},
        "hooks": {"PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}]},
    }
    return json.dumps(doc, ensure_ascii=False, indent=2)
