// leanctx plugin for OpenClaw: written by `leanctx init --agent openclaw`, removed by `leanctx uninstall`.
// @MARK@
//
// OpenClaw runs no hook commands: native plugins run inside the gateway. This one runs leanctx's
// hook command on the gateway's events with the event's data as JSON on stdin: the session id
// and session key OpenClaw keeps (one key per person and channel), the person's message and its
// id, the run's final reply, compactions and resets, and tool calls (the multi-user guard with
// --guard, the read gate on leanctx__ctx_read).
// Fail-open: a missing leanctx, an error or a slow hook never stops a turn or delays it for long;
// only the guard may refuse a tool call, with its reason as the tool's result.
import { spawn } from "node:child_process";

const HOOKS = @HOOKS@;
const TIMEOUT_MS = @TIMEOUT_MS@;
const READS_ONLY = @READS_ONLY@; // no guard: the pre-tool hook runs for ctx_read only
const CALL_ID_ARG = "leanctx_call_id"; // the ctx_read argument that carries OpenClaw's id for the call
const KEEP = 2000; // per-key notes kept in memory (message ids, compactions), oldest dropped first

@HOOK_RUNNER@

function text(value) {
  return typeof value === "string" ? value : undefined;
}

function bounded() {
  const map = new Map();
  return {
    get: (k) => map.get(k),
    take: (k) => { const v = map.get(k); map.delete(k); return v; },
    set: (k, v) => {
      map.delete(k);
      map.set(k, v);
      if (map.size > KEEP) map.delete(map.keys().next().value);
    },
  };
}

// OpenClaw registers a plugin more than once in one gateway process (the channel side and the
// agent runtime each get an instance: seen on 2026.9.6), and message_received reaches one while
// before_prompt_build reaches the other; what they share lives on globalThis.
const SHARED = (globalThis.__leanctxOpenClaw ||= {
  inbound: bounded(), // session key -> the channel's id of the message being answered
  compacted: bounded(), // session keys whose next prompt follows a compaction
});
SHARED.chains ||= new Map(); // session key -> the last hook run of that key (see inOrder)

// One key's hooks run one after another, in the order OpenClaw fired them: on `/new` it fires
// session_end, session_start and before_reset for the same session id within milliseconds, and a
// session_end written after the session_start would leave the conversation ended.
function inOrder(key, job) {
  if (!key) return job();
  const chains = SHARED.chains;
  const next = (chains.get(key) || Promise.resolve()).then(job, job);
  const tail = next.then(() => {}, () => {});
  chains.set(key, tail);
  tail.then(() => { if (chains.get(key) === tail) chains.delete(key); });
  return next;
}

