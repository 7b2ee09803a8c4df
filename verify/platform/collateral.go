package platform

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/google/go-tdx-guest/pcs"
)

// MaxCollateralFile bounds every collateral item (file or in-memory).
const MaxCollateralFile = 1 << 20

// Collateral is revocation and TCB data the relying party obtained out of
// band (for example downloaded on a connected machine and carried over).
// Verify never fetches any of it. Every field is optional; which ones are
// needed depends on the evidence and on Options.
type Collateral struct {
	// SEVSNPCRLs are AMD KDS CRLs (DER), e.g. from
	// https://kdsintf.amd.com/vcek/v1/Milan/crl. A CRL is used for evidence
	// whose pinned ARK signed it.
	SEVSNPCRLs [][]byte

	// TDXTCBInfo is the Intel PCS TDX TCB info response body (JSON) for the
	// platform's FMSPC; TDXTCBInfoIssuerChain the PEM of its
	// TCB-Info-Issuer-Chain header (signing certificate, then root).
	TDXTCBInfo            []byte
	TDXTCBInfoIssuerChain []byte
	// TDXQEIdentity is the PCS TDX QE identity response body (JSON);
	// TDXQEIdentityIssuerChain the PEM of its SGX-Enclave-Identity-Issuer-Chain
	// header.
	TDXQEIdentity            []byte
	TDXQEIdentityIssuerChain []byte
	// TDXPCKCRL is the PCS PCK CRL (DER) of the PCK certificate's issuing CA;
	// TDXPCKCRLIssuerChain the PEM of its SGX-PCK-CRL-Issuer-Chain header;
	// TDXRootCRL the Intel SGX Root CA CRL (DER).
	TDXPCKCRL            []byte
	TDXPCKCRLIssuerChain []byte
	TDXRootCRL           []byte
}

// Collateral directory layout read by LoadCollateralDir. Missing files leave
// their field empty.
const (
	dirSEVSNPCRLs            = "sev-snp"                          // *.crl, DER
	fileTDXTCBInfo           = "tdx/tcb_info.json"                // PCS body
	fileTDXTCBInfoChain      = "tdx/tcb_info_issuer_chain.pem"    // header, PEM
	fileTDXQEIdentity        = "tdx/qe_identity.json"             // PCS body
	fileTDXQEIdentityChain   = "tdx/qe_identity_issuer_chain.pem" // header, PEM
	fileTDXPCKCRL            = "tdx/pck_crl.der"                  // DER
	fileTDXPCKCRLIssuerChain = "tdx/pck_crl_issuer_chain.pem"     // header, PEM
	fileTDXRootCRL           = "tdx/root_ca_crl.der"              // DER
	maxSEVSNPCRLs            = 16
)

// CollateralLayout names the files of a collateral directory
// (docs/spec/collateral-v1.md), relative to it: where LoadCollateralDir
// reads each document and where a fetcher writes it.
type CollateralLayout struct {
	// SEVSNPCRLDir holds AMD CRLs, *.crl, DER.
	SEVSNPCRLDir string
	// The Intel PCS bodies (JSON), their issuer chain headers (PEM), the
	// PCK CRL (DER) with its issuer chain (PEM), and the SGX Root CA CRL
	// (DER).
	TDXTCBInfo, TDXTCBInfoChain, TDXQEIdentity, TDXQEIdentityChain string
	TDXPCKCRL, TDXPCKCRLIssuerChain, TDXRootCRL                    string
}

// CollateralFiles returns the collateral directory layout.
func CollateralFiles() CollateralLayout {
	return CollateralLayout{
		SEVSNPCRLDir: dirSEVSNPCRLs,
		TDXTCBInfo:   fileTDXTCBInfo, TDXTCBInfoChain: fileTDXTCBInfoChain,
		TDXQEIdentity: fileTDXQEIdentity, TDXQEIdentityChain: fileTDXQEIdentityChain,
		TDXPCKCRL: fileTDXPCKCRL, TDXPCKCRLIssuerChain: fileTDXPCKCRLIssuerChain,
		TDXRootCRL: fileTDXRootCRL,
	}
}

