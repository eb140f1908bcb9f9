"""The built-in readers of the hosts other than Claude Code and Codex, as the replay runs them.

For each gated host this module knows, independently of the host modules under test
(leanctx/agents/*.py), what the host itself does, as recorded in the e2e runs
(tests/fixtures/payloads/<host>/builtin/) and written in the host modules' notes:

- the tool call the model makes (`builtin_input`, `shell_input`): the host's own argument names
  and conventions (Gemini's 1-based `start_line`/`end_line`, Qwen's 0-based `offset`, Copilot's
  `view_range`, OpenCode's `filePath`...);
- the span of lines that call really reads (`window`), by the host's rules and defaults;
- what the host hands its model and its post-tool hook (`render_builtin`, `render_shell`): the
  exact wrappers (Gemini's "IMPORTANT: The file content has been truncated" head, Qwen's
  "Showing lines", OpenCode's `<path>`/`N: ` line-number wrapper and footer, CodeBuddy's
  `   N→` numbers, Droid's system reminder, the shells' exit lines), and the host's own cuts;
- the hook payloads around the call (`pre_payload`, `post_payload`, `hook_payload`), in the host's
  shape, with what a host that names no call in its payloads writes elsewhere first (Copilot's
  session log, Droid's transcript); Gemini names no call anywhere.

The replay hands those payloads to the host module's own `normalize`, `builtin_read_ask` and
`builtin_read_delivery`, so the parsing code that runs in the hooks is what is exercised; this
module never calls it. Nothing in the product imports this file.
"""

from __future__ import annotations

import json
import os
import time

MAX_LINE_CHARS = 2000


def iso(t: float) -> str:
    ms = int(round(t * 1000))
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + ".%03dZ" % (ms % 1000)


def pieces(text: str) -> list[str]:
    return text.split("\n")


