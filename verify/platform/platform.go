// Package platform verifies hardware evidence (evidence.Evidence) offline:
// AMD SEV-SNP reports to AMD's roots, Intel TDX quotes to Intel's SGX root,
// and TPM 2.0 quotes to pinned attestation keys. It is the hardware layer of
// the offline verifier (docs/spec/verify-platform.md).
//
// It never touches the network and imports no device code: only the pure
// evidence parsers of package enclave, the pinned simulation roots, and the
// pure verify/validate packages of go-sev-guest and go-tdx-guest.
//
// Verification and policy are separate steps. Verify checks signatures,
// chains, roots, revocation and collateral (when supplied) and REPORT_DATA,
// and returns only verified data; CheckPolicy then judges that data against
// the relying party's reference values. Errors say which class of failure
// happened (ErrRejected: the evidence is bad; ErrCannotCheck: the verifier
// could not decide; ErrPolicy: verified but not acceptable) and which check.
package platform

import (
	"bytes"
	"crypto/subtle"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/teeclaims"
	"github.com/clawea/attester/wire/tpmcred"
)

// Status says whether an optional check ran.
type Status string

const (
	// StatusChecked: the check ran and passed.
	StatusChecked Status = "checked"
	// StatusSkipped: the check did not run because its data was not
	// supplied and the options allowed that.
	StatusSkipped Status = "skipped"
	// statusNotApplicable: the platform has no such check.
	statusNotApplicable Status = "not-applicable"
)

// Options configures Verify. The zero value is the strictest: no simulated
// evidence, revocation and collateral data required where the platform has
// them, and (for TPM) no trusted attestation key at all. Now is required.
type Options struct {
	// Now returns the verification time. It is required: offline
	// verification of old evidence is a deliberate choice of clock, so the
	// caller passes time.Now or a fixed time explicitly.
	Now func() time.Time

	// AllowSimulated accepts evidence marked Simulated, verified against the
	// pinned simulation roots only. Evidence not marked Simulated is always
	// verified against the vendor roots only, so simulation-signed evidence
	// that claims to be real fails.
	AllowSimulated bool

	// Collateral is offline revocation and TCB data (see Collateral); nil
	// means none.
	Collateral *Collateral
	// AllowUncheckedRevocation accepts SEV-SNP and TDX evidence when no CRL
	// for it was supplied; Result.Revocation is then StatusSkipped.
	AllowUncheckedRevocation bool
	// AllowUncheckedGPURevocation accepts NVIDIA GPU evidence although the
	// GPU chain's revocation (NVIDIA OCSP) is not checked, without relaxing
	// the CPU's revocation checks; AllowUncheckedRevocation implies it.
	AllowUncheckedGPURevocation bool
	// AllowUncheckedCollateral accepts TDX evidence when no TCB info and QE
	// identity were supplied; Result.Collateral is then StatusSkipped.
	AllowUncheckedCollateral bool

	// TrustedTPMAKs are the TPM Names of attestation keys whose provenance
	// the operator established (docs/spec/platform-tpm.md, section 2).
	TrustedTPMAKs [][]byte
	// AllowUntrustedTPMAK accepts any TPM attestation key. The result then
	// shows only that some key with TPM attestation-key attributes signed
	// the quote; Result.RootID says "tpm-ak-unpinned". It must not be
	// combined with TrustedTPMAKs.
	AllowUntrustedTPMAK bool
	// TPMAKCertifications are credential-activation records
	// (wire/tpmcred); each makes its AK trusted while its EK certificate
	// chains to one of TPMEKRoots at Now (docs/spec/platform-tpm.md,
	// section 2.2). See tpm.go.
	TPMAKCertifications []*tpmcred.Certification
	// TPMEKRoots are the TPM manufacturer roots for TPMAKCertifications.
	TPMEKRoots *x509.CertPool
	// RequireTPMEKCertifiedAK refuses an AK trusted only by TrustedTPMAKs.
	RequireTPMEKCertifiedAK bool
	// TrustGCEAKCerts makes an AK trusted when the evidence carries its
	// certificate (Aux "ak_cert", read from the vTPM's NV) and it chains at
	// Now to Google's embedded EK/AK CA root; never for simulated evidence.
	// TPMAKCARoots are other AK CA roots, for any evidence (see akcert.go).
	TrustGCEAKCerts bool
	TPMAKCARoots    *x509.CertPool

	// CertCache, when set, remembers verified SEV-SNP endorsement chains so
	// that repeated verifications of the same chip skip chain verification.
	// The report signature is verified every time.
	CertCache *CertCache

	// anyReportData skips the REPORT_DATA comparison: raw evidence
	// verified without a nonce (raw.go). Only this package sets it.
	anyReportData bool
	// allowQuoteV5 admits a DCAP version 5 TDX quote (tdxFormatV5): raw
	// evidence only (raw.go); attestation evidence carries version 4.
	allowQuoteV5 bool
}

