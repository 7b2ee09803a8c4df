// The controller against a fake attester: the fail-closed paths and the
// artifacts of a good run.
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync, readFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { verify as edVerify, createPublicKey } from "node:crypto";
import { Controller, checkHookAccess, parseConfig, registerRefusing, senderOf } from "../src/plugin.js";
import { sha256B64u } from "../src/hash.js";
import { isValidEvent } from "../src/poh.js";
import { startFake, newKey } from "./fake-attester.js";
import { selfProcess } from "../src/answer.js";

const quiet = { info() {}, warn() {}, error() {} };
// The did:key of the Go vectors' test key (wire.test.js).
const DID = "did:key:z6MkvpWR9ZPqyZYK3DALwE6JxQGGM751ug37oDbZzMvZUzKo";

/** @param {Awaited<ReturnType<typeof startFake>>} f @param {object} [extra] */
function controller(f, extra = {}) {
  writeFileSync(join(f.dir, "pack.enc"), "sealed-bytes");
  writeFileSync(join(f.dir, "manifest.json"), '{"m":1}');
  const cfg = parseConfig({
    controlSocket: f.socket, pack: join(f.dir, "pack.enc"), manifest: join(f.dir, "manifest.json"),
    reportHashB64u: f.reportHash, attesterDid: f.did, outDir: join(f.dir, "out"), timeoutMs: 2000, ...extra,
  });
  return new Controller(cfg, { log: quiet, harnessVersion: "2026.9.6" });
}

const ctx = { runId: "oc-run-1", agentId: "main", sessionKey: "agent:main:main" };
const suffix = "\n<!-- OPENCLAW_CACHE_BOUNDARY -->\n\nCurrent model identity: scripted/scripted.";

test("config is parsed strictly", () => {
  const ok = { controlSocket: "/run/c.sock", pack: "/p", manifest: "/m", reportHashB64u: sha256B64u("r"), attesterDid: DID };
  assert.equal(parseConfig(ok).localSender, "cli:local");
  assert.throws(() => parseConfig(undefined));
  assert.throws(() => parseConfig({ ...ok, extra: 1 }), /unknown key/);
  assert.throws(() => parseConfig({ ...ok, controlSocket: "rel.sock" }), /absolute/);
  assert.throws(() => parseConfig({ ...ok, reportHashB64u: "abc" }), /reportHashB64u/);
  assert.throws(() => parseConfig({ ...ok, localSender: "nocolon" }), /localSender/);
  assert.throws(() => parseConfig({ ...ok, timeoutMs: 0 }), /timeoutMs/);
  // Without the attester's DID no answer can be checked: refused.
  assert.throws(() => parseConfig({ ...ok, attesterDid: undefined }), /attesterDid is required/);
  assert.throws(() => parseConfig({ ...ok, attesterDid: "did:key:z6MkX" }), /attesterDid/);
  assert.throws(() => parseConfig({ ...ok, attesterDid: DID + "1" }), /attesterDid/);
  // Owners are the attester's configuration; the plugin holds no list.
  assert.throws(() => parseConfig({ ...ok, owners: ["cli:local"] }), /unknown key/);
});

test("sender comes from the channel, else the configured local sender", () => {
  const cfg = parseConfig({ controlSocket: "/s", pack: "/p", manifest: "/m", reportHashB64u: sha256B64u("r"), attesterDid: DID, localSender: "cli:guest" });
  assert.deepEqual(senderOf(cfg, {}, {}), { channel: "cli", sender_id: "guest" });
  assert.deepEqual(senderOf(cfg, { channelId: "telegram", senderId: "42" }, {}), { channel: "telegram", sender_id: "42" });
  assert.deepEqual(senderOf(cfg, {}, { channel: "signal", senderId: "+1" }), { channel: "signal", sender_id: "+1" });
});

