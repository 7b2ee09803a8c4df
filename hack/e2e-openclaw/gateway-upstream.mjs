#!/usr/bin/env node
// The scripted model provider behind the attester's model gateway in
// make e2e-openclaw (gateway.sh): OpenAI Chat Completions (POST
// /v1/chat/completions) and Anthropic Messages (POST /v1/messages), both
// streaming, on a unix socket only the gateway is configured to dial, and
// only for requests that carry the provider key only the attester holds.
// So an OpenClaw without the plugin has no road to it: no TCP port, no key.
//
//   node gateway-upstream.mjs --script script.json --socket PATH --key-file FILE --log FILE
//
// script.json: {"scenes": {"NAME": [step, ...]}} as model-server.mjs's: the
// last user message with a "[scene:NAME]" marker names the scene, and the
// assistant messages after it select the step ({"text"} or {"tool","args"}).
// Every request is appended to --log as one JSON line: the api, the SHA-256
// of the exact body bytes received (what the gateway's receipt must name),
// the key check, the scene and step served, the SHA-256 of the bytes sent.
import { createServer } from "node:http";
import { createHash } from "node:crypto";
import { readFileSync, appendFileSync, rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { sseReply } from "../../clients/openclaw/test/upstream.js";

const { values: opts } = parseArgs({
  options: { script: { type: "string" }, socket: { type: "string" }, "key-file": { type: "string" }, log: { type: "string" } },
  strict: true,
});
if (!opts.script || !opts.socket || !opts["key-file"] || !opts.log) {
  console.error("gateway-upstream: --script, --socket, --key-file and --log are required");
  process.exit(1);
}
const scenes = JSON.parse(readFileSync(opts.script, "utf8")).scenes;
const key = readFileSync(opts["key-file"], "utf8").trim();
const sha = (/** @type {Buffer | string} */ b) => createHash("sha256").update(b).digest("base64url");

/** The text of a message's content: a string, or its text parts. */
function textOf(/** @type {unknown} */ content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((p) => (p && typeof p === "object" && p.type === "text" ? String(p.text) : "")).join("");
}

/** The step for a request's messages (see the header). */
function step(/** @type {Array<{role: string, content?: unknown}>} */ messages) {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i].role === "user" ? /\[scene:([a-z0-9-]+)\]/.exec(textOf(messages[i].content)) : null;
    if (!m) continue;
    const steps = scenes[m[1]];
    if (!steps) throw new Error(`unknown scene ${m[1]}`);
    const n = messages.slice(i + 1).filter((x) => x.role === "assistant").length;
    if (n >= steps.length) throw new Error(`scene ${m[1]} has no step ${n}`);
    return { scene: m[1], index: n, step: steps[n] };
  }
  throw new Error("no user message names a scene");
}

const server = createServer((req, res) => {
  /** @type {Buffer[]} */
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks);
    const api = req.url === "/v1/chat/completions" ? "openai-completions" : req.url === "/v1/messages" ? "anthropic-messages" : "";
    const keyOk = api === "openai-completions" ? req.headers.authorization === `Bearer ${key}` : req.headers["x-api-key"] === key;
    /** @type {Record<string, unknown>} */
    const rec = { at: new Date().toISOString(), url: req.url, api, request_sha256_b64u: sha(raw), bytes: raw.length, key_ok: keyOk };
    const fail = (/** @type {number} */ code, /** @type {string} */ msg) => {
      appendFileSync(opts.log, JSON.stringify({ ...rec, status: code, error: msg }) + "\n");
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: msg } }));
    };
    if (req.method !== "POST" || !api) return fail(404, "no such endpoint");
    if (!keyOk) return fail(401, "no valid provider key");
    let body;
    let s;
    try {
      body = JSON.parse(raw.toString("utf8"));
      s = step(body.messages ?? []);
    } catch (e) {
      return fail(400, /** @type {Error} */ (e).message);
    }
    const out = Buffer.from(sseReply(api, body.model, [s.step]), "utf8");
    const system = api === "openai-completions" ? body.messages?.[0]?.content : body.system;
    appendFileSync(opts.log, JSON.stringify({
      ...rec, status: 200, model: body.model, scene: s.scene, step: s.index, response_sha256_b64u: sha(out),
      system_sha256_b64u: typeof system === "string" ? sha(system) : null, messages: (body.messages ?? []).length, tools: (body.tools ?? []).length,
    }) + "\n");
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    // Streamed in small pieces, as a provider does.
    let i = 0;
    const next = () => {
      if (i >= out.length) return res.end();
      res.write(out.subarray(i, i + 256));
      i += 256;
      setImmediate(next);
    };
    next();
  });
});
rmSync(opts.socket, { force: true });
server.listen(opts.socket, () => console.error(`gateway-upstream: listening on ${opts.socket}`));
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => server.close(() => process.exit(0)));
