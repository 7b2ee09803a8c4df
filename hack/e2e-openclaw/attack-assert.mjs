#!/usr/bin/env node
// The assertions of make e2e-openclaw's attacks (attacks.sh): what the
// scripted model's exec got back when it tried to use a capability read out
// of OpenClaw's memory, and to put a relay in the control socket's place.
// Prints one "attack (x): ..." line per finding; exits 1 on a failed check.
//   node attack-assert.mjs --work DIR --canary FILE
// With --layout, the same attacks in the recommended layout (layout.sh): the
// tools run in OpenClaw's ssh sandbox under another account, and each attack
// must be denied by the kernel; the run must be attested with the isolation
// the layout gives.
//   node attack-assert.mjs --layout --work DIR --run-dir DIR --tools-user NAME
//     --orchestrator-uid N --attester-uid N --yama absent|0..3
import { readFileSync, readdirSync, existsSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values: opts } = parseArgs({
  options: {
    work: { type: "string" }, canary: { type: "string" }, layout: { type: "boolean" }, "run-dir": { type: "string" },
    "tools-user": { type: "string" }, "orchestrator-uid": { type: "string" }, "attester-uid": { type: "string" }, yama: { type: "string" },
  },
  strict: true,
});
const work = /** @type {string} */ (opts.work);
let failed = 0;
/** @param {boolean} ok @param {string} what */
function check(ok, what) {
  console.error(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failed++;
}
const say = (/** @type {string} */ s) => console.error(`attack ${s}`);
const lines = (/** @type {string} */ f) => (existsSync(f) ? readFileSync(f, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);
const clip = (/** @type {unknown} */ s) => String(s ?? "<none>").replace(/\s+/g, " ").slice(0, 300);

const log = lines(join(work, opts.layout ? "layout-model.log" : "attack-model.log"));
const requests = (/** @type {string} */ scene) => log.filter((e) => e.scene === scene);
/** The tool results of a scene's last model request (every result of the turn). */
const results = (/** @type {string} */ scene) => /** @type {string[]} */ (requests(scene).at(-1)?.tool_results ?? []);
const runDirs = (/** @type {string} */ name) => readdirSync(join(work, "runs", name));
const ocText = (/** @type {string} */ name) => (existsSync(join(work, `${name}.json`)) ? readFileSync(join(work, `${name}.json`), "utf8") : "");

/** The attacks from the ssh sandbox of the recommended layout (layout.sh). */
function layout() {
  const denied = (/** @type {string} */ code) => code === "EACCES" || code === "EPERM";
  const ocUid = Number(opts["orchestrator-uid"]);
  const r = results("layout");
  check(/"verified: this turn is verified by the attester/.test(r[0] ?? ""), `layout: the owner verified the turn (verify through the Tool Search bridge): ${clip(r[0])}`);
  // (a) OpenClaw's memory and environment, from the tools' account.
  const line = /steal: .*/.exec(r[1] ?? "")?.[0] ?? "";
  say(`(a) layout: ${clip(line || r[1])}`);
  const procs = [...line.matchAll(/(\d+)\((\S+) uid=(\d+) \d+MB((?: \w+=\w+)*)[^)]*\)/g)].map((m) => ({
    pid: m[1], comm: m[2], uid: Number(m[3]), opened: Object.fromEntries([...m[4].matchAll(/ (\w+)=(\w+)/g)].map((x) => [x[1], x[2]])),
  }));
  check(/ found=proc /.test(line), "(a) the exec has no OpenClaw ancestor (it runs in the sandbox) and looked in /proc");
  check(procs.some((p) => p.uid === ocUid), `(a) it found the orchestrator's OpenClaw processes (uid ${ocUid}): ${procs.map((p) => `${p.pid}:${p.comm}:${p.uid}`).join(" ")}`);
  check(procs.length > 0 && procs.every((p) => denied(p.opened.maps) && denied(p.opened.mem) && denied(p.opened.environ)),
    "(a) /proc/<pid>/maps, /proc/<pid>/mem and /proc/<pid>/environ of every OpenClaw process were refused (EACCES/EPERM)");
  check(/ read=no caps=0 runs=0 /.test(line), "(a) no capability and no run id was read");
  // (c) the control socket from the tools' account.
  const sock = / socket=(\S+)/.exec(line)?.[1] ?? "";
  say(`(c) layout: the control socket from the sandbox: ${sock || "<none>"}`);
  check(denied(sock), `(c) connecting to the control socket was refused by the kernel (${sock}): the socket's directory is closed to the tools' account`);
  // (b) rename the socket for a relay.
  say(`(b) layout: ${clip(r[2])}`);
  check(/relay: cannot rename the socket: (EACCES|EPERM)/.test(r[2] ?? ""), "(b) renaming the control socket was refused (EACCES/EPERM): no relay");
  check((r[3] ?? "").split(/\s+/).includes(`tools-account=${opts["tools-user"]}`),
    `layout: exec ran as the tools' account ${opts["tools-user"]}, and the gate still answered through the real socket: ${clip(r[3])}`);
  const oc = ocText("layout");
  check(readFileSync(join(work, "layout.rc"), "utf8").trim() === "0" && /layout turn done/.test(oc), "layout: the OpenClaw turn finished");
  const run = /** @type {string} */ (opts["run-dir"]);
  const audit = lines(join(run, "audit.jsonl")).map((d) => `${d.tool}:${d.decision}`);
  check(existsSync(join(run, "attestation.json")), `layout: the run was attested (${run})`);
  check(JSON.stringify(audit) === JSON.stringify(["tool_call:allow", "verify:allow", "exec:allow", "exec:allow", "exec:allow"]), `layout: the run's audit: ${audit.join(", ")}`);
  const iso = JSON.parse(readFileSync(join(run, "attestation.json"), "utf8")).payload?.metadata?.clawea?.isolation ?? {};
  say(`layout: isolation claims ${JSON.stringify(iso)}`);
  const yama = String(opts.yama);
  check(iso.attester_uid === Number(opts["attester-uid"]) && JSON.stringify(iso.control_uids) === JSON.stringify([ocUid]) && iso.peer_uid === ocUid,
    "layout: the attester observed its own uid, the orchestrator's as the only control uid and as the run's creator");
  check(iso.control_uids_separate === true && iso.socket_protected === true && iso.peer_uid_separate === true && iso.peer_same_pid_namespace === true,
    "layout: control_uids_separate, socket_protected, peer_uid_separate and peer_same_pid_namespace are true");
  check(iso.yama_ptrace_scope === yama && iso.ptrace_restricted === ["1", "2", "3"].includes(yama),
    `layout: yama_ptrace_scope ${iso.yama_ptrace_scope} and ptrace_restricted ${iso.ptrace_restricted} are what this kernel has (${yama})`);
}

if (opts.layout) {
  layout();
} else {
  devLayout();
}

/** The attacks in the development layout (attacks.sh). */
function devLayout() {
  // (a) read the capability out of OpenClaw's memory; (c) use it from the
  // exec's own process.
  {
    const r = results("steal");
    const out = r[1] ?? "";
    const line = /steal: .*/.exec(out)?.[0] ?? "";
    say(`(a) ${clip(line || out)}`);
    check(/^verified: /.test(r[0] ?? ""), `steal: the owner's verify succeeded: ${clip(r[0])}`);
    check(line !== "", "steal: the attack script ran in exec and reported");
    const read = / read=yes /.test(line);
    if (read) {
      say("(a) the capability WAS read out of OpenClaw's memory (development layout: same uid, no Yama restriction): the residual risk");
      const used = / use: turns=(\d+) (\S+) verify=(\d+) (\S+) tool-calls=(\d+) (\S+)/.exec(line);
      check(used !== null && used[1] === "403" && used[2] === "PROCESS_BINDING" && used[3] === "403" && used[4] === "PROCESS_BINDING" &&
        used[5] === "403" && used[6] === "PROCESS_BINDING",
      "(c) the stolen capability from another process: turns, verify and tool-calls answered 403 PROCESS_BINDING");
      if (used) say(`(c) turns=${used[1]} ${used[2]} verify=${used[3]} ${used[4]} tool-calls=${used[5]} ${used[6]}`);
    } else {
      say(`(a) the capability was NOT read here (${clip(line)}): (c) is not exercised by this run`);
    }
    const dirs = runDirs("steal");
    const audit = dirs.length === 1 ? lines(join(work, "runs", "steal", dirs[0], "audit.jsonl")) : [];
    const tools = audit.map((d) => `${d.tool}:${d.decision}`);
    check(dirs.length === 1 && existsSync(join(work, "runs", "steal", dirs[0], "attestation.json")), "steal: the run was attested");
    check(JSON.stringify(tools) === JSON.stringify(["verify:allow", "exec:allow"]),
      `(c) the run's audit holds only the plugin's own decisions, none from the stolen capability: ${tools.join(", ")}`);
  }

  // (b) a relay in the socket's place that flips decisions and rewrites senders.
  {
    const relay = lines(join(work, "relay.log")).filter((e) => e.method);
    const r = results("relay");
    check(/relay: renamed the socket .* listening at .*: yes/.test(r[1] ?? ""), `relay: the attack script put the relay in place: ${clip(r[1])}`);
    for (const e of relay) say(`(b) relay saw ${e.method} ${e.path} -> ${e.upstream}${e.reason ? " " + e.reason : ""}${e.actions.length ? "; " + e.actions.join("; ") : ""}`);
    const toolCall = r[2] ?? "";
    say(`(b) same run, the denied tool call through the relay: ${clip(toolCall)}`);
    check(relay.some((e) => /\/tool-calls$/.test(e.path)), "(b) the run's next tool call went through the relay");
    check(/clawea: refusing to run: an attester answer failed verification \(ANSWER_[A-Z_]+/.test(toolCall),
      "(b) the plugin blocked the tool call with an ANSWER_* reason");
    check(existsSync(/** @type {string} */ (opts.canary)), "(b) the denied command did not run (canary intact)");
    check(runDirs("relay").length === 0, "(b) no attestation was written for the relayed run");
    const guest = ocText("relayguest");
    const why = /clawea: refusing to run: [^"\\]*(ANSWER_[A-Z_]+)[^"\\]*/.exec(guest);
    say(`(b) next run (a non-owner's turn) through the relay: ${clip(why?.[0] ?? guest.slice(-300))}`);
    check(relay.some((e) => e.method === "POST" && e.path === "/v1/runs"), "(b) the next run's creation went through the relay");
    check(why !== null, "(b) the next run was blocked with an ANSWER_* reason");
    check(requests("relayguest").length === 0 && !/relay-guest-ran/.test(guest), "(b) the next run never reached the model");
    check(runDirs("relayguest").length === 0, "(b) no attestation was written for the next run");
  }
}

if (failed) {
  console.error(`${failed} attack assertion(s) failed`);
  process.exit(1);
}
