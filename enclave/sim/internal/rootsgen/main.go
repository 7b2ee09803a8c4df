// Command rootsgen signs fresh simulated AMD ARK and ASK certificates from
// internal/amdtemplate with go-sev-guest's test keys and writes them, ASK
// then ARK, to wire/simroots/sevsnp_cert_chain.pem. It prints the new
// digests: put them in wire/simroots/simroots.go and
// docs/spec/platform-sevsnp.md.
//
// RSA-PSS signatures are randomized, so every run writes other bytes and
// changes the pinned simulated roots. It therefore has no go:generate
// directive (go generate ./... must not replace pinned roots); run it only
// on purpose, from enclave/sim:
//
//	go run ./internal/rootsgen
package main

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"os"

	"github.com/google/go-sev-guest/testing/data"

	"github.com/clawea/attester/enclave/sim/internal/amdtemplate"
)

func main() {
	out := flag.String("out", "../../wire/simroots/sevsnp_cert_chain.pem", "output file")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "rootsgen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	arkT, askT := amdtemplate.Roots()
	arkDER, err := x509.CreateCertificate(rand.Reader, arkT, arkT, data.ARKPrivateKey.Public(), data.ARKPrivateKey)
	if err != nil {
		return err
	}
	ark, err := x509.ParseCertificate(arkDER)
	if err != nil {
		return err
	}
	askDER, err := x509.CreateCertificate(rand.Reader, askT, ark, data.ASKPrivateKey.Public(), data.ARKPrivateKey)
	if err != nil {
		return err
	}
	pemOut := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: askDER})
	pemOut = append(pemOut, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: arkDER})...)
	if err := os.WriteFile(out, pemOut, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s; update the digests in wire/simroots/simroots.go and docs/spec/platform-sevsnp.md:\n", out)
	fmt.Printf("SEVSNPARKSHA256 = %x\nSEVSNPASKSHA256 = %x\n", sha256.Sum256(arkDER), sha256.Sum256(askDER))
	return nil
}
