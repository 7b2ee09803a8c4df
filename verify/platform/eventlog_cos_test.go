package platform

import (
	"testing"

	"github.com/clawea/attester/internal/tdxtest"
	"github.com/clawea/attester/wire/evidence"
)

// cosCCEL is go-tdx-guest's CC event log of the Container-Optimized OS 113
// boot whose quote is tdxtest.SampleCOS.
const cosCCEL = "testing/testdata/ccel/ccel_data.dat"

// TestTDXRealBootChain: a real TD's quote (Intel-signed, COS 113) with the
// CC event log of the same boot replays to the quoted RTMRs. RTMR1 holds
// two EFI boot applications: a kernel pin listing the last alone is
// refused, as the first ran too, and one listing both passes.
func TestTDXRealBootChain(t *testing.T) {
	ev, rd := tdxtest.Evidence(t, tdxtest.SampleCOS)
	ev.Aux = map[string][]byte{auxEventLog: tdxtest.Read(t, cosCCEL)}
	opts := Options{Now: fixedNow, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true}
	res, err := verifyRaw(ev, rd, evidence.ReportData{}, opts)
	if err != nil {
		t.Fatalf("real quote with its event log: %v", err)
	}
	b := res.Boot
	if b == nil || b.Log != logCCEL || len(b.Registers) != 3 || len(b.Kernels) != 2 || len(b.CommandLines) != 0 {
		t.Fatalf("boot chain %+v", b)
	}
	pin := Policy{AllowAnyMeasurement: true, BootFirmware: [][]byte{b.Firmware}, BootKernel: [][]byte{lastOf(b.Kernels)}}
	wantErr(t, CheckPolicy(res, pin), ErrPolicy, nil, checkBoot)
	pin.BootKernel = b.Kernels
	if err := CheckPolicy(res, pin); err != nil {
		t.Fatal(err)
	}
	// The measurement (MRTD) does not fix RTMR1: with it pinned, the first
	// application must still be listed.
	pin = Policy{Measurements: [][]byte{res.Measurement}, BootKernel: [][]byte{lastOf(b.Kernels)}}
	wantErr(t, CheckPolicy(res, pin), ErrPolicy, nil, checkBoot)

	// The log of another boot (Trustee's OVMF) does not replay to them.
	ev.Aux[auxEventLog] = trustee(t, "tdx/CCEL_data_ovmf")
	_, err = verifyRaw(ev, rd, evidence.ReportData{}, opts)
	wantErr(t, err, ErrRejected, nil, checkBoot)
}
