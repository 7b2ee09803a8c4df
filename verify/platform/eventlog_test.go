package platform

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/wire/evidence"
)

// TestCCELConformance holds the tdx/ event-log rows of the conformance
// table: both logs replay on their own. The td-shim log (CCEL_data) fills
// its 1 MiB area with zero bytes after its last event, which go-eventlog
// alone reads as empty events until it runs out of bytes; ccelEnd cuts the
// log there. Its RTMR values are the ones Trustee's own tests expect.
func TestCCELConformance(t *testing.T) {
	bc, err := ReplayEventLog(logCCEL, trustee(t, "tdx/CCEL_data_ovmf"))
	if err != nil {
		t.Fatalf("CCEL_data_ovmf: %v", err)
	}
	if bc.Log != "ccel" || len(bc.Registers) != 3 || len(bc.Kernels) != 1 || len(bc.CommandLines) != 1 || len(bc.Initrds) != 1 || !bytes.Equal(bc.Firmware, bc.Values[0]) {
		t.Fatalf("boot chain %+v", bc)
	}
	for i, v := range bc.Values {
		t.Logf("rtmr%d %x", bc.Registers[i], v)
	}
	t.Logf("kernel %x\ncmdline %x\ninitrd %x", bc.Kernels, bc.CommandLines, bc.Initrds)

	shim := trustee(t, "tdx/CCEL_data")
	bc, err = ReplayEventLog(logCCEL, shim)
	if err != nil {
		t.Fatalf("CCEL_data: %v", err)
	}
	want := []string{
		"2dc712306a963eadb894ad47dbaa17df44814151555aee11cbb843becca88950ffd079664902e6f22c66f7c8213543f4",
		"0fa3be56af61208bbd179dc7b124988eb929319154663c539d6f46445ecac2fec287075047ff7bd1922829fec28cd3cf",
	}
	if !slices.Equal(bc.Registers, []int{0, 1}) || hex.EncodeToString(bc.Values[0]) != want[0] || hex.EncodeToString(bc.Values[1]) != want[1] {
		t.Fatalf("CCEL_data replays to %v %x", bc.Registers, bc.Values)
	}
	if end, err := ccelEnd(shim); err != nil || end != 0x265e {
		t.Fatalf("ccelEnd = %#x, %v; want 0x265e", end, err)
	}
}

// TestCCELEndRefuses: framing that does not hold is refused with the
// event, its offset and the field; padding ends the log only at an event
// boundary.
func TestCCELEndRefuses(t *testing.T) {
	shim := trustee(t, "tdx/CCEL_data")[:0x265e+64]
	const ev4 = 0x15aa // the td_payload event (4), 28 bytes of data
	put := func(off int, v uint32) []byte {
		b := bytes.Clone(shim)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	for _, c := range []struct {
		name string
		in   []byte
		want string
	}{
		{"event size past the area", put(ev4+12+2+48, 1<<20), "event 4 at offset 0x15aa: event size 1048576 exceeds the"},
		{"no digests", put(ev4+8, 0), "event 4 at offset 0x15aa: digest count 0, want 1 to 1"},
		{"two digests", put(ev4+8, 2), "event 4 at offset 0x15aa: digest count 2, want 1 to 1"},
		{"sha-256 digest", put(ev4+12, 0x000b), "event 4 at offset 0x15aa: digest 0: algorithm 0x000b is not in the spec id event"},
		{"not a spec id event", put(32, 0), "event 0 at offset 0: not a Spec ID Event03 event"},
		{"spec id event past the area", put(28, 1<<20), "event 0 at offset 0: event size 1048576 exceeds the"},
		{"truncated event", shim[:ev4+20], "event 4 at offset 0x15aa: digest 0: 48 bytes exceed the 6 bytes left"},
		{"zero padding inside an event", shim[:0x265e-1], "event 5 at offset 0x1608: event size 4116 exceeds the 4115 bytes left"},
	} {
		_, err := ccelEnd(c.in)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
		_, err = ReplayEventLog(logCCEL, c.in)
		wantErr(t, err, ErrRejected, nil, checkBoot)
	}
	// Bytes after zero padding are not padding: the next "event" is read.
	junk := bytes.Clone(shim)
	junk[len(junk)-1] = 1
	if _, err := ccelEnd(junk); err == nil {
		t.Error("a non-zero byte after the log was taken for padding")
	}
}

// The td-shim log is the log of a TD whose RTMRs it replays to; a changed
// digest of its payload event is refused.
func TestTDXBootChainTDShim(t *testing.T) {
	log := trustee(t, "tdx/CCEL_data")
	_, verifyWith, _ := tdWithLog(t, log)
	if err := verifyWith(log); err != nil {
		t.Fatalf("log of the td: %v", err)
	}
	changed := bytes.Clone(log)
	changed[0x15aa+12+2] ^= 1 // the td_payload event's digest (RTMR1)
	wantErr(t, verifyWith(changed), ErrRejected, nil, checkBoot)
}

// tdWithLog returns simulated TDX evidence whose RTMRs are the ones log
// replays to, carrying log.
func tdWithLog(t *testing.T, log []byte) (*BootChain, func([]byte) error, func(Policy) error) {
	t.Helper()
	bc, err := ReplayEventLog(logCCEL, log)
	if err != nil {
		t.Fatal(err)
	}
	rd := testRD(t, "boot")
	ev := simTDWithLog(t, log, rd)
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
		res := verifySim(t, e, rd)
		if res.Boot == nil || !slices.EqualFunc(res.Boot.Kernels, bc.Kernels, bytes.Equal) {
			t.Fatalf("boot %+v", res.Boot)
		}
		p.AllowAnyMeasurement = true
		return CheckPolicy(res, p)
	}
	return bc, verifyWith, checkPolicy
}

