package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/internal/attestfixture"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
)

// attestReport has the real producer (attestation.Issuer on the simulated
// SEV-SNP quoter) attest a run whose rebuilt prompt and report are rb's.
func attestReport(t *testing.T, rb *promptpack.Rebuilt, runID string) (att, ev, measurement []byte) {
	t.Helper()
	r := testfixture.NewRun(runID)
	r.PromptHash = rb.PromptHashB64u()
	r.ReportHash = rb.ReportHashB64u()
	q, err := sim.New(sim.Options{Seed: []byte("disclose-test")})
	if err != nil {
		t.Fatal(err)
	}
	is := &attestation.Issuer{Key: testfixture.Key(9), Quoter: q, Now: func() time.Time { return testfixture.Now }}
	out, err := is.Attest(context.Background(), attestfixture.Input(t, r, testfixture.H("audit root"), 1))
	if err != nil {
		t.Fatal(err)
	}
	m, err := q.LaunchMeasurement(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out.AttestationJSON, out.EvidenceJWS, m
}

// TestVerifyDisclosureChain checks disclosure -> report -> attestation:
// the disclosure of a v2 pack verifies with the attestation of a run that
// committed to its report, and is refused with the attestation of another
// run (same inputs, other salts, so another report).
func TestVerifyDisclosureChain(t *testing.T) {
	params := testfile.Read(t, filepath.Join("..", "..", "promptpack", "testdata", "reportv2", "params.json"))
	rebuild := func() *promptpack.Rebuilt {
		return packtest.Build(t, params, promptpack.BuildOptions{ReportVersion: 2}).Rebuilt
	}
	rb, other := rebuild(), rebuild()
	dis, err := rb.Disclose([]string{"params:ownerNumbers"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		testfile.Write(t, dir, name, b)
		return filepath.Join(dir, name)
	}
	att, ev, m := attestReport(t, rb, "run_disclose_001")
	oatt, oev, _ := attestReport(t, other, "run_disclose_002")
	policy := write("policy.json", []byte(`{"policy_version":"`+verify.PolicyVersion+`","measurements_b64u":["`+b64u.Encode(m)+`"]}`))
	files := map[string]string{
		"report": write("report.json", rb.ReportJCS), "other-report": write("other-report.json", other.ReportJCS),
		"dis": write("disclosure.json", dis),
		"att": write("att.json", att), "ev": write("ev.jws", ev),
		"oatt": write("oatt.json", oatt), "oev": write("oev.jws", oev),
	}
	sim := []string{"--policy", policy, "--allow-simulated", "--allow-unchecked-revocation", "--allow-unchecked-collateral", "--at", "2026-06-01T12:00:00Z"}
	for _, tc := range []struct {
		name         string
		report       string
		att, ev      string
		code         int
		first, extra string
	}{
		{"chain holds", "report", "att", "ev", exitOK, "VERIFIED disclosure of 1 input(s) bound to report " + rb.ReportHashB64u() + ", attested by clawea_att_", "run=run_disclose_001"},
		{"other run's attestation", "report", "oatt", "oev", exitRejected, "REJECTED ATTESTATION report PROMPT_COMMITMENT_MISMATCH", ""},
		{"other run's report and attestation", "other-report", "oatt", "oev", exitRejected, "REJECTED REPORT_HASH_MISMATCH", ""},
		{"attestation with another evidence", "report", "att", "oev", exitRejected, "REJECTED ATTESTATION", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"verify-disclosure", "--report", files[tc.report], "--disclosure", files["dis"],
				"--attestation", files[tc.att], "--evidence", files[tc.ev]}, sim...)
			var stdout, stderr bytes.Buffer
			code := run(args, nil, &stdout, &stderr)
			first, _, _ := strings.Cut(stdout.String(), "\n")
			if code != tc.code || !strings.HasPrefix(first, tc.first) || !strings.Contains(first, tc.extra) {
				t.Fatalf("exit %d, first line %q, stderr %s", code, first, stderr.String())
			}
		})
	}
	// Without the simulation allowances the strictest policy refuses the
	// simulated evidence: the chain is not accepted (exit 4).
	var stdout, stderr bytes.Buffer
	code := run([]string{"verify-disclosure", "--report", files["report"], "--disclosure", files["dis"],
		"--attestation", files["att"], "--evidence", files["ev"], "--at", "2026-06-01T12:00:00Z"}, nil, &stdout, &stderr)
	if code != exitPolicy || !strings.HasPrefix(stdout.String(), "REJECTED ATTESTATION") {
		t.Fatalf("strict: exit %d, %q", code, stdout.String())
	}
}
