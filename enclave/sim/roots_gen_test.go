package sim

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/asn1"
	"testing"

	"github.com/google/go-sev-guest/testing/data"

	"github.com/clawea/attester/enclave/sim/internal/amdtemplate"
	"github.com/clawea/attester/wire/simroots"
)

// TestSimRootsMatchHierarchy checks that the pinned simulated roots in
// wire/simroots are this simulator's: the ARK and ASK certify the keys the
// simulator signs with, under the templates it uses (internal/amdtemplate),
// the ARK self-signed and the ASK signed by it. internal/rootsgen signs new
// ones (it changes the pinned roots: run it only on purpose).
func TestSimRootsMatchHierarchy(t *testing.T) {
	roots := simroots.SEVSNPRoots()
	if len(roots) != 1 {
		t.Fatalf("%d simulated root sets, want 1", len(roots))
	}
	ark, ask := roots[0].ARK, roots[0].ASK
	arkT, askT := amdtemplate.Roots()
	for _, c := range []struct {
		name      string
		cert, tpl *x509.Certificate
		pub       any
	}{
		{"ARK", ark, arkT, data.ARKPrivateKey.Public()},
		{"ASK", ask, askT, data.ASKPrivateKey.Public()},
	} {
		if !bytes.Equal(c.cert.RawSubject, mustMarshal(t, c.tpl.Subject.ToRDNSequence())) || c.cert.SerialNumber.Cmp(c.tpl.SerialNumber) != 0 || !c.cert.IsCA {
			t.Errorf("%s: subject %v serial %v CA %v differ from the simulator's template", c.name, c.cert.Subject, c.cert.SerialNumber, c.cert.IsCA)
		}
		if k, ok := c.cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(c.pub) {
			t.Errorf("%s does not certify the simulator's %s key", c.name, c.name)
		}
	}
	if err := ark.CheckSignatureFrom(ark); err != nil {
		t.Errorf("ARK is not self-signed: %v", err)
	}
	if err := ask.CheckSignatureFrom(ark); err != nil {
		t.Errorf("ASK is not signed by the ARK: %v", err)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := asn1.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
