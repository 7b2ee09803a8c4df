# Sourced by run.sh after attacks.sh (it uses run.sh's root, here, work, out,
# bin, packctl, cache, node_bin, oc_dir, params, harness, measurement,
# prompt_hash, report_hash, pids, cleanup, say, fail, free_port, wait_file):
# issue 19's attacks again, in the recommended layout (docs/deploy.md) built
# by deploy/systemd/install.sh itself, into a scratch root:
#   - the attester under its own account, not in development mode, its
#     control socket in a 0750 directory of the control group (as systemd's
#     RuntimeDirectoryMode= makes it), the socket 0660;
#   - OpenClaw under a second account in the control group (the only uid in
#     attester.controlUids), with deploy/openclaw/openclaw.json5 as installed;
#   - the model's tools in OpenClaw's ssh sandbox under a third account,
#     through the private sshd of deploy/systemd, running as that account;
#   - kernel.yama.ptrace_scope as 60-clawea-ptrace.conf sets it, where the
#     kernel has Yama (what could not be set is recorded, never faked).
# One real owner turn whose scripted model's exec tries (a) to read
# OpenClaw's memory and environment for the capability, (c) to use the
# control socket, and (b) to rename the socket for a relay: each must be
# denied by the kernel (attack-assert.mjs --layout asserts the errno), the
# run must be attested, and its attestation must pass `packctl verify` with
# require_isolation. The development layout's owner run (run.sh) must be
# refused by the same policy, naming an isolation claim.
#
# Needs root (it creates accounts, removed at the end). Outside CI a
# non-root run skips it.

if [ "$(id -u)" != 0 ]; then
	[ -z "${CI:-}" ] || fail "layout: the recommended layout's e2e needs root (it creates accounts)"
	say "layout: SKIPPED, not root (it creates accounts)"
	return 0
fi
for c in useradd userdel groupadd groupdel setpriv unshare mount ssh-keygen ssh; do
	command -v "$c" >/dev/null || fail "layout: $c is missing"
done
[ -x /usr/sbin/sshd ] || fail "layout: /usr/sbin/sshd is missing (apt package openssh-server)"
# OpenClaw's ssh backend runs python3 on the sandbox side, on sshd's PATH.
[ -x /usr/bin/python3 ] || [ -x /usr/local/bin/python3 ] || fail "layout: no python3 in /usr/bin or /usr/local/bin (OpenClaw's ssh sandbox needs it)"

