// leanctx plugin for Amp: written by `leanctx init --agent amp`, removed by `leanctx uninstall`.
// @MARK@
//
// Amp runs no hook commands: this plugin runs leanctx's hook command on Amp's plugin events with
// the event's data as JSON on stdin (Amp's thread id as the session id, the workspace root, the
// prompt, the tool call with Amp's id for it). Amp's MCP client sends ctx_read no id for the call,
// so the plugin hands it the id its read gate noted, as the argument leanctx_call_id.
// Fail-open: a missing leanctx, an error or a slow hook never stops or delays Amp for long; only
// the multi-user guard (--guard) refuses a tool call. Nothing here writes to stdout: Amp talks to
// this process over it.
import { spawn } from "node:child_process";

const HOOKS = @HOOKS@;
const TIMEOUT_MS = @TIMEOUT_MS@;
const READS_ONLY = @READS_ONLY@; // no guard: tool.call runs the hook for ctx_read only
const CALL_ID_ARG = @CALL_ID_ARG@;
const PAGE = 20; // the most messages Amp's thread.messages() returns at once
const MAX_PAGES = 500; // a longer thread: its view is not read, and the read counts as after a loss
const MAX_THREADS = 1000;

@HOOK_RUNNER@

function isReadTool(name) {
  return typeof name === "string" && name.startsWith("mcp__") && name.endsWith("__ctx_read");
}

function workspace(amp) {
  try {
    const uri = amp.system && amp.system.workspaceRoot;
    if (!uri) return undefined;
    const path = amp.helpers && amp.helpers.filePathFromURI ? amp.helpers.filePathFromURI(uri) : undefined;
    return typeof path === "string" && path.startsWith("/") ? path : undefined;
  } catch (e) {
    return undefined;
  }
}

// The ids of the messages the thread's next model request sees, in order (after a compaction its
// summary first), or null when they cannot all be read.
async function view(thread) {
  try {
    const ids = [];
    for (let page = 0; page < MAX_PAGES; page++) {
      const got = await thread.messages({ from: "start", offset: page * PAGE, limit: PAGE });
      if (!Array.isArray(got)) return null;
      for (const m of got) {
        if (!m || (typeof m.id !== "string" && typeof m.id !== "number")) return null;
        ids.push(JSON.stringify(m.id));
      }
      if (got.length < PAGE) return ids;
    }
  } catch (e) {}
  return null;
}

export default function (amp) {
  const root = workspace(amp);
  const seen = new Map(); // thread id -> the view at its previous ctx_read
  const queues = new Map(); // thread id -> its hooks, one after the other, in the order Amp fired them

  function serial(id, job) {
    const before = queues.get(id) || Promise.resolve();
    const next = before.then(job, job);
    const tail = next.catch(() => {});
    queues.set(id, tail);
    tail.then(() => { if (queues.get(id) === tail) queues.delete(id); });
    return next;
  }

  async function fire(name, id, body) {
    try {
      const command = HOOKS[name];
      if (typeof command !== "string" || typeof id !== "string" || !id) return {};
      const payload = { hook_event_name: name, session_id: id, ...body };
      if (root) payload.cwd = root;
      return answer(await run(command, payload));
    } catch (e) {
      return {};
    }
  }

  // Amp compacts a thread and lets the user edit an earlier message without a plugin event: what
  // the model saw at the previous read must still open its view, or the context lost something.
  async function checkView(id, ctx) {
    const now = ctx && ctx.thread ? await view(ctx.thread) : null;
    const before = seen.get(id);
    const kept = now !== null && before !== undefined && before.length <= now.length && before.every((m, i) => m === now[i]);
    // a thread this process has not seen yet (a new one, or Amp reloaded its plugins) counts as
    // after a loss too: what its record holds may predate a compaction nobody compared
    if (!kept) await fire("context.lost", id, {});
    if (seen.size >= MAX_THREADS && !seen.has(id)) seen.clear();
    if (now === null) seen.delete(id);
    else seen.set(id, now);
  }

  const threadOf = (event) => (event && event.thread && typeof event.thread.id === "string" ? event.thread.id : undefined);

  amp.on("session.start", async (event) => {
    const id = threadOf(event);
    await serial(id, () => fire("session.start", id, { source: "startup" }));
  });

  amp.on("agent.start", async (event) => {
    const id = threadOf(event);
    const value = await serial(id, () => fire("agent.start", id, {
      prompt: typeof event.message === "string" ? event.message : "",
      message_id: typeof event.id === "string" || typeof event.id === "number" ? String(event.id) : undefined,
    }));
    // the bot profile's thread or answer line: appended to the user's message, not shown
    if (value && typeof value.context === "string" && value.context) return { message: { content: value.context, display: false } };
    return {};
  });

  amp.on("agent.end", async (event) => {
    const id = threadOf(event);
    const reply = event && event.status === "done" ? lastReply(event.messages) : undefined;
    await serial(id, () => fire("agent.end", id, { last_assistant_message: reply }));
  });

  amp.on("tool.call", async (event, ctx) => {
    let input = null; // a ctx_read call's arguments without the model's own leanctx_call_id
    try {
      if (!event || typeof HOOKS["tool.call"] !== "string") return { action: "allow" };
      const read = isReadTool(event.tool);
      if (read) {
        input = event.input && typeof event.input === "object" && !Array.isArray(event.input) ? { ...event.input } : {};
        delete input[CALL_ID_ARG];
      }
      if (READS_ONLY && !read) return { action: "allow" };
      const id = threadOf(event);
      const call = typeof event.toolUseID === "string" && event.toolUseID ? event.toolUseID : undefined;
      const value = await serial(id, async () => {
        if (read && id) await checkView(id, ctx);
        return fire("tool.call", id, { tool_name: event.tool, tool_input: read ? input : event.input, tool_use_id: call });
      });
      if (value && value.decision === "deny" && typeof value.reason === "string") {
        return { action: "reject-and-continue", message: value.reason };
      }
      if (!read) return { action: "allow" };
      if (call && id) input[CALL_ID_ARG] = call;
      return { action: "modify", input };
    } catch (e) {
      return input ? { action: "modify", input } : { action: "allow" };
    }
  });
}
