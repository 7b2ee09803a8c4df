// An independent checker of the gateway receipts in a clawea proof bundle,
// written from the PoH schemas (gateway_receipt.v1, gateway_receipt_envelope.v1,
// receipt_binding.v1, proof_bundle.v1) and docs/spec/attestation-v1.md section
// 5.7, not from the Go code. It uses node:crypto only.
//
// usage: node check.mjs < input.json
//   input.json: {"bundle": <proof_bundle envelope>, "attester_did": "did:key:...",
//                "gateway": {"receipt_count": N, "receipt_chain_b64u": "..."}}
// On success it prints {"receipts":N,"receipt_chain_b64u":"..."} and exits 0;
// otherwise it prints "receipt-check: CODE: FIELD: message" to stderr and
// exits 1.
import { createHash, createPublicKey, verify } from "node:crypto";

class Refusal extends Error {
  constructor(code, field, msg) {
    super(`${code}: ${field}: ${msg}`);
  }
}
const refuse = (code, field, msg) => {
  throw new Refusal(code, field, msg);
};

const B64U = /^[A-Za-z0-9_-]+$/;
const isObj = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const isStr = (v) => typeof v === "string" && v.length > 0;
const sha256 = (...parts) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p);
  return h.digest();
};
const b64u = (buf) => Buffer.from(buf).toString("base64url");
const hashJSON = (v) => b64u(sha256(Buffer.from(JSON.stringify(v), "utf8")));
const rawHash = (s, field) => {
  if (typeof s !== "string" || s.length !== 43 || !B64U.test(s)) refuse("SCHEMA_VALIDATION_FAILED", field, "not a b64u SHA-256 hash");
  const b = Buffer.from(s, "base64url");
  if (b.length !== 32 || b64u(b) !== s) refuse("SCHEMA_VALIDATION_FAILED", field, "not a canonical b64u SHA-256 hash");
  return b;
};
const isDateTime = (s) => typeof s === "string" && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(s) && !Number.isNaN(Date.parse(s));

// did:key (Ed25519): "did:key:z" + base58btc(0xed 0x01 || key).
const B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
const base58 = (s) => {
  let n = 0n;
  for (const c of s) {
    const i = B58.indexOf(c);
    if (i < 0) return null;
    n = n * 58n + BigInt(i);
  }
  const out = [];
  while (n > 0n) {
    out.unshift(Number(n % 256n));
    n /= 256n;
  }
  for (const c of s) {
    if (c !== "1") break;
    out.unshift(0);
  }
  return Buffer.from(out);
};
const didKey = (did, field) => {
  const b = typeof did === "string" && did.startsWith("did:key:z") ? base58(did.slice(9)) : null;
  if (!b || b.length !== 34 || b[0] !== 0xed || b[1] !== 0x01) refuse("INVALID_DID_FORMAT", field, "not an Ed25519 did:key");
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: b64u(b.subarray(2)) }, format: "jwk" });
};

// A SignedEnvelope: members, versions, algorithms, payload hash over
// JSON.stringify(payload), Ed25519 signature over the payload hash string.
const ENVELOPE = ["envelope_version", "envelope_type", "payload", "payload_hash_b64u", "hash_algorithm", "signature_b64u", "algorithm", "signer_did", "issued_at"];
const checkEnvelope = (env, type, field) => {
  if (!isObj(env)) refuse("MALFORMED_ENVELOPE", field, "not an object");
  for (const k of ENVELOPE) if (!(k in env)) refuse("MALFORMED_ENVELOPE", `${field}.${k}`, "missing");
  for (const k of Object.keys(env)) if (!ENVELOPE.includes(k) && k !== "expires_at") refuse("SCHEMA_VALIDATION_FAILED", `${field}.${k}`, "unknown member");
  if (env.envelope_version !== "1") refuse("UNKNOWN_ENVELOPE_VERSION", `${field}.envelope_version`, "not 1");
  if (env.envelope_type !== type) refuse("UNKNOWN_ENVELOPE_TYPE", `${field}.envelope_type`, `not ${type}`);
  if (env.algorithm !== "Ed25519") refuse("UNKNOWN_ALGORITHM", `${field}.algorithm`, "not Ed25519");
  if (env.hash_algorithm !== "SHA-256") refuse("UNKNOWN_HASH_ALGORITHM", `${field}.hash_algorithm`, "not SHA-256");
  if (!isDateTime(env.issued_at)) refuse("MALFORMED_ENVELOPE", `${field}.issued_at`, "not a date-time");
  if (!isStr(env.signature_b64u) || !B64U.test(env.signature_b64u)) refuse("MALFORMED_ENVELOPE", `${field}.signature_b64u`, "not b64u");
  if (!isObj(env.payload)) refuse("SCHEMA_VALIDATION_FAILED", `${field}.payload`, "not an object");
  const key = didKey(env.signer_did, `${field}.signer_did`);
  if (hashJSON(env.payload) !== env.payload_hash_b64u) refuse("HASH_MISMATCH", `${field}.payload_hash_b64u`, "not the SHA-256 of JSON.stringify(payload)");
  const sig = Buffer.from(env.signature_b64u, "base64url");
  if (sig.length !== 64 || !verify(null, Buffer.from(env.payload_hash_b64u, "utf8"), key, sig)) refuse("SIGNATURE_INVALID", `${field}.signature_b64u`, "the Ed25519 signature does not verify");
};

