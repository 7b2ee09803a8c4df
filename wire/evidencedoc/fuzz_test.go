package evidencedoc_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/clawea/attester/wire/evidencedoc"
)

// FuzzParse: Parse never panics, returns nothing with an error, and
// whatever it accepts is canonical: the document re-signs (Ed25519 is
// deterministic) to exactly the input bytes. Whatever it accepts, go-jose
// (the JWS library Sign uses) verifies too, to the same payload: Parse
// checks the signature over the signing input directly. The committed seeds in
// testdata/fuzz/FuzzParse are documents signed with fuzzKey plus malformed
// variants.
func FuzzParse(f *testing.F) {
	f.Add(sign(f, execDoc(f)).JWS)
	sensitive := execDoc(f)
	sensitive.Execution.Clawea.AdmissionPolicyHashB64u, sensitive.Execution.Clawea.Sensitive = hash("admission policy"), evidencedoc.SensitiveTrue
	f.Add(sign(f, sensitive).JWS)
	f.Add(sign(f, keyDoc(f, []byte("challenge"))).JWS)
	f.Add([]byte("e30.e30."))
	f.Fuzz(func(t *testing.T, jws []byte) {
		d, err := evidencedoc.Parse(jws, pub())
		if err != nil {
			if d != nil {
				t.Fatal("document returned with an error")
			}
			return
		}
		if !bytes.Equal(d.JWS, jws) {
			t.Fatal("Document.JWS differs from the input")
		}
		if err := joseAgrees(jws); err != nil {
			t.Fatalf("accepted document: %v", err)
		}
		again, err := evidencedoc.Sign(fuzzKey, d)
		if err != nil {
			t.Fatalf("accepted document does not re-sign: %v", err)
		}
		if !bytes.Equal(again.JWS, jws) {
			t.Fatalf("accepted document is not canonical:\n%s\n%s", jws, again.JWS)
		}
		if _, err := d.ReportData(); err != nil {
			t.Fatalf("ReportData: %v", err)
		}
	})
}

// joseAgrees reports an error unless go-jose parses jws as a compact EdDSA
// JWS whose signature verifies under pub() and whose payload is the one
// Parse read.
func joseAgrees(jws []byte) error {
	obj, err := jose.ParseSignedCompact(string(jws), []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return fmt.Errorf("go-jose refuses the serialization: %w", err)
	}
	payload, err := obj.Verify(pub())
	if err != nil {
		return fmt.Errorf("go-jose refuses the signature: %w", err)
	}
	if _, want := segments(jws); !bytes.Equal(payload, want) {
		return errors.New("go-jose read another payload")
	}
	return nil
}