// simTDWithLog is simulated TDX evidence over rd of a TD whose RTMRs hold
// what the CC event log log replays to, carrying the log as a TD carries its
// CCEL.
func simTDWithLog(t *testing.T, log []byte, rd evidence.ReportData) *evidence.Evidence {
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
	return simTDX(t, fakeqe.Options{TD: &td, EventLog: log}, rd)
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
	i := bytes.Index(log, lastOf(bc.Initrds))
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

	pin := Policy{BootFirmware: [][]byte{bc.Firmware}, BootKernel: bc.Kernels, BootCommandLine: bc.CommandLines, BootInitrd: bc.Initrds}
	if err := checkPolicy(pin); err != nil {
		t.Fatalf("pinned boot chain: %v", err)
	}
	other := bytes.Clone(lastOf(bc.CommandLines))
	other[0] ^= 1
	bad := pin
	bad.BootCommandLine = [][]byte{other}
	wantErr(t, checkPolicy(bad), ErrPolicy, nil, checkBoot)

	// Pins without an event log are refused.
	rd := testRD(t, "no log")
	res := verifySim(t, simTDX(t, fakeqe.Options{}, rd), rd)
	wantErr(t, CheckPolicy(res, Policy{AllowAnyMeasurement: true, BootKernel: bc.Kernels}), ErrPolicy, nil, checkBoot)
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

// FuzzCCELEnd: ccelEnd never panics; the end it finds is inside the area,
// is followed only by padding, and is the end of the log it cuts.
func FuzzCCELEnd(f *testing.F) {
	f.Add(trustee(f, "tdx/CCEL_data")[:0x265e+16])
	f.Add(trustee(f, "tdx/CCEL_data_ovmf")[:0x848+16])
	f.Fuzz(func(t *testing.T, area []byte) {
		end, err := ccelEnd(area)
		if err != nil {
			return
		}
		rest := area[end:]
		if end > len(area) || !(allZero(rest) || bytes.HasPrefix(rest, []byte{0xff, 0xff, 0xff, 0xff})) {
			t.Fatalf("end %d of %d is followed by %x", end, len(area), rest[:min(len(rest), 16)])
		}
		if again, err := ccelEnd(area[:end]); err != nil || again != end {
			t.Fatalf("ccelEnd of the cut log = %d, %v; want %d", again, err, end)
		}
	})
}
