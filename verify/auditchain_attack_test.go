package verify

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/schema/poh"
)

// TestAuditChainAttack hands an attestation that commits to a three-record
// gate audit log (root and count) other logs: none of its records, a record
// twice (in the middle, and again at the end), a record cut short at the
// end, and the log of another run with as many records. Each is refused at
// audit-log with its code; the count alone would not catch the last one,
// the root does.
func TestAuditChainAttack(t *testing.T) {
	sev := simSEV(t, sim.Options{})
	r := newRun(t)
	f := attest(t, sev, r)
	lines := bytes.SplitAfter(f.audit, []byte("\n"))
	if len(lines) != 4 || len(lines[3]) != 0 {
		t.Fatalf("the fixture's audit log has %d lines", len(lines))
	}
	other := *r
	other.denySecond = true
	_, root, _ := r.auditLog(t)
	otherLog, otherRoot, otherCount := other.auditLog(t)
	if otherCount != 3 || otherRoot == root {
		t.Fatalf("the other run's log: %d records, root %s", otherCount, otherRoot)
	}
	for _, tc := range []struct {
		name string
		log  []byte
		code poh.Code
	}{
		{"no records", []byte{}, poh.EvidenceMismatch},
		{"a record twice", bytes.Join([][]byte{lines[0], lines[1], lines[1], lines[2]}, nil), poh.HashChainBreak},
		{"the last record twice", bytes.Join([][]byte{lines[0], lines[1], lines[2], lines[2]}, nil), poh.HashChainBreak},
		{"a record cut short at the end", append(bytes.Clone(f.audit), lines[2][:len(lines[2])/2]...), poh.MalformedEnvelope},
		{"the last record without its newline", bytes.TrimSuffix(f.audit, []byte("\n")), poh.MalformedEnvelope},
		{"another run's log of as many records", otherLog, poh.EvidenceMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.opts()
			o.AuditLog = tc.log
			_, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), o)
			wantErr(t, err, ErrRejected, checkAuditLog, tc.code)
		})
	}
}
