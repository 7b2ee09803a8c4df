package openclawrelease

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/citest"
)

// TestInstalledOpenClaw captures a real turn of the released OpenClaw that
// hack/e2e-openclaw/install.sh installed, in this package's example
// workspace (testdata/workspace, our own text), and checks what the recipe
// does with it. OpenClaw's own prompt text is never stored in this
// repository: it is produced here, from the install, at test time.
//
// CLAWEA_OPENCLAW_DIR names the install (the openclaw-VERSION directory
// holding node_modules/openclaw); hack/e2e-openclaw/run.sh sets it and runs
// this test. Without it the test skips (no install is expected); with it, a
// missing install skips on a developer's machine and fails under CI.
// CLAWEA_NODE_BIN, when set, is put first on PATH (node >= 24).
func TestInstalledOpenClaw(t *testing.T) {
	dir := os.Getenv("CLAWEA_OPENCLAW_DIR")
	if dir == "" {
		t.Skip("CLAWEA_OPENCLAW_DIR is not set: no OpenClaw install is expected (hack/e2e-openclaw/run.sh sets it)")
	}
	pkg, err := os.ReadFile(filepath.Join(dir, "node_modules", "openclaw", "package.json"))
	if err != nil {
		citest.SkipOrFail(t, "no OpenClaw install at CLAWEA_OPENCLAW_DIR: %v", err)
		return
	}
	if _, err := exec.LookPath("bash"); err != nil {
		citest.SkipOrFail(t, "bash: %v", err)
		return
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(pkg, &meta); err != nil || meta.Version == "" {
		t.Fatalf("openclaw package.json: %v", err)
	}

	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.CopyFS(ws, os.DirFS("testdata/workspace")); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "capture.json")
	cmd := exec.Command("bash", "../../../hack/e2e-openclaw/capture.sh", "--openclaw-dir", dir, "--workspace", ws, "--out", out)
	cmd.Env = os.Environ()
	if nb := os.Getenv("CLAWEA_NODE_BIN"); nb != "" {
		cmd.Env = append(cmd.Env, "PATH="+nb+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("capture.sh: %v\n%s", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCapture(data)
	if err != nil {
		t.Fatalf("ParseCapture of a real capture: %v", err)
	}
	defer c.Wipe()
	if c.OpenClawVersion != meta.Version {
		t.Fatalf("capture says OpenClaw %q, the install is %q", c.OpenClawVersion, meta.Version)
	}
	// The capture saw our workspace: every example bootstrap file is in it
	// with its bytes, and OpenClaw injected the ones it injects by default
	// into the prompt it sent (2026.9.6 does not inject TOOLS.md; the
	// capture still records it).
	for _, name := range []string{"AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"} {
		want, err := os.ReadFile(filepath.Join("testdata/workspace", name))
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for _, f := range c.BootstrapFiles {
			if f.Name == name {
				got = f.Content
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("capture: %s differs from the workspace's", name)
		}
		if name != "TOOLS.md" && !bytes.Contains(c.SystemPrompt, bytes.TrimRight(want, "\n")) {
			t.Fatalf("the captured system prompt does not contain %s", name)
		}
	}
	if len(c.Tools) == 0 {
		t.Fatal("the capture has no tools")
	}
	t.Logf("captured OpenClaw %s: system prompt %d bytes, %d tools, %d bootstrap files", c.OpenClawVersion, len(c.SystemPrompt), len(c.Tools), len(c.BootstrapFiles))

	// This recipe version cannot re-render this release: the build is
	// refused, never approximated.
	if _, err := Build(c, Supported(), nil); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Build of OpenClaw %s: got %v, want ErrUnsupportedVersion", c.OpenClawVersion, err)
	}

	// The report commits the bootstrap bytes: one changed byte of AGENTS.md
	// changes it.
	r1, err := NewReport(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	j1, _ := r1.Canonical()
	for i := range c.BootstrapFiles {
		if c.BootstrapFiles[i].Name == "AGENTS.md" {
			c.BootstrapFiles[i].Content[0] ^= 1
		}
	}
	r2, err := NewReport(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j2, _ := r2.Canonical(); bytes.Equal(j1, j2) {
		t.Fatal("a changed bootstrap byte does not change the report")
	}
}