// Result is what Verify established. Every field was verified; nothing is
// copied from the evidence unchecked.
type Result struct {
	// Platform is the evidence platform (evidence.PlatformSEVSNP, ...).
	Platform string
	// Format is the evidence format label.
	Format string
	// Simulated is true for evidence verified against simulation roots.
	// Such a result proves nothing about hardware.
	Simulated bool
	// ReportData is the verified REPORT_DATA (for TPM: the REPORT_DATA whose
	// SHA-256 the quote's qualifying data equals).
	ReportData [64]byte
	// Measurement is the launch measurement: SEV-SNP MEASUREMENT (48
	// bytes), TDX MRTD (48 bytes) or the TPM PCR digest (32 bytes).
	Measurement []byte
	// HostData is SEV-SNP HOST_DATA (32 bytes); nil elsewhere.
	HostData []byte
	// ChipID is the SEV-SNP CHIP_ID (64 bytes, bound to the VCEK); nil
	// elsewhere or when the firmware masks it.
	ChipID []byte
	// TCB is the TCB version in canonical text: SEV-SNP lowercase hex of the
	// 64-bit REPORTED_TCB, TDX lowercase hex of TEE_TCB_SVN; empty for TPM.
	TCB string
	// Debug reports a debuggable guest (SEV-SNP POLICY.DEBUG, TDX
	// TD_ATTRIBUTES.DEBUG). CheckPolicy refuses it unless allowed.
	Debug bool
	// RootID names the trust anchor the evidence verified to, e.g.
	// "amd-ark-milan", "sim-amd-ark-milan", "intel-sgx-root",
	// "sim-intel-sgx-root", "tpm-ak:000b...".
	RootID string
	// Revocation and Collateral say whether those checks ran.
	Revocation Status
	Collateral Status
	// TCBStatus is the TDX TCB status of the TCB level (or TDX module
	// identity level) that matched in checked collateral (e.g. "UpToDate",
	// "OutOfDate"); QETCBStatus that of the quoting enclave's level in the
	// QE identity; TCBAdvisoryIDs the Intel advisory IDs of both levels,
	// sorted, without duplicates. All empty when collateral was not
	// checked. A Revoked level is rejected by Verify; which other statuses
	// and advisories are acceptable is the Policy's decision.
	TCBStatus      string
	QETCBStatus    string
	TCBAdvisoryIDs []string

	// Boot is the boot chain replayed from the evidence's event log against
	// the verified registers (TPM PCRs 0-9 quoted, TDX RTMRs); nil when the
	// evidence carries no event log.
	Boot *BootChain

	// SEVSNP, TDX and TPM hold the platform's other verified fields.
	SEVSNP *SEVSNPClaims
	TDX    *TDXClaims
	TPM    *TPMClaims
	// GPU holds the verified fields of NVIDIA GPU evidence.
	GPU *GPUClaims
	// Azure holds the verified Azure fields (the hardware report's fields
	// are in SEVSNP or TDX).
	Azure *AzureClaims
	// TEEClaims are the TEE claims (teeclaims.DeriveWith) of the verified
	// SEV-SNP evidence, derived from the parse the check made; nil for the
	// other platforms (Azure SEV-SNP included: its claims are not the
	// hardware report's alone), or when they cannot be derived.
	TEEClaims *teeclaims.Claims

	// snp keeps the verified report for go-sev-guest's validate package.
	snp *snpVerified
}

