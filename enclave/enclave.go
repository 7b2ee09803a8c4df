// Package enclave is the attester's view of a confidential-computing platform:
// something that produces hardware evidence over exactly 64 bytes of report data.
//
// Backends live in their own packages (enclave/tpm, enclave/sevsnp, enclave/tdx,
// enclave/sim). Optional capabilities are separate small interfaces detected by
// type assertion, in the manner of age's RecipientWithLabels.
//
// Verification code never imports this package's backends: evidence is plain data
// (Evidence) that verify/ checks against vendor roots on its own.
package enclave

import (
	"context"
	"errors"
)

// Platform names, as they appear in Evidence.Platform.
const (
	PlatformSEVSNP = "sev-snp"
	PlatformTDX    = "tdx"
	PlatformTPM    = "tpm"
)

// Quoter produces evidence that commits to rd. It is the one thing every backend
// must do.
type Quoter interface {
	Quote(ctx context.Context, rd ReportData) (*Evidence, error)
}

// Namer reports the platform name (one of the Platform constants).
type Namer interface {
	Platform() string
}

// SealingKeyer derives a platform-bound symmetric key for label. The key must
// be the same across restarts of the same workload on the same platform and
// differ for any other label, workload measurement or platform. The returned
// slice must be freshly allocated: the caller copies it into sealed memory and
// zeroes it.
type SealingKeyer interface {
	SealingKey(ctx context.Context, label string) ([]byte, error)
}

// Measurer reports the launch measurement of the running workload (SEV-SNP
// MEASUREMENT, TDX MRTD, or a PCR digest for TPM).
type Measurer interface {
	LaunchMeasurement(ctx context.Context) ([]byte, error)
}

// TCBReporter reports the platform's trusted computing base version.
type TCBReporter interface {
	TCB(ctx context.Context) (*TCBInfo, error)
}

// TCBInfo is a platform's TCB version in a platform-neutral form.
type TCBInfo struct {
	// Version is the platform's TCB version in its canonical text form
	// (SEV-SNP: hex of the 64-bit TCB_VERSION; TDX: hex of TEE_TCB_SVN).
	Version string
	// Debug reports whether the guest policy allows debugging.
	Debug bool
}

// Evidence is hardware evidence in a transportable form. Every byte slice is
// the platform's own wire format: nothing here is re-encoded, so a verifier
// can check signatures over exactly these bytes.
type Evidence struct {
	// Platform is one of the Platform constants.
	Platform string `json:"platform"`
	// Simulated is true when the evidence was produced by a simulator or a
	// fake device signed by test roots. A production verifier refuses it.
	Simulated bool `json:"simulated"`
	// Format is a versioned label for Blob's encoding, e.g.
	// "sev-snp/attestation-report" or "tdx/quote-v4" or "tpm2/quote".
	Format string `json:"format"`
	// Blob is the signed platform evidence: the SEV-SNP attestation report,
	// the TDX quote, or the TPM2B_ATTEST contents of a TPM quote.
	Blob []byte `json:"blob"`
	// Signature is a detached signature over Blob where the platform has one
	// (the TPMT_SIGNATURE of a TPM quote); empty otherwise.
	Signature []byte `json:"signature,omitempty"`
	// CertChain holds DER certificates, leaf first: VCEK/VLEK, ASK, ARK for
	// SEV-SNP; the PCK chain for TDX (when not inside the quote); the EK
	// certificate for TPM.
	CertChain [][]byte `json:"cert_chain,omitempty"`
	// Aux holds platform-specific extras under documented names, e.g.
	// "ak_public" (TPMT_PUBLIC), "pcr_values", "event_log", "cert_table".
	Aux map[string][]byte `json:"aux,omitempty"`
}

// ErrNotAvailable is returned by detection and open functions when a platform's
// device is not present on this machine.
var ErrNotAvailable = errors.New("enclave: platform not available")
