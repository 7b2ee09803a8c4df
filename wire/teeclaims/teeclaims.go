// Package teeclaims derives the PoH runtime_metadata.tee claims
// (attestation_type, root_id, tcb_version, measurement) from platform
// evidence, as docs/spec/attestation-v1.md ("TEE claims") defines them. It
// parses structure only and checks no signature; producers use it on fresh
// evidence, verifiers on evidence they verified. It has no device imports.
package teeclaims

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	spb "github.com/google/go-sev-guest/proto/sevsnp"
	"github.com/google/go-tpm/tpm2"

	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/hclreport"
	"github.com/clawea/attester/wire/snpevidence"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/tpmquote"
)

// PoH runtime_metadata.tee.attestation_type values.
const (
	typeSEVSNP  = "sev_snp_report"
	typeTDX     = "tdx_quote"
	typeGeneric = "generic_tee"
)

// ErrEvidence is returned (wrapped) for evidence claims cannot be derived
// from, or that does not commit to the expected REPORT_DATA.
var ErrEvidence = errors.New("teeclaims: unusable evidence")

var formats = map[string]string{
	evidence.PlatformSEVSNP: snpevidence.Format,
	evidence.PlatformTDX:    tdxquote.Format,
	evidence.PlatformTPM:    tpmquote.Format,
	// Azure: the hardware report's claims, root_id prefixed with the
	// platform (docs/spec/platform-azure.md).
	evidence.PlatformAzureSNP: hclreport.Format,
	evidence.PlatformAzureTDX: hclreport.Format,
}

// SimulatedSuffix ends the root_id of simulated evidence.
const SimulatedSuffix = ":SIMULATED"

// Claims are the runtime_metadata.tee values derived from one piece of
// evidence (docs/spec/attestation-v1.md, "TEE claims"). Verifiers recompute
// them from verified evidence with the same function.
type Claims struct {
	AttestationType string
	RootID          string
	TCBVersion      string
	// Measurement is the launch measurement: SEV-SNP MEASUREMENT, TDX MRTD,
	// or the TPM quote's pcrDigest.
	Measurement []byte
	// ReportData is the REPORT_DATA the evidence carries (for TPM: nil; the
	// quote carries QualifyingData instead, checked by CheckReportData).
	ReportData []byte
}

// Derive parses ev (structure only: no signature is checked)
// and derives the TEE claims. It has no device imports.
func Derive(ev *evidence.Evidence) (*Claims, error) { return DeriveWith(ev, Options{}) }

// Options tune Derive; the zero value is Derive.
type Options struct {
	// ParseCertificate, when set, replaces x509.ParseCertificate for
	// SEV-SNP endorsement certificates (see snpevidence.ParseOptions).
	ParseCertificate func(der []byte) (*x509.Certificate, error)
	// SEVSNP and SEVSNPReport, when both set, are SEV-SNP ev as the caller
	// already parsed it (snpevidence.ParseWith of ev) and its report as it
	// decoded it (abi.ReportToProto of SEVSNP.Report): the claims are
	// derived from them instead of parsing ev again. They must be ev's.
	SEVSNP       *snpevidence.Parsed
	SEVSNPReport *spb.Report
}

// DeriveWith is Derive with options.
func DeriveWith(ev *evidence.Evidence, opts Options) (*Claims, error) {
	if ev == nil {
		return nil, fmt.Errorf("%w: no evidence", ErrEvidence)
	}
	if ev.Format != formats[ev.Platform] || formats[ev.Platform] == "" {
		return nil, fmt.Errorf("%w: platform %q format %q", ErrEvidence, ev.Platform, ev.Format)
	}
	var c *Claims
	var err error
	switch ev.Platform {
	case evidence.PlatformSEVSNP:
		c, err = sevClaims(ev, opts)
	case evidence.PlatformTDX:
		c, err = tdxClaims(ev)
	case evidence.PlatformTPM:
		c, err = tpmClaims(ev)
	case evidence.PlatformAzureSNP, evidence.PlatformAzureTDX:
		c, err = azureClaims(ev, opts)
	}
	if err != nil {
		return nil, err
	}
	if ev.Simulated {
		c.RootID += SimulatedSuffix
	}
	return c, nil
}

func sevClaims(ev *evidence.Evidence, opts Options) (*Claims, error) {
	p, r := opts.SEVSNP, opts.SEVSNPReport
	if p == nil || r == nil {
		var err error
		if p, err = snpevidence.ParseWith(ev, snpevidence.ParseOptions{ParseCertificate: opts.ParseCertificate}); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrEvidence, err)
		}
		if r, err = abi.ReportToProto(p.Report); err != nil {
			return nil, fmt.Errorf("%w: sev-snp report: %v", ErrEvidence, err)
		}
	}
	line := "Unknown"
	if r.GetCpuid1EaxFms() != 0 {
		line = kds.ProductLine(abi.SevProductFromCpuid1Eax(r.GetCpuid1EaxFms()))
	} else if ext, err := kds.CertificateExtensions(p.Leaf, p.Signer); err == nil {
		line = kds.ProductLineOfProductName(ext.ProductName)
	}
	if line == "Unknown" || line == "" {
		return nil, fmt.Errorf("%w: cannot determine the AMD product line", ErrEvidence)
	}
	rd := p.ReportData()
	return &Claims{
		AttestationType: typeSEVSNP,
		RootID:          "sev-snp:amd-ark-" + line,
		TCBVersion:      fmt.Sprintf("%016x", r.GetReportedTcb()),
		Measurement:     bytes.Clone(r.GetMeasurement()),
		ReportData:      rd[:],
	}, nil
}

