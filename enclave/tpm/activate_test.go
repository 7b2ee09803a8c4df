package tpm

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/internal/testcert"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/tpmcred"
	"github.com/clawea/attester/wire/tpmquote"
)

// swtpmCA returns the swtpm_localca root and intermediate (issuer) that
// signed the EK certificate of in.
func swtpmCA(t *testing.T, in *swtpmtest.Instance) (root *x509.Certificate, intermediate []byte) {
	t.Helper()
	rootDER, inter, err := in.CA()
	if err != nil {
		t.Fatal(err)
	}
	if root, err = x509.ParseCertificate(rootDER); err != nil {
		t.Fatal(err)
	}
	return root, inter
}

func activationTPM(t *testing.T) (*TPM, []byte) {
	t.Helper()
	tp := openSwtpm(t, Options{})
	ek := tp.EKCertificate()
	if ek == nil {
		t.Fatal("swtpm has no ek certificate")
	}
	return tp, ek
}

// activate has tp answer ch and returns what act makes of the answer, and
// the answer.
func activate(t *testing.T, tp *TPM, act *tpmcred.Activation, ch *tpmcred.Challenge) (*tpmcred.Certified, []byte) {
	t.Helper()
	resp, err := tp.ActivateCredential(context.Background(), ch.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	got, err := act.Check(resp)
	if err != nil {
		t.Fatal(err)
	}
	return got, resp
}

func TestActivateCredential(t *testing.T) {
	tp, ekCert := activationTPM(t)
	act, ch, err := tpmcred.NewActivation(rand.Reader, ekCert, tp.AKPublic())
	if err != nil {
		t.Fatal(err)
	}
	got, resp := activate(t, tp, act, ch)
	akName := mustName(t, tp.AKPublic())
	if !bytes.Equal(got.AKName, akName) || !bytes.Equal(got.EKCert, ekCert) {
		t.Fatal("certified ak or ek differ")
	}
	if _, err := act.Check(resp); !errors.Is(err, tpmcred.ErrUsed) {
		t.Fatalf("second check: %v", err)
	}

	// The record verifies offline to the swtpm_localca root, through its
	// intermediate, and to no other root.
	root, inter := swtpmCA(t, swtpm(t))
	now := time.Now()
	rec, err := tpmcred.NewCertification(got, [][]byte{inter}, now, "enclave/tpm test")
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := tpmcred.ParseCertification(rec.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(root)
	c, err := tpmcred.VerifyCertification(parsed, tpmcred.VerifyOpts{Roots: roots, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.AKName, akName) || !c.Root.Equal(root) || !bytes.Equal(c.EKName, ch.EKName) {
		t.Fatalf("certified %x root %s", c.AKName, c.Root.Subject)
	}
	if c.TPM == nil || c.TPM.Manufacturer != "id:00001014" || c.TPM.Model != "swtpm" {
		t.Fatalf("tpm identity %+v", c.TPM)
	}
	// End to end: a quote by this AK verifies without any pinned AK Name,
	// trusted through the record and the swtpm_localca root.
	rd := testReportData(t, "activated")
	ev := quote(t, tp, rd)
	res, err := platform.Verify(ev, rd, platform.Options{
		Now: time.Now, AllowSimulated: true,
		TPMAKCertifications: []*tpmcred.Certification{parsed}, TPMEKRoots: roots,
		RequireTPMEKCertifiedAK: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.TPM.AKProvenance != "ek-certified" || !strings.HasPrefix(res.RootID, "sim-tpm-ek:") {
		t.Fatalf("provenance %s root id %s", res.TPM.AKProvenance, res.RootID)
	}

	other := x509.NewCertPool()
	other.AddCert(selfSignedRoot(t))
	if _, err := platform.Verify(ev, rd, platform.Options{
		Now: time.Now, AllowSimulated: true,
		TPMAKCertifications: []*tpmcred.Certification{parsed}, TPMEKRoots: other,
	}); !errors.Is(err, tpmcred.ErrEKChain) || !errors.Is(err, platform.ErrUntrustedRoot) {
		t.Fatalf("other root through platform: %v", err)
	}
	if _, err := tpmcred.VerifyCertification(parsed, tpmcred.VerifyOpts{Roots: other, Now: now}); !errors.Is(err, tpmcred.ErrEKChain) {
		t.Fatalf("other root: %v", err)
	}
	noInter := *parsed
	noInter.EKIntermediates = nil
	if _, err := tpmcred.VerifyCertification(&noInter, tpmcred.VerifyOpts{Roots: roots, Now: now}); !errors.Is(err, tpmcred.ErrEKChain) {
		t.Fatalf("no intermediate: %v", err)
	}
	if _, err := tpmcred.VerifyCertification(parsed, tpmcred.VerifyOpts{Roots: roots, Now: c.EKCert.NotAfter.Add(time.Hour)}); !errors.Is(err, tpmcred.ErrEKChain) {
		t.Fatalf("expired: %v", err)
	}
}

// TestActivateCredentialECC activates through the ECC P-256 default EK,
// pinned by its public area (swtpm certifies only an ECC P-384 EK).
func TestActivateCredentialECC(t *testing.T) {
	ctx := context.Background()
	tp, _ := activationTPM(t)
	b, err := tp.ekPublic(ctx, tpm2.TPMAlgECC)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := tpm2.Unmarshal[tpm2.TPMTPublic](b)
	if err != nil {
		t.Fatal(err)
	}
	act, ch, err := tpmcred.NewActivationForEK(rand.Reader, ek, tp.AKPublic())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := activate(t, tp, act, ch)
	if got.EKCert != nil {
		t.Fatal("pinned ek activation has an ek certificate")
	}
	if _, err := tpmcred.NewCertification(got, nil, time.Now(), "x"); !errors.Is(err, tpmcred.ErrOptions) {
		t.Fatalf("record without ek certificate: %v", err)
	}
}

func TestActivateCredentialRefused(t *testing.T) {
	ctx := context.Background()
	tp, ekCert := activationTPM(t)
	realAK := tp.AKPublic()
	otherAK := softwareAK(t)
	otherAKName := mustName(t, otherAK)

	// A fresh challenge for the real AK each time, then altered.
	fresh := func() (*tpmcred.Activation, *tpmcred.Challenge) {
		a, c, err := tpmcred.NewActivation(rand.Reader, ekCert, realAK)
		if err != nil {
			t.Fatal(err)
		}
		return a, c
	}

	// A credential for a different AK Name: the attester refuses it before
	// the TPM, and, relabelled with the real AK's Name, the TPM refuses it.
	_, ch, err := tpmcred.NewActivation(rand.Reader, ekCert, otherAK)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ch.AKName, otherAKName) {
		t.Fatal("challenge ak name")
	}
	if _, err := tp.ActivateCredential(ctx, ch.Marshal()); !errors.Is(err, ErrChallengeAK) {
		t.Fatalf("other ak: %v", err)
	}
	_, real := fresh()
	ch.AKName = real.AKName
	if _, err := tp.ActivateCredential(ctx, ch.Marshal()); !errors.Is(err, ErrActivation) {
		t.Fatalf("other ak relabelled: %v", err)
	}

	// Tampered credential blob and encrypted secret.
	for _, field := range []string{"blob-first", "blob-last", "secret"} {
		act, c := fresh()
		switch field {
		case "blob-first":
			c.CredentialBlob[3] ^= 1
		case "blob-last":
			c.CredentialBlob[len(c.CredentialBlob)-1] ^= 1
		case "secret":
			c.EncryptedSecret[len(c.EncryptedSecret)/2] ^= 1
		}
		resp, err := tp.ActivateCredential(ctx, c.Marshal())
		if !errors.Is(err, ErrActivation) {
			t.Fatalf("%s: %v", field, err)
		}
		if _, err := act.Check(resp); !errors.Is(err, tpmcred.ErrActivation) {
			t.Fatalf("%s: check: %v", field, err)
		}
	}

	// A credential encrypted to a different EK (another RSA 2048 key): the
	// attester finds no EK of that Name, and relabelled the TPM refuses it.
	_, ch, err = tpmcred.NewActivationForEK(rand.Reader, swtpmtest.ForeignEK(t), realAK)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.ActivateCredential(ctx, ch.Marshal()); !errors.Is(err, ErrChallengeEK) {
		t.Fatalf("other ek: %v", err)
	}
	ch.EKName = real.EKName
	if _, err := tp.ActivateCredential(ctx, ch.Marshal()); !errors.Is(err, ErrActivation) {
		t.Fatalf("other ek relabelled: %v", err)
	}

	// A wrong response fails the verifier's check.
	act, c := fresh()
	resp, err := tp.ActivateCredential(ctx, c.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	resp[0] ^= 1
	if _, err := act.Check(resp); !errors.Is(err, tpmcred.ErrActivation) {
		t.Fatalf("wrong response: %v", err)
	}

	// A malformed challenge never reaches the TPM.
	if _, err := tp.ActivateCredential(ctx, append(c.Marshal(), 0)); !errors.Is(err, tpmcred.ErrMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
}

func mustName(t *testing.T, pub []byte) []byte {
	t.Helper()
	p, err := tpmquote.ParsePublic(pub)
	if err != nil {
		t.Fatal(err)
	}
	return p.Name()
}

func selfSignedRoot(t *testing.T) *x509.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "swtpm-localca-rootca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	return testcert.Create(t, tmpl, tmpl, &k.PublicKey, k)
}

// TestActivateCredentialOtherTPM uses a second swtpm, manufactured with its
// own local CA: a credential made to its certified EK is refused by the
// first TPM, and each EK certificate chains only to its own CA's root.
func TestActivateCredentialOtherTPM(t *testing.T) {
	ctx := context.Background()
	tp, ekCert := activationTPM(t)
	other, err := swtpmtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Stop)
	tpB, err := Open(ctx, Options{Address: other.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer tpB.Close()
	ekB := tpB.EKCertificate()
	if ekB == nil || bytes.Equal(ekB, ekCert) {
		t.Fatal("second swtpm has no distinct ek certificate")
	}

	// B's EK, A's AK: A has no such EK, and relabelled A's TPM refuses.
	_, ch, err := tpmcred.NewActivation(rand.Reader, ekB, tp.AKPublic())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tp.ActivateCredential(ctx, ch.Marshal()); !errors.Is(err, ErrChallengeEK) {
		t.Fatalf("other tpm's ek: %v", err)
	}
	_, mine, err := tpmcred.NewActivation(rand.Reader, ekCert, tp.AKPublic())
	if err != nil {
		t.Fatal(err)
	}
	ch.EKName = mine.EKName
	if _, err := tp.ActivateCredential(ctx, ch.Marshal()); !errors.Is(err, ErrActivation) {
		t.Fatalf("other tpm's ek relabelled: %v", err)
	}
	// A's AK on B: B has another AK.
	_, ch, err = tpmcred.NewActivation(rand.Reader, ekB, tp.AKPublic())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpB.ActivateCredential(ctx, ch.Marshal()); !errors.Is(err, ErrChallengeAK) {
		t.Fatalf("other tpm, this ak: %v", err)
	}

	rootA, interA := swtpmCA(t, swtpm(t))
	rootB, interB := swtpmCA(t, other)
	now := time.Now()
	for _, tc := range []struct {
		name  string
		ek    []byte
		inter []byte
		root  *x509.Certificate
		ok    bool
	}{
		{"a to a", ekCert, interA, rootA, true},
		{"b to b", ekB, interB, rootB, true},
		{"a to b", ekCert, interA, rootB, false},
		{"b to a", ekB, interB, rootA, false},
		{"a via b's intermediate to b", ekCert, interB, rootB, false},
	} {
		ekc, err := x509.ParseCertificate(tc.ek)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(tc.root)
		_, err = tpmcred.VerifyEKChain(ekc, [][]byte{tc.inter}, pool, now)
		if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, tpmcred.ErrEKChain)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
