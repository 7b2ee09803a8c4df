// LEGACY: the attester API v1 (before the control socket and run
// capabilities): control endpoints on TCP, the prompt on the agent socket,
// and owner status asserted by the caller (sender_is_owner) from the
// plugin's own `owners` list. Kept only until attester API v2 is on every
// attester this plugin talks to; v2 (control.js) is the default. Under v1
// anything that can reach the TCP port can act on any run: that is the
// weakness v2 removes.
import { request } from "node:http";
import { ControlClient, AttesterError, unixRequest } from "./control.js";

const MAX_RESPONSE = 32 << 20;

/**
 * @param {URL} base
 * @param {{method: string, path: string, headers?: Record<string,string>, body?: string, timeoutMs: number}} r
 * @returns {Promise<{status: number, headers: import("node:http").IncomingHttpHeaders, body: Buffer}>}
 */
function tcpRequest(base, r) {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: base.hostname, port: base.port, method: r.method, path: r.path, headers: r.headers, timeout: r.timeoutMs },
      (res) => {
        /** @type {Buffer[]} */
        const chunks = [];
        let n = 0;
        res.on("data", (c) => {
          n += c.length;
          if (n > MAX_RESPONSE) return req.destroy(new Error("attester response too large"));
          chunks.push(c);
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("attester request timed out")));
    req.on("error", reject);
    req.end(r.body);
  });
}

/** A client of an attester API v1 (legacy). */
export class ControlClientV1 extends ControlClient {
  /**
   * @param {{url: string, agentSocket: string, owners: string[], timeoutMs?: number}} o
   */
  constructor(o) {
    super(o.agentSocket, { timeoutMs: o.timeoutMs });
    this.base = new URL(o.url);
    this.owners = new Set(o.owners);
    /** @type {Map<string, boolean>} run id -> whether its current turn is the owner's */
    this.ownerTurn = new Map();
  }

  /** @override */
  async call(/** @type {string} */ op, /** @type {string} */ method, /** @type {string} */ path, /** @type {{capability?: string, json?: unknown}} */ o = {}) {
    /** @type {Record<string,string>} */
    const headers = {};
    let body;
    if (o.json !== undefined) {
      body = JSON.stringify(o.json);
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(body));
    }
    const r = { method, path, headers, body, timeoutMs: this.timeoutMs };
    // v1 serves the prompt only on the agent socket, everything else on TCP.
    const res = /\/prompt$/.test(path) ? await unixRequest(this.socketPath, r) : await tcpRequest(this.base, r);
    if (res.status < 200 || res.status > 299) {
      let msg = "";
      try {
        const e = JSON.parse(res.body.toString("utf8"));
        if (typeof e.error === "string") msg = e.error.slice(0, 300);
      } catch {
        // not JSON
      }
      throw new AttesterError(op, res.status, msg);
    }
    return res;
  }

  /** @override */
  async createRun(/** @type {any} */ req) {
    const run = ControlClient.json("create run", await this.call("create run", "POST", "/v1/runs", { json: req }));
    if (typeof run.run_id !== "string" || !/^[A-Za-z0-9_.-]{1,128}$/.test(run.run_id)) throw new Error("attester create run: malformed run_id");
    return { ...run, capability: "" };
  }

  /** @override */
  async turn(/** @type {string} */ runId, /** @type {string} */ cap, /** @type {any} */ req) {
    const owner = this.owners.has(`${req.channel}:${req.sender_id}`);
    const t = await super.turn(runId, cap, { ...req, sender_is_owner: owner });
    this.ownerTurn.set(runId, owner);
    return { ...t, owner };
  }

  /** @override */
  async verify(/** @type {string} */ runId, /** @type {string} */ cap, /** @type {any} */ req) {
    /** @type {Record<string, unknown>} */
    const body = { turn_id: req.turn_id, sender_is_owner: this.ownerTurn.get(runId) === true };
    if (req.message_id !== undefined) body.message = req.message_id;
    if (req.content_sha256_b64u !== undefined) body.content_sha256_b64u = req.content_sha256_b64u;
    return super.verify(runId, cap, body);
  }

  /** @override */
  async close(/** @type {string} */ runId, /** @type {string} */ cap) {
    this.ownerTurn.delete(runId);
    await super.close(runId, cap);
  }
}
