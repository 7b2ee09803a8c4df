// A scripted model's answers as the providers stream them: OpenAI chat
// completions chunks and Anthropic messages events. Used by the fake
// attester's gateway and by the e2e's scripted upstream
// (hack/e2e-openclaw/gateway-upstream.mjs).

/**
 * The event stream of one answer: a text, or one tool call, per step (the
 * scripted model answers one step per request).
 * @param {string} api "openai-completions" or "anthropic-messages"
 * @param {string} model
 * @param {Array<{text?: string, tool?: string, args?: any, id?: string}>} steps
 */
export function sseReply(api, model, steps) {
  if (api === "openai-completions") return openai(model, steps);
  if (api === "anthropic-messages") return anthropic(model, steps);
  throw new Error(`upstream: no api ${api}`);
}

/** @param {string} s @param {number} n pieces of about n characters */
const pieces = (s, n) => {
  const out = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out.length ? out : [""];
};

/** @param {string} model @param {Array<{text?: string, tool?: string, args?: any, id?: string}>} steps */
function openai(model, steps) {
  const id = "chatcmpl-scripted";
  const chunk = (/** @type {any} */ delta, /** @type {string | null} */ finish) =>
    `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  let out = chunk({ role: "assistant", content: "" }, null);
  let tools = 0;
  for (const s of steps) {
    if (s.text !== undefined) for (const p of pieces(s.text, 7)) out += chunk({ content: p }, null);
    if (s.tool !== undefined) {
      const args = JSON.stringify(s.args ?? {});
      const index = tools++;
      out += chunk({ tool_calls: [{ index, id: s.id ?? `call_${index + 1}`, type: "function", function: { name: s.tool, arguments: "" } }] }, null);
      for (const p of pieces(args, 9)) out += chunk({ tool_calls: [{ index, function: { arguments: p } }] }, null);
    }
  }
  out += chunk({}, tools > 0 ? "tool_calls" : "stop");
  out += `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created: 0, model, choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`;
  return out + "data: [DONE]\n\n";
}

/** @param {string} model @param {Array<{text?: string, tool?: string, args?: any, id?: string}>} steps */
function anthropic(model, steps) {
  const ev = (/** @type {string} */ type, /** @type {any} */ v) => `event: ${type}\ndata: ${JSON.stringify({ type, ...v })}\n\n`;
  let out = ev("message_start", {
    message: { id: "msg_scripted", type: "message", role: "assistant", model, content: [], stop_reason: null, usage: { input_tokens: 10, output_tokens: 1 } },
  });
  out += ev("ping", {});
  let index = 0;
  let tools = 0;
  for (const s of steps) {
    if (s.text !== undefined) {
      out += ev("content_block_start", { index, content_block: { type: "text", text: "" } });
      for (const p of pieces(s.text, 7)) out += ev("content_block_delta", { index, delta: { type: "text_delta", text: p } });
      out += ev("content_block_stop", { index });
      index++;
    }
    if (s.tool !== undefined) {
      tools++;
      out += ev("content_block_start", { index, content_block: { type: "tool_use", id: s.id ?? `toolu_${tools}`, name: s.tool, input: {} } });
      for (const p of pieces(JSON.stringify(s.args ?? {}), 9)) out += ev("content_block_delta", { index, delta: { type: "input_json_delta", partial_json: p } });
      out += ev("content_block_stop", { index });
      index++;
    }
  }
  out += ev("message_delta", { delta: { stop_reason: tools > 0 ? "tool_use" : "end_turn" }, usage: { output_tokens: 5 } });
  return out + ev("message_stop", {});
}
