package main

import (
	"bytes"
	"context"
	"errors"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/fakeparavisor"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/wire/evidence"
)

// TestEndToEndAzure runs the demo's main job on an attester binary whose
// platform is azure-snp or azure-tdx, against the fake paravisor (a real
// swtpm behind it regenerating the HCL report on each user-data write), and
// verifies the execution attestation with the real packctl binary: it
// verifies with simulated evidence allowed, and is refused without.
func TestEndToEndAzure(t *testing.T) {
	dir := t.TempDir()
	packctl := filepath.Join(dir, "packctl")
	if out, err := exec.Command("go", "build", "-o", packctl, "github.com/clawea/attester/cmd/packctl").CombinedOutput(); err != nil {
		t.Fatalf("go build packctl: %v\n%s", err, out)
	}
	for _, pl := range []string{evidence.PlatformAzureSNP, evidence.PlatformAzureTDX} {
		t.Run(pl, func(t *testing.T) {
			pv := fakeparavisor.Start(t, pl)
			outDir, work := t.TempDir(), t.TempDir()
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := runDemo(ctx, options{Vector: "full", Attester: attesterBin, OutDir: outDir, WorkDir: work, Log: log.New(&logs, "", 0),
				Platform: map[string]any{"platform": pl, "tpm": map[string]any{"address": pv.TPMAddr, "azureImds": pv.IMDS}}})
			if err != nil {
				t.Fatalf("demo: %v\n%s", err, logs.String())
			}
			// The key attestation and the run's attestation each wrote the
			// run binding to the paravisor.
			if n := pv.Regenerations.Load(); n < 2 {
				t.Fatalf("%d hcl report regenerations", n)
			}
			f := func(name string) string { return filepath.Join(outDir, name) }
			args := []string{"verify", "--attestation", f("attestation.json"), "--evidence", f("evidence.jws"),
				"--bundle", f("bundle.json"), "--audit", f("audit.jsonl"), "--report", f("report.json"), "--policy", f("policy.json"),
				"--allow-unchecked-revocation", "--allow-unchecked-collateral"}
			code, stdout, stderr := runPackctl(t, packctl, append(args, "--allow-simulated")...)
			if code != 0 || !strings.Contains(stdout, pl) {
				t.Fatalf("packctl verify: exit %d\n%s\n%s", code, stdout, stderr)
			}
			// packctl inspect shows the HCL report's user data and the
			// hardware report beneath it.
			code, stdout, stderr = runPackctl(t, packctl, "inspect", "--json", f("evidence.jws"))
			if code != 0 || !strings.Contains(stdout, `"azure"`) || !strings.Contains(stdout, "user_data_hex") || strings.Contains(stdout, "_error") {
				t.Fatalf("packctl inspect: exit %d\n%s\n%s", code, stdout, stderr)
			}
			// The same attestation under a policy that does not allow
			// simulated evidence is refused by policy (exit 4).
			pol, err := verify.ParsePolicy(testfile.Read(t, f("policy.json")))
			if err != nil {
				t.Fatal(err)
			}
			pol.AllowSimulated = false
			strict, err := pol.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f("strict.json"), strict, 0o644); err != nil {
				t.Fatal(err)
			}
			args[len(args)-3] = f("strict.json")
			if code, stdout, stderr = runPackctl(t, packctl, args...); code != 4 {
				t.Fatalf("packctl verify under a strict policy: exit %d, want 4 (policy)\n%s\n%s", code, stdout, stderr)
			}
		})
	}
}

func runPackctl(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	var so, se bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Env = &so, &se, os.Environ()
	err := cmd.Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode(), so.String(), se.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, so.String(), se.String()
}