say "layout: the recommended layout (deploy/systemd/install.sh into a scratch root, three accounts)"
l_t0=$SECONDS
# Not below /tmp: sshd's StrictModes refuses an authorized_keys file below a
# world-writable directory, and so would the layout's own rules.
lroot=$(mktemp -d /run/clawea-layout.XXXXXX)
chmod 0755 "$lroot"
lid=ce$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
l_att=$lid-att l_ctl=$lid-ctl l_oc=$lid-oc l_tools=$lid-tools
yama=/proc/sys/kernel/yama/ptrace_scope
yama_restore=
layout_cleanup() {
	local u p
	for u in "$l_tools" "$l_oc" "$l_att"; do
		getent passwd "$u" >/dev/null || continue
		for p in $(ps -o pid= -u "$u" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
	done
	for u in "$l_tools" "$l_oc" "$l_att"; do
		getent passwd "$u" >/dev/null || continue
		for _ in $(seq 30); do [ -z "$(ps -o pid= -u "$u" 2>/dev/null)" ] && break; sleep 0.1; done
		userdel "$u" || true
	done
	for u in "$l_ctl" "$l_att" "$l_oc" "$l_tools"; do getent group "$u" >/dev/null && { groupdel "$u" || true; }; done
	[ -z "$yama_restore" ] || echo "$yama_restore" >"$yama" || true
	if [ "${E2E_KEEP:-}" = 1 ]; then echo "e2e-openclaw: layout root kept: $lroot" >&2; else rm -rf "$lroot"; fi
}
trap 'layout_cleanup; cleanup' EXIT

l_port=$(free_port)
CLAWEA_USER=$l_att CLAWEA_CONTROL_GROUP=$l_ctl OPENCLAW_USER=$l_oc CLAWTOOLS_USER=$l_tools \
	"$root/deploy/systemd/install.sh" --root "$lroot" --bin "$bin" --port "$l_port" >"$work/layout-install.log" ||
	{ cat "$work/layout-install.log" >&2; fail "layout: install.sh"; }
l_oc_uid=$(id -u "$l_oc")
# rel FILE: the installed file's absolute paths of the layout, moved below the
# scratch root (the only change to the installed files but the test's model,
# ports and pack below).
rel() { sed -i -E "s#([\" ])/(etc|run|var|usr/local)/#\\1$lroot/\\2/#g" "$1"; }
for f in etc/clawea/attester.json etc/openclaw/openclaw.json5 etc/clawea-tools/sshd_config; do rel "$lroot/$f"; done

# Yama as the drop-in sets it, where the kernel has it and this runner may.
yama_want=$(sed -n -E 's/^-?kernel\.yama\.ptrace_scope *= *([0-9])$/\1/p' "$lroot/etc/sysctl.d/60-clawea-ptrace.conf")
[ -n "$yama_want" ] || fail "layout: 60-clawea-ptrace.conf sets no kernel.yama.ptrace_scope"
if [ ! -e "$yama" ]; then
	yama_note="absent (this kernel has no Yama: ptrace_restricted must be false)"
else
	yama_was=$(cat "$yama")
	if [ "$yama_was" -ge "$yama_want" ]; then
		yama_note="$yama_was (already at least $yama_want)"
	elif echo "$yama_want" >"$yama" 2>/dev/null; then
		yama_restore=$yama_was
		yama_note="$yama_want (set by the test, was $yama_was; restored at the end)"
	else
		yama_note="$yama_was (could not be set to $yama_want: ptrace_restricted must be false)"
	fi
fi
say "layout: kernel.yama.ptrace_scope: $yama_note"

# The socket's directory as systemd makes it for clawea-attester.service.
l_rtdir=$lroot/run/$(sed -n 's/^RuntimeDirectory=//p' "$lroot/etc/systemd/system/clawea-attester.service")
install -d -m "$(sed -n 's/^RuntimeDirectoryMode=//p' "$lroot/etc/systemd/system/clawea-attester.service")" \
	-o "$l_att" -g "$l_ctl" "$l_rtdir"
l_pub=$(free_port)
l_met=$(free_port)
# The installed attester.json with this test's platform, ports, owner,
# templates and model; no webhook (the example's is a placeholder, and http
# ones are for development only). Not development mode: the attester refuses
# to start where a control uid could replace its socket.
node - "$lroot/etc/clawea/attester.json" "$work/trusted-attester.json" <<EOF
const fs = require("fs");
const [file, trusted] = process.argv.slice(2);
const c = JSON.parse(fs.readFileSync(file, "utf8"));
if (c.attester.development) throw new Error("the example attester.json is in development mode");
Object.assign(c.attester, { platform: "simulated", listen: "127.0.0.1:$l_pub", metricsListen: "127.0.0.1:$l_met", owners: ["cli:local"],
  trustedTemplates: JSON.parse(fs.readFileSync(trusted, "utf8")), modelProvider: "scripted", model: "scripted" });
delete c.tools;
fs.writeFileSync(file, JSON.stringify(c, null, 2));
EOF
l_sock=$(node -p "require('$lroot/etc/clawea/attester.json').attester.controlSocket")
[ "$(dirname "$l_sock")" = "$l_rtdir" ] || fail "layout: attester.json's controlSocket $l_sock is not in the unit's RuntimeDirectory $l_rtdir"

# as ACCOUNT CMD...: CMD under the account, its groups from the account
# database (as systemd's User= with SupplementaryGroups= set by install.sh),
# without privileges.
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --init-groups --no-new-privs -- "$@"; }
as_att() { setpriv --reuid="$l_att" --regid="$l_ctl" --groups="$(getent group "$l_att" | cut -d: -f3)" --no-new-privs -- "$@"; }

