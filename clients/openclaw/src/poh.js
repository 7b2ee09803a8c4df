// The Proof-of-Harness (PoH) pieces the plugin produces: the event chain and
// the signed proof bundle envelope (docs/spec/hashing-and-envelopes.md). PoH
// hashes JSON.stringify output (keys in emitted order), not JCS.
import { b64u, sha256B64u, HASH_B64U } from "./hash.js";

/** JavaScript's toISOString: RFC 3339, UTC, milliseconds. */
export const formatTime = (/** @type {Date} */ d) => d.toISOString();

/**
 * @typedef {{event_id: string, run_id: string, event_type: string, timestamp: string,
 *   payload_hash_b64u: string, prev_hash_b64u: string | null, event_hash_b64u: string}} Event
 */

/**
 * The hash of an event header: b64u(SHA-256(JSON.stringify({event_id,
 * run_id, event_type, timestamp, payload_hash_b64u, prev_hash_b64u}))).
 * @param {Omit<Event, "event_hash_b64u">} h
 */
export function eventHash(h) {
  return sha256B64u(
    JSON.stringify({
      event_id: h.event_id,
      run_id: h.run_id,
      event_type: h.event_type,
      timestamp: h.timestamp,
      payload_hash_b64u: h.payload_hash_b64u,
      prev_hash_b64u: h.prev_hash_b64u,
    }),
  );
}

/**
 * Checks that an event is well formed and its hash is its header's.
 * @param {any} e
 * @returns {e is Event}
 */
export function isValidEvent(e) {
  if (!e || typeof e !== "object") return false;
  const keys = ["event_id", "run_id", "event_type", "timestamp", "payload_hash_b64u", "prev_hash_b64u", "event_hash_b64u"];
  if (Object.keys(e).length !== keys.length || !keys.every((k) => k in e)) return false;
  for (const k of ["event_id", "run_id", "event_type", "timestamp"]) if (typeof e[k] !== "string" || e[k] === "") return false;
  if (!HASH_B64U.test(e.payload_hash_b64u) || !HASH_B64U.test(e.event_hash_b64u)) return false;
  if (e.prev_hash_b64u !== null && !(typeof e.prev_hash_b64u === "string" && HASH_B64U.test(e.prev_hash_b64u))) return false;
  return eventHash(e) === e.event_hash_b64u;
}

/** A run's event chain, started by the attester's prompt_committed event. */
export class EventChain {
  /**
   * @param {Event} first the run's prompt_committed event, exactly as the
   *   attester returned it
   * @param {{now?: () => Date, idPrefix?: string}} [opts]
   */
  constructor(first, opts = {}) {
    if (!isValidEvent(first) || first.event_type !== "prompt_committed" || first.prev_hash_b64u !== null) {
      throw new Error("the attester's prompt_committed event is malformed");
    }
    /** @type {Event[]} */
    this.events = [first];
    this.now = opts.now ?? (() => new Date());
    this.idPrefix = opts.idPrefix ?? "evt_oc_";
  }

  /**
   * Appends an event committing to payloadHash.
   * @param {string} type
   * @param {string} payloadHash
   */
  add(type, payloadHash) {
    if (!HASH_B64U.test(payloadHash)) throw new Error(`${type}: payload hash is not a b64u SHA-256 digest`);
    const prev = this.events[this.events.length - 1];
    const h = {
      event_id: this.idPrefix + String(this.events.length).padStart(3, "0"),
      run_id: prev.run_id,
      event_type: type,
      timestamp: formatTime(this.now()),
      payload_hash_b64u: payloadHash,
      prev_hash_b64u: prev.event_hash_b64u,
    };
    const e = { ...h, event_hash_b64u: eventHash(h) };
    this.events.push(e);
    return e;
  }
}

/**
 * A signed PoH envelope: payload_hash_b64u = b64u(SHA-256(JSON.stringify(
 * payload))), the signature is Ed25519 over the UTF-8 bytes of that string.
 * @param {string} type
 * @param {object} payload
 * @param {{did: string, sign: (data: string) => Uint8Array}} signer
 * @param {Date} issuedAt
 */
