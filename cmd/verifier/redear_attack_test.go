package main

import (
	"fmt"
	"testing"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/veraison/ear"

	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
)

// appraisal verifies the reply's EAR with the service key, as a relying
// party does, and returns its clawea-execution appraisal.
func (e *env) appraisal(r *reply) *ear.Appraisal {
	e.t.Helper()
	if r.code != 200 || r.out.EAR == "" {
		e.t.Fatalf("status %d, no ear: %s", r.code, r.raw)
	}
	var ar ear.AttestationResult
	if err := ar.Verify([]byte(r.out.EAR), jwa.EdDSA, e.pub); err != nil {
		e.t.Fatalf("ear: %v", err)
	}
	ap := ar.Submods[earresult.SubmodName]
	if ap == nil || ap.Status == nil || ap.TrustVector == nil {
		e.t.Fatal("ear has no appraisal status or trust vector")
	}
	return ap
}

// TestUnpinnedGuestEARAttack: a TDX attestation verified under a policy
// that pins the MRTD but not the kernel and its command line (any kernel on
// that firmware is accepted) must not tell a relying party that only
// approved code was booted: its EAR's executables claim is 33 (unrecognized
// runtime), not 3 (approved boot), and its status warning. The SEV-SNP
// fixture, whose launch measurement covers the guest, keeps 3.
func TestUnpinnedGuestEARAttack(t *testing.T) {
	e := newEnv(t, 0)
	q, err := tdx.NewSimulated(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureOn(t, testfixture.Now, q)
	e.writePolicy("tdx", fmt.Appendf(nil, `{"policy_version":%q,"allow_simulated":true,"allow_unchecked_revocation":true,"allow_unchecked_collateral":true,"measurements_b64u":[%q]}`,
		verify.PolicyVersion, b64u.Encode(f.measurement)))
	if _, err := e.svc.Reload(); err != nil {
		t.Fatal(err)
	}
	r := e.post(f.body("tdx", false))
	if r.out.Verdict != verify.VerdictVerified {
		t.Fatalf("verdict %s: %s", r.out.Verdict, r.raw)
	}
	ap := e.appraisal(r)
	if got := ap.TrustVector.Executables; got != ear.UnrecognizedRuntimeClaim {
		t.Errorf("unpinned tdx guest: executables %d, want %d (unrecognized runtime)", got, ear.UnrecognizedRuntimeClaim)
	}
	if *ap.Status != ear.TrustTierWarning {
		t.Errorf("unpinned tdx guest: status %s, want warning", ap.Status)
	}

	ap = e.appraisal(e.post(e.f.body("default", false)))
	if got := ap.TrustVector.Executables; got != ear.ApprovedBootClaim {
		t.Errorf("sev-snp guest: executables %d, want %d (approved boot)", got, ear.ApprovedBootClaim)
	}
}
