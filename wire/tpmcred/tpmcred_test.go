package tpmcred

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/wire/tpmquote"
)

func testAK(t testing.TB, attrs uint32) []byte {
	t.Helper()
	return testcert.SoftwareAK(t, tpmquote.Public{Type: tpmquote.AlgECC, Attributes: attrs})
}

var akAttrs = tpmquote.AKRequiredAttributes | tpmquote.AttrUserWithAuth | tpmquote.AttrNoDA

// TPMA_OBJECT bits (TPM 2.0 Part 2, 8.3) that an attestation key must have
// set (fixedTPM, restricted) or clear (decrypt).
const (
	attrFixedTPM   uint32 = 1 << 1
	attrRestricted uint32 = 1 << 16
	attrDecrypt    uint32 = 1 << 17
)

// testPKI is a root, an intermediate and an EK certificate with the TCG
// critical directoryName SAN, for an RSA 2048 EK.
type testPKI struct {
	root, inter *x509.Certificate
	ek          []byte
	ekKey       *rsa.PrivateKey
}

func tcgSAN(t testing.TB, attrs []pkix.AttributeTypeAndValue) pkix.Extension {
	t.Helper()
	var rdn pkix.RDNSequence
	for _, a := range attrs {
		rdn = append(rdn, pkix.RelativeDistinguishedNameSET{a})
	}
	dn, err := asn1.Marshal(rdn)
	if err != nil {
		t.Fatal(err)
	}
	san, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 4, IsCompound: true, Bytes: dn}})
	if err != nil {
		t.Fatal(err)
	}
	return pkix.Extension{Id: oidSAN, Critical: true, Value: san}
}

func tpmAttrs() []pkix.AttributeTypeAndValue {
	return []pkix.AttributeTypeAndValue{
		{Type: oidTPMManufacturer, Value: "id:00001014"},
		{Type: oidTPMModel, Value: "test"},
		{Type: oidTPMVersion, Value: "id:00000001"},
	}
}

func newPKI(t testing.TB, san pkix.Extension) *testPKI {
	t.Helper()
	now := time.Now()
	mk := func(tmpl, parent *x509.Certificate, pub any, signer any) *x509.Certificate {
		return testcert.Create(t, tmpl, parent, pub, signer)
	}
	ca := func(cn string, serial int64) *x509.Certificate {
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		}
	}
	rootKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	interKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ekKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	root := mk(ca("test tpm root", 1), ca("test tpm root", 1), &rootKey.PublicKey, rootKey)
	inter := mk(ca("test tpm ca", 2), root, &interKey.PublicKey, rootKey)
	ekTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3), NotBefore: now.Add(-time.Hour), NotAfter: now.Add(12 * time.Hour),
		KeyUsage:           x509.KeyUsageKeyEncipherment,
		UnknownExtKeyUsage: []asn1.ObjectIdentifier{{2, 23, 133, 8, 1}},
		ExtraExtensions:    []pkix.Extension{san},
	}
	ek := mk(ekTmpl, inter, &ekKey.PublicKey, interKey)
	return &testPKI{root: root, inter: inter, ek: ek.Raw, ekKey: ekKey}
}

