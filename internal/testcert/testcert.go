// Package testcert makes the X.509 certificates tests sign and the TPM
// keys they certify. Only tests import it (internal/layers enforces that).
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"testing"

	"github.com/clawea/attester/wire/tpmquote"
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

// SoftwareAK returns tmpl (an ECC TPMT_PUBLIC) encoded with the point of a
// fresh P-256 key: an attestation key no TPM holds.
func SoftwareAK(tb testing.TB, tmpl tpmquote.Public) []byte {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	pt, err := k.PublicKey.Bytes()
	if err != nil {
		tb.Fatal(err)
	}
	tmpl.X, tmpl.Y = pt[1:33], pt[33:]
	return tmpl.Marshal()
}
