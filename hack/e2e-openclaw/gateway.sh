# Sourced by run.sh after its other turns, before attacks.sh (it uses run.sh's
# work, here, root, openclaw, packctl, params, harness, out,
# pids, say, fail, free_port, start_attester): issue 20's model
# gateway with real OpenClaw turns.
#
# For each provider API (OpenAI chat completions, Anthropic messages) an
# attester whose gateway has one upstream, "scripted": gateway-upstream.mjs
# on a unix socket, which answers only requests carrying the provider key
# that only the attester's configuration holds (${file:...}). OpenClaw runs
# the plugin with gateway: true and the model clawea/scripted/scripted:
#   - two messages in one session (the second carries the first's history,
#     which the gateway checks against what it forwarded), the first with two
#     tool rounds (the verify tool, the one tool these turns offer: the pack
#     commits its schema, and the gateway checks the offered tools against it):
#     a call the webhook verifier denies, whose blocked result the gateway
#     takes only as exactly the block reason, then an allowed one;
#   - every model call went through the gateway: the bundle carries one
#     receipt per llm_call, signed by the attester and bound to the run, and
#     the upstream's request log hashes are the receipts' request hashes;
#   - packctl verify accepts each run;
# and, once, an OpenClaw without the plugin in this layout (a model with a
# key it holds and a base URL it can reach): the upstream never sees it.
# E2E_TURN_TIMEOUT (default 180 s, as run.sh's turns) bounds each turn.
say "gateway: OpenClaw turns through the attester's model gateway, for each provider API"
gw=$work/gw
mkdir -p "$gw/up"
chmod 700 "$gw/up"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$gw/provider.key"
chmod 600 "$gw/provider.key"
node - "$gw/script.json" <<'EOF'
require("fs").writeFileSync(process.argv[2], JSON.stringify({ scenes: {
  gwfirst: [
    { tool: "verify", args: { message_id: "e2e-denied-by-webhook", content_sha256_b64u: "AAAA" } },
    { tool: "verify", args: {} },
    { text: "first gateway message done" },
  ],
  gwsecond: [{ text: "second gateway message done" }],
  bare: [{ text: "an unattested model answer: must never be served" }],
} }));
EOF
node "$here/gateway-upstream.mjs" --script "$gw/script.json" --socket "$gw/up/upstream.sock" --key-file "$gw/provider.key" --log "$gw/upstream.log" 2>"$gw/upstream.err" &
pids+=($!)
for _ in $(seq 100); do [ -S "$gw/up/upstream.sock" ] && break; sleep 0.1; done
[ -S "$gw/up/upstream.sock" ] || { cat "$gw/upstream.err" >&2; fail "the gateway's upstream did not start"; }
: >"$gw/upstream.log"
# The gateway checks that the tools OpenClaw offers are exactly the pack's
# tool schemas: these turns offer the plugin's verify tool alone
# (tools.allow), and the pack commits its schema.
node --input-type=module - "$gw/tool-schemas.json" "$root/clients/openclaw/src/plugin.js" <<'EOF'
import { writeFileSync } from "node:fs";
const [file, plugin] = process.argv.slice(2);
const { VERIFY_PARAMETERS } = await import(plugin);
writeFileSync(file, JSON.stringify({ verify: VERIFY_PARAMETERS }));
EOF

gw_turn() { # name config state message -> $gw/NAME.{json,err,rc}
	local name=$1 cfg=$2 state=$3 msg=$4
	say "openclaw agent --local: gateway $name turn"
	set +e
	OPENCLAW_CONFIG_PATH=$cfg OPENCLAW_STATE_DIR=$state timeout "${E2E_TURN_TIMEOUT:-180}" \
		"$openclaw" agent --local --agent main --message "$msg" --json >"$gw/$name.json" 2>"$gw/$name.err"
	echo $? >"$gw/$name.rc"
	set -e
}

for api in openai-chat-completions anthropic-messages; do
	d=$gw/$api
	mkdir -p "$d/ctl" "$d/runs"
	chmod 700 "$d/ctl"
	gw_pub=$(free_port)
	gw_met=$(free_port)
	# The run's attester configuration with the gateway added: the upstream
	# is dialled on its unix socket (local), with the key from the file.
	node - "$work/attester.json" "$d/attester.json" "$api" "$gw_pub" "$gw_met" "$d" "$gw" <<'EOF'
