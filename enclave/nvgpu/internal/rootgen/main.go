// Command rootgen writes the TEST ONLY root certificate of the simulated
// NVIDIA GPU (wire/simroots/nvidia_gpu_root.pem) and prints its SHA-256 for
// wire/simroots. Its key is simkeys.Key("root-ca"). Run it from the module
// root: go run ./enclave/nvgpu/internal/rootgen
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"

	"github.com/clawea/attester/enclave/nvgpu/internal/simkeys"
)

const out = "wire/simroots/nvidia_gpu_root.pem"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rootgen:", err)
		os.Exit(1)
	}
}

func run() error {
	key, err := simkeys.Key("root-ca")
	if err != nil {
		return err
	}
	tmpl := simkeys.Template(1, "TEST ONLY clawea simulated NVIDIA Device Identity CA")
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	tmpl.BasicConstraintsValid = true
	tmpl.IsCA = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	sum := sha256.Sum256(der)
	fmt.Printf("wrote %s; put its SHA-256 in wire/simroots (nvidiaGPURootSHA256):\n%s\n", out, hex.EncodeToString(sum[:]))
	return nil
}
