package platform

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	"github.com/google/go-sev-guest/validate"
)

// TCBStatusUpToDate is the only TDX TCB status accepted by default.
const TCBStatusUpToDate = "UpToDate"

// Policy is the relying party's judgement of verified evidence. The zero
// value is the strictest: no measurement is accepted, debug guests are
// refused, the SEV-SNP guest must run at VMPL 0 without a migration agent,
// and a checked TDX TCB status must be UpToDate.
type Policy struct {
	// Measurements are the accepted launch measurements (Result.Measurement).
	// Empty accepts none unless AllowAnyMeasurement is set.
	Measurements [][]byte
	// AllowAnyMeasurement skips the measurement check (tests, enrollment).
	AllowAnyMeasurement bool
	// AllowDebug accepts debuggable guests. Their memory is readable by the
	// host: never set it for production verdicts.
	AllowDebug bool

	// MinSEVSNPTCB is the component-wise minimum REPORTED_TCB.
	MinSEVSNPTCB kds.TCBParts
	// SEVSNPVMPL is the required VMPL (0 unless set).
	SEVSNPVMPL int
	// AllowSEVSNPMigrationAgent accepts POLICY.MIGRATE_MA.
	AllowSEVSNPMigrationAgent bool
	// AllowSEVSNPProvisionalFirmware accepts committed TCB and firmware
	// versions lower than the current ones.
	AllowSEVSNPProvisionalFirmware bool

	// MinTDXTeeTCBSVN is the component-wise minimum TEE_TCB_SVN.
	MinTDXTeeTCBSVN [16]byte
	// TCBStatuses are the accepted TDX TCB statuses when collateral was
	// checked (Result.TCBStatus); empty means only UpToDate. Note that
	// go-tdx-guest already refuses other statuses during Verify.
	TCBStatuses []string
}

// CheckPolicy judges r, which must come from Verify, against p. It returns
// nil or an error wrapping ErrPolicy that names the failing check.
func CheckPolicy(r *Result, p Policy) error {
	if r == nil {
		return policyErr(CheckOptions, errors.New("no result"))
	}
	if !p.AllowAnyMeasurement {
		if !slices.ContainsFunc(p.Measurements, func(m []byte) bool { return bytes.Equal(m, r.Measurement) }) {
			return policyErr(CheckMeasurement, errors.New("measurement is not an accepted reference value"))
		}
	}
	if r.Debug && !p.AllowDebug {
		return policyErr(CheckDebug, errors.New("debuggable guest refused"))
	}
	switch r.Platform {
	case evidence.PlatformSEVSNP:
		return checkSEVSNPPolicy(r, p)
	case evidence.PlatformTDX:
		return checkTDXPolicy(r, p)
	case evidence.PlatformTPM:
		if r.TPM == nil {
			return policyErr(CheckOptions, errors.New("result was not produced by Verify"))
		}
		return nil
	}
	return policyErr(CheckOptions, fmt.Errorf("unknown platform %q", safetext.Clip(r.Platform, 32)))
}

func checkSEVSNPPolicy(r *Result, p Policy) error {
	if r.snp == nil || r.snp.att == nil {
		return policyErr(CheckOptions, errors.New("result was not produced by Verify"))
	}
	if p.SEVSNPVMPL < 0 || p.SEVSNPVMPL > 3 {
		return policyErr(CheckOptions, fmt.Errorf("vmpl %d out of range", p.SEVSNPVMPL))
	}
	vmpl := p.SEVSNPVMPL
	o := &validate.Options{
		// Maximum acceptable guest policy: SMT is not policed here.
		GuestPolicy: abi.SnpPolicy{
			SMT:       true,
			Debug:     p.AllowDebug,
			MigrateMA: p.AllowSEVSNPMigrationAgent,
		},
		ReportData:                r.ReportData[:],
		MinimumTCB:                p.MinSEVSNPTCB,
		PermitProvisionalFirmware: p.AllowSEVSNPProvisionalFirmware,
		VMPL:                      &vmpl,
	}
	err := guard(CheckGuestPolicy, func() error { return validate.SnpAttestation(r.snp.att, o) })
	if err != nil {
		if errors.Is(err, ErrInternal) {
			return policyErr(CheckGuestPolicy, ErrInternal)
		}
		return policyErr(CheckGuestPolicy, err)
	}
	return nil
}

func checkTDXPolicy(r *Result, p Policy) error {
	if r.TDX == nil {
		return policyErr(CheckOptions, errors.New("result was not produced by Verify"))
	}
	for i, min := range p.MinTDXTeeTCBSVN {
		if r.TDX.Body.TeeTcbSvn[i] < min {
			return policyErr(CheckTCB, fmt.Errorf("tee_tcb_svn component %d is %d, minimum %d", i, r.TDX.Body.TeeTcbSvn[i], min))
		}
	}
	if r.Collateral == StatusChecked {
		ok := []string{TCBStatusUpToDate}
		if len(p.TCBStatuses) > 0 {
			ok = p.TCBStatuses
		}
		if !slices.Contains(ok, r.TCBStatus) {
			return policyErr(CheckTCBStatus, fmt.Errorf("tcb status %q not accepted", safetext.Clip(r.TCBStatus, 32)))
		}
	}
	return nil
}
