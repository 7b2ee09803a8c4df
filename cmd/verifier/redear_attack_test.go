package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/veraison/ear"

	"github.com/clawea/attester/enclave/nvgpu"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
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

// verifiedUnder installs policy as name, reloads, and posts f's request
// under it; anything but a verified verdict fails the test.
func (e *env) verifiedUnder(f *fixture, name string, policy []byte) *reply {
	e.t.Helper()
	e.writePolicy(name, policy)
	if _, err := e.svc.Reload(); err != nil {
		e.t.Fatal(err)
	}
	r := e.post(f.body(name, false))
	if r.out.Verdict != verify.VerdictVerified {
		e.t.Fatalf("%s: verdict %s: %s", name, r.out.Verdict, r.raw)
	}
	return r
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
	r := e.verifiedUnder(f, "tdx", fmt.Appendf(nil, `{"policy_version":%q,"allow_simulated":true,"allow_unchecked_revocation":true,"allow_unchecked_collateral":true,"measurements_b64u":[%q]}`,
		verify.PolicyVersion, b64u.Encode(f.measurement)))
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

// unmarkedTPM is a software TPM whose evidence is not marked simulated:
// what an attester gets by exposing swtpm as a TPM device (or by clearing
// the flag, which no TPM signs).
type unmarkedTPM struct{ *tpm.TPM }

func (u unmarkedTPM) Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error) {
	ev, err := u.TPM.Quote(ctx, rd)
	if ev != nil {
		ev.Simulated = false
	}
	return ev, err
}

