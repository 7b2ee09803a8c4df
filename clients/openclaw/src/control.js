// The attester's control API (docs/spec/attester-api.md, version 3), spoken
// over its unix control socket. The run capability lives only in the
// caller's memory. Every answer the plugin acts on is verified as signed by
// the pinned attester, for this request of this process, in the run's
// sequence (answer.js); a run's requests go one at a time so that its
// answers arrive in sequence.
import { request } from "node:http";
import { AnswerRefused, requestHash, verifyAnswer } from "./answer.js";
import { ERROR_TRAILER, GatewayRefused, gatewayRequest, refusalMessage } from "./gateway.js";

/** The attester answered with an error status. */
export class AttesterError extends Error {
  /**
   * @param {string} op
   * @param {number} status
   * @param {string} msg safe message from the attester
   */
  constructor(op, status, msg) {
    super(`attester ${op}: ${status}${msg ? ": " + msg : ""}`);
    this.name = "AttesterError";
    this.status = status;
  }
}

const CAPABILITY = /^clawea-cap-v1\.[A-Za-z0-9_-]{43}$/;
const MAX_RESPONSE = 32 << 20;

/**
 * A signed request whose answer never arrived (transport error, timeout):
 * the attester may have used a sequence number for it, so the run can no
 * longer be followed and is given up.
 */
export class AnswerLost extends Error {
  /** @param {string} op @param {string} why */
  constructor(op, why) {
    super(`attester ${op}: the answer was lost (${why}); the run's answer sequence is unknown`);
    this.name = "AnswerLost";
  }
}

/**
 * One HTTP/1.1 request over the unix socket.
 * @param {string} socketPath
 * @param {{method: string, path: string, headers?: Record<string,string>, body?: Buffer, timeoutMs: number}} r
 * @returns {Promise<{status: number, headers: import("node:http").IncomingHttpHeaders, body: Buffer}>}
 */
export function unixRequest(socketPath, r) {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        method: r.method,
        path: r.path,
        headers: { host: "attester", ...(r.headers ?? {}) },
        timeout: r.timeoutMs,
      },
      (res) => {
        /** @type {Buffer[]} */
        const chunks = [];
        let n = 0;
        res.on("data", (c) => {
          n += c.length;
          if (n > MAX_RESPONSE) {
            req.destroy(new Error("attester response too large"));
            return;
          }
          chunks.push(c);
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("attester request timed out")));
    req.on("error", reject);
    if (r.body !== undefined) req.end(r.body);
    else req.end();
  });
}

/**
 * A client of one attester control socket, pinned to one attester.
 */
export class ControlClient {
  /**
   * @param {string} socketPath
   * @param {{pin: {did: string, key: import("node:crypto").KeyObject}, self: {pid: number, startTime: number},
   *   timeoutMs?: number}} opts pin: the attester (answer.js attesterPin); self: this process (selfProcess)
   */
  constructor(socketPath, opts) {
    if (!opts?.pin || !opts?.self) throw new TypeError("ControlClient: an attester pin and this process are required");
    this.socketPath = socketPath;
    this.timeoutMs = opts.timeoutMs ?? 15000;
    this.pin = opts.pin;
    this.self = opts.self;
    /** @type {Map<string, number>} run id -> sequence number of its last answer (NaN: lost) */
    this.seqs = new Map();
    /** @type {Map<string, Promise<unknown>>} run id -> its last request */
    this.queues = new Map();
  }

