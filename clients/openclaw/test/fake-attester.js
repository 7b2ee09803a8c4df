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
import { eventHash } from "../src/poh.js";

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
 * @param {{prompt?: string, servedPrompt?: string, headerHash?: string,
 *   decide?: (tool: string, params: any) => {allow: boolean, stage?: string, reason?: string, params_hash_b64u?: string},
 *   owners?: string[], failToolCalls?: boolean, unsignedOp?: string, signer?: {key: any, did: string},
 *   flipOp?: string, peerPid?: number, replayOp?: string, skipSeq?: string}} [o]
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
    socket, dir, cap, prompt, reportHash, promptCommitted, requests, did: attester.did,
    isClosed: () => closed,
    close: () =>
      new Promise((r) =>
        server.close(() => {
          rmSync(dir, { recursive: true, force: true });
          r(undefined);
        }),
      ),
  };
}
