// leanctx extension for Pi: written by `leanctx init --agent pi`, removed by `leanctx uninstall`.
// @MARK@
//
// Pi has no MCP client and runs no hook commands, so this extension starts leanctx's MCP server
// itself (a child of the Pi process), offers its ctx_read as a Pi tool, and runs leanctx's hook
// command on Pi's events with the event's data as JSON on stdin: the session id and session file
// Pi itself keeps, the folder, the prompt, the tool call (with Pi's tool call id).
// Fail-open: a missing leanctx, an error or a slow hook never stops or delays Pi for long; only
// the multi-user guard (--guard) and the read cache's answer to a built-in read (Pi's `read`, a
// plain `cat`-like `bash` command: the `[unchanged]` stub and its kin) may refuse a tool call,
// with that text as the tool's result.
import { spawn } from "node:child_process";

const HOOKS = @HOOKS@;
const SERVER = @SERVER@;
const READ_TOOL = @READ_TOOL@;
const TIMEOUT_MS = @TIMEOUT_MS@;
const PRE_READS_ONLY = @PRE_READS_ONLY@; // no guard: the pre-tool hook runs for the readers only
const READ_TOOLS = new Set(@READ_TOOLS@); // the built-in readers the read cache answers and credits
const SHELL_TOOL = @SHELL_TOOL@;
// a shell command can only be a read leanctx names when it starts with one of these programs (a
// superset of leanctx/readers.py's forms): any other command spares the hook's process
const SHELL_READ = /^\s*(cat|nl|head|tail|sed|bash|sh|zsh)\s/;
const MAX_HELD = 1000;
const START_MS = 30000; // the server's start and tools/list, once, while Pi loads its extensions
const CALL_MS = 120000; // one ctx_read: a server that stops answering fails the call, not the session

