// Package enclave is the attester's view of a confidential-computing platform:
// something that produces hardware evidence over exactly 64 bytes of report data.
//
// Backends live in their own packages (enclave/tpm, enclave/sevsnp, enclave/tdx,
// enclave/sim). Optional capabilities are separate small interfaces detected by
// type assertion, in the manner of age's RecipientWithLabels.
//
// Verification code never imports this package: evidence is plain data
// (evidence.Evidence, in wire/evidence) that verify/ checks against vendor
// roots on its own.
package enclave

import (
	"context"
	"errors"

	"github.com/clawea/attester/wire/evidence"
)

// Quoter produces evidence that commits to rd. It is the one thing every backend
// must do.
type Quoter interface {
	Quote(ctx context.Context, rd evidence.ReportData) (*evidence.Evidence, error)
}

// Namer reports the platform name (one of the evidence.Platform constants).
type Namer interface {
	Platform() string
}

// SealingKeyer derives a platform-bound symmetric key for label. The key must
// be the same across restarts of the same workload on the same platform and
// differ for any other label, workload measurement or platform. The returned
// slice must be freshly allocated: the caller copies it into sealed memory and
// zeroes it. It is the capability detect.Capability looks for; package sealed
// consumes the same method set as its own sealed.Keyer.
type SealingKeyer interface {
	SealingKey(ctx context.Context, label string) ([]byte, error)
}

// Measurer reports the launch measurement of the running workload (SEV-SNP
// MEASUREMENT, TDX MRTD, or a PCR digest for TPM).
type Measurer interface {
	LaunchMeasurement(ctx context.Context) ([]byte, error)
}

// ErrNotAvailable is returned by detection and open functions when a platform's
// device is not present on this machine.
var ErrNotAvailable = errors.New("enclave: platform not available")
