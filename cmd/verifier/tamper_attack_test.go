package main

// docs/spec/verifier-api.md section 2 and verify-v1.md section 3: the
// service judges a changed bundle, audit log or SystemPromptReport exactly
// as packctl verify does (200, rejected, exit 2, an EAR that says so), and a
// caller cannot send itself a relaxation. TestVerifyTampered covers the
// attestation and the evidence; these are the other documents a relying
// party passes on.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/veraison/ear"

	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
)

// flipAfter changes the character four places after the first marker in b
// (inside a b64u value), keeping it in the b64u alphabet.
func flipAfter(t *testing.T, b []byte, marker string) []byte {
	t.Helper()
	i := bytes.Index(b, []byte(marker))
	if i < 0 {
		t.Fatalf("no %s in the document", marker)
	}
	c := bytes.Clone(b)
	i += len(marker) + 4
	if c[i] == 'A' {
		c[i] = 'B'
	} else {
		c[i] = 'A'
	}
	return c
}

func TestTamperedDocumentsAttack(t *testing.T) {
	e := newEnv(t, 0)
	f := e.f
	lines := bytes.SplitAfter(f.audit, []byte("\n"))
	if len(lines) < 3 {
		t.Fatalf("the fixture's audit log has %d lines", len(lines))
	}
	dropped := bytes.Join(lines[:len(lines)-2], nil) // the last record gone
	for _, tc := range []struct {
		name                  string
		bundle, audit, report []byte
		check                 string
	}{
		{"a bundle event's payload hash", flipAfter(t, f.bundle, `"payload_hash_b64u":"`), f.audit, f.report, "bundle"},
		{"the bundle's signature", flipAfter(t, f.bundle, `"signature_b64u":"`), f.audit, f.report, "bundle"},
		{"an audit record's params hash", f.bundle, flipAfter(t, f.audit, `"params_hash_b64u":"`), f.report, "audit-log"},
		{"the audit log's last record dropped", f.bundle, dropped, f.report, "audit-log"},
		{"a report hash", f.bundle, f.audit, flipAfter(t, f.report, `_hash_b64u":"`), "report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := object([2]any{"request_version", RequestVersion},
				[2]any{"attestation_b64u", b64u.Encode(f.att)}, [2]any{"evidence_b64u", b64u.Encode(f.ev)},
				[2]any{"bundle_b64u", b64u.Encode(tc.bundle)}, [2]any{"report_b64u", b64u.Encode(tc.report)},
				[2]any{"audit_b64u", b64u.Encode(tc.audit)})
			r := e.post(body)
			if r.code != http.StatusOK || r.out.Verdict != verify.VerdictRejected || r.out.ExitCode != verify.ExitCode(verify.VerdictRejected) || r.out.Error == nil {
				t.Fatalf("%d %s, want 200 rejected", r.code, r.raw)
			}
			if !strings.HasPrefix(r.out.Error.Check, tc.check) {
				t.Errorf("refused at %q, want %q", r.out.Error.Check, tc.check)
			}
			if got := e.ear(r); got != ear.TrustTierContraindicated {
				t.Errorf("ear status %v, want contraindicated", got)
			}
			if got, want := canon(t, withoutEAR(t, r.raw)), canon(t, directDocs(t, f, tc.bundle, tc.audit, tc.report)); got != want {
				t.Errorf("service and packctl disagree:\n%s\n%s", got, want)
			}
		})
	}

	// The relaxations are the operator's: a request member naming one is
	// refused before verification.
	good := string(f.body("", true))
	for _, m := range []string{`"allow_simulated":true`, `"allow_unchecked_revocation":true`, `"now":"2026-01-01T00:00:00Z"`, `"collateral_b64u":"AA"`, `"policy_b64u":"e30"`} {
		r := e.post([]byte(strings.Replace(good, "{", "{"+m+",", 1)))
		if r.code != http.StatusBadRequest || r.out.Verdict != verify.VerdictUsage || r.out.EAR != "" {
			t.Errorf("%s: %d %s, want 400 usage without an EAR", m, r.code, r.raw)
		}
	}
	// A policy name that is a path is refused as a request error.
	for _, p := range []string{"../default", "/etc/passwd", "default.json/..", "Default"} {
		r := e.post(object([2]any{"request_version", RequestVersion}, [2]any{"policy", p},
			[2]any{"attestation_b64u", b64u.Encode(f.att)}, [2]any{"evidence_b64u", b64u.Encode(f.ev)}))
		if r.code != http.StatusBadRequest || r.out.Error == nil || strings.Contains(r.out.Error.Message, p) {
			t.Errorf("policy %q: %d %s, want 400 not quoting it", p, r.code, r.raw)
		}
	}
}

// directDocs is what packctl verify --json prints for the fixture's
// attestation and evidence with these documents, under the simulation
// policy.
func directDocs(t *testing.T, f *fixture, bundle, audit, report []byte) []byte {
	t.Helper()
	pol, err := verify.ParsePolicy(f.simPolicy())
	if err != nil {
		t.Fatal(err)
	}
	res, verr := verify.Verify(f.att, f.ev, bundle, pol, verify.Options{Now: func() time.Time { return testfixture.Now }, AuditLog: audit, Report: report})
	b, err := json.Marshal(verify.NewOutcome(res, verr))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
