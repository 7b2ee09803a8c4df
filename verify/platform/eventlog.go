package platform

import (
	"bytes"
	"crypto"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/go-eventlog/register"
	"github.com/google/go-eventlog/tcg"

	"github.com/clawea/attester/wire/evidence"
)

// Boot chain: an event log replayed against verified measurement registers
// (docs/spec/verify-platform.md, section 8). Parsing and replay are
// go-eventlog's; this file picks the reference values a policy pins.

// Event-log kinds (BootChain.Log).
const (
	// logTPM is a TCG PC Client event log replayed into SHA-256 PCRs.
	logTPM = "tpm"
	// logCCEL is a confidential-computing event log (TDX CCEL) replayed
	// into RTMRs (SHA-384). Its register indices are CC MR indices: 1 is
	// RTMR0, ..., 4 is RTMR3.
	logCCEL = "ccel"
)

// checkBoot names the boot-chain checks: replay (Verify) and the pinned
// reference values (CheckPolicy).
const checkBoot = "boot-chain"

// maxEventLog bounds an event log (a CCEL area is at most a few MiB; TPM
// logs are well under).
const maxEventLog = 4 << 20

// Event types and EV_EVENT_TAG identifiers the boot chain reads (TCG PC
// Client PFP; the Linux EFI stub's tagged events).
const (
	evNoAction          = 0x00000003
	evEventTag          = 0x00000006
	evBootServicesApp   = 0x80000003
	tagLinuxLoadOptions = 0x8F3B22ED
	tagLinuxInitrd      = 0x8F3B22EC
	startupLocality     = "StartupLocality\x00"
)

// BootChain is what a replayed event log established: every value comes
// from events whose register replayed to the verified value.
type BootChain struct {
	// Log is "tpm" or "ccel".
	Log string
	// Registers are the register indices the log was replayed into (PCR
	// indices, or RTMR indices 0-3 for ccel), ascending, and Values their
	// values.
	Registers []int
	Values    [][]byte
	// Firmware is the value of PCR 0 (tpm) or RTMR0 (ccel): firmware code
	// and configuration.
	Firmware []byte
	// Kernels are the digests of every EFI boot services application in
	// PCR 4 or RTMR1, in log order: the kernel's Authenticode hash, after
	// those of the loaders that ran before it (shim, GRUB).
	Kernels [][]byte
	// CommandLines and Initrds are the digests of every Linux EFI stub
	// tagged event of their kind in PCR 9 or RTMR2, in log order: the load
	// options and the initrd.
	//
	// Code that ran after the firmware measured the real ones can extend
	// the register and log an approved digest after them, so the last of a
	// kind proves nothing alone: a pin holds only when every one is pinned
	// (checkBootPolicy).
	CommandLines, Initrds [][]byte
}

// bootRegisters maps a log kind to its replay: hash, which event register
// indices hold firmware, kernel and the Linux stub's tags, and how an event
// register index maps to a register index.
type bootLayout struct {
	hash                       crypto.Hash
	alg                        register.HashAlg
	firmware, kernel, linuxTag int
	regOf                      func(int) int
}

var bootLayouts = map[string]bootLayout{
	logTPM:  {crypto.SHA256, register.HashSHA256, 0, 4, 9, func(i int) int { return i }},
	logCCEL: {crypto.SHA384, register.HashSHA384, 1, 2, 3, func(i int) int { return i - 1 }},
}

// parseEventLog parses an event log of kind with go-eventlog.
func parseEventLog(kind string, log []byte) (*tcg.EventLog, bootLayout, error) {
	lay, ok := bootLayouts[kind]
	if !ok {
		return nil, lay, fmt.Errorf("unknown event log kind %q", kind)
	}
	if len(log) == 0 || len(log) > maxEventLog {
		return nil, lay, fmt.Errorf("event log is %d bytes, want 1 to %d", len(log), maxEventLog)
	}
	if kind == logCCEL {
		// A CCEL area is padded with 0xff or 0x00 after the last event.
		end, err := ccelEnd(log)
		if err != nil {
			return nil, lay, fmt.Errorf("event log: %w", err)
		}
		log = log[:end]
	}
	var el *tcg.EventLog
	err := guard(checkBoot, func() (err error) {
		el, err = tcg.ParseEventLog(log, tcg.ParseOpts{})
		return err
	})
	if err != nil {
		return nil, lay, fmt.Errorf("event log: %w", err)
	}
	if !slices.Contains(el.Algs, lay.alg) {
		return nil, lay, fmt.Errorf("event log has no %v digests", lay.hash)
	}
	return el, lay, nil
}

// replayBootChain replays log against the verified register values
// (indexed by register: PCR n, or RTMR n for ccel; nil entries are
// registers the evidence does not cover) and returns the boot chain. A
// register whose events do not replay to its value is rejected.
func replayBootChain(kind string, log []byte, verified map[int][]byte) (*BootChain, error) {
	el, lay, err := parseEventLog(kind, log)
	if err != nil {
		return nil, rejected(checkBoot, err)
	}
	var mrs []register.MR
	var regs []int
	for reg := range verified {
		regs = append(regs, reg)
	}
	slices.Sort(regs)
	for _, reg := range regs {
		if kind == logCCEL {
			mrs = append(mrs, register.RTMR{Index: reg, Digest: verified[reg]})
		} else {
			mrs = append(mrs, register.PCR{Index: reg, Digest: verified[reg], DigestAlg: lay.hash})
		}
	}
	var events []tcg.Event
	err = guard(checkBoot, func() (err error) {
		events, err = el.Verify(mrs)
		return err
	})
	if err != nil {
		return nil, rejected(checkBoot, err)
	}
	bc := &BootChain{Log: kind, Registers: regs}
	for _, reg := range regs {
		bc.Values = append(bc.Values, clone(verified[reg]))
	}
	bc.pick(events, lay, verified)
	return bc, nil
}

