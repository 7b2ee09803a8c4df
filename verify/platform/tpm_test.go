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
	if err := CheckPolicy(res, Policy{Measurements: [][]byte{d[:]}}); err != nil {
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

	o := base
	o.AllowSimulated = false
	_, err := Verify(fx.Evidence, fx.ReportData, o)
	wantErr(t, err, ErrRejected, ErrSimulated, CheckSimulated)

	o = base
	o.TrustedTPMAKs = nil
	_, err = Verify(fx.Evidence, fx.ReportData, o)
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkTPMAK)

	o = base
	other := append([]byte(nil), fx.AKName...)
	other[5] ^= 1
	o.TrustedTPMAKs = [][]byte{other}
	_, err = Verify(fx.Evidence, fx.ReportData, o)
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, checkTPMAK)

	o = base
	o.AllowUntrustedTPMAK = true
	_, err = Verify(fx.Evidence, fx.ReportData, o)
	wantErr(t, err, ErrBadOptions, nil, checkOptions)

	_, err = Verify(fx.Evidence, testRD(t, "other"), base)
	wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)

	for _, off := range []int{0, 10, len(fx.Evidence.Blob) - 1} {
		bad := cloneEvidence(fx.Evidence)
		bad.Blob[off] ^= 1
		_, err = Verify(bad, fx.ReportData, base)
		wantErr(t, err, ErrRejected, nil, CheckSignature)
	}
	bad := cloneEvidence(fx.Evidence)
	bad.Signature[len(bad.Signature)-1] ^= 1
	_, err = Verify(bad, fx.ReportData, base)
	wantErr(t, err, ErrRejected, nil, CheckSignature)

	bad = cloneEvidence(fx.Evidence)
	bad.Format = "tpm2/quote-v9"
	_, err = Verify(bad, fx.ReportData, base)
	wantErr(t, err, ErrCannotCheck, errUnsupported, checkFormat)
}
