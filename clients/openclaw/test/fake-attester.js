// A fake of the attester's control API v3 on a unix socket, for the
// controller's tests. It checks what a real attester checks at the door
// (capability, content type), signs its answers as the attester does
// (attester-api section 8) and records every request. Its attack options
// make it answer as a relay in front of the attester would.
import { createServer } from "node:http";
import { randomBytes, createHash, generateKeyPairSync, createPublicKey, sign } from "node:crypto";
import { didKeyFromEd25519 } from "../src/didkey.js";
import { ANSWER_LABEL, selfProcess } from "../src/answer.js";
import { jcs } from "../src/hash.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventHash, signEnvelope } from "../src/poh.js";
import { sseReply } from "./upstream.js";

const sha = (/** @type {string|Buffer} */ b) => createHash("sha256").update(b).digest("base64url");

/** A fresh Ed25519 key and its did:key. */
export function newKey() {
  const { privateKey } = generateKeyPairSync("ed25519");
  const raw = Buffer.from(/** @type {string} */ (createPublicKey(privateKey).export({ format: "jwk" }).x), "base64url");
  return { key: privateKey, did: didKeyFromEd25519(raw) };
}

/**
 * Attack options (op: "create", "prompt", "turns", "verify", "tool-calls",
 * "attestation"): unsignedOp answers that op without signature headers;
 * signer signs every answer with another key (its statement names that
 * key's DID); flipOp changes that op's body after signing (a deny becomes an
 * allow, a non-owner an owner); peerPid signs for another process;
 * replayOp answers that op's second request with its first answer; skipSeq
 * uses one sequence number without sending its answer (before that op).
 *
 * The model gateway (POST /v1/runs/{id}/model/{provider}/{api}) answers each
 * request as model-gateway.md section 2 says: upstream(api, body)'s steps
 * (default: a text answer) as an event stream, the receipt and the signed
 * answer in its trailers. Its attack options: gatewayStatus refuses every
 * model request with that status, as the gateway's rules do;
 * upstreamStatus relays an upstream error with that status; receipt
 * "missing" | "signer" | "signature" | "request" | "response" | "run" |
 * "event" | "model" withholds or falsifies the receipt; cutStream ends the
 * stream inside an event ("trailer": with the gateway's error trailer);
 * unsignedOp "model" leaves out the signed answer; hangMs waits that long
 * before answering.
 * @param {{prompt?: string, servedPrompt?: string, headerHash?: string,
 *   decide?: (tool: string, params: any) => {allow: boolean, stage?: string, reason?: string, params_hash_b64u?: string},
 *   owners?: string[], failToolCalls?: boolean, unsignedOp?: string, signer?: {key: any, did: string},
 *   flipOp?: string, peerPid?: number, replayOp?: string, skipSeq?: string,
 *   upstream?: (api: string, body: any) => Array<{text?: string, tool?: string, args?: any}>,
 *   gatewayStatus?: number, upstreamStatus?: number, receipt?: string, cutStream?: boolean | "trailer", hangMs?: number}} [o]
 */
