// Package octest gives tests a real OpenClaw install and captures of it
// (hack/e2e-openclaw/capture.sh). OpenClaw's text never enters the
// repository: captures are made from the install at test time.
//
// CLAWEA_OPENCLAW_DIR names the install (the openclaw-VERSION directory of
// hack/e2e-openclaw/install.sh, holding node_modules/openclaw);
// hack/e2e-openclaw/run.sh sets it. Without it the tests skip (no install
// is expected); with it, a missing install skips on a developer's machine
// and fails under CI. CLAWEA_NODE_BIN, when set, is put first on PATH
// (OpenClaw needs node >= 24).
package octest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/testfile"
)

// Install returns the install directory, or skips (or fails under CI).
func Install(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CLAWEA_OPENCLAW_DIR")
	if dir == "" {
		t.Skip("CLAWEA_OPENCLAW_DIR is not set: no OpenClaw install is expected (hack/e2e-openclaw/run.sh sets it)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openclaw", "package.json")); err != nil {
		citest.SkipOrFail(t, "no OpenClaw install at CLAWEA_OPENCLAW_DIR: %v", err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		citest.SkipOrFail(t, "bash: %v", err)
	}
	return dir
}

// Capture runs one captured OpenClaw turn of the install in workspace ws
// (TZ=UTC) and returns the capture file's bytes.
func Capture(t *testing.T, dir, ws string) []byte {
	t.Helper()
	script, err := filepath.Abs(filepath.Join(repoRoot(t), "hack", "e2e-openclaw", "capture.sh"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "capture.json")
	cmd := exec.Command("bash", script, "--openclaw-dir", dir, "--workspace", ws, "--out", out)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	if nb := os.Getenv("CLAWEA_NODE_BIN"); nb != "" {
		cmd.Env = append(cmd.Env, "PATH="+nb+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("capture.sh: %v\n%s", err, msg)
	}
	return testfile.Read(t, out)
}

// repoRoot is the nearest directory above the test's working directory
// that holds go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			t.Fatal("no go.mod above the test's directory")
		}
		d = up
	}
}