test("a good run: attested prompt, turn, gate, verify, bundle and attestation", async (t) => {
  const f = await startFake();
  t.after(() => f.close());
  const c = controller(f, { agentKey: undefined });
  const built = await c.beforePromptBuild({}, ctx);
  assert.deepEqual(built, { systemPrompt: f.prompt });
  assert.deepEqual(await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt + suffix }, ctx), { outcome: "pass" });
  // Asked again for the same message (a retry): the turn stays, none is added.
  assert.deepEqual(await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt + suffix }, ctx), { outcome: "pass" });
  assert.equal(f.requests.filter((r) => r.url.endsWith("/turns")).length, 1);
  const turnReq = f.requests.find((r) => r.url.endsWith("/turns"));
  assert.deepEqual(turnReq.body, { channel: "cli", sender_id: "local", message_id: "oc-run-1", content_sha256_b64u: sha256B64u("hi") });
  c.llmInput({ provider: "scripted", model: "scripted", systemPrompt: f.prompt + suffix }, ctx);
  c.modelCallStarted({ runId: ctx.runId, callId: "c1", provider: "scripted", model: "scripted" }, ctx);

  assert.equal(await c.beforeToolCall({ toolName: "read", params: { path: "x" } }, ctx), undefined);
  const blocked = await c.beforeToolCall({ toolName: "exec", params: { command: "ls" } }, ctx);
  assert.deepEqual(blocked, { block: true, blockReason: "clawea gate (verification_gate): call verify first" });
  assert.equal((await c.verifyTool({ sessionKey: ctx.sessionKey }, { message_id: "m" })).details.verified, false, "message_id alone");
  assert.equal((await c.verifyTool({ sessionKey: ctx.sessionKey }, { message_id: "m", content_sha256_b64u: "x" })).details.verified, false, "bad hash");
  assert.ok(!f.requests.some((r) => r.url.endsWith("/verify")), "refused before asking");
  const v = await c.verifyTool({ sessionKey: ctx.sessionKey }, {});
  assert.equal(v.details.verified, true);
  assert.equal(await c.beforeToolCall({ toolName: "exec", params: { command: "ls" } }, ctx), undefined);
  c.modelCallStarted({ runId: ctx.runId, callId: "c2", provider: "scripted", model: "scripted" }, ctx);

  await c.agentEnd({}, ctx);
  // Every request after POST /v1/runs carried the run's capability.
  for (const r of f.requests.slice(1)) assert.equal(r.auth, "Bearer " + f.cap, r.url);
  assert.ok(f.isClosed(), "the run is closed at the end");
  assert.equal(c.runs.size, 0, "the run is forgotten");
  assert.equal((await c.beforeToolCall({ toolName: "read", params: { path: "x" } }, ctx))?.block, true, "a late tool call is blocked");
  assert.equal((await c.verifyTool({ sessionKey: ctx.sessionKey }, {})).details.verified, false);
  const dir = join(f.dir, "out", "run_fake_1");
  for (const n of ["bundle.json", "attestation.json", "evidence.jws", "audit.jsonl"]) assert.ok(existsSync(join(dir, n)), n);
  const bundle = JSON.parse(readFileSync(join(dir, "bundle.json"), "utf8"));
  const p = bundle.payload;
  assert.deepEqual(p.event_chain[0], f.promptCommitted);
  assert.deepEqual(p.event_chain.map((/** @type {any} */ e) => e.event_type), ["prompt_committed", "llm_call", "tool_call", "tool_call", "llm_call"]);
  for (const e of p.event_chain) assert.ok(isValidEvent(e));
  for (let i = 1; i < p.event_chain.length; i++) assert.equal(p.event_chain[i].prev_hash_b64u, p.event_chain[i - 1].event_hash_b64u);
  // tool_call events commit to the allowed calls (binding "call"): each
  // event's payload is in clawea_tool_calls, naming the decision's audit
  // seq, the turn, the tool and the gate's params hash.
  const allowed = f.requests.filter((r) => r.url.endsWith("/tool-calls") && !(r.body.tool === "exec" && f.requests.indexOf(r) < f.requests.findIndex((x) => x.url.endsWith("/verify"))));
  const toolEvents = p.event_chain.filter((/** @type {any} */ e) => e.event_type === "tool_call");
  assert.equal(p.metadata.clawea_tool_calls.length, allowed.length);
  assert.equal(toolEvents.length, allowed.length);
  p.metadata.clawea_tool_calls.forEach((/** @type {any} */ call, /** @type {number} */ i) => {
    assert.deepEqual(Object.keys(call), ["tool_call_version", "audit_seq", "turn_id", "tool", "params_hash_b64u"]);
    assert.equal(sha256B64u(JSON.stringify(call)), toolEvents[i].payload_hash_b64u);
    assert.equal(call.tool_call_version, "1");
    assert.equal(call.tool, allowed[i].body.tool);
    assert.equal(call.turn_id, allowed[i].body.turn_id);
    assert.equal(call.params_hash_b64u, sha256B64u(JSON.stringify(allowed[i].body.params)));
    assert.equal(call.audit_seq, f.requests.indexOf(allowed[i]) + 1);
  });
  // llm_call events commit to their payloads, which state the suffix.
  const llm = p.event_chain.filter((/** @type {any} */ e) => e.event_type === "llm_call");
  assert.equal(p.metadata.clawea_llm_calls.length, 2);
  p.metadata.clawea_llm_calls.forEach((/** @type {any} */ pl, /** @type {number} */ i) => {
    assert.equal(sha256B64u(JSON.stringify(pl)), llm[i].payload_hash_b64u);
    assert.equal(pl.attested_prefix, true);
    assert.equal(pl.suffix_utf16_len, suffix.length);
    assert.equal(pl.system_text_hash_b64u, sha256B64u(f.prompt + suffix));
    assert.equal(pl.call_id, `c${i + 1}`);
  });
  assert.equal(p.metadata.system_prompt_report.calls.length, 2);
  assert.equal(p.metadata.clawea.system_prompt_report_hash_b64u, f.reportHash);
  // The envelope's signature verifies with the signer's did:key.
  assert.equal(bundle.payload_hash_b64u, sha256B64u(JSON.stringify(p)));
  assert.equal(bundle.signer_did, p.agent_did);
  const attReq = f.requests.find((r) => r.url.endsWith("/attestation"));
  assert.equal(attReq.body.agent_did, p.agent_did);
  const raw = decodeDidKey(bundle.signer_did);
  const pub = createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]), format: "der", type: "spki" });
  assert.ok(edVerify(null, Buffer.from(bundle.payload_hash_b64u), pub, Buffer.from(bundle.signature_b64u, "base64url")));
});

