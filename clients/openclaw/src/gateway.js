// The plugin's side of the attester's model gateway (docs/spec/model-gateway.md;
// the plugin's use of it: docs/spec/openclaw-plugin.md section 7): one model
// request of a run over the control socket, its answer relayed as it
// arrives, and the gateway receipt of its trailer checked against the pinned
// attester, this request's bytes, the bytes received and the run's llm_call
// event. The signed answer of its trailer is checked by control.js.
import { request } from "node:http";
import { createHash, verify } from "node:crypto";
import { HASH_B64U } from "./hash.js";

/** Header and trailer names as Node reports them (lower case). */
export const RECEIPT_TRAILER = "clawea-gateway-receipt";
export const ERROR_TRAILER = "clawea-gateway-error";
export const TURN_HEADER = "clawea-turn-id";
export const LLM_CALL_HEADER = "clawea-llm-call";
const MAX_RECEIPT = 16 << 10;
const MAX_RESPONSE = 256 << 20;
const MAX_KEPT = 8 << 10;
const ENVELOPE_KEYS = ["envelope_version", "envelope_type", "payload", "payload_hash_b64u", "hash_algorithm", "signature_b64u", "algorithm", "signer_did", "issued_at"];

/** The gateway's {api} of an OpenClaw model api (model-gateway.md section 1). */
export const GATEWAY_API = Object.freeze({ "openai-completions": "openai-chat-completions", "anthropic-messages": "anthropic-messages" });

/** A receipt the plugin must not act on; code is the spec's reason code. */
export class ReceiptRefused extends Error {
  /** @param {string} code @param {string} msg */
  constructor(code, msg) {
    super(`${code}: ${msg}`);
    this.name = "ReceiptRefused";
    this.code = code;
  }
}

/** The gateway refused the request, or its answer failed; msg is safe to show. */
export class GatewayRefused extends Error {
  /** @param {number} status @param {string} msg */
  constructor(status, msg) {
    super(`the attester's model gateway refused the request: ${status}${msg ? ": " + msg : ""}`);
    this.name = "GatewayRefused";
    this.status = status;
  }
}

/**
 * The Clawea-Llm-Call header: b64u of the llm_call event's JSON without the
 * members the gateway derives (run id, type, payload hash, event hash).
 * @param {{event_id: string, timestamp: string, prev_hash_b64u: string | null}} event
 * @param {object} payload
 */
export function llmCallHeader(event, payload) {
  const v = { event_id: event.event_id, timestamp: event.timestamp, prev_hash_b64u: event.prev_hash_b64u, payload };
  return Buffer.from(JSON.stringify(v), "utf8").toString("base64url");
}

/**
 * @typedef {object} GatewayAnswer
 * @property {number} status
 * @property {boolean} relayed the upstream's answer relayed (trailers declared), not the gateway's own
 * @property {import("node:http").IncomingHttpHeaders} headers
 * @property {Record<string, string | undefined>} trailers
 * @property {string} responseHash SHA-256 of every body byte received
 * @property {Buffer} kept the first bytes of a body that was not handed to onChunk (an error's)
 */

/**
 * One model request through the gateway. onChunk gets each body chunk of a
 * relayed 2xx answer as it arrives; the promise settles when the answer ended.
 * @param {string} socketPath
 * @param {{path: string, headers: Record<string, string>, body: Buffer, idleMs: number,
 *   signal?: AbortSignal, onChunk: (c: Buffer) => void}} r
 * @returns {Promise<GatewayAnswer>}
 */
export function gatewayRequest(socketPath, r) {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        method: "POST",
        path: r.path,
        headers: { host: "attester", "content-type": "application/json", "content-length": String(r.body.length), te: "trailers", ...r.headers },
        timeout: r.idleMs,
        signal: r.signal,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        const relayed = typeof res.headers.trailer === "string";
        const stream = relayed && status >= 200 && status <= 299;
        const h = createHash("sha256");
        /** @type {Buffer[]} */
        const kept = [];
        let n = 0;
        res.on("data", (/** @type {Buffer} */ c) => {
          n += c.length;
          if (n > MAX_RESPONSE || (!relayed && n > MAX_KEPT)) {
            req.destroy(new Error("the gateway's answer is over its bound"));
            return;
          }
          h.update(c);
          if (!stream) {
            if (n - c.length < MAX_KEPT) kept.push(c);
            return;
          }
          try {
            r.onChunk(c);
          } catch (e) {
            req.destroy(/** @type {Error} */ (e));
          }
        });
        res.on("end", () => {
          if (!res.complete) return;
          resolve({ status, relayed, headers: res.headers, trailers: res.trailers, responseHash: h.digest("base64url"), kept: Buffer.concat(kept).subarray(0, MAX_KEPT) });
        });
        res.on("error", reject);
        res.on("aborted", () => reject(new Error("the gateway's answer was cut off")));
        res.on("close", () => {
          if (!res.complete) reject(new Error("the gateway's answer was cut off"));
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error("the gateway went idle past its timeout")));
    req.on("error", reject);
    req.end(r.body);
  });
}

