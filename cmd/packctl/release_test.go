package main

import (
	"bytes"
	"encoding/json"
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
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(strings.Replace(testCapture, `"2026.9.6"`, `"2026.9.5"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "pack.json")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		// Only the exact versions the recipe has a Release for.
		{"unsupported version", []string{"build", "--recipe", "openclaw-release", "--capture", other, "--openclaw", dir, "-o", out}, exitCannot, "unsupported OpenClaw version"},
		{"malformed capture", []string{"build", "--recipe", "openclaw-release", "--capture", bad, "--openclaw", dir, "-o", out}, exitRejected, "invalid capture"},
		{"missing capture file", []string{"build", "--recipe", "openclaw-release", "--capture", filepath.Join(dir, "none.json"), "--openclaw", dir}, exitCannot, ""},
		// A directory that is not the pinned release's install.
		{"not the install", []string{"build", "--recipe", "openclaw-release", "--capture", capture, "--openclaw", dir, "-o", out}, exitCannot, "fixed text"},
		{"missing install", []string{"build", "--recipe", "openclaw-release", "--capture", capture, "--openclaw", filepath.Join(dir, "none"), "-o", out}, exitCannot, ""},
		{"no capture", []string{"build", "--recipe", "openclaw-release", "--openclaw", dir}, exitUsage, "-capture"},
		{"no install", []string{"build", "--recipe", "openclaw-release", "--capture", capture}, exitUsage, "-openclaw"},
		{"install with openclaw-sig", []string{"build", "--openclaw", dir, "--params", capture, "--harness", dir}, exitUsage, ""},
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

func TestReleases(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"releases", "--json"}, nil, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var got struct {
		Releases []struct {
			Version string            `json:"openclaw_version"`
			Trust   map[string]string `json:"trusted_templates_entry"`
			Files   map[string]string `json:"files"`
		} `json:"releases"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got.Releases) != 1 {
		t.Fatalf("releases --json: %v %s", err, stdout.String())
	}
	r := got.Releases[0]
	if r.Version != "2026.9.6" || len(r.Trust) != 1 || !strings.HasPrefix(r.Trust["openclaw-release:2026.9.6"], "sha256:") || len(r.Files) == 0 {
		t.Fatalf("release entry %+v", r)
	}
	if code := run([]string{"releases", "extra"}, nil, &stdout, &stderr); code != exitUsage {
		t.Fatalf("an argument: exit %d", code)
	}
}
