// Wire formats against vectors produced by the Go implementation
// (schema/poh, schema/didkey): the plugin's bundle must verify there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { jcs, sha256B64u } from "../src/hash.js";
import { agentSigner, base58btc } from "../src/didkey.js";
import { EventChain, eventHash, isValidEvent, llmCallPayload, signEnvelope } from "../src/poh.js";

// Go: ed25519.NewKeyFromSeed(sha256("clawea openclaw plugin test key")).
const SEED_HEX = "3ce70580e7d13367cf44889966e36c1077ddeb6c5d6c83f20f39c66b4ab4e831";
export const TEST_KEY_PEM =
  "-----BEGIN PRIVATE KEY-----\n" +
  Buffer.from("302e020100300506032b657004220420" + SEED_HEX, "hex").toString("base64") +
  "\n-----END PRIVATE KEY-----\n";

test("did:key matches the Go implementation", () => {
  assert.equal(agentSigner(TEST_KEY_PEM).did, "did:key:z6MkvpWR9ZPqyZYK3DALwE6JxQGGM751ug37oDbZzMvZUzKo");
  assert.equal(base58btc(Uint8Array.from([0, 0, 1])), "112");
});

test("a fresh agent key is Ed25519 and different each time", () => {
  const a = agentSigner();
  const b = agentSigner();
  assert.match(a.did, /^did:key:z6Mk/);
  assert.notEqual(a.did, b.did);
  assert.throws(() => agentSigner("not a key"));
});

// FIRST_EVENT is the header of a run's first event (prompt_committed)
// and FIRST_EVENT_HASH its hash as the Go implementation computes it.
const FIRST_EVENT = Object.freeze({
  event_id: "evt_1",
  run_id: "run_1",
  event_type: "prompt_committed",
  timestamp: "2026-01-02T03:04:05.678Z",
  payload_hash_b64u: "HZYtCYB_iGtYBqnwGdf6Dts41qMLYil_AjLKHLJ7Lyk",
  prev_hash_b64u: null,
});
const FIRST_EVENT_HASH = "HeKVrpcRlbpAJV_V9Wi6hbye19PGtJ9qyGJ01TwM7pk";

test("event header hash matches the Go implementation", () => {
  const h = { ...FIRST_EVENT };
  assert.equal(eventHash(h), FIRST_EVENT_HASH);
  assert.ok(isValidEvent({ ...h, event_hash_b64u: FIRST_EVENT_HASH }));
  assert.ok(!isValidEvent({ ...h, event_hash_b64u: "HeKVrpcRlbpAJV_V9Wi6hbye19PGtJ9qyGJ01TwM7pA" }));
  assert.ok(!isValidEvent({ ...h, extra: 1, event_hash_b64u: FIRST_EVENT_HASH }));
});

test("signed envelope is byte-identical to Go's poh.Sign", () => {
  const payload = { bundle_version: "1", bundle_id: "b\u2028<é>", n: 12, x: [true, null] };
  const env = signEnvelope("proof_bundle", payload, agentSigner(TEST_KEY_PEM), new Date("2026-01-02T03:04:05.678Z"));
  assert.equal(
    JSON.stringify(env),
    '{"envelope_version":"1","envelope_type":"proof_bundle","payload":{"bundle_version":"1","bundle_id":"b\u2028<é>","n":12,"x":[true,null]},' +
      '"payload_hash_b64u":"5l6jdFubeT-s6erFRwqXT0gjjksRwYVNOxXV58-pbvg","hash_algorithm":"SHA-256",' +
      '"signature_b64u":"P9o9P232An4eeCFNRe1jw5lXWyzaJ8vr-Le3J-LyEgdkTEgPrNc_OR6OP8tWQ50GE1umU-XB8DsutRUFohjLCw",' +
      '"algorithm":"Ed25519","signer_did":"did:key:z6MkvpWR9ZPqyZYK3DALwE6JxQGGM751ug37oDbZzMvZUzKo","issued_at":"2026-01-02T03:04:05.678Z"}',
  );
});

test("event chain links to the attester's first event", () => {
  const first = { ...FIRST_EVENT, event_hash_b64u: FIRST_EVENT_HASH };
  const c = new EventChain(first, { now: () => new Date(0) });
  const e = c.add("tool_call", sha256B64u("x"));
  assert.equal(e.prev_hash_b64u, first.event_hash_b64u);
  assert.equal(e.run_id, "run_1");
  assert.ok(isValidEvent(e));
  assert.equal(c.events[0], first);
  assert.throws(() => c.add("tool_call", "short"));
  assert.throws(() => new EventChain({ ...first, event_type: "llm_call" }));
  assert.throws(() => new EventChain({ ...first, timestamp: "2026-01-02T03:04:05.679Z" }));
});

test("JCS sorts keys by UTF-16 code units and refuses lossy values", () => {
  assert.equal(jcs({ b: 1, a: [1.5, "x", null, true], "\u00e9": 0, A: { z: 1e21, y: -0 } }), '{"A":{"y":0,"z":1e+21},"a":[1.5,"x",null,true],"b":1,"é":0}');
  assert.equal(jcs({ "\ud83d\ude00": 1, "\uffff": 2 }), '{"\ud83d\ude00":1,"\uffff":2}');
  assert.throws(() => jcs({ a: undefined }));
  assert.throws(() => jcs({ a: NaN }));
  assert.throws(() => jcs(new Date()));
  // The gate's params hash: SHA-256 of the JCS form.
  assert.equal(sha256B64u(jcs({ command: "ls -la" })), sha256B64u('{"command":"ls -la"}'));
});

test("llm_call payload states the attested prefix and the suffix honestly", () => {
  const base = { callId: "c1", provider: "p", model: "m", prompt: "ATTESTED", promptHash: sha256B64u("ATTESTED"), reportHash: sha256B64u("r") };
  const ok = llmCallPayload({ ...base, systemText: "ATTESTED\n\nCurrent model identity: p/m." });
  assert.equal(ok.attested_prefix, true);
  assert.equal(ok.system_text_hash_b64u, sha256B64u("ATTESTED\n\nCurrent model identity: p/m."));
  assert.equal(ok.suffix_utf16_len, "\n\nCurrent model identity: p/m.".length);
  assert.equal(ok.suffix_hash_b64u, sha256B64u("\n\nCurrent model identity: p/m."));
  assert.deepEqual(Object.keys(ok), [
    "llm_call_version", "call_id", "provider", "model", "system_prompt_hash_b64u", "system_prompt_report_hash_b64u",
    "system_text_hash_b64u", "attested_prefix", "suffix_utf16_len", "suffix_hash_b64u",
  ]);
  const exact = llmCallPayload({ ...base, systemText: "ATTESTED" });
  assert.equal(exact.suffix_utf16_len, 0);
  const bad = llmCallPayload({ ...base, systemText: "OTHER ATTESTED" });
  assert.equal(bad.attested_prefix, false);
  assert.equal(bad.suffix_hash_b64u, null);
});
