// The model gateway transport: the event-stream reader, the provider wire
// formats, and the controller's model calls through the fake attester's
// gateway, with each way a call must fail closed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { writeFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Controller, PLUGIN_ID, parseConfig, routeOf } from "../src/plugin.js";
import { SSEParser, SSEError } from "../src/sse.js";
import { Assembler, ProviderStreamError, buildRequest, systemTextOf } from "../src/providers.js";
import { verifyReceipt } from "../src/gateway.js";
import { attesterPin } from "../src/answer.js";
import { sha256B64u } from "../src/hash.js";
import { startFake } from "./fake-attester.js";
import { sseReply } from "./upstream.js";

const quiet = { info() {}, warn() {}, error() {} };
const suffix = "\n\nCurrent model identity: scripted/scripted.";

/** Every event of a whole stream fed in one piece. */
const parseAll = (/** @type {string | Buffer} */ s) => {
  const p = new SSEParser();
  return [...p.push(Buffer.from(s)), ...p.end()];
};

test("sse: events survive any split of the bytes, and CRLF or CR line ends", () => {
  for (const api of ["openai-completions", "anthropic-messages"]) {
    const text = sseReply(api, "m", [{ text: "héllo wörld" }, { tool: "exec", args: { command: "ls -l" } }]);
    const whole = parseAll(text);
    assert.ok(whole.length > 5);
    const bytes = Buffer.from(text);
    for (let cut = 1; cut < bytes.length; cut += 3) {
      const p = new SSEParser();
      const got = [...p.push(bytes.subarray(0, cut)), ...p.push(bytes.subarray(cut)), ...p.end()];
      assert.deepEqual(got, whole, `split at ${cut}`);
    }
    assert.deepEqual(parseAll(text.replaceAll("\n", "\r\n")), whole);
    assert.deepEqual(parseAll(text.replaceAll("\n", "\r")), whole);
  }
  assert.deepEqual(parseAll(": comment\nevent: x\ndata: a\ndata:b\nid: 7\n\n"), [{ event: "x", data: "a\nb" }]);
});

test("sse: a stream cut mid-event, an oversized line or event, and invalid UTF-8 are errors", () => {
  assert.throws(() => parseAll("data: {\"a\":1}\n"), SSEError, "cut after a data line");
  assert.throws(() => parseAll("data: {\"a\""), SSEError, "cut inside a line");
  const small = new SSEParser({ line: 16, event: 32 });
  assert.throws(() => small.push(Buffer.from("data: " + "x".repeat(20))), /line is over its bound/);
  const ev = new SSEParser({ line: 16, event: 32 });
  assert.throws(() => ev.push(Buffer.from("data: 0123456789\n".repeat(4))), /event is over its bound/);
  assert.throws(() => parseAll(Buffer.from([0x64, 0x61, 0x74, 0x61, 0x3a, 0xff, 0x0a, 0x0a])), /UTF-8/);
});

test("sse: random bytes give events or an SSEError, nothing else", () => {
  for (let i = 0; i < 500; i++) {
    const b = randomBytes(1 + (i % 64));
    try {
      parseAll(b);
    } catch (e) {
      assert.ok(e instanceof SSEError, String(e));
    }
  }
});

test("sse, providers and receipts: mutated input gives their own error or a result, nothing else", () => {
  const pin = attesterPin("did:key:z6MkvpWR9ZPqyZYK3DALwE6JxQGGM751ug37oDbZzMvZUzKo");
  const want = { runId: "r", eventHash: sha256B64u("e"), requestHash: sha256B64u("q"), responseHash: sha256B64u("s"), provider: "p", model: "m" };
  for (const api of ["openai-completions", "anthropic-messages"]) {
    const base = Buffer.from(sseReply(api, "m", [{ text: "hi" }, { tool: "exec", args: { command: "ls" } }]));
    for (let i = 0; i < 300; i++) {
      const b = Buffer.from(base);
      for (let k = 0; k < 1 + (i % 4); k++) b[(i * 7919 + k * 104729) % b.length] = (i * 31 + k) & 0xff;
      try {
        const a = new Assembler(api, { api, provider: PLUGIN_ID, id: "scripted/m" }, () => {});
        for (const ev of parseAll(b)) a.push(ev);
        a.finish();
      } catch (e) {
        assert.ok(e instanceof SSEError || e instanceof ProviderStreamError, `${api} mutation ${i}: ${e}`);
      }
      try {
        verifyReceipt(pin, b.toString("base64url").slice(0, 200 + i), want);
        assert.fail("a mutated receipt verified");
      } catch (e) {
        assert.equal(/** @type {Error} */ (e).name, "ReceiptRefused", String(e));
      }
    }
  }
});