// LoadCollateralDir reads collateral from dir (layout: CollateralFiles). It reads nothing else and follows no links out of dir's tree
// beyond what the operating system does for the named files.
func LoadCollateralDir(dir string) (*Collateral, error) {
	c := &Collateral{}
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{
		{fileTDXTCBInfo, &c.TDXTCBInfo},
		{fileTDXTCBInfoChain, &c.TDXTCBInfoIssuerChain},
		{fileTDXQEIdentity, &c.TDXQEIdentity},
		{fileTDXQEIdentityChain, &c.TDXQEIdentityIssuerChain},
		{fileTDXPCKCRL, &c.TDXPCKCRL},
		{fileTDXPCKCRLIssuerChain, &c.TDXPCKCRLIssuerChain},
		{fileTDXRootCRL, &c.TDXRootCRL},
	} {
		b, err := readLimited(filepath.Join(dir, filepath.FromSlash(f.name)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		*f.dst = b
	}
	entries, err := os.ReadDir(filepath.Join(dir, dirSEVSNPCRLs))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("platform: collateral: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".crl") {
			continue
		}
		if len(c.SEVSNPCRLs) == maxSEVSNPCRLs {
			return nil, fmt.Errorf("platform: collateral: more than %d sev-snp crls", maxSEVSNPCRLs)
		}
		b, err := readLimited(filepath.Join(dir, dirSEVSNPCRLs, e.Name()))
		if err != nil {
			return nil, err
		}
		c.SEVSNPCRLs = append(c.SEVSNPCRLs, b)
	}
	return c, nil
}

// readLimited reads a regular file of at most MaxCollateralFile bytes.
func readLimited(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("platform: collateral: %s is not a regular file", filepath.Base(path))
	}
	b, err := bounded.ReadFile(path, MaxCollateralFile)
	if errors.Is(err, bounded.ErrTooLarge) {
		return nil, fmt.Errorf("platform: collateral: %w", err)
	}
	return b, err
}

// tdxHasCollateral reports whether TCB info and QE identity are present,
// and tdxHasCRLs whether all revocation data is.
func (c *Collateral) tdxHasCollateral() bool {
	return c != nil && len(c.TDXTCBInfo) > 0 && len(c.TDXTCBInfoIssuerChain) > 0 &&
		len(c.TDXQEIdentity) > 0 && len(c.TDXQEIdentityIssuerChain) > 0
}

func (c *Collateral) tdxHasCRLs() bool {
	return c != nil && len(c.TDXPCKCRL) > 0 && len(c.TDXPCKCRLIssuerChain) > 0 && len(c.TDXRootCRL) > 0
}

func (c *Collateral) tdxAny() bool {
	return c != nil && (len(c.TDXTCBInfo)+len(c.TDXTCBInfoIssuerChain)+len(c.TDXQEIdentity)+
		len(c.TDXQEIdentityIssuerChain)+len(c.TDXPCKCRL)+len(c.TDXPCKCRLIssuerChain)+len(c.TDXRootCRL) > 0)
}

func (c *Collateral) tdxSizesOK() error {
	for _, b := range [][]byte{c.TDXTCBInfo, c.TDXTCBInfoIssuerChain, c.TDXQEIdentity,
		c.TDXQEIdentityIssuerChain, c.TDXPCKCRL, c.TDXPCKCRLIssuerChain, c.TDXRootCRL} {
		if len(b) > MaxCollateralFile {
			return fmt.Errorf("collateral item is %d bytes, limit %d", len(b), MaxCollateralFile)
		}
	}
	return nil
}

// offlineGetter serves supplied TDX collateral to go-tdx-guest under the
// Intel PCS URLs it asks for, and fails every other request: it is the only
// getter Verify ever hands to go-tdx-guest, so nothing reaches the network.
type offlineGetter struct {
	c       *Collateral
	missing []string
}

