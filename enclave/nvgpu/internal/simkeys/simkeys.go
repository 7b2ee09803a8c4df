// Package simkeys derives the TEST ONLY keys of the simulated NVIDIA GPU
// (package nvgpu's fake device) from fixed, public seeds. Nothing here is
// secret: anyone can sign as the simulated GPU, so its root
// (wire/simroots.NVIDIAGPURoot) is trusted only when simulation is allowed.
package simkeys

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha512"
	"fmt"
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