test("unreachable attester: the run is blocked, not run with OpenClaw's prompt", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "clawea-none-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "p"), "x");
  writeFileSync(join(dir, "m"), "{}");
  const c = new Controller(parseConfig({ controlSocket: join(dir, "missing.sock"), pack: join(dir, "p"), manifest: join(dir, "m"), reportHashB64u: sha256B64u("r"), attesterDid: DID, timeoutMs: 500 }), { log: quiet });
  assert.equal(await c.beforePromptBuild({}, ctx), undefined);
  const d = await c.beforeAgentRun({ prompt: "hi", systemPrompt: "OpenClaw's own prompt" }, ctx);
  assert.equal(d.outcome, "block");
  assert.match(d.reason, /attester run not started/);
  assert.equal((await c.beforeToolCall({ toolName: "read", params: {} }, ctx))?.block, true);
});

test("a prompt that does not match its hash blocks the run and closes it", async (t) => {
  for (const o of [{ servedPrompt: "tampered prompt" }, { headerHash: sha256B64u("other") }]) {
    const f = await startFake(o);
    t.after(() => f.close());
    const c = controller(f);
    assert.equal(await c.beforePromptBuild({}, ctx), undefined);
    const d = await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt }, ctx);
    assert.equal(d.outcome, "block");
    assert.match(d.reason, /PROMPT_COMMITMENT_MISMATCH/);
    assert.ok(f.isClosed());
    assert.ok(!f.requests.some((r) => r.url.endsWith("/turns")), "no turn opened");
    await c.agentEnd({}, ctx);
    assert.equal(f.requests.filter((r) => r.method === "DELETE").length, 1, "closed exactly once");
  }
});

