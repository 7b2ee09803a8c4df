// The provider wire formats the plugin's model transport speaks through the
// attester's model gateway (docs/spec/openclaw-plugin.md section 7): the
// request body built from OpenClaw's model context, and the provider's event
// stream turned back into OpenClaw's assistant message events. The bytes
// built here are the bytes the gateway checks, receipts and forwards.

/** The provider APIs the transport speaks (the gateway path's {api}). */
export const APIS = Object.freeze(["openai-completions", "anthropic-messages"]);

/** A provider stream the transport cannot follow. */
export class ProviderStreamError extends Error {
  /** @param {string} msg */
  constructor(msg) {
    super(`provider stream: ${msg}`);
    this.name = "ProviderStreamError";
  }
}

/**
 * @typedef {{type: "text", text: string} | {type: "image", data: string, mimeType: string}} Part
 * @typedef {{role: "user", content: string | Part[]} |
 *   {role: "assistant", content: Array<{type: string, text?: string, id?: string, name?: string, arguments?: any}>} |
 *   {role: "toolResult", toolCallId: string, toolName: string, content: Part[], isError: boolean}} Message
 * @typedef {{systemPrompt?: string, messages: Message[], tools?: Array<{name: string, description?: string, parameters: any}>}} Context
 */

/** @param {string | Part[]} c */
const textOf = (c) => (typeof c === "string" ? c : c.filter((p) => p.type === "text").map((p) => /** @type {any} */ (p).text).join("\n"));

/**
 * The request body for api, as UTF-8 JSON bytes.
 * @param {string} api
 * @param {string} model the upstream model id
 * @param {Context} ctx
 * @param {{maxTokens?: number, temperature?: number}} [opts]
 */
export function buildRequest(api, model, ctx, opts = {}) {
  let body;
  if (api === "openai-completions") body = openaiRequest(model, ctx, opts);
  else if (api === "anthropic-messages") body = anthropicRequest(model, ctx, opts);
  else throw new ProviderStreamError(`api ${JSON.stringify(api)} is not one the gateway transport speaks`);
  return Buffer.from(JSON.stringify(body), "utf8");
}

/** @param {string} model @param {Context} ctx @param {{maxTokens?: number, temperature?: number}} opts */
function openaiRequest(model, ctx, opts) {
  /** @type {any[]} */
  const messages = [];
  if (ctx.systemPrompt) messages.push({ role: "system", content: ctx.systemPrompt });
  for (const m of ctx.messages) {
    if (m.role === "user") {
      if (typeof m.content === "string") messages.push({ role: "user", content: m.content });
      else {
        messages.push({
          role: "user",
          content: m.content.map((p) =>
            p.type === "text" ? { type: "text", text: p.text } : { type: "image_url", image_url: { url: `data:${p.mimeType};base64,${p.data}` } },
          ),
        });
      }
    } else if (m.role === "assistant") {
      const text = m.content.filter((b) => b.type === "text").map((b) => b.text).join("");
      const calls = m.content.filter((b) => b.type === "toolCall");
      /** @type {any} */
      const out = { role: "assistant", content: text === "" ? null : text };
      if (calls.length > 0) {
        out.tool_calls = calls.map((b) => ({ id: b.id, type: "function", function: { name: b.name, arguments: JSON.stringify(b.arguments ?? {}) } }));
      }
      if (out.content !== null || out.tool_calls) messages.push(out);
    } else if (m.role === "toolResult") {
      messages.push({ role: "tool", tool_call_id: m.toolCallId, content: textOf(m.content) });
    }
  }
  /** @type {any} */
  const body = { model, messages, stream: true, stream_options: { include_usage: true } };
  if (ctx.tools && ctx.tools.length > 0) {
    body.tools = ctx.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description ?? "", parameters: t.parameters } }));
  }
  if (opts.maxTokens !== undefined) body.max_tokens = opts.maxTokens;
  if (opts.temperature !== undefined) body.temperature = opts.temperature;
  return body;
}

