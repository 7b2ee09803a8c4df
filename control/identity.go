package control

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/sealed"
)

// identityLabel is the sealing label of the identity blob.
const identityLabel = "clawea.dev/attester/v1/identity"

// identityFile is the sealed identity blob inside the state directory.
const identityFile = "identity.sealed"

// Identity is the attester's long-lived key material: an Ed25519 signing key
// (the attester DID) and an X25519 HPKE key that prompt packs are sealed to.
// Both private keys are created and held in sealed memory; only a blob
// sealed to the platform ever reaches disk.
type Identity struct {
	seed *sealed.Buffer // the Ed25519 seed (RFC 8032)
	// Signer signs with the Ed25519 key (sealed.Ed25519Signer): it signs
	// from the seed in sealed memory, so no signature leaves a copy of the
	// key on the heap (docs/spec/sealed-memory.md). It must not be used
	// after Close.
	Signer crypto.Signer
	Public ed25519.PublicKey
	DID    string
	// PackKey is the HPKE recipient key. Its X25519 scalar also lives inside
	// crypto/ecdh's heap object while in use; see docs/spec/sealed-memory.md.
	PackKey *envelope.PrivateKey
	// Sealed reports whether the identity is persisted under a platform
	// sealer (false: ephemeral, a new identity on every start).
	Sealed     bool
	SealerKind string
}

// Close zeroes and releases the private key memory.
func (id *Identity) Close() {
	if id.seed != nil {
		id.seed.Destroy()
	}
}

// LoadIdentity unseals the identity from stateDir with sealer, or creates a
// new one and seals it there. With a nil sealer (a platform without a
// sealing key) the identity is ephemeral and nothing is written.
func LoadIdentity(ctx context.Context, stateDir string, sealer sealed.Sealer, opts sealed.Options, log *slog.Logger) (*Identity, error) {
	if sealer != nil && stateDir != "" {
		path := filepath.Join(stateDir, identityFile)
		// Opening a FIFO would wait for a writer for ever; a symlink or a
		// directory is nothing the attester writes.
		if info, err := os.Lstat(path); err == nil && !info.Mode().IsRegular() {
			return nil, fmt.Errorf("identity: %s is not a regular file (%v)", path, info.Mode().Type())
		}
		blob, err := bounded.ReadFile(path, int64(sealed.MaxBlobSize))
		switch {
		case err == nil:
			id, err := unsealIdentity(ctx, sealer, blob, opts)
			if err != nil {
				// Never silently replace an identity we cannot open: the
				// operator must decide (a changed platform or measurement).
				return nil, fmt.Errorf("identity: %s exists but does not unseal with the %s sealer: %w", path, sealer.Kind(), err)
			}
			log.Info("identity unsealed", "did", id.DID, "sealer", sealer.Kind())
			return id, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("identity: %w", err)
		}
	}
	if sealer != nil && stateDir != "" {
		if err := noAuditHistory(stateDir); err != nil {
			return nil, err
		}
	}
	id, secret, err := newIdentity(opts)
	if err != nil {
		return nil, err
	}
	defer secret.Destroy()
	if sealer == nil || stateDir == "" {
		log.Warn("identity is ephemeral: no platform sealer or state directory", "did", id.DID)
		return id, nil
	}
	blob, err := sealer.Seal(ctx, identityLabel, secret.Bytes())
	if err != nil {
		id.Close()
		return nil, fmt.Errorf("identity: seal: %w", err)
	}
	if err := createFileAtomic(filepath.Join(stateDir, identityFile), blob); err != nil {
		id.Close()
		return nil, fmt.Errorf("identity: %w", err)
	}
	id.Sealed, id.SealerKind = true, sealer.Kind()
	log.Info("identity created and sealed", "did", id.DID, "sealer", sealer.Kind())
	return id, nil
}