// Pi runs the tool calls of one model message together: each call's tool_call first, then all of
// them at once. A read refused with a stub while a sibling call changes the file would tell the
// model "unchanged" about a file that changed under it, so a built-in read is answered by the cache
// only when every other call of its message only reads: Pi's read, grep, find, ls, ctx_read, or a
// bash command that is one `cat`/`nl`/`head`/`tail` with no shell operator. Anything else, or a
// message we cannot find, and the read runs (it is still credited after, against the disk).
const READ_ONLY_TOOLS = new Set(["read", "grep", "find", "ls"]);
const PLAIN_SHELL_READ = /^\s*(cat|nl|head|tail)(\s+[^;&|<>`$()\\\n\r]*)?$/;
const MAX_WALK = 64;

function readsOnly(call) {
  if (!call || typeof call.name !== "string") return false;
  if (call.name === READ_TOOL || READ_ONLY_TOOLS.has(call.name)) return true;
  const args = call.arguments;
  return call.name === SHELL_TOOL && !!args && typeof args.command === "string" && PLAIN_SHELL_READ.test(args.command);
}

function alone(ctx, id) {
  try {
    const manager = ctx && ctx.sessionManager;
    let entry = manager && manager.getLeafEntry && manager.getLeafEntry();
    for (let i = 0; entry && i < MAX_WALK; i++) {
      const message = entry.type === "message" ? entry.message : null;
      if (message && message.role === "assistant" && Array.isArray(message.content)) {
        const calls = message.content.filter((c) => c && c.type === "toolCall");
        if (!calls.some((c) => c.id === id)) return false;
        return calls.every((c) => c.id === id || readsOnly(c));
      }
      entry = entry.parentId ? manager.getEntry(entry.parentId) : null;
    }
  } catch (e) {}
  return false;
}

function gated(tool, input) {
  if (!READ_TOOLS.has(tool)) return false;
  if (tool !== SHELL_TOOL) return true;
  return !!input && typeof input.command === "string" && SHELL_READ.test(input.command);
}

// What a tool result hands the model, as the hook reads it: its parts (text kept, anything else by
// type only), whether it is an error, and (bash) whether Pi cut the output.
function response(content, details, isError) {
  const parts = Array.isArray(content) ? content.map((c) => (c && c.type === "text" && typeof c.text === "string"
    ? { type: "text", text: c.text } : { type: String(c && c.type) })) : null;
  const cut = details && typeof details === "object" ? details : {};
  return { content: parts, isError: isError === true ? true : isError === false ? false : null,
    truncated: !!(cut.truncation && cut.truncation.truncated), fullOutputPath: typeof cut.fullOutputPath === "string" ? cut.fullOutputPath : null };
}

@HOOK_RUNNER@

// leanctx's MCP server over stdio (newline-delimited JSON-RPC), started once per Pi process.
function mcpServer() {
  let child = null;
  let buffer = "";
  let nextId = 1;
  const waiting = new Map();
  const failAll = (why) => {
    for (const [, w] of waiting) w.reject(new Error(why));
    waiting.clear();
    child = null;
  };
  function start() {
    child = spawn(SERVER[0], SERVER.slice(1), { stdio: ["pipe", "pipe", "ignore"] });
    child.on("error", () => failAll("leanctx MCP server did not start"));
    child.on("exit", () => failAll("leanctx MCP server exited"));
    child.stdin.on("error", () => {});
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d) => {
      buffer += d;
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        let msg;
        try { msg = JSON.parse(line); } catch (e) { continue; }
        const w = msg && waiting.get(msg.id);
        if (!w) continue;
        waiting.delete(msg.id);
        if (msg.error) w.reject(new Error(msg.error.message || "MCP error"));
        else w.resolve(msg.result);
      }
    });
  }
  function send(obj) {
    if (!child) throw new Error("leanctx MCP server is not running");
    child.stdin.write(JSON.stringify(obj) + "\n");
  }
  function request(method, params, ms) {
    return new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = ms ? setTimeout(() => { waiting.delete(id); reject(new Error(`leanctx MCP ${method} timed out`)); }, ms) : null;
      waiting.set(id, {
        resolve: (v) => { if (timer) clearTimeout(timer); resolve(v); },
        reject: (e) => { if (timer) clearTimeout(timer); reject(e); },
      });
      try { send({ jsonrpc: "2.0", id, method, params }); } catch (e) { waiting.delete(id); if (timer) clearTimeout(timer); reject(e); }
    });
  }
  async function open() {
    start();
    await request("initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "pi-leanctx", version: "1" } }, START_MS);
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    const listed = await request("tools/list", {}, START_MS);
    return (listed && Array.isArray(listed.tools) ? listed.tools : []).find((t) => t && t.name === "ctx_read");
  }
  function stop() {
    try { if (child) child.kill(); } catch (e) {}
  }
  return { open, request, stop };
}

export default async function (pi) {
  let session = { id: undefined, file: undefined };
  const held = new Map(); // toolCallId -> a built-in read's result, until the model is sent it
  const where = (ctx) => (ctx && typeof ctx.cwd === "string" && ctx.cwd) || process.cwd();

  function remember(ctx) {
    try {
      const manager = ctx && ctx.sessionManager;
      if (!manager) return;
      const id = manager.getSessionId && manager.getSessionId();
      const file = manager.getSessionFile && manager.getSessionFile();
      if (typeof id === "string" && id) session = { id, file: typeof file === "string" ? file : undefined };
    } catch (e) {}
  }

  async function fire(name, ctx, body) {
    try {
      const command = HOOKS[name];
      if (typeof command !== "string") return {};
      remember(ctx);
      if (!session.id) return {};
      const payload = { hook_event_name: name, session_id: session.id, cwd: where(ctx), ...body };
      if (session.file) payload.transcript_path = session.file;
      return answer(await run(command, payload));
    } catch (e) {
      return {};
    }
  }

  const server = mcpServer();
  let tool = null;
  try {
    tool = await server.open();
  } catch (e) {
    server.stop();
  }
  if (tool) {
    pi.registerTool({
      name: READ_TOOL,
      label: "ctx_read",
      description: typeof tool.description === "string" ? tool.description : "Read a file through leanctx's read cache",
      promptSnippet: "Read a file through leanctx's cache (an unchanged re-read is a short stub)",
      parameters: tool.inputSchema && typeof tool.inputSchema === "object" ? tool.inputSchema : { type: "object", properties: {} },
      async execute(toolCallId, params, signal, onUpdate, ctx) {
        const result = await server.request("tools/call", { name: "ctx_read", arguments: params || {}, _meta: { "leanctx/callId": toolCallId } }, CALL_MS);
        const content = result && Array.isArray(result.content) ? result.content.filter((c) => c && c.type === "text") : [];
        const text = content.map((c) => c.text).join("\n");
        if (result && result.isError) throw new Error(text || "ctx_read failed");
        return { content: [{ type: "text", text }], details: {} };
      },
    });
  }

  pi.on("session_start", async (event, ctx) => {
    await fire("session_start", ctx, { source: (event && event.reason) || "startup" });
  });
  pi.on("before_agent_start", async (event, ctx) => {
    const value = await fire("before_agent_start", ctx, { prompt: event && typeof event.prompt === "string" ? event.prompt : "" });
    // the bot profile's thread or answer line: a message Pi stores in the session and sends to the model
    if (typeof value.context === "string" && value.context) {
      return { message: { customType: "leanctx", content: value.context, display: false } };
    }
  });
  pi.on("session_before_compact", async (event, ctx) => {
    held.clear(); // what the summariser sees is not what the model holds
    await fire("session_before_compact", ctx, { trigger: "compact" });
  });
  pi.on("session_compact", async (event, ctx) => {
    await fire("session_compact", ctx, {});
  });
  pi.on("session_before_tree", async (event, ctx) => {
    held.clear();
    await fire("session_before_tree", ctx, {});
  });
  pi.on("session_tree", async (event, ctx) => {
    await fire("session_tree", ctx, {});
  });
  pi.on("agent_end", async (event, ctx) => {
    await fire("agent_end", ctx, { last_assistant_message: lastReply(event && event.messages) });
  });
  pi.on("session_shutdown", async (event, ctx) => {
    await fire("session_shutdown", ctx, { reason: event && event.reason });
    // Pi tears this runtime down on every reason (quit, reload, new, resume, fork) and loads the
    // extension again for the next session: that one starts its own server
    server.stop();
  });
  pi.on("tool_call", async (event, ctx) => {
    if (typeof HOOKS["tool_call"] !== "string" || !event) return;
    const builtin = gated(event.toolName, event.input);
    if (PRE_READS_ONLY && event.toolName !== READ_TOOL && !builtin) return;
    // a built-in read beside a call that may write goes without its id: the hook names no call,
    // so the cache does not answer it (the guard, with --guard, still does)
    const id = builtin && !alone(ctx, event.toolCallId) ? undefined : event.toolCallId;
    if (PRE_READS_ONLY && id === undefined && event.toolName !== READ_TOOL) return;
    const value = await fire("tool_call", ctx, { tool_name: event.toolName, tool_input: event.input, tool_use_id: id });
    if (value.decision === "deny" && typeof value.reason === "string") return { block: true, reason: value.reason };
  });
  // A built-in read's result is credited only once it is proven to be what the model is sent:
  // kept here (as the handlers before ours left it), then handed to the hook when the next model
  // request (Pi's `context` event, awaited before it) carries that very result for the call (a
  // handler after ours may change it, a compaction or /tree may drop it: then nothing is credited).
  pi.on("tool_result", async (event, ctx) => {
    try {
      if (typeof HOOKS["tool_result"] !== "string" || !event || !gated(event.toolName, event.input)) return;
      if (typeof event.toolCallId !== "string") return;
      remember(ctx);
      const tool_response = response(event.content, event.details, event.isError);
      if (held.size >= MAX_HELD) held.clear();
      held.set(event.toolCallId, {
        session: session.id,
        tool: event.toolName,
        seen: JSON.stringify([tool_response.content, tool_response.isError]),
        body: { tool_name: event.toolName, tool_input: JSON.parse(JSON.stringify(event.input ?? null)), tool_use_id: event.toolCallId, tool_response },
      });
    } catch (e) {}
  });
  pi.on("context", async (event, ctx) => {
    try {
      if (held.size === 0) return;
      remember(ctx);
      const results = new Map();
      for (const m of (event && Array.isArray(event.messages) ? event.messages : [])) {
        if (m && m.role === "toolResult" && typeof m.toolCallId === "string") results.set(m.toolCallId, m);
      }
      const due = [];
      for (const [id, entry] of held) {
        held.delete(id);
        const m = results.get(id);
        if (!m || entry.session !== session.id || m.toolName !== entry.tool) continue;
        const now = response(m.content, undefined, m.isError);
        if (JSON.stringify([now.content, now.isError]) !== entry.seen) continue;
        due.push(fire("tool_result", ctx, entry.body));
      }
      await Promise.all(due);
    } catch (e) {}
  });
}