test("a system prompt without the attested prefix blocks the run", async (t) => {
  const f = await startFake();
  t.after(() => f.close());
  const c = controller(f);
  await c.beforePromptBuild({}, ctx);
  const d = await c.beforeAgentRun({ prompt: "hi", systemPrompt: "another plugin's prompt\n" + f.prompt }, ctx);
  assert.equal(d.outcome, "block");
  assert.equal((await c.beforeToolCall({ toolName: "read", params: {} }, ctx))?.block, true);
});

test("a model call before llm_input poisons the run", async (t) => {
  const f = await startFake({ decide: () => ({ allow: true }) });
  t.after(() => f.close());
  const c = controller(f);
  await c.beforePromptBuild({}, ctx);
  await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt }, ctx);
  c.modelCallStarted({ runId: ctx.runId, callId: "c1", provider: "p", model: "m" }, ctx);
  assert.equal((await c.beforeToolCall({ toolName: "read", params: {} }, ctx))?.block, true);
  await c.agentEnd({}, ctx);
  assert.ok(!f.requests.some((r) => r.url.endsWith("/attestation")));
});

test("a model input without the attested prefix poisons the run: no tools, no attestation", async (t) => {
  const f = await startFake({ decide: () => ({ allow: true }) });
  t.after(() => f.close());
  const c = controller(f);
  await c.beforePromptBuild({}, ctx);
  await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt }, ctx);
  c.llmInput({ provider: "p", model: "m", systemPrompt: "something else" }, ctx);
  assert.equal((await c.beforeToolCall({ toolName: "read", params: {} }, ctx))?.block, true);
  await c.agentEnd({}, ctx);
  assert.ok(!f.requests.some((r) => r.url.endsWith("/attestation")));
  assert.ok(f.isClosed());
});

test("gate errors and foreign params hashes block the tool call", async (t) => {
  const f = await startFake({ failToolCalls: true });
  t.after(() => f.close());
  const c = controller(f);
  await c.beforePromptBuild({}, ctx);
  await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt }, ctx);
  const d = await c.beforeToolCall({ toolName: "read", params: { path: "a" } }, ctx);
  assert.equal(d?.block, true);
  assert.match(d?.blockReason ?? "", /gate could not be asked/);

  const g = await startFake({ decide: () => ({ allow: true, params_hash_b64u: sha256B64u("{}") }) });
  t.after(() => g.close());
  const c2 = controller(g);
  await c2.beforePromptBuild({}, ctx);
  await c2.beforeAgentRun({ prompt: "hi", systemPrompt: g.prompt }, ctx);
  const d2 = await c2.beforeToolCall({ toolName: "read", params: { path: "a" } }, ctx);
  assert.match(d2?.blockReason ?? "", /other parameters/);
  // Parameters JSON cannot carry are refused before asking.
  const d3 = await c2.beforeToolCall({ toolName: "read", params: { n: NaN } }, ctx);
  assert.equal(d3?.block, true);
});

test("a non-owner's verify is refused by the attester", async (t) => {
  const f = await startFake();
  t.after(() => f.close());
  const c = controller(f, { localSender: "cli:guest" });
  await c.beforePromptBuild({}, ctx);
  await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt }, ctx);
  const v = await c.verifyTool({ sessionKey: ctx.sessionKey }, {});
  assert.equal(v.details.verified, false);
  assert.match(v.content[0].text, /only the owner/);
  assert.equal((await c.beforeToolCall({ toolName: "exec", params: { command: "ls" } }, ctx))?.block, true);
});

/** @param {string} did */
function decodeDidKey(did) {
  const A = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  let n = 0n;
  for (const ch of did.slice("did:key:z".length)) n = n * 58n + BigInt(A.indexOf(ch));
  const hex = n.toString(16).padStart(68, "0");
  const b = Buffer.from(hex, "hex");
  assert.equal(b[0], 0xed);
  assert.equal(b[1], 0x01);
  return b.subarray(2);
}