// gateway_receipt.v1 payload (additionalProperties false) and
// receipt_binding.v1, with clawverify's integer bounds.
const RECEIPT = ["receipt_version", "receipt_id", "gateway_id", "provider", "model", "request_hash_b64u", "response_hash_b64u", "tokens_input", "tokens_output", "latency_ms", "timestamp"];
const BINDING = ["run_id", "event_hash_b64u", "nonce", "policy_hash", "token_scope_hash_b64u", "span_id", "spanId", "parent_span_id", "parentSpanId", "tool_span_id", "toolSpanId", "phase", "attribution_confidence", "attributionConfidence"];
const checkReceiptPayload = (p, f) => {
  for (const k of RECEIPT) if (!(k in p)) refuse("SCHEMA_VALIDATION_FAILED", `${f}.${k}`, "missing");
  for (const k of Object.keys(p)) if (!RECEIPT.includes(k) && k !== "binding" && k !== "metadata") refuse("SCHEMA_VALIDATION_FAILED", `${f}.${k}`, "unknown member");
  if (p.receipt_version !== "1") refuse("SCHEMA_VALIDATION_FAILED", `${f}.receipt_version`, "not 1");
  for (const k of ["receipt_id", "gateway_id", "provider", "model"]) if (!isStr(p[k])) refuse("SCHEMA_VALIDATION_FAILED", `${f}.${k}`, "not a non-empty string");
  for (const k of ["request_hash_b64u", "response_hash_b64u"]) if (typeof p[k] !== "string" || p[k].length < 8 || !B64U.test(p[k])) refuse("SCHEMA_VALIDATION_FAILED", `${f}.${k}`, "not b64u");
  for (const [k, max] of [["tokens_input", 1e7], ["tokens_output", 1e7], ["latency_ms", 3600000]]) {
    if (!Number.isInteger(p[k]) || p[k] < 0 || p[k] > max) refuse("SCHEMA_VALIDATION_FAILED", `${f}.${k}`, `not an integer in 0..${max}`);
  }
  if (!isDateTime(p.timestamp)) refuse("SCHEMA_VALIDATION_FAILED", `${f}.timestamp`, "not a date-time");
  if (!isObj(p.binding)) refuse("RECEIPT_BINDING_MISMATCH", `${f}.binding`, "the receipt is not bound");
  for (const k of Object.keys(p.binding)) if (!BINDING.includes(k)) refuse("SCHEMA_VALIDATION_FAILED", `${f}.binding.${k}`, "unknown member");
  if (p.metadata !== undefined && !isObj(p.metadata)) refuse("SCHEMA_VALIDATION_FAILED", `${f}.metadata`, "not an object");
};

// The event chain: linkage and each event_hash_b64u recomputed from its header.
const checkChain = (chain) => {
  if (!Array.isArray(chain) || chain.length === 0) refuse("RECEIPT_BINDING_MISMATCH", "payload.event_chain", "no event chain to bind receipts to");
  let prev = null;
  chain.forEach((e, i) => {
    const f = `payload.event_chain[${i}]`;
    if (e.run_id !== chain[0].run_id) refuse("MALFORMED_ENVELOPE", `${f}.run_id`, "inconsistent run_id");
    if (e.prev_hash_b64u !== prev) refuse("HASH_CHAIN_BREAK", `${f}.prev_hash_b64u`, "does not link to the previous event");
    const header = { event_id: e.event_id, run_id: e.run_id, event_type: e.event_type, timestamp: e.timestamp, payload_hash_b64u: e.payload_hash_b64u, prev_hash_b64u: e.prev_hash_b64u };
    if (hashJSON(header) !== e.event_hash_b64u) refuse("HASH_MISMATCH", `${f}.event_hash_b64u`, "not the hash of the event header");
    prev = e.event_hash_b64u;
  });
};

