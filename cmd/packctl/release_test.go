package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A capture in the format of hack/e2e-openclaw/capture.sh, with our own
// text (not OpenClaw's).
const testCapture = `{"capture_version":"1","openclaw_version":"2026.9.6",
"request_sha256_b64u":"47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU",
"system_prompt":"You are a test agent.\n## AGENTS.md\nBe careful.\n",
"tools":[{"name":"read","description":"Read a file.","parameters":{"type":"object"}}],
"bootstrap_files":[{"name":"AGENTS.md","content":"Be careful.\n"}]}`

func TestBuildReleaseRefuses(t *testing.T) {
	dir := t.TempDir()
	capture := filepath.Join(dir, "capture.json")
	if err := os.WriteFile(capture, []byte(testCapture), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(testCapture, `"capture_version":"1",`, `"capture_version":"1","extra":1,`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "pack.json")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		// No OpenClaw release is reproduced by this recipe version yet.
		{"unsupported version", []string{"build", "--recipe", "openclaw-release", "--capture", capture, "-o", out}, exitCannot, "unsupported OpenClaw version"},
		{"malformed capture", []string{"build", "--recipe", "openclaw-release", "--capture", bad, "-o", out}, exitRejected, "invalid capture"},
		{"missing capture file", []string{"build", "--recipe", "openclaw-release", "--capture", filepath.Join(dir, "none.json")}, exitCannot, ""},
		{"no capture", []string{"build", "--recipe", "openclaw-release"}, exitUsage, ""},
		{"capture with params", []string{"build", "--recipe", "openclaw-release", "--capture", capture, "--params", capture}, exitUsage, ""},
		{"capture with openclaw-sig", []string{"build", "--capture", capture, "--params", capture, "--harness", dir}, exitUsage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, nil, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.msg) {
				t.Fatalf("stderr %q lacks %q", stderr.String(), tc.msg)
			}
			if strings.Contains(stderr.String()+stdout.String(), "Be careful") {
				t.Fatal("the capture's text leaked")
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatal("a pack was written")
			}
		})
	}
}