/** @param {string} model @param {Context} ctx @param {{maxTokens?: number, temperature?: number}} opts */
function anthropicRequest(model, ctx, opts) {
  /** @type {any[]} */
  const messages = [];
  for (const m of ctx.messages) {
    if (m.role === "user") {
      const content = typeof m.content === "string"
        ? m.content
        : m.content.map((p) => (p.type === "text" ? { type: "text", text: p.text } : { type: "image", source: { type: "base64", media_type: p.mimeType, data: p.data } }));
      messages.push({ role: "user", content });
    } else if (m.role === "assistant") {
      const content = [];
      for (const b of m.content) {
        if (b.type === "text" && b.text) content.push({ type: "text", text: b.text });
        else if (b.type === "toolCall") content.push({ type: "tool_use", id: b.id, name: b.name, input: b.arguments ?? {} });
      }
      if (content.length > 0) messages.push({ role: "assistant", content });
    } else if (m.role === "toolResult") {
      const block = { type: "tool_result", tool_use_id: m.toolCallId, content: textOf(m.content), is_error: m.isError === true };
      // Consecutive tool results answer one assistant message: one user message.
      const last = messages[messages.length - 1];
      if (last && last.role === "user" && Array.isArray(last.content) && last.content.every((/** @type {any} */ c) => c.type === "tool_result")) last.content.push(block);
      else messages.push({ role: "user", content: [block] });
    }
  }
  /** @type {any} */
  const body = { model, max_tokens: opts.maxTokens ?? 4096, messages, stream: true };
  if (ctx.systemPrompt) body.system = ctx.systemPrompt;
  if (ctx.tools && ctx.tools.length > 0) {
    body.tools = ctx.tools.map((t) => ({ name: t.name, description: t.description ?? "", input_schema: t.parameters }));
  }
  if (opts.temperature !== undefined) body.temperature = opts.temperature;
  return body;
}

/**
 * The system text a request body carries (what the gateway compares with
 * the attested prompt): the system message of a chat completions request,
 * the system field of a messages request.
 * @param {string} api
 * @param {Buffer} body
 */
export function systemTextOf(api, body) {
  const v = JSON.parse(body.toString("utf8"));
  if (api === "openai-completions") {
    const m = v.messages?.[0];
    return m && m.role === "system" && typeof m.content === "string" ? m.content : "";
  }
  return typeof v.system === "string" ? v.system : "";
}

/**
 * Builds OpenClaw's assistant message from a provider's stream events and
 * pushes OpenClaw's events as they happen. finish() returns the final
 * message; the caller emits "done" only after the gateway's receipt verified.
 */
export class Assembler {
  /**
   * @param {string} api
   * @param {{api: string, provider: string, id: string}} model OpenClaw's model
   * @param {(ev: any) => void} emit
   */
  constructor(api, model, emit) {
    if (!APIS.includes(api)) throw new ProviderStreamError(`api ${JSON.stringify(api)} is not supported`);
    this.api = api;
    this.emit = emit;
    this.message = {
      role: "assistant", content: /** @type {any[]} */ ([]), api: model.api, provider: model.provider, model: model.id,
      usage: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
      stopReason: /** @type {string} */ ("stop"), timestamp: Date.now(),
    };
    /** @type {Map<number, {index: number, kind: "text" | "tool", raw: string}>} provider block -> content index */
    this.blocks = new Map();
    this.ended = false;
    this.started = false;
    /** A chat completions choice carried its finish_reason. */
    this.finished = false;
  }

  /** @param {{event: string, data: string}} ev */
  push(ev) {
    if (this.ended) throw new ProviderStreamError("an event after the end of the response");
    if (!this.started) {
      this.started = true;
      this.emit({ type: "start", partial: this.message });
    }
    if (this.api === "openai-completions") this.#openai(ev);
    else this.#anthropic(ev);
  }