// Verify checks ev against the vendor roots (or, with AllowSimulated, the
// simulation roots for simulated evidence) and against want, the REPORT_DATA
// the verifier recomputed. It returns only verified data. Errors wrap
// ErrRejected, ErrCannotCheck or ErrBadOptions, and an *Error names the
// failing check. Verify never uses the network.
func Verify(ev *evidence.Evidence, want evidence.ReportData, opts Options) (*Result, error) {
	if want.IsZero() {
		return nil, badOptions("expected report data is zero (not built by evidence.NewReportData)")
	}
	return verifyRaw(ev, want.Bytes(), want, opts)
}

// verifyRaw is Verify over raw expected report data (rd, when not zero, is
// the same value as an evidence.ReportData; TPM verification needs it). The
// public API takes only evidence.ReportData; tests use this to check the
// vendors' real samples, whose REPORT_DATA no NewReportData input produces.
func verifyRaw(ev *evidence.Evidence, want [64]byte, rd evidence.ReportData, opts Options) (res *Result, err error) {
	if opts.Now == nil {
		return nil, badOptions("options: Now is required")
	}
	if opts.AllowUntrustedTPMAK && len(opts.TrustedTPMAKs) > 0 {
		return nil, badOptions("options: AllowUntrustedTPMAK and TrustedTPMAKs are contradictory")
	}
	if ev == nil {
		return nil, rejected(checkParse, fmt.Errorf("no evidence"))
	}
	now := opts.Now()
	err = guard(checkParse, func() error {
		var err error
		switch ev.Platform {
		case evidence.PlatformSEVSNP:
			res, err = verifySEVSNP(ev, want, now, &opts)
		case evidence.PlatformTDX:
			res, err = verifyTDX(ev, want, now, &opts)
		case evidence.PlatformTPM:
			res, err = verifyTPM(ev, rd, &opts)
		case evidence.PlatformNVIDIAGPU:
			res, err = verifyNVIDIAGPU(ev, rd, now, &opts)
		case evidence.PlatformAzureSNP, evidence.PlatformAzureTDX:
			res, err = verifyAzureEvidence(ev, rd, now, &opts)
		default:
			err = cannotCheck(checkFormat, fmt.Errorf("%w: platform %q", errUnsupported, safetext.Clip(ev.Platform, 32)))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// refuseUnallowedSimulated applies the AllowSimulated rule (check
// CheckSimulated).
func refuseUnallowedSimulated(ev *evidence.Evidence, opts *Options) error {
	if ev.Simulated && !opts.AllowSimulated {
		return rejected(CheckSimulated, ErrSimulated)
	}
	return nil
}

// admitQuote runs the checks that open the TPM and Azure verifications, in
// this order: ev is in format (kind names the platform in the error),
// simulated evidence is allowed, and rd is not zero.
func admitQuote(ev *evidence.Evidence, format, kind string, rd evidence.ReportData, opts *Options) error {
	if ev.Format != format {
		return cannotCheck(checkFormat, fmt.Errorf("%w: %s format %q", errUnsupported, kind, safetext.Clip(ev.Format, 32)))
	}
	if err := refuseUnallowedSimulated(ev, opts); err != nil {
		return err
	}
	if rd.IsZero() {
		return badOptions("expected report data is zero")
	}
	return nil
}

// checkReportData compares the verified REPORT_DATA with want, unless opts
// verifies raw evidence without a nonce.
func checkReportData(got []byte, want [64]byte, opts *Options) error {
	if opts.anyReportData {
		return nil
	}
	if len(got) != 64 || subtle.ConstantTimeCompare(got, want[:]) != 1 {
		return rejected(CheckReportData, ErrReportData)
	}
	return nil
}

func clone(b []byte) []byte { return bytes.Clone(b) }
