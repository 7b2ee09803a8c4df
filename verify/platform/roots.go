package platform

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	_ "embed"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/clawea/attester/wire/simroots"
	"github.com/clawea/attester/wire/tdxsimroots"
	"github.com/google/go-sev-guest/verify/trust"
)

// intelSGXRootCASHA256 pins the Intel SGX Root CA certificate (DER) this
// package trusts for real TDX evidence. It is the certificate go-tdx-guest
// embeds (verify/trusted_root.pem); a test checks they are the same.
const intelSGXRootCASHA256 = "44a0196b2b99f889b8e149e95b807a350e7424964399e885a7cbb8ccfab674d3"

//go:embed intel_sgx_root_ca.pem
var intelRootPEM []byte

// Root identifiers reported in Result.RootID.
const (
	rootIDIntel    = "intel-sgx-root"
	rootIDSimIntel = "sim-intel-sgx-root"
	rootIDAMD      = "amd-ark-" // + lowercase product line
	rootIDSimAMD   = "sim-amd-ark-"
	rootIDTPM      = "tpm-ak:"
	rootIDSimTPM   = "sim-tpm-ak:"
	rootIDTPMAny   = "tpm-ak-unpinned:"
	rootIDSimTPMAn = "sim-tpm-ak-unpinned:"
)

// amdRoot is one pinned AMD product hierarchy: the ARK and the ASK (for
// VCEKs) and ASVK (for VLEKs) it certifies.
type amdRoot struct {
	productLine string
	rootID      string
	certs       *trust.ProductCerts
}

// newAMDRootCerts returns a fresh go-sev-guest root value over the shared,
// never-modified certificates (go-sev-guest may write to the CRL field of the
// value it is given; it never sees ours).
func (r *amdRoot) rootCerts() *trust.AMDRootCerts {
	return &trust.AMDRootCerts{ProductLine: r.productLine, ProductCerts: r.certs}
}

type rootSet struct {
	amd       map[string]*amdRoot // by product line
	amdSim    map[string]*amdRoot
	intel     *x509.Certificate
	intelPool *x509.CertPool
	simIntel  *x509.Certificate
	simPool   *x509.CertPool
}

// roots are parsed once from bytes compiled into the binary (go-sev-guest's
// AMD bundles, the pinned Intel root, the simulation roots) and never
// modified afterwards.
var roots = sync.OnceValues(loadRoots)

func loadRoots() (*rootSet, error) {
	rs := &rootSet{amd: map[string]*amdRoot{}, amdSim: map[string]*amdRoot{}}
	for _, b := range []struct {
		line       string
		vcek, vlek []byte
	}{
		{"Milan", trust.AskArkMilanVcekBytes, trust.AskArkMilanVlekBytes},
		{"Genoa", trust.AskArkGenoaVcekBytes, trust.AskArkGenoaVlekBytes},
		{"Turin", trust.AskArkTurinVcekBytes, trust.AskArkTurinVlekBytes},
	} {
		var vcek, vlek trust.ProductCerts
		if err := vcek.FromKDSCertBytes(bytes.TrimSpace(b.vcek)); err != nil || vcek.Ask == nil || vcek.Ark == nil {
			return nil, fmt.Errorf("amd %s vcek bundle: %v", b.line, err)
		}
		certs := &trust.ProductCerts{Ark: vcek.Ark, Ask: vcek.Ask}
		// A VLEK bundle that does not parse, or names another ARK, leaves
		// the product line without VLEK support (ErrCannotCheck), never
		// with a wrong anchor.
		if err := vlek.FromKDSCertBytes(bytes.TrimSpace(b.vlek)); err == nil && vlek.Asvk != nil && vlek.Ark != nil && vlek.Ark.Equal(vcek.Ark) {
			certs.Asvk = vlek.Asvk
		}
		rs.amd[b.line] = &amdRoot{
			productLine: b.line,
			rootID:      rootIDAMD + strings.ToLower(b.line),
			certs:       certs,
		}
	}
	for _, s := range simroots.SEVSNPRoots() {
		rs.amdSim[s.ProductLine] = &amdRoot{
			productLine: s.ProductLine,
			rootID:      rootIDSimAMD + strings.ToLower(s.ProductLine),
			certs:       &trust.ProductCerts{Ark: s.ARK, Ask: s.ASK},
		}
	}
	if len(rs.amdSim) == 0 {
		return nil, errors.New("simulated amd roots unavailable")
	}

	intel, err := pinnedRoot("intel", intelRootPEM, intelSGXRootCASHA256)
	if err != nil {
		return nil, err
	}
	rs.intel = intel
	rs.intelPool = x509.NewCertPool()
	rs.intelPool.AddCert(intel)

	sim, err := tdxsimroots.Root()
	if err != nil {
		return nil, err
	}
	rs.simIntel = sim
	rs.simPool = x509.NewCertPool()
	rs.simPool.AddCert(sim)
	return rs, nil
}

// rootsOrErr returns the root set or an ErrCannotCheck error.
func rootsOrErr() (*rootSet, error) {
	rs, err := roots()
	if err != nil {
		return nil, cannotCheck(checkRoot, fmt.Errorf("loading pinned roots: %w", err))
	}
	return rs, nil
}

// pinnedRoot parses the root certificate that pemBytes holds (onePEMCert)
// and checks that its SHA-256 fingerprint is the hex fingerprint. Errors
// start with name.
func pinnedRoot(name string, pemBytes []byte, fingerprint string) (*x509.Certificate, error) {
	der, ok := onePEMCert(pemBytes)
	if !ok {
		return nil, fmt.Errorf("%s root: not one pem certificate", name)
	}
	if sum := sha256.Sum256(der); hex.EncodeToString(sum[:]) != fingerprint {
		return nil, fmt.Errorf("%s root: fingerprint mismatch", name)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%s root: %v", name, err)
	}
	return c, nil
}

// onePEMCert returns the DER of the one PEM CERTIFICATE block b holds,
// with nothing but white space after it.
func onePEMCert(b []byte) ([]byte, bool) {
	blk, rest := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return nil, false
	}
	return blk.Bytes, true
}