/** The events an Assembler emits for a stream, and its final message. */
function assemble(/** @type {string} */ api, /** @type {string} */ text) {
  /** @type {any[]} */
  const events = [];
  const a = new Assembler(api, { api, provider: PLUGIN_ID, id: "scripted/m" }, (e) => events.push(e));
  for (const ev of parseAll(text)) a.push(ev);
  return { events, message: a.finish() };
}

test("providers: both APIs' streams become OpenClaw's text and tool call events", () => {
  for (const api of ["openai-completions", "anthropic-messages"]) {
    const t = assemble(api, sseReply(api, "m", [{ text: "all done, owner" }]));
    assert.equal(t.events[0].type, "start");
    assert.deepEqual(t.events.map((e) => e.type).filter((x) => x !== "text_delta"), ["start", "text_start", "text_end"]);
    assert.equal(t.events.filter((e) => e.type === "text_delta").map((e) => e.delta).join(""), "all done, owner");
    assert.deepEqual(t.message.content, [{ type: "text", text: "all done, owner" }]);
    assert.equal(t.message.stopReason, "stop");
    assert.equal(t.message.usage.input, 10);
    assert.equal(t.message.usage.output, 5);
    const c = assemble(api, sseReply(api, "m", [{ tool: "exec", args: { command: "echo hi" }, id: "call_x" }]));
    assert.deepEqual(c.message.content, [{ type: "toolCall", id: "call_x", name: "exec", arguments: { command: "echo hi" } }]);
    assert.equal(c.message.stopReason, "toolUse");
    assert.equal(c.events.filter((e) => e.type === "toolcall_end").length, 1);
  }
});

