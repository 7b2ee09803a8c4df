package platform

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"math/big"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/wire/tpmcred"
	"github.com/clawea/attester/wire/tpmquote"
)

// certPKI is a software TPM-vendor root, and an RSA 2048 EK certificate it
// signed directly. The certification records below name the fixture's AK:
// VerifyCertification cannot re-check an activation (spec section 2.2), so
// these records test how verify/platform trusts records, not activation
// (enclave/tpm tests that against swtpm).
type certPKI struct {
	root *x509.Certificate
	ek   []byte
}

func newCertPKI(t testing.TB, notAfter time.Time) certPKI {
	t.Helper()
	rootKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ekKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rootTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test tpm vendor root"},
		NotBefore: testNow.Add(-time.Hour), NotAfter: testNow.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	rootDER, err := x509.CreateCertificate(rand.Reader, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	root, err := x509.ParseCertificate(rootDER)
	if err != nil {
		t.Fatal(err)
	}
	ekTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "test ek"},
		NotBefore: testNow.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageKeyEncipherment,
	}
	ek, err := x509.CreateCertificate(rand.Reader, ekTmpl, root, &ekKey.PublicKey, rootKey)
	if err != nil {
		t.Fatal(err)
	}
	return certPKI{root: root, ek: ek}
}

func (p certPKI) record(akPublic []byte) *tpmcred.Certification {
	return &tpmcred.Certification{AKPublic: akPublic, EKCert: p.ek, ActivatedAt: testNow.Add(-time.Minute), ActivatedBy: "platform test"}
}

func (p certPKI) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.root)
	return pool
}

// certifiedTPM is the TPM fixture, its AK public area, an EK PKI valid until
// an hour after testNow, and options that trust the AK through that PKI's
// record alone.
func certifiedTPM(t *testing.T) (testfixture.TPMQuote, []byte, certPKI, Options) {
	t.Helper()
	fx := loadTPMFixture(t)
	akPub := fx.Evidence.Aux[tpmquote.AuxAKPublic]
	pki := newCertPKI(t, testNow.Add(time.Hour))
	opts := Options{Now: fixedNow, AllowSimulated: true,
		TPMAKCertifications: []*tpmcred.Certification{pki.record(akPub)}, TPMEKRoots: pki.roots()}
	return fx, akPub, pki, opts
}

func TestTPMCertifiedAK(t *testing.T) {
	fx, _, pki, opts := certifiedTPM(t)
	res, err := Verify(fx.Evidence, fx.ReportData, opts)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pki.root.Raw)
	if want := "sim-tpm-ek:" + hex.EncodeToString(sum[:]) + ":" + hex.EncodeToString(fx.AKName); res.RootID != want {
		t.Fatalf("root id %s, want %s", res.RootID, want)
	}
	if c := res.TPM; c.AKProvenance != aKEKCertified || string(c.EKRootSHA256) != string(sum[:]) || c.ActivatedBy != "platform test" {
		t.Fatalf("claims %+v", c)
	}

	// Required certification: met by the record, and a pin alone is not
	// enough.
	o := opts
	o.RequireTPMEKCertifiedAK = true
	o.TrustedTPMAKs = [][]byte{fx.AKName}
	if res, err := Verify(fx.Evidence, fx.ReportData, o); err != nil || res.TPM.AKProvenance != aKEKCertified {
		t.Fatalf("required and certified: %v", err)
	}
	o.TPMAKCertifications, o.TPMEKRoots = nil, nil
	_, err = Verify(fx.Evidence, fx.ReportData, o)
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkTPMAK)

	// Pinning alone still works and says so.
	o = Options{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{fx.AKName}}
	if res, err := Verify(fx.Evidence, fx.ReportData, o); err != nil || res.TPM.AKProvenance != aKPinned {
		t.Fatalf("pinned: %v", err)
	}
}

func TestTPMCertifiedAKRefused(t *testing.T) {
	fx, akPub, pki, base := certifiedTPM(t)

	expired := newCertPKI(t, testNow.Add(-time.Minute))
	ak, err := tpmquote.ParsePublic(akPub)
	if err != nil {
		t.Fatal(err)
	}
	other := testcert.SoftwareAK(t, *ak) // a valid AK, not this evidence's
	refuseOptions(t, fx.Evidence, fx.ReportData, base, []optionsCase{
		{"another vendor's root", func(o *Options) { o.TPMEKRoots = newCertPKI(t, testNow.Add(time.Hour)).roots() },
			ErrRejected, tpmcred.ErrEKChain, checkTPMAK},
		{"ek certificate expired", func(o *Options) {
			o.TPMAKCertifications, o.TPMEKRoots = []*tpmcred.Certification{expired.record(akPub)}, expired.roots()
		}, ErrRejected, tpmcred.ErrEKChain, checkTPMAK},
		// A record certifying another AK does not make this one trusted.
		{"another ak certified", func(o *Options) { o.TPMAKCertifications = []*tpmcred.Certification{pki.record(other)} },
			ErrRejected, ErrUntrustedRoot, checkTPMAK},
		// Contradictions and missing roots are option errors.
		{"no ek roots", func(o *Options) { o.TPMEKRoots = nil }, ErrBadOptions, nil, checkOptions},
		{"untrusted ak allowed and certified", func(o *Options) { o.AllowUntrustedTPMAK = true }, ErrBadOptions, nil, checkOptions},
		{"untrusted ak allowed and certification required", func(o *Options) {
			*o = Options{Now: fixedNow, AllowSimulated: true, AllowUntrustedTPMAK: true, RequireTPMEKCertifiedAK: true}
		}, ErrBadOptions, nil, checkOptions},
	})
}
