package platform

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// TPMClaims are the verified TPM quote fields not in Result itself.
type TPMClaims struct {
	// AKName is the attestation key's TPM Name.
	AKName []byte
	// PCRs are the quoted SHA-256 PCR values, ascending by index.
	PCRs tpmquote.PCRValues
	// Clock, ResetCount, RestartCount and FirmwareVersion are from the
	// signed TPMS_ATTEST. They are not freshness.
	Clock           uint64
	ResetCount      uint32
	RestartCount    uint32
	FirmwareVersion uint64
}

func verifyTPM(ev *evidence.Evidence, rd evidence.ReportData, opts *Options) (*Result, error) {
	if ev.Format != tpmquote.Format {
		return nil, cannotCheck(CheckFormat, fmt.Errorf("%w: tpm format %q", ErrUnsupported, safetext.Clip(ev.Format, 32)))
	}
	if err := checkSimulated(ev, opts); err != nil {
		return nil, err
	}
	if rd.IsZero() {
		return nil, badOptions("expected report data is zero")
	}
	if !opts.AllowUntrustedTPMAK && len(opts.TrustedTPMAKs) == 0 {
		return nil, rejected(CheckTPMAK, fmt.Errorf("%w: no trusted tpm attestation keys configured", ErrUntrustedRoot))
	}
	v, err := tpmquote.Verify(ev, rd, tpmquote.VerifyOpts{
		TrustedAKNames:   opts.TrustedTPMAKs,
		AllowUntrustedAK: opts.AllowUntrustedTPMAK,
		AllowSimulated:   opts.AllowSimulated,
	})
	if err != nil {
		return nil, classifyTPM(err)
	}
	d := v.PCRs.Digest()
	rootID := rootIDTPM
	switch {
	case ev.Simulated && opts.AllowUntrustedTPMAK:
		rootID = rootIDSimTPMAn
	case ev.Simulated:
		rootID = rootIDSimTPM
	case opts.AllowUntrustedTPMAK:
		rootID = rootIDTPMAny
	}
	res := &Result{
		Platform:    evidence.PlatformTPM,
		Format:      ev.Format,
		Simulated:   ev.Simulated,
		ReportData:  rd.Bytes(),
		Measurement: d[:],
		RootID:      rootID + hex.EncodeToString(v.AKName),
		Revocation:  StatusNotApplicable,
		Collateral:  StatusNotApplicable,
		TPM: &TPMClaims{
			AKName:          clone(v.AKName),
			PCRs:            v.PCRs,
			Clock:           v.Attest.Clock,
			ResetCount:      v.Attest.ResetCount,
			RestartCount:    v.Attest.RestartCount,
			FirmwareVersion: v.Attest.FirmwareVersion,
		},
	}
	return res, nil
}

func classifyTPM(err error) error {
	switch {
	case errors.Is(err, tpmquote.ErrUnsupported):
		return cannotCheck(CheckFormat, fmt.Errorf("%w: %w", ErrUnsupported, err))
	case errors.Is(err, tpmquote.ErrSimulated):
		return rejected(CheckSimulated, fmt.Errorf("%w: %w", ErrSimulated, err))
	case errors.Is(err, tpmquote.ErrUntrustedAK):
		return rejected(CheckTPMAK, fmt.Errorf("%w: %w", ErrUntrustedRoot, err))
	case errors.Is(err, tpmquote.ErrAKAttributes):
		return rejected(CheckTPMAK, err)
	case errors.Is(err, tpmquote.ErrBadSignature), errors.Is(err, tpmquote.ErrSignerMismatch):
		return rejected(CheckSignature, err)
	case errors.Is(err, tpmquote.ErrQualifyingData):
		return rejected(CheckReportData, fmt.Errorf("%w: %w", ErrReportData, err))
	case errors.Is(err, tpmquote.ErrOptions):
		return badOptions("%v", err)
	}
	return rejected(CheckParse, err)
}