// ReplayEventLog replays an event log of kind ("tpm" or "ccel") on its own:
// every register it names is extended from zero with its events' digests.
// Nothing it returns is verified: it is what the log claims, for display
// and for writing reference values, until a verifier replays the same log
// against registers that signed evidence reports.
func ReplayEventLog(kind string, log []byte) (*BootChain, error) {
	el, lay, err := parseEventLog(kind, log)
	if err != nil {
		return nil, rejected(checkBoot, err)
	}
	events := el.Events(lay.alg)
	regs := map[int][]byte{}
	for _, e := range events {
		reg := lay.regOf(int(e.Index))
		if uint32(e.Type) == evNoAction {
			// Extends nothing; StartupLocality sets PCR 0's initial value.
			if kind == logTPM && reg == 0 && len(e.Data) == len(startupLocality)+1 && bytes.HasPrefix(e.Data, []byte(startupLocality)) {
				v := make([]byte, lay.hash.Size())
				v[len(v)-1] = e.Data[len(startupLocality)]
				regs[0] = v
			}
			continue
		}
		if len(e.Digest) != lay.hash.Size() {
			return nil, rejected(checkBoot, fmt.Errorf("event %d has no %v digest", e.Num(), lay.hash))
		}
		if kind == logCCEL && (reg < 0 || reg > 3) {
			continue // MRTD (CC index 0) is not extended by events
		}
		v, ok := regs[reg]
		if !ok {
			v = make([]byte, lay.hash.Size())
		}
		h := lay.hash.New()
		h.Write(v)
		h.Write(e.Digest)
		regs[reg] = h.Sum(nil)
	}
	bc := &BootChain{Log: kind}
	for reg := range regs {
		bc.Registers = append(bc.Registers, reg)
	}
	slices.Sort(bc.Registers)
	for _, reg := range bc.Registers {
		bc.Values = append(bc.Values, regs[reg])
	}
	bc.pick(events, lay, regs)
	return bc, nil
}

// pick sets the reference values from events (those of replayed registers
// only) and the register values.
func (bc *BootChain) pick(events []tcg.Event, lay bootLayout, values map[int][]byte) {
	if v, ok := values[lay.regOf(lay.firmware)]; ok {
		bc.Firmware = clone(v)
	}
	for _, e := range events {
		idx := int(e.Index)
		if _, ok := values[lay.regOf(idx)]; !ok {
			continue
		}
		switch {
		case idx == lay.kernel && uint32(e.Type) == evBootServicesApp:
			bc.Kernels = append(bc.Kernels, clone(e.Digest))
		case idx == lay.linuxTag && uint32(e.Type) == evEventTag && len(e.Data) >= 4:
			switch binary.LittleEndian.Uint32(e.Data) {
			case tagLinuxLoadOptions:
				bc.CommandLines = append(bc.CommandLines, clone(e.Digest))
			case tagLinuxInitrd:
				bc.Initrds = append(bc.Initrds, clone(e.Digest))
			}
		}
	}
}

// checkBootPolicy compares the pinned reference values with the replayed
// boot chain. The firmware value is a register's value. The kernel,
// command line and initrd are events in a register that later code can
// extend: an approved digest logged after the real one would be the last
// of its kind. So every event of the kind MUST be pinned, unless the
// register's value is itself pinned: TPM evidence whose measurement
// matched (CheckPolicy refuses a measurement pin unless the quote selects
// PCRs 0..n-1, so every replayed PCR holds the approved value).
func checkBootPolicy(r *Result, p Policy) error {
	pins := []struct {
		name string
		ok   [][]byte
		all  func(*BootChain) [][]byte // in log order; the firmware is one value
	}{
		{"firmware", p.BootFirmware, func(b *BootChain) [][]byte { return [][]byte{b.Firmware} }},
		{"kernel", p.BootKernel, func(b *BootChain) [][]byte { return b.Kernels }},
		{"command line", p.BootCommandLine, func(b *BootChain) [][]byte { return b.CommandLines }},
		{"initrd", p.BootInitrd, func(b *BootChain) [][]byte { return b.Initrds }},
	}
	registersPinned := r.Platform == evidence.PlatformTPM && !p.AllowAnyMeasurement
	for _, pin := range pins {
		if len(pin.ok) == 0 {
			continue
		}
		if r.Boot == nil {
			return policyErr(checkBoot, fmt.Errorf("the policy pins the boot %s but the evidence carries no replayed event log", pin.name))
		}
		all := pin.all(r.Boot)
		got := all
		if registersPinned && len(got) > 0 {
			got = got[len(got)-1:]
		}
		if len(got) == 0 || got[0] == nil {
			return policyErr(checkBoot, fmt.Errorf("the replayed event log has no boot %s (not measured, or its register is not covered)", pin.name))
		}
		for i, v := range got {
			if !slices.ContainsFunc(pin.ok, func(w []byte) bool { return bytes.Equal(w, v) }) {
				return policyErr(checkBoot, fmt.Errorf("boot %s %x (%d of %d of its kind in the event log) is not pinned", pin.name, v, len(all)-len(got)+i+1, len(all)))
			}
		}
	}
	return nil
}
