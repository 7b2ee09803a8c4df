// Package collateral fetches the AMD KDS and Intel PCS documents that
// offline verification of given evidence needs into a collateral directory
// (docs/spec/collateral-v1.md), and checks such a directory without the
// network.
//
// Only Fetcher.Collect without Offline touches the network, and only when a
// caller invokes it explicitly (packctl collateral fetch). Nothing here decides whether
// evidence is trustworthy: the fetched documents are not trusted; the
// verifier (verify/platform) checks their signatures against its pinned
// roots and their validity at verification time. The validity checks here
// decide only whether a cached copy is still worth keeping.
package collateral

import (
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/charclass"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/hclreport"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	"github.com/google/go-tdx-guest/pcs"
)

// Default service base URLs. Fetcher fields override them (mirrors, tests).
const (
	defaultKDSURL        = "https://kdsintf.amd.com"
	defaultPCSURL        = "https://api.trustedservices.intel.com"
	defaultIntelCertsURL = "https://certificates.trustedservices.intel.com"
	// rootCRLPath is the Intel SGX Root CA CRL under defaultIntelCertsURL
	// (the CRL distribution point of Intel's SGX Root CA certificate).
	rootCRLPath = "/IntelSGXRootCA.der"
)

// Item kinds (docs/spec/collateral-v1.md, section 3).
const (
	kindSEVSNPVCEK    = "sev-snp-vcek"
	kindSEVSNPChain   = "sev-snp-cert-chain"
	kindSEVSNPCRL     = "sev-snp-crl"
	kindTDXTCBInfo    = "tdx-tcb-info"
	kindTDXQEIdentity = "tdx-qe-identity"
	kindTDXPCKCRL     = "tdx-pck-crl"
	kindTDXRootCRL    = "tdx-root-ca-crl"
)

// service names which base URL an Item's path is relative to.
type service int

const (
	serviceKDS service = iota + 1
	servicePCS
	serviceIntelCerts
)

// Errors that Needs, Fetch and Check wrap; the message names the class.
var (
	// errEvidence: evidence from which no collateral need can be derived
	// (malformed or of an unsupported platform).
	errEvidence = errors.New("collateral: unusable evidence")
	// errFetch: a document could not be fetched (network, HTTP status,
	// retries exhausted).
	errFetch = errors.New("collateral: fetch failed")
	// errDocument: a fetched or cached document does not parse, is for
	// another platform, or is outside its validity.
	errDocument = errors.New("collateral: unusable document")
	// errIncomplete: Check found missing or stale documents.
	errIncomplete = errors.New("collateral: missing or stale documents")
)

// Item is one document the evidence needs.
type Item struct {
	// Kind is one of "sev-snp-vcek", "sev-snp-cert-chain", "sev-snp-crl",
	// "tdx-tcb-info", "tdx-qe-identity", "tdx-pck-crl", "tdx-root-ca-crl"
	// (docs/spec/collateral-v1.md, section 3).
	Kind string
	// Path is the document's file in the directory (slash-separated,
	// relative).
	Path string
	// ChainPath, when set, is the file holding the PEM issuer chain that
	// the service returns in the header ChainHeader.
	ChainPath   string
	ChainHeader string
	// URL is where the document comes from: a path and query relative to
	// the base URL of the service from (Fetcher.KDSURL, PCSURL or
	// IntelCertsURL).
	URL  string
	from service
	// FMSPC is the platform a TDX TCB info document must be for (lowercase
	// hex); empty for other kinds.
	FMSPC string
}

// State of a document in a directory: "fresh", "missing", "stale" or
// "invalid".
type State string

const (
	stateFresh   State = "fresh"
	stateMissing State = "missing"
	stateStale   State = "stale"
	stateInvalid State = "invalid"
)

// Status is what Check found for one Item.
type Status struct {
	Item  Item
	State State
	// ValidUntil is the document's own end of validity (CRL nextUpdate,
	// TCB info / QE identity nextUpdate, certificate notAfter; the earliest
	// over a document and its issuer chain); zero unless parsed.
	ValidUntil time.Time
	// Detail explains a state other than fresh.
	Detail string
	// Fetched is true when Fetch downloaded the document (false: cached).
	Fetched bool
}