func (g *offlineGetter) Get(u string) (map[string][]string, []byte, error) {
	header := func(name string, chain []byte) map[string][]string {
		return map[string][]string{name: {url.QueryEscape(string(chain))}}
	}
	switch {
	case u == pcs.QeIdentityURL() && len(g.c.TDXQEIdentity) > 0:
		return header(pcs.SgxQeIdentityIssuerChainPhrase, g.c.TDXQEIdentityIssuerChain), clone(g.c.TDXQEIdentity), nil
	case strings.HasPrefix(u, pcs.TcbInfoURL("")) && len(g.c.TDXTCBInfo) > 0:
		return header(pcs.TcbInfoIssuerChainPhrase, g.c.TDXTCBInfoIssuerChain), clone(g.c.TDXTCBInfo), nil
	case (u == pcs.PckCrlURL("platform") || u == pcs.PckCrlURL("processor")) && len(g.c.TDXPCKCRL) > 0:
		return header(pcs.SgxPckCrlIssuerChainPhrase, g.c.TDXPCKCRLIssuerChain), clone(g.c.TDXPCKCRL), nil
	case strings.HasPrefix(u, "https://certificates.trustedservices.intel.com/") && len(g.c.TDXRootCRL) > 0:
		return nil, clone(g.c.TDXRootCRL), nil
	}
	g.missing = append(g.missing, u)
	return nil, nil, fmt.Errorf("offline: no collateral supplied for %s", u)
}

// crlScopeOK refuses a CRL that carries a critical extension, on the CRL or
// on an entry. Go's parser applies none of them, and each one narrows what
// the CRL says (a delta CRL, an issuing distribution point limiting it to
// some certificates or reasons, an indirect CRL's certificate issuer), so a
// CRL with one would be read as a complete list it is not. AMD and Intel
// CRLs carry only non-critical extensions (CRL number, authority key id,
// reason code).
func crlScopeOK(crl *x509.RevocationList) error {
	for _, e := range crl.Extensions {
		if e.Critical {
			return fmt.Errorf("%w: crl has critical extension %s", errUnsupported, e.Id)
		}
	}
	for _, rc := range crl.RevokedCertificateEntries {
		for _, e := range rc.Extensions {
			if e.Critical {
				return fmt.Errorf("%w: crl entry has critical extension %s", errUnsupported, e.Id)
			}
		}
	}
	return nil
}

// tdxCRLsScopeOK applies crlScopeOK to the supplied TDX CRLs before
// go-tdx-guest reads them.
func (c *Collateral) tdxCRLsScopeOK() error {
	for _, der := range [][]byte{c.TDXPCKCRL, c.TDXRootCRL} {
		if len(der) == 0 {
			continue
		}
		crl, err := x509.ParseRevocationList(der)
		if err != nil {
			return fmt.Errorf("crl: %v", err)
		}
		if err := crlScopeOK(crl); err != nil {
			return err
		}
	}
	return nil
}

// pcsBodyOK reads a PCS TCB info or QE identity body strictly: an object
// with exactly the members member and "signature", each once and spelt
// exactly. go-tdx-guest checks the signature over the raw member but
// decodes the body with encoding/json, which also takes a case variant
// ("TCBINFO") and lets the last one win: the document it judged would be
// one nobody signed.
func pcsBodyOK(body []byte, member string) error {
	root, err := jsonobj.ParseObject(body, pohjson.ParseOptions{MaxBytes: MaxCollateralFile, AllowFloats: true})
	if err != nil {
		return fmt.Errorf("%s body: %w", member, err)
	}
	var r jsonobj.Reader
	r.Object(root, jsonobj.Root, map[string]bool{member: true, "signature": true})
	if err := r.Err(); err != nil {
		return fmt.Errorf("%s body: %w", member, err)
	}
	return nil
}

// tdxCheckInputs checks the supplied TDX collateral before go-tdx-guest
// reads it: sizes, the PCS bodies' members (pcsBodyOK) and the CRLs'
// extensions (crlScopeOK).
func (c *Collateral) tdxCheckInputs() error {
	if err := c.tdxSizesOK(); err != nil {
		return cannotCheck(checkCollateral, err)
	}
	for _, b := range []struct {
		body   []byte
		member string
	}{{c.TDXTCBInfo, "tcbInfo"}, {c.TDXQEIdentity, "enclaveIdentity"}} {
		if err := pcsBodyOK(b.body, b.member); err != nil {
			return rejected(checkCollateral, err)
		}
	}
	if err := c.tdxCRLsScopeOK(); err != nil {
		return cannotCheck(checkRevocation, err)
	}
	return nil
}
