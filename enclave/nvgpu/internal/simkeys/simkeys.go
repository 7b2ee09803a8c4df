// Package simkeys derives the TEST ONLY keys of the simulated NVIDIA GPU
// (package nvgpu's fake device) from fixed, public seeds. Nothing here is
// secret: anyone can sign as the simulated GPU, so its root
// (wire/simroots.NVIDIAGPURoot) is trusted only when simulation is allowed.
package simkeys

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"
)

// seedPrefix domain-separates every simulated GPU key.
const seedPrefix = "clawea.dev/attester/v1/nvidia-gpu-sim/TEST-ONLY/"

// Key derives the P-384 key named label: the scalar is SHA-384 of the
// prefixed label.
func Key(label string) (*ecdsa.PrivateKey, error) {
	d := sha512.Sum384([]byte(seedPrefix + label))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P384(), d[:])
	if err != nil {
		return nil, fmt.Errorf("simkeys: %q does not yield a p-384 key: %w", label, err)
	}
	return k, nil
}

// Template is the certificate template of every simulated GPU certificate
// (the root rootgen writes and the fake device's leaf): serial, a TEST ONLY
// subject named commonName and the hierarchy's one validity window. The
// caller sets the key usage and extensions.
func Template(serial int64, commonName string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject: pkix.Name{
			CommonName:         commonName,
			Organization:       []string{"TEST ONLY clawea simulated GPU, not NVIDIA"},
			OrganizationalUnit: []string{"TEST ONLY"},
		},
		NotBefore: time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:  time.Date(2075, time.January, 1, 0, 0, 0, 0, time.UTC),
	}
}
