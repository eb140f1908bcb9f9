"""The one small interface every host module implements.

An agent module knows four things about its host and nothing else:
1. where its hook config lives (user level, project level) and its format;
2. which events we wire, and the exact shape of one hook entry in that file;
3. how to turn the host's stdin payload into one normalized `HookEvent`;
4. what the host accepts on stdout for each event (usually nothing).

Host modules are imported by the hook fast path, so this file and every host module use the
standard library only.
"""

from __future__ import annotations

import os

from leanctx import fastjson

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~3 ms

if TYPE_CHECKING:  # the hook path must not pay for typing/pathlib/dataclasses imports
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, ClassVar

# Canonical event kinds: what an event *means* to leanctx, whatever the host calls it.
SESSION_START = "session_start"
PROMPT = "prompt"
STOP = "stop"
PRE_COMPACT = "pre_compact"
SUBAGENT_START = "subagent_start"
SUBAGENT_STOP = "subagent_stop"
SESSION_END = "session_end"
REPLY = "reply"  # an event carrying the assistant's reply text (Cursor afterAgentResponse)
PRE_TOOL = "pre_tool"  # a tool call about to run (the multi-user guard, the read gates)
POST_TOOL = "post_tool"  # a tool call that ran (only the built-in reader gate listens, to credit)
NOTICE = "notice"  # an event that only carries the ids (Qwen's Notification, Gemini's routine PreCompress)

WRAPPER_NAME = "leanctx-hook"
MCP_SERVER = "leanctx"  # the MCP server's default name in the hosts' configs (`init --mcp-name`)
# what the registered server command ends with for `init --bot` (it offers the state tools too)
MCP_BOT_ARGS = ("--profile", "bot")


def read_tool(server: str = MCP_SERVER) -> str:
    """The name hosts give our ctx_read tool in hook payloads and matchers."""
    return f"mcp__{server}__ctx_read"


def is_read_tool(tool_name: object) -> bool:
    """ctx_read of our server, under whatever name init registered it (`--mcp-name`)."""
    return isinstance(tool_name, str) and tool_name.startswith("mcp__") and tool_name.endswith("__ctx_read")


# An older install wrote Claude Code's read gate as a `type: "http"` hook to a daemon port on
# 127.0.0.1. Any local account can bind that port while the daemon is down and answer the hook,
# so leanctx no longer listens on TCP at all; that entry is recognised only as ours in its old
# form, so that init replaces it, uninstall removes it and doctor flags it.
OLD_GATE_PATH = "/leanctx/read-gate"
_OLD_GATE_PREFIX = "http://127.0.0.1:"


def is_gate_url(url: object) -> bool:
    """The URL of the old http read gate, on any port (any data dir's)."""
    if not isinstance(url, str) or not url.startswith(_OLD_GATE_PREFIX) or not url.endswith(OLD_GATE_PATH):
        return False
    port = url[len(_OLD_GATE_PREFIX):-len(OLD_GATE_PATH)]
    return port.isdigit() and len(port) <= 5


def is_old_gate(command: object) -> bool:
    """A command read back from an old http read-gate handler (handler_command)."""
    return isinstance(command, str) and is_gate_url(command.split(" ", 1)[0])


def handler_command(handler: object) -> str | None:
    """The command of one hook handler; an old http read-gate handler reads back as its URL and
    the flag it stood for (its secret header is never copied anywhere)."""
    if not isinstance(handler, dict):
        return None
    if handler.get("type") == "http":
        url = handler.get("url")
        return f"{url} --read-gate" if is_gate_url(url) else None
    command = handler.get("command")
    return command if isinstance(command, str) else None


def is_our_command(command: object) -> bool:
    """Our entries are recognised by the wrapper's file name as a word of the command, wherever
    the data dir was: an entry written from another LEANCTX_HOME (or an older install) is ours."""
    if is_old_gate(command):
        return True
    if not isinstance(command, str) or WRAPPER_NAME not in command:
        return False
    for word in command.replace("\\", "/").split():
        word = word.strip("'\"")
        if word == WRAPPER_NAME or word.endswith("/" + WRAPPER_NAME):
            return True
    return False


class EventSpec:
    """One event we wire: the host's name for it, what it means, and an optional matcher."""

    __slots__ = ("name", "kind", "matcher")

    def __init__(self, name: str, kind: str, matcher: str | None = None) -> None:
        self.name = name
        self.kind = kind
        self.matcher = matcher

    def __repr__(self) -> str:
        return f"EventSpec({self.name!r}, {self.kind!r}, {self.matcher!r})"


