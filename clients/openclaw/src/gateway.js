// The plugin's side of the attester's model gateway (docs/spec/model-gateway.md;
// the plugin's use of it: docs/spec/openclaw-plugin.md section 7): one model
// request of a run over the control socket, its response relayed as it
// arrives, and the gateway receipt of its trailer checked against the pinned
// attester, this request's bytes, the bytes received and the run's llm_call
// event.
import { request } from "node:http";
import { createHash, verify } from "node:crypto";
import { HASH_B64U } from "./hash.js";

/** Trailer and header names as Node reports them (lower case). */
export const RECEIPT_TRAILER = "clawea-gateway-receipt";
export const EVENT_HASH_HEADER = "clawea-llm-call-event-hash";
const MAX_RECEIPT = 16 << 10;
const MAX_RESPONSE = 32 << 20;
const MAX_ERROR = 8 << 10;
const ENVELOPE_KEYS = ["envelope_version", "envelope_type", "payload", "payload_hash_b64u", "hash_algorithm", "signature_b64u", "algorithm", "signer_did", "issued_at"];

/** A gateway answer the plugin must not act on; code is the spec's reason code. */
export class ReceiptRefused extends Error {
  /** @param {string} code @param {string} msg */
  constructor(code, msg) {
    super(`${code}: ${msg}`);
    this.name = "ReceiptRefused";
    this.code = code;
  }
}

/** The gateway refused the request (an error status), with its safe message. */
export class GatewayRefused extends Error {
  /** @param {number} status @param {string} msg */
  constructor(status, msg) {
    super(`the attester's model gateway refused the request: ${status}${msg ? ": " + msg : ""}`);
    this.name = "GatewayRefused";
    this.status = status;
  }
}

/**
 * One model request through the gateway. onChunk gets each body chunk of a
 * 2xx answer as it arrives; the promise settles when the answer ended, with
 * the SHA-256 of every byte received and the trailers.
 * @param {string} socketPath
 * @param {{path: string, capability: string, eventHash: string, body: Buffer, idleMs: number,
 *   signal?: AbortSignal, onChunk: (c: Buffer) => void}} r
 * @returns {Promise<{status: number, contentType: string, responseHash: string, trailers: Record<string, string | undefined>}>}
 */
export function gatewayRequest(socketPath, r) {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        method: "POST",
        path: r.path,
        headers: {
          host: "attester",
          authorization: "Bearer " + r.capability,
          "content-type": "application/json",
          "content-length": String(r.body.length),
          te: "trailers",
          [EVENT_HASH_HEADER]: r.eventHash,
        },
        timeout: r.idleMs,
        signal: r.signal,
      },
      (res) => {
        const status = res.statusCode ?? 0;
        const h = createHash("sha256");
        /** @type {Buffer[]} */
        const errChunks = [];
        let n = 0;
        res.on("data", (/** @type {Buffer} */ c) => {
          n += c.length;
          if (n > (status >= 200 && status <= 299 ? MAX_RESPONSE : MAX_ERROR)) {
            req.destroy(new Error("the gateway's answer is over its bound"));
            return;
          }
          if (status < 200 || status > 299) {
            errChunks.push(c);
            return;
          }
          h.update(c);
          try {
            r.onChunk(c);
          } catch (e) {
            req.destroy(/** @type {Error} */ (e));
          }
        });
        res.on("end", () => {
          if (status < 200 || status > 299) {
            let msg = "";
            try {
              const e = JSON.parse(Buffer.concat(errChunks).toString("utf8"));
              if (typeof e.error === "string") msg = e.error.slice(0, 300);
            } catch {
              // not JSON: no message
            }
            reject(new GatewayRefused(status, msg));
            return;
          }
          const ct = res.headers["content-type"];
          resolve({ status, contentType: typeof ct === "string" ? ct : "", responseHash: h.digest("base64url"), trailers: res.trailers });
        });
        res.on("error", reject);
        res.on("aborted", () => reject(new Error("the gateway's answer was cut off")));
      },
    );
    req.on("timeout", () => req.destroy(new Error("the gateway went idle past its timeout")));
    req.on("error", reject);
    req.end(r.body);
  });
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
  const b = p.binding;
  /** @type {Array<[boolean, string]>} */
  const checks = [
    [b && typeof b === "object" && b.run_id === want.runId, "the receipt is bound to another run"],
    [b && typeof b === "object" && b.event_hash_b64u === want.eventHash, "the receipt is bound to another llm_call event"],
    [HASH_B64U.test(p.request_hash_b64u) && p.request_hash_b64u === want.requestHash, "the receipt is for other request bytes than the ones sent"],
    [HASH_B64U.test(p.response_hash_b64u) && p.response_hash_b64u === want.responseHash, "the receipt is for other response bytes than the ones received"],
    [p.provider === want.provider && p.model === want.model, "the receipt names another provider or model"],
  ];
  for (const [ok, why] of checks) if (!ok) throw new ReceiptRefused("RECEIPT_MISMATCH", why);
  return env;
}