func tdxClaims(ev *evidence.Evidence) (*Claims, error) {
	if len(ev.Signature) != 0 {
		return nil, fmt.Errorf("%w: tdx evidence has no signature field", ErrEvidence)
	}
	for k := range ev.Aux {
		// The CC event log (platform-tdx section 1) is the only aux field.
		if k != tpmquote.AuxEventLog {
			return nil, fmt.Errorf("%w: tdx evidence has no aux field but %s", ErrEvidence, tpmquote.AuxEventLog)
		}
	}
	q, err := tdxquote.Parse(ev.Blob)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	chain, err := tdxquote.ParsePCKChain(q.PCKChain)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	if !slices.EqualFunc(chain, ev.CertChain, bytes.Equal) {
		return nil, fmt.Errorf("%w: cert_chain differs from the quote's PCK chain", ErrEvidence)
	}
	root := sha256.Sum256(chain[len(chain)-1])
	rd := q.Body.ReportData
	return &Claims{
		AttestationType: typeTDX,
		RootID:          "tdx:root-sha256-" + hex.EncodeToString(root[:]),
		TCBVersion:      hex.EncodeToString(q.Body.TeeTcbSvn[:]),
		Measurement:     bytes.Clone(q.Body.MRTD[:]),
		ReportData:      rd[:],
	}, nil
}

// azureClaims are the claims of the hardware report inside Azure evidence,
// root_id "azure-snp:amd-ark-<line>" or "azure-tdx:root-sha256-<hex>", and
// as report data the runtime claims' user data, the REPORT_DATA the
// producer wrote (CheckReportData also checks the vTPM quote's).
func azureClaims(ev *evidence.Evidence, opts Options) (*Claims, error) {
	r, err := hclreport.Parse(ev.Aux[hclreport.AuxReport])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	if r.Platform() != ev.Platform {
		return nil, fmt.Errorf("%w: the hcl report is %s", ErrEvidence, r.Platform())
	}
	cl, err := hclreport.ParseClaims(r.Claims)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	var vcek []byte
	if len(ev.CertChain) == 1 {
		vcek = ev.CertChain[0]
	}
	hw, err := r.Hardware(ev.Simulated, vcek, ev.Aux[hclreport.AuxTDQuote])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEvidence, err)
	}
	var c *Claims
	if hw.Platform == evidence.PlatformSEVSNP {
		c, err = sevClaims(hw, opts)
	} else {
		c, err = tdxClaims(hw)
	}
	if err != nil {
		return nil, err
	}
	_, rest, _ := strings.Cut(c.RootID, ":")
	c.RootID = ev.Platform + ":" + rest
	c.ReportData = cl.UserData[:]
	return c, nil
}

// TPM limits (docs/spec/platform-tpm.md, section 3).
const (
	maxTPMBlob     = 1024
	maxTPMAKPublic = 1024
)

func tpmClaims(ev *evidence.Evidence) (*Claims, error) {
	if len(ev.Blob) > maxTPMBlob {
		return nil, fmt.Errorf("%w: tpm quote is %d bytes, limit %d", ErrEvidence, len(ev.Blob), maxTPMBlob)
	}
	ak := ev.Aux["ak_public"]
	if len(ak) == 0 || len(ak) > maxTPMAKPublic {
		return nil, fmt.Errorf("%w: tpm evidence needs aux ak_public (1..%d bytes)", ErrEvidence, maxTPMAKPublic)
	}
	att, err := tpm2.Unmarshal[tpm2.TPMSAttest](ev.Blob)
	if err != nil {
		return nil, fmt.Errorf("%w: tpm quote: %v", ErrEvidence, err)
	}
	if att.Magic != tpm2.TPMGeneratedValue || att.Type != tpm2.TPMSTAttestQuote {
		return nil, fmt.Errorf("%w: not a TPM-generated quote", ErrEvidence)
	}
	qi, err := att.Attested.Quote()
	if err != nil {
		return nil, fmt.Errorf("%w: tpm quote info: %v", ErrEvidence, err)
	}
	digest := sha256.Sum256(ak)
	name := append([]byte{0x00, 0x0b}, digest[:]...) // TPM_ALG_SHA256 || H(TPMT_PUBLIC)
	return &Claims{
		AttestationType: typeGeneric,
		RootID:          "tpm:ak-name-" + hex.EncodeToString(name),
		TCBVersion:      fmt.Sprintf("%016x", att.FirmwareVersion),
		Measurement:     bytes.Clone(qi.PCRDigest.Buffer),
		ReportData:      nil,
	}, nil
}

// CheckReportData reports whether ev commits to rd: REPORT_DATA equal to
// the 64 bytes for SEV-SNP and TDX, qualifying data equal to
// rd.QualifyingData() for TPM, and both (the runtime claims' user data and
// the vTPM quote's qualifying data) for Azure.
func CheckReportData(ev *evidence.Evidence, c *Claims, rd evidence.ReportData) error {
	want := rd.Bytes()
	if ev.Platform == evidence.PlatformTPM || ev.Platform == evidence.PlatformAzureSNP || ev.Platform == evidence.PlatformAzureTDX {
		att, err := tpm2.Unmarshal[tpm2.TPMSAttest](ev.Blob)
		if err != nil {
			return fmt.Errorf("%w: tpm quote: %v", ErrEvidence, err)
		}
		q := rd.QualifyingData()
		if subtle.ConstantTimeCompare(att.ExtraData.Buffer, q[:]) != 1 {
			return fmt.Errorf("%w: the quote's qualifying data is not SHA-256(REPORT_DATA)", ErrEvidence)
		}
		if ev.Platform == evidence.PlatformTPM {
			return nil
		}
	}
	if subtle.ConstantTimeCompare(c.ReportData, want[:]) != 1 {
		return fmt.Errorf("%w: the evidence does not carry the requested REPORT_DATA", ErrEvidence)
	}
	return nil
}
