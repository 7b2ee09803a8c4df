package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/veraison/ear"

	"github.com/clawea/attester/internal/bintest"
	"github.com/clawea/attester/verify"
)

// TestBinary builds and starts the real verifier, verifies one simulated
// SEV-SNP attestation over HTTP (made now, as the binary uses the real
// clock), is refused under the production policy, and stops cleanly on
// SIGTERM.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	dir := t.TempDir()
	bin, err := bintest.Build(dir, "verifier")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, time.Now().UTC().Truncate(time.Second))
	pdir := filepath.Join(dir, "policies")
	if err := os.Mkdir(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "prod.json"), f.prodPolicy(), 0o644); err != nil {
		t.Fatal(err)
	}
	simPath := filepath.Join(dir, "sim.json")
	if err := os.WriteFile(simPath, f.simPolicy(), 0o644); err != nil {
		t.Fatal(err)
	}
	keyPath, pub := earKey(t, dir)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--listen", "127.0.0.1:0", "--ear-key", keyPath,
		"--policy", simPath, "--policy-dir", pdir, "--reload-interval", "100ms", "--gc-percent", "200")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first log lines say where it listens.
	logs := bufio.NewScanner(stderr)
	var addr string
	var logged bytes.Buffer
	for addr == "" && logs.Scan() {
		logged.Write(append(logs.Bytes(), '\n'))
		var line struct{ Msg, Addr string }
		if json.Unmarshal(logs.Bytes(), &line) == nil && line.Msg == "listening" {
			addr = line.Addr
		}
	}
	if addr == "" {
		_ = cmd.Wait()
		t.Fatalf("no listening line:\n%s", logged.String())
	}
	rest := make(chan string, 1)
	go func() { b, _ := io.ReadAll(stderr); rest <- string(b) }()

	base := "http://" + addr
	post := func(body []byte) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(base+"/v1/verify", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	code, m := post(f.body("", true))
	if code != http.StatusOK || m["verdict"] != verify.VerdictVerified {
		t.Fatalf("%d %v", code, m)
	}
	var ar ear.AttestationResult
	if err := ar.Verify([]byte(m["ear"].(string)), jwa.EdDSA, pub); err != nil {
		t.Fatalf("ear: %v", err)
	}
	// A relying party that fetches the published key set checks the EAR by
	// its kid, and the start log named that kid.
	set, err := jwk.Fetch(t.Context(), base+jwksPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jws.Verify([]byte(m["ear"].(string)), jws.WithKeySet(set, jws.WithRequireKid(true))); err != nil {
		t.Fatalf("ear against the published keys: %v", err)
	}
	if kid, _ := kidOf(pub); !strings.Contains(logged.String(), `"ear_kid":"`+kid+`"`) {
		t.Fatalf("the start log does not name the EAR key %s:\n%s", kid, logged.String())
	}
	if code, m := post(f.body("prod", false)); code != http.StatusOK || m["verdict"] != verify.VerdictPolicy || m["exit_code"] != float64(verify.ExitCode(verify.VerdictPolicy)) {
		t.Fatalf("prod: %d %v", code, m)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || (p == "/metrics" && !strings.Contains(string(b), `clawea_verifier_verifications_total{verdict="policy-refused"} 1`)) {
			t.Fatalf("%s: %d\n%s", p, resp.StatusCode, b)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	out := <-rest // all of stderr, before Wait closes the pipe
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, out)
	}
	if !strings.Contains(out, `"msg":"stopped"`) {
		t.Fatalf("no clean stop:\n%s", out)
	}
}
