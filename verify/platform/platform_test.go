package platform

import (
	"errors"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/wire/evidence"
)

// TestStrictDefaults: each relaxation simOpts makes is off by default, and
// without it simulated evidence that simOpts accepts is refused.
func TestStrictDefaults(t *testing.T) {
	sev := func(t *testing.T) (*evidence.Evidence, evidence.ReportData) {
		rd := testRD(t, "sev")
		return simSEV(t, sim.Options{}, rd), rd
	}
	tdx := func(t *testing.T) (*evidence.Evidence, evidence.ReportData) {
		rd := testRD(t, "tdx")
		return simTDX(t, fakeqe.Options{}, rd), rd
	}
	noSimulated := func(o *Options) { o.AllowSimulated = false }
	noRevocation := func(o *Options) { o.AllowUncheckedRevocation = false }
	noCollateral := func(o *Options) { o.AllowUncheckedCollateral = false }
	for _, tc := range []struct {
		name            string
		quote           func(*testing.T) (*evidence.Evidence, evidence.ReportData)
		unset           func(*Options)
		class, sentinel error
		check           string
	}{
		{"sev-snp simulated", sev, noSimulated, ErrRejected, ErrSimulated, CheckSimulated},
		{"sev-snp revocation", sev, noRevocation, ErrCannotCheck, errMissingCollateral, checkRevocation},
		{"tdx simulated", tdx, noSimulated, ErrRejected, ErrSimulated, CheckSimulated},
		{"tdx collateral", tdx, noCollateral, ErrCannotCheck, errMissingCollateral, checkCollateral},
		{"tdx revocation", tdx, noRevocation, ErrCannotCheck, errMissingCollateral, checkRevocation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, rd := tc.quote(t)
			opts := simOpts()
			tc.unset(&opts)
			_, err := Verify(ev, rd, opts)
			wantErr(t, err, tc.class, tc.sentinel, tc.check)
		})
	}
}

func TestVerifyInputs(t *testing.T) {
	rd := testRD(t, "x")
	ev := simSEV(t, sim.Options{}, rd)

	_, err := Verify(ev, evidence.ReportData{}, simOpts())
	wantErr(t, err, ErrBadOptions, nil, checkOptions)

	o := simOpts()
	o.Now = nil
	_, err = Verify(ev, rd, o)
	wantErr(t, err, ErrBadOptions, nil, checkOptions)

	_, err = Verify(nil, rd, simOpts())
	wantErr(t, err, ErrRejected, nil, checkParse)

	for _, c := range []struct{ platform, format string }{
		{"sgx", "sgx/quote"},
		{"", ""},
		{evidence.PlatformSEVSNP, "sev-snp/attestation-report-v9"},
		{evidence.PlatformTDX, "tdx/quote-v5"},
	} {
		bad := cloneEvidence(ev)
		bad.Platform, bad.Format = c.platform, c.format
		_, err := Verify(bad, rd, simOpts())
		wantErr(t, err, ErrCannotCheck, errUnsupported, checkFormat)
	}
}

func TestGuardRecoversPanics(t *testing.T) {
	err := guard(checkSignature, func() error { panic("library bug") })
	wantErr(t, err, ErrRejected, errInternal, checkSignature)
	if err := guard(checkSignature, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	sentinel := errors.New("x")
	if err := guard(checkSignature, func() error { return sentinel }); err != sentinel {
		t.Fatal(err)
	}
}