say "layout: the attester as $l_att (group $l_ctl), not in development mode"
as_att "$lroot/usr/local/bin/attester" --config "$lroot/etc/clawea/attester.json" >"$work/layout-attester.log" 2>&1 &
l_att_pid=$!
pids+=("$l_att_pid")
wait_ready "$l_att_pid" "$work/layout-attester.log" "$l_pub" "layout: the attester"
grep -F '"msg":"isolation observed at start"' "$work/layout-attester.log" >&2 || fail "layout: the attester logged no isolation at start"
! grep -q DEVELOPMENT "$work/layout-attester.log" || fail "layout: the attester warned of a development-only setting"
l_did=$(curl -fsS -m 5 "http://127.0.0.1:$l_pub/v1/identity" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).did))')
stat -c 'layout: %n %U:%G %a' "$l_rtdir" "$l_sock" >&2
# The gate policy hash, asked as the orchestrator (root is not a control uid).
l_gate=$(as "$l_oc" curl -fsS -m 5 --unix-socket "$l_sock" http://attester/v1/gate/policy |
	node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).policy_hash_b64u))')
[ ${#l_gate} = 43 ] || fail "layout: no gate policy hash for the orchestrator's account"

say "layout: the tools' sshd as $l_tools on 127.0.0.1:$l_port"
as "$l_tools" /usr/sbin/sshd -D -e -f "$lroot/etc/clawea-tools/sshd_config" >"$work/layout-sshd.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q 'Server listening' "$work/layout-sshd.log" && break; sleep 0.1; done
grep -q 'Server listening' "$work/layout-sshd.log" || { cat "$work/layout-sshd.log" >&2; fail "layout: sshd did not start"; }

say "layout: pack built and sealed to this attester, installed root:$l_oc 0640"
"$packctl" build --params "$params" --harness "$harness" --tool-schemas "$work/tool-schemas.json" -o "$work/layout-pack.json" >/dev/null
"$packctl" seal --attester "http://127.0.0.1:$l_pub" --policy "$work/seal-policy.json" \
	-o "$lroot/etc/openclaw/pack/prompt_pack.enc" --manifest "$lroot/etc/openclaw/pack/prompt_pack_manifest.json" "$work/layout-pack.json" >"$work/layout-seal.out"
rm -f "$work/layout-pack.json"
grep -q "^report_hash_b64u: $report_hash\$" "$work/layout-seal.out" || fail "layout: seal: report hash differs"
chown "root:$l_oc" "$lroot"/etc/openclaw/pack/* && chmod 0640 "$lroot"/etc/openclaw/pack/*

# The model's script: the attacks run from the sandbox's workspace, where
# OpenClaw copies its workspace (they are plain files there, as anything the
# model writes would be).
l_ws=$(node -e 'console.log(require(process.argv[1]).parse(require("fs").readFileSync(process.argv[2], "utf8")).agents.defaults.workspace)' \
	"$oc_dir/node_modules/json5" "$lroot/etc/openclaw/openclaw.json5")
install -d -m 0700 -o "$l_oc" -g "$l_oc" "$l_ws" "$lroot/var/lib/openclaw/runs"
for f in attack-steal.mjs attack-relay.mjs; do install -m 0600 -o "$l_oc" -g "$l_oc" "$here/$f" "$l_ws/$f"; done
node - "$work/layout-script.json" <<EOF
const scenes = {
  layout: [
    { tool: "tool_call", args: { id: "verify", args: {} } },
    { tool: "exec", args: { command: "node attack-steal.mjs --socket $l_sock" } },
    { tool: "exec", args: { command: "node attack-relay.mjs --socket $l_sock --log relay.log --pid-file relay.pid" } },
    { tool: "exec", args: { command: "echo tools-account=\$(id -un)" } },
    { text: "layout turn done" },
  ],
};
require("fs").writeFileSync(process.argv[2], JSON.stringify({ scenes }));
EOF
start_model layout-

# The installed openclaw.json5 (JSON5, as OpenClaw reads it) plus what any
# site adds: the model provider, the pack's report hash, the attester's did.
node - "$oc_dir/node_modules/json5" "$lroot/etc/openclaw/openclaw.json5" "$lroot/etc/openclaw/openclaw-e2e.json" <<EOF
const fs = require("fs");
const [json5, file, out] = process.argv.slice(2);
const c = require(json5).parse(fs.readFileSync(file, "utf8"));
c.update = { checkOnStart: false };
c.models = { providers: { scripted: { baseUrl: "http://127.0.0.1:$(cat "$work/layout-model.port")/v1", apiKey: "scripted-no-secret", api: "openai-completions", models: [{ id: "scripted", name: "scripted" }] } } };
c.agents.defaults.model = { primary: "scripted/scripted" };
Object.assign(c.plugins.entries.clawea.config, { reportHashB64u: "$report_hash", attesterDid: "$l_did", timeoutMs: 20000 });
fs.writeFileSync(out, JSON.stringify(c, null, 2));
EOF
chown "root:$l_oc" "$lroot/etc/openclaw/openclaw-e2e.json" && chmod 0640 "$lroot/etc/openclaw/openclaw-e2e.json"
cp "$lroot/etc/openclaw/openclaw-e2e.json" "$work/layout-openclaw.json"
rc=0
"$packctl" openclaw check --harness-user "$l_oc" "$lroot/etc/openclaw/openclaw-e2e.json" >"$work/layout-check.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { cat "$work/layout-check.out" >&2; fail "layout: packctl openclaw check --harness-user $l_oc of the test's config exited $rc, want 0"; }

say "openclaw agent --local as $l_oc, tools in the ssh sandbox as $l_tools: layout turn"
# Node and OpenClaw are in run.sh's cache, which may sit in a home only its
# owner can enter: the turn gets them bind-mounted read-only in a mount
# namespace of its own.
l_mnt=$lroot/opt/clawea-e2e
mkdir -p "$l_mnt"
set +e
l_turn0=$SECONDS
timeout 180 unshare --mount --propagation private -- sh -c 'mount --bind -o ro "$1" "$2" && shift 2 && exec "$@"' sh "$cache" "$l_mnt" \
	setpriv --reuid="$l_oc" --regid="$l_oc" --init-groups --no-new-privs -- env -i \
	PATH="$l_mnt${node_bin#"$cache"}:/usr/local/bin:/usr/bin:/bin" HOME="$lroot/var/lib/openclaw" \
	OPENCLAW_CONFIG_PATH="$lroot/etc/openclaw/openclaw-e2e.json" OPENCLAW_STATE_DIR="$lroot/var/lib/openclaw/state" \
	OPENCLAW_NO_AUTO_UPDATE=1 OPENCLAW_BASH_YIELD_MS=60000 \
	"$l_mnt${oc_dir#"$cache"}/node_modules/.bin/openclaw" agent --local --agent main --message "Look around. [scene:layout]" --json \
	>"$work/layout.json" 2>"$work/layout.err"
echo $? >"$work/layout.rc"
echo $((SECONDS - l_turn0)) >"$work/layout.secs"
set -e

say "layout: assertions"
l_run=$(find "$lroot/var/lib/openclaw/runs" -mindepth 1 -maxdepth 1 -type d)
node "$here/attack-assert.mjs" --layout --work "$work" --run-dir "$l_run" --tools-user "$l_tools" --orchestrator-uid "$l_oc_uid" \
	--attester-uid "$(id -u "$l_att")" --yama "$([ -e "$yama" ] && cat "$yama" || echo absent)" || {
	echo "--- layout (rc $(cat "$work/layout.rc"))" >&2; tail -c 3000 "$work/layout.json" >&2; tail -40 "$work/layout.err" >&2
	tail -20 "$work/layout-attester.log" >&2; tail -20 "$work/layout-sshd.log" >&2
	fail "layout assertions"
}

say "layout: packctl verify of the layout run with require_isolation"
mkdir -p "$out/layout"
for f in attestation.json evidence.jws bundle.json audit.jsonl; do cp "$l_run/$f" "$out/layout/$f"; done
cp "$work/layout-openclaw.json" "$out/layout/openclaw.json"
# verify_iso DIR ATTESTER_DID GATE_POLICY REQUIRE OUT: packctl verify of the
# run in DIR with the owner run's policy for that attester plus
# require_isolation REQUIRE; its exit code.
verify_iso() {
	node -e '
const fs = require("fs"); const [src, did, gate, req, dst] = process.argv.slice(1);
const p = JSON.parse(fs.readFileSync(src, "utf8"));
Object.assign(p, { trusted_attester_dids: [did], expected_gate_policy_hash_b64u: gate, require_isolation: JSON.parse(req) });
fs.writeFileSync(dst, JSON.stringify(p));' "$out/policy.json" "$2" "$3" "$4" "$5.policy.json"
	local rc=0
	"$packctl" verify --attestation "$1/attestation.json" --evidence "$1/evidence.jws" --bundle "$1/bundle.json" \
		--audit "$1/audit.jsonl" --report "$out/report.json" --policy "$5.policy.json" --json >"$5.json" 2>"$5.err" || rc=$?
	echo "$rc"
}
if [ -e "$yama" ] && [ "$(cat "$yama")" -ge 1 ]; then
	rc=$(verify_iso "$out/layout" "$l_did" "$l_gate" true "$out/layout/verify-isolation")
	[ "$rc" = 0 ] || { cat "$out/layout/verify-isolation.err" "$out/layout/verify-isolation.json" >&2; fail "layout: packctl verify with require_isolation: true exited $rc"; }
	say "layout: packctl verify with require_isolation: true: exit 0 (verified)"
else
	rc=$(verify_iso "$out/layout" "$l_did" "$l_gate" true "$out/layout/verify-isolation-all")
	grep -q 'ptrace_restricted is false' "$out/layout/verify-isolation-all.err" && [ "$rc" = 4 ] ||
		{ cat "$out/layout/verify-isolation-all.err" >&2; fail "layout: without Yama, require_isolation: true exited $rc, want 4 naming ptrace_restricted"; }
	say "layout: require_isolation: true: exit 4, $(grep -o 'isolation claim ptrace_restricted is false[^"]*' "$out/layout/verify-isolation-all.err" | head -1) (what this kernel lacks)"
	rc=$(verify_iso "$out/layout" "$l_did" "$l_gate" '["control_uids_separate","socket_protected","peer_uid_separate","peer_same_pid_namespace"]' "$out/layout/verify-isolation")
	[ "$rc" = 0 ] || { cat "$out/layout/verify-isolation.err" "$out/layout/verify-isolation.json" >&2; fail "layout: packctl verify with require_isolation (every claim but ptrace_restricted) exited $rc"; }
	say "layout: packctl verify with require_isolation [control_uids_separate, socket_protected, peer_uid_separate, peer_same_pid_namespace]: exit 0 (verified)"
fi
node -e '
const v = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
if (v.verdict !== "verified" || v.result?.audit?.tool_calls_matched !== 5) { console.error("e2e-openclaw: FAIL: layout verify: " + JSON.stringify(v).slice(0, 600)); process.exit(1); }' "$out/layout/verify-isolation.json"

say "layout: the development layout's owner run under the same require_isolation: true"
rc=$(verify_iso "$out" "$attester_did" "$gate_policy" true "$work/dev-isolation")
grep -q 'isolation claim control_uids_separate is false' "$work/dev-isolation.err" && [ "$rc" = 4 ] ||
	{ cat "$work/dev-isolation.err" >&2; fail "layout: the development run under require_isolation: true exited $rc, want 4 naming control_uids_separate"; }
say "layout: development run: exit 4, $(grep -o 'isolation claim [a-z_]* is false[^"]*' "$work/dev-isolation.err" | head -1)"
say "layout: done in $((SECONDS - l_t0)) s (the turn: $(cat "$work/layout.secs") s)"
