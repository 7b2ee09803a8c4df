package fakeqe_test

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/wire/tdxsimroots"
)

// verifyChain verifies a fake QE's PCK chain (leaf first) against pool.
func verifyChain(t *testing.T, pool *x509.CertPool, h *fakeqe.Hierarchy) error {
	t.Helper()
	var certs []*x509.Certificate
	for _, der := range h.ChainDER() {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1 : len(certs)-1] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{
		Roots: pool, Intermediates: inter,
		CurrentTime: certs[0].NotBefore.Add(time.Hour),
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	})
	return err
}

// TestCertPoolVerifiesOnlyTheSimulatedRoot: the pool holds exactly the
// embedded root, so the fake QE's pinned hierarchy chains to it and a
// hierarchy under another root does not.
func TestCertPoolVerifiesOnlyTheSimulatedRoot(t *testing.T) {
	pool, err := tdxsimroots.CertPool()
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := fakeqe.PinnedHierarchy()
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyChain(t, pool, pinned); err != nil {
		t.Fatalf("pinned hierarchy does not chain to the embedded root: %v", err)
	}
	other, err := fakeqe.NewHierarchy("another root")
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyChain(t, pool, other); err == nil {
		t.Fatal("a chain from another root verified against the simulated pool")
	}
	// An empty pool verifies nothing: the pass above is the embedded root.
	if err := verifyChain(t, x509.NewCertPool(), pinned); err == nil {
		t.Fatal("the pinned chain verified against an empty pool")
	}
}