const LABEL = Buffer.from("clawea.dev/attester/v1/gateway-receipt-chain", "utf8");

const check = (input) => {
  const { bundle, attester_did: attester, gateway } = input;
  checkEnvelope(bundle, "proof_bundle", "bundle");
  const p = bundle.payload;
  if (p.agent_did !== bundle.signer_did) refuse("INVALID_DID_FORMAT", "signer_did", "the bundle is not signed by its agent");
  checkChain(p.event_chain);
  const runID = p.event_chain[0].run_id;
  const llmCalls = Array.isArray(p.metadata?.clawea_llm_calls) ? p.metadata.clawea_llm_calls : [];
  const calls = new Map(); // event index -> its clawea_llm_calls payload
  let n = 0;
  p.event_chain.forEach((e, i) => {
    if (e.event_type === "llm_call") calls.set(i, llmCalls[n++]);
  });
  const receipts = Array.isArray(p.receipts) ? p.receipts : [];
  const receipted = new Set();
  const ids = new Set();
  let head = Buffer.alloc(0);
  receipts.forEach((env, i) => {
    const f = `payload.receipts[${i}]`;
    checkEnvelope(env, "gateway_receipt", f);
    const r = env.payload;
    checkReceiptPayload(r, `${f}.payload`);
    if (ids.has(r.receipt_id)) refuse("MALFORMED_ENVELOPE", `${f}.payload.receipt_id`, "not unique");
    ids.add(r.receipt_id);
    if (env.signer_did !== attester) refuse("CLAIM_NOT_FOUND", `${f}.signer_did`, "not the attester's DID");
    if (r.gateway_id !== attester) refuse("EVIDENCE_MISMATCH", `${f}.payload.gateway_id`, "does not name the attester");
    if (r.binding.run_id !== runID) refuse("RECEIPT_BINDING_MISMATCH", `${f}.payload.binding.run_id`, "another run");
    const ev = p.event_chain.findIndex((e) => e.event_hash_b64u === r.binding.event_hash_b64u);
    if (ev < 0 || p.event_chain[ev].event_type !== "llm_call") refuse("RECEIPT_BINDING_MISMATCH", `${f}.payload.binding.event_hash_b64u`, "not an llm_call event of the chain");
    if (receipted.has(ev)) refuse("RECEIPT_BINDING_MISMATCH", `${f}.payload.binding.event_hash_b64u`, "a second receipt for that llm_call");
    receipted.add(ev);
    const call = calls.get(ev);
    if (!isObj(call) || hashJSON(call) !== p.event_chain[ev].payload_hash_b64u) refuse("HASH_MISMATCH", "payload.metadata.clawea_llm_calls", `no payload of llm_call event ${ev}`);
    for (const k of ["provider", "model"]) if (call[k] && call[k] !== r[k]) refuse("EVIDENCE_MISMATCH", `${f}.payload.${k}`, "differs from the llm_call's");
    const seen = r.metadata?.clawea_llm_call;
    if (!isObj(seen)) refuse("MISSING_REQUIRED_FIELD", `${f}.payload.metadata.clawea_llm_call`, "missing");
    for (const k of ["system_text_hash_b64u", "suffix_hash_b64u", "suffix_utf16_len"]) {
      if (seen[k] !== call[k]) refuse("EVIDENCE_MISMATCH", `${f}.payload.metadata.clawea_llm_call.${k}`, "differs from what the llm_call reports");
    }
    head = sha256(LABEL, Buffer.from([0]), head, rawHash(env.payload_hash_b64u, `${f}.payload_hash_b64u`));
  });
  if (receipts.length > 0) {
    for (const i of calls.keys()) if (!receipted.has(i)) refuse("MISSING_REQUIRED_FIELD", `payload.event_chain[${i}]`, "llm_call without a receipt");
  }
  const chain = receipts.length === 0 ? "" : b64u(head);
  if (!isObj(gateway) || gateway.receipt_count !== receipts.length || gateway.receipt_chain_b64u !== chain) {
    refuse("EVIDENCE_MISMATCH", "payload.receipts", "the receipts are not the attested gateway record");
  }
  return { receipts: receipts.length, receipt_chain_b64u: chain };
};

const main = async () => {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const input = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks)));
  process.stdout.write(JSON.stringify(check(input)));
};

main().catch((e) => {
  process.stderr.write(`receipt-check: ${e instanceof Refusal ? e.message : `MALFORMED_ENVELOPE: input: ${e}`}\n`);
  process.exit(1);
});
