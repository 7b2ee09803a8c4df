package verify

import (
	"bytes"
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/schema/poh"
)

// trailingBitsVariant changes the last character of s, a base64url string
// whose length leaves unused bits in it, to the one that differs in the
// lowest bit: the same bytes to a lenient decoder, another string to a
// strict one.
func trailingBitsVariant(t *testing.T, s string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	if len(s)%4 == 0 {
		t.Fatalf("%q has no trailing bits", s)
	}
	i := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[i^1])
}

// TestJSONFormsAttack tries the JSON and base64url forms where a hash or
// signature could cover one reading of a document and the checks read
// another: duplicate members (the signature covering one, the checks
// reading the other), members the format does not have, non-canonical
// base64url in signatures (trailing bits, padding), number forms of a
// signed integer, and line forms of the audit log and the report. Each is
// refused with its code; the forms that only re-encode the same content
// (an escaped character, whitespace) verify, as verify-v1 section 1 says:
// what is bound is the parsed content.
func TestJSONFormsAttack(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	pol := f.simPolicy()
	sig := field(t, f.att, "signature_b64u")
	bsig := field(t, f.bundle, "signature_b64u")
	type docs struct{ att, bundle, audit, report []byte }
	run := func(d docs) error {
		o := f.opts()
		o.AuditLog, o.Report = d.audit, d.report
		_, err := Verify(d.att, f.ev, d.bundle, pol, o)
		return err
	}
	att := func(b []byte) docs { return docs{b, f.bundle, f.audit, f.report} }
	bundle := func(b []byte) docs { return docs{f.att, b, f.audit, f.report} }
	audit := func(b []byte) docs { return docs{f.att, f.bundle, b, f.report} }
	report := func(b []byte) docs { return docs{f.att, f.bundle, f.audit, b} }
	for _, tc := range []struct {
		name  string
		in    docs
		check string
		code  poh.Code
	}{
		{"envelope member twice (the second signature read?)", att(replaceOnce(t, f.att, `{`, `{"signature_b64u":"`+sig+`",`)), checkEnvelope, poh.MalformedEnvelope},
		{"payload member twice", att(replaceOnce(t, f.att, `"run_id":"run_verify_001"`, `"run_id":"run_other","run_id":"run_verify_001"`)), checkEnvelope, poh.MalformedEnvelope},
		{"unknown envelope member", att(replaceOnce(t, f.att, `{`, `{"payload_b64u":"e30",`)), checkEnvelope, poh.SchemaValidationFailed},
		{"signature with other trailing bits", att(replaceOnce(t, f.att, sig, trailingBitsVariant(t, sig))), checkEnvelope, poh.SignatureInvalid},
		{"signature padded", att(replaceOnce(t, f.att, sig, sig+"==")), checkEnvelope, poh.MalformedEnvelope},
		{"signed count as 3.0", att(replaceOnce(t, f.att, `"gate_audit_count":3`, `"gate_audit_count":3.0`)), checkEnvelope, poh.MalformedEnvelope},
		{"signed count as 3e0", att(replaceOnce(t, f.att, `"gate_audit_count":3`, `"gate_audit_count":3e0`)), checkEnvelope, poh.MalformedEnvelope},
		{"bundle member twice", bundle(replaceOnce(t, f.bundle, `{`, `{"signature_b64u":"`+bsig+`",`)), checkBundle, poh.MalformedEnvelope},
		{"unknown bundle member", bundle(replaceOnce(t, f.bundle, `{`, `{"receipts":[],`)), checkBundle, poh.SchemaValidationFailed},
		{"bundle signature with other trailing bits", bundle(replaceOnce(t, f.bundle, bsig, trailingBitsVariant(t, bsig))), checkBundle, poh.SignatureInvalid},
		{"audit log with CRLF lines", audit(bytes.ReplaceAll(f.audit, []byte("\n"), []byte("\r\n"))), checkAuditLog, poh.MalformedEnvelope},
		{"audit log with a byte order mark", audit(append([]byte("\xef\xbb\xbf"), f.audit...)), checkAuditLog, poh.MalformedEnvelope},
		{"audit log with a blank last line", audit(append(bytes.Clone(f.audit), '\n')), checkAuditLog, poh.MalformedEnvelope},
		{"audit record with a member twice", audit(replaceOnce(t, f.audit, `"decision":"deny"`, `"decision":"allow","decision":"deny"`)), checkAuditLog, poh.MalformedEnvelope},
		{"report with a byte order mark", report(append([]byte("\xef\xbb\xbf"), f.report...)), checkReport, poh.SchemaValidationFailed},
		{"report followed by another value", report(append(bytes.Clone(f.report), []byte(` {}`)...)), checkReport, poh.SchemaValidationFailed},
		{"report member twice", report(replaceOnce(t, f.report, `{`, `{"final":{},`)), checkReport, poh.SchemaValidationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, run(tc.in), ErrRejected, tc.check, tc.code)
		})
	}
	for name, d := range map[string]docs{
		"payload string escaped": att(replaceOnce(t, f.att, `"run_verify_001"`, `"run_verify_00\u0031"`)),
		"payload whitespace":     att(replaceOnce(t, f.att, `"run_id":`, `"run_id" : `)),
		"bundle string escaped":  bundle(replaceOnce(t, f.bundle, `"bundle_verify_001"`, `"bundle_verify_00\u0031"`)),
		"report indented":        report(replaceOnce(t, f.report, `{`, "{\n  ")),
	} {
		if err := run(d); err != nil {
			t.Errorf("%s: the same content re-encoded is refused: %v", name, err)
		}
	}
}
