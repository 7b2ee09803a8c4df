package verify

import (
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/tpmquote"
)

// TestUnpinnedGuestWarning: a TDX attestation verified under a policy that
// pins its MRTD carries a warning (MRTD measures the firmware only: any
// kernel on it is accepted, so the EAR is not affirming). So do Azure
// evidence, whose measurement is the paravisor's, and a TPM quote that does
// not cover PCRs 8 and 9; a pinned kernel or a policy that accepts any
// measurement (warned as such) does not add it.
func TestUnpinnedGuestWarning(t *testing.T) {
	f := attest(t, simTDX(t, fakeqe.Options{}), newRun(t))
	res, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), f.opts())
	if err != nil {
		t.Fatal(err)
	}
	if !slicesContainsPart(res.Warnings, "evidence[0]: the tdx measurement (MRTD) measures the firmware only") {
		t.Fatalf("no warning that the kernel is not pinned: %v", res.Warnings)
	}
	pcrs := func(n int) *platform.TPMClaims {
		c := &platform.TPMClaims{}
		for i := range n {
			c.PCRs = append(c.PCRs, tpmquote.PCR{Index: i})
		}
		return c
	}
	for _, tc := range []struct {
		r    platform.Result
		p    Policy
		warn bool
	}{
		{platform.Result{Platform: evidence.PlatformTDX}, Policy{BootKernel: [][]byte{{1}}, BootCommandLine: [][]byte{{2}}}, false},
		{platform.Result{Platform: evidence.PlatformTDX}, Policy{BootKernel: [][]byte{{1}}}, true},
		{platform.Result{Platform: evidence.PlatformTDX}, Policy{AllowAnyMeasurement: true}, false},
		{platform.Result{Platform: evidence.PlatformAzureTDX}, Policy{}, true},
		{platform.Result{Platform: evidence.PlatformAzureSNP}, Policy{BootKernel: [][]byte{{1}}}, true},
		{platform.Result{Platform: evidence.PlatformSEVSNP}, Policy{}, false},
		{platform.Result{Platform: evidence.PlatformTPM, TPM: pcrs(8)}, Policy{}, true},
		{platform.Result{Platform: evidence.PlatformTPM, TPM: pcrs(10)}, Policy{}, false},
	} {
		if got := unpinnedGuest(&tc.r, &tc.p) != ""; got != tc.warn {
			t.Errorf("%s %+v: warning %v, want %v", tc.r.Platform, tc.p, got, tc.warn)
		}
	}
}

func slicesContainsPart(ss []string, part string) bool {
	for _, s := range ss {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}
