package platform

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
)

// TestPCSCaseVariantMemberAttack: go-tdx-guest verifies the signature over
// the exact "tcbInfo" (or "enclaveIdentity") member but decodes the body
// with encoding/json, which matches member names case-insensitively, last
// wins. A body that keeps the genuine signed member and adds a forged
// "TCBINFO" after it would be judged on the forged, unsigned one. It must
// be refused, never read.
func TestPCSCaseVariantMemberAttack(t *testing.T) {
	rd := testRD(t, "tdx")
	ev := simTDX(t, fakeqe.Options{}, rd)
	// The truth: the platform's TCB level is OutOfDate, its QE's OutOfDate.
	c := simTDXCollateral(t, fakeqe.PCSOptions{TCBLevels: []fakeqe.TCBLevel{{Status: "OutOfDate"}}, QEStatus: "OutOfDate"})
	forge := func(body []byte, member, variant string) []byte {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		forged := bytes.ReplaceAll(m[member], []byte(`"OutOfDate"`), []byte(`"UpToDate"`))
		out := append(bytes.TrimSuffix(bytes.TrimSpace(body), []byte("}")), []byte(`,"`+variant+`":`)...)
		return append(append(out, forged...), '}')
	}
	for name, mutate := range map[string]func(c *Collateral){
		"tcb info":    func(c *Collateral) { c.TDXTCBInfo = forge(c.TDXTCBInfo, "tcbInfo", "TCBINFO") },
		"qe identity": func(c *Collateral) { c.TDXQEIdentity = forge(c.TDXQEIdentity, "enclaveIdentity", "EnclaveIdentity") },
	} {
		t.Run(name, func(t *testing.T) {
			cc := *c
			mutate(&cc)
			res, err := Verify(ev, rd, Options{Now: fixedNow, AllowSimulated: true, Collateral: &cc})
			if err == nil {
				t.Fatalf("accepted: tcb %q, qe %q", res.TCBStatus, res.QETCBStatus)
			}
			wantErr(t, err, ErrRejected, nil, checkCollateral)
		})
	}
}
