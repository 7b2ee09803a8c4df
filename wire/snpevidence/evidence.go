// Package snpevidence defines how AMD SEV-SNP evidence is carried in an
// evidence.Evidence (docs/spec/platform-sevsnp.md) and holds the strict parser
// verifiers use. It contains no device code: producers (enclave/sevsnp,
// enclave/sim) build evidence with Build, verifiers decode it with Parse and
// hand Parsed.Attestation to go-sev-guest's verify and validate packages.
package snpevidence

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/google/go-sev-guest/abi"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
)

const (
	// Format is Evidence.Format for SEV-SNP evidence: Blob is one raw
	// ATTESTATION_REPORT exactly as the AMD secure processor signed it.
	Format = "sev-snp/attestation-report"
	// AuxCertTable is the Evidence.Aux key of the canonical certificate table.
	AuxCertTable = "cert_table"
	// reportSize is the size of an ATTESTATION_REPORT.
	reportSize = abi.ReportSize
	// MaxChainLength is the longest accepted CertChain: leaf, ASK, ARK.
	MaxChainLength = 3
)

var (
	// ErrUnknownFormat is returned by Parse for evidence of another platform
	// or format.
	ErrUnknownFormat = errors.New("sevsnp: not sev-snp attestation-report evidence")
	// ErrMalformedEvidence is returned by Parse and Build when the evidence
	// violates the format.
	ErrMalformedEvidence = errors.New("sevsnp: malformed evidence")
	// errMalformedCertTable is returned for a certificate table that violates
	// the format.
	errMalformedCertTable = errors.New("sevsnp: malformed certificate table")
	// ErrNoEndorsementCert is returned by Build when neither the certificate
	// table nor the caller supplies the VCEK/VLEK certificate.
	ErrNoEndorsementCert = errors.New("sevsnp: no vcek or vlek certificate for the report")
)

// Parsed is SEV-SNP evidence that passed Parse. Nothing in it is verified:
// signatures and the certificate chain are checked by the verifier against
// roots it pins, never against Intermediate or Root.
//
// A Parsed shares its byte slices (Report, CertTable's data, the chain) with
// the evidence it was parsed from, and the certificates with the
// ParseOptions.ParseCertificate memo when one is set: it copies nothing
// (a verifier parses every request's evidence once, and the copies were a
// fifth of the bytes a verification allocated). The evidence must
// therefore not be modified while the Parsed is in use, and neither may be
// modified through the other.
type Parsed struct {
	// Report is the raw ATTESTATION_REPORT (reportSize bytes), as signed.
	Report []byte
	// Signer is the key kind named by the report's SIGNER_INFO (VCEK or VLEK).
	Signer abi.ReportSigner
	// Leaf is the VCEK or VLEK certificate (CertChain[0]).
	Leaf *x509.Certificate
	// Intermediate and Root are the ASK and ARK certificates when carried.
	// They are informational: a verifier uses its own pinned roots.
	Intermediate, Root *x509.Certificate
	// CertTable is the parsed Aux["cert_table"], nil when absent.
	CertTable []CertTableEntry
	// Simulated mirrors Evidence.Simulated.
	Simulated bool

	chain    [][]byte
	rawTable []byte
	// report is Report decoded (checkReport), handed out by Attestation.
	report *spb.Report
}

