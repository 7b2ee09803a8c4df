package platform

import (
	"encoding/hex"
	"testing"

	"github.com/clawea/attester/wire/evidence"
)

func TestTPMFixture(t *testing.T) {
	fx := loadTPMFixture(t)
	opts := Options{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{fx.akName}}
	res, err := Verify(fx.ev, fx.rd, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Platform != evidence.PlatformTPM || !res.Simulated || res.RootID != "sim-tpm-ak:"+hex.EncodeToString(fx.akName) {
		t.Fatalf("result %+v", res)
	}
	d := res.TPM.PCRs.Digest()
	if string(res.Measurement) != string(d[:]) || res.ReportData != fx.rd.Bytes() {
		t.Fatal("measurement or report data")
	}
	if res.Revocation != StatusNotApplicable || res.Collateral != StatusNotApplicable {
		t.Fatal("statuses")
	}
	if err := CheckPolicy(res, Policy{Measurements: [][]byte{d[:]}}); err != nil {
		t.Fatal(err)
	}
	opts.TrustedTPMAKs, opts.AllowUntrustedTPMAK = nil, true
	res, err = Verify(fx.ev, fx.rd, opts)
	if err != nil || res.RootID != "sim-tpm-ak-unpinned:"+hex.EncodeToString(fx.akName) {
		t.Fatalf("unpinned: %v %+v", err, res)
	}
}

func TestTPMNegative(t *testing.T) {
	fx := loadTPMFixture(t)
	base := Options{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{fx.akName}}

	o := base
	o.AllowSimulated = false
	_, err := Verify(fx.ev, fx.rd, o)
	wantErr(t, err, ErrRejected, ErrSimulated, CheckSimulated)

	o = base
	o.TrustedTPMAKs = nil
	_, err = Verify(fx.ev, fx.rd, o)
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, CheckTPMAK)

	o = base
	other := append([]byte(nil), fx.akName...)
	other[5] ^= 1
	o.TrustedTPMAKs = [][]byte{other}
	_, err = Verify(fx.ev, fx.rd, o)
	wantErr(t, err, ErrRejected, ErrUntrustedRoot, CheckTPMAK)

	o = base
	o.AllowUntrustedTPMAK = true
	_, err = Verify(fx.ev, fx.rd, o)
	wantErr(t, err, ErrBadOptions, nil, CheckOptions)

	_, err = Verify(fx.ev, testRD(t, "other"), base)
	wantErr(t, err, ErrRejected, ErrReportData, CheckReportData)

	for _, off := range []int{0, 10, len(fx.ev.Blob) - 1} {
		bad := cloneEvidence(fx.ev)
		bad.Blob[off] ^= 1
		_, err = Verify(bad, fx.rd, base)
		wantErr(t, err, ErrRejected, nil, CheckSignature)
	}
	bad := cloneEvidence(fx.ev)
	bad.Signature[len(bad.Signature)-1] ^= 1
	_, err = Verify(bad, fx.rd, base)
	wantErr(t, err, ErrRejected, nil, CheckSignature)

	bad = cloneEvidence(fx.ev)
	bad.Format = "tpm2/quote-v9"
	_, err = Verify(bad, fx.rd, base)
	wantErr(t, err, ErrCannotCheck, ErrUnsupported, CheckFormat)
}
