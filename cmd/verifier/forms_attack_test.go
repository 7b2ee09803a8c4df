package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/veraison/ear"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
)

// TestEmbeddedFormsAttack sends the service documents in the forms where
// its re-encoding of an embedded document could differ from what was
// signed: a member twice inside the embedded attestation (400 before
// anything is verified, no EAR), a member the envelope does not have (judged:
// rejected, EAR contraindicated), base64url with other trailing bits (400),
// and an audit log with no records against an attestation that commits to
// some (rejected at audit-log). An escaped character in the embedded
// attestation re-encodes to the same content and verifies.
func TestEmbeddedFormsAttack(t *testing.T) {
	e := newEnv(t, 0)
	f := e.f
	with := func(att []byte, audit []byte) []byte {
		return object([2]any{"request_version", RequestVersion}, [2]any{"attestation", json.RawMessage(att)},
			[2]any{"evidence", string(f.ev)}, [2]any{"bundle", json.RawMessage(f.bundle)},
			[2]any{"report", json.RawMessage(f.report)}, [2]any{"audit_b64u", b64u.Encode(audit)})
	}
	replace := func(old, new string) []byte {
		if !bytes.Contains(f.att, []byte(old)) {
			t.Fatalf("%q not in the attestation", old)
		}
		return bytes.Replace(f.att, []byte(old), []byte(new), 1)
	}
	// A request with every document as base64url, the first one whose
	// encoding has trailing bits given with other trailing bits.
	docs := [][2]any{{"attestation", f.att}, {"bundle", f.bundle}, {"report", f.report}, {"audit", f.audit}, {"evidence", f.ev}}
	ms := [][2]any{{"request_version", RequestVersion}}
	changed := false
	for _, d := range docs {
		enc := b64u.Encode(d[1].([]byte))
		if !changed && len(enc)%4 != 0 {
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			i := strings.IndexByte(alphabet, enc[len(enc)-1]) ^ 1
			enc, changed = enc[:len(enc)-1]+alphabet[i:i+1], true
		}
		ms = append(ms, [2]any{d[0].(string) + "_b64u", enc})
	}
	if !changed {
		t.Fatal("no document's base64url has trailing bits")
	}
	trailing := object(ms...)
	for _, tc := range []struct {
		name          string
		body          []byte
		code          int
		verdict       string
		check, pohErr string
		tier          ear.TrustTier
	}{
		{"a member twice inside the embedded attestation", with(replace(`"run_id":"run_verifier_001"`, `"run_id":"run_other","run_id":"run_verifier_001"`), f.audit),
			http.StatusBadRequest, verify.VerdictUsage, "request", "", 0},
		{"an envelope member the format does not have", with(replace(`{`, `{"payload_b64u":"e30",`), f.audit),
			http.StatusOK, verify.VerdictRejected, "envelope", "SCHEMA_VALIDATION_FAILED", ear.TrustTierContraindicated},
		{"base64url with other trailing bits", trailing,
			http.StatusBadRequest, verify.VerdictUsage, "request", "", 0},
		{"an audit log without its records", with(f.att, []byte{}),
			http.StatusOK, verify.VerdictRejected, "audit-log", "EVIDENCE_MISMATCH", ear.TrustTierContraindicated},
		{"an escaped character (the same content)", with(replace(`"run_verifier_001"`, `"run_verifier_00\u0031"`), f.audit),
			http.StatusOK, verify.VerdictVerified, "", "", ear.TrustTierWarning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(tc.body)
			if r.code != tc.code || r.out.Verdict != tc.verdict || r.out.ExitCode != verify.ExitCode(tc.verdict) {
				t.Fatalf("%d %s, want %d %s", r.code, r.raw, tc.code, tc.verdict)
			}
			if tc.check != "" && (r.out.Error == nil || r.out.Error.Check != tc.check || r.out.Error.Code != tc.pohErr) {
				t.Fatalf("error %+v, want %s %s", r.out.Error, tc.check, tc.pohErr)
			}
			if tc.code != http.StatusOK {
				if r.out.EAR != "" {
					t.Fatal("an EAR for a refused request")
				}
				return
			}
			if got := e.ear(r); got != tc.tier {
				t.Fatalf("ear status %v, want %v", got, tc.tier)
			}
		})
	}
}