test("providers: malformed or unfinished provider streams are refused", () => {
  const oa = (/** @type {any} */ v) => `data: ${JSON.stringify(v)}\n\n`;
  const bad = {
    "tool arguments not JSON": oa({ choices: [{ delta: { tool_calls: [{ index: 0, id: "c", function: { name: "exec", arguments: "{nope" } }] }, finish_reason: "tool_calls" }] }),
    "tool arguments not an object": oa({ choices: [{ delta: { tool_calls: [{ index: 0, id: "c", function: { name: "exec", arguments: "[1]" } }] }, finish_reason: "tool_calls" }] }),
    "a tool call without a name": oa({ choices: [{ delta: { tool_calls: [{ index: 0, id: "c", function: {} }] } }] }),
    "data not JSON": "data: {\n\n",
    "an error event": oa({ error: { message: "overloaded" } }),
    "no end": oa({ choices: [{ delta: { content: "half" } }] }),
    "an event after [DONE]": oa({ choices: [{ delta: {}, finish_reason: "stop" }] }) + "data: [DONE]\n\n" + oa({ choices: [] }),
  };
  for (const [name, text] of Object.entries(bad)) {
    assert.throws(() => assemble("openai-completions", text), ProviderStreamError, name);
  }
  const an = (/** @type {string} */ t, /** @type {any} */ v) => `event: ${t}\ndata: ${JSON.stringify({ type: t, ...v })}\n\n`;
  assert.throws(() => assemble("anthropic-messages", an("error", { error: { type: "overloaded_error" } })), ProviderStreamError);
  assert.throws(() => assemble("anthropic-messages", an("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) + an("content_block_start", { index: 0, content_block: { type: "text", text: "" } })), ProviderStreamError, "a repeated block index");
  assert.throws(() => assemble("anthropic-messages", an("message_start", { message: {} })), ProviderStreamError, "no message_stop");
  assert.throws(() => assemble("anthropic-messages", an("message_begin", {})), /unknown type/);
  assert.throws(() => new Assembler("openai-responses", { api: "x", provider: "p", id: "m" }, () => {}), ProviderStreamError);
});

const ctxMessages = {
  systemPrompt: "SYSTEM",
  messages: [
    { role: "user", content: "hi [scene:x]" },
    { role: "assistant", content: [{ type: "text", text: "let me look" }, { type: "toolCall", id: "c1", name: "read", arguments: { path: "a" } }] },
    { role: "toolResult", toolCallId: "c1", toolName: "read", content: [{ type: "text", text: "file a" }], isError: false },
  ],
  tools: [{ name: "read", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } }],
};

test("providers: requests carry the system text, history and tools in each API's shape", () => {
  const o = JSON.parse(buildRequest("openai-completions", "gpt", /** @type {any} */ (ctxMessages)).toString());
  assert.deepEqual(o.messages, [
    { role: "system", content: "SYSTEM" },
    { role: "user", content: "hi [scene:x]" },
    { role: "assistant", content: "let me look", tool_calls: [{ id: "c1", type: "function", function: { name: "read", arguments: '{"path":"a"}' } }] },
    { role: "tool", tool_call_id: "c1", content: "file a" },
  ]);
  assert.deepEqual(o.tools, [{ type: "function", function: { name: "read", description: "Read a file", parameters: ctxMessages.tools[0].parameters } }]);
  assert.equal(o.stream, true);
  const a = JSON.parse(buildRequest("anthropic-messages", "claude", /** @type {any} */ (ctxMessages), { maxTokens: 100 }).toString());
  assert.equal(a.system, "SYSTEM");
  assert.equal(a.max_tokens, 100);
  assert.deepEqual(a.messages[1].content[1], { type: "tool_use", id: "c1", name: "read", input: { path: "a" } });
  assert.deepEqual(a.messages[2], { role: "user", content: [{ type: "tool_result", tool_use_id: "c1", content: "file a", is_error: false }] });
  assert.deepEqual(a.tools, [{ name: "read", description: "Read a file", input_schema: ctxMessages.tools[0].parameters }]);
  for (const api of ["openai-completions", "anthropic-messages"]) {
    assert.equal(systemTextOf(api, buildRequest(api, "m", /** @type {any} */ (ctxMessages))), "SYSTEM");
  }
  assert.throws(() => buildRequest("openai-responses", "m", /** @type {any} */ (ctxMessages)), ProviderStreamError);
});

test("routes: only the plugin's provider, <provider>/<model> ids and the spoken APIs", () => {
  assert.deepEqual(routeOf({ provider: PLUGIN_ID, id: "anthropic/claude-x", api: "anthropic-messages" }), { provider: "anthropic", model: "claude-x", api: "anthropic-messages" });
  assert.deepEqual(routeOf({ provider: PLUGIN_ID, id: "openrouter/a/b", api: "openai-completions" }), { provider: "openrouter", model: "a/b", api: "openai-completions" });
  assert.throws(() => routeOf({ provider: "openai", id: "openai/gpt", api: "openai-completions" }), /not routed/);
  for (const id of ["gpt", "/gpt", "openai/"]) assert.throws(() => routeOf({ provider: PLUGIN_ID, id, api: "openai-completions" }), /provider>\/<model/);
  assert.throws(() => routeOf({ provider: PLUGIN_ID, id: "openai/gpt", api: "openai-responses" }), /api/);
});

/** A stream as OpenClaw's: events pushed, then ended with the final message. */
function testStream() {
  /** @type {any[]} */
  const events = [];
  /** @type {(m: any) => void} */
  let done = () => {};
  const ended = new Promise((r) => (done = r));
  return { events, ended, push: (/** @type {any} */ e) => events.push(e), end: (/** @type {any} */ m) => done(m) };
}

/** @param {Awaited<ReturnType<typeof startFake>>} f @param {object} [extra] */
function gwController(f, extra = {}) {
  writeFileSync(join(f.dir, "pack.enc"), "sealed-bytes");
  writeFileSync(join(f.dir, "manifest.json"), '{"m":1}');
  const cfg = parseConfig({
    controlSocket: f.socket, pack: join(f.dir, "pack.enc"), manifest: join(f.dir, "manifest.json"),
    reportHashB64u: f.reportHash, attesterDid: f.did, outDir: join(f.dir, "out"), timeoutMs: 2000, gateway: true, ...extra,
  });
  /** @type {ReturnType<typeof testStream>[]} */
  const streams = [];
  const c = new Controller(cfg, {
    log: quiet, harnessVersion: "2026.9.6", claimMs: 200,
    createStream: () => {
      const s = testStream();
      streams.push(s);
      return s;
    },
  });
  return { c, streams };
}

const gctx = { runId: "oc-run-1", agentId: "main", sessionKey: "agent:main:main", modelProviderId: PLUGIN_ID, modelId: "scripted/scripted" };

/** Opens the run and its turn under the gateway. */
async function openTurn(/** @type {Controller} */ c, /** @type {string} */ prompt) {
  await c.beforePromptBuild({}, gctx);
  assert.deepEqual(await c.beforeAgentRun({ prompt: "hi", systemPrompt: prompt + suffix }, gctx), { outcome: "pass" });
  c.llmInput({ systemPrompt: prompt + suffix }, gctx);
}

/**
 * Starts a fake attester with fakeOpts (closed when the test ends) and a
 * gateway controller on it, and opens the run and its turn.
 * @param {import("node:test").TestContext} t @param {object} [fakeOpts] @param {object} [extra]
 */
async function gatewayTurn(t, fakeOpts = {}, extra = {}) {
  const f = await startFake(fakeOpts);
  t.after(() => f.close());
  const { c } = gwController(f, extra);
  await openTurn(c, f.prompt);
  return { f, c };
}

/** One model call as OpenClaw makes it: model_call_started, then the transport. */
async function modelCall(/** @type {Controller} */ c, /** @type {string} */ callId, /** @type {string} */ api, /** @type {string} */ prompt, started = true) {
  if (started) c.modelCallStarted({ runId: gctx.runId, callId, provider: PLUGIN_ID, model: "scripted/scripted" }, gctx);
  const s = c.modelStream({ api, provider: PLUGIN_ID, id: "scripted/scripted" }, { systemPrompt: prompt + suffix, messages: [{ role: "user", content: "hi" }], tools: [] }, { requestId: callId });
  const final = await /** @type {any} */ (s).ended;
  return { final, events: /** @type {any} */ (s).events };
}

for (const api of ["openai-completions", "anthropic-messages"]) {
  test(`gateway (${api}): every model call goes through the gateway, and the bundle carries one verified receipt per llm_call`, async (t) => {
    let n = 0;
    const { f, c } = await gatewayTurn(t, { upstream: () => (n++ === 0 ? [{ tool: "read", args: { path: "x" } }] : [{ text: "done" }]) });
    const first = await modelCall(c, "c1", api, f.prompt);
    assert.equal(first.events.at(-1).type, "done", JSON.stringify(first.events.at(-1)));
    assert.deepEqual(first.final.content, [{ type: "toolCall", id: api === "openai-completions" ? "call_1" : "toolu_1", name: "read", arguments: { path: "x" } }]);
    assert.equal(await c.beforeToolCall({ toolName: "read", params: { path: "x" } }, gctx), undefined);
    const second = await modelCall(c, "c2", api, f.prompt);
    assert.equal(second.final.content[0].text, "done");
    await c.agentEnd({}, gctx);
    assert.equal(f.modelCalls.length, 2);
    for (const m of f.modelCalls) {
      assert.equal(m.provider, "scripted");
      assert.equal(m.api, api === "openai-completions" ? "openai-chat-completions" : api);
      assert.equal(m.turnId, "turn_1");
    }
    const bundle = JSON.parse(readFileSync(join(f.dir, "out", "run_fake_1", "bundle.json"), "utf8"));
    const p = bundle.payload;
    assert.deepEqual(Object.keys(p).slice(0, 5), ["bundle_version", "bundle_id", "agent_did", "event_chain", "receipts"]);
    const llm = p.event_chain.filter((/** @type {any} */ e) => e.event_type === "llm_call");
    assert.deepEqual(p.event_chain.map((/** @type {any} */ e) => e.event_type), ["prompt_committed", "llm_call", "tool_call", "llm_call"]);
    assert.equal(p.receipts.length, llm.length);
    p.receipts.forEach((/** @type {any} */ r, /** @type {number} */ i) => {
      const sent = f.modelCalls[i];
      assert.deepEqual(r, sent.receipt);
      assert.equal(r.payload.binding.event_hash_b64u, llm[i].event_hash_b64u);
      assert.equal(sent.eventHash, llm[i].event_hash_b64u, "the gateway derives the event's hash from Clawea-Llm-Call");
      assert.deepEqual(sent.llmCall.payload, p.metadata.clawea_llm_calls[i]);
      assert.equal(r.payload.request_hash_b64u, sha256B64u(sent.raw));
      // The llm_call states the system text of the bytes the gateway got.
      const pl = p.metadata.clawea_llm_calls[i];
      assert.equal(pl.system_text_hash_b64u, sha256B64u(systemTextOf(api, sent.raw)));
      assert.equal(pl.system_text_hash_b64u, sha256B64u(f.prompt + suffix));
      assert.equal(pl.provider, "scripted");
      assert.equal(pl.model, "scripted");
      assert.equal(pl.call_id, `c${i + 1}`);
    });
  });
}

test("gateway: a run whose model is not the plugin's provider is blocked before the model is called", async (t) => {
  const f = await startFake();
  t.after(() => f.close());
  const { c } = gwController(f);
  await c.beforePromptBuild({}, gctx);
  const r = await c.beforeAgentRun({ prompt: "hi", systemPrompt: f.prompt + suffix }, { ...gctx, modelProviderId: "openai", modelId: "gpt-5" });
  assert.equal(r.outcome, "block");
  assert.match(r.reason, /openai\/gpt-5\) is not routed through the attester's gateway/);
  assert.ok(!f.requests.some((x) => x.url.endsWith("/turns")), "no turn opened");
});

test("gateway: a model call outside an attested run is refused without reaching the gateway", async (t) => {
  const { f, c } = await gatewayTurn(t);
  // No model_call_started for this call id: not a call of the attested run
  // (a compaction run, another session).
  const r = await modelCall(c, "stray", "openai-completions", f.prompt, false);
  assert.equal(r.events.at(-1).type, "error");
  assert.match(r.final.errorMessage, /outside an attested run/);
  assert.equal(f.modelCalls.length, 0);
});

test("gateway: a model call to an unrouted provider leaves the run without an attestation", async (t) => {
  const { f, c } = await gatewayTurn(t);
  await modelCall(c, "c1", "openai-completions", f.prompt);
  // A fallback or other model call OpenClaw sent to a provider of its own.
  c.modelCallStarted({ runId: gctx.runId, callId: "c2", provider: "openai", model: "gpt-5" }, gctx);
  assert.equal((await c.beforeToolCall({ toolName: "read", params: { path: "x" } }, gctx))?.block, true);
  await c.agentEnd({}, gctx);
  assert.ok(!f.requests.some((x) => x.url.endsWith("/attestation")), "no attestation requested");
});

test("gateway: a refused request fails the turn and the run", async (t) => {
  const { f, c } = await gatewayTurn(t, { gatewayStatus: 422 });
  const r = await modelCall(c, "c1", "openai-completions", f.prompt);
  assert.equal(r.events.at(-1).type, "error");
  assert.match(r.final.errorMessage, /gateway refused the request: 422: GATEWAY_SYSTEM_MISMATCH: the system text is not the attested prompt/);
  assert.equal(c.refused, "", "a refusal is an error, not a forged answer");
  // The refusal took no sequence number: the run's next answer is in sequence.
  const next = await c.client.turn("run_fake_1", f.cap, { channel: "cli", sender_id: "local", message_id: "m2", content_sha256_b64u: sha256B64u("x") });
  assert.equal(next.turn_id, "turn_2");
  // The run is not attested: its llm_call has no receipt.
  assert.equal((await c.beforeToolCall({ toolName: "read", params: { path: "x" } }, gctx))?.block, true);
  await c.agentEnd({}, gctx);
  assert.ok(!f.requests.some((x) => x.url.endsWith("/attestation")));
});

test("gateway: a model call with a system text that is not the attested prompt is not sent", async (t) => {
  const { f, c } = await gatewayTurn(t);
  const r = await modelCall(c, "c1", "openai-completions", "Another prompt. ");
  assert.equal(r.events.at(-1).type, "error");
  assert.match(r.final.errorMessage, /does not start with the attested prompt/);
  assert.equal(f.modelCalls.length, 0);
});

const receiptAttacks = {
  missing: /RECEIPT_MISSING/,
  signer: /RECEIPT_WRONG_SIGNER/,
  signature: /RECEIPT_SIGNATURE_INVALID/,
  request: /RECEIPT_MISMATCH: the receipt is for other request bytes/,
  response: /RECEIPT_MISMATCH: the receipt is for other response bytes/,
  run: /RECEIPT_MISMATCH: the receipt is bound to another run/,
  event: /RECEIPT_MISMATCH: the receipt is bound to another llm_call event/,
  model: /RECEIPT_MISMATCH: the receipt names another provider or model/,
};
for (const [receipt, want] of Object.entries(receiptAttacks)) {
  test(`gateway: a receipt that is ${receipt === "missing" ? "missing" : "falsified (" + receipt + ")"} fails the turn and refuses everything after`, async (t) => {
    const { f, c } = await gatewayTurn(t, { receipt });
    const r = await modelCall(c, "c1", "anthropic-messages", f.prompt);
    assert.equal(r.events.at(-1).type, "error");
    assert.match(r.final.errorMessage, want);
    assert.ok(!r.events.some((e) => e.type === "done"));
    assert.match(c.refused, want, "a receipt not from the pinned attester for this call refuses every run");
    assert.equal((await c.beforeToolCall({ toolName: "read", params: { path: "x" } }, gctx))?.block, true);
    await c.agentEnd({}, gctx);
    assert.ok(!f.requests.some((x) => x.url.endsWith("/attestation")));
  });
}

for (const [cut, want] of /** @type {Array<[true | "trailer", RegExp]>} */ ([[true, /event stream: the stream ended inside an event/], ["trailer", /the answer failed \(GATEWAY_UPSTREAM_CUT\)/]])) {
  test(`gateway: a stream cut mid-event fails the turn (${cut === true ? "found by the plugin" : "the gateway's error trailer"})`, async (t) => {
    const { f, c } = await gatewayTurn(t, { cutStream: cut });
    const r = await modelCall(c, "c1", "anthropic-messages", f.prompt);
    assert.equal(r.events.at(-1).type, "error");
    assert.ok(!r.events.some((e) => e.type === "done"));
    assert.match(r.final.errorMessage, want);
  });
}

test("gateway: an upstream error relayed with its receipt fails the turn", async (t) => {
  const { f, c } = await gatewayTurn(t, { upstreamStatus: 500 });
  const r = await modelCall(c, "c1", "openai-completions", f.prompt);
  assert.equal(r.events.at(-1).type, "error");
  assert.match(r.final.errorMessage, /the provider answered 500/);
  assert.equal(c.refused, "");
});

test("gateway: a relayed answer without the attester's signed answer refuses everything (ANSWER_UNSIGNED)", async (t) => {
  const { f, c } = await gatewayTurn(t, { unsignedOp: "model" });
  const r = await modelCall(c, "c1", "openai-completions", f.prompt);
  assert.equal(r.events.at(-1).type, "error");
  assert.match(c.refused, /ANSWER_UNSIGNED/);
});

test("gateway: a hanging gateway fails the turn after the idle timeout", async (t) => {
  const { f, c } = await gatewayTurn(t, { hangMs: 5000 }, { timeoutMs: 300 });
  const t0 = Date.now();
  const r = await modelCall(c, "c1", "openai-completions", f.prompt);
  assert.equal(r.events.at(-1).type, "error");
  assert.match(r.final.errorMessage, /idle past its timeout/);
  assert.ok(Date.now() - t0 < 3000);
});

test("gateway: receipts are checked against the pinned attester alone", () => {
  const pin = attesterPin("did:key:z6MkvpWR9ZPqyZYK3DALwE6JxQGGM751ug37oDbZzMvZUzKo");
  const want = { runId: "r", eventHash: sha256B64u("e"), requestHash: sha256B64u("q"), responseHash: sha256B64u("s"), provider: "p", model: "m" };
  assert.throws(() => verifyReceipt(pin, undefined, want), /RECEIPT_MISSING/);
  assert.throws(() => verifyReceipt(pin, "a+b", want), /RECEIPT_MALFORMED/);
  assert.throws(() => verifyReceipt(pin, Buffer.from("[]").toString("base64url"), want), /RECEIPT_MALFORMED/);
  const env = {
    envelope_version: "1", envelope_type: "gateway_receipt", payload: {}, payload_hash_b64u: sha256B64u("{}"), hash_algorithm: "SHA-256",
    signature_b64u: "A".repeat(86), algorithm: "Ed25519", signer_did: pin.did, issued_at: "2026-01-01T00:00:00.000Z",
  };
  const b = (/** @type {any} */ v) => Buffer.from(JSON.stringify(v)).toString("base64url");
  assert.throws(() => verifyReceipt(pin, b(env), want), /RECEIPT_SIGNATURE_INVALID/);
  assert.throws(() => verifyReceipt(pin, b({ ...env, expires_at: "x" }), want), /RECEIPT_MALFORMED/);
  assert.throws(() => verifyReceipt(pin, b({ ...env, envelope_type: "proof_bundle" }), want), /RECEIPT_MALFORMED/);
  assert.throws(() => verifyReceipt(pin, b({ ...env, payload_hash_b64u: sha256B64u("x") }), want), /RECEIPT_MALFORMED/);
});
