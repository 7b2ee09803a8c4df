// Package simroots holds the trust roots of the simulated platforms
// (enclave/sim). It is tiny and has no device imports so that a verifier can
// pin these roots when, and only when, it is told to accept simulated
// evidence. A production verifier never loads them.
//
// The SEV-SNP roots are an ARK and an ASK for the product line
// SEVSNPProductLine whose subjects carry the AMD attributes go-sev-guest
// checks plus a description attribute (OID 2.5.4.13) equal to TestOnlyMarker.
// Their keys are go-sev-guest's published test keys (testing/data), so
// anyone can sign with them: trusting them proves nothing about hardware.
package simroots

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/hex"
	"encoding/pem"
)

const (
	// SEVSNPProductLine is the AMD product line the simulator claims.
	SEVSNPProductLine = "Milan"
	// TestOnlyMarker is the description attribute of every simulated
	// SEV-SNP certificate subject.
	TestOnlyMarker = "TEST ONLY: clawea simulated AMD SEV-SNP key, never trust in production"
	// sevsnpARKSHA256 is the hex SHA-256 of the simulated ARK certificate
	// (DER). Documented in docs/spec/platform-sevsnp.md.
	sevsnpARKSHA256 = "b6a6100c92fccad67733f78f38840d9e02b0ed6442eabda524409c5fe5b625c4"
	// sevsnpASKSHA256 is the hex SHA-256 of the simulated ASK certificate
	// (DER).
	sevsnpASKSHA256 = "c54fcb0a260becc56bb395088f135fd2886b5246722462aab186808905a27311"
)

// sevsnpChainPEM is the ASK then the ARK, PEM, in the layout of AMD KDS's
// cert_chain endpoint.
//
//go:embed sevsnp_cert_chain.pem
var sevsnpChainPEM []byte

// sevSNPRoot is one pinnable simulated AMD root: an ARK and the ASK it
// certifies, for one product line.
type sevSNPRoot struct {
	ProductLine string
	ARK         *x509.Certificate
	ASK         *x509.Certificate
}

// SEVSNPRoots returns freshly parsed simulated SEV-SNP roots. It returns nil
// (so a verifier trusts nothing) if the embedded certificates do not parse or
// do not match their pinned digests, which tests rule out.
func SEVSNPRoots() []sevSNPRoot {
	ask, ark, ok := parseChain(sevsnpChainPEM)
	if !ok {
		return nil
	}
	return []sevSNPRoot{{ProductLine: SEVSNPProductLine, ARK: ark, ASK: ask}}
}

// SEVSNPCertChainPEM returns a copy of the simulated ASK and ARK as PEM (ASK
// first), the format go-sev-guest's trust.ProductCerts.FromKDSCertBytes
// reads.
func SEVSNPCertChainPEM() []byte { return bytes.Clone(sevsnpChainPEM) }

func parseChain(b []byte) (ask, ark *x509.Certificate, ok bool) {
	askBlock, rest := pem.Decode(b)
	if askBlock == nil {
		return nil, nil, false
	}
	arkBlock, rest := pem.Decode(rest)
	if arkBlock == nil || len(bytes.TrimSpace(rest)) != 0 {
		return nil, nil, false
	}
	if !digestIs(askBlock.Bytes, sevsnpASKSHA256) || !digestIs(arkBlock.Bytes, sevsnpARKSHA256) {
		return nil, nil, false
	}
	ask, err := x509.ParseCertificate(askBlock.Bytes)
	if err != nil {
		return nil, nil, false
	}
	ark, err = x509.ParseCertificate(arkBlock.Bytes)
	if err != nil {
		return nil, nil, false
	}
	return ask, ark, true
}

func digestIs(der []byte, want string) bool {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:]) == want
}
