#!/usr/bin/env node
// The capture endpoint of docs/spec/recipe-openclaw-release.md section 3: an
// OpenAI-compatible chat-completions server on loopback that records the
// FIRST request OpenClaw sends (its system message and tool definitions,
// exactly as they went on the wire) and answers every request with one
// final text and no tool call, so no model runs and no tool runs.
//
//   node capture-server.mjs --out request.json --port-file FILE
//
// The request body is written verbatim (the exact bytes received); packctl
// capture-openclaw turns it into a capture file.
import { createServer } from "node:http";
import { writeFileSync, existsSync } from "node:fs";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: { out: { type: "string" }, "port-file": { type: "string" } },
  strict: true,
});
if (!opts.out || !opts["port-file"]) {
  console.error("capture-server: --out and --port-file are required");
  process.exit(1);
}
const MAX = 32 << 20;
const server = createServer((req, res) => {
  const chunks = [];
  let n = 0;
  req.on("data", (c) => {
    n += c.length;
    if (n > MAX) req.destroy();
    else chunks.push(c);
  });
  req.on("end", () => {
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      res.writeHead(404).end();
      return;
    }
    const body = Buffer.concat(chunks);
    let stream = false;
    try {
      stream = JSON.parse(body.toString("utf8")).stream === true;
    } catch {
      res.writeHead(400).end();
      return;
    }
    // Only the first request is the capture; "wx" never overwrites it.
    if (!existsSync(opts.out)) {
      try {
        writeFileSync(opts.out, body, { flag: "wx", mode: 0o600 });
      } catch (e) {
        if (/** @type {any} */ (e).code !== "EEXIST") throw e;
      }
    }
    const text = "capture recorded; no model ran";
    const id = "chatcmpl-capture";
    if (stream) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (delta, finish) =>
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model: "capture", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: "assistant", content: text }, null));
      res.write(chunk({}, "stop"));
      res.end("data: [DONE]\n\n");
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ id, object: "chat.completion", created: 0, model: "capture", choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }], usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 } }));
  });
});
server.listen(0, "127.0.0.1", () => {
  writeFileSync(opts["port-file"], String(/** @type {any} */ (server.address()).port));
});
