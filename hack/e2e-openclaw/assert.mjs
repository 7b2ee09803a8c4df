#!/usr/bin/env node
// The assertions of the OpenClaw end-to-end test (run.sh): what the scripted
// model received back from every tool call, what OpenClaw answered, and
// which runs were attested. Exits 1 on the first failed assertion.
//   node assert.mjs --work DIR --prompt FILE --canary FILE
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({ options: { work: { type: "string" }, prompt: { type: "string" }, canary: { type: "string" }, "openclaw-version": { type: "string" } }, strict: true });
const work = /** @type {string} */ (opts.work);
const prompt = readFileSync(/** @type {string} */ (opts.prompt), "utf8");
let failed = 0;
/** @param {boolean} ok @param {string} what */
function check(ok, what) {
  console.error(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed++;
}

const log = readFileSync(join(work, "model.log"), "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
{
  const errors = log.filter((e) => e.error).map((e) => e.error);
  check(errors.length === 0, errors.length === 0
    ? `the model server served all ${log.length} requests without an error`
    : `the model server failed ${errors.length} of ${log.length} requests: ${errors.join("; ")}`);
}
/** @param {string} scene */
const requests = (scene) => log.filter((e) => e.scene === scene);
/** @param {string} name */
function openclawResult(name) {
  const rc = Number(readFileSync(join(work, `${name}.rc`), "utf8").trim());
  let json = null;
  try {
    json = JSON.parse(readFileSync(join(work, `${name}.json`), "utf8"));
  } catch {
    // checked below
  }
  return { rc, json, text: JSON.stringify(json ?? "") };
}

/**
 * The tool results the model got back, in order, from the last request of
 * a scene (which carries every result of the turn).
 * @param {string} scene
 * @param {number} n
 */
function results(scene, n) {
  const rs = requests(scene);
  const last = rs[rs.length - 1];
  check(rs.length === n + 1 && last?.step === n, `${scene}: the model was asked ${n + 1} times (got ${rs.length})`);
  return /** @type {string[]} */ (last?.tool_results ?? []);
}

// Every model call of an attested turn got the attested prompt first.
for (const scene of ["owner", "guest"]) {
  const rs = requests(scene);
  check(rs.length > 0 && rs.every((r) => r.system_texts?.length === 1 && r.system_texts[0].startsWith(prompt)),
    `${scene}: every model call's system text starts with the attested prompt (${prompt.length} chars)`);
  check(rs.every((r) => r.system_texts?.[0] !== prompt && /Current model identity: scripted\/scripted/.test(r.system_texts?.[0].slice(prompt.length) ?? "")),
    `${scene}: OpenClaw appended its model identity line after the attested prompt (recorded as the suffix)`);
  const verifyVia = scene === "guest" ? "tool_call" : "verify";
  check(rs.every((r) => r.tools.includes(verifyVia) && r.tools.includes("exec")), `${scene}: the model was offered ${verifyVia} and exec`);
}

// The owner turn.
{
  const oc = openclawResult("owner");
  check(oc.rc === 0, `owner: openclaw exited 0 (got ${oc.rc})`);
  check(oc.text.includes("owner turn done"), "owner: openclaw returned the model's final answer");
  const r = results("owner", 8);
  check(/clawea attester/.test(r[0] ?? ""), "owner: an ungated tool (read) ran");
  check(/clawea gate \(verification_gate\)/.test(r[1] ?? "") && /verify/.test(r[1] ?? "") && !/gated-ran/.test(r[1] ?? ""),
    `owner: a gated tool (exec) was blocked until verify: ${clip(r[1])}`);
  check(/^verified: /.test(r[2] ?? ""), `owner: the owner's verify succeeded: ${clip(r[2])}`);
  check(/gated-ran/.test(r[3] ?? ""), `owner: after verify the gated tool ran: ${clip(r[3])}`);
  check(/clawea gate \(external_verifier\)/.test(r[4] ?? "") && /destructive command refused/.test(r[4] ?? ""),
    `owner: the webhook denied a destructive command: ${clip(r[4])}`);
  check(existsSync(/** @type {string} */ (opts.canary)), "owner: the denied command did not run (canary intact)");
  check(/tcp-probe http=403/.test(r[5] ?? ""), `owner: the control API is refused on the public TCP port: ${clip(r[5])}`);
  check(/socket-probe http=401/.test(r[6] ?? ""), `owner: the control socket refuses a call without the run's capability: ${clip(r[6])}`);
  check(/forged-probe http=403/.test(r[7] ?? ""), `owner: the control socket refuses a forged capability: ${clip(r[7])}`);
}

// The non-owner turn.
{
  const oc = openclawResult("guest");
  check(oc.rc === 0, `guest: openclaw exited 0 (got ${oc.rc})`);
  const r = results("guest", 3);
  check(/clawea gate \(verification_gate\)/.test(r[0] ?? ""), `guest: the gated tool was blocked: ${clip(r[0])}`);
  check(/verify refused: only the owner can verify/.test(r[1] ?? ""), `guest: a non-owner cannot verify (through Tool Search's tool_call): ${clip(r[1])}`);
  // Through the bridge the gate saw the target tool, not only tool_call:
  // the run's own audit log names every tool the gate decided.
  const runDirs = readdirSync(join(work, "runs", "guest"));
  const audit = runDirs.length === 1 ? readFileSync(join(work, "runs", "guest", runDirs[0], "audit.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l)) : [];
  const guestTools = audit.map((d) => `${d.tool}:${d.decision}`);
  check(JSON.stringify(guestTools) === JSON.stringify(["exec:deny", "tool_call:allow", "verify:allow", "exec:deny"]),
    `guest: the gate decided the bridge and its target tool (audit log): ${guestTools.join(", ")}`);
  check(/clawea gate \(verification_gate\)/.test(r[2] ?? "") && !/guest-ran/.test(r[2] ?? ""), `guest: the gated tool stayed blocked: ${clip(r[2])}`);
}

// The attester is down: the run is blocked before the model is asked (the
// "down" scene is also used by badcfg: the model must never serve it).
{
  const oc = openclawResult("down");
  check(requests("down").length === 0, "down: the model was never called without the attested prompt");
  check(!oc.text.includes("this must never be served"), "down: openclaw did not answer from the model");
  check(readdirSync(join(work, "runs", "down")).length === 0, "down: nothing was attested");
  check(/attester run not started/.test(oc.text), "down: openclaw reported the run blocked by clawea");
}

// A plugin config the plugin refuses: every run is blocked, not run unattested.
{
  const oc = openclawResult("badcfg");
  check(/clawea: refusing to run: clawea config: localSender/.test(oc.text), "badcfg: the run was blocked by the plugin's refusal");
  check(readdirSync(join(work, "runs", "badcfg")).length === 0, "badcfg: nothing was attested");
}

// OpenClaw not granting the plugin conversation access: OpenClaw skips the
// prompt and run hooks, so the model runs with OpenClaw's own prompt; the
// plugin then refuses every tool call and nothing is attested.
{
  const oc = openclawResult("noaccess");
  const r = results("noaccess", 1);
  check(requests("noaccess").every((q) => !(q.system_texts?.[0] ?? "").startsWith(prompt)), "noaccess: (OpenClaw's doing) the model got OpenClaw's own prompt, not the attested one");
  check(/clawea: refusing to run: OpenClaw must set plugins\.entries\.clawea\.hooks\.allowConversationAccess/.test(r[0] ?? "") && !/noaccess-ran/.test(r[0] ?? ""),
    `noaccess: the plugin refused the tool call: ${clip(r[0])}`);
  check(oc.rc === 0 && readdirSync(join(work, "runs", "noaccess")).length === 0, "noaccess: nothing was attested");
}

// Attested runs: one for the owner turn, one for the guest turn.
for (const scene of ["owner", "guest"]) {
  const dirs = readdirSync(join(work, "runs", scene));
  check(dirs.length === 1 && ["bundle.json", "attestation.json", "evidence.jws", "audit.jsonl"].every((f) => existsSync(join(work, "runs", scene, dirs[0], f))),
    `${scene}: the plugin wrote bundle, attestation, evidence and audit for its run`);
}

// The bundles say honestly what the model received: one llm_call per model
// request, each committing to a payload whose system text is the attested
// prompt plus OpenClaw's suffix. OpenClaw's llm_input text carries the
// cache-boundary marker its openai-completions transport removes, so the
// recorded text is the wire text with the marker put back.
const MARKER = "\n<!-- OPENCLAW_CACHE_BOUNDARY -->";
const sha = (/** @type {string} */ x) => createHash("sha256").update(x, "utf8").digest("base64url");
for (const scene of ["owner", "guest"]) {
  const dirs = readdirSync(join(work, "runs", scene));
  if (dirs.length !== 1) continue;
  const b = JSON.parse(readFileSync(join(work, "runs", scene, dirs[0], "bundle.json"), "utf8"));
  const llm = b.payload.event_chain.filter((/** @type {any} */ e) => e.event_type === "llm_call");
  const calls = b.payload.metadata.clawea_llm_calls ?? [];
  const wire = requests(scene).map((r) => r.system_texts?.[0] ?? "");
  check(llm.length === wire.length && calls.length === llm.length, `${scene}: one llm_call event per model request (${llm.length} events, ${wire.length} requests)`);
  check(b.payload.event_chain[0].event_type === "prompt_committed", `${scene}: the chain starts with the attester's prompt_committed`);
  check(b.payload.metadata.harness?.id === "openclaw" && b.payload.metadata.harness?.version === opts["openclaw-version"],
    `${scene}: the bundle names the harness openclaw ${opts["openclaw-version"]} (got ${JSON.stringify(b.payload.metadata.harness)})`);
  let ok = true;
  calls.forEach((/** @type {any} */ c, /** @type {number} */ i) => {
    const recorded = prompt + MARKER + (wire[i] ?? "").slice(prompt.length);
    ok &&= sha(JSON.stringify(c)) === llm[i].payload_hash_b64u && c.attested_prefix === true &&
      c.system_prompt_hash_b64u === sha(prompt) && c.system_text_hash_b64u === sha(recorded) &&
      c.suffix_utf16_len === recorded.length - prompt.length && c.suffix_hash_b64u === sha(recorded.slice(prompt.length));
  });
  check(ok && calls.length > 0, `${scene}: every llm_call payload is committed by its event and states the attested prefix and the exact suffix the model got`);
}

/** @param {string | undefined} s */
function clip(s) {
  const t = String(s ?? "<none>").replace(/\s+/g, " ");
  return t.length > 160 ? t.slice(0, 160) + "..." : t;
}

if (failed) {
  console.error(`${failed} assertion(s) failed`);
  process.exit(1);
}