// Needs returns the documents that offline verification of evs needs,
// without duplicates, in a stable order. TPM evidence needs none. It parses
// the evidence but verifies nothing: the identifiers it reads only select
// documents, which the verifier later checks against its own roots.
func Needs(evs []*evidence.Evidence) ([]Item, error) {
	var out []Item
	seen := map[string]bool{}
	add := func(items ...Item) {
		for _, it := range items {
			if !seen[it.Path] {
				seen[it.Path] = true
				out = append(out, it)
			}
		}
	}
	for i, ev := range evs {
		if ev == nil {
			return nil, fmt.Errorf("%w: evidence %d is empty", errEvidence, i)
		}
		switch ev.Platform {
		case evidence.PlatformSEVSNP:
			items, err := sevsnpNeeds(ev)
			if err != nil {
				return nil, fmt.Errorf("%w: evidence %d: %w", errEvidence, i, err)
			}
			add(items...)
		case evidence.PlatformTDX:
			items, err := tdxNeeds(ev)
			if err != nil {
				return nil, fmt.Errorf("%w: evidence %d: %w", errEvidence, i, err)
			}
			add(items...)
		case evidence.PlatformAzureSNP, evidence.PlatformAzureTDX:
			items, err := azureNeeds(ev)
			if err != nil {
				return nil, fmt.Errorf("%w: evidence %d: %w", errEvidence, i, err)
			}
			add(items...)
		case evidence.PlatformTPM:
		default:
			return nil, fmt.Errorf("%w: evidence %d: unsupported platform", errEvidence, i)
		}
	}
	return out, nil
}

func sevsnpNeeds(ev *evidence.Evidence) ([]Item, error) {
	files := platform.CollateralFiles()
	p, err := snpevidence.Parse(ev)
	if err != nil {
		return nil, err
	}
	att, err := p.Attestation()
	if err != nil {
		return nil, err
	}
	report := att.GetReport()
	line, err := platform.SNPProductLine(report, p)
	if err != nil {
		return nil, err
	}
	// The line names a KDS path and a file: refuse separators.
	if strings.ContainsAny(line, "/\\.") {
		return nil, errors.New("unknown amd product line")
	}
	signer := "vcek"
	if p.Signer == abi.VlekReportSigner {
		signer = "vlek"
	}
	chainURL, err := relURL(kds.ProductCertChainURL(p.Signer, line), defaultKDSURL)
	if err != nil {
		return nil, err
	}
	crlURL, err := relURL(kds.CrlLinkByKey(line, p.Signer), defaultKDSURL)
	if err != nil {
		return nil, err
	}
	items := []Item{
		{Kind: kindSEVSNPChain, Path: fmt.Sprintf("%s/certs/%s/%s_cert_chain.pem", files.SEVSNPCRLDir, line, signer), from: serviceKDS, URL: chainURL},
		{Kind: kindSEVSNPCRL, Path: fmt.Sprintf("%s/%s-%s.crl", files.SEVSNPCRLDir, line, signer), from: serviceKDS, URL: crlURL},
	}
	// A VLEK is fetched only with a cloud provider's credential, and a
	// masked CHIP_ID names no VCEK: the certificate the evidence carries
	// is then the only copy.
	chipID := report.GetChipId()
	if p.Signer == abi.VcekReportSigner && !allZero(chipID) {
		tcb := kds.TCBVersion(report.GetReportedTcb())
		u, err := relURL(kds.VCEKCertURL(line, chipID, tcb), defaultKDSURL)
		if err != nil {
			return nil, err
		}
		items = append([]Item{{Kind: kindSEVSNPVCEK,
			Path: fmt.Sprintf("%s/certs/%s/vcek-%s-%016x.der", files.SEVSNPCRLDir, line, hex.EncodeToString(chipID), uint64(tcb)),
			from: serviceKDS, URL: u}}, items...)
	}
	return items, nil
}

// azureNeeds is the collateral of the hardware evidence beneath Azure
// evidence's HCL report.
func azureNeeds(ev *evidence.Evidence) ([]Item, error) {
	r, err := hclreport.Parse(ev.Aux[hclreport.AuxReport])
	if err != nil {
		return nil, err
	}
	var vcek []byte
	if len(ev.CertChain) == 1 {
		vcek = ev.CertChain[0]
	}
	hw, err := r.Hardware(ev.Simulated, vcek, ev.Aux[hclreport.AuxTDQuote])
	if err != nil {
		return nil, err
	}
	if hw.Platform == evidence.PlatformSEVSNP {
		return sevsnpNeeds(hw)
	}
	return tdxNeeds(hw)
}

