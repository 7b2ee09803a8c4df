package verify

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/tpmcred"
)

func testRootCert(t *testing.T) *x509.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tpm root"},
		NotBefore: time.Unix(1700000000, 0), NotAfter: time.Unix(1900000000, 0), IsCA: true, BasicConstraintsValid: true}
	return testcert.Create(t, tmpl, tmpl, &k.PublicKey, k)
}

func TestPolicyTPMCertifications(t *testing.T) {
	// ParsePolicy checks a record's encoding; its contents are checked by
	// platform.Verify against the roots at verification time.
	rec := &tpmcred.Certification{AKPublic: []byte{1}, EKCert: []byte{2}, ActivatedAt: time.Unix(1700000000, 0).UTC(), ActivatedBy: "operator"}
	p := &Policy{TPMAKCertifications: []*tpmcred.Certification{rec}, TPMEKRoots: []*x509.Certificate{testRootCert(t)}, RequireTPMEKCertifiedAK: true}
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParsePolicy(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := q.Encode()
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("round trip: %v\n%s\n%s", err, b, b2)
	}
	if !q.RequireTPMEKCertifiedAK || len(q.TPMAKCertifications) != 1 || q.TPMAKCertifications[0].ActivatedBy != "operator" || q.tpmEKRoots() == nil {
		t.Fatalf("parsed %+v", q)
	}

	recB := b64u.Encode(rec.Marshal())
	rootB := b64u.Encode(p.TPMEKRoots[0].Raw)
	for _, tc := range []struct{ in, path string }{
		{policyHead + `"tpm_ak_certifications_b64u":["` + recB + `"]}`, ""},
		{policyHead + `"tpm_ak_certifications_b64u":["` + b64u.Encode(append(rec.Marshal(), 0)) + `"],"tpm_ek_roots_b64u":["` + rootB + `"]}`, "$.tpm_ak_certifications_b64u[0]"},
		{policyHead + `"tpm_ek_roots_b64u":["` + b64u.Encode([]byte{0x30, 0}) + `"]}`, "$.tpm_ek_roots_b64u[0]"},
		{policyHead + `"tpm_ek_roots_b64u":["` + rootB + `","` + rootB + `"]}`, "$.tpm_ek_roots_b64u[1]"},
		{policyHead + `"require_tpm_ek_certified_ak":1}`, "$.require_tpm_ek_certified_ak"},
	} {
		wantPolicyRefused(t, tc.in, tc.path, nil)
	}
}