test("a plugin with a bad config blocks every run and tool call", async () => {
  /** @type {Record<string, Function>} */
  const hooks = {};
  registerRefusing({ on: (/** @type {string} */ n, /** @type {Function} */ f) => (hooks[n] = f) }, "bad config");
  assert.equal(hooks.before_agent_run().outcome, "block");
  assert.equal(hooks.before_tool_call().block, true);
});

test("the plugin requires OpenClaw to let its conversation hooks fire", () => {
  const entries = (/** @type {any} */ hooks) => ({ plugins: { entries: { clawea: { enabled: true, hooks } } } });
  checkHookAccess(entries({ allowConversationAccess: true }));
  assert.throws(() => checkHookAccess(entries(undefined)), /allowConversationAccess/);
  assert.throws(() => checkHookAccess(entries({ allowConversationAccess: "true" })), /allowConversationAccess/);
  assert.throws(() => checkHookAccess(entries({ allowConversationAccess: true, allowPromptInjection: false })), /allowPromptInjection/);
  assert.throws(() => checkHookAccess(undefined), /allowConversationAccess/);
});

test("hooks whose context has no run id find the run by the event's run id", async (t) => {
  const f = await startFake({ decide: () => ({ allow: true }) });
  t.after(() => f.close());
  const c = controller(f);
  await c.beforePromptBuild({}, ctx);
  await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt + suffix }, ctx);
  const bare = { sessionKey: ctx.sessionKey };
  c.llmInput({ runId: ctx.runId, systemPrompt: f.prompt + suffix }, bare);
  c.modelCallStarted({ runId: ctx.runId, callId: "c1", provider: "p", model: "m" }, bare);
  assert.equal(await c.beforeToolCall({ toolName: "read", params: {}, runId: ctx.runId }, bare), undefined);
  assert.equal((await c.beforeToolCall({ toolName: "read", params: {} }, bare))?.block, true, "no run id at all");
  await c.agentEnd({}, ctx);
  assert.ok(f.requests.some((r) => r.url.endsWith("/attestation")), "the run was attested");
});

// A relay in front of the attester (the fake's attack options): each bad
// answer is refused with its reason code, and from then on the plugin
// refuses every run and tool call, as with a refused config, and requests
// no attestation.
/**
 * @param {import("node:test").TestContext} t
 * @param {Parameters<typeof startFake>[0]} o
 */
async function relayed(t, o) {
  const f = await startFake(o);
  t.after(() => f.close());
  const c = controller(f);
  await c.beforePromptBuild({}, ctx);
  return { f, c, run: await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt + suffix }, ctx) };
}

/** @param {Controller} c @param {Awaited<ReturnType<typeof startFake>>} f @param {string} code */
async function assertRefusesEverything(c, f, code) {
  assert.match(c.refused, new RegExp(code));
  const next = { runId: "oc-run-2", agentId: "main", sessionKey: "agent:main:other" };
  assert.equal(await c.beforePromptBuild({}, next), undefined);
  const d = await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt }, next);
  assert.equal(d.outcome, "block");
  assert.match(d.reason, new RegExp(`refusing to run: .*${code}`));
  const tc = await c.beforeToolCall({ toolName: "read", params: {} }, ctx);
  assert.equal(tc?.block, true);
  assert.match(tc?.blockReason ?? "", new RegExp(code));
  assert.equal((await c.verifyTool({ sessionKey: ctx.sessionKey }, {})).details.verified, false);
  const creates = f.requests.filter((r) => r.url === "/v1/runs").length;
  c.llmInput({ systemPrompt: f.prompt + suffix }, ctx);
  c.modelCallStarted({ runId: ctx.runId, callId: "c1", provider: "p", model: "m" }, ctx);
  await c.agentEnd({}, ctx);
  assert.ok(!f.requests.some((r) => r.url.endsWith("/attestation")), "no attestation requested");
  assert.equal(f.requests.filter((r) => r.url === "/v1/runs").length, creates, "no run created after the refusal");
}

