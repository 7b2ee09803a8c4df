package platform

import (
	"bytes"
	"slices"
	"testing"

	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/wire/tpmquote"
)

// TestTPMBootChain: a TPM whose PCRs 0-9 hold a real boot's measurements
// (go-eventlog's cos-121-amd-sev sample, extended into a private swtpm)
// quotes them with that event log; the verifier replays the log against
// the quoted PCRs. A changed event is refused, and a policy pins the
// replayed kernel.
func TestTPMBootChain(t *testing.T) {
	in, log, path := swtpmtest.StartWithBootLog(t)
	rd := testRD(t, "tpm boot")
	tp, ev := openQuote(t, tpm.Options{Address: in.Addr, PCRs: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, EventLogPath: path}, rd)
	ak, err := tpmquote.ParsePublic(tp.AKPublic())
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{ak.Name()}}
	res, err := Verify(ev, rd, opts)
	if err != nil {
		t.Fatal(err)
	}
	b := res.Boot
	if b == nil || b.Log != "tpm" || len(b.Registers) != 10 || len(b.Kernels) == 0 || !bytes.Equal(b.Firmware, b.Values[0]) {
		t.Fatalf("boot chain %+v", b)
	}
	// Without the measurement, PCR 4's value is not pinned: every boot
	// application in it must be (three in this GRUB boot), as code
	// that ran after the kernel could log the approved digest last
	// (TestBootPinAppendAttack).
	if len(b.Kernels) != 3 {
		t.Fatalf("boot applications %x", b.Kernels)
	}
	kernel := lastOf(b.Kernels)
	pin := Policy{AllowAnyMeasurement: true, BootKernel: [][]byte{kernel}, BootFirmware: [][]byte{b.Firmware}}
	wantErr(t, CheckPolicy(res, pin), ErrPolicy, nil, checkBoot)
	pin.BootKernel = b.Kernels
	if err := CheckPolicy(res, pin); err != nil {
		t.Fatal(err)
	}
	// With the measurement (PCRs 0-9), PCR 4 holds the approved value: the
	// last application is the kernel.
	measured := Policy{Measurements: [][]byte{res.Measurement}, BootKernel: [][]byte{kernel}, BootFirmware: [][]byte{b.Firmware}}
	if err := CheckPolicy(res, measured); err != nil {
		t.Fatal(err)
	}
	// The stub's command line and initrd are not in this GRUB boot: a pin on
	// them is refused, not skipped.
	pin.BootInitrd = [][]byte{kernel}
	wantErr(t, CheckPolicy(res, pin), ErrPolicy, nil, checkBoot)

	// The same log replayed on its own gives the same registers.
	alone, err := ReplayEventLog(logTPM, log)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(alone.Kernels, b.Kernels, bytes.Equal) || !bytes.Equal(alone.Firmware, b.Firmware) {
		t.Fatal("replay on its own differs")
	}

	// A changed event digest (the kernel's) is refused.
	i := bytes.Index(log, kernel)
	if i < 0 {
		t.Fatal("kernel digest not in the log")
	}
	bad := cloneEvidence(ev)
	bad.Aux[tpmquote.AuxEventLog][i] ^= 1
	_, err = Verify(bad, rd, opts)
	wantErr(t, err, ErrRejected, nil, checkBoot)
}
