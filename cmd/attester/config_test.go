package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConfigTyposAgainstTheBinary: a key that is misspelt or out of range
// is a configuration error: the real binary exits 1 before it opens
// anything, and its log names the key. A typo that were passed over would
// silently drop the control it meant to set (tools.denny: no deny list).
func TestConfigTyposAgainstTheBinary(t *testing.T) {
	pf := configPack()
	for _, tc := range []struct {
		key    string
		mutate func(cfg map[string]any)
	}{
		{"tools.denny", func(cfg map[string]any) { section(cfg, "tools")["denny"] = []string{"exec"} }},
		{"tools.verfier", func(cfg map[string]any) { section(cfg, "tools")["verfier"] = map[string]any{"enabled": true} }},
		{"tools.profle", func(cfg map[string]any) { section(cfg, "tools")["profle"] = "minimal" }},
		{"agents.default", func(cfg map[string]any) {
			section(cfg, "agents")["default"] = map[string]any{"sig": map[string]any{"enforceVerification": true}}
		}},
		{"agents.defaults.sigg", func(cfg map[string]any) {
			section(cfg, "agents")["defaults"].(map[string]any)["sigg"] = map[string]any{"enforceVerification": true}
		}},
		{"attester.maxRuns", func(cfg map[string]any) { section(cfg, "attester")["maxRuns"] = 0 }},
		{"attester.maxConnections", func(cfg map[string]any) { section(cfg, "attester")["maxConnections"] = 0 }},
		{"attester.listen", func(cfg map[string]any) { section(cfg, "attester")["listen"] = "not-an-addr" }},
		{"attester.metricsListen", func(cfg map[string]any) { section(cfg, "attester")["metricsListen"] = "not-an-addr" }},
	} {
		t.Run(tc.key, func(t *testing.T) {
			dir := t.TempDir()
			path := writeConfig(t, dir, pf, nil)
			var cfg map[string]any
			raw, err := os.ReadFile(path)
			if err == nil {
				err = json.Unmarshal(raw, &cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(cfg)
			if raw, err = json.Marshal(cfg); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			if stderr := invalidConfig(t, dir, path); !strings.Contains(stderr, `"invalid config"`) || !strings.Contains(stderr, " "+tc.key+": ") {
				t.Fatalf("want an invalid config error naming %s; stderr:\n%s", tc.key, stderr)
			}
		})
	}
}

// configPack is a pack fixture without a pack: its trusted template is all
// that configurations the binary refuses before it loads a pack need.
func configPack() *packFixture {
	return &packFixture{trusted: map[string]string{"identity.txt": "sha256:" + strings.Repeat("ab", 32)}}
}

// invalidConfig runs the binary on config, written in dir, and returns its
// stderr; it fails the test unless the binary exits 1 (invalid
// configuration) without creating the control socket's folder in dir.
func invalidConfig(t *testing.T, dir, config string) string {
	t.Helper()
	code, stderr := runAttester(t, config)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (invalid configuration); stderr:\n%s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ctl")); err == nil {
		t.Fatal("the control socket directory was created although the config is invalid")
	}
	return stderr
}

// section returns the object cfg[name].
func section(cfg map[string]any, name string) map[string]any { return cfg[name].(map[string]any) }

// runAttester runs the binary on config until it exits (it must, within
// 20 s) and returns its exit code and stderr.
func runAttester(t *testing.T, config string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, attesterBin, "--config", config)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the attester did not exit: %s", stderr.String())
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}
