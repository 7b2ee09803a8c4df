package verify

// verify-v1.md section 1: inputs are bounded (attestation and bundle 8 MiB,
// evidence document 8 MiB, audit log 64 MiB, SystemPromptReport 1 MiB) and
// larger inputs MUST be rejected. The attack: each genuine document padded
// with trailing whitespace, which a JSON or line reader would skip, to one
// byte over its documented limit: rejected at the input check, before any
// parse. At exactly the limit the input check passes: the evidence and
// the audit log are hashed as bytes, so their padding is caught later; the
// bundle and the report are bound by the hash of their parsed (payload,
// JCS) form, so trailing whitespace leaves them verified.

import (
	"bytes"
	"errors"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/schema/poh"
)

func TestInputLimitsAttack(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	pad := func(b []byte, size int) []byte {
		return append(bytes.Clone(b), bytes.Repeat([]byte{'\n'}, size-len(b))...)
	}
	for _, tc := range []struct {
		name  string
		limit int
		bytes bool // hashed as bytes: the padded input is rejected later
		call  func(size int) error
	}{
		{"evidence document", 8 << 20, true, func(n int) error {
			_, err := Verify(f.att, pad(f.ev, n), f.bundle, f.simPolicy(), f.opts())
			return err
		}},
		{"proof bundle", 8 << 20, false, func(n int) error {
			_, err := Verify(f.att, f.ev, pad(f.bundle, n), f.simPolicy(), f.opts())
			return err
		}},
		{"audit log", 64 << 20, true, func(n int) error {
			o := f.opts()
			o.AuditLog = pad(f.audit, n)
			_, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), o)
			return err
		}},
		{"report", 1 << 20, false, func(n int) error {
			o := f.opts()
			o.Report = pad(o.Report, n)
			_, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), o)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, tc.call(tc.limit+1), ErrRejected, checkInput, poh.MalformedEnvelope)
			err := tc.call(tc.limit)
			if e, ok := errors.AsType[*Error](err); ok && e.Check == checkInput {
				t.Fatalf("at the limit: refused at the input check: %v", e)
			}
			if tc.bytes && !errors.Is(err, ErrRejected) {
				t.Fatalf("at the limit: %v, want the padding rejected", err)
			}
		})
	}
}
