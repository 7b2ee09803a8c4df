package platform

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/wire/evidence"
	"github.com/google/go-sev-guest/abi"
	"github.com/google/go-sev-guest/kds"
	"github.com/google/go-sev-guest/validate"
)

// Intel TCB statuses (TCB info and QE identity tcbLevels[].tcbStatus).
// TCBStatusUpToDate is the only one accepted by default; tcbStatusRevoked
// is never accepted (Verify rejects it).
const (
	TCBStatusUpToDate                          = "UpToDate"
	tcbStatusSWHardeningNeeded                 = "SWHardeningNeeded"
	tcbStatusConfigurationNeeded               = "ConfigurationNeeded"
	tcbStatusConfigurationAndSWHardeningNeeded = "ConfigurationAndSWHardeningNeeded"
	tcbStatusOutOfDate                         = "OutOfDate"
	tcbStatusOutOfDateConfigurationNeeded      = "OutOfDateConfigurationNeeded"
	tcbStatusRevoked                           = "Revoked"
)

// knownTCBStatuses are the statuses Verify reports; any other is rejected.
var knownTCBStatuses = []string{TCBStatusUpToDate, tcbStatusSWHardeningNeeded, tcbStatusConfigurationNeeded,
	tcbStatusConfigurationAndSWHardeningNeeded, tcbStatusOutOfDate, tcbStatusOutOfDateConfigurationNeeded, tcbStatusRevoked}

// AcceptableTCBStatus reports whether s may appear in Policy.TCBStatuses:
// a known status other than Revoked.
func AcceptableTCBStatus(s string) bool {
	return s != tcbStatusRevoked && slices.Contains(knownTCBStatuses, s)
}

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
	// TCBStatuses are the TDX TCB statuses accepted, besides UpToDate, for
	// both the TD's level (Result.TCBStatus) and the QE's level
	// (Result.QETCBStatus) when collateral was checked; empty means
	// UpToDate only. Revoked is never accepted.
	TCBStatuses []string
	// AllowedAdvisoryIDs are the Intel security advisories (e.g.
	// "INTEL-SA-00837") the relying party accepts on a matching TCB level
	// (Result.TCBAdvisoryIDs); any other listed advisory is refused. Empty
	// accepts none.
	AllowedAdvisoryIDs []string

	// GPUMeasurements pins NVIDIA GPU measurement blocks by index
	// (GPUClaims.Measurements). GPU evidence passes the measurement check
	// when its Measurement (SHA-384 of the measurement record) is in
	// Measurements, or when GPUMeasurements is not empty and every pinned
	// index is present with the pinned value.
	GPUMeasurements map[int][]byte

	// BootFirmware, BootKernel, BootCommandLine and BootInitrd pin the
	// reference values of the boot chain replayed from the evidence's event
	// log (Result.Boot): each one not empty requires a replayed value in
	// its list.
	BootFirmware, BootKernel, BootCommandLine, BootInitrd [][]byte
}

// CheckPolicy judges r, which must come from Verify, against p. It returns
// nil or an error wrapping ErrPolicy that names the failing check.
func CheckPolicy(r *Result, p Policy) error {
	if r == nil {
		return policyErr(checkOptions, errors.New("no result"))
	}
	if !p.AllowAnyMeasurement && r.Platform == evidence.PlatformNVIDIAGPU {
		if err := checkGPUMeasurements(r, p); err != nil {
			return err
		}
	} else if !p.AllowAnyMeasurement {
		if !slices.ContainsFunc(p.Measurements, func(m []byte) bool { return bytes.Equal(m, r.Measurement) }) {
			return policyErr(CheckMeasurement, fmt.Errorf("measurement %s (%d bytes, b64u) is not in Measurements", b64u.Encode(r.Measurement), len(r.Measurement)))
		}
		if err := checkTPMSelection(r); err != nil {
			return err
		}
	}
	if r.Debug && !p.AllowDebug {
		return policyErr(CheckDebug, fmt.Errorf("debuggable %s guest refused", r.Platform))
	}
	if err := checkBootPolicy(r, p); err != nil {
		return err
	}
	switch r.Platform {
	case evidence.PlatformSEVSNP, evidence.PlatformAzureSNP:
		return checkSEVSNPPolicy(r, p)
	case evidence.PlatformTDX, evidence.PlatformAzureTDX:
		return checkTDXPolicy(r, p)
	case evidence.PlatformTPM:
		if r.TPM == nil {
			return policyErr(checkOptions, errors.New("result was not produced by Verify"))
		}
		return nil
	case evidence.PlatformNVIDIAGPU:
		return nil
	}
	return policyErr(checkOptions, fmt.Errorf("unknown platform %q", safetext.Clip(r.Platform, 32)))
}

