// An independent implementation, in Node.js, of the proof-bundle rules of
// docs/spec/hashing-and-envelopes.md §5.4 (rate_limit_claims) and §5.5
// (tool_receipts) and the URM reference rule, written from the spec for TestNodeAgreesOnBundleVectors.
// It uses JavaScript's own JSON.parse, JSON.stringify, Date.parse and sort,
// so it checks that our Go reading of those semantics holds on the vectors.
// JSON Schema validation is not repeated here.
//
// Usage: node node_bundle_rules.js FILE...  prints "FILE CODE" per file.
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');

const b64u = (b) => Buffer.from(b).toString('base64url');
const sha = (s) => b64u(crypto.createHash('sha256').update(s, 'utf8').digest());
const ALPH = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

function keyOf(did) {
  if (typeof did !== 'string' || !did.startsWith('did:key:z')) return null;
  let n = 0n;
  for (const c of did.slice(9)) {
    const i = ALPH.indexOf(c);
    if (i < 0) return null;
    n = n * 58n + BigInt(i);
  }
  let hex = n.toString(16);
  if (hex.length % 2) hex = '0' + hex;
  const raw = Buffer.from(hex, 'hex');
  if (raw.length !== 34 || raw[0] !== 0xed || raw[1] !== 0x01) return null;
  return crypto.createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: b64u(raw.subarray(2)) }, format: 'jwk' });
}

function sigOK(did, alg, sig, msg) {
  if (alg !== 'Ed25519') return false;
  const k = keyOf(did);
  if (!k) return false;
  const s = Buffer.from(sig, 'base64url');
  if (s.length !== 64) return false;
  return crypto.verify(null, Buffer.from(msg, 'utf8'), k, s);
}

// RFC 8785 for the values used here (strings, safe integers, booleans,
// null, arrays, objects): keys sorted by UTF-16 code units.
function jcs(v) {
  if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}

const fin = (x) => typeof x === 'number' && Number.isFinite(x) && x >= 0;

function rateLimits(claims, runId) {
  for (const c of claims) {
    const a = Date.parse(c.window_start), b = Date.parse(c.window_end);
    if (!Number.isFinite(a) || !Number.isFinite(b)) return 'RATE_LIMIT_CLAIM_INCONSISTENT';
    if (a > b) return 'RATE_LIMIT_WINDOW_INVALID';
    if (!fin(c.max_requests) || !fin(c.observed_requests)) return 'RATE_LIMIT_CLAIM_INCONSISTENT';
    if (c.observed_requests > c.max_requests) return 'RATE_LIMIT_EXCEEDED';
    for (const l of ['tokens_input', 'tokens_output']) {
      const mx = c['max_' + l], ob = c['observed_' + l];
      if ((mx === undefined) !== (ob === undefined)) return 'RATE_LIMIT_CLAIM_INCONSISTENT';
      if (mx === undefined) continue;
      if (!fin(mx) || !fin(ob)) return 'RATE_LIMIT_CLAIM_INCONSISTENT';
      if (ob > mx) return 'RATE_LIMIT_EXCEEDED';
    }
    if (runId !== null && c.run_id !== undefined && c.run_id !== runId) return 'RATE_LIMIT_CLAIM_INCONSISTENT';
  }
  return null;
}

function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function disclosure(d, committed) {
  if (d.disclosure_algorithm !== 'vir_v2_typed_lexicographical') return 'DISCLOSURE_ALGORITHM_UNKNOWN';
  if (d.merkle_root_b64u !== committed) return 'DISCLOSURE_ROOT_MISMATCH';
  const hashes = d.redacted_leaf_hashes_b64u.slice();
  for (const [path, leaf] of Object.entries(d.disclosed_leaves)) {
    if (typeName(leaf.value) !== leaf.type) return 'DISCLOSURE_TYPE_MISMATCH';
    hashes.push(sha(path + ':' + jcs({ type: leaf.type, value: leaf.value, salt_b64u: leaf.salt_b64u })));
  }
  hashes.sort();
  return sha(jcs(hashes)) === d.merkle_root_b64u ? null : 'DISCLOSURE_ROOT_MISMATCH';
}

function toolReceipt(e, agent, chain) {
  const env = e.envelope_version !== undefined ? e : null;
  const p = env ? env.payload : e;
  if (p.agent_did !== agent) return 'PROOF_BUNDLE_AGENT_MISMATCH';
  if (p.binding && chain) {
    if (typeof p.binding.run_id === 'string' && p.binding.run_id.length > 0 && p.binding.run_id !== chain.runId) return 'RECEIPT_BINDING_MISMATCH';
    if (p.binding.event_hash_b64u !== undefined && !chain.hashes.has(p.binding.event_hash_b64u)) return 'RECEIPT_BINDING_MISMATCH';
  }
  if (env) {
    if (env.expires_at && Date.now() > Date.parse(env.expires_at)) return 'EXPIRED_TTL';
    if (env.hash_algorithm !== 'SHA-256') return 'UNKNOWN_HASH_ALGORITHM';
    if (sha(JSON.stringify(env.payload)) !== env.payload_hash_b64u) return 'HASH_MISMATCH';
    if (!sigOK(env.signer_did, env.algorithm, env.signature_b64u, env.payload_hash_b64u)) return 'SIGNATURE_INVALID';
    if (env.envelope_version === '2') {
      for (const c of env.co_signatures || []) {
        if (!sigOK(c.signer_did, c.algorithm, c.signature_b64u, env.payload_hash_b64u)) return 'CO_SIGNATURE_INVALID';
      }
    }
  }
  if (p.receipt_version === '2') {
    for (const [k, h] of [['args_disclosure', 'args_hash_b64u'], ['result_disclosure', 'result_hash_b64u']]) {
      if (p[k]) {
        const r = disclosure(p[k], p[h]);
        if (r) return r;
      }
    }
  }
  return null;
}

function verify(env) {
  const p = env.payload;
  if (sha(JSON.stringify(p)) !== env.payload_hash_b64u) return 'HASH_MISMATCH';
  if (!sigOK(env.signer_did, env.algorithm, env.signature_b64u, env.payload_hash_b64u)) return 'SIGNATURE_INVALID';
  let chain = null;
  if (Array.isArray(p.event_chain) && p.event_chain.length > 0) {
    chain = { runId: p.event_chain[0].run_id, hashes: new Set(p.event_chain.map((e) => e.event_hash_b64u)) };
  }
  const r = rateLimits(p.rate_limit_claims || [], chain ? chain.runId : null);
  if (r) return r;
  if (p.urm !== undefined) return 'URM_MISSING';
  for (const e of p.tool_receipts || []) {
    const t = toolReceipt(e, p.agent_did, chain);
    if (t) return t;
  }
  return 'OK';
}

for (const f of process.argv.slice(2)) {
  let code;
  try {
    code = verify(JSON.parse(fs.readFileSync(f, 'utf8')));
  } catch (err) {
    code = 'ERROR ' + err.message;
  }
  console.log(f + ' ' + code);
}