class HookEvent:
    """One host event, normalized. Fields a host does not send stay None/empty.

    A plain class rather than a dataclass: `dataclasses` pulls in `inspect`, which would
    double the hook's start-up time."""

    FIELDS = (
        "conversation_id",
        "session_id",
        "transcript_path",
        "cwd",
        "workspace_roots",
        "subagent_id",
        "subagent_type",
        "subagent_transcript_path",
        "source",
        "turn_id",
        "prompt",
        "reply",
        "tool_name",
        "tool_input",
        "tool_use_id",
        "timestamp",  # the host's own time of the event, as it sent it (Copilot: epoch ms)
        # a prompt after at least this many seconds since the conversation's previous model
        # request may find old tool results cleared from the context (Qwen Code: agents/qwen.py)
        "idle_clear_s",
        # a host whose one process serves many people (OpenClaw's gateway) names the person's
        # conversation itself (its session key): the bot profile keeps one thread per key
        "thread_key",
        "message_id",  # the chat layer's id of the message a prompt carries (a redelivery is recorded once)
    )
    __slots__ = ("agent", "event", "kind") + FIELDS

    def __init__(self, agent: str, event: str, kind: str, **fields: object) -> None:
        self.agent = agent
        self.event = event
        self.kind = kind
        for name in self.FIELDS:
            setattr(self, name, fields.pop(name, None))
        if fields:
            raise TypeError(f"unknown HookEvent fields: {sorted(fields)}")
        if self.workspace_roots is None:
            self.workspace_roots = []

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in ("agent", "event", "kind") + self.FIELDS}


# Claude Code's event names, which Codex and CodeBuddy share.
CLAUDE_STYLE_EVENTS = (
    EventSpec("SessionStart", SESSION_START),
    EventSpec("UserPromptSubmit", PROMPT),
    EventSpec("PreCompact", PRE_COMPACT),
    EventSpec("SubagentStart", SUBAGENT_START),
    EventSpec("SubagentStop", SUBAGENT_STOP),
    EventSpec("Stop", STOP),
    EventSpec("SessionEnd", SESSION_END),
)


def env_dir(var: str, default: Path) -> Path:
    """A host's config folder: its override variable (CLAUDE_CONFIG_DIR, CODEX_HOME…) or the default."""
    from pathlib import Path  # lazily: the hook path never asks for config paths

    value = os.environ.get(var)
    return Path(value) if value else default


def as_dict(value: object) -> dict:
    """`value` if it is a JSON object, else {} (payload fields hosts send ill-typed)."""
    return value if isinstance(value, dict) else {}


