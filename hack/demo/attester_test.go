package main

import (
	"context"
	"io"
	"log"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/hack/demo/example"
	"github.com/clawea/attester/internal/testjson"
)

// An attester that exits before it listens fails the demo with the end of
// its stderr, which says why.
func TestAttesterExitsBeforeListening(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	// A complete config but for its platform, so that the one error is the
	// platform's (missing required keys are reported first).
	cfg := `{"attester":{"platform":"sgx","controlSocket":"` + filepath.Join(dir, "ctl", "a.sock") + `",` +
		`"trustedTemplates":{"a":"sha256:` + strings.Repeat("ab", 32) + `"},"modelProvider":"p","model":"m"}}`
	_, err := startAttester(ctx, attesterBin, "attester", dir, []byte(cfg), nil, log.New(io.Discard, "", 0))
	if err == nil || !strings.Contains(err.Error(), "exited before listening") || !strings.Contains(err.Error(), "attester.platform") {
		t.Fatalf("got %v, want an early exit quoting the config error", err)
	}
}

// An attester that dies during the run fails the request with the end of
// its stderr; stop then reports the unclean exit.
func TestAttesterDiesDuringRun(t *testing.T) {
	ref, err := example.Trusted(example.FS())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := testjson.Marshal(t, map[string]any{"attester": map[string]any{
		"listen": "127.0.0.1:0", "metricsListen": "127.0.0.1:0",
		"controlSocket": filepath.Join(dir, "control", "attester.sock"), "platform": "simulated",
		"trustedTemplates": ref.TrustedTemplates, "development": true, "allowUnlockedMemory": true,
		"modelProvider": "anthropic", "model": "claude-demo",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proc, err := startAttester(ctx, attesterBin, "attester", dir, cfg, nil, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer proc.stop()
	if err := proc.pub.do("GET", "/healthz", nil, nil); err != nil {
		t.Fatalf("healthz: %v", err)
	}
	proc.cmd.Process.Kill()
	<-proc.exited
	if err := proc.ctl.do("GET", "/v1/runs", nil, nil); err == nil || !strings.Contains(err.Error(), "exited early") || !strings.Contains(err.Error(), "attester listening") {
		t.Fatalf("got %v, want the exit and the attester's stderr", err)
	}
	if err := proc.stop(); err == nil || !strings.Contains(err.Error(), "did not stop cleanly") {
		t.Fatalf("stop after kill: %v", err)
	}
}
