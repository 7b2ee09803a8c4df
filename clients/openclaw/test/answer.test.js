// Signed control answers (answer.js) against the Go implementation's vector
// (wire/answer), the strict statement rules, and the cost of a check.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, createPrivateKey, sign, verify as edVerify } from "node:crypto";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { ANSWER_LABEL, AnswerRefused, attesterPin, requestHash, selfProcess, verifyAnswer } from "../src/answer.js";
import { ed25519FromDidKey, didKeyFromEd25519 } from "../src/didkey.js";

// wire/answer/answer_test.go: key seed SHA-256("clawea answer test key").
const SEED = createHash("sha256").update("clawea answer test key").digest();
const KEY = createPrivateKey({ key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), SEED]), format: "der", type: "pkcs8" });
const DID = "did:key:z6MknmNb1n1CG3KALNCTZ9FCtAJrQzjsoEcWmysmdFTqf9eR";
const STATEMENT = '{"answer_version":"1","attester_did":"did:key:z6MknmNb1n1CG3KALNCTZ9FCtAJrQzjsoEcWmysmdFTqf9eR","peer_pid":4242,"peer_start_time":123456,"request_hash_b64u":"_tm5F2iqwzCwZpbuhNwRxO_BxugjEPA4JunCcyIjtJk","response_hash_b64u":"r4MNvcQjSE-gt_cbWaASumq01AtmALFbhR1oNDqOaFE","run_id":"run_abc","seq":3,"status":200}';
const SIGNATURE = "6mb_7br03BarptyIH43t7tPtLW_RstLsEbgSnCCcF0sQ8cesuFbk0hz6Ba9aQSmrrqG7ptnxxbbCK_5tL0JlAA";
const BODY = Buffer.from('{"allow":true}\n');
const REQUEST = Buffer.from('{"turn_id":"turn_1","tool":"read","params":{"path":"x"}}');

const headers = (/** @type {string} */ st, /** @type {string} */ sig) => ({ "clawea-answer-statement": Buffer.from(st).toString("base64url"), "clawea-answer-signature": sig });
const want = () => ({ runId: "run_abc", seq: 3, status: 200, requestHash: requestHash("POST", "/v1/runs/run_abc/tool-calls", REQUEST), body: BODY, pid: 4242, startTime: 123456 });
const signed = (/** @type {string} */ st) => headers(st, sign(null, Buffer.concat([Buffer.from(ANSWER_LABEL), Buffer.of(0), Buffer.from(st)]), KEY).toString("base64url"));
/** @param {() => unknown} f @param {string} code */
const refused = (f, code) => assert.throws(f, (/** @type {any} */ e) => e instanceof AnswerRefused && e.code === code, code);

test("the Go vector verifies, byte for byte", () => {
  assert.equal(requestHash("POST", "/v1/runs/run_abc/tool-calls", REQUEST), "_tm5F2iqwzCwZpbuhNwRxO_BxugjEPA4JunCcyIjtJk");
  assert.equal(signed(STATEMENT)["clawea-answer-signature"], SIGNATURE, "deterministic signature");
  const st = verifyAnswer(attesterPin(DID), headers(STATEMENT, SIGNATURE), want());
  assert.equal(st.seq, 3);
  assert.equal(didKeyFromEd25519(ed25519FromDidKey(DID)), DID);
});