def as_text(value: object) -> str | None:
    """`value` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def str_field(payload: dict, *keys: str) -> str | None:
    """First non-empty string among `keys` (hosts disagree on names and send nulls)."""
    for key in keys:
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    return None


class Agent:
    """Base class with the behaviour most hosts share; host modules override what differs."""

    name: ClassVar[str]
    display_name: ClassVar[str]
    events: ClassVar[tuple[EventSpec, ...]]
    #: executable names that mean the host is installed (for `--agent all` detection)
    binaries: ClassVar[tuple[str, ...]] = ()
    #: where hook groups live inside the config document
    hooks_key: ClassVar[tuple[str, ...]] = ("hooks",)
    #: keys a brand-new config file must start with (e.g. Cursor's {"version": 1})
    new_file_keys: ClassVar[dict[str, Any]] = {}
    #: per-entry timeout we write, in the host's unit (seconds everywhere we wire)
    timeout: ClassVar[int] = 10
    #: host versions whose documented/observed format this module was checked against
    checked_against: ClassVar[str] = ""
    #: the family whose shape this host follows; its differences from the family are data in its
    #: module ("claude-shaped", "gemini-shaped", "opencode-plugin", "js-plugin", "hook-files",
    #: "cursor-like")
    family: ClassVar[str] = ""
    #: the README support matrix row (generated: tests/test_support_matrix.py): "verified",
    #: "hooks" (user / project), "mcp" (user / project), "rule", "call_id", "bot", "guard"
    support: ClassVar[dict[str, str]] = {}
    #: the newest host CLI version a real run verified ("" = documentation only) and the oldest
    #: known to work ("" = no floor known): doctor notes a newer CLI and fails an older one
    verified_version: ClassVar[str] = ""
    min_version: ClassVar[str] = ""
    #: the command that prints the installed CLI's version (binary first); () = none to ask
    version_command: ClassVar[tuple[str, ...]] = ()
    #: environment for it, beside the user's (a CLI that would otherwise look for updates online)
    version_env: ClassVar[dict[str, str]] = {}
    #: what the user still has to do for the host to run what init wrote (init prints it after
    #: the files; Kiro CLI: pick our agent), "" when nothing
    init_hint: ClassVar[str] = ""
    #: the host rejects the whole file on comments/trailing commas (we keep them; doctor warns)
    strict_json: ClassVar[bool] = True
    #: with strict_json: the host still accepts a leading UTF-8 byte order mark
    json_bom_ok: ClassVar[bool] = True
    #: with strict_json: the host still accepts comments (only trailing commas break it)
    json_comments_ok: ClassVar[bool] = False
    #: with strict_json: the host still accepts trailing commas (JSON5 readers: Auggie)
    json_trailing_commas_ok: ClassVar[bool] = False
    #: the host takes a hook's stderr as its answer when stdout is empty: the hook stays silent there
    stderr_is_output: ClassVar[bool] = False
    #: the host reads its MCP file as JSONC even where its hooks file is strict (Copilot)
    mcp_jsonc_ok: ClassVar[bool] = False
    #: the host puts PreCompact's plain stdout into its summary prompt and SessionStart(compact)'s
    #: additionalContext after the summary (verified on Claude Code 2.1.197): hooks/compaction.py
    compaction_notes: ClassVar[bool] = False
    #: a host whose one process serves many people names each person's conversation (HookEvent
    #: `thread_key`); the bot profile then keeps the thread `channel:[<this>, key]` (hooks/bot.py)
    thread_key_source: ClassVar[str | None] = None
    #: the host's session start cannot carry added context (Pi): the bot profile hands the thread
    #: to the first prompt of a session that does not hold it yet
    thread_on_first_prompt: ClassVar[bool] = False
    #: when this host runs another host's entries of ours (`real_caller` hands the event over:
    #: Cursor runs Claude Code's), whether the flags those entries carry (guard, read gates, bot)
    #: apply to its calls; False: they were chosen for the other host, the hook only publishes
    foreign_flags: ClassVar[bool] = True
    #: events only the always-on bot profile adds (e.g. Cursor's afterAgentResponse for the reply)
    bot_events: ClassVar[tuple[EventSpec, ...]] = ()
    #: the pre-tool event the multi-user guard listens on (None: the host cannot gate tool calls)
    guard_event: ClassVar[EventSpec | None] = None
    #: the pre-tool event, narrowed to our ctx_read, that notes who is about to read (None: none)
    read_gate_event: ClassVar[EventSpec | None] = None
    #: the host's own tools that read files (its reader, its shell) which the read gate also
    #: answers (hooks/readgate.py: `builtin_read_ask`), and the post-tool event that credits what
    #: they delivered (`builtin_read_delivery`); empty: the host's readers are not gated
    builtin_read_tools: ClassVar[tuple[str, ...]] = ()
    builtin_read_post_event: ClassVar[EventSpec | None] = None
    #: of `builtin_read_tools`, those whose refusal comes after the call ran (hooks/readgate.py):
    #: the host's edit tool accepts only a file its own reader read, which a refused call never
    #: did, so the reader runs and its post-tool hook hands the model the cache's text instead
    #: (`builtin_replace_output`); empty: refused before it runs (`builtin_refusal_output`)
    builtin_refuse_after_run: ClassVar[tuple[str, ...]] = ()
    #: the pre-tool event that gates them when it is not the read gate's own (Copilot: its read
    #: gate listens on preMcpToolCall, its built-in tools go through preToolUse); None: the read gate's
    builtin_read_pre_event: ClassVar[EventSpec | None] = None
    #: the host runs hooks from whole files of ours (OpenCode's plugin, Cline's executable files)
    #: rather than from entries in a config: `hook_folder`/`hook_files` say which, with this mode
    #: (`installer/hookfiles.py` writes them); None: hooks are entries in `user_config_path`
    hook_file_mode: ClassVar[int | None] = None
    #: where the MCP entry keeps its environment (OpenCode: "environment")
    mcp_env_key: ClassVar[str] = "env"
    #: how the model reaches ctx_read on a host that defers MCP tools behind a tool search (a
    #: sentence for the read rule; `@SERVER@` is the registered server name), "" when it is a tool
    read_rule_hint: ClassVar[str] = ""

    # -- where ---------------------------------------------------------------------------
    def config_dir(self, home: Path) -> Path:
        raise NotImplementedError

    def user_config_path(self, home: Path) -> Path:
        raise NotImplementedError

    def project_config_path(self, project: Path) -> Path | None:
        return None

    def hook_folder(self, home: Path, project: Path | None) -> Path:
        """With `hook_file_mode`: the folder the host loads our hook files from."""
        raise NotImplementedError

    def hook_files(self, wired: dict[str, str], mark: Callable[[dict[str, str]], str]) -> dict[str, str]:
        """With `hook_file_mode`: {file name: text} running `wired` ({event: hook command}); each
        file holds the line `mark(events it runs)` in a comment, so init/doctor can read it back."""
        raise NotImplementedError

    def hook_file_names(self) -> tuple[str, ...]:
        """With `hook_file_mode`: every file name `hook_files` may use, in any profile."""
        raise NotImplementedError

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        """Where the bot profile's instructions for the model go, and how: "file" (a whole file
        of ours, e.g. a skill) or "block" (a marked block in the host's shared instructions file).
        None when the host has no such file at that level."""
        return None

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        """Where the read rule (use ctx_read) goes, and how ("file" or "block"); None: nowhere."""
        return None

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]] | None:
        """(file, "json"|"toml", key of the servers table) where this host registers MCP servers;
        None when it reads them from no file at that level (Cline: user level only)."""
        raise NotImplementedError

    def mcp_config_files(self, home: Path, project: Path | None) -> list[Path]:
        """Every file this host may take MCP servers from at that level, in its order; an entry
        of ours left in one that `mcp_config` no longer names is taken out by init and uninstall."""
        config = self.mcp_config(home, project)
        return [config[0]] if config is not None else []

    def mcp_entry(self, command: str, args: list[str]) -> dict:
        """The server entry for leanctx's stdio MCP server, in this host's shape."""
        return {"command": command, "args": args}

    def mcp_approval(self, project: Path) -> tuple[Path, str] | None:
        """(file, key of a list of server names) where this host must find a project server's
        name before it starts it; None when it starts every server of the project's file."""
        return None

    def unparseable_effect(self, path: Path, home: Path) -> str:
        """What the host does with a JSON file of ours it cannot parse strictly (for the warning)."""
        return "it reads strict JSON and ignores this whole file"

    def detect(self, home: Path) -> bool:
        """Installed on this machine: its config folder exists or its CLI is on PATH."""
        import shutil

        return self.config_dir(home).is_dir() or any(shutil.which(b) for b in self.binaries)

    # -- what ----------------------------------------------------------------------------
    def read_tool(self, server: str = MCP_SERVER) -> str:
        """The name this host gives our ctx_read tool in hook payloads and matchers."""
        return read_tool(server)

    def is_read_tool(self, tool_name: object) -> bool:
        return is_read_tool(tool_name)

    def read_gate_matcher(self, server: str = MCP_SERVER) -> str:
        """The read gate's matcher for our ctx_read registered as `server` (most hosts: the tool's name)."""
        return self.read_tool(server)

    def read_rule_note(self, server: str = MCP_SERVER) -> str:
        """What the read rule must add for this host's model to reach ctx_read ('' = nothing):
        `read_rule_hint` with the server's name, unless the host module says more."""
        from leanctx import templating

        return templating.fill(self.read_rule_hint, {"SERVER": server}, f"{self.name} read_rule_hint")

    def event(self, name: str) -> EventSpec | None:
        """The spec of an event we may wire, in any profile."""
        extra = tuple(e for e in (self.guard_event, self.read_gate_event, self.builtin_read_pre_event,
                                  self.builtin_read_post_event) if e is not None)
        for spec in self.events + self.bot_events + extra:
            if spec.name == name:
                return spec
        return None

    def profile_events(
        self, bot: bool = False, guard: bool = False, read_gate: bool = False, mcp_name: str = MCP_SERVER,
        builtin_read: bool = False,
    ) -> list[tuple[EventSpec, tuple[str, ...]]]:
        """(event, hook flags) to wire for a profile: plain coding, `--bot`, `--guard`, and the
        read gate that comes with the MCP server (`--read-gate`), matching the name the server is
        registered under. The guard sees every tool call, so with `--guard` one pre-tool entry
        does both jobs. `builtin_read` (with the read gate, on a host that names a
        `builtin_read_tools`): the same pre-tool entry also answers the host's own reader
        (`--builtin-read`, their names added to the matcher), and a post-tool entry credits it."""
        builtin = builtin_read and read_gate and bool(self.builtin_read_tools) and self.builtin_read_post_event is not None
        more = ("--builtin-read",) if builtin else ()
        # a host whose built-in tools pass another pre-tool event than ctx_read (Copilot), or that
        # has no pre-tool event of its own for ctx_read (OpenCode: the general one, the guard's),
        # gets the built-in gate on that event: with the guard's entry when both listen there,
        # else an entry of its own
        own_pre = (self.builtin_read_pre_event or (self.guard_event if self.read_gate_event is None else None)) if builtin else None
        if own_pre is not None and self.read_gate_event is not None and own_pre.name == self.read_gate_event.name:
            own_pre = None
        gate_more = () if own_pre is not None else more
        bot_kinds = (SESSION_START, PROMPT, STOP, REPLY)
        wired = [(spec, ("--bot",) if bot and spec.kind in bot_kinds else ()) for spec in self.events]
        if bot:
            wired += [(spec, ("--bot",)) for spec in self.bot_events]
        # one pre-tool entry does both jobs when the gate listens on the guard's event (Claude
        # Code); a host with a separate MCP pre-call event (Copilot) gets the two entries
        shared = self.guard_event is not None and self.read_gate_event is not None and self.guard_event.name == self.read_gate_event.name
        with_guard = own_pre is not None and guard and self.guard_event is not None and self.guard_event.name == own_pre.name
        if guard and self.guard_event is not None:
            flags = ("--guard", "--read-gate", *gate_more) if read_gate and shared else ("--guard",)
            wired.append((self.guard_event, flags + more if with_guard else flags))
        if read_gate and self.read_gate_event is not None and not (guard and shared):
            spec = self.read_gate_event
            if spec.matcher is not None and mcp_name != MCP_SERVER:
                spec = EventSpec(spec.name, spec.kind, matcher=self.read_gate_matcher(mcp_name))
            if gate_more and spec.matcher is not None:
                # one entry per event (hookconfig keeps one of ours per event): both tools by name
                spec = EventSpec(spec.name, spec.kind, matcher="|".join((spec.matcher, *self.builtin_read_tools)))
            wired.append((spec, ("--read-gate", *gate_more)))
        if own_pre is not None and not with_guard:
            wired.append((own_pre, more))
        if builtin and self.builtin_read_post_event is not None:
            wired.append((self.builtin_read_post_event, more))
        return wired

    def hook_group(self, command: str, spec: EventSpec) -> dict:
        """The JSON value appended to the event's list in the config file."""
        raise NotImplementedError

    def group_commands(self, group: object) -> list[str]:
        """Every command string in one element of an event's list (for ownership checks)."""
        raise NotImplementedError

    def is_our_group(self, group: object) -> bool:
        commands = self.group_commands(group)
        return bool(commands) and all(is_our_command(c) for c in commands)

    def our_commands(self, group: object) -> list[str]:
        """Our commands in one element of an event's list, in a group of ours or the user's."""
        return [c for c in self.group_commands(group) if is_our_command(c)]

    def mixed_handlers(self, group: object) -> list[int]:
        """Indexes of our handlers inside a group that also holds someone else's (hosts whose
        groups hold several handlers); such a group is the user's, only those handlers are ours."""
        return []

    # -- payloads ------------------------------------------------------------------------
    def real_caller(self, event: str, payload: dict) -> tuple[Agent, str] | None:
        """(host module, its event name) of the host really running a hook wired for this one:
        this host, or another that also runs hooks from this host's files (Cursor and Continue run
        Claude Code's). None: a host we do not publish for; the hook then does nothing."""
        return self, event

    def hook_event(self, event: str, **fields: object) -> HookEvent:
        """A HookEvent of this host for `event`, its kind looked up (hosts with their own payloads)."""
        spec = self.event(event)
        return HookEvent(agent=self.name, event=event, kind=spec.kind if spec else event, **fields)

    def normalize(self, event: str, payload: dict) -> HookEvent:
        """Turn the host's stdin payload into one HookEvent (missing/ill-typed fields -> None)."""
        spec = self.event(event)
        kind = spec.kind if spec else event
        session_id = str_field(payload, "session_id", "sessionId")
        return HookEvent(
            agent=self.name,
            event=event,
            kind=kind,
            conversation_id=str_field(payload, "conversation_id") or session_id,
            session_id=session_id,
            transcript_path=str_field(payload, "transcript_path", "transcriptPath"),
            cwd=str_field(payload, "cwd"),
            workspace_roots=workspace_roots_of(payload),
            subagent_id=str_field(payload, "agent_id", "agentId", "subagent_id"),
            subagent_type=str_field(payload, "agent_type", "agentType", "subagent_type"),
            subagent_transcript_path=str_field(payload, "agent_transcript_path"),
            source=str_field(payload, "source"),
            turn_id=str_field(payload, "turn_id"),
            prompt=str_field(payload, "prompt"),
            reply=str_field(payload, "last_assistant_message"),
            tool_name=str_field(payload, "tool_name", "toolName"),
            tool_input=_tool_input(payload),
            tool_use_id=str_field(payload, "tool_use_id", "toolUseId"),
        )

    def output(self, event: HookEvent) -> str:
        """What to print on stdout after handling `event`. Empty = no opinion."""
        return self.no_opinion(event.event)

    def no_opinion(self, event: str) -> str:
        """What the host accepts as 'no opinion' for `event` (also printed on every error)."""
        return ""

    def context_output(self, event: str, text: str) -> str:
        """What to print so the host adds `text` to the model's context ('' if it cannot)."""
        return ""

    def guard_output(self, event: str, reason: str) -> str:
        """What to print to deny a tool call with `reason` shown to the model."""
        raise NotImplementedError

    def reply_text(self, event: HookEvent) -> str | None:
        """The assistant's reply a stop event stands for (the bot profile records it). Most hosts
        send it in the payload; one that only names its transcript (Copilot) reads it there, and
        only the bot profile pays for that."""
        return event.reply

    def read_gate_output(self, event: HookEvent) -> str:
        """What to print after the read gate noted a ctx_read call: hosts that let a hook add to
        the MCP request's `_meta` (Copilot) get the call's id handed on to our server there."""
        return self.no_opinion(event.event)

    def builtin_read_ask(self, event: HookEvent):  # -> readers.Ask | None
        """What this pre-tool call of one of `builtin_read_tools` will read (leanctx/readers.py:
        one file, one span of lines); None when it is not a read we can name for sure. A host
        whose payloads name no call sets `event.tool_use_id` here when it can find it (Copilot:
        its session log); the gate answers only a call with an id."""
        return None

    def builtin_read_delivery(self, event: HookEvent, payload: dict):  # -> tuple[readers.Ask, str] | None
        """(what was read, the file text it handed the model) for a post-tool call of one of
        `builtin_read_tools`; None for anything else (an error, an image, a cut or odd output).
        As in `builtin_read_ask`, a host may set `event.tool_use_id` here; only a call with an id
        is credited (one without is handed to the daemon unnamed: older copies of that file are
        dropped, hooks/readgate.py)."""
        return None

    def builtin_read_earlier(self, event: HookEvent) -> list:  # -> [(call id, readers.Ask, file text)]
        """Deliveries of earlier calls that only show now, for a pre-tool call of one of
        `builtin_read_tools` (CodeBuddy: its Bash output reaches its transcript after the
        post-tool hook, so the next call's pre-tool hook credits it). Each is credited under its
        own call id, at most once: [] by default."""
        return []

    def context_losses(self, event: HookEvent) -> list:  # -> [str]
        """Ids of the compactions the host's own log shows for this call's context, for a host
        whose hook for them can come late (CodeBuddy: its SessionStart(compact) runs without
        being waited for): each is counted once (publish.note_losses) before a read is answered."""
        return []

    def builtin_refusal_output(self, event: HookEvent, text: str) -> str:
        """What to print so the host does not run this read and the model gets `text` instead."""
        return self.guard_output(event.event, text)

    def builtin_again_output(self, event: HookEvent, ask: object) -> str:
        """Asked again right after a refusal: what lets the content come (the call runs as asked)."""
        return self.no_opinion(event.event)

    def builtin_replace_output(self, event: HookEvent, text: str) -> str:
        """What a post-tool hook prints so the model gets `text` instead of what the call returned
        ('' if the host cannot): only for `builtin_refuse_after_run`."""
        return ""

    def builtin_again_text(self, event: HookEvent, payload: dict, path: str) -> str | None:
        """After a call of `builtin_refuse_after_run` asked again right after a refusal ran: the
        text to hand the model instead of what it returned (the host's own "unchanged" note, which
        is no content), when that text is sure; None: what it returned stands."""
        return None

    def check_output(self, event: str, stdout: str) -> str | None:
        """None when `stdout` is a valid answer for `event`, else the reason it is not."""
        if stdout.strip() and stdout != self.no_opinion(event):
            return f"unexpected stdout {stdout[:80]!r}"
        return None

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        """A payload shaped like the host's own, for doctor's live smoke run."""
        raise NotImplementedError


def _tool_input(payload: dict) -> dict | None:
    value = payload.get("tool_input", payload.get("toolInput", payload.get("toolArgs")))
    if isinstance(value, str):  # some hosts send the arguments JSON-encoded
        try:
            value = fastjson.loads(value)
        except ValueError:
            return {"command": value}
    return value if isinstance(value, dict) else None


def json_object(stdout: str) -> dict | str:
    """Parse a hook's stdout as one JSON object, or return why it is not one."""
    try:
        value = fastjson.loads(stdout)
    except ValueError:
        return f"stdout is not one JSON object: {stdout[:80]!r}"
    return value if isinstance(value, dict) else "stdout JSON is not an object"


def stdout_answer(stdout: str) -> dict | str | None:
    """A hook's stdout for check_output: None when it printed nothing (no opinion), why not
    when it is not one JSON object, else that object."""
    return json_object(stdout) if stdout.strip() else None


def claude_bash_command(tool_input: object) -> str | None:
    """The command of a foreground Claude-shaped `Bash` call with no argument we do not know
    (Claude Code, CodeBuddy): run_in_background and anything newer is not a plain read."""
    if not isinstance(tool_input, dict) or set(tool_input) - {"command", "description", "timeout"}:
        return None
    command = tool_input.get("command")
    return command if isinstance(command, str) else None


def command_of_entry(group: object) -> list[str]:
    """The command of a flat hook entry `{"command": ...}` (Cursor's entries, our hook files)."""
    if isinstance(group, dict) and isinstance(group.get("command"), str):
        return [group["command"]]
    return []


def workspace_roots_of(payload: dict) -> list[str]:
    roots = payload.get("workspace_roots") or payload.get("workspaceRoots")
    if isinstance(roots, list):
        return [r for r in roots if isinstance(r, str) and r]
    return []


class ClaudeShapeAgent(Agent):
    """Hosts speaking Claude Code's hooks dialect: event -> [matcher group {matcher?, hooks:
    [handler]}] in a JSON settings file, `hookSpecificOutput` answers, an MCP `mcpServers` table.
    What differs between them is data: the class attributes below. A host module sets those and
    overrides only what its host really does differently."""

    guard_event = EventSpec("PreToolUse", PRE_TOOL)
    read_gate_event = EventSpec("PreToolUse", PRE_TOOL, matcher=read_tool())
    #: events where `hookSpecificOutput.additionalContext` reaches the model
    context_events: ClassVar[tuple[str, ...]] = ("SessionStart", "UserPromptSubmit")
    #: the user config folder: `~/<config_home>`, or the folder named by `config_env` when set
    config_home: ClassVar[str] = ""
    config_env: ClassVar[str | None] = None
    #: the hooks file in that folder, and the project's hooks file (relative to the project)
    settings_file: ClassVar[str] = "settings.json"
    project_settings: ClassVar[str] = ""
    #: the instructions file the read rule goes into as a marked block (config folder / project)
    rules_file: ClassVar[str] = ""
    #: the user-level MCP file (relative to HOME) and the project's
    mcp_user_file: ClassVar[str] = ""
    mcp_project_file: ClassVar[str] = ".mcp.json"
    #: the server entry's "type" (None: the host's entries carry none)
    mcp_type: ClassVar[str | None] = "stdio"
    #: the unit the host reads a handler's `timeout` in (Gemini and Qwen: milliseconds)
    timeout_unit_ms: ClassVar[bool] = False
    #: the host's entries are flat `{matcher?, command, timeout}` rather than matcher groups
    #: `{matcher?, hooks: [handler]}` (Crush): an entry is ours when its command is
    flat_entries: ClassVar[bool] = False
    #: the host tests a matcher as an unanchored regular expression (Crush, Goose): the read
    #: gate's matcher is our tool's whole name, `^…$`, not any name containing it
    regex_matchers: ClassVar[bool] = False
    #: the host's own deny answer `{"decision": <this>, "reason": …}` (Crush "deny", Goose
    #: "block"), which the guard prints instead of `hookSpecificOutput`; None: Claude Code's
    native_deny: ClassVar[str | None] = None

    def config_dir(self, home: Path) -> Path:
        return env_dir(self.config_env, home / self.config_home) if self.config_env else home / self.config_home

    def profile_events(self, bot: bool = False, guard: bool = False, read_gate: bool = False, mcp_name: str = MCP_SERVER,
                       builtin_read: bool = False) -> list[tuple[EventSpec, tuple[str, ...]]]:
        wired = super().profile_events(bot, guard, read_gate, mcp_name, builtin_read)
        if not self.regex_matchers:
            return wired
        tool = self.read_tool(mcp_name)
        return [(EventSpec(s.name, s.kind, matcher=f"^{tool}$"), f) if s.matcher == tool else (s, f) for s, f in wired]

    def user_config_path(self, home: Path) -> Path:
        return self.config_dir(home) / self.settings_file

    def project_config_path(self, project: Path) -> Path:
        return project / self.project_settings

    def rules_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        if not self.rules_file:
            return None
        return (self.config_dir(home) if project is None else project) / self.rules_file, "block"

    def mcp_config(self, home: Path, project: Path | None) -> tuple[Path, str, tuple[str, ...]]:
        path = project / self.mcp_project_file if project is not None else home / self.mcp_user_file
        return path, "json", ("mcpServers",)

    def mcp_entry(self, command: str, args: list[str]) -> dict:
        entry = {"type": self.mcp_type} if self.mcp_type else {}
        return {**entry, "command": command, "args": args}

    def context_output(self, event: str, text: str) -> str:
        if event not in self.context_events:
            return ""
        return fastjson.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})

    def guard_output(self, event: str, reason: str) -> str:
        if self.native_deny is not None:
            return fastjson.dumps({"decision": self.native_deny, "reason": reason})
        return fastjson.dumps(
            {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny", "permissionDecisionReason": reason}}
        )

    def check_output(self, event: str, stdout: str) -> str | None:
        value = stdout_answer(stdout)
        if not isinstance(value, dict):
            return value
        if self.native_deny is not None and self.guard_event is not None and event == self.guard_event.name \
                and value.get("decision") == self.native_deny and isinstance(value.get("reason"), str):
            return None
        specific = value.get("hookSpecificOutput")
        if not isinstance(specific, dict) or specific.get("hookEventName") != event:
            return f"hookSpecificOutput missing or for another event: {stdout[:80]!r}"
        if event in self.context_events and isinstance(specific.get("additionalContext"), str):
            return None
        if event == "PreToolUse" and specific.get("permissionDecision") == "deny":
            return None
        if event == "PreToolUse" and "permissionDecision" not in specific and isinstance(specific.get("updatedInput"), dict):
            return None  # the built-in reader gate's re-ask after a refusal (hooks/readgate.py)
        return f"not an answer {self.display_name} takes for {event}: {stdout[:80]!r}"

    def hook_group(self, command: str, spec: EventSpec) -> dict:
        group: dict[str, Any] = {}
        if spec.matcher is not None:
            group["matcher"] = spec.matcher
        timeout = self.timeout * 1000 if self.timeout_unit_ms else self.timeout
        if self.flat_entries:
            return {**group, "command": command, "timeout": timeout}
        group["hooks"] = [{"type": "command", "command": command, "timeout": timeout}]
        return group

    def is_flat(self, group: object) -> bool:
        """One flat entry `{command, …}` of a host with `flat_entries`, not a matcher group."""
        return self.flat_entries and isinstance(group, dict) and "hooks" not in group

    def group_commands(self, group: object) -> list[str]:
        if not isinstance(group, dict):
            return []
        if self.is_flat(group):
            command = group.get("command")
            return [command] if isinstance(command, str) else []
        handlers = group.get("hooks")
        if not isinstance(handlers, list):
            return []
        return [c for c in map(handler_command, handlers) if c is not None]

    def is_our_group(self, group: object) -> bool:
        """Every handler of the group is ours (a user's prompt handler beside ours keeps it theirs)."""
        if self.is_flat(group):
            return is_our_command(group.get("command"))
        handlers = group.get("hooks") if isinstance(group, dict) else None
        return bool(handlers) and isinstance(handlers, list) and all(is_our_command(handler_command(h)) for h in handlers)

    def mixed_handlers(self, group: object) -> list[int]:
        if self.is_our_group(group):
            return []
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            return []
        return [i for i, h in enumerate(handlers) if is_our_command(handler_command(h))]

    def instructions_path(self, home: Path, project: Path | None) -> tuple[Path, str] | None:
        base = self.config_dir(home) if project is None else self.project_config_path(project).parent
        return base / "skills" / "leanctx-conversation-state" / "SKILL.md", "file"

    def synthetic_payload(self, event: str, cwd: str) -> dict:
        session = "leanctx-doctor-00000000-0000-0000-0000-000000000000"
        payload: dict[str, Any] = {
            "session_id": session,
            "transcript_path": os.path.join(cwd, f"{session}.jsonl"),
            "cwd": cwd,
            "hook_event_name": event,
        }
        spec = self.event(event)
        kind = spec.kind if spec else ""
        if kind == SESSION_START:
            payload["source"] = "startup"
        elif kind == PROMPT:
            payload["prompt"] = "leanctx doctor smoke test"
        elif kind == STOP:
            payload["stop_hook_active"] = False
            payload["last_assistant_message"] = "leanctx doctor smoke test"
        elif kind in (SUBAGENT_START, SUBAGENT_STOP):
            payload["agent_id"] = "leanctx-doctor-subagent"
            payload["agent_type"] = "general-purpose"
        elif kind == PRE_COMPACT:
            payload["trigger"] = "manual"
        elif kind == PRE_TOOL:
            payload.update(tool_name="Read", tool_input={"file_path": os.path.join(cwd, "README.md")}, tool_use_id="toolu_doctor")
        return payload


class FileHookAgent(Agent):
    """A host whose hooks are files of ours in a folder (see `hook_file_mode`). The first file
    stands for "the hook config" in messages; doctor reads the wired commands back as
    {event: [{"command": …}]}."""

    def user_config_path(self, home: Path) -> Path:
        return self.hook_folder(home, None) / self.hook_file_names()[0]

    def project_config_path(self, project: Path) -> Path:
        return self.hook_folder(project, project) / self.hook_file_names()[0]

    def group_commands(self, group: object) -> list[str]:
        return command_of_entry(group)