export function signEnvelope(type, payload, signer, issuedAt) {
  const hash = sha256B64u(JSON.stringify(payload));
  return {
    envelope_version: "1",
    envelope_type: type,
    payload,
    payload_hash_b64u: hash,
    hash_algorithm: "SHA-256",
    signature_b64u: b64u(signer.sign(hash)),
    algorithm: "Ed25519",
    signer_did: signer.did,
    issued_at: formatTime(issuedAt),
  };
}

/**
 * The proof bundle payload of an attested OpenClaw run.
 * @param {object} p
 * @param {string} p.runId attester run id
 * @param {string} p.agentDid
 * @param {Event[]} p.events
 * @param {string} p.promptHash attested system prompt hash
 * @param {string} p.reportHash attested SystemPromptReport hash
 * @param {string} p.ciphertextHash attested pack ciphertext hash
 * @param {Array<{event: Event, payload: any}>} p.llmCalls
 * @param {Array<Record<string, unknown>>} p.toolCalls the tool_call event payloads, in chain order
 * @param {{id: string, version: string}} p.harness
 * @param {Date} p.issuedAt
 * @param {object[]} [p.receipts] the gateway receipt envelopes of the run's model calls, in call
 *   order (absent when the run's model calls did not go through the attester's gateway)
 */
export function bundlePayload(p) {
  return {
    bundle_version: "1",
    bundle_id: "bundle_" + p.runId,
    agent_did: p.agentDid,
    event_chain: p.events,
    ...(p.receipts && p.receipts.length > 0 ? { receipts: p.receipts } : {}),
    metadata: {
      harness: { id: p.harness.id, version: p.harness.version, runtime: "clawea" },
      system_prompt_report: {
        system_prompt_report_version: "1",
        report_id: "spr_" + p.runId,
        run_id: p.runId,
        agent_did: p.agentDid,
        issued_at: formatTime(p.issuedAt),
        hash_algorithm: "SHA-256",
        calls: p.llmCalls.map(({ event, payload }) => ({
          event_id: event.event_id,
          event_hash_b64u: event.event_hash_b64u,
          provider: payload.provider,
          model: payload.model,
          // The attested prompt, which every call's system text starts with;
          // what was appended is in clawea_llm_calls (the prompt-suffix rule).
          rendered_system_prompt_hash_b64u: p.promptHash,
        })),
      },
      clawea: {
        system_prompt_report_hash_b64u: p.reportHash,
        prompt_pack_ciphertext_hash_b64u: p.ciphertextHash,
      },
      clawea_llm_calls: p.llmCalls.map(({ payload }) => payload),
      clawea_tool_calls: p.toolCalls,
    },
  };
}

/**
 * The llm_call event payload (docs/spec/openclaw-plugin.md): what the model
 * received, stated against the attested prompt. attested_prefix is true only
 * when the system text starts with the attested prompt.
 * @param {object} p
 * @param {string} p.callId OpenClaw's id of the model call
 * @param {string} p.provider
 * @param {string} p.model
 * @param {string} p.prompt attested prompt text
 * @param {string} p.promptHash
 * @param {string} p.reportHash
 * @param {string} p.systemText the system text handed to the provider
 */
export function llmCallPayload(p) {
  const prefix = p.systemText.startsWith(p.prompt);
  const suffix = prefix ? p.systemText.slice(p.prompt.length) : "";
  return {
    llm_call_version: "1",
    call_id: p.callId,
    provider: p.provider,
    model: p.model,
    system_prompt_hash_b64u: p.promptHash,
    system_prompt_report_hash_b64u: p.reportHash,
    system_text_hash_b64u: sha256B64u(p.systemText),
    attested_prefix: prefix,
    suffix_utf16_len: prefix ? suffix.length : null,
    suffix_hash_b64u: prefix ? sha256B64u(suffix) : null,
  };
}