/**
 * The safe message of a gateway refusal's JSON body.
 * @param {Buffer} body
 */
export function refusalMessage(body) {
  try {
    const e = JSON.parse(body.toString("utf8"));
    const msg = typeof e.error === "string" ? e.error.slice(0, 300) : "";
    return typeof e.reason === "string" && /^[A-Z_]{1,64}$/.test(e.reason) ? `${e.reason}: ${msg}` : msg;
  } catch {
    return "";
  }
}

/**
 * Verifies the gateway receipt of one model call and returns its envelope
 * only when the pinned attester signed it for exactly this call: this run,
 * this llm_call event, these request bytes, the response bytes received,
 * this provider and model. Otherwise throws ReceiptRefused.
 * @param {{did: string, key: import("node:crypto").KeyObject}} pin
 * @param {string | undefined} trailer the Clawea-Gateway-Receipt trailer
 * @param {{runId: string, eventHash: string, requestHash: string, responseHash: string, provider: string, model: string}} want
 */
export function verifyReceipt(pin, trailer, want) {
  if (typeof trailer !== "string" || trailer === "") throw new ReceiptRefused("RECEIPT_MISSING", "the gateway's answer carries no receipt");
  if (trailer.length > Math.ceil((MAX_RECEIPT * 4) / 3) || !/^[A-Za-z0-9_-]+$/.test(trailer)) {
    throw new ReceiptRefused("RECEIPT_MALFORMED", "the receipt trailer is not b64u");
  }
  const raw = Buffer.from(trailer, "base64url");
  if (raw.toString("base64url") !== trailer) throw new ReceiptRefused("RECEIPT_MALFORMED", "the receipt trailer is not canonical b64u");
  /** @type {any} */
  let env;
  try {
    env = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
  } catch {
    throw new ReceiptRefused("RECEIPT_MALFORMED", "the receipt is not JSON");
  }
  if (!env || typeof env !== "object" || Array.isArray(env)) throw new ReceiptRefused("RECEIPT_MALFORMED", "the receipt is not an object");
  const keys = Object.keys(env);
  if (keys.length !== ENVELOPE_KEYS.length || keys.some((k) => !ENVELOPE_KEYS.includes(k))) {
    throw new ReceiptRefused("RECEIPT_MALFORMED", "the receipt's members are not a gateway_receipt envelope's");
  }
  if (env.envelope_version !== "1" || env.envelope_type !== "gateway_receipt" || env.hash_algorithm !== "SHA-256" || env.algorithm !== "Ed25519") {
    throw new ReceiptRefused("RECEIPT_MALFORMED", "not a version 1 SHA-256 Ed25519 gateway_receipt envelope");
  }
  if (env.signer_did !== pin.did) throw new ReceiptRefused("RECEIPT_WRONG_SIGNER", "the receipt is signed by another DID than the pinned attesterDid");
  const p = env.payload;
  if (!p || typeof p !== "object" || Array.isArray(p)) throw new ReceiptRefused("RECEIPT_MALFORMED", "the receipt has no payload");
  const hash = createHash("sha256").update(JSON.stringify(p), "utf8").digest("base64url");
  if (env.payload_hash_b64u !== hash) throw new ReceiptRefused("RECEIPT_MALFORMED", "the receipt's payload hash is not its payload's");
  const sig = typeof env.signature_b64u === "string" && /^[A-Za-z0-9_-]{86}$/.test(env.signature_b64u) ? Buffer.from(env.signature_b64u, "base64url") : null;
  if (!sig || sig.length !== 64 || !verify(null, Buffer.from(hash, "utf8"), pin.key, sig)) {
    throw new ReceiptRefused("RECEIPT_SIGNATURE_INVALID", "the receipt's signature does not verify with the pinned attester key");
  }
  if (p.receipt_version !== "1") throw new ReceiptRefused("RECEIPT_MALFORMED", "not a version 1 receipt");
  const b = p.binding && typeof p.binding === "object" ? p.binding : {};
  /** @type {Array<[boolean, string]>} */
  const checks = [
    [b.run_id === want.runId, "the receipt is bound to another run"],
    [b.event_hash_b64u === want.eventHash, "the receipt is bound to another llm_call event"],
    [HASH_B64U.test(p.request_hash_b64u) && p.request_hash_b64u === want.requestHash, "the receipt is for other request bytes than the ones sent"],
    [HASH_B64U.test(p.response_hash_b64u) && p.response_hash_b64u === want.responseHash, "the receipt is for other response bytes than the ones received"],
    [p.provider === want.provider && p.model === want.model, "the receipt names another provider or model"],
  ];
  for (const [ok, why] of checks) if (!ok) throw new ReceiptRefused("RECEIPT_MISMATCH", why);
  return env;
}