// TestNamePinnedTPMAKEARAttack: a TPM quote whose attestation key is
// trusted only by its Name (trusted_tpm_ak_names_hex, what trust on first
// use pins) proves nothing about the hardware that holds the key: a
// software TPM whose evidence is not marked simulated passes. Its EAR must
// not claim genuine hardware (hardware 2) nor be affirming: hardware 32,
// status warning, even with PCRs 0-9 quoted and pinned.
func TestNamePinnedTPMAKEARAttack(t *testing.T) {
	in := swtpmtest.StartForTest(t)
	tp, err := tpm.Open(context.Background(), tpm.Options{Address: in.Addr, PCRs: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	ak, err := tpmquote.ParsePublic(tp.AKPublic())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 0)
	f := newFixtureOn(t, testfixture.Now, unmarkedTPM{tp})
	r := e.verifiedUnder(f, "tpm", fmt.Appendf(nil, `{"policy_version":%q,"trusted_tpm_ak_names_hex":[%q],"measurements_b64u":[%q]}`,
		verify.PolicyVersion, hex.EncodeToString(ak.Name()), b64u.Encode(f.measurement)))
	ap := e.appraisal(r)
	if got := ap.TrustVector.Hardware; got != ear.UnsafeHardwareClaim {
		t.Errorf("name-pinned tpm ak: hardware %d, want %d", got, ear.UnsafeHardwareClaim)
	}
	if *ap.Status != ear.TrustTierWarning {
		t.Errorf("name-pinned tpm ak: status %s, want warning", ap.Status)
	}
}

// TestUnpinnedGPUEARAttack: the clawea-gpu submodule claimed executables 2
// (approved runtime) for any GPU evidence that verified, also under a
// policy that accepts any measurement or pins only some of the GPU's
// measurement blocks by index: firmware nobody approved was reported
// approved. It must be 33 (unrecognized runtime) then, and 2 only when the
// GPU's whole measurement is pinned (measurements_b64u).
func TestUnpinnedGPUEARAttack(t *testing.T) {
	sev, err := sim.New(sim.Options{Seed: []byte("verifier-test")})
	if err != nil {
		t.Fatal(err)
	}
	g, err := nvgpu.NewSimulated()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, 0)
	f := newFixtureOn(t, testfixture.Now, sev, g)
	relax := `"allow_simulated":true,"allow_unchecked_revocation":true`
	// The GPU's reference values, as trust on first use would learn them.
	res, err := verify.Verify(f.att, f.ev, nil, &verify.Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowAnyMeasurement: true},
		verify.Options{Now: func() time.Time { return testfixture.Now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Platform) != 2 || res.Platform[1].GPU == nil || len(res.Platform[1].GPU.Measurements) < 2 {
		t.Fatal("no gpu evidence with two measurement blocks")
	}
	cpu, gpu := b64u.Encode(f.measurement), res.Evidence[1].MeasurementB64u
	for _, tc := range []struct {
		name, policy string
		want         ear.TrustClaim
	}{
		{"any", `"allow_any_measurement":true`, ear.UnrecognizedRuntimeClaim},
		{"block", fmt.Sprintf(`"measurements_b64u":[%q],"gpu_measurements_hex":{"1":%q}`, cpu, hex.EncodeToString(res.Platform[1].GPU.Measurements[1])), ear.UnrecognizedRuntimeClaim},
		{"pinned", fmt.Sprintf(`"measurements_b64u":[%q,%q]`, cpu, gpu), ear.ApprovedRuntimeClaim},
	} {
		r := e.verifiedUnder(f, tc.name, fmt.Appendf(nil, `{"policy_version":%q,%s,%s}`, verify.PolicyVersion, relax, tc.policy))
		var ar ear.AttestationResult
		if err := ar.Verify([]byte(r.out.EAR), jwa.EdDSA, e.pub); err != nil {
			t.Fatal(err)
		}
		ap := ar.Submods[earresult.GPUSubmodName]
		if ap == nil || ap.TrustVector == nil || ap.Status == nil {
			t.Fatalf("%s: no gpu submodule", tc.name)
		}
		if got := ap.TrustVector.Executables; got != tc.want {
			t.Errorf("%s: gpu executables %d, want %d", tc.name, got, tc.want)
		}
		if *ap.Status == ear.TrustTierAffirming {
			t.Errorf("%s: simulated gpu affirming", tc.name)
		}
	}
}

// TestEARBindingAttack: a caller who picks among the operator's policies,
// or whose request fails, must not get an EAR a relying party would take
// for another answer. A verified EAR names the policy the caller picked
// (appraisal-policy-id), carries the run's nonce binding and the
// verification time; a refused one (the production policy) names that
// policy, carries no nonce and no claim in the affirming tier; a rejected
// one (tampered evidence) claims 99 throughout.
func TestEARBindingAttack(t *testing.T) {
	e := newEnv(t, 0)
	id := func(b []byte) string {
		p, err := verify.ParsePolicy(b)
		if err != nil {
			t.Fatal(err)
		}
		return p.ID()
	}
	simID, prodID := id(e.f.simPolicy()), id(e.f.prodPolicy())
	if simID == prodID {
		t.Fatal("two policies, one id")
	}
	decode := func(r *reply) *ear.AttestationResult {
		t.Helper()
		var ar ear.AttestationResult
		if err := ar.Verify([]byte(r.out.EAR), jwa.EdDSA, e.pub); err != nil {
			t.Fatalf("ear: %v", err)
		}
		if ar.IssuedAt == nil || *ar.IssuedAt != testfixture.Now.Unix() {
			t.Fatalf("iat %v, want the verification time", ar.IssuedAt)
		}
		return &ar
	}

	r := e.post(e.f.body("default", false))
	var res struct {
		Nonce string `json:"nonce_binding_b64u"`
	}
	if err := json.Unmarshal(r.out.Result, &res); err != nil || res.Nonce == "" {
		t.Fatalf("result %s: %v", r.out.Result, err)
	}
	ar := decode(r)
	ap := ar.Submods[earresult.SubmodName]
	if ap.AppraisalPolicyID == nil || *ap.AppraisalPolicyID != simID {
		t.Errorf("verified: appraisal-policy-id %v, want %s", ap.AppraisalPolicyID, simID)
	}
	if ar.Nonce == nil || *ar.Nonce != res.Nonce {
		t.Errorf("verified: eat_nonce %v, want the run's %s", ar.Nonce, res.Nonce)
	}

	noAffirming := func(name string, ar *ear.AttestationResult, want ear.TrustTier, policyID string) {
		t.Helper()
		if ar.Nonce != nil {
			t.Errorf("%s: eat_nonce %q on a failure", name, *ar.Nonce)
		}
		if len(ar.Submods) != 1 {
			t.Errorf("%s: %d submodules", name, len(ar.Submods))
		}
		ap := ar.Submods[earresult.SubmodName]
		if ap == nil || ap.Status == nil || *ap.Status != want {
			t.Fatalf("%s: status %v, want %s", name, ap, want)
		}
		if ap.AppraisalPolicyID == nil || *ap.AppraisalPolicyID != policyID {
			t.Errorf("%s: appraisal-policy-id %v, want %s", name, ap.AppraisalPolicyID, policyID)
		}
		for _, c := range []ear.TrustClaim{ap.TrustVector.InstanceIdentity, ap.TrustVector.Configuration, ap.TrustVector.Executables,
			ap.TrustVector.FileSystem, ap.TrustVector.Hardware, ap.TrustVector.RuntimeOpaque, ap.TrustVector.StorageOpaque, ap.TrustVector.SourcedData} {
			if c.GetTier() == ear.TrustTierAffirming {
				t.Errorf("%s: affirming claim %d in %+v", name, c, ap.TrustVector)
			}
		}
	}
	r = e.post(e.f.body("prod", false))
	if r.out.Verdict != verify.VerdictPolicy {
		t.Fatalf("prod: verdict %s", r.out.Verdict)
	}
	noAffirming("policy-refused", decode(r), ear.TrustTierContraindicated, prodID)

	f := *e.f
	dot := bytes.LastIndexByte(f.ev, '.')
	f.ev = bytes.Clone(f.ev)
	f.ev[dot+5] ^= 1
	r = e.post(f.body("default", false))
	if r.out.Verdict != verify.VerdictRejected {
		t.Fatalf("tampered: verdict %s", r.out.Verdict)
	}
	ar = decode(r)
	noAffirming("rejected", ar, ear.TrustTierContraindicated, simID)
	if tv := ar.Submods[earresult.SubmodName].TrustVector; tv.Hardware != ear.CryptoValidationFailedClaim || tv.InstanceIdentity != ear.CryptoValidationFailedClaim {
		t.Errorf("rejected: trust vector %+v, want 99", tv)
	}
}
