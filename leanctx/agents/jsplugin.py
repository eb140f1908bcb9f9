"""The JS-plugin family: hosts that run no hook commands but load a JavaScript file of ours into
their own process (Pi's extension, OpenClaw's plugin, Amp's plugin).

The file is a template (`templates/<plugin_template>`) that runs leanctx's hook command on the
host's events with a JSON payload on stdin (the shared runner `templates/js-hook-runner.js`) and
turns the hook's one JSON answer into what the host's API takes: `{"decision": "deny", "reason"}`
refuses a tool call, `{"context": text}` adds to the model's context on the prompt event. What
differs between the hosts is data: the template, the file names, the prompt event, and the extra
placeholders a template needs (`plugin_values`).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import ClassVar

from leanctx import fastjson
from leanctx.agents.base import FileHookAgent, stdout_answer


class JsPluginAgent(FileHookAgent):
    family = "js-plugin"
    hook_file_mode = 0o644
    #: the template in `leanctx/templates/` and the file name it is installed under
    plugin_template: ClassVar[str] = ""
    plugin_file: ClassVar[str] = ""
    #: the event whose answer may add to the model's context (`{"context": text}`)
    prompt_event: ClassVar[str] = ""
    #: the pre-tool event whose answer may refuse the call (`{"decision": "deny", "reason"}`)
    tool_event: ClassVar[str] = ""

    def hook_file_names(self) -> tuple[str, ...]:
        return (self.plugin_file,)

    def plugin_values(self, wired: dict[str, str]) -> dict[str, str]:
        """Placeholders of this host's template beyond the shared ones (JSON-escaped values)."""
        return {}

    def plugin_text(self, wired: dict[str, str], mark: Callable[[dict[str, str]], str]) -> str:
        import json
        from importlib import resources

        from leanctx import templating

        text = resources.files("leanctx").joinpath(f"templates/{self.plugin_template}").read_text(encoding="utf-8")
        values = {"MARK": mark(wired), "TIMEOUT_MS": str(self.timeout * 1000),
                  "HOOKS": json.dumps(wired, indent=2, sort_keys=True, ensure_ascii=True),
                  "HOOK_RUNNER": templating.js_hook_runner(), **self.plugin_values(wired)}
        return templating.fill(text, values, self.plugin_template)

    def hook_files(self, wired: dict[str, str], mark: Callable[[dict[str, str]], str]) -> dict[str, str]:
        return {self.plugin_file: self.plugin_text(wired, mark)}

    def context_output(self, event: str, text: str) -> str:
        return fastjson.dumps({"context": text}) if event == self.prompt_event and text else ""

    def guard_output(self, event: str, reason: str) -> str:
        return fastjson.dumps({"decision": "deny", "reason": reason})

    def check_extra(self, event: str, value: dict) -> bool:
        """A host's own further answers its plugin takes (an object already parsed)."""
        return False

    def check_output(self, event: str, stdout: str) -> str | None:
        value = stdout_answer(stdout)
        if not isinstance(value, dict):
            return value
        if event == self.tool_event and value.get("decision") == "deny" and isinstance(value.get("reason"), str):
            return None
        if event == self.prompt_event and isinstance(value.get("context"), str):
            return None
        if self.check_extra(event, value):
            return None
        return f"not an answer the leanctx plugin takes for {event}: {stdout[:80]!r}"