export default {
  id: @PLUGIN_ID@,
  name: "leanctx",
  description: "leanctx: per-person conversation state, ids published, read cache gate",
  register(api) {
    const { inbound, compacted } = SHARED;

    async function fire(name, ctx, body) {
      try {
        const command = HOOKS[name];
        if (typeof command !== "string") return {};
        const c = ctx || {};
        const payload = {
          hook_event_name: name,
          session_id: text(c.sessionId),
          session_key: text(c.sessionKey),
          cwd: text(c.workspaceDir) || process.cwd(),
          ...body,
        };
        return answer(await inOrder(payload.session_key || payload.session_id, () => run(command, payload)));
      } catch (e) {
        return {};
      }
    }

    if (HOOKS.session_start) {
      api.on("session_start", async (event, ctx) => {
        const e = event || {};
        await fire("session_start", { ...(ctx || {}), sessionId: e.sessionId, sessionKey: e.sessionKey || (ctx && ctx.sessionKey) },
          { source: e.resumedFrom ? "resume" : "startup" });
      });
    }
    api.on("message_received", (event, ctx) => {
      try {
        const e = event || {};
        const key = text(e.sessionKey) || text(ctx && ctx.sessionKey);
        const id = text(e.messageId);
        const channel = text(ctx && ctx.channelId) || "";
        const chat = text(ctx && ctx.conversationId) || "";
        // "telegram:1001:7": the channel, its chat, the channel's message id (Telegram's ids count per chat)
        const where = chat.startsWith(channel + ":") ? chat : [channel, chat].join(":");
        if (key && id) inbound.set(key, [where, id].join(":"));
      } catch (e) {}
    });
    if (HOOKS.before_prompt_build) {
      api.on("before_prompt_build", async (event, ctx) => {
        const e = event || {};
        const key = text(ctx && ctx.sessionKey);
        const prompt = text(e.currentUserMessage) !== undefined ? e.currentUserMessage : text(e.prompt);
        const value = await fire("before_prompt_build", ctx, {
          prompt,
          message_id: (key && inbound.take(key)) || text(e.currentUserMessageId),
          trigger: text(ctx && ctx.trigger),
          provenance: text(ctx && ctx.inputProvenance && ctx.inputProvenance.kind),
          source: key && compacted.take(key) ? "compact" : undefined,
        });
        if (typeof value.context === "string" && value.context) return { appendContext: value.context };
      });
    }
    if (HOOKS.agent_end) {
      api.on("agent_end", async (event, ctx) => {
        const e = event || {};
        if (!e.success) return;
        await fire("agent_end", ctx, { last_assistant_message: lastReply(e.messages) });
      });
    }
    if (HOOKS.before_compaction) {
      api.on("before_compaction", async (event, ctx) => {
        await fire("before_compaction", ctx, { trigger: "auto", transcript_path: text(event && event.sessionFile) });
      });
    }
    if (HOOKS.after_compaction) {
      api.on("after_compaction", async (event, ctx) => {
        const key = text(ctx && ctx.sessionKey);
        if (key) compacted.set(key, true);
        await fire("after_compaction", ctx, { source: "compact", transcript_path: text(event && event.sessionFile) });
      });
    }
    if (HOOKS.before_reset) {
      api.on("before_reset", async (event, ctx) => {
        await fire("before_reset", ctx, { reason: text(event && event.reason), transcript_path: text(event && event.sessionFile) });
      });
    }
    if (HOOKS.session_end) {
      api.on("session_end", async (event, ctx) => {
        const e = event || {};
        await fire("session_end", { ...(ctx || {}), sessionId: e.sessionId, sessionKey: e.sessionKey || (ctx && ctx.sessionKey) },
          { reason: text(e.reason), transcript_path: text(e.sessionFile) });
      });
    }
    if (HOOKS.subagent_spawned) {
      api.on("subagent_spawned", async (event, ctx) => {
        const e = event || {};
        await fire("subagent_spawned", ctx, { agent_id: text(e.childSessionKey), agent_type: text(e.agentId) || "subagent" });
      });
    }
    if (HOOKS.subagent_ended) {
      api.on("subagent_ended", async (event, ctx) => {
        const e = event || {};
        await fire("subagent_ended", ctx, { agent_id: text(e.targetSessionKey), agent_type: text(e.targetKind) || "subagent" });
      });
    }
    // The bot profile's state tools: OpenClaw hands a tool factory the session's key, so a tool
    // made for one person's session can only ever reach that person's thread.
    if (HOOKS.state_tool && typeof api.registerTool === "function") {
      const tools = [
        ["pending", "leanctx_state_pending", "After asking the person a question you need answered, save it here: their next message is then recorded as the answer, even after a restart.",
          { type: "object", properties: { question: { type: "string" }, options: { type: "array", items: { type: "string" } } }, required: ["question"] }],
        ["clear_pending", "leanctx_state_clear_pending", "The saved question no longer needs an answer.", { type: "object", properties: {} }],
        ["summary", "leanctx_state_summary", "Replace the running summary of this person's thread (one paragraph: what they want, what is settled, what is open).",
          { type: "object", properties: { text: { type: "string" } }, required: ["text"] }],
        ["show", "leanctx_state_show", "This person's kept thread: summary, recent turns, the pending question.", { type: "object", properties: {} }],
      ];
      api.registerTool((ctx) => {
        const key = text(ctx && ctx.sessionKey);
        if (!key) return null;
        return tools.map(([op, name, description, parameters]) => ({
          name,
          label: name,
          description,
          parameters,
          async execute(toolCallId, params) {
            const value = answer(await run(HOOKS.state_tool, {
              hook_event_name: "state_tool", session_key: key, session_id: text(ctx.sessionId),
              cwd: text(ctx.workspaceDir) || process.cwd(), tool_name: op, tool_input: params || {}, tool_use_id: toolCallId,
            }));
            if (typeof value.error === "string") throw new Error(value.error);
            const out = typeof value.text === "string" ? value.text : "leanctx did not answer; nothing was saved";
            return { content: [{ type: "text", text: out }], details: {} };
          },
        }));
      }, { names: tools.map((t) => t[1]) });
    }
    if (HOOKS.before_tool_call) {
      api.on("before_tool_call", async (event, ctx) => {
        const e = event || {};
        if (READS_ONLY && !(typeof e.toolName === "string" && e.toolName.endsWith("__ctx_read"))) return;
        const id = text(e.toolCallId) || text(ctx && ctx.toolCallId);
        const value = await fire("before_tool_call", ctx, { tool_name: e.toolName, tool_input: e.params, tool_use_id: id });
        if (value.decision === "deny" && typeof value.reason === "string") return { block: true, blockReason: value.reason };
        // OpenClaw sends its MCP servers no id for a call: ctx_read gets the call's id as an
        // argument, under which the read gate noted whose conversation makes it (one gateway, many
        // people). Always ours: what the model put there is replaced, or removed when there is no id.
        if (typeof e.toolName === "string" && e.toolName.endsWith("__ctx_read") && e.params && typeof e.params === "object") {
          const params = { ...e.params };
          delete params[CALL_ID_ARG];
          if (id) params[CALL_ID_ARG] = id;
          return { params };
        }
      });
    }
  },
};