export async function startFake(o = {}) {
  const attester = newKey();
  const signer = o.signer ?? attester;
  const self = selfProcess();
  let seq = 0;
  /** @type {Map<string, {headers: any, body: Buffer}>} */
  const firstAnswer = new Map();
  /**
   * The signature headers of an answer.
   * @param {string} runId @param {number} status @param {string} reqHash @param {Buffer} body
   */
  const signAnswer = (runId, status, reqHash, body) => {
    const st = {
      answer_version: "1", attester_did: signer.did, peer_pid: o.peerPid ?? self.pid, peer_start_time: self.startTime,
      request_hash_b64u: reqHash, response_hash_b64u: sha(body), run_id: runId, seq: ++seq, status,
    };
    const bytes = Buffer.from(jcs(st), "utf8");
    const sig = sign(null, Buffer.concat([Buffer.from(ANSWER_LABEL), Buffer.of(0), bytes]), signer.key);
    return { "clawea-answer-statement": bytes.toString("base64url"), "clawea-answer-signature": sig.toString("base64url") };
  };
  const prompt = o.prompt ?? "You are the attested agent.\nFollow the rules.";
  const cap = "clawea-cap-v1." + randomBytes(32).toString("base64url");
  const reportHash = sha("report");
  const runId = "run_fake_1";
  const pcPayload = sha("pc");
  const pc = { event_id: "evt_pc", run_id: runId, event_type: "prompt_committed", timestamp: "2026-01-01T00:00:00.000Z", payload_hash_b64u: pcPayload, prev_hash_b64u: null };
  const promptCommitted = { ...pc, event_hash_b64u: eventHash(pc) };
  /** @type {any[]} */
  const requests = [];
  /** @type {Array<{provider: string, api: string, turnId: string, eventHash: string, llmCall: any, raw: Buffer, receipt: any}>} */
  const modelCalls = [];
  /** @type {Set<any>} */
  const hanging = new Set();
  /**
   * The gateway's answer to one model request (model-gateway.md section 2):
   * an unsigned refusal, or the upstream's answer relayed with the receipt
   * and, for a 2xx, the signed answer in its trailers.
   * @param {any} req @param {any} res @param {string} provider @param {string} gwApi @param {Buffer} raw @param {string} reqHash
   */
  const gateway = (req, res, provider, gwApi, raw, reqHash) => {
    const refuse = (/** @type {number} */ code, /** @type {string} */ reason, /** @type {string} */ error) => {
      const bytes = Buffer.from(JSON.stringify({ error, reason }));
      res.writeHead(code, { "content-type": "application/json", "content-length": String(bytes.length) });
      res.end(bytes);
    };
    const api = { "openai-chat-completions": "openai-completions", "anthropic-messages": "anthropic-messages" }[gwApi];
    if (!api) return refuse(403, "GATEWAY_UPSTREAM_UNKNOWN", "no such upstream");
    if (!current || req.headers["clawea-turn-id"] !== current.turn_id) return refuse(409, "GATEWAY_TURN_STALE", "not the current turn");
    /** @type {any} */
    let call;
    try {
      call = JSON.parse(Buffer.from(String(req.headers["clawea-llm-call"] ?? ""), "base64url").toString("utf8"));
    } catch {
      return refuse(400, "GATEWAY_LLM_CALL_MALFORMED", "the llm_call event is not a strict JSON object");
    }
    if (!call || Object.keys(call).join() !== "event_id,timestamp,prev_hash_b64u,payload") return refuse(400, "GATEWAY_LLM_CALL_MALFORMED", "members");
    const ev = eventHash({
      event_id: call.event_id, run_id: runId, event_type: "llm_call", timestamp: call.timestamp,
      payload_hash_b64u: sha(JSON.stringify(call.payload)), prev_hash_b64u: call.prev_hash_b64u,
    });
    if (o.gatewayStatus) return refuse(o.gatewayStatus, "GATEWAY_SYSTEM_MISMATCH", "the system text is not the attested prompt");
    const body = JSON.parse(raw.toString("utf8"));
    let bytes = o.upstreamStatus
      ? Buffer.from('{"error":{"message":"overloaded"}}')
      : Buffer.from(sseReply(api, body.model, (o.upstream ?? (() => [{ text: "hello from the gateway" }]))(api, body)), "utf8");
    if (o.cutStream) bytes = bytes.subarray(0, bytes.length - 3);
    const status = o.upstreamStatus ?? 200;
    const payload = {
      receipt_version: "1", receipt_id: "rcpt_" + (modelCalls.length + 1), gateway_id: attester.did,
      provider: o.receipt === "model" ? "other" : provider, model: body.model,
      request_hash_b64u: o.receipt === "request" ? sha("other request") : sha(raw),
      response_hash_b64u: o.receipt === "response" ? sha("other response") : sha(bytes),
      tokens_input: 10, tokens_output: 5, latency_ms: 1, timestamp: "2026-01-01T00:00:00.000Z",
      binding: { run_id: o.receipt === "run" ? "run_other" : runId, event_hash_b64u: o.receipt === "event" ? sha("other event") : ev },
    };
    const key = o.receipt === "signer" ? newKey() : signer;
    const env = signEnvelope("gateway_receipt", payload, { did: key.did, sign: (d) => sign(null, Buffer.from(d), key.key) }, new Date(0));
    if (o.receipt === "signature") env.signature_b64u = sign(null, Buffer.from("x"), key.key).toString("base64url");
    modelCalls.push({ provider, api: gwApi, turnId: req.headers["clawea-turn-id"], eventHash: ev, llmCall: call, raw, receipt: env });
    res.writeHead(status, {
      "content-type": o.upstreamStatus ? "application/json" : "text/event-stream",
      trailer: "Clawea-Gateway-Receipt, Clawea-Answer-Statement, Clawea-Answer-Signature, Clawea-Gateway-Error",
    });
    res.write(bytes);
    /** @type {Record<string, string>} */
    const trailers = o.unsignedOp === "model" || status > 299 ? {} : signAnswer(runId, status, reqHash, bytes);
    if (o.receipt !== "missing") trailers["Clawea-Gateway-Receipt"] = Buffer.from(JSON.stringify(env)).toString("base64url");
    if (o.cutStream === "trailer") trailers["Clawea-Gateway-Error"] = "GATEWAY_UPSTREAM_CUT";
    res.addTrailers(trailers);
    res.end();
  };
  let turns = 0;
  /** @type {any} */
  let current = null;
  let closed = false;
  const owners = o.owners ?? ["cli:local"];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const rawBytes = Buffer.concat(chunks);
      const raw = rawBytes.toString("utf8");
      const body = raw ? JSON.parse(raw) : undefined;
      requests.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
      const reqHash = createHash("sha256").update(`${req.method}\n${req.url}\n`).update(rawBytes).digest("base64url");
      const op = req.url === "/v1/runs" ? "create" : (/^\/v1\/runs\/[^/]+\/([a-z-]+)$/.exec(req.url ?? "")?.[1] ?? "");
      const send = (/** @type {number} */ code, /** @type {any} */ v, /** @type {any} */ headers = {}) => {
        res.writeHead(code, { "content-type": "application/json", ...headers });
        res.end(JSON.stringify(v));
      };
      /** A signed answer, as a relay would tamper with it. */
      const sendSigned = (/** @type {number} */ code, /** @type {Buffer} */ bytes, /** @type {any} */ headers) => {
        if (o.skipSeq === op) {
          seq++;
          o.skipSeq = undefined;
        }
        let h = signAnswer(runId, code, reqHash, bytes);
        if (o.unsignedOp === op) h = {};
        if (o.flipOp === op) {
          bytes = Buffer.from(bytes.toString("utf8").replace('"allow":false', '"allow":true').replace('"owner":false', '"owner":true'));
        }
        if (o.replayOp === op) {
          const first = firstAnswer.get(op);
          if (first) ({ headers: h, body: bytes } = first);
          else firstAnswer.set(op, { headers: h, body: bytes });
        }
        res.writeHead(code, { ...headers, ...h });
        res.end(bytes);
      };
      const json = (/** @type {number} */ code, /** @type {any} */ v) =>
        sendSigned(code, Buffer.from(JSON.stringify(v)), { "content-type": "application/json" });
      if (raw && req.headers["content-type"] !== "application/json") return send(415, { error: "content type" });
      const gm = /^\/v1\/runs\/([^/]+)\/model\/([^/]+)\/([^/]+)$/.exec(req.url ?? "");
      if (gm && req.method === "POST") {
        if (req.headers.authorization !== "Bearer " + cap || gm[1] !== runId) return send(403, { error: "not this run" });
        if (closed) return send(410, { error: "closed" });
        if (o.hangMs) {
          const t = setTimeout(() => gateway(req, res, gm[2], gm[3], rawBytes, reqHash), o.hangMs);
          hanging.add(t);
          return;
        }
        return gateway(req, res, gm[2], gm[3], rawBytes, reqHash);
      }
      if (req.method === "POST" && req.url === "/v1/runs") {
        return json(201, {
          run_id: runId, capability: cap, system_prompt_hash_b64u: sha(Buffer.from(prompt)), system_prompt_chars: prompt.length,
          report_hash_b64u: body.report_hash_b64u, pack_id: "pack", prompt_pack_ciphertext_hash_b64u: sha("ct"),
          prompt_committed: promptCommitted, gate_policy_hash_b64u: sha("policy"),
        });
      }
      const m = /^\/v1\/runs\/([^/]+)(\/[a-z-]+)?$/.exec(req.url ?? "");
      if (!m) return send(404, { error: "not found" });
      if (!req.headers.authorization?.startsWith("Bearer clawea-cap-v1.")) return send(401, { error: "no capability" });
      if (req.headers.authorization !== "Bearer " + cap || m[1] !== runId) return send(403, { error: "not this run" });
      if (closed) return send(410, { error: "closed" });
      switch (`${req.method} ${m[2] ?? ""}`) {
        case "GET /prompt": {
          const served = Buffer.from(o.servedPrompt ?? prompt);
          return sendSigned(200, served, { "content-type": "text/plain; charset=utf-8", "x-clawea-system-prompt-hash": o.headerHash ?? sha(served) });
        }
        case "POST /turns": {
          turns++;
          current = { turn_id: `turn_${turns}`, owner: owners.includes(`${body.channel}:${body.sender_id}`), verified: false };
          return json(201, { turn_id: current.turn_id, owner: current.owner });
        }
        case "POST /verify":
          if (!current || body.turn_id !== current.turn_id) return send(409, { error: "stale turn" });
          if (!current.owner) return send(403, { error: "verify is an owner-only tool" });
          current.verified = true;
          return json(200, { verified: true, turn_id: current.turn_id });
        case "POST /tool-calls": {
          if (o.failToolCalls) return send(500, { error: "internal" });
          if (!current || body.turn_id !== current.turn_id) return send(409, { error: "stale turn" });
          const d = o.decide ? o.decide(body.tool, body.params) : { allow: current.verified || body.tool !== "exec", stage: "verification_gate", reason: "call verify first" };
          return json(200, { allow: d.allow, stage: d.stage ?? "", reason: d.allow ? "" : d.reason, tool: body.tool, params_hash_b64u: d.params_hash_b64u ?? sha(JSON.stringify(body.params)), audit_seq: requests.length });
        }
        case "POST /attestation":
          if (JSON.stringify(body.bundle.payload.event_chain[0]) !== JSON.stringify(promptCommitted)) return send(422, { error: "chain does not start with prompt_committed" });
          return json(200, { attestation: { envelope_type: "execution_attestation" }, evidence_jws: "a.b.c" });
        case "GET /audit":
          res.writeHead(200, { "content-type": "application/x-ndjson", "x-clawea-audit-root": sha("root"), "x-clawea-audit-count": "1" });
          return res.end('{"seq":0}\n');
        case "DELETE ":
          closed = true;
          res.writeHead(204);
          return res.end();
      }
      return send(405, { error: "method" });
    });
  });
  const dir = mkdtempSync(join(tmpdir(), "clawea-fake-"));
  const socket = join(dir, "control.sock");
  await new Promise((r) => server.listen(socket, () => r(undefined)));
  return {
    socket, dir, cap, prompt, reportHash, promptCommitted, requests, modelCalls, did: attester.did,
    isClosed: () => closed,
    close: () =>
      new Promise((r) => {
        for (const t of hanging) clearTimeout(t);
        server.closeAllConnections();
        server.close(() => {
          rmSync(dir, { recursive: true, force: true });
          r(undefined);
        });
      }),
  };
}