def nlines(text: str) -> int:
    """Lines as the cache counts them (a final newline ends the last line, it opens none)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


class Shape:
    agent = ""
    builtin_tool = ""
    shell_tool = ""
    events: dict[str, str] = {}  # meaning -> the host's event name
    pre_event = "PreToolUse"
    post_event = "PostToolUse"

    def __init__(self, eng) -> None:  # noqa: ANN001 - replay.Engine
        self.eng = eng

    # the model's call --------------------------------------------------------------------------
    def builtin_input(self, path: str, start: int | None, end: int | None) -> dict:
        raise NotImplementedError

    def shell_input(self, command: str) -> dict:
        return {"command": command, "description": "read"}

    def window(self, tool_input: dict, text: str) -> tuple[int, int] | None:
        """The lines (1-based, inclusive, within the file's line count) the built-in call reads
        (from `_span`'s pieces and span where the shape has one)."""
        _p, a, b = self._span(tool_input, text)
        n = nlines(text)
        return (a, min(b, n)) if n and a <= n else None

    def _span(self, tool_input: dict, text: str) -> tuple[list, int, int]:
        """(the file's pieces as the host counts them, first, last) the built-in call reads."""
        raise NotImplementedError

    # what the host answers ---------------------------------------------------------------------
    def render_builtin(self, host, tool_input: dict, text: str, delivered: str | None) -> tuple[object, str, str | None]:  # noqa: ANN001
        """(the post-tool hook's tool_response, the text the model gets, the file text the model
        holds: the lines of `window` when the host gave them as they are, else None; True when
        the answer is a note of the host's own rather than bytes of the file)."""
        raise NotImplementedError

    def render_shell(self, command: str, stdout: str) -> tuple[object, str]:
        """(the post-tool hook's tool_response, the text the model gets) for a run that exited 0."""
        raise NotImplementedError

    def shell_seen(self, stdout: str) -> str:
        """The command's output as the model gets it (a host may trim it)."""
        return stdout

    # payloads ----------------------------------------------------------------------------------
    def base(self, conv: str, sub: str | None, cwd: str) -> dict:
        return {"session_id": conv, "transcript_path": self.transcript(conv), "cwd": cwd}

    def transcript(self, conv: str) -> str:
        return os.path.join(self.eng.base, f"{self.agent}-sessions", f"{conv}.jsonl")

    def call_fields(self, call: str) -> dict:
        return {}

    def sub_fields(self, sub: str | None) -> dict:
        return {"agent_id": sub, "agent_type": "general-purpose"} if sub else {}

    def pre_payload(self, host, conv, sub, cwd, tool, tool_input, call: str) -> tuple[str, dict]:  # noqa: ANN001
        p = {**self.base(conv, sub, cwd), "hook_event_name": self.pre_event, "tool_name": tool,
             "tool_input": dict(tool_input), **self.call_fields(call), **self.sub_fields(sub)}
        return self.pre_event, p

    def post_payload(self, host, conv, sub, cwd, tool, tool_input, call: str, response) -> tuple[str, dict]:  # noqa: ANN001
        p = {**self.base(conv, sub, cwd), "hook_event_name": self.post_event, "tool_name": tool,
             "tool_input": dict(tool_input), "tool_response": response, **self.call_fields(call), **self.sub_fields(sub)}
        return self.post_event, p

    def after_call(self, host, conv, sub, tool, tool_input, call: str, ran: bool) -> None:  # noqa: ANN001
        """The host's own log after the call (its result, or the refusal) is written."""

    def hook_payload(self, meaning: str, conv: str, sub: str | None, cwd: str, extra: dict) -> tuple[str, dict] | None:
        event = self.events.get(meaning)
        if event is None:
            return None
        p = dict(self.base(conv, None, cwd), hook_event_name=event)
        if meaning == "start":
            p["source"] = extra.get("source", "startup")
        elif meaning == "prompt":
            p["prompt"] = extra.get("prompt", "work")
        elif meaning == "compact":
            p["trigger"] = "manual"
        elif meaning in ("sub_start", "sub_stop"):
            p.update(self.sub_fields(sub))
        elif meaning == "end":
            p["reason"] = extra.get("reason", "other")
        return event, p


def numbered_cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "... [truncated]"


# -- Gemini CLI 0.61.0 --------------------------------------------------------------------------
class Gemini(Shape):
    agent, builtin_tool, shell_tool = "gemini", "read_file", "run_shell_command"
    events = {"start": "SessionStart", "prompt": "BeforeAgent", "stop": "AfterAgent", "compact": "PreCompress",
              "sub_start": "BeforeTool", "sub_stop": "AfterTool", "end": "SessionEnd"}
    pre_event, post_event = "BeforeTool", "AfterTool"
    DEFAULT = 2000
    HEAD = ("\nIMPORTANT: The file content has been truncated.\nStatus: Showing lines {a}-{b} of {n} total lines.\n"
            "Action: To read more of the file, you can use the 'start_line' and 'end_line' parameters in a subsequent "
            "'read_file' call. For example, to read the next section of the file, use start_line: {next}.\n\n"
            "--- FILE CONTENT (truncated) ---\n")

    def transcript(self, conv: str) -> str:
        return self.eng._gemini_chat(f"session-{conv}.jsonl", "", None)

    def builtin_input(self, path, start, end):
        out: dict = {"file_path": path}
        if start is not None and start != 1 or end is not None:
            out["start_line"] = int(start or 1)
        if end is not None:
            out["end_line"] = int(end)
        return out

    def _span(self, tool_input, text):
        p = pieces(text)
        a = int(tool_input.get("start_line") or 1)
        b = int(tool_input["end_line"]) if tool_input.get("end_line") is not None else a + self.DEFAULT - 1
        return p, a, min(b, len(p))


    def render_builtin(self, host, tool_input, text, delivered):
        p, a, b = self._span(tool_input, text)
        cut = any(len(x) > MAX_LINE_CHARS for x in p[a - 1:b])
        ranged = "start_line" in tool_input or "end_line" in tool_input or b < len(p) or cut
        if delivered is not None:
            body = delivered
        else:
            body = "\n".join(numbered_cut(x) for x in p[a - 1:b]) if ranged else text
        if not ranged:
            content = body
        else:
            content = self.HEAD.format(a=a, b=b, n=len(p), next=b + 1) + body
        exact = "\n".join(p[a - 1:b])
        seen = body if body == exact or (a == 1 and body == text) else None
        return {"llmContent": content, "returnDisplay": ""}, content, seen, False

    def render_shell(self, command, stdout):
        out = stdout.strip() or "(empty)"
        content = f"<untrusted_context>\nOutput: {out}\nProcess Group PGID: {4000 + self.eng.calls % 1000}\n</untrusted_context>"
        return {"llmContent": content, "returnDisplay": out}, content

    def shell_seen(self, stdout):
        return stdout.strip()

    def pre_payload(self, host, conv, sub, cwd, tool, tool_input, call):
        p = dict(self.base(conv, sub, cwd), hook_event_name="BeforeTool", timestamp=iso(self.eng.t), tool_name=tool,
                 tool_input=dict(tool_input))
        return "BeforeTool", p  # no call id, no subagent id: Gemini names neither

    def post_payload(self, host, conv, sub, cwd, tool, tool_input, call, response):
        p = dict(self.base(conv, sub, cwd), hook_event_name="AfterTool", timestamp=iso(self.eng.t), tool_name=tool,
                 tool_input=dict(tool_input), tool_response=response)
        return "AfterTool", p

    def hook_payload(self, meaning, conv, sub, cwd, extra):
        if meaning in ("sub_start", "sub_stop"):
            event = "BeforeTool" if meaning == "sub_start" else "AfterTool"
            p = dict(self.base(conv, None, cwd), hook_event_name=event, timestamp=iso(self.eng.t), tool_name="invoke_agent",
                     tool_input={"agent_name": "generalist", "prompt": f"task {sub}"})
            if meaning == "sub_stop":
                p["tool_response"] = {"llmContent": [{"text": "Subagent 'generalist' finished."}]}
            return event, p
        got = super().hook_payload(meaning, conv, sub, cwd, extra)
        if got and meaning == "start":
            got[1]["transcript_path"] = self.eng._gemini_chat(f"session-{conv}.jsonl", "SessionStart", got[1].get("source"))
        if got and meaning == "compact":
            self.eng._gemini_chat(f"session-{conv}.jsonl", "compress", None)  # /compress rewrites the history
        return got


# -- Qwen Code 0.15.10 / 0.24.4 -----------------------------------------------------------------
class Qwen(Shape):
    agent, builtin_tool, shell_tool = "qwen", "read_file", "run_shell_command"
    events = {"start": "SessionStart", "prompt": "UserPromptSubmit", "stop": "Stop", "compact": "PreCompact",
              "sub_start": "SubagentStart", "sub_stop": "SubagentStop", "end": "SessionEnd"}
    DEFAULT = 1000
    UNCHANGED = ("[File {name} unchanged since last read in this session \u2014 the full content was provided earlier "
                 "in this conversation. If you cannot retrieve that prior content (e.g. after context compaction) or you "
                 "suspect the file was modified outside the read/edit tools (shell command, MCP tool, another process), "
                 "re-read with explicit offset/limit to fetch current content.]")

    def transcript(self, conv):
        return self.eng._qwen_chat(f"{conv}.jsonl")

    def builtin_input(self, path, start, end):
        out: dict = {"file_path": path}
        if start is not None and start != 1 or end is not None:
            out["offset"] = int(start or 1) - 1
        if end is not None:
            out["limit"] = int(end) - int(start or 1) + 1
        return out

    def _span(self, tool_input, text):
        p = pieces(text)
        a = int(tool_input.get("offset") or 0) + 1
        b = a + int(tool_input.get("limit") or self.DEFAULT) - 1
        return p, a, min(b, len(p))


    def render_builtin(self, host, tool_input, text, delivered):
        p, a, b = self._span(tool_input, text)
        path = tool_input["file_path"]
        whole_call = set(tool_input) == {"file_path"}
        seen_before = host.state.setdefault("qwen_read", {})
        stat = os.stat(path)
        if whole_call and seen_before.get(path) == (stat.st_mtime_ns, stat.st_size):
            # its own answer to a whole-file re-read of a file it read whole in this process
            note = self.UNCHANGED.format(name=os.path.basename(path))
            return {"llmContent": note, "returnDisplay": ""}, note, None, True
        # read_file trims each line's trailing blanks; a line over 2000 characters is cut
        lines = [numbered_cut(x.rstrip()) for x in p[a - 1:b]]
        ranged = a > 1 or b < len(p)
        body = delivered if delivered is not None else "\n".join(lines)
        content = f"Showing lines {a}-{b} of {len(p)} total lines.\n\n---\n\n{body}" if ranged else body
        if whole_call and not ranged:
            seen_before[path] = (stat.st_mtime_ns, stat.st_size)
        exact = "\n".join(p[a - 1:b])
        seen = body if body == exact else None
        return {"llmContent": content, "returnDisplay": ""}, content, seen, False

    def render_shell(self, command, stdout):
        out = stdout.strip() or "(empty)"
        content = (f"Command: {command}\nDirectory: (root)\nOutput: {out}\nError: (none)\nExit Code: 0\nSignal: (none)\n"
                   "Process Group PGID: (none)")
        return {"llmContent": content, "returnDisplay": out}, content

    def shell_seen(self, stdout):
        return stdout.strip()

    def call_fields(self, call):
        return {"timestamp": iso(self.eng.t), "permission_mode": "yolo", "tool_use_id": call,
                "tool_call_id": "call_" + call.rsplit("_", 1)[-1]}


# -- GitHub Copilot CLI 1.0.102 -----------------------------------------------------------------
class Copilot(Shape):
    agent, builtin_tool, shell_tool = "copilot", "view", "bash"
    events = {"start": "sessionStart", "prompt": "userPromptSubmitted", "stop": "agentStop", "compact": "preCompact",
              "sub_start": "userPromptSubmitted", "sub_stop": "agentStop", "end": "sessionEnd"}
    pre_event, post_event = "preToolUse", "postToolUse"
    LARGE = 20 * 1024

    def home(self) -> str:
        return os.path.join(self.eng.base, "copilot-home")

    def log(self, session: str) -> str:
        path = os.path.join(self.home(), "session-state", session, "events.jsonl")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def stamp(self, host) -> int:  # noqa: ANN001
        ms = max(int(round(self.eng.t * 1000)), host.state.get("copilot_ms", 0) + 200)
        host.state["copilot_ms"] = ms
        return ms

    def line(self, session: str, kind: str, data: dict, ms: int, agent: str | None = None) -> None:
        from leanctx.agents.copilotlog import iso_ms  # the log's own format (a copy would be the same code)

        entry = {"type": kind, "data": data, "id": f"ev-{self.eng.calls}-{kind}", "timestamp": iso_ms(ms)}
        if agent:
            entry["agentId"] = agent
        with open(self.log(session), "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")

    def builtin_input(self, path, start, end):
        out: dict = {"path": path}
        if start is not None and start != 1 or end is not None:
            out["view_range"] = [int(start or 1), int(end) if end is not None else -1]
        return out

    def window(self, tool_input, text):
        n = nlines(text)
        span = tool_input.get("view_range")
        a, b = (1, n) if span is None else (span[0], n if span[1] == -1 else min(span[1], n))
        return (a, b) if n and a <= n else None

    def render_builtin(self, host, tool_input, text, delivered):
        p = pieces(text)
        n = nlines(text)
        span = tool_input.get("view_range")
        if span is None:
            if len(text.encode()) > self.LARGE:
                note = "File too large to read at once (over 20 KB). Use view_range to read a part of it."
                return {"resultType": "success", "textResultForLlm": note}, note, None, True
            body = delivered if delivered is not None else text
            return {"resultType": "success", "textResultForLlm": body}, body, (body if body == text else None), False
        a, b = self.window(tool_input, text) or (1, 0)
        body = "\n".join(p[a - 1:b]) + ("\n" if b == n and text.endswith("\n") else "")
        if delivered is not None:
            body = delivered
        if len(body.encode()) > self.LARGE:
            kept = body.encode()[: self.LARGE].decode("utf-8", "ignore")
            body = kept[: kept.rfind("\n") + 1] + "\n\n[Output truncated. Use a smaller view_range.]"
        exact = "\n".join(p[a - 1:b])
        seen = body if body in (exact, exact + "\n") else None
        return {"resultType": "success", "textResultForLlm": body}, body, seen, False

    def render_shell(self, command, stdout):
        if len(stdout.encode()) > self.LARGE:
            text = f"Output too large to read at once ({len(stdout)} bytes); saved to a file. Preview:\n{stdout[:500]}"
        else:
            text = stdout.strip()
        text += f"\n<shellId: {1 + self.eng.calls % 50} completed with exit code 0>"
        return {"resultType": "success", "textResultForLlm": text}, text

    def shell_seen(self, stdout):
        return stdout.strip() if len(stdout.encode()) <= self.LARGE else stdout[:500]

    def base(self, conv, sub, cwd):
        return {"sessionId": sub or conv, "cwd": cwd}

    def pre_payload(self, host, conv, sub, cwd, tool, tool_input, call):
        ms = self.stamp(host)
        session, agent = (sub or conv), sub
        if not host.state.get("copilot_no_log") and not host.state.get("copilot_no_pre_line"):
            # "twin": the same call twice in one response (both run; their ids cannot be told apart)
            ids = [call, call + "-twin"] if host.state.get("twin") else [call]
            self.line(conv, "assistant.message", {"content": "", "toolRequests": [
                {"toolCallId": i, "name": tool, "arguments": tool_input, "type": "function"} for i in ids]}, ms - 3, agent)
            for i in ids:
                self.line(conv, "tool.execution_start", {"toolCallId": i, "toolName": tool, "arguments": tool_input}, ms - 1, agent)
            self.line(conv, "hook.start", {"hookType": "preToolUse", "input": {
                "sessionId": session, "cwd": cwd, "toolCalls": [{"id": i, "name": tool, "args": tool_input} for i in ids]}}, ms, agent)
        p = {"sessionId": session, "timestamp": ms, "cwd": cwd, "toolName": tool, "toolArgs": dict(tool_input)}
        if sub:
            p.update(agentId=sub, agentType="general-purpose", parentAgentId=conv)
        return "preToolUse", p

    def post_payload(self, host, conv, sub, cwd, tool, tool_input, call, response):
        ms = self.stamp(host)
        p = {"sessionId": sub or conv, "timestamp": ms, "cwd": cwd, "toolName": tool, "toolArgs": dict(tool_input),
             "toolResult": response}
        if sub:
            p.update(agentId=sub, agentType="general-purpose", parentAgentId=conv)
        if host.state.get("copilot_no_pre_line"):  # the call's lines came late: after its preToolUse hook gave up
            self.line(conv, "assistant.message", {"content": "", "toolRequests": [
                {"toolCallId": call, "name": tool, "arguments": tool_input, "type": "function"}]}, ms - 3, sub)
            self.line(conv, "tool.execution_start", {"toolCallId": call, "toolName": tool, "arguments": tool_input}, ms - 1, sub)
        if not host.state.get("copilot_no_log"):
            self.line(conv, "hook.start", {"hookType": "postToolUse", "input": p}, ms, sub)
        return "postToolUse", p

    def after_call(self, host, conv, sub, tool, tool_input, call, ran):
        if not host.state.get("copilot_no_log"):
            self.line(conv, "tool.execution_complete", {"toolCallId": call, "success": ran}, self.stamp(host), sub)

    def hook_payload(self, meaning, conv, sub, cwd, extra):
        ms = int(self.eng.t * 1000)
        p: dict = {"sessionId": sub or conv, "timestamp": ms, "cwd": cwd}
        if meaning == "start":
            p.update(source="new" if extra.get("source", "startup") == "startup" else extra["source"], initialPrompt="work")
        elif meaning in ("prompt", "sub_start"):
            p["prompt"] = extra.get("prompt", "work")
        elif meaning in ("stop", "sub_stop"):
            p.update(transcriptPath=self.log(conv), stopReason="end_turn", stop_hook_active=False)
        elif meaning == "compact":
            p.update(transcriptPath=self.log(conv), trigger="manual")
        elif meaning == "end":
            p["reason"] = "complete"
        if meaning in ("sub_start", "sub_stop"):
            p.update(agentId=sub, agentType="general-purpose", parentAgentId=conv)
        return self.events[meaning], p


def offset_limit_input(key: str, path: str, start: int | None, end: int | None) -> dict:
    """A reader call that names its span by a 1-based `offset` and a `limit` (OpenCode, CodeBuddy,
    Droid), the path under `key`; no span asked: neither."""
    out: dict = {key: path}
    if start is not None and start != 1 or end is not None:
        out["offset"] = int(start or 1)
    if end is not None:
        out["limit"] = int(end) - int(start or 1) + 1
    return out


# -- OpenCode 1.18.33 ---------------------------------------------------------------------------
class OpenCode(Shape):
    agent, builtin_tool, shell_tool = "opencode", "read", "bash"
    events = {"start": "session.created", "prompt": "chat.message", "stop": "session.idle",
              "compact": "experimental.session.compacting", "end": None}
    pre_event, post_event = "tool.execute.before", "tool.execute.after"
    DEFAULT, CAP = 2000, 50 * 1024

    def builtin_input(self, path, start, end):
        return offset_limit_input("filePath", path, start, end)

    def _span(self, tool_input, text):
        n = nlines(text)
        a = int(tool_input.get("offset") or 0) or 1
        b = min(a + int(tool_input.get("limit") or self.DEFAULT) - 1, n)
        return n, a, b

    def window(self, tool_input, text):
        n, a, b = self._span(tool_input, text)
        return (a, b) if n and a <= n else None

    def render_builtin(self, host, tool_input, text, delivered):
        n, a, b = self._span(tool_input, text)
        lines = text.split("\n")[:n]
        if delivered is not None:
            lines = (lines[:a - 1] + delivered.split("\n") + lines[a - 1 + len(delivered.split("\n")):])
        rows, size, last = [], 0, a - 1
        capped = False
        for i in range(a, b + 1):
            line = lines[i - 1] if i - 1 < len(lines) else ""
            line = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + "... (line truncated to 2000 chars)"
            row = f"{i}: {line}"
            if size + len(row.encode()) + 1 > self.CAP:
                capped = True
                break
            rows.append(row)
            size += len(row.encode()) + 1
            last = i
        if capped:
            foot = f"(Output capped at 50 KB. Showing lines {a}-{last}. Use offset={last + 1} to continue.)"
        elif last < n:
            foot = f"(Showing lines {a}-{last} of {n}. Use offset={last + 1} to continue.)"
        else:
            foot = f"(End of file - total {n} lines)"
        out = f"<path>{tool_input['filePath']}</path>\n<type>file</type>\n<content>\n" + "\n".join(rows) + f"\n\n{foot}\n</content>"
        got = "\n".join(r.split(": ", 1)[1] for r in rows)
        exact = "\n".join(text.split("\n")[a - 1:last])
        self.delivered_span = (a, last) if capped and last >= a else None
        seen = got if got == exact and last >= a else None
        response = {"title": tool_input["filePath"], "output": out,
                    "metadata": {"preview": got[:200], "truncated": last < n, "loaded": []}}
        return response, out, seen, False

    def render_shell(self, command, stdout):
        big = stdout.count("\n") > 2000 or len(stdout.encode()) > 51200
        if big:
            out = "...output truncated...\n" + stdout[-2000:]
            return {"title": command, "output": out, "metadata": {"output": out, "exit": 0, "truncated": True,
                                                                   "outputPath": "~/.local/share/opencode/tool-output/tool_1"}}, out
        return {"title": command, "output": stdout, "metadata": {"output": stdout, "exit": 0, "truncated": False}}, stdout

    def shell_seen(self, stdout):
        big = stdout.count("\n") > 2000 or len(stdout.encode()) > 51200
        return ("...output truncated...\n" + stdout[-2000:]) if big else stdout

    def pre_payload(self, host, conv, sub, cwd, tool, tool_input, call):
        return "tool.execute.before", {"input": {"tool": tool, "sessionID": sub or conv, "callID": call},
                                       "output": {"args": dict(tool_input)}, "cwd": cwd, "hook_event_name": "tool.execute.before"}

    def post_payload(self, host, conv, sub, cwd, tool, tool_input, call, response):
        return "tool.execute.after", {"input": {"tool": tool, "sessionID": sub or conv, "callID": call, "args": dict(tool_input)},
                                      "output": response, "cwd": cwd, "hook_event_name": "tool.execute.after"}

    def hook_payload(self, meaning, conv, sub, cwd, extra):
        # a subagent is a child session of its own (the `task` tool): created with its parent's id
        session = sub or conv
        if meaning in ("start", "sub_start"):
            info = {"id": session, "directory": cwd, "title": "work"}
            if sub:
                info["parentID"] = conv
            return "session.created", {"event": {"type": "session.created", "properties": {"info": info}},
                                       "cwd": cwd, "hook_event_name": "session.created"}
        if meaning == "prompt":
            return "chat.message", {"input": {"sessionID": session}, "output": {"parts": [{"type": "text", "text": "work"}]},
                                    "cwd": cwd, "hook_event_name": "chat.message"}
        if meaning in ("stop", "sub_stop"):
            return "session.idle", {"event": {"type": "session.idle", "properties": {"sessionID": session}},
                                    "cwd": cwd, "hook_event_name": "session.idle"}
        if meaning == "compact":
            return "experimental.session.compacting", {"input": {"sessionID": session}, "cwd": cwd,
                                                       "hook_event_name": "experimental.session.compacting"}
        return None


# -- CodeBuddy Code 2.117.0 ---------------------------------------------------------------------
class CodeBuddy(Shape):
    agent, builtin_tool, shell_tool = "codebuddy", "Read", "Bash"
    events = {"start": "SessionStart", "prompt": "UserPromptSubmit", "stop": "Stop", "compact": "PreCompact",
              "sub_start": "SubagentStart", "sub_stop": "SubagentStop", "end": "SessionEnd"}
    DEFAULT = 2000

    def builtin_input(self, path, start, end):
        return offset_limit_input("file_path", path, start, end)

    def window(self, tool_input, text):
        n = nlines(text)
        a = int(tool_input.get("offset") or 1)
        b = min(a + int(tool_input.get("limit") or self.DEFAULT) - 1, n)
        return (a, b) if n and a <= n else None

    def render_builtin(self, host, tool_input, text, delivered):
        a = int(tool_input.get("offset") or 1)
        if "offset" in tool_input or "limit" in tool_input:
            limit = int(tool_input.get("limit") or self.DEFAULT)
            kept = text.splitlines(keepends=True)[a - 1:a - 1 + limit]
            if not kept:  # an offset past the last line: an error, no text
                return {"is_error": True, "tool_error_code": "1008"}, "Error: offset past the end of the file", None, True
            body = "".join(kept)
        else:
            body = "\n".join(text.split("\n")[: self.DEFAULT])
        if delivered is not None:
            body = delivered
        rows = [str(i).rjust(4) + "\u2192" + numbered_cut(x) for i, x in enumerate(body.split("\n"), start=a)]
        out = "\n".join(rows)
        w = self.window(tool_input, text)
        exact = "\n".join(text.split("\n")[w[0] - 1:w[1]]) if w else None
        plain = body[:-1] if body.endswith("\n") else body
        seen = plain if exact is not None and plain == exact and all(len(x) <= MAX_LINE_CHARS for x in body.split("\n")) else None
        return out, out, seen, False

    def render_shell(self, command, stdout):
        # Bash's PostToolUse carries no output: exit code and flags only
        return {"exitCode": 0, "signal": None, "interrupted": False, "sandboxDenied": False, "stderrBytesTruncated": 0,
                "stdoutBytesTruncated": 0, "tool_error_code": "0"}, stdout

    def call_fields(self, call):
        return {"call_id": call, "tool_use_id": call, "agent_type": "cli", "permission_mode": "bypassPermissions",
                "client": "CLI", "version": "2.117.0"}

    def shell_input(self, command):
        return {"command": command, "description": "read"}


# -- Factory Droid 0.215.0 ----------------------------------------------------------------------
class Droid(Shape):
    agent, builtin_tool, shell_tool = "droid", "Read", "Execute"
    events = {"start": "SessionStart", "prompt": "UserPromptSubmit", "stop": "Stop", "compact": "PreCompact",
              "end": "SessionEnd"}
    DEFAULT, CUT = 2400, 60_000
    EXIT_0 = "\n\n[Process exited with code 0]"

    def builtin_input(self, path, start, end):
        return offset_limit_input("file_path", path, start, end)

    def shell_input(self, command):
        return {"command": command, "summary": "show", "riskLevel": {"value": "low", "reason": "reads"}}

    def _span(self, tool_input, text):
        p = pieces(text)
        a = int(tool_input.get("offset") or 1)
        if a < 0:  # a negative offset reads the last pieces
            a = max(1, len(p) + a + 1)
        b = min(a - 1 + int(tool_input.get("limit") or self.DEFAULT), len(p))
        return p, a, b


    def render_builtin(self, host, tool_input, text, delivered):
        p, a, b = self._span(tool_input, text)
        body = "\n".join(p[a - 1:b]) if delivered is None else delivered
        cut = len(body) > self.CUT
        if cut:
            body = body[: self.CUT]
        if a == 1 and b == len(p) and not cut:
            out = body
        else:
            note = ", truncated to 60k characters" if cut else ""
            out = body + f"\n\n<system-reminder>[Showing lines {a}-{b} of {len(p)} total lines{note}]</system-reminder>"
        exact = "\n".join(p[a - 1:b])
        seen = body if body == exact and not cut else None
        return out, out, seen, False

    def render_shell(self, command, stdout):
        if len(stdout) > 8000:
            stdout = stdout[:4000] + "\n\n... [output truncated] ...\n\n" + stdout[-4000:]
        out = stdout + self.EXIT_0
        return out, out

    def shell_seen(self, stdout):
        return stdout if len(stdout) <= 8000 else stdout[:4000] + "\n\n... [output truncated] ...\n\n" + stdout[-4000:]

    def transcript(self, conv):
        path = os.path.join(self.eng.base, "droid-sessions", f"{conv}.jsonl")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def _write(self, conv, message: dict) -> None:
        with open(self.transcript(conv), "a", encoding="utf-8") as f:
            f.write(json.dumps({"type": "message", "id": f"m{self.eng.calls}", "message": message}) + "\n")

    def pre_payload(self, host, conv, sub, cwd, tool, tool_input, call):
        if not host.state.get("droid_no_transcript") and not host.state.get("droid_late_transcript"):
            ids = [call, call + "-twin"] if host.state.get("twin") else [call]
            self._write(conv, {"role": "assistant", "content": [{"type": "tool_use", "id": i, "name": tool, "input": tool_input}
                                                                for i in ids]})
        return "PreToolUse", dict(self.base(conv, sub, cwd), permission_mode="auto-low", hook_event_name="PreToolUse",
                                  tool_name=tool, tool_input=dict(tool_input))

    def post_payload(self, host, conv, sub, cwd, tool, tool_input, call, response):
        if host.state.get("droid_late_transcript"):  # the call reached the transcript after its pre-tool hook gave up
            self._write(conv, {"role": "assistant", "content": [{"type": "tool_use", "id": call, "name": tool, "input": tool_input}]})
        return "PostToolUse", dict(self.base(conv, sub, cwd), permission_mode="auto-low", hook_event_name="PostToolUse",
                                   tool_name=tool, tool_input=dict(tool_input), tool_response=response)

    def after_call(self, host, conv, sub, tool, tool_input, call, ran):
        if not host.state.get("droid_no_transcript") and not (host.state.get("droid_late_transcript") and not ran):
            self._write(conv, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": "…"}]})

    def sub_fields(self, sub):
        return {}


SHAPES = {cls.agent: cls for cls in (Gemini, Qwen, Copilot, OpenCode, CodeBuddy, Droid)}