// Answers tampered with on a tool call: the calls in allowed pass, the
// next call is refused with code, and from then on everything is.
for (const { title, fake, allowed = [], call, code } of [
  {
    title: "an unsigned answer is refused", code: "ANSWER_UNSIGNED",
    fake: { unsignedOp: "tool-calls", decide: () => ({ allow: true }) },
    call: { toolName: "read", params: { path: "x" } },
  },
  {
    title: "a deny flipped into an allow is refused", code: "ANSWER_RESPONSE_MISMATCH",
    fake: { flipOp: "tool-calls", decide: () => ({ allow: false, stage: "tool_policy", reason: "denied" }) },
    call: { toolName: "exec", params: { command: "rm -rf /" } },
  },
  {
    // The same call twice: the second gets the first's signed answer again.
    title: "a replayed answer is refused", code: "ANSWER_SEQUENCE",
    fake: { replayOp: "tool-calls", decide: (/** @type {string} */ tool) => ({ allow: tool === "read" }) },
    allowed: [{ toolName: "read", params: { path: "x" } }],
    call: { toolName: "read", params: { path: "x" } },
  },
  {
    title: "another request's answer is refused", code: "ANSWER_REQUEST_MISMATCH",
    fake: { replayOp: "tool-calls", decide: () => ({ allow: true }) },
    allowed: [{ toolName: "read", params: { path: "x" } }],
    call: { toolName: "exec", params: { command: "id" } },
  },
  {
    title: "a withheld answer puts the next one out of order", code: "ANSWER_SEQUENCE",
    fake: { skipSeq: "tool-calls", decide: () => ({ allow: true }) },
    call: { toolName: "read", params: { path: "x" } },
  },
]) {
  test(`relay: ${title} (${code})`, async (t) => {
    const { f, c, run } = await relayed(t, fake);
    assert.equal(run.outcome, "pass");
    for (const a of allowed) assert.equal(await c.beforeToolCall(a, ctx), undefined);
    const d = await c.beforeToolCall(call, ctx);
    assert.equal(d?.block, true);
    assert.match(d?.blockReason ?? "", new RegExp(code));
    await assertRefusesEverything(c, f, code);
  });
}

test("relay: an answer signed by another attester is refused (ANSWER_WRONG_SIGNER)", async (t) => {
  const { f, c, run } = await relayed(t, { signer: newKey() });
  assert.equal(run.outcome, "block");
  assert.match(run.reason, /ANSWER_WRONG_SIGNER/);
  assert.ok(!f.requests.some((r) => r.url.endsWith("/prompt")), "nothing asked after the refused creation");
  await assertRefusesEverything(c, f, "ANSWER_WRONG_SIGNER");
});

test("relay: a non-owner turn rewritten to an owner turn is refused (ANSWER_RESPONSE_MISMATCH)", async (t) => {
  const { f, c, run } = await relayed(t, { flipOp: "turns", owners: [] });
  assert.equal(run.outcome, "block");
  assert.match(run.reason, /ANSWER_RESPONSE_MISMATCH/);
  await assertRefusesEverything(c, f, "ANSWER_RESPONSE_MISMATCH");
});

test("relay: an answer for another process is refused (ANSWER_PEER_MISMATCH)", async (t) => {
  const { f, c, run } = await relayed(t, { peerPid: process.pid + 1 });
  assert.equal(run.outcome, "block");
  assert.match(run.reason, /ANSWER_PEER_MISMATCH/);
  await assertRefusesEverything(c, f, "ANSWER_PEER_MISMATCH");
});

test("a run's requests go one at a time, so concurrent tool calls stay in sequence", async (t) => {
  const { c, run } = await relayed(t, { decide: () => ({ allow: true }) });
  assert.equal(run.outcome, "pass");
  const ds = await Promise.all(Array.from({ length: 8 }, (_, i) => c.beforeToolCall({ toolName: "read", params: { path: `p${i}` } }, ctx)));
  assert.deepEqual(ds, Array(8).fill(undefined));
  assert.equal(c.refused, "");
});

test("the plugin refuses to start without its own start time", () => {
  assert.throws(() => selfProcess("/nonexistent/stat"));
});
