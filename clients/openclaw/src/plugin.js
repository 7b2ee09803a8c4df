// The clawea attester plugin for OpenClaw: every agent run under the
// attester, fail closed (docs/spec/openclaw-plugin.md).
import { readFileSync, mkdirSync, writeFileSync } from "node:fs";
import { isAbsolute, join } from "node:path";
import { ControlClient, AttesterError, AnswerLost } from "./control.js";
import { AnswerRefused, attesterPin, selfProcess } from "./answer.js";
import { EventChain, bundlePayload, llmCallPayload, signEnvelope } from "./poh.js";
import { HASH_B64U, jcs, sha256B64u } from "./hash.js";
import { agentSigner } from "./didkey.js";
import {
  ERROR_TRAILER, GATEWAY_API, GatewayRefused, LLM_CALL_HEADER, RECEIPT_TRAILER, ReceiptRefused, TURN_HEADER, llmCallHeader, verifyReceipt,
} from "./gateway.js";
import { APIS, Assembler, buildRequest, systemTextOf } from "./providers.js";
import { SSEParser } from "./sse.js";

/** The plugin id (openclaw.plugin.json, plugins.entries.<id>). */
export const PLUGIN_ID = "clawea";

/** Why a run was refused or stopped; safe to show to the model and the user. */
export class RunBlocked extends Error {
  /** @param {string} msg */
  constructor(msg) {
    super(msg);
    this.name = "RunBlocked";
  }
}

/**
 * @typedef {object} Config
 * @property {string} controlSocket absolute path of the attester's control socket
 * @property {string} pack the sealed pack (prompt_pack.enc)
 * @property {string} manifest the pack's manifest (prompt_pack_manifest.json)
 * @property {string} reportHashB64u the SystemPromptReport hash the pack author published
 * @property {string} attesterDid the attester's did:key: only answers it signed are acted on
 * @property {string} [outDir] where each run's artifacts are written (<outDir>/<run_id>/)
 * @property {string} [agentKey] PKCS#8 PEM file of the agent's Ed25519 key (default: a fresh key
 *   per run, in memory)
 * @property {string} [localSender] "channel:sender_id" for turns without a channel sender
 *   (default "cli:local")
 * @property {number} [timeoutMs] per attester request, and the longest a model call through the
 *   gateway may stay idle (default 15000)
 * @property {boolean} [gateway] every model call of a run goes through the attester's model
 *   gateway (section 7); default false
 */

const CONFIG_KEYS = [
  "controlSocket", "pack", "manifest", "reportHashB64u", "attesterDid", "outDir", "agentKey", "localSender", "timeoutMs", "gateway",
];
const SENDER = /^[a-z0-9_-]{1,64}:[^\s:][^\s]{0,255}$/;

/**
 * Parses the plugin's config strictly: unknown keys, relative paths and
 * malformed values are errors.
 * @param {unknown} raw
 * @returns {Config}
 */
export function parseConfig(raw) {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
    throw new Error(`plugins.entries.${PLUGIN_ID}.config is required`);
  }
  const c = /** @type {Record<string, unknown>} */ (raw);
  for (const k of Object.keys(c)) {
    if (!CONFIG_KEYS.includes(k)) throw new Error(`${PLUGIN_ID} config: unknown key ${JSON.stringify(k)}`);
  }
  /** @param {string} k @param {boolean} required */
  const path = (k, required) => {
    const v = c[k];
    if (v === undefined && !required) return undefined;
    if (typeof v !== "string" || !isAbsolute(v)) {
      throw new Error(`${PLUGIN_ID} config: ${k} must be an absolute path`);
    }
    return v;
  };
  const reportHashB64u = c.reportHashB64u;
  if (typeof reportHashB64u !== "string" || !HASH_B64U.test(reportHashB64u)) {
    throw new Error(`${PLUGIN_ID} config: reportHashB64u must be a b64u SHA-256 digest`);
  }
  const attesterDid = c.attesterDid;
  try {
    attesterPin(/** @type {string} */ (attesterDid));
  } catch {
    throw new Error(`${PLUGIN_ID} config: attesterDid is required: the attester's Ed25519 did:key (GET /v1/identity "did", checked against its key attestation)`);
  }
  const localSender = c.localSender ?? "cli:local";
  if (typeof localSender !== "string" || !SENDER.test(localSender)) {
    throw new Error(`${PLUGIN_ID} config: localSender must be "channel:sender_id"`);
  }
  const timeoutMs = c.timeoutMs ?? 15000;
  if (typeof timeoutMs !== "number" || !Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 600000) {
    throw new Error(`${PLUGIN_ID} config: timeoutMs must be an integer in 100..600000`);
  }
  const gateway = c.gateway ?? false;
  if (typeof gateway !== "boolean") throw new Error(`${PLUGIN_ID} config: gateway must be true or false`);
  return {
    controlSocket: /** @type {string} */ (path("controlSocket", true)),
    pack: /** @type {string} */ (path("pack", true)),
    manifest: /** @type {string} */ (path("manifest", true)),
    reportHashB64u,
    attesterDid: /** @type {string} */ (attesterDid),
    outDir: path("outDir", false),
    agentKey: path("agentKey", false),
    localSender,
    timeoutMs,
    gateway,
  };
}

