package platform

import (
	"errors"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/wire/evidence"
)

func TestVerifyInputs(t *testing.T) {
	rd := testRD(t, "x")
	ev := simSEV(t, sim.Options{}, rd)

	_, err := Verify(ev, evidence.ReportData{}, simOpts())
	wantErr(t, err, ErrBadOptions, nil, CheckOptions)

	o := simOpts()
	o.Now = nil
	_, err = Verify(ev, rd, o)
	wantErr(t, err, ErrBadOptions, nil, CheckOptions)

	_, err = Verify(nil, rd, simOpts())
	wantErr(t, err, ErrRejected, nil, CheckParse)

	for _, c := range []struct{ platform, format string }{
		{"sgx", "sgx/quote"},
		{"", ""},
		{evidence.PlatformSEVSNP, "sev-snp/attestation-report-v9"},
		{evidence.PlatformTDX, "tdx/quote-v5"},
	} {
		bad := cloneEvidence(ev)
		bad.Platform, bad.Format = c.platform, c.format
		_, err := Verify(bad, rd, simOpts())
		wantErr(t, err, ErrCannotCheck, ErrUnsupported, CheckFormat)
	}
}

func TestGuardRecoversPanics(t *testing.T) {
	err := guard(CheckSignature, func() error { panic("library bug") })
	wantErr(t, err, ErrRejected, ErrInternal, CheckSignature)
	if err := guard(CheckSignature, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	sentinel := errors.New("x")
	if err := guard(CheckSignature, func() error { return sentinel }); err != sentinel {
		t.Fatal(err)
	}
}