func TestEKPublic(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, err := EKPublic(&rk.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	u, err := ek.Unique.RSA()
	if err != nil || !bytes.Equal(u.Buffer, rk.N.Bytes()) {
		t.Fatal("rsa unique")
	}
	if u, _ := tpm2.RSAEKTemplate.Unique.RSA(); !bytes.Equal(u.Buffer, make([]byte, 256)) {
		t.Fatal("EKPublic modified go-tpm's template")
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if _, err := EKPublic(&ec.PublicKey); err != nil {
		t.Fatal(err)
	}
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	odd := &rsa.PublicKey{N: rk.N, E: 3}
	for name, k := range map[string]any{"rsa1024": &small.PublicKey, "p384": &p384.PublicKey, "e3": odd, "string": "x"} {
		if _, err := EKPublic(k); !errors.Is(err, errUnsupportedEK) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestNewActivationForEKRejectsNonEK(t *testing.T) {
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ak := testAK(t, akAttrs)
	for name, mut := range map[string]func(a *tpm2.TPMAObject){
		"not fixedTPM":   func(a *tpm2.TPMAObject) { a.FixedTPM = false },
		"not restricted": func(a *tpm2.TPMAObject) { a.Restricted = false },
		"signing":        func(a *tpm2.TPMAObject) { a.SignEncrypt = true },
	} {
		ek, err := EKPublic(&rk.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		mut(&ek.ObjectAttributes)
		if _, _, err := NewActivationForEK(rand.Reader, ek, ak); !errors.Is(err, errUnsupportedEK) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestNewActivationRejectsAK(t *testing.T) {
	pki := newPKI(t, tcgSAN(t, tpmAttrs()))
	for name, ak := range map[string][]byte{
		"not restricted": testAK(t, akAttrs&^attrRestricted),
		"not fixedTPM":   testAK(t, akAttrs&^attrFixedTPM),
		"decrypt":        testAK(t, akAttrs|attrDecrypt),
		"garbage":        {1, 2, 3},
	} {
		if _, _, err := NewActivation(rand.Reader, pki.ek, ak); !errors.Is(err, errAK) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, _, err := NewActivation(rand.Reader, []byte{0x30, 0}, testAK(t, akAttrs)); !errors.Is(err, ErrMalformed) {
		t.Errorf("bad ek certificate: %v", err)
	}
}

func TestCheckOnce(t *testing.T) {
	pki := newPKI(t, tcgSAN(t, tpmAttrs()))
	act, ch, err := NewActivation(rand.Reader, pki.ek, testAK(t, akAttrs))
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.EncryptedSecret) != 256 || len(ch.CredentialBlob) == 0 {
		t.Fatalf("challenge sizes %d %d", len(ch.CredentialBlob), len(ch.EncryptedSecret))
	}
	secret := act.secret
	if _, err := act.Check(secret[:SecretSize-1]); !errors.Is(err, ErrActivation) {
		t.Fatal(err)
	}
	// The right secret after a failed check is refused: one try only.
	if _, err := act.Check(secret[:]); !errors.Is(err, ErrUsed) {
		t.Fatal(err)
	}
}

func TestCertification(t *testing.T) {
	pki := newPKI(t, tcgSAN(t, tpmAttrs()))
	ak := testAK(t, akAttrs)
	act, _, err := NewActivation(rand.Reader, pki.ek, ak)
	if err != nil {
		t.Fatal(err)
	}
	got, err := act.Check(act.secret[:])
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec, err := NewCertification(got, [][]byte{pki.inter.Raw}, now, "unit test")
	if err != nil {
		t.Fatal(err)
	}
	b := rec.Marshal()
	parsed, err := ParseCertification(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(parsed.Marshal(), b) {
		t.Fatal("round trip")
	}
	roots := x509.NewCertPool()
	roots.AddCert(pki.root)
	c, err := VerifyCertification(parsed, VerifyOpts{Roots: roots, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.AKName, got.AKName) || c.TPM.Model != "test" || !c.Root.Equal(pki.root) {
		t.Fatalf("%+v", c)
	}

	if _, err := VerifyCertification(parsed, VerifyOpts{Now: now}); !errors.Is(err, ErrOptions) {
		t.Fatal(err)
	}
	if _, err := VerifyCertification(parsed, VerifyOpts{Roots: roots}); !errors.Is(err, ErrOptions) {
		t.Fatal(err)
	}
	// The intermediate as a root is not the root asked for.
	interOnly := x509.NewCertPool()
	interOnly.AddCert(newPKI(t, tcgSAN(t, tpmAttrs())).root)
	if _, err := VerifyCertification(parsed, VerifyOpts{Roots: interOnly, Now: now}); !errors.Is(err, ErrEKChain) {
		t.Fatal(err)
	}
	swapped := *parsed
	swapped.AKPublic = testAK(t, akAttrs|attrDecrypt)
	if _, err := VerifyCertification(&swapped, VerifyOpts{Roots: roots, Now: now}); !errors.Is(err, errAK) {
		t.Fatal(err)
	}
}

func TestEKSAN(t *testing.T) {
	now := time.Now()
	for name, attrs := range map[string][]pkix.AttributeTypeAndValue{
		"missing version": tpmAttrs()[:2],
		"repeated":        append(tpmAttrs(), tpmAttrs()[0]),
		"other attribute": append(tpmAttrs(), pkix.AttributeTypeAndValue{Type: asn1.ObjectIdentifier{2, 5, 4, 3}, Value: "x"}),
	} {
		pki := newPKI(t, tcgSAN(t, attrs))
		ek, _ := x509.ParseCertificate(pki.ek)
		roots := x509.NewCertPool()
		roots.AddCert(pki.root)
		if _, err := VerifyEKChain(ek, [][]byte{pki.inter.Raw}, roots, now); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseChallenge(t *testing.T) {
	pki := newPKI(t, tcgSAN(t, tpmAttrs()))
	_, ch, err := NewActivation(rand.Reader, pki.ek, testAK(t, akAttrs))
	if err != nil {
		t.Fatal(err)
	}
	good := ch.Marshal()
	if p, err := ParseChallenge(good); err != nil || !bytes.Equal(p.Marshal(), good) {
		t.Fatalf("round trip: %v", err)
	}
	bad := map[string][]byte{
		"empty":     nil,
		"label":     append([]byte(strings.Replace(challengeLabel, "v1", "v2", 1)), good[len(challengeLabel):]...),
		"trailing":  append(append([]byte(nil), good...), 0),
		"truncated": good[:len(good)-1],
		"sha1 name": func() []byte {
			c := *ch
			c.AKName = append([]byte{0, 4}, make([]byte, 32)...)
			return c.Marshal()
		}(),
		"short name": func() []byte { c := *ch; c.EKName = c.EKName[:20]; return c.Marshal() }(),
		"empty blob": func() []byte { c := *ch; c.CredentialBlob = nil; return c.Marshal() }(),
		"big secret": func() []byte {
			c := *ch
			c.EncryptedSecret = make([]byte, maxEncryptedSecretSize+1)
			return c.Marshal()
		}(),
	}
	for name, b := range bad {
		if p, err := ParseChallenge(b); !errors.Is(err, ErrMalformed) || p != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseCertificationRejects(t *testing.T) {
	rec := &Certification{AKPublic: []byte{1}, EKCert: []byte{2}, ActivatedAt: time.Unix(1700000000, 0).UTC(), ActivatedBy: "x"}
	good := rec.Marshal()
	if _, err := ParseCertification(good); err != nil {
		t.Fatal(err)
	}
	mut := func(f func(c *Certification)) []byte { c := *rec; f(&c); return c.Marshal() }
	for name, b := range map[string][]byte{
		"trailing":       append(append([]byte(nil), good...), 0),
		"zero time":      mut(func(c *Certification) { c.ActivatedAt = time.Unix(0, 0) }),
		"empty by":       mut(func(c *Certification) { c.ActivatedBy = "" }),
		"control by":     mut(func(c *Certification) { c.ActivatedBy = "a\nb" }),
		"bad utf8":       mut(func(c *Certification) { c.ActivatedBy = "\xff" }),
		"no ek":          mut(func(c *Certification) { c.EKCert = nil }),
		"4 intermediate": mut(func(c *Certification) { c.EKIntermediates = [][]byte{{1}, {1}, {1}, {1}} }),
		"challenge":      (&Challenge{}).Marshal(),
	} {
		if c, err := ParseCertification(b); !errors.Is(err, ErrMalformed) || c != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
