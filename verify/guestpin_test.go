package verify

import (
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/wire/evidence"
)

// TestUnpinnedGuestWarning: a TDX attestation verified under a policy that
// pins its MRTD carries a warning (MRTD measures the firmware only: any
// kernel on it is accepted, so the EAR is not affirming). So does Azure
// evidence, whose measurement is the paravisor's; a pinned kernel or a
// policy that accepts any measurement (warned as such) does not add it.
func TestUnpinnedGuestWarning(t *testing.T) {
	f := attest(t, simTDX(t, fakeqe.Options{}), newRun(t))
	res, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), f.opts())
	if err != nil {
		t.Fatal(err)
	}
	if !slicesContainsPart(res.Warnings, "evidence[0]: the tdx measurement (MRTD) measures the firmware only") {
		t.Fatalf("no warning that the kernel is not pinned: %v", res.Warnings)
	}
	for _, tc := range []struct {
		platform string
		p        Policy
		warn     bool
	}{
		{evidence.PlatformTDX, Policy{BootKernel: [][]byte{{1}}}, false},
		{evidence.PlatformTDX, Policy{AllowAnyMeasurement: true}, false},
		{evidence.PlatformAzureTDX, Policy{}, true},
		{evidence.PlatformAzureSNP, Policy{BootKernel: [][]byte{{1}}}, true},
		{evidence.PlatformSEVSNP, Policy{}, false},
	} {
		if got := unpinnedGuest(tc.platform, &tc.p) != ""; got != tc.warn {
			t.Errorf("%s %+v: warning %v, want %v", tc.platform, tc.p, got, tc.warn)
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