// Build assembles SEV-SNP evidence from a raw report and a canonical
// certificate table (nil when the host supplied none; see
// CanonicalCertTable). endorsementCert, the DER VCEK or VLEK certificate, is
// used only when the table has no entry for the report's signing key; it is
// then added to the table (or, without a table, becomes the whole chain).
// The result is checked with Parse before it is returned.
func Build(report, certTable, endorsementCert []byte, simulated bool) (*evidence.Evidence, error) {
	_, signer, err := checkReport(report)
	if err != nil {
		return nil, err
	}
	var entries []CertTableEntry
	if certTable != nil {
		if entries, err = parseCertTable(certTable); err != nil {
			return nil, err
		}
	}
	leafGUID := signerGUID(signer)
	if lookup(entries, leafGUID) == nil {
		if len(endorsementCert) == 0 {
			return nil, fmt.Errorf("%w (signer %v)", ErrNoEndorsementCert, signer)
		}
		if entries != nil {
			entries = append(entries, CertTableEntry{GUID: leafGUID, Data: bytes.Clone(endorsementCert)})
			if certTable, err = MarshalCertTable(entries); err != nil {
				return nil, err
			}
		}
	}
	var chain [][]byte
	if entries != nil {
		// The table's entries share certTable's bytes: the evidence gets
		// copies.
		for _, der := range chainFromTable(entries, leafGUID) {
			chain = append(chain, bytes.Clone(der))
		}
	} else {
		chain = [][]byte{bytes.Clone(endorsementCert)}
	}
	ev := &evidence.Evidence{
		Platform:  evidence.PlatformSEVSNP,
		Simulated: simulated,
		Format:    Format,
		Blob:      bytes.Clone(report),
		CertChain: chain,
	}
	if certTable != nil {
		ev.Aux = map[string][]byte{AuxCertTable: bytes.Clone(certTable)}
	}
	if _, err := Parse(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// Parse decodes SEV-SNP evidence strictly (size limits, known fields only,
// a certificate chain consistent with the certificate table). It returns
// nothing on error. Parse checks structure only, and the result shares
// ev's bytes; see Parsed.
func Parse(ev *evidence.Evidence) (*Parsed, error) { return ParseWith(ev, ParseOptions{}) }

// ParseOptions tune Parse; the zero value is Parse.
type ParseOptions struct {
	// ParseCertificate, when set, replaces x509.ParseCertificate for the
	// certificate chain. It must return exactly what x509.ParseCertificate
	// returns for the same bytes (a memo keyed on the exact DER, as
	// verify/platform's CertCache keeps); the certificates it returns are
	// only read.
	ParseCertificate func(der []byte) (*x509.Certificate, error)
}

// ParseWith is Parse with options.
func ParseWith(ev *evidence.Evidence, opts ParseOptions) (*Parsed, error) {
	parseCert := opts.ParseCertificate
	if parseCert == nil {
		parseCert = x509.ParseCertificate
	}
	if ev == nil {
		return nil, fmt.Errorf("%w: no evidence", ErrMalformedEvidence)
	}
	if ev.Platform != evidence.PlatformSEVSNP || ev.Format != Format {
		return nil, ErrUnknownFormat
	}
	if len(ev.Signature) != 0 {
		return nil, fmt.Errorf("%w: detached signature present", ErrMalformedEvidence)
	}
	report, signer, err := checkReport(ev.Blob)
	if err != nil {
		return nil, err
	}
	if len(ev.CertChain) == 0 {
		return nil, fmt.Errorf("%w: no certificate chain", ErrMalformedEvidence)
	}
	if len(ev.CertChain) > MaxChainLength {
		return nil, fmt.Errorf("%w: certificate chain has %d entries, limit %d", ErrMalformedEvidence, len(ev.CertChain), MaxChainLength)
	}
	certs := make([]*x509.Certificate, len(ev.CertChain))
	for i, der := range ev.CertChain {
		if len(der) == 0 || len(der) > MaxCertSize {
			return nil, fmt.Errorf("%w: certificate %d has length %d", ErrMalformedEvidence, i, len(der))
		}
		c, err := parseCert(der)
		if err != nil {
			return nil, fmt.Errorf("%w: certificate %d: %v", ErrMalformedEvidence, i, err)
		}
		certs[i] = c
	}
	if pub, ok := certs[0].PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P384() {
		return nil, fmt.Errorf("%w: leaf certificate key is not ecdsa p-384", ErrMalformedEvidence)
	}
	p := &Parsed{
		Report:    ev.Blob,
		Signer:    signer,
		Leaf:      certs[0],
		Simulated: ev.Simulated,
		chain:     slices.Clip(ev.CertChain),
		report:    report,
	}
	for k := range ev.Aux {
		if k != AuxCertTable {
			return nil, fmt.Errorf("%w: unknown aux entry %q", ErrMalformedEvidence, safetext.Clip(k, 32))
		}
	}
	if raw, ok := ev.Aux[AuxCertTable]; ok {
		entries, err := parseCertTable(raw)
		if err != nil {
			return nil, err
		}
		want := chainFromTable(entries, signerGUID(signer))
		if len(want) == 0 {
			return nil, fmt.Errorf("%w: certificate table has no %v certificate", ErrMalformedEvidence, signer)
		}
		if !slices.EqualFunc(want, ev.CertChain, bytes.Equal) {
			return nil, fmt.Errorf("%w: certificate chain does not match the certificate table", ErrMalformedEvidence)
		}
		p.CertTable = entries
		p.rawTable = raw
		// With a table the roles are known from the GUIDs.
		i := 1
		if lookup(entries, GUIDASK) != nil {
			p.Intermediate = certs[i]
			i++
		}
		if lookup(entries, GUIDARK) != nil {
			p.Root = certs[i]
		}
	} else {
		if len(certs) > 1 {
			p.Intermediate = certs[1]
		}
		if len(certs) > 2 {
			p.Root = certs[2]
		}
	}
	return p, nil
}

// evidence re-encodes p. For any ev that Parse accepts, Parse(ev).Evidence()
// marshals to the same JSON as ev.
func (p *Parsed) evidence() *evidence.Evidence {
	ev := &evidence.Evidence{
		Platform:  evidence.PlatformSEVSNP,
		Simulated: p.Simulated,
		Format:    Format,
		Blob:      bytes.Clone(p.Report),
	}
	for _, der := range p.chain {
		ev.CertChain = append(ev.CertChain, bytes.Clone(der))
	}
	if p.rawTable != nil {
		ev.Aux = map[string][]byte{AuxCertTable: bytes.Clone(p.rawTable)}
	}
	return ev
}

// Attestation returns the go-sev-guest representation of p for
// verify.SnpAttestation and validate.SnpAttestation: the report decoded
// once by Parse and the certificates' bytes, all shared with p and only to
// be read. Table entries other than VCEK, VLEK, ASK and ARK become
// CertificateChain.Extras.
func (p *Parsed) Attestation() (*spb.Attestation, error) {
	chain := &spb.CertificateChain{Extras: map[string][]byte{}}
	switch p.Signer {
	case abi.VcekReportSigner:
		chain.VcekCert = p.Leaf.Raw
	case abi.VlekReportSigner:
		chain.VlekCert = p.Leaf.Raw
	}
	if p.Intermediate != nil {
		chain.AskCert = p.Intermediate.Raw
	}
	if p.Root != nil {
		chain.ArkCert = p.Root.Raw
	}
	for _, e := range p.CertTable {
		switch e.GUID {
		case GUIDVCEK, guidVLEK, GUIDASK, GUIDARK:
		default:
			chain.Extras[guidString(e.GUID)] = e.Data
		}
	}
	return &spb.Attestation{Report: p.report, CertificateChain: chain}, nil
}

// ReportData returns the REPORT_DATA field of p.Report.
func (p *Parsed) ReportData() [64]byte {
	var rd [64]byte
	copy(rd[:], p.Report[0x50:0x90])
	return rd
}

// checkReport checks the structure of a raw report and returns it decoded
// (the decoded fields are copies) and its signer.
func checkReport(report []byte) (*spb.Report, abi.ReportSigner, error) {
	if len(report) != reportSize {
		return nil, 0, fmt.Errorf("%w: report is %d bytes, want %d", ErrMalformedEvidence, len(report), reportSize)
	}
	if err := abi.ValidateReportFormat(report); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrMalformedEvidence, err)
	}
	r, err := abi.ReportToProto(report)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrMalformedEvidence, err)
	}
	if r.GetSignatureAlgo() != abi.SignEcdsaP384Sha384 {
		return nil, 0, fmt.Errorf("%w: unknown signature algorithm %d", ErrMalformedEvidence, r.GetSignatureAlgo())
	}
	info, err := abi.ParseSignerInfo(r.GetSignerInfo())
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrMalformedEvidence, err)
	}
	switch info.SigningKey {
	case abi.VcekReportSigner, abi.VlekReportSigner:
		return r, info.SigningKey, nil
	}
	return nil, 0, fmt.Errorf("%w: report signing key is %v", ErrMalformedEvidence, info.SigningKey)
}

func signerGUID(s abi.ReportSigner) [16]byte {
	if s == abi.VlekReportSigner {
		return guidVLEK
	}
	return GUIDVCEK
}

// chainFromTable returns the chain the table implies: the leaf, then the ASK
// entry if present, then the ARK entry if present; nil without a leaf. The
// chain shares the entries' bytes.
func chainFromTable(entries []CertTableEntry, leaf [16]byte) [][]byte {
	l := lookup(entries, leaf)
	if l == nil {
		return nil
	}
	chain := [][]byte{l}
	for _, g := range [][16]byte{GUIDASK, GUIDARK} {
		if d := lookup(entries, g); d != nil {
			chain = append(chain, d)
		}
	}
	return chain
}

func guidString(g [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", g[0:4], g[4:6], g[6:8], g[8:10], g[10:16])
}