/**
 * Checks that OpenClaw's config lets the plugin's prompt and run hooks fire.
 * Without plugins.entries.clawea.hooks.allowConversationAccess OpenClaw
 * silently skips before_prompt_build, before_agent_run and agent_end, and the
 * model would run with OpenClaw's own prompt; the caller then registers only
 * refusing hooks, so at least no tool runs and nothing is attested.
 * @param {any} ocConfig OpenClaw's config (api.config)
 */
export function checkHookAccess(ocConfig) {
  const h = ocConfig?.plugins?.entries?.[PLUGIN_ID]?.hooks;
  if (h?.allowConversationAccess !== true || h?.allowPromptInjection === false) {
    throw new Error(
      `OpenClaw must set plugins.entries.${PLUGIN_ID}.hooks.allowConversationAccess: true ` +
        "(and not allowPromptInjection: false); without it the attested prompt cannot be enforced",
    );
  }
}

/**
 * The sender of a turn: the channel's identity when OpenClaw has one, else
 * the configured local sender (the CLI). Never taken from message text.
 * @param {Config} cfg
 * @param {{channelId?: string, senderId?: string}} ev
 * @param {{channel?: string, channelId?: string, senderId?: string}} ctx
 */
export function senderOf(cfg, ev, ctx) {
  const channel = ev.channelId || ctx.channel || ctx.channelId;
  const sender = ev.senderId || ctx.senderId;
  if (channel && sender) return { channel, sender_id: sender };
  const i = cfg.localSender.indexOf(":");
  return { channel: cfg.localSender.slice(0, i), sender_id: cfg.localSender.slice(i + 1) };
}

/** One attester run, bound to one OpenClaw run. */
class RunState {
  constructor() {
    /**
     * "closed" once the attester run was closed (DELETE sent); it stays
     * closed even when the opening fails afterwards.
     * @type {"pending" | "ready" | "failed" | "closed"}
     */
    this.status = "pending";
    this.error = "";
    /** @type {any} */
    this.run = null;
    this.capability = "";
    this.prompt = "";
    /** @type {EventChain | null} */
    this.chain = null;
    /** @type {Array<{event: any, payload: any}>} */
    this.llmCalls = [];
    /** @type {Array<Record<string, unknown>>} the tool_call payloads (binding "call") */
    this.toolCalls = [];
    /** @type {object[]} the verified gateway receipts of the run's model calls, in call order */
    this.receipts = [];
    /** @type {{turn_id: string, owner: boolean, message_id: string} | null} */
    this.turn = null;
    /** @type {string | null} the system text of the run's model input (llm_input) */
    this.systemText = null;
    /** Set when the run can no longer be attested honestly. */
    this.poisoned = "";
    /** @type {Promise<void> | null} */
    this.opening = null;
  }

  get usable() {
    return this.status === "ready" && !this.poisoned;
  }
}

/**
 * The plugin's logic, independent of OpenClaw's registration API so it can
 * be tested with plain Node.
 */
