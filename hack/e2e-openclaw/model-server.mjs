#!/usr/bin/env node
// A scripted OpenAI-compatible chat-completions server on loopback for the
// OpenClaw end-to-end test. It replays a fixed script: the last user message
// names a scene with a "[scene:NAME]" marker, and the number of assistant
// messages after that user message selects the scene's next step. So it is
// stateless, deterministic, and the same turn always gets the same replies.
//
//   node model-server.mjs --script script.json --port-file FILE [--log FILE]
//
// script.json: {"scenes": {"NAME": [step, ...]}}, where a step is
//   {"tool": "exec", "args": {"command": "..."}}      one tool call, or
//   {"text": "..."}                                  a final answer.
// Every request is appended to --log as one JSON line (the system prompt's
// hash, with --log-system its text, the tools offered, the tool results sent
// back and the step served) so the test can assert on what the model really
// received.
import { createServer } from "node:http";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync, appendFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    script: { type: "string" },
    "port-file": { type: "string" },
    log: { type: "string" },
    "log-system": { type: "boolean" },
  },
  strict: true,
});
if (!opts.script || !opts["port-file"]) {
  console.error("model-server: --script and --port-file are required");
  process.exit(1);
}
const script = JSON.parse(readFileSync(opts.script, "utf8"));

/** @param {unknown} content */
function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((p) => (p && typeof p === "object" && "text" in p ? String(p.text) : "")).join("");
  }
  return "";
}

/**
 * Picks the step for a request: the scene named by the last user message
 * with a marker, indexed by the assistant messages that follow it.
 * @param {Array<{role: string, content?: unknown}>} messages
 */
function pickStep(scenes, messages) {
  // OpenClaw sends its runtime context as a second user message after the
  // user's own, so the scene is named by the last user message carrying a
  // marker.
  let at = -1;
  let m = null;
  for (let i = messages.length - 1; i >= 0 && !m; i--) {
    if (messages[i].role !== "user") continue;
    m = /\[scene:([a-z0-9-]+)\]/.exec(textOf(messages[i].content));
    at = i;
  }
  if (!m) throw new Error("no user message names a scene");
  const steps = scenes[m[1]];
  if (!steps) throw new Error(`unknown scene ${m[1]}`);
  const n = messages.slice(at + 1).filter((x) => x.role === "assistant").length;
  if (n >= steps.length) throw new Error(`scene ${m[1]} has no step ${n}`);
  return { scene: m[1], index: n, at, step: steps[n] };
}

const sha = (s) => createHash("sha256").update(s, "utf8").digest("base64url");

function completion(model, step, id) {
  if (step.tool) {
    return {
      message: {
        role: "assistant",
        content: null,
        tool_calls: [{ id, type: "function", function: { name: step.tool, arguments: JSON.stringify(step.args ?? {}) } }],
      },
      finish: "tool_calls",
    };
  }
  return { message: { role: "assistant", content: String(step.text) }, finish: "stop" };
}

let seq = 0;
const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const fail = (code, msg) => {
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: msg, type: "invalid_request_error" } }));
    };
    if (req.method === "GET" && req.url?.endsWith("/models")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "scripted", object: "model", owned_by: "clawea-e2e" }] }));
      return;
    }
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) return fail(404, "not found");
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return fail(400, "bad json");
    }
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const system = messages.filter((m) => m.role === "system" || m.role === "developer").map((m) => textOf(m.content));
    let picked;
    try {
      picked = pickStep(script.scenes, messages);
    } catch (e) {
      if (opts.log) appendFileSync(opts.log, JSON.stringify({ error: String(e.message), roles: messages.map((m) => m.role), last: messages.at(-1) }) + "\n");
      return fail(400, String(e.message));
    }
    const id = `call_${picked.scene}_${picked.index}`;
    const tools = Array.isArray(body.tools) ? body.tools.map((t) => t?.function?.name) : [];
    if (opts.log) {
      appendFileSync(
        opts.log,
        JSON.stringify({
          scene: picked.scene,
          step: picked.index,
          served: picked.step,
          system_hashes_b64u: system.map(sha),
          system_chars: system.map((s) => s.length),
          ...(opts["log-system"] ? { system_texts: system } : {}),
          tools,
          // The tool results the agent sent back (what the model "saw").
          tool_results: messages
            .slice(picked.at + 1)
            .filter((m) => m.role === "tool")
            .map((m) => textOf(m.content)),
        }) + "\n",
      );
    }
    const { message, finish } = completion(body.model, picked.step, id);
    const cid = `chatcmpl-${++seq}`;
    const created = Math.floor(Date.now() / 1000);
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: cid, object: "chat.completion", created, model: body.model, choices: [{ index: 0, message, finish_reason: finish }], usage }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const send = (delta, finish_reason = null, extra = {}) =>
      res.write(`data: ${JSON.stringify({ id: cid, object: "chat.completion.chunk", created, model: body.model, choices: [{ index: 0, delta, finish_reason }], ...extra })}\n\n`);
    if (message.tool_calls) {
      send({ role: "assistant", content: null, tool_calls: message.tool_calls.map((t, i) => ({ index: i, ...t })) });
    } else {
      send({ role: "assistant", content: message.content });
    }
    send({}, finish, { usage });
    res.write("data: [DONE]\n\n");
    res.end();
  });
});
server.listen(0, "127.0.0.1", () => {
  writeFileSync(opts["port-file"], String(server.address().port));
});
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => server.close(() => process.exit(0)));
