#!/usr/bin/env node
// The operator's external tool verifier for the OpenClaw end-to-end test, on
// loopback: it checks the gate's HMAC over the raw body (header
// X-OpenClaw-Signature: sha256=<hex>) and denies destructive commands.
//   node webhook.mjs --secret-file FILE --port-file FILE
import { createServer } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({ options: { "secret-file": { type: "string" }, "port-file": { type: "string" } }, strict: true });
if (!opts["secret-file"] || !opts["port-file"]) {
  console.error("webhook: --secret-file and --port-file are required");
  process.exit(1);
}
const secret = readFileSync(opts["secret-file"], "utf8").trim();

const server = createServer((req, res) => {
  const chunks = [];
  let n = 0;
  req.on("data", (c) => {
    n += c.length;
    if (n <= 1 << 20) chunks.push(c);
  });
  req.on("end", () => {
    const reply = (code, v) => {
      res.writeHead(code, { "content-type": "application/json" });
      res.end(JSON.stringify(v));
    };
    if (req.method !== "POST" || n > 1 << 20) return reply(400, { error: "bad request" });
    const body = Buffer.concat(chunks);
    const want = Buffer.from("sha256=" + createHmac("sha256", secret).update(body).digest("hex"));
    const got = Buffer.from(String(req.headers["x-openclaw-signature"] ?? ""));
    if (got.length !== want.length || !timingSafeEqual(got, want)) return reply(401, { error: "bad signature" });
    let tool;
    try {
      tool = JSON.parse(body.toString("utf8")).tool;
    } catch {
      return reply(400, { error: "bad json" });
    }
    // gateway.sh's scene: a verify call carrying this marker is denied, so
    // a denied call's result goes through the model gateway.
    if (tool?.name === "verify" && tool?.params?.message_id === "e2e-denied-by-webhook") {
      return reply(200, { decision: "deny", reason: "this verify call is refused by the operator's verifier" });
    }
    const cmd = typeof tool?.params?.command === "string" ? tool.params.command : "";
    if (/\brm\s+-rf\b/.test(cmd)) return reply(200, { decision: "deny", reason: "destructive command refused by the operator's verifier" });
    return reply(200, { decision: "allow" });
  });
});
server.listen(0, "127.0.0.1", () => writeFileSync(opts["port-file"], String(server.address().port)));
for (const sig of ["SIGTERM", "SIGINT"]) process.on(sig, () => server.close(() => process.exit(0)));
