package platform

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/wire/tpmquote"
)

// TestGCEAKRootsAreGoTPMTools: the embedded Google EK/AK CA certificates are
// go-tpm-tools' bytes.
func TestGCEAKRootsAreGoTPMTools(t *testing.T) {
	for name, got := range map[string][]byte{
		"server/ca-certs/gcp_ek_ak_ca_root.crt":            gceAKRootDER,
		"server/ca-certs/gcp_ek_ak_ca_intermediate_v3.crt": gceAKIntermediateDER,
	} {
		if want := tdxtest.ReadModule(t, "github.com/google/go-tpm-tools", name); !bytes.Equal(got, want) {
			t.Errorf("%s differs from go-tpm-tools'", name)
		}
	}
	g, err := gceRoots()
	if err != nil {
		t.Fatal(err)
	}
	if g.root.Subject.CommonName != "EK/AK CA Root" {
		t.Fatal(g.root.Subject)
	}
}

// akCA is a test AK CA: a root and the certificate it issues for a key.
type akCA struct {
	root *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newAKCA(t *testing.T) *akCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test EK/AK CA Root"},
		NotBefore: testNow.Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	return &akCA{root: testcert.Create(t, tmpl, tmpl, key.Public(), key), key: key}
}

func newPool(ca *akCA) *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.root)
	return pool
}

func (ca *akCA) issue(t *testing.T, pub any, notAfter time.Time) []byte {
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test vTPM AK"},
		NotBefore: testNow.Add(-time.Hour), NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature}
	return testcert.Create(t, tmpl, ca.root, pub, ca.key).Raw
}

// TestTPMAKCert: an AK certificate from the TPM's NV makes the AK trusted
// when it certifies that AK and chains to a trusted AK CA; another key, an
// untrusted CA, an expired certificate and a simulated quote under the GCE
// option alone are refused.
func TestTPMAKCert(t *testing.T) {
	fx := loadTPMFixture(t)
	ak, err := tpmquote.ParsePublic(fx.Evidence.Aux[tpmquote.AuxAKPublic])
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ak.CryptoPublicKey()
	if err != nil {
		t.Fatal(err)
	}
	ca := newAKCA(t)
	opts := Options{Now: fixedNow, AllowSimulated: true, TPMAKCARoots: newPool(ca)}
	with := func(cert []byte) func() (*Result, error) {
		return func() (*Result, error) {
			ev := cloneEvidence(fx.Evidence)
			ev.Aux[tpmquote.AuxAKCert] = cert
			return Verify(ev, fx.ReportData, opts)
		}
	}
	res, err := with(ca.issue(t, pub, testNow.Add(time.Hour)))()
	if err != nil {
		t.Fatal(err)
	}
	if res.TPM.AKProvenance != akCertified || !strings.HasPrefix(res.RootID, rootIDSimTPMAKCert) {
		t.Fatalf("provenance %s root %s", res.TPM.AKProvenance, res.RootID)
	}

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, err = with(ca.issue(t, other.Public(), testNow.Add(time.Hour)))()
	wantErr(t, err, ErrRejected, nil, checkTPMAK)

	_, err = with(newAKCA(t).issue(t, pub, testNow.Add(time.Hour)))()
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkTPMAK)

	_, err = with(ca.issue(t, pub, testNow.Add(-time.Minute)))()
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkTPMAK)

	_, err = with([]byte("not a certificate"))()
	wantErr(t, err, ErrRejected, nil, checkTPMAK)

	// Google's roots are never used for simulated evidence: with only
	// TrustGCEAKCerts, nothing trusts the AK.
	opts = Options{Now: fixedNow, AllowSimulated: true, TrustGCEAKCerts: true}
	_, err = with(ca.issue(t, pub, testNow.Add(time.Hour)))()
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkTPMAK)
}
