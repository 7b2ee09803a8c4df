#!/usr/bin/env bash
# make demo: the main job end to end on the simulated platform.
#   packctl build + seal (after checking the attester's key attestation)
#   -> attester (simulated SEV-SNP) opens the pack in sealed memory and
#      rebuilds the prompt -> turns and tool calls through the gate
#   -> the agent's PoH proof bundle -> execution attestation + evidence
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
echo "== building attester and packctl (static, no cgo)" >&2
CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd/attester ./cmd/packctl
mkdir -p "$out"
go run ./hack/demo "${harness[@]}" -out "$out" -log "$out/attester.log"
echo "== packctl inspect $out/manifest.json (hash-only view of the sealed pack)" >&2
bin/packctl inspect "$out/manifest.json"
echo "== PoH check of the agent's bundle" >&2
bin/packctl poh verify-bundle "$out/bundle.json"
echo "== packctl verify: offline verification of the attestation (simulated allowed by $out/policy.json)" >&2
bin/packctl verify --attestation "$out/attestation.json" --evidence "$out/evidence.jws" \
		--bundle "$out/bundle.json" --audit "$out/audit.jsonl" --report "$out/report.json" \
		--policy "$out/policy.json" --ear-key "$out/ear-signing.pem" --ear-out "$out/ear.jwt"
echo "== artifacts in $out/: $(ls "$out" | tr '\n' ' ')" >&2
