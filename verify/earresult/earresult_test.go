package earresult

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/veraison/ear"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
)

var now = time.Date(2026, time.June, 1, 12, 0, 0, 0, time.UTC)

func pkcs8(t *testing.T, k any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func result() *verify.Result {
	return &verify.Result{
		AttestationID: "clawea_att_x", AgentDID: "did:key:z6Mkagent", RunID: "run_1", AttesterDID: "did:key:z6Mkattester",
		NonceBindingB64u: "0LACz9RUOsq-Lno2GehjNC8XHurEhh1UldXdRIKjKy4",
		TEE:              verify.TEEClaims{AttestationType: "sev_snp_report", RootID: "sev-snp:amd-ark-Milan"},
		Evidence:         []verify.EvidenceResult{{Platform: "sev-snp", Revocation: "checked", Collateral: "not-applicable"}},
		Checks:           []verify.CheckResult{{Name: "envelope", Status: verify.StatusPassed}},
	}
}

func TestSignAndVerifyRoundTrip(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for name, tc := range map[string]struct {
		key any
		pub any
		alg jwa.SignatureAlgorithm
	}{
		"ed25519": {edKey, edKey.Public(), jwa.EdDSA},
		"p256":    {ecKey, &ecKey.PublicKey, jwa.ES256},
	} {
		t.Run(name, func(t *testing.T) {
			signer, err := ParseSigningKey(pkcs8(t, tc.key))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				res    *verify.Result
				err    error
				status ear.TrustTier
			}{
				{result(), nil, ear.TrustTierAffirming},
				{func() *verify.Result { r := result(); r.Simulated = true; return r }(), nil, ear.TrustTierWarning},
				{nil, &verify.Error{Class: verify.ErrRejected, Check: "envelope", Code: poh.SignatureInvalid}, ear.TrustTierContraindicated},
				{nil, &verify.Error{Class: verify.ErrPolicy, Check: "policy/measurement"}, ear.TrustTierContraindicated},
				{nil, &verify.Error{Class: verify.ErrCannotCheck, Check: "platform/revocation"}, ear.TrustTierNone},
			} {
				ar, err := New(c.res, c.err, Options{Now: now, Policy: &verify.Policy{ExpectedGatePolicyHashB64u: "0LACz9RUOsq-Lno2GehjNC8XHurEhh1UldXdRIKjKy4"}})
				if err != nil {
					t.Fatal(err)
				}
				tok, err := signEAR(ar, signer)
				if err != nil {
					t.Fatal(err)
				}
				var got ear.AttestationResult
				if err := got.Verify(tok, tc.alg, tc.pub); err != nil {
					t.Fatal(err)
				}
				ap := got.Submods[SubmodName]
				if ap == nil || ap.Status == nil || *ap.Status != c.status {
					t.Fatalf("status %v, want %v", ap, c.status)
				}
				if *got.IssuedAt != now.Unix() || !strings.HasPrefix(*ap.AppraisalPolicyID, verify.PolicyVersion+"#") {
					t.Fatalf("iat %d policy %v", *got.IssuedAt, ap.AppraisalPolicyID)
				}
				// Another key does not verify it.
				other, _, _ := ed25519.GenerateKey(rand.Reader)
				if err := new(ear.AttestationResult).Verify(tok, jwa.EdDSA, other); err == nil {
					t.Fatal("verified with another key")
				}
			}
		})
	}
}

func TestUsageHasNoEAR(t *testing.T) {
	if _, err := New(nil, &verify.Error{Class: verify.ErrUsage, Check: "input"}, Options{Now: now}); err == nil {
		t.Fatal("usage error produced an EAR")
	}
	if _, err := New(result(), nil, Options{}); err == nil {
		t.Fatal("no clock accepted")
	}
}