  /** @param {string} data */
  static #json(data) {
    try {
      const v = JSON.parse(data);
      if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
      return v;
    } catch (e) {
      throw new ProviderStreamError(`malformed event data (${/** @type {Error} */ (e).message})`);
    }
  }

  /** @param {{event: string, data: string}} ev */
  #openai(ev) {
    if (ev.data === "[DONE]") {
      this.#closeAll();
      this.ended = true;
      return;
    }
    const v = Assembler.#json(ev.data);
    if (v.error) throw new ProviderStreamError("the provider sent an error event");
    if (v.usage && typeof v.usage === "object") {
      this.#usage(v.usage.prompt_tokens, v.usage.completion_tokens);
    }
    const choice = Array.isArray(v.choices) ? v.choices[0] : undefined;
    if (!choice) return;
    const d = choice.delta ?? {};
    if (typeof d.content === "string" && d.content !== "") this.#text(-1, d.content);
    if (Array.isArray(d.tool_calls)) {
      for (const tc of d.tool_calls) {
        if (!Number.isSafeInteger(tc?.index) || tc.index < 0) throw new ProviderStreamError("a tool call delta without an index");
        const key = 1000 + tc.index;
        if (!this.blocks.has(key)) {
          if (typeof tc.id !== "string" || typeof tc.function?.name !== "string") throw new ProviderStreamError("a tool call without an id or name");
          this.#toolStart(key, tc.id, tc.function.name);
        }
        if (typeof tc.function?.arguments === "string" && tc.function.arguments !== "") this.#toolDelta(key, tc.function.arguments);
      }
    }
    if (typeof choice.finish_reason === "string") {
      this.#closeAll();
      this.message.stopReason = choice.finish_reason === "tool_calls" ? "toolUse" : choice.finish_reason === "length" ? "length" : "stop";
      this.finished = true;
    }
  }

  /** @param {{event: string, data: string}} ev */
  #anthropic(ev) {
    const v = Assembler.#json(ev.data);
    switch (v.type) {
      case "message_start":
        this.#usage(v.message?.usage?.input_tokens, v.message?.usage?.output_tokens);
        return;
      case "content_block_start": {
        const b = v.content_block;
        if (!Number.isSafeInteger(v.index) || this.blocks.has(v.index)) throw new ProviderStreamError("a content block with a bad or repeated index");
        if (b?.type === "text") {
          this.#text(v.index, typeof b.text === "string" ? b.text : "");
        } else if (b?.type === "tool_use") {
          if (typeof b.id !== "string" || typeof b.name !== "string") throw new ProviderStreamError("a tool_use block without an id or name");
          this.#toolStart(v.index, b.id, b.name);
        }
        return;
      }
      case "content_block_delta": {
        const d = v.delta;
        if (d?.type === "text_delta" && typeof d.text === "string") this.#text(v.index, d.text);
        else if (d?.type === "input_json_delta" && typeof d.partial_json === "string") this.#toolDelta(v.index, d.partial_json);
        return;
      }
      case "content_block_stop":
        this.#close(v.index);
        return;
      case "message_delta":
        if (typeof v.delta?.stop_reason === "string") {
          const r = v.delta.stop_reason;
          this.message.stopReason = r === "tool_use" ? "toolUse" : r === "max_tokens" ? "length" : "stop";
        }
        if (v.usage) this.#usage(undefined, v.usage.output_tokens);
        return;
      case "message_stop":
        this.#closeAll();
        this.ended = true;
        return;
      case "ping":
        return;
      case "error":
        throw new ProviderStreamError("the provider sent an error event");
      default:
        throw new ProviderStreamError(`an event of unknown type ${JSON.stringify(String(v.type)).slice(0, 40)}`);
    }
  }

  /** @param {unknown} input @param {unknown} output */
  #usage(input, output) {
    const u = this.message.usage;
    if (Number.isSafeInteger(input)) u.input = /** @type {number} */ (input);
    if (Number.isSafeInteger(output)) u.output = /** @type {number} */ (output);
    u.totalTokens = u.input + u.output;
  }

  /** @param {number} key @param {string} delta */
  #text(key, delta) {
    let b = this.blocks.get(key);
    if (!b) {
      b = { index: this.message.content.length, kind: "text", raw: "" };
      this.blocks.set(key, b);
      this.message.content.push({ type: "text", text: "" });
      this.emit({ type: "text_start", contentIndex: b.index, partial: this.message });
    }
    if (b.kind !== "text") throw new ProviderStreamError("text in a tool call block");
    if (delta === "") return;
    this.message.content[b.index].text += delta;
    this.emit({ type: "text_delta", contentIndex: b.index, delta, partial: this.message });
  }

  /** @param {number} key @param {string} id @param {string} name */
  #toolStart(key, id, name) {
    const b = { index: this.message.content.length, kind: /** @type {"tool"} */ ("tool"), raw: "" };
    this.blocks.set(key, b);
    this.message.content.push({ type: "toolCall", id, name, arguments: {} });
    this.emit({ type: "toolcall_start", contentIndex: b.index, partial: this.message });
  }

  /** @param {number} key @param {string} delta */
  #toolDelta(key, delta) {
    const b = this.blocks.get(key);
    if (!b || b.kind !== "tool") throw new ProviderStreamError("tool call arguments without a tool call");
    b.raw += delta;
    this.emit({ type: "toolcall_delta", contentIndex: b.index, delta, partial: this.message });
  }

  /** @param {number} key */
  #close(key) {
    const b = this.blocks.get(key);
    if (!b || b.raw === null) return;
    const c = this.message.content[b.index];
    if (b.kind === "text") {
      this.emit({ type: "text_end", contentIndex: b.index, content: c.text, partial: this.message });
    } else {
      let args = {};
      if (b.raw !== "") {
        try {
          args = JSON.parse(b.raw);
        } catch {
          throw new ProviderStreamError(`the arguments of tool call ${JSON.stringify(c.name)} are not JSON`);
        }
        if (!args || typeof args !== "object" || Array.isArray(args)) throw new ProviderStreamError(`the arguments of tool call ${JSON.stringify(c.name)} are not an object`);
      }
      c.arguments = args;
      this.emit({ type: "toolcall_end", contentIndex: b.index, toolCall: c, partial: this.message });
    }
    b.raw = /** @type {any} */ (null);
  }

  #closeAll() {
    for (const k of [...this.blocks.keys()]) this.#close(k);
  }

  /** The final message; throws when the provider's response did not end. */
  finish() {
    if (!this.ended) {
      // A chat completions stream may end with its finish_reason and no [DONE].
      if (!this.finished) throw new ProviderStreamError("the response ended before the provider ended it");
      this.#closeAll();
      this.ended = true;
    }
    return this.message;
  }
}
