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
		Checks:           []verify.CheckResult{{Name: verify.CheckEnvelope, Status: verify.StatusPassed}},
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
				tok, err := Sign(ar, signer)
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
		if _, err := ParseSigningKey(b); !errors.Is(err, ErrKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
