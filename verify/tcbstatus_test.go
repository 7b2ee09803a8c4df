package verify

import (
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/verify/platform"
)

// TestTDXTCBStatusPolicy: a simulated TDX attestation whose TCB level Intel
// (here: the simulated PCS) rates OutOfDate with an advisory is refused by
// default, naming the value and the policy member, and verified with a
// warning by a policy that lists both.
func TestTDXTCBStatusPolicy(t *testing.T) {
	const sa = "INTEL-SA-00837"
	f := attest(t, simTDX(t, fakeqe.Options{}), newRun(t))
	qe, err := fakeqe.New(fakeqe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := qe.PCSCollateral(fakeqe.PCSOptions{Issued: testNow.Add(-24 * time.Hour), TCBLevels: []fakeqe.TCBLevel{
		{Status: "UpToDate", AboveQuote: true}, {Status: "OutOfDate", AdvisoryIDs: []string{sa}}}})
	if err != nil {
		t.Fatal(err)
	}
	o := f.opts()
	o.Collateral = &platform.Collateral{TDXTCBInfo: pc.TCBInfo, TDXTCBInfoIssuerChain: pc.TCBInfoIssuerChain,
		TDXQEIdentity: pc.QEIdentity, TDXQEIdentityIssuerChain: pc.QEIdentityIssuerChain}
	p := f.simPolicy()
	p.AllowUncheckedCollateral = false

	_, err = Verify(f.att, f.ev, f.bundle, p, o)
	wantErr(t, err, ErrPolicy, "policy/"+platform.CheckTCBStatus, "")
	if !strings.Contains(err.Error(), `"OutOfDate"`) || !strings.Contains(err.Error(), "policy member tdx_tcb_statuses") {
		t.Fatalf("refusal does not name the value and the member: %v", err)
	}
	p.TDXTCBStatuses = []string{"OutOfDate"}
	_, err = Verify(f.att, f.ev, f.bundle, p, o)
	wantErr(t, err, ErrPolicy, "policy/"+platform.CheckTCBAdvisory, "")
	if !strings.Contains(err.Error(), sa) || !strings.Contains(err.Error(), "policy member tdx_allowed_advisory_ids") {
		t.Fatalf("advisory refusal: %v", err)
	}
	p.TDXAllowedAdvisoryIDs = []string{sa}
	res, err := Verify(f.att, f.ev, f.bundle, p, o)
	if err != nil {
		t.Fatal(err)
	}
	e := res.Evidence[0]
	if e.Collateral != platform.StatusChecked || e.TCBStatus != "OutOfDate" || e.QETCBStatus != "UpToDate" || len(e.TCBAdvisoryIDs) != 1 {
		t.Fatalf("evidence result %+v", e)
	}
	warned := false
	for _, w := range res.Warnings {
		warned = warned || strings.Contains(w, "tdx tcb status OutOfDate")
	}
	if !warned {
		t.Fatalf("no warning for an accepted out-of-date tcb: %v", res.Warnings)
	}

	// Up to date: no such warning.
	pc, err = qe.PCSCollateral(fakeqe.PCSOptions{Issued: testNow.Add(-24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	o.Collateral = &platform.Collateral{TDXTCBInfo: pc.TCBInfo, TDXTCBInfoIssuerChain: pc.TCBInfoIssuerChain,
		TDXQEIdentity: pc.QEIdentity, TDXQEIdentityIssuerChain: pc.QEIdentityIssuerChain}
	res, err = Verify(f.att, f.ev, f.bundle, f.simPolicy(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Warnings {
		if strings.Contains(w, "tcb status") {
			t.Fatalf("warning for an up-to-date tcb: %q", w)
		}
	}
}

func TestPolicyTCBMembers(t *testing.T) {
	p := roundTripPolicy(t, policyHead+`"tdx_tcb_statuses":["OutOfDate","SWHardeningNeeded"],"tdx_allowed_advisory_ids":["INTEL-SA-00837"]}`)
	if len(p.TDXTCBStatuses) != 2 || len(p.TDXAllowedAdvisoryIDs) != 1 {
		t.Fatalf("%+v", p)
	}
	for in, path := range map[string]string{
		policyHead + `"tdx_tcb_statuses":["Revoked"]}`:                                 "$.tdx_tcb_statuses[0]",
		policyHead + `"tdx_tcb_statuses":["uptodate"]}`:                                "$.tdx_tcb_statuses[0]",
		policyHead + `"tdx_allowed_advisory_ids":["INTEL SA"]}`:                        "$.tdx_allowed_advisory_ids[0]",
		policyHead + `"tdx_allowed_advisory_ids":["A","A"]}`:                           "$.tdx_allowed_advisory_ids[1]",
		policyHead + `"tdx_allowed_advisory_ids":"INTEL-SA-00837"}`:                    "$.tdx_allowed_advisory_ids",
		policyHead + `"tdx_allowed_advisory_ids":["` + strings.Repeat("a", 65) + `"]}`: "$.tdx_allowed_advisory_ids[0]",
	} {
		wantPolicyRefused(t, in, path, nil)
	}
}