// The sealed secret is seed(32) || pack key secret text.
func newIdentity(opts sealed.Options) (*Identity, *sealed.Buffer, error) {
	seed, err := sealed.New(ed25519.SeedSize, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("identity: %w", err)
	}
	defer seed.Destroy()
	if _, err := rand.Read(seed.Bytes()); err != nil {
		return nil, nil, fmt.Errorf("identity: %w", err)
	}
	pk, err := envelope.GenerateKey()
	if err != nil {
		return nil, nil, fmt.Errorf("identity: %w", err)
	}
	return assemble(seed.Bytes(), pk, opts)
}

func unsealIdentity(ctx context.Context, sealer sealed.Sealer, blob []byte, opts sealed.Options) (*Identity, error) {
	secret, err := sealer.Unseal(ctx, identityLabel, blob)
	if err != nil {
		return nil, err
	}
	defer secret.Destroy()
	b := secret.Bytes()
	if len(b) <= ed25519.SeedSize {
		return nil, errors.New("identity: sealed identity is too short")
	}
	pk, err := envelope.ParsePrivateKey(b[ed25519.SeedSize:])
	if err != nil {
		return nil, errors.New("identity: sealed pack key is malformed")
	}
	id, s, err := assemble(b[:ed25519.SeedSize], pk, opts)
	if err != nil {
		return nil, err
	}
	s.Destroy()
	id.Sealed, id.SealerKind = true, sealer.Kind()
	return id, nil
}

// assemble builds the Identity and the secret to seal from a seed and a pack key.
func assemble(seed []byte, pk *envelope.PrivateKey, opts sealed.Options) (*Identity, *sealed.Buffer, error) {
	// The seed goes from sealed memory to sealed memory; the public key is
	// derived there too (ed25519.NewKeyFromSeed would leave an expanded
	// copy of the key in a heap object that is never zeroed).
	signKey, err := sealed.NewFrom(seed, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("identity: %w", err)
	}
	signer, err := sealed.Ed25519Signer(signKey)
	if err != nil {
		signKey.Destroy()
		return nil, nil, fmt.Errorf("identity: %w", err)
	}
	pub := signer.Public().(ed25519.PublicKey)

	text, err := pk.AppendSecretText(nil)
	if err != nil {
		signKey.Destroy()
		return nil, nil, fmt.Errorf("identity: %w", err)
	}
	secret, err := sealed.New(len(seed)+len(text), opts)
	if err != nil {
		sealed.Wipe(text)
		signKey.Destroy()
		return nil, nil, fmt.Errorf("identity: %w", err)
	}
	copy(secret.Bytes(), seed)
	copy(secret.Bytes()[len(seed):], text)
	sealed.Wipe(text)
	return &Identity{seed: signKey, Signer: signer, Public: pub, DID: didkey.Format(pub), PackKey: pk}, secret, nil
}

// noAuditHistory refuses to create an identity in a state directory whose
// audit directory already holds a run's log or a start-up checkpoint: they
// were written under an identity whose sealed blob is now missing (removed,
// or swapped out with the directory), and a new identity would take its
// place silently (docs/spec/sealed-memory.md section 3.6).
func noAuditHistory(stateDir string) error {
	dir := filepath.Join(stateDir, "audit")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("identity: %s is missing and the audit directory cannot be read: %w", identityFile, err)
	}
	for _, e := range entries {
		if n := e.Name(); n == "CHECKPOINT" || filepath.Ext(n) == ".jsonl" {
			return fmt.Errorf("identity: %s is missing but %s holds audit logs written under an earlier identity (%s): refusing to create a new identity", filepath.Join(stateDir, identityFile), dir, n)
		}
	}
	return nil
}

// createFileAtomic creates path with data and mode 0600 through a temporary
// file and a hard link, so a crash never leaves a half-written file and a
// file that appeared meanwhile (another process creating its own identity
// on the same directory) is never replaced: that is an error. The directory
// is synced, so the new file survives a power loss once this returns.
func createFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s was created by another process meanwhile: not replaced", path)
		}
		return err
	}
	if err := os.Remove(tmp); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
