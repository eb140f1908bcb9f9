// leanctx plugin for @HOST@: written by `leanctx init --agent @AGENT@`, removed by `leanctx uninstall`.
// @MARK@
//
// @HOST@ runs no hook commands, only plugins (OpenCode's plugin API), so this plugin runs leanctx's
// hook command for the events below with the event's data as JSON on stdin: the session id, its
// folder, and (bot profile) the prompt.
// Fail-open: a missing leanctx, an error or a slow hook never stops or delays @HOST@ for long;
// only the multi-user guard (--guard) and the read cache's answer to a built-in read (the `read`
// tool, a plain `cat`-like `bash` command: the `[unchanged]` stub and its kin) may refuse a tool
// call, with that text as the tool's result.
import { spawn } from "node:child_process";

const HOOKS = @HOOKS@;
const TIMEOUT_MS = @TIMEOUT_MS@;
const READ_TOOLS = new Set(@READ_TOOLS@); // the built-in readers the read cache answers and credits
const PRE_READS_ONLY = @PRE_READS_ONLY@; // no guard: the pre-tool hook runs for those readers only
const MAX_HELD = 1000;
// a shell command can only be a read leanctx names when it starts with one of these programs (a
// superset of leanctx/readers.py's forms): any other command spares the hook's process
const SHELL_TOOL = @SHELL_TOOL@;
const SHELL_READ = /^\s*(cat|nl|head|tail|sed)\s/;

function gated(tool, args) {
  if (!READ_TOOLS.has(tool)) return false;
  if (tool !== SHELL_TOOL) return true;
  return !!args && typeof args.command === "string" && SHELL_READ.test(args.command);
}

@HOOK_RUNNER@

// Events that say the session's context lost something (wired as compactions). OpenCode does
// not wait for a bus event's plugins, so each such hook is kept as pending for its session, and
// every tool call of that session waits for it first: a ctx_read never runs before leanctx has
// the loss on record.
const LOSSES = new Set(["experimental.session.compacting", "session.compacted", "message.removed",
  "message.part.removed", "message.part.updated"]);
const MAX_PRUNED = 10000;

