#!/usr/bin/env bash
# make demo: the main job end to end on the simulated platform.
#   packctl build + seal (after checking the attester's key attestation)
#   -> bin/attester, started as a process from a config file (simulated
#      SEV-SNP), opens the pack in sealed memory and rebuilds the prompt
#      -> turns and tool calls through the gate
#   -> the agent's PoH proof bundle -> execution attestation + evidence
#   -> a sensitive run on a second attester that enforces a sensitive
#      admission policy (admission.json), verified with a policy requiring
#      sensitive mode, which refuses the first run; one disclosure
# Both attesters are the binary built here, stopped with SIGTERM at the end;
# their logs (stderr) go to $out/attester.log.
# Artifacts go to demo-out/ (git-ignored); then packctl inspects them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=demo-out
# By default the pack is built from this project's example harness
# (hack/demo/example). SHARED=../shared builds it from the OpenClaw SIG
# conformance vectors instead.
harness=()
if [ -n "${SHARED:-}" ]; then
	harness=(-shared "$SHARED")
fi
rm -rf "$out"
echo "== building the commands (make build: static, no cgo, stamped with git describe)" >&2
# The same build and version stamp as `make build` and the image, so the
# demo's binaries say which commit they are.
"${MAKE:-make}" --no-print-directory build >&2
bin/attester --version >&2
mkdir -p "$out"
go run ./hack/demo "${harness[@]}" -attester bin/attester -out "$out" -log "$out/attester.log"
echo "== packctl inspect $out/manifest.json (hash-only view of the sealed pack)" >&2
bin/packctl inspect "$out/manifest.json"
echo "== PoH check of the agent's bundle" >&2
bin/packctl poh verify-bundle "$out/bundle.json"
echo "== packctl verify: offline verification of the attestation (simulated allowed by $out/policy.json)" >&2
bin/packctl verify --attestation "$out/attestation.json" --evidence "$out/evidence.jws" \
		--bundle "$out/bundle.json" --audit "$out/audit.jsonl" --report "$out/report.json" \
		--policy "$out/policy.json" --ear-key "$out/ear-signing.pem" --ear-out "$out/ear.jwt"
echo "== packctl ear verify: the EAR it wrote, checked by its kid against the signing key's public half" >&2
bin/packctl ear verify --key "$out/ear-signing.pem" "$out/ear.jwt"
echo "== sensitive run: packctl verify with a policy that requires sensitive mode and the admission policy of $out/admission.json ($out/policy-sensitive.json)" >&2
s="$out/sensitive"
bin/packctl verify --attestation "$s/attestation.json" --evidence "$s/evidence.jws" \
		--bundle "$s/bundle.json" --report "$s/report.json" --policy "$out/policy-sensitive.json"
echo "== the first (non-sensitive) run's attestation is refused by that policy (exit 4)" >&2
rc=0
bin/packctl verify --attestation "$out/attestation.json" --evidence "$out/evidence.jws" \
		--policy "$out/policy-sensitive.json" || rc=$?
if [ "$rc" -ne 4 ]; then
	echo "demo: the non-sensitive attestation was not refused by policy (exit $rc, want 4)" >&2
	exit 1
fi
echo "== the development layout (one uid for attester and orchestrator) is refused by a policy with require_isolation: true (exit 4)" >&2
sed 's/"policy_version":"clawea.dev\/verify-policy\/v1"/&,"require_isolation":true/' "$out/policy.json" >"$out/policy-isolation.json"
rc=0
bin/packctl verify --attestation "$out/attestation.json" --evidence "$out/evidence.jws" \
		--policy "$out/policy-isolation.json" 2>"$out/isolation.err" || rc=$?
cat "$out/isolation.err" >&2
if [ "$rc" -ne 4 ] || ! grep -q 'isolation claim' "$out/isolation.err"; then
	echo "demo: require_isolation did not refuse the development layout naming an isolation claim (exit $rc, want 4)" >&2
	exit 1
fi
echo "== packctl verify-disclosure: $out/disclosure.json against the sensitive run's report and attestation" >&2
bin/packctl verify-disclosure --report "$s/report.json" --disclosure "$out/disclosure.json" \
		--attestation "$s/attestation.json" --evidence "$s/evidence.jws" --bundle "$s/bundle.json" \
		--policy "$out/policy-sensitive.json"
echo "== artifacts in $out/: $(ls "$out" | tr '\n' ' ')" >&2
