// Signed control answers (docs/spec/attester-api.md section 8): the plugin
// acts on an answer only when the pinned attester signed a statement that
// binds this request, these exact body bytes, this process and the run's
// next sequence number. The rules are wire/answer's, in JavaScript.
import { createHash, createPublicKey, verify } from "node:crypto";
import { readFileSync } from "node:fs";
import { ed25519FromDidKey } from "./didkey.js";
import { HASH_B64U, jcs } from "./hash.js";

export const ANSWER_VERSION = "1";
export const ANSWER_LABEL = "clawea.dev/attester/v1/control-answer";
/** Header names as Node reports them (lower case). */
export const HEADER_STATEMENT = "clawea-answer-statement";
export const HEADER_SIGNATURE = "clawea-answer-signature";
const MAX_STATEMENT = 1024;
const RUN_ID = /^[A-Za-z0-9_-]{1,128}$/;
const KEYS = ["answer_version", "attester_did", "peer_pid", "peer_start_time", "request_hash_b64u", "response_hash_b64u", "run_id", "seq", "status"];

/** An answer the plugin must not act on; code is the spec's reason code. */
export class AnswerRefused extends Error {
  /** @param {string} code @param {string} msg */
  constructor(code, msg) {
    super(`${code}: ${msg}`);
    this.name = "AnswerRefused";
    this.code = code;
  }
}

/**
 * The pinned attester: its did:key and the public key it names.
 * @param {string} did
 */
export function attesterPin(did) {
  const raw = ed25519FromDidKey(did);
  const key = createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]), format: "der", type: "spki" });
  return { did, key };
}

/**
 * This process as the attester sees it: its pid and its start time
 * (/proc/self/stat field 22, clock ticks after boot). Throws when it cannot
 * be read: the plugin then refuses to run (fail closed).
 * @param {string} [statFile]
 */
export function selfProcess(statFile = "/proc/self/stat") {
  const stat = readFileSync(statFile, "latin1");
  const open = stat.indexOf("(");
  const close = stat.lastIndexOf(")");
  if (open < 0 || close < open) throw new Error(`${statFile}: malformed`);
  // Fields 3 onwards follow the last ')': the command name may hold spaces and parentheses.
  const fields = stat.slice(close + 1).trim().split(/\s+/);
  const start = fields[22 - 3];
  if (start === undefined || !/^[0-9]{1,16}$/.test(start) || !Number.isSafeInteger(Number(start))) {
    throw new Error(`${statFile}: no start time`);
  }
  return { pid: process.pid, startTime: Number(start) };
}

/**
 * b64u(SHA-256(method || LF || request-target || LF || body)): the request
 * as the attester reads it, over the exact bytes sent.
 * @param {string} method
 * @param {string} target
 * @param {Uint8Array} body
 */
export function requestHash(method, target, body) {
  return createHash("sha256").update(method + "\n" + target + "\n", "utf8").update(body).digest("base64url");
}

/**
 * Verifies a signed answer and returns its statement only when the pinned
 * attester signed it and it is the answer to this request of this process,
 * in sequence; otherwise throws AnswerRefused with its reason code.
 * @param {{did: string, key: import("node:crypto").KeyObject}} pin
 * @param {import("node:http").IncomingHttpHeaders} headers
 * @param {{runId?: string, seq: number, status: number, requestHash: string, body?: Uint8Array, bodyHash?: string,
 *   pid: number, startTime: number}} want body, or the SHA-256 of the body read as it streamed
 */
