// Package testcert makes the X.509 certificates tests sign. Only tests
// import it (internal/layers enforces that).
package testcert

import (
	"crypto/rand"
	"crypto/x509"
	"testing"
)

// Create signs tmpl with signer as parent (x509.CreateCertificate, pub the
// subject's public key) and returns the parsed certificate; a failure
// fails tb.
func Create(tb testing.TB, tmpl, parent *x509.Certificate, pub, signer any) *x509.Certificate {
	tb.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