func tdxNeeds(ev *evidence.Evidence) ([]Item, error) {
	files := platform.CollateralFiles()
	if ev.Format != tdxquote.Format {
		return nil, errors.New("unsupported tdx evidence format")
	}
	q, err := tdxquote.Parse(ev.Blob)
	if err != nil {
		return nil, err
	}
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, fmt.Errorf("pck certificate: %v", err)
	}
	exts, err := pcs.PckCertificateExtensions(leaf)
	if err != nil {
		return nil, fmt.Errorf("pck certificate: %v", err)
	}
	fmspc := strings.ToLower(exts.FMSPC)
	if len(fmspc) != 12 || !isHex(fmspc) {
		return nil, errors.New("pck certificate: malformed fmspc")
	}
	var ca string
	switch leaf.Issuer.CommonName {
	case "Intel SGX PCK Platform CA":
		ca = "platform"
	case "Intel SGX PCK Processor CA":
		ca = "processor"
	default:
		return nil, errors.New("pck certificate: unknown issuing ca")
	}
	tcbURL, err := relURL(pcs.TcbInfoURL(fmspc), defaultPCSURL)
	if err != nil {
		return nil, err
	}
	qeURL, err := relURL(pcs.QeIdentityURL(), defaultPCSURL)
	if err != nil {
		return nil, err
	}
	crlURL, err := relURL(pcs.PckCrlURL(ca), defaultPCSURL)
	if err != nil {
		return nil, err
	}
	return []Item{
		{Kind: kindTDXTCBInfo, Path: files.TDXTCBInfo, ChainPath: files.TDXTCBInfoChain, ChainHeader: pcs.TcbInfoIssuerChainPhrase, from: servicePCS, URL: tcbURL, FMSPC: fmspc},
		{Kind: kindTDXQEIdentity, Path: files.TDXQEIdentity, ChainPath: files.TDXQEIdentityChain, ChainHeader: pcs.SgxQeIdentityIssuerChainPhrase, from: servicePCS, URL: qeURL},
		{Kind: kindTDXPCKCRL, Path: files.TDXPCKCRL, ChainPath: files.TDXPCKCRLIssuerChain, ChainHeader: pcs.SgxPckCrlIssuerChainPhrase, from: servicePCS, URL: crlURL},
		{Kind: kindTDXRootCRL, Path: files.TDXRootCRL, from: serviceIntelCerts, URL: rootCRLPath},
	}, nil
}

// relURL strips base from an absolute URL built by go-sev-guest or
// go-tdx-guest, so that the fetcher can put it under another base.
func relURL(abs, base string) (string, error) {
	rel, ok := strings.CutPrefix(abs, base)
	if !ok || !strings.HasPrefix(rel, "/") {
		return "", fmt.Errorf("collateral: unexpected service url %q", abs)
	}
	return rel, nil
}

// check reports the state of every item in dir at now. A document is fresh
// when it (and its issuer chain) parses, is for the evidence's platform,
// and stays valid at least until now+minValidity. It never uses the
// network.
func check(dir string, items []Item, now time.Time, minValidity time.Duration) []Status {
	out := make([]Status, 0, len(items))
	for _, it := range items {
		out = append(out, checkOne(dir, it, now, minValidity))
	}
	return out
}

