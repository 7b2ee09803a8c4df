package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/hack/demo/example"
	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/schemas"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/wire/auditrec"
	"github.com/clawea/attester/wire/evidencedoc"
)

func sharedDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join("..", "..", "..", "shared")
	if _, err := os.Stat(filepath.Join(d, "conformance", "openclaw-sig")); err != nil {
		citest.SkipOrFail(t, "shared conformance data not present")
	}
	return d
}

// TestEndToEnd runs the demo as `make demo` does, from this project's
// example harness, which needs nothing beside the checkout.
func TestEndToEnd(t *testing.T) {
	checkDemo(t, "")
}

// TestEndToEndSharedVector runs the demo from the OpenClaw SIG conformance
// harness and its "full" vector (make demo with SHARED=../shared).
func TestEndToEndSharedVector(t *testing.T) {
	checkDemo(t, sharedDir(t))
}

// A -shared folder without the conformance data is an error, not a silent
// fallback to the example harness.
func TestSharedMissing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := runDemo(ctx, options{Shared: t.TempDir(), Vector: "full", Attester: attesterBin, OutDir: t.TempDir(), WorkDir: t.TempDir()})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want a missing-folder error", err)
	}
}

// checkDemo runs the demo: pack build and seal, the attester on the
// simulated platform, turns and gated tool calls (allowed, blocked by
// policy, blocked until verify, denied by the webhook), the agent's bundle
// and the execution attestation. Then it checks the artifacts with the PoH
// rules and that no secret reached disk or the logs.
func checkDemo(t *testing.T, shared string) {
	outDir, work := t.TempDir(), t.TempDir()
	var logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := runDemo(ctx, options{Shared: shared, Vector: "full", Attester: attesterBin, OutDir: outDir, WorkDir: work, Log: log.New(&logs, "", 0)})
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	read := func(name string) []byte {
		return testfile.Read(t, filepath.Join(outDir, name))
	}

	// The attestation is a PoH execution_attestation envelope that validates
	// against the PoH schema and verifies under PoH rules.
	att := read("attestation.json")
	if err := schemas.Validate(schemas.ExecutionAttestationEnvelopeV1, att); err != nil {
		t.Fatalf("attestation schema: %v", err)
	}
	v, err := poh.Verify(att, poh.VerifyOptions{Type: poh.TypeExecutionAttestation})
	if err != nil {
		t.Fatalf("attestation: %v", err)
	}
	if v.SignerDID != out.AttesterDID {
		t.Fatalf("attestation signed by %s, want %s", v.SignerDID, out.AttesterDID)
	}
	if run, _ := v.Payload.GetString("run_id"); run != out.RunID {
		t.Fatalf("attestation run_id %q", run)
	}
	tee := v.Payload.Get("runtime_metadata").Get("tee")
	if s, _ := tee.GetString("attestation_type"); s != "sev_snp_report" {
		t.Fatalf("attestation_type %q", s)
	}
	// The bundle verifies and its hash is the one attested.
	b, err := poh.VerifyProofBundle(read("bundle.json"), poh.BundleOptions{})
	if err != nil {
		t.Fatalf("bundle: %v", err)
	}
	if h, _ := v.Payload.GetString("proof_bundle_hash_b64u"); h != b.Envelope.PayloadHashB64u {
		t.Fatal("attested bundle hash differs")
	}
	nb, _ := poh.NonceBindingB64u(b.AgentDID, b.RunID, b.Envelope.PayloadHashB64u)
	if got, _ := tee.GetString("nonce_binding_b64u"); got != nb {
		t.Fatalf("nonce binding %s, want %s", got, nb)
	}
	// The audit log verifies and matches the attested root and count.
	root, count, err := auditrec.Verify(bytes.NewReader(read("audit.jsonl")))
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	if root != out.AuditRoot || strconv.FormatUint(count, 10) != out.AuditCount || count != 5 {
		t.Fatalf("audit root/count %s/%d, want %s/%s", root, count, out.AuditRoot, out.AuditCount)
	}
	// The manifest and envelope parse; the pack is not readable without the key.
	m, err := envelope.ParseManifest(read("manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (envelope.Limits{}).Verify(read("pack.enc"), m); err != nil {
		t.Fatal(err)
	}

	// The attestation verifies offline with the demo's policy, and the same
	// evidence is refused when simulated evidence is not allowed.
	pol, err := verify.ParsePolicy(read("policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The pinned template hashes are the source's reference values: for
	// the example harness, the list signed by the example key.
	if shared == "" {
		ref, err := example.Trusted(example.FS())
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(pol.TrustedTemplates, ref.TrustedTemplates) {
			t.Fatal("the demo policy does not pin the example's signed reference values")
		}
	}
	opts := verify.Options{Now: time.Now, AuditLog: read("audit.jsonl"), Report: read("report.json")}
	res, err := verify.Verify(att, read("evidence.jws"), read("bundle.json"), pol, opts)
	if err != nil {
		t.Fatalf("offline verification: %v", err)
	}
	// The first run was on an attester without an admission policy; the
	// attester observed its isolation when it created the run (v3).
	if c := res.Commitments; c.Version != evidencedoc.CommitmentsVersionV3 || c.Isolation == nil || c.AdmissionPolicyHashB64u != "" || c.Sensitive != evidencedoc.SensitiveFalse {
		t.Fatalf("first run commitments: %+v", c)
	}
	checkSensitive(t, out, read, att, read("evidence.jws"))
	strict := *pol
	strict.AllowSimulated = false
	if _, err := verify.Verify(att, read("evidence.jws"), read("bundle.json"), &strict, opts); !errors.Is(err, verify.ErrPolicy) {
		t.Fatalf("simulated evidence without the allowance: %v", err)
	}

	// No plaintext prompt, raw tool parameter or secret on disk or in logs.
	probes := append([][]byte{}, out.SecretProbes...)
	probes = append(probes, []byte("rm -rf /"), []byte("ls -la"), []byte("README.md"), []byte(webhookSecret), []byte(envelope.PrivateKeyPrefix))
	for _, dir := range []string{outDir, work} {
		// ear-signing.pem is the demo relying party's own key, not an
		// attester secret.
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Type()&os.ModeSocket != 0 {
				return err
			}
			data := testfile.Read(t, p)
			for _, pr := range probes {
				if bytes.Contains(data, pr) {
					t.Errorf("%s contains a secret or raw parameter (%q...)", p, pr[:min(8, len(pr))])
				}
			}
			return nil
		})
	}
	for _, pr := range probes {
		if bytes.Contains(logs.Bytes(), pr) {
			t.Errorf("attester logs contain a secret or raw parameter (%q...)", pr[:min(8, len(pr))])
		}
	}
	if strings.Count(logs.String(), `"msg":"attestation issued"`) != 2 {
		t.Fatalf("logs lack the attestation record:\n%s", logs.String())
	}
}

// checkSensitive checks the sensitive job's artifacts: the admission policy
// is sensitive and is the one the run committed to; the sensitive run's
// attestation verifies with the policy that requires sensitive mode, which
// refuses the first run's attestation (plainAtt); the disclosure verifies
// against the sensitive run's report and not against another report.
func checkSensitive(t *testing.T, out *outcome, read func(string) []byte, plainAtt, plainEv []byte) {
	t.Helper()
	sv := out.Sensitive
	if sv == nil {
		t.Fatal("no sensitive run")
	}
	apol, err := admission.Parse(read(admissionFile))
	if err != nil {
		t.Fatal(err)
	}
	if !apol.Sensitive() || apol.Hash() != sv.AdmissionPolicyHash {
		t.Fatalf("admission policy: sensitive=%v hash %s, run under %s", apol.Sensitive(), apol.Hash(), sv.AdmissionPolicyHash)
	}
	spol, err := verify.ParsePolicy(read(sensitivePolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	if !spol.RequireSensitive || !slices.Equal(spol.AdmissionPolicyHashes, []string{apol.Hash()}) {
		t.Fatalf("sensitive verify policy: %+v", spol)
	}
	dir := sensitiveDir + "/"
	satt, sev, sbundle, sreport := read(dir+"attestation.json"), read(dir+"evidence.jws"), read(dir+"bundle.json"), read(dir+"report.json")
	res, err := verify.Verify(satt, sev, sbundle, spol, verify.Options{Now: time.Now, Report: sreport})
	if err != nil {
		t.Fatalf("sensitive run: %v", err)
	}
	if c := res.Commitments; !c.IsSensitive() || c.AdmissionPolicyHashB64u != apol.Hash() || res.RunID != sv.RunID {
		t.Fatalf("sensitive run commitments: %+v", c)
	}
	_, err = verify.Verify(plainAtt, plainEv, nil, spol, verify.Options{Now: time.Now})
	ve, ok := errors.AsType[*verify.Error](err)
	if !ok || !errors.Is(err, verify.ErrPolicy) || ve.Check != "policy/admission-policy" {
		t.Fatalf("the non-sensitive run with the sensitive policy: %v", err)
	}
	dres, err := promptpack.VerifyDisclosure(sreport, read(disclosureFile))
	if err != nil {
		t.Fatalf("disclosure: %v", err)
	}
	if dres.ReportHashB64u != res.Commitments.SystemPromptReportHashB64u || len(dres.Revealed) != 1 || dres.Revealed[0].Kind+":"+dres.Revealed[0].ID != discloseSelector {
		t.Fatalf("disclosure result %+v", dres)
	}
	if _, err := promptpack.VerifyDisclosure(read("report.json"), read(disclosureFile)); err == nil {
		t.Fatal("the disclosure verified against the first run's report")
	}
}