export class Controller {
  /**
   * @param {Config} cfg
   * @param {{client?: ControlClient, log?: {info: Function, warn: Function, error: Function},
   *   now?: () => Date, harnessVersion?: string, self?: {pid: number, startTime: number},
   *   createStream?: () => {push: (ev: any) => void, end: (m?: any) => void}, claimMs?: number}} [deps]
   *   self: this process as the attester sees it (default: selfProcess(), which throws when
   *   /proc/self/stat cannot be read); createStream: OpenClaw's assistant message event stream
   *   (the gateway transport's output); claimMs: how long the transport waits for a model call's
   *   model_call_started
   */
  constructor(cfg, deps = {}) {
    this.cfg = cfg;
    this.pin = attesterPin(cfg.attesterDid);
    this.createStream = deps.createStream;
    this.claimMs = deps.claimMs ?? 2000;
    /** @type {Map<string, RunState>} OpenClaw model call id -> its run, until the transport claims it */
    this.calls = new Map();
    /** @type {Map<string, (st: RunState) => void>} model call id -> a transport waiting for it */
    this.waiters = new Map();
    this.client = deps.client ?? new ControlClient(cfg.controlSocket, {
      timeoutMs: cfg.timeoutMs, pin: attesterPin(cfg.attesterDid), self: deps.self ?? selfProcess(),
    });
    this.log = deps.log ?? console;
    this.now = deps.now ?? (() => new Date());
    this.harnessVersion = deps.harnessVersion ?? "unknown";
    /** @type {Map<string, RunState>} OpenClaw runId -> run */
    this.runs = new Map();
    /** @type {Map<string, RunState>} OpenClaw sessionKey -> its current run */
    this.bySession = new Map();
    /**
     * Set on the first answer that fails verification (answer.js): the
     * control socket is not answered by the pinned attester for this
     * process, so every run and tool call is refused from then on, as with a
     * refused config.
     */
    this.refused = "";
  }

