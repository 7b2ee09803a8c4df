package sim

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-sev-guest/testing/data"

	"github.com/clawea/attester/wire/simroots"
)

var update = flag.Bool("update", false, "regenerate wire/simroots/sevsnp_cert_chain.pem (changes the pinned simulated roots)")

// TestSimRootsMatchHierarchy checks that the pinned simulated roots in
// wire/simroots are this simulator's: the ARK and ASK certify the keys the
// simulator signs with, under the templates it uses, the ARK self-signed
// and the ASK signed by it.
//
// With -update it first rewrites wire/simroots/sevsnp_cert_chain.pem from
// fresh signatures (RSA-PSS is randomized); then update the digests in
// simroots.go and docs/spec/platform-sevsnp.md. Regenerating changes the
// pinned roots: do it only on purpose:
//
//	go test ./enclave/sim -run TestSimRootsMatchHierarchy -update
func TestSimRootsMatchHierarchy(t *testing.T) {
	if *update {
		arkDER, askDER, err := generateRoots()
		if err != nil {
			t.Fatal(err)
		}
		out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: askDER})
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: arkDER})...)
		path := filepath.Join("..", "..", "wire", "simroots", "sevsnp_cert_chain.pem")
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: update the digests in wire/simroots/simroots.go", path)
		return
	}
	roots := simroots.SEVSNPRoots()
	if len(roots) != 1 {
		t.Fatalf("%d simulated root sets, want 1", len(roots))
	}
	ark, ask := roots[0].ARK, roots[0].ASK
	arkT, askT := rootTemplates()
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
