package platform

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/google/go-sev-guest/kds"
)

func TestPolicySEVSNP(t *testing.T) {
	rd := testRD(t, "policy")
	res := verifySim(t, simSEV(t, sim.Options{}, rd), rd)
	ok := Policy{Measurements: [][]byte{res.Measurement}}
	if err := CheckPolicy(res, ok); err != nil {
		t.Fatal(err)
	}
	wantErr(t, CheckPolicy(res, Policy{}), ErrPolicy, nil, CheckMeasurement)
	wantErr(t, CheckPolicy(res, Policy{Measurements: [][]byte{bytes.Repeat([]byte{1}, 48)}}), ErrPolicy, nil, CheckMeasurement)
	if err := CheckPolicy(res, Policy{AllowAnyMeasurement: true}); err != nil {
		t.Fatal(err)
	}
	high := ok
	high.MinSEVSNPTCB = kds.TCBParts{SnpSpl: 9}
	wantErr(t, CheckPolicy(res, high), ErrPolicy, nil, CheckGuestPolicy)
	vmpl := ok
	vmpl.SEVSNPVMPL = 1
	wantErr(t, CheckPolicy(res, vmpl), ErrPolicy, nil, CheckGuestPolicy)
	vmpl.SEVSNPVMPL = 7
	wantErr(t, CheckPolicy(res, vmpl), ErrPolicy, nil, checkOptions)

	dbg, err := Verify(simSEV(t, sim.Options{Debug: true}, rd), rd, simOpts())
	if err != nil {
		t.Fatal(err)
	}
	if !dbg.Debug {
		t.Fatal("debug not reported")
	}
	wantErr(t, CheckPolicy(dbg, ok), ErrPolicy, nil, CheckDebug)
	allow := ok
	allow.AllowDebug = true
	if err := CheckPolicy(dbg, allow); err != nil {
		t.Fatal(err)
	}

	// A Result not produced by Verify is refused.
	forged := *res
	forged.snp = nil
	wantErr(t, CheckPolicy(&forged, ok), ErrPolicy, nil, checkOptions)
	wantErr(t, CheckPolicy(nil, ok), ErrPolicy, nil, checkOptions)
}

func TestPolicyTDX(t *testing.T) {
	rd := testRD(t, "policy")
	res := verifySim(t, simTDX(t, fakeqe.Options{}, rd), rd)
	ok := Policy{Measurements: [][]byte{res.Measurement}}
	if err := CheckPolicy(res, ok); err != nil {
		t.Fatal(err)
	}
	high := ok
	high.MinTDXTeeTCBSVN = [16]byte{0x03, 0x02}
	wantErr(t, CheckPolicy(res, high), ErrPolicy, nil, CheckTCB)
	low := ok
	low.MinTDXTeeTCBSVN = [16]byte{0x03, 0x01, 0x02}
	if err := CheckPolicy(res, low); err != nil {
		t.Fatal(err)
	}
	// A checked status other than the accepted ones is refused.
	st := *res
	st.Collateral, st.TCBStatus, st.QETCBStatus = StatusChecked, "OutOfDate", "UpToDate"
	wantErr(t, CheckPolicy(&st, ok), ErrPolicy, nil, CheckTCBStatus)
	accept := ok
	accept.TCBStatuses = []string{"OutOfDate"}
	if err := CheckPolicy(&st, accept); err != nil {
		t.Fatal(err)
	}

	td := fakeqe.DefaultTD()
	td.TDAttributes[0] |= 1
	dbg, err := Verify(simTDX(t, fakeqe.Options{TD: &td}, rd), rd, simOpts())
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, CheckPolicy(dbg, ok), ErrPolicy, nil, CheckDebug)
}