const fs = require("fs");
const [src, dst, api, pub, met, d, gw] = process.argv.slice(2);
const c = JSON.parse(fs.readFileSync(src, "utf8"));
Object.assign(c.attester, { listen: "127.0.0.1:" + pub, metricsListen: "127.0.0.1:" + met, controlSocket: d + "/ctl/control.sock", stateDir: d + "/state" });
// The webhook verifier also decides verify calls here: it denies the
// scene's first one, so a denied call's result (exactly the block reason,
// model-gateway.md section 3.6) goes through the gateway.
c.tools.verifier.scope.include = ["exec", "verify"];
c.attester.gateway = { upstreams: { scripted: {
  api, baseUrl: api === "anthropic-messages" ? "http://upstream.local" : "http://upstream.local/v1",
  local: true, unixSocket: gw + "/up/upstream.sock", apiKey: "${file:" + gw + "/provider.key}",
} } };
fs.writeFileSync(dst, JSON.stringify(c));
EOF
	start_attester "$d/attester.json" "$d/attester.log" "$gw_pub"
	gw_attester=$started_pid
	gw_did=$started_did
	echo "$gw_did" >"$d/attester.did"
	# Its gate policy differs from the main runs' (the verifier's scope):
	# packctl verify expects this one for these runs.
	curl -fsS -m 5 --unix-socket "$d/ctl/control.sock" http://attester/v1/gate/policy |
		node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).policy_hash_b64u))' >"$d/gate-policy"
	# The same pack, sealed to this attester.
	"$packctl" build --params "$params" --harness "$harness" --tool-schemas "$gw/tool-schemas.json" -o "$d/pack.json" >/dev/null
	"$packctl" report --json "$d/pack.json" >"$d/report.json"
	"$packctl" render "$d/pack.json" >"$d/prompt.txt"
	"$packctl" seal --attester "http://127.0.0.1:$gw_pub" --policy "$work/seal-policy.json" \
		-o "$d/prompt_pack.enc" --manifest "$d/prompt_pack_manifest.json" "$d/pack.json" >"$d/seal.out"
	rm -f "$d/pack.json"
	oc_api=$([ "$api" = anthropic-messages ] && echo anthropic-messages || echo openai-completions)
	# OpenClaw's config: the routed model only, no provider key (the marker
	# is never sent), an unroutable base URL.
	gw_report_hash=$(node -p "require('crypto').createHash('sha256').update(require('fs').readFileSync('$d/report.json')).digest('base64url')")
	node - "$d/openclaw.json" "$oc_api" "$d" "$gw_did" "$gw_report_hash" "$work/ws" "$root/clients/openclaw" <<'EOF'
const [file, api, d, did, reportHash, ws, plugin] = process.argv.slice(2);
require("fs").writeFileSync(file, JSON.stringify({
  update: { checkOnStart: false },
  models: { providers: { clawea: { baseUrl: "http://clawea.invalid", apiKey: "clawea-gateway", api, models: [{ id: "scripted/scripted", name: "scripted through the attester" }] } } },
  agents: { defaults: { model: { primary: "clawea/scripted/scripted" }, workspace: ws } },
  tools: { toolSearch: false, allow: ["verify"] },
  plugins: {
    load: { paths: [plugin] },
    entries: { clawea: { enabled: true, hooks: { allowConversationAccess: true }, config: {
      controlSocket: d + "/ctl/control.sock", pack: d + "/prompt_pack.enc", manifest: d + "/prompt_pack_manifest.json",
      reportHashB64u: reportHash, attesterDid: did, outDir: d + "/runs", timeoutMs: 20000, gateway: true,
    } } },
  },
}, null, 2));
EOF
	gw_turn "$api-1" "$d/openclaw.json" "$d/oc-state" "Read the README. [scene:gwfirst]"
	gw_turn "$api-2" "$d/openclaw.json" "$d/oc-state" "And now? [scene:gwsecond]"
	kill "$gw_attester" 2>/dev/null || true
	wait "$gw_attester" 2>/dev/null || true
done

# An OpenClaw without the plugin, in this layout: a model of its own whose
# base URL it can reach (a loopback port) and a key it holds; the provider
# is reachable only on the gateway's unix socket with the attester's key.
bare_port=$(free_port)
node - "$gw/bare-config.json" "$bare_port" "$work/ws" <<'EOF'
const [file, port, ws] = process.argv.slice(2);
require("fs").writeFileSync(file, JSON.stringify({
  update: { checkOnStart: false },
  models: { providers: { scripted: { baseUrl: "http://127.0.0.1:" + port + "/v1", apiKey: "a-key-the-harness-holds", api: "openai-completions", models: [{ id: "scripted", name: "scripted" }] } } },
  agents: { defaults: { model: { primary: "scripted/scripted" }, workspace: ws } },
}));
EOF
wc -l <"$gw/upstream.log" >"$gw/upstream.before-bare"
gw_turn bare "$gw/bare-config.json" "$gw/bare-state" "Answer me. [scene:bare]"

say "gateway: assertions"
node "$here/gateway-assert.mjs" --gw "$gw" --packctl "$packctl" --out "$out" || {
	for f in "$gw"/*.err; do echo "--- $f" >&2; grep -i "clawea\|error" "$f" | tail -15 >&2; done
	for a in openai-chat-completions anthropic-messages; do tail -20 "$gw/$a/attester.log" >&2; done
	fail "gateway assertions"
}
