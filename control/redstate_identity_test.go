package control

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/sealed"
)

// TestIdentityMissingBesideAuditAttack (sealed-memory.md section 3.6): a
// sealed identity removed while the attester was down, from a state
// directory whose audit directory holds a run's log or a checkpoint, stops
// the load; no new identity is created in its place.
func TestIdentityMissingBesideAuditAttack(t *testing.T) {
	for _, name := range []string{"r1.jsonl", "CHECKPOINT"} {
		s := newIdentityStore(t)
		audit := filepath.Join(s.dir, "audit")
		if err := os.Mkdir(audit, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(audit, "LOCK"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		// An audit directory with only LOCK holds no history.
		id, err := s.load()
		if err != nil {
			t.Fatal(err)
		}
		id.Close()
		os.Remove(filepath.Join(s.dir, identityFile))
		if err := os.WriteFile(filepath.Join(audit, name), []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = s.load()
		if err == nil || !strings.Contains(err.Error(), "refusing to create a new identity") || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s: identity missing beside audit history: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(s.dir, identityFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: a new identity was written: %v", name, err)
		}
	}
}

// racingSealer is a sealer during whose Seal another process creates the
// identity blob (two attesters started at once on a new state directory:
// the identity is created before the audit directory's LOCK is taken).
type racingSealer struct {
	identityStore
	other []byte
}

func (r racingSealer) Kind() string { return r.sealer.Kind() }

func (r racingSealer) Seal(ctx context.Context, label string, secret []byte) ([]byte, error) {
	if err := os.WriteFile(filepath.Join(r.dir, identityFile), r.other, 0o600); err != nil {
		return nil, err
	}
	return r.sealer.Seal(ctx, label, secret)
}

func (r racingSealer) Unseal(ctx context.Context, label string, blob []byte) (*sealed.Buffer, error) {
	return r.sealer.Unseal(ctx, label, blob)
}

// TestIdentityCreatedConcurrentlyAttack: an identity blob that appears
// while a new identity is sealed (another attester won the race) is never
// replaced: the load fails and the other process keeps its identity.
func TestIdentityCreatedConcurrentlyAttack(t *testing.T) {
	s := newIdentityStore(t)
	first, err := s.load()
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	path := filepath.Join(s.dir, identityFile)
	other, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	r := racingSealer{identityStore: s, other: other}
	_, err = LoadIdentity(context.Background(), s.dir, r, s.opts, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("a concurrently created identity: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, other) {
		t.Fatal("the other process's identity blob was replaced")
	}
	again, err := s.load()
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.DID != first.DID {
		t.Fatal("the identity kept is not the other process's")
	}
}
