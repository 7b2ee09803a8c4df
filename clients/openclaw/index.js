// OpenClaw entry point of the clawea attester plugin. The logic is in
// src/plugin.js; this file only adapts it to OpenClaw's plugin API.
import { definePluginEntry } from "openclaw/plugin-sdk/plugin-entry";
import { createAssistantMessageEventStream } from "openclaw/plugin-sdk/llm";
import { Controller, PLUGIN_ID, RunBlocked, checkHookAccess, parseConfig, registerWith, registerRefusing } from "./src/plugin.js";
import { selfProcess } from "./src/answer.js";

// OpenClaw may call register more than once in a process (one registry per
// loader); the hooks of every registration must share the runs, so there is
// one controller per distinct config.
/** @type {Map<string, Controller>} */
const controllers = new Map();

export default definePluginEntry({
  id: PLUGIN_ID,
  name: "clawea attester",
  description: "Runs every agent turn under the clawea attester: attested system prompt, gated tools, owner verify, PoH bundle and execution attestation.",
  register(api) {
    let cfg;
    let self;
    try {
      cfg = parseConfig(api.pluginConfig);
      checkHookAccess(api.config);
      // The attester answers this process (pid and start time): without
      // them no answer can be checked.
      self = selfProcess();
    } catch (e) {
      // Fail closed: a loaded plugin with a bad config blocks every run
      // instead of letting it run unattested.
      const msg = e instanceof Error ? e.message : String(e);
      api.logger.error(msg);
      registerRefusing(api, msg);
      registerProvider(api, () => {
        throw new RunBlocked(`clawea: refusing to run: ${msg}`);
      });
      return;
    }
    const key = JSON.stringify(cfg);
    let c = controllers.get(key);
    if (!c) {
      const log = {
        info: (/** @type {string} */ m) => api.logger.info(m),
        warn: (/** @type {string} */ m) => api.logger.warn(m),
        error: (/** @type {string} */ m) => api.logger.error(m),
      };
      // api.version is this plugin's version; OpenClaw's is the runtime's.
      const v = api.runtime?.version;
      c = new Controller(cfg, {
        log, self, harnessVersion: typeof v === "string" && v !== "" ? v : undefined, createStream: createAssistantMessageEventStream,
      });
      controllers.set(key, c);
    }
    registerWith(api, c);
    const ctl = c;
    registerProvider(api, (model, context, options) => ctl.modelStream(model, context, options));
  },
});

/**
 * Registers the plugin's model provider: models "clawea/<provider>/<model>"
 * of models.providers.clawea, whose only transport is the attester's model
 * gateway over the control socket (docs/spec/openclaw-plugin.md section 7).
 * It holds no provider key: the attester does (OpenClaw wants an apiKey in
 * models.providers.clawea; the marker "clawea-gateway" is never sent).
 * @param {any} api
 * @param {(model: any, context: any, options: any) => any} stream
 */
function registerProvider(api, stream) {
  api.registerProvider({
    id: PLUGIN_ID,
    label: "clawea attester gateway",
    auth: [],
    catalog: {
      order: "late",
      run: async (/** @type {any} */ ctx) => {
        const provider = ctx.config?.models?.providers?.[PLUGIN_ID];
        return provider ? { provider } : null;
      },
    },
    createStreamFn: () => stream,
    wrapSimpleCompletionStreamFn: () => stream,
    buildReplayPolicy: (/** @type {any} */ ctx) => replayPolicy(ctx?.modelApi),
  });
}

/**
 * OpenClaw's replay policy for the provider: what it applies to a provider
 * of this api that no plugin owns, except that tool call ids are kept as the
 * model sent them. The gateway compares the history a request carries with
 * the answers it relayed, ids included (model-gateway.md section 3.4);
 * OpenClaw's "strict" ids would drop the underscore of OpenAI's "call_..."
 * and the request would be refused.
 * @param {unknown} api
 */
function replayPolicy(api) {
  if (api === "anthropic-messages") {
    return { sanitizeMode: "full", sanitizeToolCallIds: false, preserveSignatures: true, validateAnthropicTurns: true, allowSyntheticToolResults: true };
  }
  return { sanitizeToolCallIds: false, dropReasoningFromHistory: true, applyAssistantFirstOrderingFix: true, validateGeminiTurns: true, validateAnthropicTurns: true };
}
