package control

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/sealed"
)

// TestIdentityPersistsUnderSealer: the identity sealed with the simulated
// platform key comes back after a restart, and a blob that does not unseal is
// an error, never a silent new identity.
func TestIdentityPersistsUnderSealer(t *testing.T) {
	s := newIdentityStore(t)
	id1, err := s.load()
	if err != nil {
		t.Fatal(err)
	}
	id1.Close()
	id2, err := s.load()
	if err != nil {
		t.Fatal(err)
	}
	defer id2.Close()
	if id1.DID != id2.DID || !id2.Sealed || !id1.PackKey.Public().Equal(id2.PackKey.Public()) {
		t.Fatal("identity changed across restarts")
	}
	path := filepath.Join(s.dir, identityFile)
	blob, _ := os.ReadFile(path)
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("identity blob mode %v", st.Mode())
	}
	blob[len(blob)-1] ^= 1
	os.WriteFile(path, blob, 0o600)
	if _, err := s.load(); err == nil {
		t.Fatal("a tampered identity blob was replaced silently")
	}
}

// identityStore is a state folder whose identity is sealed with the
// simulated platform's key, under the sealed-memory options the identity
// tests use.
type identityStore struct {
	dir    string
	sealer sealed.Sealer
	opts   sealed.Options
}

// newIdentityStore returns an empty identityStore in a temporary folder;
// the simulated platform is closed when the test ends.
func newIdentityStore(t *testing.T) identityStore {
	t.Helper()
	p, rep, err := detect.Open(context.Background(), detect.Simulated, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	opts := sealed.Options{AllowUnlocked: true}
	sealer, err := platformSealer(p, rep, opts)
	if err != nil || sealer == nil {
		t.Fatalf("sealer %v %v", sealer, err)
	}
	return identityStore{dir: t.TempDir(), sealer: sealer, opts: opts}
}

// load loads the identity from the store, creating it the first time.
func (s identityStore) load() (*Identity, error) {
	return LoadIdentity(context.Background(), s.dir, s.sealer, s.opts, slog.New(slog.DiscardHandler))
}
