package platform

import (
	"encoding/hex"
	"testing"

	"github.com/clawea/attester/wire/evidence"
)

func TestTPMFixture(t *testing.T) {
	fx := loadTPMFixture(t)
	opts := Options{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{fx.AKName}}
	res, err := Verify(fx.Evidence, fx.ReportData, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Platform != evidence.PlatformTPM || !res.Simulated || res.RootID != "sim-tpm-ak:"+hex.EncodeToString(fx.AKName) {
		t.Fatalf("result %+v", res)
	}
	d := res.TPM.PCRs.Digest()
	if string(res.Measurement) != string(d[:]) || res.ReportData != fx.ReportData.Bytes() {
		t.Fatal("measurement or report data")
	}
	if res.Revocation != statusNotApplicable || res.Collateral != statusNotApplicable {
		t.Fatal("statuses")
	}
	// The fixture quotes PCRs 0-7 and 16: its digest does not say which
	// PCRs hold the values, so a pinned measurement cannot admit it
	// (verify's TestTPMPCRSelectionAttack); boot reference values can.
	err = CheckPolicy(res, Policy{Measurements: [][]byte{d[:]}})
	wantErr(t, err, ErrPolicy, nil, CheckMeasurement)
	if err := CheckPolicy(res, Policy{AllowAnyMeasurement: true}); err != nil {
		t.Fatal(err)
	}
	opts.TrustedTPMAKs, opts.AllowUntrustedTPMAK = nil, true
	res, err = Verify(fx.Evidence, fx.ReportData, opts)
	if err != nil || res.RootID != "sim-tpm-ak-unpinned:"+hex.EncodeToString(fx.AKName) {
		t.Fatalf("unpinned: %v %+v", err, res)
	}
}

func TestTPMNegative(t *testing.T) {
	fx := loadTPMFixture(t)
	base := Options{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{fx.AKName}}

	other := append([]byte(nil), fx.AKName...)
	other[5] ^= 1
	refuseOptions(t, fx.Evidence, fx.ReportData, base, []optionsCase{
		{"simulated not allowed", func(o *Options) { o.AllowSimulated = false }, ErrRejected, ErrSimulated, CheckSimulated},
		{"no trusted ak", func(o *Options) { o.TrustedTPMAKs = nil }, ErrRejected, ErrUntrustedRoot, checkTPMAK},
		{"another ak trusted", func(o *Options) { o.TrustedTPMAKs = [][]byte{other} }, ErrRejected, ErrUntrustedRoot, checkTPMAK},
		{"untrusted ak allowed and pinned", func(o *Options) { o.AllowUntrustedTPMAK = true }, ErrBadOptions, nil, checkOptions},
	})

	_, err := Verify(fx.Evidence, testRD(t, "other"), base)
	wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)

	for _, off := range []int{0, 10, len(fx.Evidence.Blob) - 1} {
		bad := cloneEvidence(fx.Evidence)
		bad.Blob[off] ^= 1
		_, err = Verify(bad, fx.ReportData, base)
		wantErr(t, err, ErrRejected, nil, checkSignature)
	}
	bad := cloneEvidence(fx.Evidence)
	bad.Signature[len(bad.Signature)-1] ^= 1
	_, err = Verify(bad, fx.ReportData, base)
	wantErr(t, err, ErrRejected, nil, checkSignature)

	bad = cloneEvidence(fx.Evidence)
	bad.Format = "tpm2/quote-v9"
	_, err = Verify(bad, fx.ReportData, base)
	wantErr(t, err, ErrCannotCheck, errUnsupported, checkFormat)
}
