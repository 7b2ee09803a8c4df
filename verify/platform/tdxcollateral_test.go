package platform

import (
	"testing"
	"time"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
)

// simTDXCollateral is TEST ONLY PCS TCB info and QE identity for the
// simulated TDX platform, signed under the pinned simulation root. The CRLs
// are left out: go-tdx-guest locates the root CA CRL through the root
// certificate's CRL distribution point, which the pinned simulation root
// does not have, so simulated TDX evidence is verified with
// AllowUncheckedRevocation.
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
	}
}

func TestTDXSimCollateralUpToDate(t *testing.T) {
	rd := testRD(t, "tdx")
	ev := simTDX(t, fakeqe.Options{}, rd)
	opts := Options{Now: fixedNow, AllowSimulated: true, AllowUncheckedRevocation: true, Collateral: simTDXCollateral(t, fakeqe.PCSOptions{})}
	res, err := Verify(ev, rd, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Collateral != StatusChecked || res.Revocation != StatusSkipped || res.TCBStatus != "UpToDate" {
		t.Fatalf("result %+v", res)
	}
}
