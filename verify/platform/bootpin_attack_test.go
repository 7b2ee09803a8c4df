package platform

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestBootPinAppendAttack tries what a TD that booted the approved firmware
// with another kernel and command line can do: the TD extends RTMR1 and
// RTMR2 itself (TDG.MR.RTMR.EXTEND; any code before ExitBootServices can
// log the events too) with the approved kernel's and command line's
// digests and adds those events to its CC event log. The log replays to
// the quoted RTMRs, and the approved values are now the last of their
// kind. The boot pins (and MRTD, which does not measure the kernel) must
// still refuse it: the kernel and command line that ran are in the chain.
func TestBootPinAppendAttack(t *testing.T) {
	log := trustee(t, "tdx/CCEL_data_ovmf")
	good, err := ReplayEventLog(logCCEL, log)
	if err != nil {
		t.Fatal(err)
	}
	end, err := ccelEnd(log)
	if err != nil {
		t.Fatal(err)
	}
	if len(good.Kernels) != 1 || len(good.CommandLines) != 1 || len(good.Initrds) != 1 {
		t.Fatalf("OVMF boot: %d kernels, %d command lines, %d initrds", len(good.Kernels), len(good.CommandLines), len(good.Initrds))
	}
	kernel, cmdline := good.Kernels[0], good.CommandLines[0]
	kernelEv := eventWith(t, log[:end], kernel)
	cmdlineEv := eventWith(t, log[:end], cmdline)
	// The TD's own boot: another kernel and command line measured by the
	// firmware, then the approved events appended by that kernel.
	forged := bytes.Clone(log[:end])
	for _, d := range [][]byte{kernel, cmdline} {
		other := bytes.Clone(d)
		other[0] ^= 0xff
		forged = bytes.Replace(forged, d, other, 1)
	}
	forged = append(forged, kernelEv...)
	forged = append(forged, cmdlineEv...)
	forged = append(forged, bytes.Repeat([]byte{0xff}, len(log)-len(forged))...)
	rd := testRD(t, "boot pin append")
	res := verifySim(t, simTDWithLog(t, forged, rd), rd)
	if !bytes.Equal(res.Boot.Firmware, good.Firmware) {
		t.Fatal("the forged log changed the firmware register")
	}
	pin := Policy{Measurements: [][]byte{res.Measurement}, BootFirmware: [][]byte{good.Firmware}, BootKernel: [][]byte{kernel},
		BootCommandLine: [][]byte{cmdline}, BootInitrd: good.Initrds}
	err = CheckPolicy(res, pin)
	wantErr(t, err, ErrPolicy, nil, checkBoot)
	// Only the kernel appended: refused for the kernel.
	pin.BootCommandLine = nil
	wantErr(t, CheckPolicy(res, pin), ErrPolicy, nil, checkBoot)
}

// eventWith returns the bytes of the one crypto-agile event of the CC event
// log area that holds digest.
func eventWith(t *testing.T, area, digest []byte) []byte {
	t.Helper()
	size := int(binary.LittleEndian.Uint32(area[pcrEventHeaderSize-4:]))
	digestSizes, err := specIDDigestSizes(area[pcrEventHeaderSize : pcrEventHeaderSize+size])
	if err != nil {
		t.Fatal(err)
	}
	var found []byte
	for off := pcrEventHeaderSize + size; off < len(area); {
		next, err := ccelEventEnd(area, off, digestSizes)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(area[off:next], digest) {
			if found != nil {
				t.Fatal("two events hold the digest")
			}
			found = bytes.Clone(area[off:next])
		}
		off = next
	}
	if found == nil {
		t.Fatal("no event holds the digest")
	}
	return found
}
