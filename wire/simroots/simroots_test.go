package simroots_test

import (
	"bytes"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"testing"

	"github.com/clawea/attester/wire/simroots"
	"github.com/google/go-sev-guest/testing/data"
	"github.com/google/go-sev-guest/verify/trust"
)

func TestSEVSNPRootsPinned(t *testing.T) {
	roots := simroots.SEVSNPRoots()
	if len(roots) != 1 {
		t.Fatalf("got %d roots", len(roots))
	}
	r := roots[0]
	if r.ProductLine != simroots.SEVSNPProductLine {
		t.Fatal(r.ProductLine)
	}
	for name, c := range map[string]struct {
		cert *x509.Certificate
		want string
		cn   string
	}{
		"ark": {r.ARK, simroots.SEVSNPARKSHA256ForTest, "ARK-Milan"},
		"ask": {r.ASK, simroots.SEVSNPASKSHA256ForTest, "SEV-Milan"},
	} {
		sum := sha256.Sum256(c.cert.Raw)
		if got := hex.EncodeToString(sum[:]); got != c.want {
			t.Errorf("%s digest %s, want %s", name, got, c.want)
		}
		if c.cert.Subject.CommonName != c.cn {
			t.Errorf("%s CN %q", name, c.cert.Subject.CommonName)
		}
		found := false
		for _, n := range c.cert.Subject.Names {
			if v, ok := n.Value.(string); ok && v == simroots.TestOnlyMarker {
				found = true
			}
		}
		if !found {
			t.Errorf("%s subject lacks the TEST ONLY marker", name)
		}
		if !c.cert.IsCA {
			t.Errorf("%s is not a CA", name)
		}
	}
	if err := r.ARK.CheckSignatureFrom(r.ARK); err != nil {
		t.Errorf("ark not self-signed: %v", err)
	}
	if err := r.ASK.CheckSignatureFrom(r.ARK); err != nil {
		t.Errorf("ask not signed by ark: %v", err)
	}
	// The keys are go-sev-guest's published test keys.
	if !data.ARKPrivateKey.PublicKey.Equal(r.ARK.PublicKey) || !data.ASKPrivateKey.PublicKey.Equal(r.ASK.PublicKey) {
		t.Error("roots do not carry go-sev-guest's test keys")
	}
}

func TestSEVSNPRootsAreFreshCopies(t *testing.T) {
	a := simroots.SEVSNPRoots()[0]
	a.ARK.Raw[0] ^= 0xff
	b := simroots.SEVSNPRoots()[0]
	sum := sha256.Sum256(b.ARK.Raw)
	if hex.EncodeToString(sum[:]) != simroots.SEVSNPARKSHA256ForTest {
		t.Fatal("mutating a returned root changed later results")
	}
	p := simroots.SEVSNPCertChainPEM()
	p[0] ^= 0xff
	if bytes.Equal(p, simroots.SEVSNPCertChainPEM()) {
		t.Fatal("SEVSNPCertChainPEM returned shared memory")
	}
}

func TestSEVSNPRootsAreNotAMDs(t *testing.T) {
	r := simroots.SEVSNPRoots()[0]
	for line, amd := range trust.DefaultRootCerts {
		if amd.ProductCerts == nil {
			continue
		}
		pub, ok := amd.ProductCerts.Ark.PublicKey.(*rsa.PublicKey)
		if !ok || pub.Equal(r.ARK.PublicKey) || amd.ProductCerts.Ark.Equal(r.ARK) {
			t.Errorf("simulated ARK key equals AMD's %s ARK", line)
		}
	}
}

func TestKDSFormat(t *testing.T) {
	var pc trust.ProductCerts
	if err := pc.FromKDSCertBytes(simroots.SEVSNPCertChainPEM()); err != nil {
		t.Fatal(err)
	}
	r := simroots.SEVSNPRoots()[0]
	if !pc.Ark.Equal(r.ARK) || !pc.Ask.Equal(r.ASK) {
		t.Fatal("pem chain and SEVSNPRoots disagree")
	}
}