test("every wrong answer is refused with its own reason", () => {
  const pin = attesterPin(DID);
  refused(() => verifyAnswer(pin, {}, want()), "ANSWER_UNSIGNED");
  refused(() => verifyAnswer(pin, { "clawea-answer-statement": headers(STATEMENT, "")["clawea-answer-statement"] }, want()), "ANSWER_UNSIGNED");
  refused(() => verifyAnswer(pin, headers(STATEMENT.replace('"seq":3', '"seq":4'), SIGNATURE), want()), "ANSWER_SIGNATURE_INVALID");
  refused(() => verifyAnswer(pin, headers(STATEMENT, SIGNATURE.slice(0, 80)), want()), "ANSWER_MALFORMED");
  // Another attester's answer; and this key's answer pinned to another DID.
  refused(() => verifyAnswer(attesterPin("did:key:z6MkvpWR9ZPqyZYK3DALwE6JxQGGM751ug37oDbZzMvZUzKo"), headers(STATEMENT, SIGNATURE), want()), "ANSWER_WRONG_SIGNER");
  refused(() => verifyAnswer(pin, signed(STATEMENT.replace(DID, "did:key:z6MkvpWR9ZPqyZYK3DALwE6JxQGGM751ug37oDbZzMvZUzKo")), want()), "ANSWER_WRONG_SIGNER");
  // Signed but not canonical, or not a statement.
  refused(() => verifyAnswer(pin, signed(" " + STATEMENT), want()), "ANSWER_MALFORMED");
  refused(() => verifyAnswer(pin, signed(STATEMENT.replace('"seq":3', '"seq":3,"seq":3')), want()), "ANSWER_MALFORMED");
  refused(() => verifyAnswer(pin, signed(STATEMENT.replace('"seq":3', '"seq":3.5')), want()), "ANSWER_MALFORMED");
  refused(() => verifyAnswer(pin, signed(STATEMENT.replace('"status":200', '"status":403')), want()), "ANSWER_MALFORMED");
  refused(() => verifyAnswer(pin, signed(STATEMENT.replace('"answer_version":"1"', '"answer_version":"2"')), want()), "ANSWER_MALFORMED");
  const good = headers(STATEMENT, SIGNATURE);
  refused(() => verifyAnswer(pin, good, { ...want(), requestHash: requestHash("POST", "/v1/runs/run_abc/tool-calls", Buffer.from("{}")) }), "ANSWER_REQUEST_MISMATCH");
  refused(() => verifyAnswer(pin, good, { ...want(), body: Buffer.from('{"allow":false}\n') }), "ANSWER_RESPONSE_MISMATCH");
  refused(() => verifyAnswer(pin, good, { ...want(), status: 201 }), "ANSWER_STATUS_MISMATCH");
  refused(() => verifyAnswer(pin, good, { ...want(), pid: 4243 }), "ANSWER_PEER_MISMATCH");
  refused(() => verifyAnswer(pin, good, { ...want(), startTime: 123457 }), "ANSWER_PEER_MISMATCH");
  refused(() => verifyAnswer(pin, good, { ...want(), runId: "run_abd" }), "ANSWER_RUN_MISMATCH");
  refused(() => verifyAnswer(pin, good, { ...want(), seq: 4 }), "ANSWER_SEQUENCE");
  refused(() => verifyAnswer(pin, good, { ...want(), seq: 2 }), "ANSWER_SEQUENCE");
});

test("this process's start time is read as the attester reads it", (t) => {
  const me = selfProcess();
  assert.equal(me.pid, process.pid);
  assert.ok(Number.isSafeInteger(me.startTime) && me.startTime > 0);
  const dir = mkdtempSync(join(tmpdir(), "clawea-stat-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const tail = " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 123456789 23 24\n";
  const f = join(dir, "stat");
  writeFileSync(f, "42 (a) (b) ) S 9)" + tail);
  assert.equal(selfProcess(f).startTime, 123456789);
  for (const bad of ["42 sh" + tail, "42 (sh) S 1 2 3\n", "42 (sh) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -1 23\n"]) {
    writeFileSync(f, bad);
    assert.throws(() => selfProcess(f));
  }
});

test("the cost of checking an answer", (t) => {
  const pin = attesterPin(DID);
  const h = headers(STATEMENT, SIGNATURE);
  const n = 2000;
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) verifyAnswer(pin, h, want());
  const us = Number(process.hrtime.bigint() - start) / 1000 / n;
  // The bare Ed25519 verification, for scale on this machine.
  const msg = Buffer.concat([Buffer.from(ANSWER_LABEL), Buffer.of(0), Buffer.from(STATEMENT)]);
  const sig = Buffer.from(SIGNATURE, "base64url");
  const s2 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) edVerify(null, msg, pin.key, sig);
  const raw = Number(process.hrtime.bigint() - s2) / 1000 / n;
  t.diagnostic(`verifyAnswer (request hash, Ed25519 verify, statement checks): ${us.toFixed(1)} µs per answer; bare Ed25519 verify ${raw.toFixed(1)} µs`);
  assert.ok(us < 5000, `${us} µs per answer`);
});
