// Test-only OpenClaw plugin: appends each observed hook event, with its context, to the JSONL
// file named by the plugin config `out`, so an end-to-end test can see which session keys, session
// ids and message ids the gateway hands to plugins. Observation only: every handler returns nothing.
import { appendFileSync } from "node:fs";

const HOOKS = [
  "session_start", "session_end", "before_reset", "message_received", "before_dispatch",
  "before_prompt_build", "llm_input", "llm_output", "agent_end", "message_sending", "message_sent",
  "before_compaction", "after_compaction", "gateway_start", "gateway_stop", "before_tool_call", "after_tool_call",
];

function summarize(value, depth = 0) {
  if (value === null || value === undefined) return value ?? null;
  if (typeof value === "string") return value.length > 400 ? value.slice(0, 400) + `…(${value.length})` : value;
  if (typeof value !== "object") return typeof value === "function" ? "[function]" : value;
  if (depth >= 3) return Array.isArray(value) ? `[array ${value.length}]` : "[object]";
  if (Array.isArray(value)) {
    return { length: value.length, roles: value.map((m) => (m && typeof m === "object" ? m.role ?? m.type ?? null : typeof m)),
             last: value.length ? summarize(value[value.length - 1], depth + 1) : null };
  }
  const out = {};
  for (const [k, v] of Object.entries(value)) out[k] = summarize(v, depth + 1);
  return out;
}

export default {
  id: "leanctx-e2e-probe",
  name: "leanctx e2e hook probe",
  description: "Appends every observed hook event to a JSONL file.",
  register(api) {
    const out = api.pluginConfig?.out;
    if (!out) return;
    for (const hook of HOOKS) {
      api.on(hook, (event, ctx) => {
        try {
          appendFileSync(out, JSON.stringify({ hook, pid: process.pid, at: Date.now(),
                                               ctx: summarize(ctx), event: summarize(event) }) + "\n");
        } catch {
          // a probe never disturbs the gateway
        }
      });
    }
  },
};
