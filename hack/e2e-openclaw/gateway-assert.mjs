#!/usr/bin/env node
// The assertions of gateway.sh (make e2e-openclaw): every model call of the
// gateway turns went through the attester's gateway and is receipted, the
// upstream's request log matches the receipts, packctl verify accepts each
// run, and the plugin-less OpenClaw never reached the upstream.
//
//   node gateway-assert.mjs --gw DIR --packctl BIN --out E2E_OUT
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { parseArgs } from "node:util";
import { verifyReceipt } from "../../clients/openclaw/src/gateway.js";
import { attesterPin } from "../../clients/openclaw/src/answer.js";
import { sha256B64u } from "../../clients/openclaw/src/hash.js";

const { values: o } = parseArgs({ options: { gw: { type: "string" }, packctl: { type: "string" }, out: { type: "string" } }, strict: true });
if (!o.gw || !o.packctl || !o.out) {
  console.error("gateway-assert: --gw, --packctl and --out are required");
  process.exit(1);
}
const gw = o.gw;
let failed = 0;
const need = (/** @type {unknown} */ ok, /** @type {string} */ msg) => {
  if (!ok) {
    console.error(`e2e-openclaw: FAIL: gateway: ${msg}`);
    failed++;
  }
  return Boolean(ok);
};
const json = (/** @type {string} */ f) => JSON.parse(readFileSync(f, "utf8"));
const log = readFileSync(join(gw, "upstream.log"), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const policy = json(join(o.out, "policy.json"));

for (const api of ["openai-chat-completions", "anthropic-messages"]) {
  const failedBefore = failed;
  const d = join(gw, api);
  const did = readFileSync(join(d, "attester.did"), "utf8").trim();
  for (const [n, text] of [[1, "first gateway message done"], [2, "second gateway message done"]]) {
    const rc = readFileSync(join(gw, `${api}-${n}.rc`), "utf8").trim();
    need(rc === "0", `${api} message ${n}: openclaw exited ${rc}`);
    need(readFileSync(join(gw, `${api}-${n}.json`), "utf8").includes(/** @type {string} */ (text)), `${api} message ${n}: the scripted answer did not reach OpenClaw`);
  }
  const runs = readdirSync(join(d, "runs")).map((id) => ({ id, dir: join(d, "runs", id), bundle: json(join(d, "runs", id, "bundle.json")) }));
  runs.sort((a, b) => a.bundle.payload.event_chain[0].timestamp.localeCompare(b.bundle.payload.event_chain[0].timestamp));
  if (!need(runs.length === 2, `${api}: want 2 attested runs (one per message), got ${runs.length}`)) continue;
  const upstream = log.filter((r) => r.api === (api === "anthropic-messages" ? "anthropic-messages" : "openai-completions"));
  /** @type {any[]} */
  const calls = [];
  for (const run of runs) {
    const p = run.bundle.payload;
    const llm = p.event_chain.filter((/** @type {any} */ e) => e.event_type === "llm_call");
    need(llm.length >= 1 && Array.isArray(p.receipts) && p.receipts.length === llm.length,
      `${api} run ${run.id}: ${llm.length} llm_call events, ${p.receipts?.length ?? 0} receipts`);
    llm.forEach((/** @type {any} */ e, /** @type {number} */ i) => calls.push({ run, event: e, receipt: p.receipts?.[i], payload: p.metadata.clawea_llm_calls[i] }));
  }
  need(runs[0].bundle.payload.event_chain.some((/** @type {any} */ e) => e.event_type === "tool_call"), `${api}: the first message's tool round (verify) is not in its chain`);
  // The first message's denied verify call: its blocked result went through
  // the gateway (the turn went on to its allowed call and its answer).
  const audit = readFileSync(join(runs[0].dir, "audit.jsonl"), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  need(audit.some((r) => r.tool === "verify" && r.decision === "deny" && r.stage === "external_verifier") &&
    audit.some((r) => r.tool === "verify" && r.decision === "allow"),
    `${api}: the first message's audit lacks the denied and then allowed verify calls (${audit.map((r) => r.tool + ":" + r.decision).join(",")})`);
  // The upstream saw exactly the calls the receipts name, in order.
  need(upstream.length === calls.length && upstream.every((r) => r.status === 200 && r.key_ok === true),
    `${api}: the upstream logged ${upstream.length} requests (${upstream.map((r) => r.status).join(",")}), the bundles hold ${calls.length} llm_calls`);
  calls.forEach((c, i) => {
    const u = upstream[i];
    if (!u || !c.receipt) return;
    const runId = c.run.bundle.payload.event_chain[0].run_id;
    try {
      verifyReceipt(attesterPin(did), Buffer.from(JSON.stringify(c.receipt)).toString("base64url"), {
        runId, eventHash: c.event.event_hash_b64u, requestHash: u.request_sha256_b64u, responseHash: u.response_sha256_b64u, provider: "scripted", model: "scripted",
      });
    } catch (e) {
      need(false, `${api} call ${i + 1}: the receipt does not match the upstream's log: ${/** @type {Error} */ (e).message}`);
    }
    need(c.payload.system_text_hash_b64u === u.system_sha256_b64u, `${api} call ${i + 1}: the llm_call's system text hash is not the one the upstream got`);
  });
  // The second message's first request carries the first message's history.
  const second = calls.findIndex((c) => c.run === runs[1]);
  need(second > 0 && upstream[second]?.messages > upstream[0]?.messages, `${api}: the second message's request does not carry the first's history`);
  // packctl verify accepts each run, under the main runs' policy with this
  // attester and this pack (its tool schemas differ).
  const pol = join(d, "policy.json");
  writeFileSync(pol, JSON.stringify({
    ...policy, trusted_attester_dids: [did], expected_gate_policy_hash_b64u: readFileSync(join(d, "gate-policy"), "utf8").trim(),
    expected_report_hash_b64u: sha256B64u(readFileSync(join(d, "report.json"))), expected_system_prompt_hash_b64u: sha256B64u(readFileSync(join(d, "prompt.txt"))),
  }));
  for (const run of runs) {
    let v;
    try {
      v = JSON.parse(execFileSync(o.packctl, ["verify", "--attestation", join(run.dir, "attestation.json"), "--evidence", join(run.dir, "evidence.jws"),
        "--bundle", join(run.dir, "bundle.json"), "--audit", join(run.dir, "audit.jsonl"), "--report", join(d, "report.json"), "--policy", pol, "--json"], { encoding: "utf8" }));
    } catch (e) {
      v = { verdict: "error: " + String(/** @type {any} */ (e).stdout ?? e).slice(0, 2000) };
    }
    need(v.verdict === "verified", `${api} run ${run.id}: packctl verify: ${v.verdict}`);
  }
  if (failed === failedBefore) console.error(`e2e-openclaw: gateway ${api}: ${runs.length} runs, ${calls.length} model calls, each receipted (${sha256B64u(calls.map((c) => c.receipt?.payload_hash_b64u).join(",")).slice(0, 12)}) and matching the upstream's log`);
}

// The plugin-less OpenClaw reached no model.
const before = Number(readFileSync(join(gw, "upstream.before-bare"), "utf8").trim());
need(log.length === before, `the plugin-less OpenClaw's turn reached the upstream (${log.length - before} requests)`);
need(!readFileSync(join(gw, "bare.json"), "utf8").includes("must never be served"), "the plugin-less OpenClaw got a model answer");
need(readFileSync(join(gw, "bare.rc"), "utf8").trim() !== "0", "the plugin-less OpenClaw's turn succeeded");
// ... because its model call found no road, not for another reason (a config
// OpenClaw refused would prove nothing).
const bare = readFileSync(join(gw, "bare.json"), "utf8") + readFileSync(join(gw, "bare.err"), "utf8");
need(!/config is invalid/i.test(bare) && /ECONNREFUSED|connection (error|refused)|fetch failed/i.test(bare), "the plugin-less OpenClaw's turn did not fail on its model call");
process.exit(failed ? 1 : 0);