export function verifyAnswer(pin, headers, want) {
  const stB = headers[HEADER_STATEMENT];
  const sigB = headers[HEADER_SIGNATURE];
  if (typeof stB !== "string" || typeof sigB !== "string" || stB === "" || sigB === "") {
    throw new AnswerRefused("ANSWER_UNSIGNED", "the answer carries no signature");
  }
  if (stB.length > Math.ceil((MAX_STATEMENT * 4) / 3) || !/^[A-Za-z0-9_-]+$/.test(stB) || !/^[A-Za-z0-9_-]{86}$/.test(sigB)) {
    throw new AnswerRefused("ANSWER_MALFORMED", "malformed signature headers");
  }
  const stmt = Buffer.from(stB, "base64url");
  const sig = Buffer.from(sigB, "base64url");
  if (stmt.toString("base64url") !== stB || sig.length !== 64) {
    throw new AnswerRefused("ANSWER_MALFORMED", "signature headers are not canonical b64u");
  }
  const msg = Buffer.concat([Buffer.from(ANSWER_LABEL, "utf8"), Buffer.of(0), stmt]);
  if (!verify(null, msg, pin.key, sig)) {
    // Diagnosis only: an unverified statement naming another attester.
    const other = parseStatement(stmt, true);
    if (other && other.attester_did !== pin.did) {
      throw new AnswerRefused("ANSWER_WRONG_SIGNER", `the answer is signed for ${other.attester_did}, not the pinned attesterDid`);
    }
    throw new AnswerRefused("ANSWER_SIGNATURE_INVALID", "the answer's signature does not verify with the pinned attester key");
  }
  const st = /** @type {Record<string, any>} */ (parseStatement(stmt, false));
  if (st.attester_did !== pin.did) throw new AnswerRefused("ANSWER_WRONG_SIGNER", "the answer names another attester than the pinned one");
  if (st.request_hash_b64u !== want.requestHash) throw new AnswerRefused("ANSWER_REQUEST_MISMATCH", "the answer is for another request than the one sent");
  const bodyHash = want.bodyHash ?? createHash("sha256").update(want.body ?? new Uint8Array(0)).digest("base64url");
  if (st.response_hash_b64u !== bodyHash) throw new AnswerRefused("ANSWER_RESPONSE_MISMATCH", "the answer's body is not the one the attester signed");
  if (st.status !== want.status) throw new AnswerRefused("ANSWER_STATUS_MISMATCH", "the answer's status is not the one the attester signed");
  if (st.peer_pid !== want.pid || st.peer_start_time !== want.startTime) {
    throw new AnswerRefused("ANSWER_PEER_MISMATCH", `the attester answered pid ${st.peer_pid} (start ${st.peer_start_time}), this process is pid ${want.pid} (start ${want.startTime})`);
  }
  if (want.runId !== undefined && st.run_id !== want.runId) throw new AnswerRefused("ANSWER_RUN_MISMATCH", "the answer is for another run");
  if (st.seq !== want.seq) throw new AnswerRefused("ANSWER_SEQUENCE", `answer ${st.seq} where ${want.seq} was due (replayed, reordered or lost)`);
  return st;
}

/**
 * Parses a statement strictly: exactly the canonical (JCS) bytes of an
 * object with the statement's members and types. With quiet, returns null
 * instead of throwing.
 * @param {Buffer} b
 * @param {boolean} quiet
 */
function parseStatement(b, quiet) {
  try {
    if (b.length > MAX_STATEMENT) throw new Error("too long");
    const text = new TextDecoder("utf-8", { fatal: true }).decode(b);
    const v = JSON.parse(text);
    if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
    const keys = Object.keys(v);
    if (keys.length !== KEYS.length || keys.some((k) => !KEYS.includes(k))) throw new Error("members");
    if (jcs(v) !== text) throw new Error("not canonical");
    const int = (/** @type {unknown} */ x, /** @type {number} */ min) => Number.isSafeInteger(x) && /** @type {number} */ (x) >= min;
    if (v.answer_version !== ANSWER_VERSION || typeof v.attester_did !== "string" || !RUN_ID.test(v.run_id) ||
      !HASH_B64U.test(v.request_hash_b64u) || !HASH_B64U.test(v.response_hash_b64u) ||
      !int(v.peer_pid, 1) || !int(v.peer_start_time, 0) || !int(v.seq, 1) || !int(v.status, 200) || v.status > 299) {
      throw new Error("fields");
    }
    return v;
  } catch (e) {
    if (quiet) return null;
    throw new AnswerRefused("ANSWER_MALFORMED", `the answer's statement is not a canonical answer statement (${/** @type {Error} */ (e).message})`);
  }
}