  /**
   * Notes what an error says about the attester's answers: a refused answer
   * refuses everything; a lost answer gives up its run (its sequence is
   * unknown).
   * @param {unknown} e
   * @param {RunState} [st]
   */
  #note(e, st) {
    if (e instanceof AnswerRefused || e instanceof ReceiptRefused) {
      if (!this.refused) {
        this.refused = `an attester answer failed verification (${e.message})`;
        this.log.error(`clawea: refusing every run and tool call: ${this.refused}`);
      }
    } else if (e instanceof AnswerLost && st) {
      st.poisoned ||= e.message;
    }
  }

  /** The block reason once refused, as for a refused config. */
  get refusal() {
    return `clawea: refusing to run: ${this.refused}`;
  }

  /**
   * The run of a hook: the one of the hook context's run id, else the one
   * of the event's run id.
   * @param {{runId?: string}} ev
   * @param {{runId?: string}} ctx
   */
  runOf(ev, ctx) {
    const st = ctx.runId ? this.runs.get(ctx.runId) : undefined;
    return st ?? (ev.runId ? this.runs.get(ev.runId) : undefined);
  }

  /**
   * Creates the attester run for an OpenClaw run (once) and fetches and
   * checks the attested prompt.
   * @param {{runId?: string, agentId?: string, sessionKey?: string}} ctx
   */
  async open(ctx) {
    if (this.refused) throw new RunBlocked(this.refusal);
    if (!ctx.runId) throw new RunBlocked("clawea: the OpenClaw run has no id");
    let st = this.runs.get(ctx.runId);
    if (!st) {
      st = new RunState();
      this.runs.set(ctx.runId, st);
      if (ctx.sessionKey) this.bySession.set(ctx.sessionKey, st);
      const s = st;
      st.opening = this.#open(s, ctx).catch((e) => {
        this.#note(e, s);
        if (s.status !== "closed") s.status = "failed";
        s.error = e instanceof RunBlocked ? e.message : `clawea: attester run not started: ${errText(e)}`;
      });
    }
    await st.opening;
    if (this.refused) throw new RunBlocked(this.refusal);
    if (st.status !== "ready") throw new RunBlocked(st.error || "clawea: the attester run is not ready");
    return st;
  }

  /** @param {RunState} st @param {{agentId?: string, sessionKey?: string}} ctx */
  async #open(st, ctx) {
    const pack = readFileSync(this.cfg.pack);
    const manifest = JSON.parse(readFileSync(this.cfg.manifest, "utf8"));
    const run = await this.client.createRun({
      pack_b64u: pack.toString("base64url"),
      manifest,
      report_hash_b64u: this.cfg.reportHashB64u,
      agent_id: ctx.agentId || "main",
      session_key: ctx.sessionKey || "agent:main:main",
    });
    st.run = run;
    st.capability = run.capability;
    // From here on the attester holds a run: close it on any failure.
    try {
      if (run.report_hash_b64u !== this.cfg.reportHashB64u) {
        throw new RunBlocked("clawea: the attester committed to another report than the configured one");
      }
      for (const k of ["system_prompt_hash_b64u", "prompt_pack_ciphertext_hash_b64u"]) {
        if (typeof run[k] !== "string" || !HASH_B64U.test(run[k])) throw new Error(`malformed ${k}`);
      }
      st.chain = new EventChain(run.prompt_committed, { now: this.now });
      if (st.chain.events[0].run_id !== run.run_id) throw new Error("prompt_committed is for another run");
      const p = await this.client.prompt(run.run_id, st.capability);
      const h = sha256B64u(p.bytes);
      if (h !== p.hashHeader || h !== run.system_prompt_hash_b64u) {
        throw new RunBlocked("clawea: the attested prompt does not match its hash (PROMPT_COMMITMENT_MISMATCH)");
      }
      st.prompt = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(p.bytes);
      st.status = "ready";
      this.log.info(`clawea: attester run ${run.run_id} ready, prompt ${h}`);
    } catch (e) {
      await this.#close(st);
      throw e;
    }
  }

  /**
   * before_prompt_build: replaces the system prompt with the attested one.
   * OpenClaw skips a failed handler here, so failures are remembered and
   * before_agent_run blocks the run.
   * @param {unknown} _ev
   * @param {any} ctx
   */
  async beforePromptBuild(_ev, ctx) {
    try {
      const st = await this.open(ctx);
      return { systemPrompt: st.prompt };
    } catch (e) {
      this.log.warn(errText(e));
      return undefined;
    }
  }

  /**
   * before_agent_run: the gate in front of the model. The run goes ahead only
   * when the attester run is ready, the system prompt starts with the
   * attested prompt and the turn is open.
   * @param {{prompt?: string, systemPrompt?: string, channelId?: string, senderId?: string}} ev
   * @param {any} ctx
   */
  async beforeAgentRun(ev, ctx) {
    try {
      const st = await this.open(ctx);
      if (this.cfg.gateway && ctx.modelProviderId !== PLUGIN_ID) {
        st.poisoned = "the run's model is not routed through the attester's gateway";
        throw new RunBlocked(`clawea: the run's model (${ctx.modelProviderId}/${ctx.modelId}) is not routed through the attester's gateway: use a ${PLUGIN_ID}/<provider>/<model> model`);
      }
      if (typeof ev.systemPrompt !== "string" || !ev.systemPrompt.startsWith(st.prompt)) {
        st.poisoned = "the system prompt does not start with the attested prompt";
        throw new RunBlocked("clawea: the system prompt is not the attested prompt");
      }
      const messageId = ctx.runId;
      // The gate may be asked again for the same inbound message (a retry of
      // the run): its turn is already open.
      if (st.turn && st.turn.message_id === messageId) return { outcome: "pass" };
      const from = senderOf(this.cfg, ev, ctx);
      const t = await this.client.turn(st.run.run_id, st.capability, {
        channel: from.channel,
        sender_id: from.sender_id,
        message_id: messageId,
        content_sha256_b64u: sha256B64u(typeof ev.prompt === "string" ? ev.prompt : ""),
      });
      if (typeof t.turn_id !== "string" || t.turn_id === "" || typeof t.owner !== "boolean") {
        throw new Error("malformed turn response");
      }
      st.turn = { turn_id: t.turn_id, owner: t.owner, message_id: messageId };
      this.log.info(`clawea: turn ${t.turn_id} from ${from.channel}:${from.sender_id} (owner: ${t.owner})`);
      return { outcome: "pass" };
    } catch (e) {
      this.#note(e, this.runOf({}, ctx));
      const msg = this.refused ? this.refusal : e instanceof RunBlocked ? e.message : `clawea: ${errText(e)}`;
      this.log.warn(msg);
      return { outcome: "block", reason: msg, message: msg };
    }
  }

  /**
   * llm_input: the system text OpenClaw hands its provider transport for
   * this run. One that does not start with the attested prompt poisons the
   * run: no further tool runs and no attestation is requested.
   * @param {{runId?: string, systemPrompt?: string}} ev
   * @param {any} ctx
   */
  llmInput(ev, ctx) {
    const st = this.runOf(ev, ctx);
    if (!st) return;
    if (!st.usable) {
      st.poisoned ||= "model input was prepared while the attester run was not ready";
      return;
    }
    const text = typeof ev.systemPrompt === "string" ? ev.systemPrompt : "";
    if (!text.startsWith(st.prompt)) {
      st.poisoned = "the model input's system text does not start with the attested prompt";
      this.log.error(`clawea: ${st.poisoned}`);
      return;
    }
    st.systemText = text;
  }

  /**
   * model_call_started: one llm_call event per request to the model, stating
   * the system text it carries (the run's llm_input) against the attested
   * prompt.
   * @param {{runId?: string, callId?: string, provider: string, model: string}} ev
   * @param {any} ctx
   */
  modelCallStarted(ev, ctx) {
    const st = this.runOf(ev, ctx);
    if (!st) return;
    if (!st.usable || !st.chain) {
      st.poisoned ||= "a model call happened while the attester run was not ready";
      return;
    }
    if (this.cfg.gateway) {
      // The gateway transport states the llm_call from the bytes it sends.
      if (ev.provider !== PLUGIN_ID) {
        st.poisoned ||= `a model call to provider ${ev.provider}, which is not routed through the attester's gateway`;
        this.log.error(`clawea: ${st.poisoned}`);
        return;
      }
      if (typeof ev.callId !== "string" || ev.callId === "") return;
      const w = this.waiters.get(ev.callId);
      if (w) {
        this.waiters.delete(ev.callId);
        w(st);
      } else this.calls.set(ev.callId, st);
      return;
    }
    if (st.systemText === null) {
      st.poisoned = "a model call happened before OpenClaw reported its input (llm_input)";
      this.log.error(`clawea: ${st.poisoned}`);
      return;
    }
    const payload = llmCallPayload({
      callId: typeof ev.callId === "string" ? ev.callId : "",
      provider: ev.provider,
      model: ev.model,
      prompt: st.prompt,
      promptHash: st.run.system_prompt_hash_b64u,
      reportHash: st.run.report_hash_b64u,
      systemText: st.systemText,
    });
    const event = st.chain.add("llm_call", sha256B64u(JSON.stringify(payload)));
    st.llmCalls.push({ event, payload });
  }

  /**
   * before_tool_call: asks the attester's gate. Anything but an allow whose
   * params hash is ours blocks the call.
   * @param {{toolName: string, params: Record<string, unknown>, runId?: string}} ev
   * @param {any} ctx
   */
  async beforeToolCall(ev, ctx) {
    const block = (/** @type {string} */ msg) => ({ block: true, blockReason: msg });
    if (this.refused) return block(this.refusal);
    const st = this.runOf(ev, ctx);
    if (!st || !st.usable || !st.chain) {
      return block(`clawea: tool call refused: ${st?.poisoned || st?.error || "no attested run"}`);
    }
    if (!st.turn) return block("clawea: tool call refused: no open turn");
    try {
      const params = ev.params ?? {};
      const want = sha256B64u(jcs(params));
      /** @type {Record<string, unknown>} */
      const req = { turn_id: st.turn.turn_id, tool: ev.toolName, params };
      const provider = ctx.messageProvider || ctx.channel;
      if (typeof provider === "string" && provider !== "") req.message_provider = provider;
      const d = await this.client.toolCall(st.run.run_id, st.capability, req);
      if (typeof d.allow !== "boolean") throw new Error("malformed gate decision");
      if (d.tool !== ev.toolName || d.params_hash_b64u !== want) {
        return block("clawea: tool call refused: the gate decided on other parameters than these");
      }
      if (!d.allow) {
        const reason = typeof d.reason === "string" && d.reason ? d.reason : "denied";
        return block(`clawea gate (${typeof d.stage === "string" ? d.stage : "gate"}): ${reason}`);
      }
      if (!Number.isSafeInteger(d.audit_seq) || d.audit_seq < 1) throw new Error("malformed gate decision");
      // Binding "call" (spec 2.3): the event commits to the decision's audit
      // record, turn, tool and params, so the attester and a verifier can
      // match it to exactly that allow record.
      const call = {
        tool_call_version: "1",
        audit_seq: d.audit_seq,
        turn_id: req.turn_id,
        tool: d.tool,
        params_hash_b64u: d.params_hash_b64u,
      };
      st.chain.add("tool_call", sha256B64u(JSON.stringify(call)));
      st.toolCalls.push(call);
      return undefined;
    } catch (e) {
      this.#note(e, st);
      if (this.refused) return block(this.refusal);
      this.log.warn(`clawea: gate error: ${errText(e)}`);
      const why = e instanceof AttesterError || e instanceof AnswerLost ? e.message : "error";
      return block(`clawea: tool call refused: the gate could not be asked (${why})`);
    }
  }

  /**
   * The owner-only verify tool: marks the current turn verified at the
   * attester. The attester decides who the owner is.
   * @param {{sessionKey?: string}} toolCtx
   * @param {{message_id?: string, content_sha256_b64u?: string}} params
   */
  async verifyTool(toolCtx, params) {
    const st = toolCtx.sessionKey ? this.bySession.get(toolCtx.sessionKey) : undefined;
    const failed = (/** @type {string} */ why) => textResult(`verify failed: ${why}`, { verified: false });
    if (this.refused) return failed(this.refusal);
    if (!st || !st.usable || !st.turn) return failed("no attested run with an open turn");
    /** @type {Record<string, string>} */
    const req = { turn_id: st.turn.turn_id };
    const mid = params?.message_id;
    const ch = params?.content_sha256_b64u;
    if ((mid === undefined) !== (ch === undefined)) {
      return failed("give message_id and content_sha256_b64u together, or neither");
    }
    if (mid !== undefined) {
      if (typeof mid !== "string" || typeof ch !== "string" || !HASH_B64U.test(ch)) {
        return failed("message_id must be a string and content_sha256_b64u a b64u SHA-256 digest");
      }
      req.message_id = mid;
      req.content_sha256_b64u = ch;
    }
    try {
      const r = await this.client.verify(st.run.run_id, st.capability, req);
      if (r.verified !== true) return failed("the attester did not verify this turn");
      return textResult("verified: this turn is verified by the attester; gated tools may now run", {
        verified: true,
        turn_id: st.turn.turn_id,
      });
    } catch (e) {
      this.#note(e, st);
      if (this.refused) return failed(this.refusal);
      if (e instanceof AttesterError && e.status === 403) {
        return textResult("verify refused: only the owner can verify, and this turn's sender is not the owner", {
          verified: false,
          status: 403,
        });
      }
      return failed(e instanceof AttesterError ? e.message : "the attester could not be asked");
    }
  }

  /**
   * agent_end: signs the proof bundle, obtains the execution attestation,
   * writes the artifacts, and closes the attester run.
   * @param {unknown} _ev
   * @param {any} ctx
   */
  async agentEnd(_ev, ctx) {
    const st = ctx.runId ? this.runs.get(ctx.runId) : undefined;
    if (!st) return;
    if (st.opening) await st.opening;
    try {
      if (this.refused) {
        this.log.warn(`clawea: no attestation for this run: ${this.refused}`);
        return;
      }
      if (!st.usable || !st.chain) {
        this.log.warn(`clawea: no attestation for this run: ${st.poisoned || st.error || "not ready"}`);
        return;
      }
      if (st.llmCalls.length === 0) {
        this.log.warn("clawea: no attestation for this run: no model call happened");
        return;
      }
      if (this.cfg.gateway && st.receipts.length !== st.llmCalls.length) {
        this.log.warn(`clawea: no attestation for this run: ${st.llmCalls.length} model calls, ${st.receipts.length} verified gateway receipts`);
        return;
      }
      const signer = agentSigner(this.cfg.agentKey ? readFileSync(this.cfg.agentKey, "utf8") : undefined);
      const now = this.now();
      const payload = bundlePayload({
        runId: st.run.run_id,
        agentDid: signer.did,
        events: st.chain.events,
        promptHash: st.run.system_prompt_hash_b64u,
        reportHash: st.run.report_hash_b64u,
        ciphertextHash: st.run.prompt_pack_ciphertext_hash_b64u,
        llmCalls: st.llmCalls,
        toolCalls: st.toolCalls,
        harness: { id: "openclaw", version: this.harnessVersion },
        issuedAt: now,
        receipts: st.receipts,
      });
      const bundle = signEnvelope("proof_bundle", payload, signer, now);
      const att = await this.client.attestation(st.run.run_id, st.capability, { bundle, agent_did: signer.did });
      if (!att.attestation || typeof att.evidence_jws !== "string") throw new Error("malformed attestation response");
      const audit = await this.client.audit(st.run.run_id, st.capability);
      if (this.cfg.outDir) {
        const dir = join(this.cfg.outDir, st.run.run_id);
        mkdirSync(dir, { recursive: true, mode: 0o755 });
        writeFileSync(join(dir, "bundle.json"), JSON.stringify(bundle));
        writeFileSync(join(dir, "attestation.json"), JSON.stringify(att.attestation));
        writeFileSync(join(dir, "evidence.jws"), att.evidence_jws);
        writeFileSync(join(dir, "audit.jsonl"), audit.body);
        this.log.info(`clawea: attestation of run ${st.run.run_id} written to ${dir}`);
      }
    } catch (e) {
      this.#note(e, st);
      this.log.error(`clawea: attestation failed: ${errText(e)}`);
    } finally {
      await this.#close(st);
      // A long-lived gateway handles many runs: forget this one. A late hook
      // of this run then finds no run and blocks or does nothing.
      if (ctx.runId) this.runs.delete(ctx.runId);
      if (ctx.sessionKey && this.bySession.get(ctx.sessionKey) === st) {
        this.bySession.delete(ctx.sessionKey);
      }
      for (const [id, s] of this.calls) if (s === st) this.calls.delete(id);
    }
  }

  /**
   * The run of a model call: the one model_call_started named for this call
   * id, waited for up to claimMs (OpenClaw fires that hook without waiting).
   * @param {unknown} callId
   * @returns {Promise<RunState>}
   */
  #claim(callId) {
    if (typeof callId !== "string" || callId === "") return Promise.reject(new RunBlocked("clawea: a model call without OpenClaw's call id"));
    const st = this.calls.get(callId);
    if (st) {
      this.calls.delete(callId);
      return Promise.resolve(st);
    }
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiters.delete(callId);
        reject(new RunBlocked("clawea: a model call outside an attested run is refused"));
      }, this.claimMs);
      this.waiters.set(callId, (s) => {
        clearTimeout(t);
        resolve(s);
      });
    });
  }

  /**
   * The provider transport of the plugin's provider (OpenClaw's StreamFn,
   * section 7): the model call goes to the attester's gateway over the control
   * socket, its events are relayed as they arrive, and it ends ("done") only
   * when the gateway's receipt verified. Any failure ends it with an error and
   * leaves the run without an attestation.
   * @param {{api: string, provider: string, id: string, maxTokens?: number}} model
   * @param {import("./providers.js").Context} context
   * @param {{requestId?: string, signal?: AbortSignal, maxTokens?: number, temperature?: number}} [options]
   */
  modelStream(model, context, options) {
    if (!this.createStream) throw new Error("clawea: no event stream for the gateway transport");
    const stream = this.createStream();
    const fail = (/** @type {unknown} */ e, /** @type {RunState | undefined} */ st) => {
      this.#note(e, st);
      const msg = this.refused ? this.refusal : e instanceof RunBlocked ? e.message : `clawea: model call refused: ${errText(e)}`;
      if (st) st.poisoned ||= msg;
      this.log.warn(msg);
      const error = {
        role: "assistant", content: [], api: model.api, provider: model.provider, model: model.id,
        usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
        stopReason: options?.signal?.aborted ? "aborted" : "error", errorMessage: msg, timestamp: Date.now(),
      };
      stream.push({ type: "error", reason: error.stopReason, error });
      stream.end(error);
    };
    /** @type {RunState | undefined} */
    let st;
    (async () => {
      st = await this.#claim(options?.requestId);
      const { message } = await this.#gatewayCall(st, model, context, options ?? {}, (ev) => stream.push(ev));
      stream.push({ type: "done", reason: message.stopReason, message });
      stream.end(message);
    })().catch((e) => fail(e, st));
    return stream;
  }

  /**
   * One model call of a ready run through the gateway.
   * @param {RunState} st
   * @param {{api: string, provider: string, id: string, maxTokens?: number}} model
   * @param {import("./providers.js").Context} context
   * @param {{requestId?: string, signal?: AbortSignal, maxTokens?: number, temperature?: number}} options
   * @param {(ev: any) => void} emit
   */
  async #gatewayCall(st, model, context, options, emit) {
    if (this.refused) throw new RunBlocked(this.refusal);
    if (!st.usable || !st.chain || !st.turn) throw new RunBlocked(`clawea: model call refused: ${st.poisoned || st.error || "no attested run with an open turn"}`);
    const route = routeOf(model);
    const body = buildRequest(route.api, route.model, context, { maxTokens: options.maxTokens ?? model.maxTokens, temperature: options.temperature });
    const payload = llmCallPayload({
      callId: /** @type {string} */ (options.requestId), provider: route.provider, model: route.model, prompt: st.prompt,
      promptHash: st.run.system_prompt_hash_b64u, reportHash: st.run.report_hash_b64u, systemText: systemTextOf(route.api, body),
    });
    if (!payload.attested_prefix) throw new RunBlocked("clawea: model call refused: its system text does not start with the attested prompt");
    const event = st.chain.add("llm_call", sha256B64u(JSON.stringify(payload)));
    st.llmCalls.push({ event, payload });
    const sse = new SSEParser();
    const asm = new Assembler(route.api, model, emit);
    const runId = st.run.run_id;
    const path = `/v1/runs/${encodeURIComponent(runId)}/model/${encodeURIComponent(route.provider)}/${GATEWAY_API[route.api]}`;
    const res = await this.client.modelCall(runId, st.capability, path, {
      headers: { [TURN_HEADER]: st.turn.turn_id, [LLM_CALL_HEADER]: llmCallHeader(event, payload) },
      body, signal: options.signal,
      onChunk: (c) => {
        for (const ev of sse.push(c)) asm.push(ev);
      },
    });
    // A signed 2xx answer: the relayed body is the provider's, unless the
    // gateway says the relay failed.
    const failed = res.trailers[ERROR_TRAILER];
    if (failed) throw new GatewayRefused(res.status, `the answer failed (${String(failed).slice(0, 64)})`);
    const receipt = verifyReceipt(this.pin, res.trailers[RECEIPT_TRAILER], {
      runId, eventHash: event.event_hash_b64u, requestHash: sha256B64u(body), responseHash: res.responseHash, provider: route.provider, model: route.model,
    });
    st.receipts.push(receipt);
    const ct = res.headers["content-type"] ?? "";
    if (!/^text\/event-stream(;|$)/i.test(ct)) throw new Error(`the gateway answered ${ct || "no content type"}, not an event stream`);
    for (const ev of sse.end()) asm.push(ev);
    return { message: asm.finish(), receipt };
  }

  /** @param {RunState} st */
  async #close(st) {
    if (!st.run || st.status === "closed") return;
    const prev = st.status;
    st.status = "closed";
    try {
      await this.client.close(st.run.run_id, st.capability);
    } catch (e) {
      this.log.warn(`clawea: closing run ${st.run.run_id} (${prev}): ${errText(e)}`);
    }
    st.capability = "";
    st.prompt = "";
    st.systemText = null;
  }
}