func TestParseSigningKeyRejects(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	good := pkcs8(t, ed)
	for name, b := range map[string][]byte{
		"rsa":        pkcs8(t, rsaKey),
		"p384":       pkcs8(t, p384),
		"not pem":    []byte("hello"),
		"two blocks": append(append([]byte{}, good...), good...),
		"wrong type": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}}),
		"garbage":    pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
	} {
		if _, err := ParseSigningKey(b); !errors.Is(err, errKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestTCBStatusReflected: the EAR says honestly what the TCB status was. An
// out-of-date TCB the policy accepted is a warning with hardware 32 (genuine,
// known vulnerabilities), never affirming; refused, it is contraindicated.
func TestTCBStatusReflected(t *testing.T) {
	tdx := func(status, qe string, warn bool) *verify.Result {
		r := result()
		r.TEE.AttestationType = "tdx_quote"
		r.Evidence = []verify.EvidenceResult{{Platform: "tdx", Revocation: "checked", Collateral: "checked", TCBStatus: status, QETCBStatus: qe}}
		if status != "UpToDate" {
			r.Evidence[0].TCBAdvisoryIDs = []string{"INTEL-SA-00837"}
		}
		if warn {
			r.Warnings = []string{"evidence[0]: tdx tcb status " + status + ", ...: accepted by policy, not up to date"}
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		res      *verify.Result
		err      error
		status   ear.TrustTier
		hardware ear.TrustClaim
	}{
		{"up to date", tdx("UpToDate", "UpToDate", false), nil, ear.TrustTierAffirming, ear.GenuineHardwareClaim},
		{"out of date accepted", tdx("OutOfDate", "UpToDate", true), nil, ear.TrustTierWarning, ear.UnsafeHardwareClaim},
		// Even without the verifier's warning the hardware claim follows the status.
		{"qe sw hardening, no warning", tdx("UpToDate", "SWHardeningNeeded", false), nil, ear.TrustTierWarning, ear.UnsafeHardwareClaim},
		{"status refused", nil, &verify.Error{Class: verify.ErrPolicy, Check: "policy/" + platform.CheckTCBStatus}, ear.TrustTierContraindicated, ear.ContraindicatedHardwareClaim},
		{"advisory refused", nil, &verify.Error{Class: verify.ErrPolicy, Check: "policy/" + platform.CheckTCBAdvisory}, ear.TrustTierContraindicated, ear.ContraindicatedHardwareClaim},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar, err := New(tc.res, tc.err, Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			ap := ar.Submods[SubmodName]
			if *ap.Status != tc.status || ap.TrustVector.Hardware != tc.hardware {
				t.Fatalf("status %v hardware %v, want %v %v", *ap.Status, ap.TrustVector.Hardware, tc.status, tc.hardware)
			}
			if tc.res != nil {
				annot := *ap.VeraisonAnnotatedEvidence
				ts, ok := annot["tcb_statuses"].([]interface{})
				if !ok || len(ts) != 1 || ts[0].(map[string]interface{})["tcb_status"] != tc.res.Evidence[0].TCBStatus {
					t.Fatalf("annotations %v", annot["tcb_statuses"])
				}
			}
		})
	}
}

// TestGPUSubmod: a verified result with GPU evidence has a second submod,
// a warning while the GPU evidence is simulated or its revocation
// unchecked; without GPU evidence there is one submod.
func TestGPUSubmod(t *testing.T) {
	ar, err := New(result(), nil, Options{Now: now})
	if err != nil || len(ar.Submods) != 1 {
		t.Fatalf("cpu only: %v %d submods", err, len(ar.Submods))
	}
	r := result()
	r.Evidence = append(r.Evidence, verify.EvidenceResult{
		Platform: "nvidia-gpu", RootID: "nvidia-device-identity-ca", TCB: "vbios 96.00.9f.00.01 driver 550.90.07",
		MeasurementB64u: "m", Revocation: "skipped", Collateral: "not-applicable",
	})
	ar, err = New(r, nil, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	g, ok := ar.Submods[GPUSubmodName]
	if len(ar.Submods) != 2 || !ok || *g.Status != ear.TrustTierWarning || g.TrustVector.Hardware != ear.UnsafeHardwareClaim {
		t.Fatalf("submods %v", ar.Submods)
	}
	gpus := (*g.VeraisonAnnotatedEvidence)["gpus"].([]interface{})
	if len(gpus) != 1 || gpus[0].(map[string]interface{})["evidence_index"] != 1 {
		t.Fatalf("annotations %v", *g.VeraisonAnnotatedEvidence)
	}
	// The GPU's unchecked revocation is the GPU submod's: the CPU's
	// hardware claim stays genuine.
	if ap := ar.Submods[SubmodName]; ap.TrustVector.Hardware != ear.GenuineHardwareClaim {
		t.Fatalf("cpu hardware claim %v", ap.TrustVector.Hardware)
	}
	r.Evidence[1].Revocation = "checked"
	r.Evidence[1].MeasurementB64u = "bQ"
	ar, _ = New(r, nil, Options{Now: now, Policy: &verify.Policy{Measurements: [][]byte{[]byte("m")}}})
	if g := ar.Submods[GPUSubmodName]; *g.Status != ear.TrustTierAffirming || g.TrustVector.Executables != ear.ApprovedRuntimeClaim {
		t.Fatalf("checked real gpu, measurement pinned: %v", *g.Status)
	}
	// Its measurement not pinned (blocks by index, or none): unrecognized
	// runtime, a warning.
	ar, _ = New(r, nil, Options{Now: now, Policy: &verify.Policy{GPUMeasurements: map[int][]byte{1: []byte("m")}}})
	if g := ar.Submods[GPUSubmodName]; *g.Status != ear.TrustTierWarning || g.TrustVector.Executables != ear.UnrecognizedRuntimeClaim {
		t.Fatalf("checked real gpu, measurement not pinned: %v %v", *g.Status, g.TrustVector.Executables)
	}
	// A refused attestation has no gpu submod.
	ar, _ = New(nil, &verify.Error{Class: verify.ErrRejected, Check: "platform"}, Options{Now: now})
	if len(ar.Submods) != 1 {
		t.Fatalf("failure: %d submods", len(ar.Submods))
	}
}

// TestAppraisalPolicyID checks that the EAR names the policy Verify
// applied: the id its Result recorded, else (a failure, or a Result
// without one) the id of Options.Policy.
func TestAppraisalPolicyID(t *testing.T) {
	pol := &verify.Policy{ExpectedGatePolicyHashB64u: "0LACz9RUOsq-Lno2GehjNC8XHurEhh1UldXdRIKjKy4"}
	recorded := result()
	recorded.PolicyID = pol.ID()
	for _, c := range []struct {
		res  *verify.Result
		err  error
		want string
	}{
		{recorded, nil, pol.ID()},
		{result(), nil, pol.ID()},
		{nil, &verify.Error{Class: verify.ErrRejected, Check: "envelope", Code: poh.SignatureInvalid}, pol.ID()},
	} {
		ar, err := New(c.res, c.err, Options{Now: time.Unix(1, 0), Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		if got := ar.Submods[SubmodName].AppraisalPolicyID; got == nil || *got != c.want {
			t.Fatalf("appraisal policy id %v, want %s", got, c.want)
		}
	}
}