export const LeanctxPlugin = async (ctx) => {
  const directory = (ctx && typeof ctx.directory === "string" && ctx.directory) || process.cwd();
  const context = new Map(); // sessionID -> what the bot profile hands the model (system prompt)
  const pending = new Map(); // sessionID -> the loss hooks still running
  const pruned = new Set(); // tool parts already reported as cleared
  const held = new Map(); // callID -> a built-in read's result, until the model is sent it

  function lost(sessionID, promise) {
    if (typeof sessionID !== "string") return promise;
    const all = Promise.all([pending.get(sessionID), promise]).then(() => {}, () => {});
    pending.set(sessionID, all);
    all.then(() => { if (pending.get(sessionID) === all) pending.delete(sessionID); });
    return promise;
  }

  async function settled(sessionID) {
    try {
      const all = typeof sessionID === "string" ? pending.get(sessionID) : undefined;
      if (all) await all;
    } catch (e) {}
  }

  // a part update matters only when OpenCode cleared a tool's output (compaction.prune)
  function clearedTool(event) {
    const part = (event.properties || {}).part;
    const time = part && part.type === "tool" && part.state && part.state.time;
    if (!time || !time.compacted || typeof part.id !== "string" || pruned.has(part.id)) return false;
    if (pruned.size >= MAX_PRUNED) pruned.clear();
    pruned.add(part.id);
    return true;
  }

  async function fire(name, body) {
    try {
      const command = HOOKS[name];
      if (typeof command !== "string") return {};
      return answer(await run(command, { hook_event_name: name, cwd: directory, ...body }));
    } catch (e) {
      return {};
    }
  }

  function drop(sessionID) {
    for (const [callID, entry] of held) if (entry.sessionID === sessionID) held.delete(callID);
  }

  function keep(sessionID, value) {
    if (typeof sessionID === "string" && typeof value.additionalContext === "string") {
      context.set(sessionID, value.additionalContext);
    }
  }

  const hooks = {
    event: async (input) => {
      try {
        const event = input && input.event;
        if (!event || typeof HOOKS[event.type] !== "string") return;
        if (event.type === "message.part.updated" && !clearedTool(event)) return;
        const props = event.properties || {};
        const sessionID = props.sessionID || (props.info && props.info.id) || (props.part && props.part.sessionID);
        const answer = fire(event.type, { event });
        keep(sessionID, await (LOSSES.has(event.type) ? lost(sessionID, answer) : answer));
      } catch (e) {}
    },
    "experimental.session.compacting": async (input) => {
      try {
        // OpenCode then runs experimental.chat.messages.transform on the history it summarises:
        // a read still held here would be handed on as if the model kept it, after the
        // compaction was counted. What the summariser saw is not what the model holds.
        drop(input && input.sessionID);
        if (typeof HOOKS["experimental.session.compacting"] !== "string") return;
        await lost(input && input.sessionID, fire("experimental.session.compacting", { input: { sessionID: input && input.sessionID } }));
      } catch (e) {}
    },
    "chat.message": async (input, output) => {
      try {
        if (typeof HOOKS["chat.message"] !== "string") return;
        const parts = Array.isArray(output && output.parts) ? output.parts : [];
        const text = parts.filter((p) => p && p.type === "text" && typeof p.text === "string").map((p) => p.text);
        keep(input && input.sessionID, await fire("chat.message", { input, output: { parts: text.map((t) => ({ type: "text", text: t })) } }));
      } catch (e) {}
    },
    "experimental.chat.system.transform": async (input, output) => {
      try {
        const text = context.get(input && input.sessionID);
        if (text && output && Array.isArray(output.system)) output.system.push(text);
      } catch (e) {}
    },
    "tool.execute.before": async (input, output) => {
      await settled(input && input.sessionID);
      if (typeof HOOKS["tool.execute.before"] !== "string") return;
      if (PRE_READS_ONLY && !(input && gated(input.tool, output && output.args))) return;
      const value = await fire("tool.execute.before", { input, output: { args: output && output.args } });
      if (value.decision === "deny" && typeof value.reason === "string") throw new Error(value.reason);
    },
    // A built-in read's result is credited only once it is proven to be what the model is sent:
    // kept here, then handed to the hook when the next request of its session carries that very
    // text as the call's completed result (a plugin after ours may change it, a compaction may
    // clear it, an abort may drop it: then nothing is credited).
    "tool.execute.after": async (input, output) => {
      try {
        if (typeof HOOKS["tool.execute.after"] !== "string" || !input || !gated(input.tool, input.args)) return;
        if (typeof input.callID !== "string" || typeof input.sessionID !== "string") return;
        if (!output || typeof output.output !== "string") return;
        const meta = output.metadata && typeof output.metadata === "object" ? output.metadata : {};
        if (held.size >= MAX_HELD) held.clear();
        held.set(input.callID, {
          sessionID: input.sessionID,
          tool: input.tool,
          text: output.output,
          payload: {
            input: { tool: input.tool, sessionID: input.sessionID, callID: input.callID, args: input.args },
            output: { output: output.output, metadata: { exit: meta.exit, truncated: meta.truncated, outputPath: meta.outputPath } },
          },
        });
      } catch (e) {}
    },
    "experimental.chat.messages.transform": async (input, output) => {
      try {
        if (held.size === 0) return;
        const messages = output && Array.isArray(output.messages) ? output.messages : [];
        const first = messages.find((m) => m && m.info && typeof m.info.sessionID === "string");
        if (!first) return;
        const sessionID = first.info.sessionID;
        const parts = new Map();
        for (const message of messages) {
          if (!message || !message.info || message.info.sessionID !== sessionID || !Array.isArray(message.parts)) continue;
          for (const part of message.parts) {
            if (part && part.type === "tool" && typeof part.callID === "string") parts.set(part.callID, part);
          }
        }
        const due = [];
        for (const [callID, entry] of held) {
          if (entry.sessionID !== sessionID) continue;
          held.delete(callID);
          const part = parts.get(callID);
          const state = part && part.tool === entry.tool && part.state;
          if (!state || state.status !== "completed" || state.output !== entry.text) continue;
          if (state.time && state.time.compacted) continue;
          due.push(fire("tool.execute.after", entry.payload));
        }
        await Promise.all(due);
      } catch (e) {}
    },
  };
  return hooks;
};
