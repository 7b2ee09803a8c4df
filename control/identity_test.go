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
	sealer, opts := simulatedSealer(t)
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	id1, err := LoadIdentity(context.Background(), dir, sealer, opts, log)
	if err != nil {
		t.Fatal(err)
	}
	id1.Close()
	id2, err := LoadIdentity(context.Background(), dir, sealer, opts, log)
	if err != nil {
		t.Fatal(err)
	}
	defer id2.Close()
	if id1.DID != id2.DID || !id2.Sealed || !id1.PackKey.Public().Equal(id2.PackKey.Public()) {
		t.Fatal("identity changed across restarts")
	}
	blob, _ := os.ReadFile(filepath.Join(dir, identityFile))
	if st, _ := os.Stat(filepath.Join(dir, identityFile)); st.Mode().Perm() != 0o600 {
		t.Fatalf("identity blob mode %v", st.Mode())
	}
	blob[len(blob)-1] ^= 1
	os.WriteFile(filepath.Join(dir, identityFile), blob, 0o600)
	if _, err := LoadIdentity(context.Background(), dir, sealer, opts, log); err == nil {
		t.Fatal("a tampered identity blob was replaced silently")
	}
}

// simulatedSealer returns the simulated platform's sealer (closed when the
// test ends) and the sealed-memory options the identity tests use.
func simulatedSealer(t *testing.T) (sealed.Sealer, sealed.Options) {
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
	return sealer, opts
}