/**
 * Where a model of the plugin's provider goes: OpenClaw's model id is
 * "<provider>/<model>" of the gateway's routes, its api one the transport
 * speaks.
 * @param {{api: string, provider: string, id: string}} model
 */
export function routeOf(model) {
  if (model.provider !== PLUGIN_ID) throw new RunBlocked(`clawea: provider ${model.provider} is not routed through the attester's gateway`);
  const i = typeof model.id === "string" ? model.id.indexOf("/") : -1;
  if (i <= 0 || i === model.id.length - 1) throw new RunBlocked(`clawea: model ${JSON.stringify(model.id)} is not "<provider>/<model>"`);
  if (!APIS.includes(model.api)) throw new RunBlocked(`clawea: api ${JSON.stringify(model.api)} is not one the gateway transport speaks (${APIS.join(", ")})`);
  return { provider: model.id.slice(0, i), model: model.id.slice(i + 1), api: model.api };
}

/** @param {unknown} e */
function errText(e) {
  return e instanceof Error ? e.message : String(e);
}

/**
 * @param {string} text
 * @param {Record<string, unknown>} details
 */
function textResult(text, details) {
  return { content: [{ type: "text", text }], details };
}

/** JSON schema of the verify tool's parameters. */
export const VERIFY_PARAMETERS = {
  type: "object",
  properties: {
    message_id: {
      type: "string",
      description: "Optional, with content_sha256_b64u: the id of the owner's signed message of this turn to check.",
    },
    content_sha256_b64u: {
      type: "string",
      description: "Optional, with message_id: the SHA-256 (base64url) of that message's content.",
    },
  },
  additionalProperties: false,
};

