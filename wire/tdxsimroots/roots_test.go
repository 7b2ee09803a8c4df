package tdxsimroots

import (
	"slices"
	"testing"
)

func TestRoot(t *testing.T) {
	c, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject.CommonName != "Intel SGX Root CA" || !slices.Contains(c.Subject.OrganizationalUnit, Marker) {
		t.Fatalf("subject %q", c.Subject)
	}
	if !c.IsCA || c.CheckSignatureFrom(c) != nil {
		t.Fatal("not a self-signed CA")
	}
	if !IsRoot(c.Raw) || IsRoot(c.Raw[1:]) {
		t.Fatal("IsRoot")
	}
}
