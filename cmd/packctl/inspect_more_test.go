package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestInspectMoreKinds: inspect knows admission policies, audit logs,
// EARs and attester configurations, and shows a broken evidence document
// marked as such (exit 2) rather than refusing to show it.
func TestInspectMoreKinds(t *testing.T) {
	in := scriptFiles(t)
	inspect := func(path string) (int, string, string) {
		var so, se bytes.Buffer
		code := run([]string{"inspect", path}, nil, &so, &se)
		return code, so.String(), se.String()
	}
	// An EAR packctl verify signs.
	var so, se bytes.Buffer
	if code := run([]string{"verify", "--attestation", in("sev/attestation.json"), "--evidence", in("sev/evidence.jws"), "--policy", in("policy.json"),
		"--at", "2026-06-01T12:00:00Z", "--ear-key", in("ear-key.pem"), "--ear-out", in("ear.jwt")}, nil, &so, &se); code != exitOK {
		t.Fatalf("verify: %d %s", code, se.String())
	}
	// An admission policy (the one the demo suggests), and one missing a
	// required member.
	adm := testfile.Read(t, filepath.Join("testdata", "inspect", "admission.json"))
	writeTestFile(t, in("adm.json"), adm)
	writeTestFile(t, in("adm-bad.json"), []byte(`{"admission_policy_version":"clawea.dev/admission-policy/v1"}`))
	writeTestFile(t, in("attester.json"), []byte(`{"attester":{"platform":"simulated","listen":"127.0.0.1:8443","webhookSecret":"hunter2-never-shown"},"agents":{}}`))
	ev := testfile.Read(t, in("sev/evidence.jws"))
	parts := strings.Split(strings.TrimSpace(string(ev)), ".")
	parts[2] = "A" + parts[2][1:]
	writeTestFile(t, in("broken.jws"), []byte(strings.Join(parts, ".")))

	for _, tc := range []struct {
		file    string
		code    int
		want    []string
		notWant string
	}{
		{"adm.json", exitOK, []string{"kind: admission-policy", "admission_policy_hash_b64u: ", "sensitive: true", "document.bootstrap.allowed_paths[0]: AGENTS.md"}, ""},
		{"adm-bad.json", exitRejected, nil, ""},
		{"sev/audit.jsonl", exitOK, []string{"kind: audit-log", "chain: intact", "audit_root: "}, ""},
		{"sev/audit-tampered.jsonl", exitOK, []string{"kind: audit-log", "chain: BROKEN: "}, ""},
		{"ear.jwt", exitOK, []string{"kind: ear", "kid: ", "signature: not checked", "claims.ear.verifier-id.build: clawea-packctl/"}, ""},
		{"attester.json", exitOK, []string{"kind: attester-config", "values: not shown"}, "hunter2"},
		{"broken.jws", exitRejected, []string{"kind: evidence-document", "verified: false", "signature: NOT VALID", "payload."}, ""},
	} {
		code, out, errOut := inspect(in(tc.file))
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", tc.file, code, tc.code, out, errOut)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q\n%s", tc.file, w, out)
			}
		}
		if tc.notWant != "" && strings.Contains(out+errOut, tc.notWant) {
			t.Errorf("%s: output shows %q", tc.file, tc.notWant)
		}
	}
}