/**
 * Wires a Controller into OpenClaw's plugin API.
 * @param {any} api OpenClaw's plugin API
 * @param {Controller} c
 */
export function registerWith(api, c) {
  // Highest priority: the first systemPrompt returned wins, and the gate
  // runs before any other plugin's.
  const first = { priority: 1000 };
  api.on("before_prompt_build", (ev, ctx) => c.beforePromptBuild(ev, ctx), first);
  api.on("before_agent_run", (ev, ctx) => c.beforeAgentRun(ev, ctx), first);
  api.on("llm_input", (ev, ctx) => c.llmInput(ev, ctx));
  api.on("model_call_started", (ev, ctx) => c.modelCallStarted(ev, ctx));
  api.on("before_tool_call", (ev, ctx) => c.beforeToolCall(ev, ctx), first);
  api.on("agent_end", (ev, ctx) => c.agentEnd(ev, ctx));
  api.registerTool(
    (/** @type {any} */ toolCtx) => ({
      name: "verify",
      label: "verify",
      description:
        "Owner-only: verify the current turn with the clawea attester (checks the owner's signed message); " +
        "gated tools stay blocked until the owner's turn is verified.",
      parameters: VERIFY_PARAMETERS,
      execute: (/** @type {string} */ _id, /** @type {any} */ params) => c.verifyTool(toolCtx ?? {}, params ?? {}),
    }),
    { name: "verify" },
  );
}

/**
 * Registers hooks that block every run and tool call with msg: what a
 * loaded plugin does when its config is invalid (fail closed).
 * @param {any} api
 * @param {string} msg
 */
export function registerRefusing(api, msg) {
  const reason = `clawea: refusing to run: ${msg}`;
  api.on("before_agent_run", () => ({ outcome: "block", reason, message: reason }), { priority: 1000 });
  api.on("before_tool_call", () => ({ block: true, blockReason: reason }), { priority: 1000 });
}
