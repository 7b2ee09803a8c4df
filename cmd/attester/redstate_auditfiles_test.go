//go:build linux

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestAuditFileKindAndModeAttack (gate-v1 section 5.2): a run log replaced
// by a symlink (to a copy of itself, so its records verify), a run log or
// the audit directory made writable by other users, a run log owned by
// another user (as root), each stop the start
// (exit 2) naming the file; the refused start changes no file. Before, a
// symlinked *.jsonl was skipped: its run was silently left out of the check.
func TestAuditFileKindAndModeAttack(t *testing.T) {
	cfg, state, file := stoppedWithAudit(t, 2)
	name := filepath.Base(file)
	orig := testfile.Read(t, file)
	copyPath := filepath.Join(state, "copy.jsonl")
	if err := os.WriteFile(copyPath, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(copyPath, file); err != nil {
		t.Fatal(err)
	}
	if out := startRefused(t, cfg); !strings.Contains(out, name+": not a regular file") {
		t.Fatalf("a symlinked run log: %s", out)
	}
	if got := testfile.Read(t, copyPath); !bytes.Equal(got, orig) {
		t.Fatal("the refused start changed the symlink's target")
	}
	os.Remove(file)
	writeAudit(t, file, orig)

	for _, c := range []struct{ path, name string }{{file, name}, {filepath.Dir(file), "audit"}} {
		st, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(c.path, st.Mode().Perm()|0o002); err != nil {
			t.Fatal(err)
		}
		if out := startRefused(t, cfg); !strings.Contains(out, c.name+": writable by other users") {
			t.Fatalf("%s writable by others: %s", c.name, out)
		}
		if err := os.Chmod(c.path, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	// Owned by another user (mode 0600 kept: only its owner can write it). Only
	// root can give a file away; CI runs as root.
	if os.Geteuid() == 0 {
		if err := os.Chown(file, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if out := startRefused(t, cfg); !strings.Contains(out, name+": owned by another user") {
			t.Fatalf("a run log of another user: %s", out)
		}
		if err := os.Chown(file, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := testfile.Read(t, file); !bytes.Equal(got, orig) {
		t.Fatal("a refused start changed the run log")
	}
	a := mustStartAttester(t, cfg)
	a.cmd.Process.Kill()
	<-a.exited
}

// TestStateFifoAttack (gate-v1 section 5.3, sealed-memory.md section 3.6):
// a FIFO or a symlink in the place of the start-up checkpoint or of the
// sealed identity stops the start (exit 2) naming it. Before, a FIFO made
// the start wait for a writer for ever (open blocks).
func TestStateFifoAttack(t *testing.T) {
	cfg, state, _ := stoppedWithAudit(t, 1)
	ck := filepath.Join(state, "audit", "CHECKPOINT")
	id := filepath.Join(state, "identity.sealed")
	blob := testfile.Read(t, id)
	copyPath := filepath.Join(state, "copy")
	if err := os.WriteFile(copyPath, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{ck, "CHECKPOINT is not a regular file"},
		{id, "identity.sealed is not a regular file"},
	} {
		for _, kind := range []string{"fifo", "symlink"} {
			saved, _ := os.ReadFile(c.path)
			os.Remove(c.path)
			var err error
			if kind == "fifo" {
				err = syscall.Mkfifo(c.path, 0o600)
			} else {
				err = os.Symlink(copyPath, c.path)
			}
			if err != nil {
				t.Fatal(err)
			}
			if out := startRefused(t, cfg); !strings.Contains(out, c.want) {
				t.Fatalf("%s as a %s: %s", filepath.Base(c.path), kind, out)
			}
			os.Remove(c.path)
			if saved != nil {
				writeAudit(t, c.path, saved)
			}
		}
	}
	a := mustStartAttester(t, cfg)
	a.cmd.Process.Kill()
	<-a.exited
}