// incomplete returns an error wrapping errIncomplete that names every
// status that is not fresh, or nil.
func incomplete(sts []Status) error {
	var bad []string
	for _, s := range sts {
		if s.State != stateFresh {
			bad = append(bad, fmt.Sprintf("%s %s (%s)", s.Item.Path, s.State, s.Detail))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", errIncomplete, strings.Join(bad, "; "))
}

func checkOne(dir string, it Item, now time.Time, minValidity time.Duration) Status {
	st := Status{Item: it}
	doc, err := readFile(dir, it.Path)
	if errors.Is(err, fs.ErrNotExist) {
		st.State, st.Detail = stateMissing, "no file"
		return st
	}
	if err != nil {
		st.State, st.Detail = stateInvalid, err.Error()
		return st
	}
	var chain []byte
	if it.ChainPath != "" {
		chain, err = readFile(dir, it.ChainPath)
		if errors.Is(err, fs.ErrNotExist) {
			st.State, st.Detail = stateMissing, "no issuer chain file "+it.ChainPath
			return st
		}
		if err != nil {
			st.State, st.Detail = stateInvalid, err.Error()
			return st
		}
	}
	from, until, err := validity(it, doc, chain)
	if err != nil {
		st.State, st.Detail = stateInvalid, err.Error()
		return st
	}
	st.ValidUntil = until
	switch {
	case now.Before(from):
		st.State, st.Detail = stateStale, "not valid before "+from.UTC().Format(time.RFC3339)
	case !now.Add(minValidity).Before(until):
		st.State, st.Detail = stateStale, "valid until "+until.UTC().Format(time.RFC3339)
	default:
		st.State = stateFresh
	}
	return st
}

// validity parses doc (and its issuer chain) as it.Kind requires and
// returns the window in which both are valid.
func validity(it Item, doc, chain []byte) (from, until time.Time, err error) {
	switch it.Kind {
	case kindSEVSNPCRL, kindTDXPCKCRL, kindTDXRootCRL:
		crl, err := x509.ParseRevocationList(doc)
		if err != nil {
			return from, until, fmt.Errorf("%w: crl: %v", errDocument, err)
		}
		if crl.NextUpdate.IsZero() {
			return from, until, fmt.Errorf("%w: crl has no nextUpdate", errDocument)
		}
		from, until = crl.ThisUpdate, crl.NextUpdate
	case kindSEVSNPVCEK:
		c, err := x509.ParseCertificate(doc)
		if err != nil {
			return from, until, fmt.Errorf("%w: certificate: %v", errDocument, err)
		}
		from, until = c.NotBefore, c.NotAfter
	case kindSEVSNPChain:
		certs, err := parsePEMCerts(doc)
		if err != nil {
			return from, until, err
		}
		if len(certs) != 2 {
			return from, until, fmt.Errorf("%w: want 2 certificates (ask or asvk, ark), got %d", errDocument, len(certs))
		}
		from, until = window(certs)
	case kindTDXTCBInfo:
		var ti pcs.TdxTcbInfo
		if err := json.Unmarshal(doc, &ti); err != nil {
			return from, until, fmt.Errorf("%w: tcb info: %v", errDocument, err)
		}
		if !strings.EqualFold(ti.TcbInfo.Fmspc, it.FMSPC) {
			return from, until, fmt.Errorf("%w: tcb info is for fmspc %q, want %s", errDocument, safetext.Clip(ti.TcbInfo.Fmspc, 32), it.FMSPC)
		}
		from, until = ti.TcbInfo.IssueDate, ti.TcbInfo.NextUpdate
	case kindTDXQEIdentity:
		var qi pcs.QeIdentity
		if err := json.Unmarshal(doc, &qi); err != nil {
			return from, until, fmt.Errorf("%w: qe identity: %v", errDocument, err)
		}
		from, until = qi.EnclaveIdentity.IssueDate, qi.EnclaveIdentity.NextUpdate
	default:
		return from, until, fmt.Errorf("%w: unknown kind %q", errDocument, it.Kind)
	}
	if until.IsZero() {
		return from, until, fmt.Errorf("%w: no end of validity", errDocument)
	}
	if it.ChainPath != "" {
		certs, err := parsePEMCerts(chain)
		if err != nil {
			return from, until, fmt.Errorf("issuer chain: %w", err)
		}
		cf, cu := window(certs)
		if cf.After(from) {
			from = cf
		}
		if cu.Before(until) {
			until = cu
		}
	}
	return from, until, nil
}

func window(certs []*x509.Certificate) (from, until time.Time) {
	for i, c := range certs {
		if i == 0 || c.NotBefore.After(from) {
			from = c.NotBefore
		}
		if i == 0 || c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	return from, until
}

// maxChainCerts bounds an issuer chain.
const maxChainCerts = 4

func parsePEMCerts(b []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := b
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("%w: pem block %q", errDocument, safetext.Clip(blk.Type, 32))
		}
		if len(certs) == maxChainCerts {
			return nil, fmt.Errorf("%w: more than %d certificates", errDocument, maxChainCerts)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate: %v", errDocument, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 || len(strings.TrimSpace(string(rest))) != 0 {
		return nil, fmt.Errorf("%w: want PEM certificates only", errDocument)
	}
	return certs, nil
}

// readFile reads a regular file of at most platform.MaxCollateralFile
// bytes under dir.
func readFile(dir, rel string) ([]byte, error) {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	return bounded.ReadFile(p, platform.MaxCollateralFile)
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

func isHex(s string) bool { return charclass.LowerHex().All(s) }
