package platform

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
)

// TestCCELConformance holds the tdx/ event-log rows of the conformance
// table: the OVMF log replays on its own; the td-shim log (whose events
// declare sizes that do not cover their data) is refused by go-eventlog's
// strict parser.
func TestCCELConformance(t *testing.T) {
	bc, err := ReplayEventLog(logCCEL, trustee(t, "tdx/CCEL_data_ovmf"))
	if err != nil {
		t.Fatalf("CCEL_data_ovmf: %v", err)
	}
	if bc.Log != "ccel" || len(bc.Registers) != 3 || bc.Kernel == nil || bc.CommandLine == nil || bc.Initrd == nil || !bytes.Equal(bc.Firmware, bc.Values[0]) {
		t.Fatalf("boot chain %+v", bc)
	}
	for i, v := range bc.Values {
		t.Logf("rtmr%d %x", bc.Registers[i], v)
	}
	t.Logf("kernel %x\ncmdline %x\ninitrd %x", bc.Kernel, bc.CommandLine, bc.Initrd)
	_, err = ReplayEventLog(logCCEL, trustee(t, "tdx/CCEL_data"))
	wantErr(t, err, ErrRejected, nil, checkBoot)
}

// tdWithLog returns simulated TDX evidence whose RTMRs are the ones log
// replays to, carrying log.
func tdWithLog(t *testing.T, log []byte) (*BootChain, func([]byte) error, func(Policy) error) {
	t.Helper()
	bc, err := ReplayEventLog(logCCEL, log)
	if err != nil {
		t.Fatal(err)
	}
	td := fakeqe.DefaultTD()
	td.RTMR = [4][48]byte{}
	for i, reg := range bc.Registers {
		copy(td.RTMR[reg][:], bc.Values[i])
	}
	rd := testRD(t, "boot")
	// The simulated platform carries the log, as a TD carries its CCEL.
	ev := simTDX(t, fakeqe.Options{TD: &td, EventLog: log}, rd)
	if !bytes.Equal(ev.Aux[auxEventLog], log) {
		t.Fatal("the simulated td does not carry its event log")
	}
	verifyWith := func(l []byte) error {
		e := cloneEvidence(ev)
		e.Aux = map[string][]byte{auxEventLog: l}
		_, err := Verify(e, rd, simOpts())
		return err
	}
	checkPolicy := func(p Policy) error {
		e := cloneEvidence(ev)
		e.Aux = map[string][]byte{auxEventLog: log}
		res, err := Verify(e, rd, simOpts())
		if err != nil {
			t.Fatal(err)
		}
		if res.Boot == nil || !bytes.Equal(res.Boot.Kernel, bc.Kernel) {
			t.Fatalf("boot %+v", res.Boot)
		}
		p.AllowAnyMeasurement = true
		return CheckPolicy(res, p)
	}
	return bc, verifyWith, checkPolicy
}

// TestTDXBootChain: a TD's CC event log replays to its verified RTMRs; a
// changed event is refused, and a policy pins firmware, kernel, command
// line and initrd.
func TestTDXBootChain(t *testing.T) {
	log := trustee(t, "tdx/CCEL_data_ovmf")
	bc, verifyWith, checkPolicy := tdWithLog(t, log)
	if err := verifyWith(log); err != nil {
		t.Fatalf("log of the td: %v", err)
	}
	// Change one byte of the initrd event's digest (RTMR2).
	i := bytes.Index(log, bc.Initrd)
	if i < 0 {
		t.Fatal("initrd digest not in the log")
	}
	changed := bytes.Clone(log)
	changed[i] ^= 1
	wantErr(t, verifyWith(changed), ErrRejected, nil, checkBoot)
	// Not an event log at all.
	wantErr(t, verifyWith([]byte("not a log")), ErrRejected, nil, checkBoot)
	// An empty log is refused, not taken for none.
	wantErr(t, verifyWith([]byte{}), ErrRejected, nil, checkBoot)

	pin := Policy{BootFirmware: [][]byte{bc.Firmware}, BootKernel: [][]byte{bc.Kernel}, BootCommandLine: [][]byte{bc.CommandLine}, BootInitrd: [][]byte{bc.Initrd}}
	if err := checkPolicy(pin); err != nil {
		t.Fatalf("pinned boot chain: %v", err)
	}
	other := bytes.Clone(bc.CommandLine)
	other[0] ^= 1
	bad := pin
	bad.BootCommandLine = [][]byte{other}
	wantErr(t, checkPolicy(bad), ErrPolicy, nil, checkBoot)

	// Pins without an event log are refused.
	rd := testRD(t, "no log")
	res, err := Verify(simTDX(t, fakeqe.Options{}, rd), rd, simOpts())
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, CheckPolicy(res, Policy{AllowAnyMeasurement: true, BootKernel: [][]byte{bc.Kernel}}), ErrPolicy, nil, checkBoot)
}

// FuzzReplayEventLog: go-eventlog's parser and this package's replay never
// panic, and whatever replays yields one value per register.
func FuzzReplayEventLog(f *testing.F) {
	f.Add(true, trustee(f, "tdx/CCEL_data_ovmf")[:4096])
	f.Fuzz(func(t *testing.T, ccel bool, log []byte) {
		kind := logTPM
		if ccel {
			kind = logCCEL
		}
		bc, err := ReplayEventLog(kind, log)
		if err != nil {
			return
		}
		if len(bc.Registers) != len(bc.Values) {
			t.Fatalf("%d registers, %d values", len(bc.Registers), len(bc.Values))
		}
	})
}
