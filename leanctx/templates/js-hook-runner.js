function run(command, payload) {
  return new Promise((resolve) => {
    let out = "";
    let done = false;
    let child = null;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(out);
    };
    const timer = setTimeout(() => {
      try { if (child) child.kill("SIGKILL"); } catch (e) {}
      out = "";
      finish();
    }, TIMEOUT_MS);
    try {
      child = spawn("/bin/sh", ["-c", command], { stdio: ["pipe", "pipe", "ignore"] });
      child.on("error", finish);
      child.on("close", finish);
      child.stdout.on("data", (d) => { if (out.length < 1000000) out += d; });
      child.stdin.on("error", () => {});
      child.stdin.end(JSON.stringify(payload));
    } catch (e) {
      finish();
    }
  });
}

function answer(text) {
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch (e) {
    return {};
  }
}

// The text of the last assistant message in a host's message list (content as a string or as
// text parts): the reply the bot profile records.
function lastReply(messages) {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i];
    if (!m || m.role !== "assistant") continue;
    if (typeof m.content === "string") return m.content;
    if (Array.isArray(m.content)) {
      const parts = m.content.filter((p) => p && p.type === "text" && typeof p.text === "string").map((p) => p.text);
      if (parts.length) return parts.join("\n");
    }
    return undefined;
  }
  return undefined;
}