  /**
   * Runs f after the run's previous request finished: one request of a run
   * at a time, so answers arrive in the order the attester numbered them.
   * @template T
   * @param {string} runId
   * @param {() => Promise<T>} f
   * @returns {Promise<T>}
   */
  #serial(runId, f) {
    const prev = this.queues.get(runId) ?? Promise.resolve();
    const next = prev.then(f, f);
    const settled = next.then(() => {}, () => {});
    this.queues.set(runId, settled);
    settled.then(() => {
      if (this.queues.get(runId) === settled) this.queues.delete(runId);
    });
    return next;
  }

  /**
   * One request. With signed, a 2xx answer is returned only when it is the
   * pinned attester's signed answer to exactly this request, in sequence
   * (signed.runId undefined: run creation, sequence 1).
   * @param {string} op
   * @param {string} method
   * @param {string} path
   * @param {{capability?: string, json?: unknown, signed?: {runId?: string}}} [o]
   */
  async call(op, method, path, o = {}) {
    /** @type {Record<string,string>} */
    const headers = {};
    if (o.capability !== undefined) headers.authorization = "Bearer " + o.capability;
    let body;
    if (o.json !== undefined) {
      body = Buffer.from(JSON.stringify(o.json), "utf8");
      headers["content-type"] = "application/json";
      headers["content-length"] = String(body.length);
    }
    const runId = o.signed?.runId;
    let seq = 1;
    if (runId !== undefined) {
      const last = this.seqs.get(runId);
      if (last === undefined || Number.isNaN(last)) throw new AnswerLost(op, "an earlier answer of this run was lost or refused");
      seq = last + 1;
    }
    let res;
    try {
      res = await unixRequest(this.socketPath, { method, path, headers, body, timeoutMs: this.timeoutMs });
    } catch (e) {
      if (o.signed && runId !== undefined) {
        this.seqs.set(runId, NaN);
        throw new AnswerLost(op, /** @type {Error} */ (e).message);
      }
      throw e;
    }
    if (o.signed && res.status >= 200 && res.status <= 299) {
      try {
        const st = verifyAnswer(this.pin, res.headers, {
          runId, seq, status: res.status, requestHash: requestHash(method, path, body ?? Buffer.alloc(0)), body: res.body,
          pid: this.self.pid, startTime: this.self.startTime,
        });
        this.seqs.set(st.run_id, st.seq);
      } catch (e) {
        if (runId !== undefined) this.seqs.set(runId, NaN);
        throw e;
      }
    }
    if (res.status < 200 || res.status > 299) {
      let msg = "";
      try {
        const e = JSON.parse(res.body.toString("utf8"));
        if (typeof e.error === "string") msg = e.error.slice(0, 300);
      } catch {
        // not JSON: no message
      }
      throw new AttesterError(op, res.status, msg);
    }
    return res;
  }

  /**
   * @param {string} op
   * @param {{status: number, body: Buffer}} res
   */
  static json(op, res) {
    try {
      const v = JSON.parse(res.body.toString("utf8"));
      if (!v || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
      return v;
    } catch (e) {
      throw new Error(`attester ${op}: malformed response: ${/** @type {Error} */ (e).message}`);
    }
  }

  /**
   * POST /v1/runs: opens the sealed pack in the attester. Returns the run
   * with its capability.
   * @param {{pack_b64u: string, manifest: unknown, report_hash_b64u: string, agent_id: string, session_key: string}} req
   */
  async createRun(req) {
    const res = await this.call("create run", "POST", "/v1/runs", { json: req, signed: {} });
    const run = ControlClient.json("create run", res);
    if (typeof run.run_id !== "string" || !/^[A-Za-z0-9_.-]{1,128}$/.test(run.run_id)) {
      throw new Error("attester create run: malformed run_id");
    }
    if (this.seqs.get(run.run_id) !== 1) {
      throw new AnswerRefused("ANSWER_RUN_MISMATCH", "the signed answer names another run than its body");
    }
    if (typeof run.capability !== "string" || !CAPABILITY.test(run.capability)) {
      throw new Error("attester create run: no valid run capability in the response");
    }
    return run;
  }

  /**
   * @param {string} runId
   * @param {string} capability
   */
  async prompt(runId, capability) {
    const res = await this.#serial(runId, () =>
      this.call("prompt", "GET", `/v1/runs/${encodeURIComponent(runId)}/prompt`, { capability, signed: { runId } }),
    );
    const h = res.headers["x-clawea-system-prompt-hash"];
    return { bytes: res.body, hashHeader: typeof h === "string" ? h : "" };
  }

  /** @param {string} runId @param {string} capability @param {object} req */
  turn(runId, capability, req) {
    return this.#runPost("turn", "turns", runId, capability, req);
  }

  /** @param {string} runId @param {string} capability @param {object} req */
  toolCall(runId, capability, req) {
    return this.#runPost("tool call", "tool-calls", runId, capability, req);
  }

  /** @param {string} runId @param {string} capability @param {object} req */
  verify(runId, capability, req) {
    return this.#runPost("verify", "verify", runId, capability, req);
  }

  /** @param {string} runId @param {string} capability @param {object} req */
  attestation(runId, capability, req) {
    return this.#runPost("attestation", "attestation", runId, capability, req);
  }

  /**
   * A signed JSON POST to /v1/runs/{runId}/{route}, serialized with the
   * run's other calls; what names it in errors.
   * @param {string} what @param {string} route @param {string} runId
   * @param {string} capability @param {object} req
   */
  async #runPost(what, route, runId, capability, req) {
    const res = await this.#serial(runId, () =>
      this.call(what, "POST", `/v1/runs/${encodeURIComponent(runId)}/${route}`, { capability, json: req, signed: { runId } }),
    );
    return ControlClient.json(what, res);
  }

  /**
   * POST /v1/runs/{id}/model/{provider}/{api}: one model call through the
   * attester's gateway (model-gateway.md), in the run's answer sequence. A
   * 2xx answer is returned only when the pinned attester signed it, in its
   * trailers, for this request, every body byte onChunk saw and this
   * process; it takes the run's next sequence number. A non-2xx answer (a
   * refusal, a relayed provider error) is unsigned, takes no number and is
   * thrown as a GatewayRefused.
   * @param {string} runId
   * @param {string} capability
   * @param {string} path
   * @param {{headers: Record<string, string>, body: Buffer, signal?: AbortSignal, onChunk: (c: Buffer) => void}} r
   */
  async modelCall(runId, capability, path, r) {
    return this.#serial(runId, async () => {
      const last = this.seqs.get(runId);
      if (last === undefined || Number.isNaN(last)) throw new AnswerLost("model call", "an earlier answer of this run was lost or refused");
      let res;
      try {
        res = await gatewayRequest(this.socketPath, {
          path, body: r.body, idleMs: this.timeoutMs, signal: r.signal, onChunk: r.onChunk,
          headers: { ...r.headers, authorization: "Bearer " + capability },
        });
      } catch (e) {
        this.seqs.set(runId, NaN);
        throw new AnswerLost("model call", /** @type {Error} */ (e).message);
      }
      if (res.status < 200 || res.status > 299) {
        const failed = res.trailers[ERROR_TRAILER];
        throw new GatewayRefused(res.status, res.relayed
          ? `the provider answered ${res.status}${failed ? ` (${String(failed).slice(0, 64)})` : ""}`
          : refusalMessage(res.kept));
      }
      try {
        // The statement of a relayed answer comes after its body: a trailer.
        verifyAnswer(this.pin, /** @type {any} */ (res.relayed ? res.trailers : res.headers), {
          runId, seq: last + 1, status: res.status, requestHash: requestHash("POST", path, r.body), bodyHash: res.responseHash,
          pid: this.self.pid, startTime: this.self.startTime,
        });
      } catch (e) {
        this.seqs.set(runId, NaN);
        throw e;
      }
      this.seqs.set(runId, last + 1);
      return res;
    });
  }

  /** @param {string} runId @param {string} capability */
  async audit(runId, capability) {
    // Unsigned: the attestation commits to the audit's root and count.
    const res = await this.#serial(runId, () => this.call("audit", "GET", `/v1/runs/${encodeURIComponent(runId)}/audit`, { capability }));
    const root = res.headers["x-clawea-audit-root"];
    const count = res.headers["x-clawea-audit-count"];
    return { body: res.body, root: typeof root === "string" ? root : "", count: typeof count === "string" ? count : "" };
  }

  /** @param {string} runId @param {string} capability */
  async close(runId, capability) {
    try {
      await this.#serial(runId, () => this.call("close run", "DELETE", `/v1/runs/${encodeURIComponent(runId)}`, { capability }));
    } finally {
      this.seqs.delete(runId);
    }
  }
}
