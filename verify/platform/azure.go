package platform

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/hclreport"
	"github.com/clawea/attester/wire/tdxquote"
	"github.com/clawea/attester/wire/tpmquote"
)

// Azure check names (Error.Check; docs/spec/verify-platform.md).
const (
	// checkHCLBinding: the hardware report does not bind the HCL runtime
	// claims (SHA-256 of the claims is not the first 32 bytes of
	// REPORT_DATA), or the HCL report is not from the paravisor.
	checkHCLBinding = "hcl-binding"
	// checkPCRs: the PCR values are not the ones the quote signed.
	checkPCRs = "pcrs"
)

// userDataSize is the size of the HCL user data (NV index 0x01400002).
const userDataSize = 64

// AzureClaims are the verified Azure-specific fields.
type AzureClaims struct {
	// HCLVersion is the HCL report header version.
	HCLVersion uint32
	// UserData is the user data in the verified runtime claims.
	UserData [userDataSize]byte
	// AK is the vTPM attestation key from the verified runtime claims.
	AK *rsa.PublicKey
	// PCRs are the SHA-256 PCRs the AK quoted, ascending by index.
	PCRs tpmquote.PCRValues
	// QuoteNonce is the quote's qualifying data (extraData).
	QuoteNonce []byte
	// TrusteeVersion is the version of Trustee JSON evidence (0, 1 or 2;
	// verifyTrusteeAzure only).
	TrusteeVersion int
	// UserDataBound reports whether UserData was compared with the
	// expected value: always for evidence.Evidence; for Trustee evidence
	// from version 2 on, given a nonce (versions 0 and 1 leave it zero, so
	// the hardware report is bound to the quote only through the AK).
	UserDataBound bool
}

// azureInput is Azure evidence in pieces, from an evidence.Evidence or from
// Trustee's JSON (trustee.go).
type azureInput struct {
	platform  string
	simulated bool
	hcl       []byte
	attest    []byte // TPMS_ATTEST
	sig       []byte // raw RSASSA signature
	pcrs      tpmquote.PCRValues
	vcek      []byte // SEV-SNP: the VCEK, DER
	tdQuote   []byte // TDX
}

// azureWant is what the caller expects the evidence to commit to.
type azureWant struct {
	// nonce is the quote's expected qualifying data; nil (raw evidence
	// without a nonce only) leaves it unchecked.
	nonce []byte
	// userData, when not nil, is the expected runtime claims user data.
	userData *[userDataSize]byte
}

// verifyAzureEvidence verifies evidence.Evidence of an Azure platform
// against rd: the claims' user data must be rd and the quote's qualifying
// data rd.QualifyingData().
func verifyAzureEvidence(ev *evidence.Evidence, rd evidence.ReportData, now time.Time, opts *Options) (*Result, error) {
	if err := admitQuote(ev, hclreport.Format, "azure", rd, opts); err != nil {
		return nil, err
	}
	in := &azureInput{platform: ev.Platform, simulated: ev.Simulated, hcl: ev.Aux[hclreport.AuxReport], attest: ev.Blob, sig: ev.Signature, tdQuote: ev.Aux[hclreport.AuxTDQuote]}
	allowed := map[string]bool{hclreport.AuxReport: true, tpmquote.AuxPCRValues: true, hclreport.AuxTDQuote: ev.Platform == evidence.PlatformAzureTDX}
	for k := range ev.Aux {
		if !allowed[k] {
			return nil, rejected(checkParse, fmt.Errorf("unknown aux field %q", safetext.Clip(k, 32)))
		}
	}
	switch {
	case ev.Platform == evidence.PlatformAzureSNP && len(ev.CertChain) == 1:
		in.vcek = ev.CertChain[0]
	case ev.Platform == evidence.PlatformAzureTDX && len(ev.CertChain) == 0:
	default:
		return nil, rejected(checkParse, fmt.Errorf("%s evidence carries %d certificates", ev.Platform, len(ev.CertChain)))
	}
	pcrs, err := tpmquote.ParsePCRValues(ev.Aux[tpmquote.AuxPCRValues])
	if err != nil {
		return nil, rejected(checkParse, fmt.Errorf("pcr values: %w", err))
	}
	in.pcrs = pcrs
	b, q := rd.Bytes(), rd.QualifyingData()
	res, err := verifyAzure(in, azureWant{nonce: q[:], userData: &b}, now, opts)
	if err != nil {
		return nil, err
	}
	res.Format = ev.Format
	res.ReportData = b
	return res, nil
}

// verifyAzure runs the checks of docs/spec/platform-azure.md, section 3, in
// order: HCL report, AK signature over the quote, the quote's nonce and
// PCRs, the hardware evidence to the vendor root with the runtime claims'
// digest in REPORT_DATA, then the user data.
func verifyAzure(in *azureInput, want azureWant, now time.Time, opts *Options) (*Result, error) {
	if len(in.hcl) == 0 {
		return nil, rejected(checkParse, fmt.Errorf("%w: no hcl report", tpmquote.ErrMissingAuxField))
	}
	hcl, err := hclreport.Parse(in.hcl)
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	if hcl.Platform() != in.platform {
		return nil, rejected(checkParse, fmt.Errorf("the hcl report is %s, not %s", hcl.Platform(), in.platform))
	}
	claims, err := hclreport.ParseClaims(hcl.Claims)
	if err != nil {
		return nil, rejected(checkParse, err)
	}
	att, err := verifyAzureQuote(in, claims.AK, want.nonce)
	if err != nil {
		return nil, err
	}

	digest := sha256.Sum256(hcl.Claims)
	res, err := verifyAzureHardware(in, hcl, digest, now, opts)
	if err != nil {
		return nil, err
	}
	if want.userData != nil && subtle.ConstantTimeCompare(claims.UserData[:], want.userData[:]) != 1 {
		return nil, rejected(CheckReportData, fmt.Errorf("%w: the hcl runtime claims' user-data is not the expected report data", ErrReportData))
	}
	res.Platform = in.platform
	res.Format = hclreport.Format
	res.Azure = &AzureClaims{HCLVersion: hcl.Version, UserData: claims.UserData, AK: claims.AK, PCRs: in.pcrs,
		QuoteNonce: bytes.Clone(att.ExtraData), UserDataBound: want.userData != nil}
	return res, nil
}

