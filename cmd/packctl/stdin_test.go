package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestDashReadsStdin: "-" names stdin for an input, and only one input
// can be stdin.
func TestDashReadsStdin(t *testing.T) {
	in := scriptFiles(t)
	att := testfile.Read(t, in("sev/attestation.json"))
	var stdout, stderr bytes.Buffer
	code := run([]string{"verify", "--attestation", "-", "--evidence", in("sev/evidence.jws"), "--policy", in("policy.json"),
		"--at", "2026-06-01T12:00:00Z"}, bytes.NewReader(att), &stdout, &stderr)
	if code != exitOK || !strings.Contains(stdout.String(), "VERIFIED") {
		t.Fatalf("verify --attestation -: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"inspect", "-"}, bytes.NewReader(att), &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), "attestation") {
		t.Fatalf("inspect -: exit %d\n%s", code, stdout.String())
	}
	stderr.Reset()
	code = run([]string{"verify", "--attestation", "-", "--evidence", "-"}, bytes.NewReader(att), &stdout, &stderr)
	if code != exitCannot || !strings.Contains(stderr.String(), "one input only") {
		t.Fatalf("two stdin inputs: exit %d\n%s", code, stderr.String())
	}
}
