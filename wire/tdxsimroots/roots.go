// Package tdxsimroots holds the pinned TEST ONLY root of the simulated Intel
// TDX PCK hierarchy (package fakeqe). It has no device imports and no keys:
// verifiers import it to recognise, and by default refuse, simulated TDX
// evidence, and tests import it to build a trusted-root pool for
// go-tdx-guest's verifier.
//
// The root's key is derived from a fixed public seed (fakeqe.SeedKey
// ("pinned", "root-ca")), so anyone can forge quotes under it: it MUST NOT be
// trusted outside tests and explicitly allowed simulation.
package tdxsimroots

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// Marker appears in the Organization and OrganizationalUnit of every
// certificate of the simulated hierarchy.
const Marker = "TEST ONLY"

// RootSHA256 is the hex SHA-256 of the root's DER: the pin.
const RootSHA256 = "2dd8d94b391f607c2e077961e146bab578b6371eee7f55d4b2c7c8c21b72ac24"

// rootPEM is the self-signed root CA certificate of the simulated hierarchy.
// Its subject CN is "Intel SGX Root CA" because go-tdx-guest's verifier
// requires that name; its Organization says "TEST ONLY ... not Intel".
const rootPEM = `-----BEGIN CERTIFICATE-----
MIICDDCCAbOgAwIBAgIQKWVIBNoeBUtzkVdU4cJzlzAKBggqhkjOPQQDAjBkMTIw
MAYDVQQKEylURVNUIE9OTFkgY2xhd2VhIHNpbXVsYXRlZCBURFgsIG5vdCBJbnRl
bDESMBAGA1UECxMJVEVTVCBPTkxZMRowGAYDVQQDExFJbnRlbCBTR1ggUm9vdCBD
QTAgFw0yNTAxMDEwMDAwMDBaGA8yMDc1MDEwMTAwMDAwMFowZDEyMDAGA1UEChMp
VEVTVCBPTkxZIGNsYXdlYSBzaW11bGF0ZWQgVERYLCBub3QgSW50ZWwxEjAQBgNV
BAsTCVRFU1QgT05MWTEaMBgGA1UEAxMRSW50ZWwgU0dYIFJvb3QgQ0EwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAAQo6ctl2L5foSwceklMRBm9SDTHN7wTP94QCY4G
i+TZkXCLRI4tnNuxbPtHSgbLQbH1OhAUHadR31d1njYjP5Uto0UwQzAOBgNVHQ8B
Af8EBAMCAQYwEgYDVR0TAQH/BAgwBgEB/wIBATAdBgNVHQ4EFgQUEUuM/RHQb7xO
+wbcL08uhEg80R8wCgYIKoZIzj0EAwIDRwAwRAIgE+enUYVgFIWYPiA30zsIa21u
KbUZ6XMqZWTeHRW9L5ECICaePBSFUbMYEKQ+QRYcwAAUUcEmfAPaFP4473n5KE0u
-----END CERTIFICATE-----
`

// errRoot is returned if the embedded root does not parse or does not match
// its pin; it means the package was edited inconsistently.
var errRoot = errors.New("tdxsimroots: embedded root is invalid")

// Root parses and returns a fresh copy of the pinned root certificate.
func Root() (*x509.Certificate, error) {
	blk, rest := pem.Decode([]byte(rootPEM))
	if blk == nil || blk.Type != "CERTIFICATE" || len(rest) != 0 {
		return nil, fmt.Errorf("%w: not one pem certificate", errRoot)
	}
	sum := sha256.Sum256(blk.Bytes)
	if hex.EncodeToString(sum[:]) != RootSHA256 {
		return nil, fmt.Errorf("%w: fingerprint does not match RootSHA256", errRoot)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRoot, err)
	}
	return c, nil
}

// CertPool returns a new pool holding only the pinned root, for
// go-tdx-guest's verify.Options.TrustedRoots.
func CertPool() (*x509.CertPool, error) {
	c, err := Root()
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	p.AddCert(c)
	return p, nil
}

// IsRoot reports whether der is the pinned simulation root.
func IsRoot(der []byte) bool {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:]) == RootSHA256
}