// verifyAzureQuote checks the AK's signature over the quote, its nonce and
// that the PCR values are the quoted ones.
func verifyAzureQuote(in *azureInput, ak *rsa.PublicKey, nonce []byte) (*tpmquote.Attest, error) {
	d := sha256.Sum256(in.attest)
	if rsa.VerifyPKCS1v15(ak, crypto.SHA256, d[:], in.sig) != nil {
		return nil, rejected(checkSignature, errors.New("the tpm quote is not signed by the hcl report's attestation key"))
	}
	att, err := tpmquote.ParseAttest(in.attest)
	if err != nil {
		return nil, rejected(checkParse, fmt.Errorf("tpm quote: %w", err))
	}
	if nonce != nil && subtle.ConstantTimeCompare(att.ExtraData, nonce) != 1 {
		return nil, rejected(CheckReportData, fmt.Errorf("%w: the tpm quote's nonce is not the expected one", ErrReportData))
	}
	if len(in.pcrs) != len(att.PCRs) {
		return nil, rejected(checkPCRs, fmt.Errorf("%d pcr values for %d quoted pcrs", len(in.pcrs), len(att.PCRs)))
	}
	for i, p := range in.pcrs {
		if p.Index != att.PCRs[i] {
			return nil, rejected(checkPCRs, errors.New("pcr values are not the quoted selection"))
		}
	}
	if pd := in.pcrs.Digest(); subtle.ConstantTimeCompare(pd[:], att.PCRDigest) != 1 {
		return nil, rejected(checkPCRs, errors.New("the pcr values do not hash to the quoted pcr digest"))
	}
	return att, nil
}

// snpReportDataOffset is REPORT_DATA's offset in an SEV-SNP report;
// tdReportDataOffset in a TDREPORT (in its REPORTMACSTRUCT).
const (
	snpReportDataOffset = 0x50
	tdReportDataOffset  = 128
)

// verifyAzureHardware verifies the hardware evidence of the HCL report:
// the SEV-SNP report with the VCEK to AMD's root (sevsnp.go) or the TD
// quote to Intel's (tdx.go), that its REPORT_DATA starts with digest, the
// SHA-256 of the runtime claims, and that it is the paravisor's: an SEV-SNP
// report from VMPL 0, a TD quote over the HCL report's TD report.
func verifyAzureHardware(in *azureInput, hcl *hclreport.Report, digest [32]byte, now time.Time, opts *Options) (*Result, error) {
	if hcl.Platform() == evidence.PlatformAzureSNP && len(in.vcek) == 0 {
		return nil, cannotCheck(checkChain, fmt.Errorf("%w: the vcek that signed the snp report", errMissingCollateral))
	}
	ev, err := hcl.Hardware(in.simulated, in.vcek, in.tdQuote)
	switch {
	case errors.Is(err, tdxquote.ErrUnsupported):
		return nil, cannotCheck(checkFormat, fmt.Errorf("%w: %w", errUnsupported, err))
	case err != nil:
		return nil, rejected(checkParse, err)
	}
	// Only the first 32 bytes of REPORT_DATA are defined (the claims'
	// digest); the rest is compared with itself.
	var want [64]byte
	copy(want[:], digest[:])
	var res *Result
	if ev.Platform == evidence.PlatformSEVSNP {
		copy(want[32:], hcl.HW[snpReportDataOffset+32:snpReportDataOffset+64])
		res, err = verifySEVSNP(ev, want, now, opts)
	} else {
		q, perr := tdxquote.Parse(ev.Blob)
		if perr != nil {
			return nil, rejected(checkParse, perr)
		}
		copy(want[32:], q.Body.ReportData[32:])
		res, err = verifyTDX(ev, want, now, opts)
	}
	if errors.Is(err, ErrReportData) {
		return nil, rejected(checkHCLBinding, errors.New("the hardware report's report_data does not start with sha-256 of the hcl runtime claims"))
	}
	if err != nil {
		return nil, err
	}
	// TEEClaims were derived from the hardware evidence alone: the Azure
	// evidence's claims are not those (teeclaims derives them itself).
	res.TEEClaims = nil
	if res.SEVSNP != nil && res.SEVSNP.VMPL != 0 {
		return nil, rejected(checkHCLBinding, fmt.Errorf("the snp report is from vmpl %d, not the paravisor's vmpl 0", res.SEVSNP.VMPL))
	}
	if res.TDX != nil && !bytes.Equal(hcl.HW[tdReportDataOffset:tdReportDataOffset+64], res.ReportData[:]) {
		return nil, rejected(checkHCLBinding, errors.New("the td quote is not over the hcl report's td report"))
	}
	return res, nil
}
