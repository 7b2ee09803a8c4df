//go:build linux

package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIdentityRemovedAttack (sealed-memory.md section 3.6): the sealed
// identity removed while the attester was down, beside the audit logs it
// wrote, stops the start (exit 2) naming the identity; no new identity is
// created over that history.
func TestIdentityRemovedAttack(t *testing.T) {
	cfg, state, _ := stoppedWithAudit(t, 1)
	blob := filepath.Join(state, "identity.sealed")
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	out := startRefused(t, cfg)
	if !strings.Contains(out, "identity.sealed is missing") {
		t.Fatalf("the refusal does not name the missing identity: %s", out)
	}
	if _, err := os.Stat(blob); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused start created an identity: %v", err)
	}
}
