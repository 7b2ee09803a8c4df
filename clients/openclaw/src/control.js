// The attester's control API (docs/spec/attester-api.md), spoken over its
// unix control socket. The run capability lives only in this object's memory.
import { request } from "node:http";

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
 * One HTTP/1.1 request over the unix socket.
 * @param {string} socketPath
 * @param {{method: string, path: string, headers?: Record<string,string>, body?: string, timeoutMs: number}} r
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

/** A client of one attester control socket. */
export class ControlClient {
  /**
   * @param {string} socketPath
   * @param {{timeoutMs?: number}} [opts]
   */
  constructor(socketPath, opts = {}) {
    this.socketPath = socketPath;
    this.timeoutMs = opts.timeoutMs ?? 15000;
  }

  /**
   * @param {string} op
   * @param {string} method
   * @param {string} path
   * @param {{capability?: string, json?: unknown}} [o]
   */
  async call(op, method, path, o = {}) {
    /** @type {Record<string,string>} */
    const headers = {};
    if (o.capability !== undefined) headers.authorization = "Bearer " + o.capability;
    let body;
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(body));
    }
    const res = await unixRequest(this.socketPath, { method, path, headers, body, timeoutMs: this.timeoutMs });
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
    const run = ControlClient.json("create run", await this.call("create run", "POST", "/v1/runs", { json: req }));
    if (typeof run.run_id !== "string" || !/^[A-Za-z0-9_.-]{1,128}$/.test(run.run_id)) {
      throw new Error("attester create run: malformed run_id");
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
    const res = await this.call("prompt", "GET", `/v1/runs/${encodeURIComponent(runId)}/prompt`, { capability });
    const h = res.headers["x-clawea-system-prompt-hash"];
    return { bytes: res.body, hashHeader: typeof h === "string" ? h : "" };
  }

  /** @param {string} runId @param {string} capability @param {object} req */
  async turn(runId, capability, req) {
    return ControlClient.json("turn", await this.call("turn", "POST", `/v1/runs/${encodeURIComponent(runId)}/turns`, { capability, json: req }));
  }

  /** @param {string} runId @param {string} capability @param {object} req */
  async toolCall(runId, capability, req) {
    return ControlClient.json("tool call", await this.call("tool call", "POST", `/v1/runs/${encodeURIComponent(runId)}/tool-calls`, { capability, json: req }));
  }

  /** @param {string} runId @param {string} capability @param {object} req */
  async verify(runId, capability, req) {
    return ControlClient.json("verify", await this.call("verify", "POST", `/v1/runs/${encodeURIComponent(runId)}/verify`, { capability, json: req }));
  }

  /** @param {string} runId @param {string} capability @param {object} req */
  async attestation(runId, capability, req) {
    return ControlClient.json("attestation", await this.call("attestation", "POST", `/v1/runs/${encodeURIComponent(runId)}/attestation`, { capability, json: req }));
  }

  /** @param {string} runId @param {string} capability */
  async audit(runId, capability) {
    const res = await this.call("audit", "GET", `/v1/runs/${encodeURIComponent(runId)}/audit`, { capability });
    const root = res.headers["x-clawea-audit-root"];
    const count = res.headers["x-clawea-audit-count"];
    return { body: res.body, root: typeof root === "string" ? root : "", count: typeof count === "string" ? count : "" };
  }

  /** @param {string} runId @param {string} capability */
  async close(runId, capability) {
    await this.call("close run", "DELETE", `/v1/runs/${encodeURIComponent(runId)}`, { capability });
  }
}
