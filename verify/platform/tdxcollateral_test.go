package platform

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	tdxabi "github.com/google/go-tdx-guest/abi"
	tdxpb "github.com/google/go-tdx-guest/proto/tdx"
)

// simTDXCollateral is TEST ONLY PCS collateral (TCB info, QE identity, PCK
// and root CA CRLs) for the simulated TDX platform, signed under the pinned
// simulation root.
func simTDXCollateral(t testing.TB, o fakeqe.PCSOptions) *Collateral {
	t.Helper()
	qe, err := fakeqe.New(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Issued.IsZero() {
		o.Issued = testNow.Add(-24 * time.Hour)
	}
	c, err := qe.PCSCollateral(o)
	if err != nil {
		t.Fatal(err)
	}
	return &Collateral{
		TDXTCBInfo: c.TCBInfo, TDXTCBInfoIssuerChain: c.TCBInfoIssuerChain,
		TDXQEIdentity: c.QEIdentity, TDXQEIdentityIssuerChain: c.QEIdentityIssuerChain,
		TDXPCKCRL: c.PCKCRL, TDXPCKCRLIssuerChain: c.PCKCRLIssuerChain, TDXRootCRL: c.RootCRL,
	}
}

func TestTDXSimCollateralUpToDate(t *testing.T) {
	rd := testRD(t, "tdx")
	ev := simTDX(t, fakeqe.Options{}, rd)
	opts := Options{Now: fixedNow, AllowSimulated: true, Collateral: simTDXCollateral(t, fakeqe.PCSOptions{})}
	res, err := Verify(ev, rd, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Collateral != StatusChecked || res.Revocation != StatusChecked || res.TCBStatus != "UpToDate" {
		t.Fatalf("result %+v", res)
	}
}

func simTDXWith(t *testing.T, o fakeqe.PCSOptions) (*Result, error) {
	t.Helper()
	rd := testRD(t, "tdx")
	ev := simTDX(t, fakeqe.Options{}, rd)
	return Verify(ev, rd, Options{Now: fixedNow, AllowSimulated: true, Collateral: simTDXCollateral(t, o)})
}

func TestTDXTCBStatusPolicy(t *testing.T) {
	const sa = "INTEL-SA-00837"
	newer := fakeqe.TCBLevel{Status: "UpToDate", AboveQuote: true}
	res, err := simTDXWith(t, fakeqe.PCSOptions{TCBLevels: []fakeqe.TCBLevel{newer, {Status: "OutOfDate", AdvisoryIDs: []string{sa, sa + "x"}}}})
	if err != nil {
		t.Fatalf("out-of-date tcb level must verify (the status is policy): %v", err)
	}
	if res.TCBStatus != "OutOfDate" || res.QETCBStatus != "UpToDate" || len(res.TCBAdvisoryIDs) != 2 || res.TCBAdvisoryIDs[0] != sa {
		t.Fatalf("result %q %q %q", res.TCBStatus, res.QETCBStatus, res.TCBAdvisoryIDs)
	}
	base := Policy{AllowAnyMeasurement: true}
	// The zero policy accepts UpToDate only; the refusal names the value
	// and the policy field.
	err = CheckPolicy(res, base)
	wantErr(t, err, ErrPolicy, nil, CheckTCBStatus)
	if !strings.Contains(err.Error(), `"OutOfDate"`) || !strings.Contains(err.Error(), "TCBStatuses") {
		t.Fatalf("refusal does not show the value and the field: %v", err)
	}
	st := base
	st.TCBStatuses = []string{"SWHardeningNeeded"}
	wantErr(t, CheckPolicy(res, st), ErrPolicy, nil, CheckTCBStatus)
	st.TCBStatuses = []string{"OutOfDate"}
	err = CheckPolicy(res, st)
	wantErr(t, err, ErrPolicy, nil, CheckTCBAdvisory)
	if !strings.Contains(err.Error(), sa) || !strings.Contains(err.Error(), "AllowedAdvisoryIDs") {
		t.Fatalf("advisory refusal: %v", err)
	}
	st.AllowedAdvisoryIDs = []string{sa}
	wantErr(t, CheckPolicy(res, st), ErrPolicy, nil, CheckTCBAdvisory)
	st.AllowedAdvisoryIDs = []string{sa, sa + "x"}
	if err := CheckPolicy(res, st); err != nil {
		t.Fatalf("allowing policy: %v", err)
	}
	// Revoked in a policy is not honoured.
	rv := st
	rv.TCBStatuses = append(rv.TCBStatuses, "Revoked")
	r2 := *res
	r2.TCBStatus = "Revoked"
	wantErr(t, CheckPolicy(&r2, rv), ErrPolicy, nil, CheckTCBStatus)

	t.Run("qe out of date", func(t *testing.T) {
		res, err := simTDXWith(t, fakeqe.PCSOptions{QEStatus: "OutOfDate"})
		if err != nil {
			t.Fatal(err)
		}
		if res.TCBStatus != "UpToDate" || res.QETCBStatus != "OutOfDate" {
			t.Fatalf("statuses %q %q", res.TCBStatus, res.QETCBStatus)
		}
		wantErr(t, CheckPolicy(res, base), ErrPolicy, nil, CheckTCBStatus)
		ok := base
		ok.TCBStatuses = []string{"OutOfDate"}
		if err := CheckPolicy(res, ok); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("both need configuration", func(t *testing.T) {
		res, err := simTDXWith(t, fakeqe.PCSOptions{TCBLevels: []fakeqe.TCBLevel{{Status: "ConfigurationNeeded"}}, QEStatus: "SWHardeningNeeded"})
		if err != nil {
			t.Fatal(err)
		}
		ok := base
		ok.TCBStatuses = []string{"ConfigurationNeeded"}
		wantErr(t, CheckPolicy(res, ok), ErrPolicy, nil, CheckTCBStatus)
		ok.TCBStatuses = append(ok.TCBStatuses, "SWHardeningNeeded")
		if err := CheckPolicy(res, ok); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("revoked level rejected", func(t *testing.T) {
		_, err := simTDXWith(t, fakeqe.PCSOptions{TCBLevels: []fakeqe.TCBLevel{newer, {Status: "Revoked"}}})
		wantErr(t, err, ErrRejected, ErrRevoked, checkCollateral)
		_, err = simTDXWith(t, fakeqe.PCSOptions{QEStatus: "Revoked"})
		wantErr(t, err, ErrRejected, ErrRevoked, checkCollateral)
	})
	t.Run("unknown status rejected", func(t *testing.T) {
		_, err := simTDXWith(t, fakeqe.PCSOptions{TCBLevels: []fakeqe.TCBLevel{{Status: "Splendid"}}})
		wantErr(t, err, ErrRejected, nil, checkCollateral)
	})
	t.Run("no matching level", func(t *testing.T) {
		_, err := simTDXWith(t, fakeqe.PCSOptions{TCBLevels: []fakeqe.TCBLevel{newer}})
		wantErr(t, err, ErrRejected, nil, checkCollateral)
	})
	t.Run("expired", func(t *testing.T) {
		_, err := simTDXWith(t, fakeqe.PCSOptions{Validity: -time.Hour, TCBLevels: []fakeqe.TCBLevel{newer, {Status: "OutOfDate"}}})
		wantErr(t, err, ErrRejected, errCollateralExpired, checkCollateral)
	})
	t.Run("tampered tcb info", func(t *testing.T) {
		rd := testRD(t, "tdx")
		ev := simTDX(t, fakeqe.Options{}, rd)
		c := simTDXCollateral(t, fakeqe.PCSOptions{TCBLevels: []fakeqe.TCBLevel{newer, {Status: "OutOfDate"}}})
		c.TDXTCBInfo = bytes.Replace(c.TDXTCBInfo, []byte(`"OutOfDate"`), []byte(`"UpToDate"`), 1)
		_, err := Verify(ev, rd, Options{Now: fixedNow, AllowSimulated: true, Collateral: c})
		wantErr(t, err, ErrRejected, nil, checkCollateral)
	})
}

// checkQEIdentity runs only when go-tdx-guest stopped before matching the QE
// report: every field it compares must be able to refuse.
func TestCheckQEIdentity(t *testing.T) {
	rd := testRD(t, "tdx")
	ev := simTDX(t, fakeqe.Options{}, rd)
	a, err := tdxabi.QuoteToProto(ev.Blob)
	if err != nil {
		t.Fatal(err)
	}
	pq := a.(*tdxpb.QuoteV4)
	good := simTDXCollateral(t, fakeqe.PCSOptions{}).TDXQEIdentity
	if err := checkQEIdentity(pq, good); err != nil {
		t.Fatal(err)
	}
	var qi struct {
		EnclaveIdentity map[string]any `json:"enclaveIdentity"`
	}
	if err := json.Unmarshal(good, &qi); err != nil {
		t.Fatal(err)
	}
	for field, bad := range map[string]any{
		"mrsigner":       strings.Repeat("00", 32),
		"isvprodid":      7,
		"miscselect":     "01000000",
		"miscselectMask": "ffff",
		"attributes":     strings.Repeat("ff", 16),
		"attributesMask": "ff",
	} {
		m := map[string]any{}
		for k, v := range qi.EnclaveIdentity {
			m[k] = v
		}
		m[field] = bad
		raw, err := json.Marshal(map[string]any{"enclaveIdentity": m})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkQEIdentity(pq, raw); err == nil {
			t.Errorf("%s tampered: accepted", field)
		}
	}
	if err := checkQEIdentity(pq, []byte("{")); err == nil {
		t.Error("malformed identity accepted")
	}
}

func TestTDXSimRevokedPCK(t *testing.T) {
	_, err := simTDXWith(t, fakeqe.PCSOptions{RevokePCK: true})
	wantErr(t, err, ErrRejected, ErrRevoked, checkRevocation)
	// The same collateral with expired CRLs: expired, not revoked.
	_, err = simTDXWith(t, fakeqe.PCSOptions{Validity: -time.Hour})
	wantErr(t, err, ErrRejected, errCollateralExpired, checkCollateral)
}
