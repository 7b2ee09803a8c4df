package simroots

import (
	"bytes"
	"crypto/x509"
	_ "embed"
	"encoding/pem"
	"errors"
)

// nvidiaGPURootSHA256 is the hex SHA-256 of the simulated NVIDIA Device
// Identity CA (DER), documented in docs/spec/verify-platform.md. Its key is
// derived from a public seed (enclave/nvgpu/internal/simkeys): anyone can
// sign under it.
const nvidiaGPURootSHA256 = "7861c394770c92fdc6b17aedfd126ae9ff838959f5dc3a23d846d9747a77ed9f"

// nvidiaGPURootPEM is written by enclave/nvgpu/internal/rootgen.
//
//go:embed nvidia_gpu_root.pem
var nvidiaGPURootPEM []byte

// NVIDIAGPURoot returns a freshly parsed copy of the simulated NVIDIA GPU
// root, the only root simulated GPU evidence verifies to. It fails if the
// embedded certificate does not match its pinned digest.
func NVIDIAGPURoot() (*x509.Certificate, error) {
	blk, rest := pem.Decode(nvidiaGPURootPEM)
	if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 || !digestIs(blk.Bytes, nvidiaGPURootSHA256) {
		return nil, errors.New("simroots: embedded nvidia gpu root is invalid")
	}
	return x509.ParseCertificate(blk.Bytes)
}