// checkTPMSelection refuses a TPM measurement matched in Measurements
// when the quote's PCR selection is not PCRs 0..n-1. The measurement (the
// TPM's pcrDigest) hashes the quoted values in index order, not their
// indices: a quote of other PCRs into which the genuine events were
// replayed (PCRs nothing extended, or the resettable 16 and 23) has the
// genuine digest while a PCR of the genuine selection holds another boot.
// With PCRs 0..n-1 the digest fixes the value of every PCR it covers.
func checkTPMSelection(r *Result) error {
	if r.Platform != evidence.PlatformTPM || r.TPM == nil {
		return nil
	}
	for i, v := range r.TPM.PCRs {
		if v.Index != i {
			return policyErr(CheckMeasurement, fmt.Errorf("the tpm quote selects pcrs %v, not pcrs 0..%d: its measurement (the pcr digest) does not bind which pcrs hold the values, so Measurements cannot pin it (quote pcrs 0..n-1, as the producers' default 0-7)",
				r.TPM.PCRs.Indices(), len(r.TPM.PCRs)-1))
		}
	}
	return nil
}

func checkSEVSNPPolicy(r *Result, p Policy) error {
	if r.snp == nil || r.snp.att == nil {
		return policyErr(checkOptions, errors.New("result was not produced by Verify"))
	}
	if p.SEVSNPVMPL < 0 || p.SEVSNPVMPL > 3 {
		return policyErr(checkOptions, fmt.Errorf("vmpl %d out of range", p.SEVSNPVMPL))
	}
	vmpl := p.SEVSNPVMPL
	o := &validate.Options{
		// Maximum acceptable guest policy: SMT is not policed here.
		GuestPolicy: abi.SnpPolicy{
			SMT:       true,
			Debug:     p.AllowDebug,
			MigrateMA: p.AllowSEVSNPMigrationAgent,
		},
		// The report's own REPORT_DATA, which Verify compared (on Azure
		// it binds the HCL claims; Result.ReportData is the run binding).
		ReportData:                r.snp.att.GetReport().GetReportData(),
		MinimumTCB:                p.MinSEVSNPTCB,
		PermitProvisionalFirmware: p.AllowSEVSNPProvisionalFirmware,
		VMPL:                      &vmpl,
	}
	err := guard(CheckGuestPolicy, func() error { return validate.SnpAttestation(r.snp.att, o) })
	if err != nil {
		if errors.Is(err, errInternal) {
			return policyErr(CheckGuestPolicy, errInternal)
		}
		return policyErr(CheckGuestPolicy, err)
	}
	return nil
}

func checkTDXPolicy(r *Result, p Policy) error {
	if r.TDX == nil {
		return policyErr(checkOptions, errors.New("result was not produced by Verify"))
	}
	for i, min := range p.MinTDXTeeTCBSVN {
		if r.TDX.Body.TeeTcbSvn[i] < min {
			return policyErr(CheckTCB, fmt.Errorf("tee_tcb_svn component %d is %d, minimum %d", i, r.TDX.Body.TeeTcbSvn[i], min))
		}
	}
	if r.Collateral == StatusChecked {
		for _, st := range []struct{ what, status string }{{"tdx tcb status", r.TCBStatus}, {"qe tcb status", r.QETCBStatus}} {
			if st.status == TCBStatusUpToDate {
				continue
			}
			if st.status == tcbStatusRevoked || !slices.Contains(p.TCBStatuses, st.status) {
				return policyErr(CheckTCBStatus, fmt.Errorf("%s is %q, not accepted by TCBStatuses %q", st.what, safetext.Clip(st.status, 48), p.TCBStatuses))
			}
		}
		for _, a := range r.TCBAdvisoryIDs {
			if !slices.Contains(p.AllowedAdvisoryIDs, a) {
				return policyErr(CheckTCBAdvisory, fmt.Errorf("tcb level lists advisory %q, not in AllowedAdvisoryIDs %q", safetext.Clip(a, 64), p.AllowedAdvisoryIDs))
			}
		}
	}
	return nil
}

// checkGPUMeasurements applies Measurements or GPUMeasurements to a GPU
// result.
func checkGPUMeasurements(r *Result, p Policy) error {
	if r.GPU == nil {
		return policyErr(checkOptions, errors.New("result was not produced by Verify"))
	}
	if slices.ContainsFunc(p.Measurements, func(m []byte) bool { return bytes.Equal(m, r.Measurement) }) {
		return nil
	}
	if len(p.GPUMeasurements) == 0 {
		return policyErr(CheckMeasurement, fmt.Errorf("gpu measurement %s (sha-384 of the measurement record, b64u) is not in Measurements and no gpu measurement index is pinned", b64u.Encode(r.Measurement)))
	}
	for _, i := range slices.Sorted(maps.Keys(p.GPUMeasurements)) {
		got, ok := r.GPU.Measurements[i]
		if !ok {
			return policyErr(CheckMeasurement, fmt.Errorf("gpu measurement index %d is pinned but the report has no such block", i))
		}
		if !bytes.Equal(got, p.GPUMeasurements[i]) {
			return policyErr(CheckMeasurement, fmt.Errorf("gpu measurement index %d is %x, pinned %x", i, got, p.GPUMeasurements[i]))
		}
	}
	return nil
}
