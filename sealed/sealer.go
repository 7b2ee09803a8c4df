package sealed

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// keySize is the size of every sealing key: AES-256.
const keySize = 32

// devKind is the Kind of devSealer. No other sealer may use it, and it is
// bound into every development blob so that such a blob never opens under a
// platform sealer.
const devKind = "development-insecure"

// platformKeyLabelPrefix is prepended to the seal label to form the label a
// a platform sealer passes to its Keyer, separating these keys from
// any other use of the platform key.
const platformKeyLabelPrefix = "clawea.dev/attester/v1/sealed/"

// devKeyInfo is the HMAC domain-separation prefix of devSealer's per-label
// keys.
const devKeyInfo = "clawea.dev/attester/v1/sealed/development-key\x00"

var (
	// errInvalidSecret is returned for an empty or oversized secret.
	errInvalidSecret = errors.New("sealed: invalid secret size")
	// errInvalidKey is returned for a sealing key of the wrong size or
	// encoding. Its text never contains key material.
	errInvalidKey = errors.New("sealed: invalid sealing key")
	// errKeyUnavailable is returned when the platform cannot derive the
	// sealing key ("we could not check", as opposed to errAuthFailed).
	errKeyUnavailable = errors.New("sealed: sealing key unavailable")
)

// Sealer seals small secrets to a platform. A blob sealed under label opens
// only with the same label, the same kind of sealer and the same key.
type Sealer interface {
	// Kind names the sealer; it is bound into every blob.
	Kind() string
	// Seal encrypts secret (1..maxSecretSize bytes) under label.
	Seal(ctx context.Context, label string, secret []byte) ([]byte, error)
	// Unseal decrypts blob into a new Buffer that the caller must Destroy.
	Unseal(ctx context.Context, label string, blob []byte) (*Buffer, error)
}

var (
	_ Sealer = (*keySealer)(nil)
	_ Sealer = (*devSealer)(nil)
)

// Keyer derives a platform-bound symmetric key for label: the same key
// across restarts of the same workload on the same platform, another key
// for any other label, workload measurement or platform. The returned slice
// must be freshly allocated: the sealer copies it into sealed memory and
// zeroes it. Platform backends that can derive such keys (enclave/sevsnp,
// enclave/sim; see enclave.SealingKeyer) satisfy it.
//
// sealed owns this interface so that it depends on no platform package.
type Keyer interface {
	SealingKey(ctx context.Context, label string) ([]byte, error)
}

// keyFunc adapts a function to Keyer.
type keyFunc func(ctx context.Context, label string) ([]byte, error)

// SealingKey calls f.
func (f keyFunc) SealingKey(ctx context.Context, label string) ([]byte, error) {
	return f(ctx, label)
}

// keySealer, the platform sealer NewKeySealer returns, seals with AES-256-GCM
// under a platform-derived key, for example
// one derived by SEV-SNP MSG_KEY_REQ.
//
// For every Seal and Unseal it calls SealingKey(ctx, platformKeyLabelPrefix +
// label), copies the 32-byte key into a Buffer and zeroes the returned slice:
// a keyer must return a fresh slice each time and must not keep it.
type keySealer struct {
	c core
}

// NewKeySealer returns a platform sealer of the given kind (1..maxKindLen bytes of
// [a-z0-9._:/-], e.g. "sev-snp"). devKind and kinds starting with
// "development" are refused. opts applies to the key and output Buffers.
func NewKeySealer(kind string, keyer Keyer, opts Options) (Sealer, error) {
	if !validKind(kind) || strings.HasPrefix(kind, "development") {
		return nil, fmt.Errorf("%w: %q", errInvalidKind, kind)
	}
	if keyer == nil {
		return nil, fmt.Errorf("%w: nil keyer", errKeyUnavailable)
	}
	derive := func(ctx context.Context, label string, dst []byte) error {
		k, err := keyer.SealingKey(ctx, platformKeyLabelPrefix+label)
		defer Wipe(k)
		if err != nil {
			return fmt.Errorf("%w: %w", errKeyUnavailable, err)
		}
		if len(k) != keySize {
			return fmt.Errorf("%w: platform key is %d bytes, want %d", errInvalidKey, len(k), keySize)
		}
		copy(dst, k)
		return nil
	}
	return &keySealer{c: core{kind: kind, opts: opts, derive: derive}}, nil
}

// Kind returns the sealer kind given to NewKeySealer.
func (s *keySealer) Kind() string { return s.c.kind }

// Seal implements Sealer.
func (s *keySealer) Seal(ctx context.Context, label string, secret []byte) ([]byte, error) {
	return s.c.seal(ctx, label, secret)
}

// Unseal implements Sealer.
func (s *keySealer) Unseal(ctx context.Context, label string, blob []byte) (*Buffer, error) {
	return s.c.unseal(ctx, label, blob)
}

// String never prints key material.
func (s *keySealer) String() string { return "sealed.KeySealer(" + s.c.kind + ")" }

// devSealer is a development sealer: its key is ordinary data (a file or
// bytes), not bound to any platform. Its Kind is devKind, which is bound into
// every blob, so its blobs never open under a platform sealer and vice versa. It
// MUST NOT be used in production.
//
// The per-label key is HMAC-SHA256(devKey, devKeyInfo || label), computed into
// sealed memory. Call Destroy to release the development key.
type devSealer struct {
	key *Buffer
	mu  sync.RWMutex
	c   core
}

// NewDevSealer returns a devSealer with a copy of the 32-byte key. The caller
// should Wipe its own copy.
func NewDevSealer(key []byte, opts Options) (*devSealer, error) {
	if len(key) != keySize {
		return nil, fmt.Errorf("%w: development key is %d bytes, want %d", errInvalidKey, len(key), keySize)
	}
	kb, err := NewFrom(key, opts)
	if err != nil {
		return nil, err
	}
	return newDevSealer(kb, opts), nil
}

// maxDevKeyFile bounds a development key file.
const maxDevKeyFile = 2*keySize + 2

// loadDevSealer reads a development key file: exactly 32 raw bytes, or 64
// hex digits optionally followed by "\n". The file is read straight into
// sealed memory.
func loadDevSealer(path string, opts Options) (*devSealer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("sealed: opening development key: %w", err)
	}
	defer f.Close()
	raw, err := New(maxDevKeyFile+1, opts)
	if err != nil {
		return nil, err
	}
	defer raw.Destroy()
	n, err := io.ReadFull(f, raw.Bytes())
	switch {
	case err == nil:
		return nil, fmt.Errorf("%w: development key file is larger than %d bytes", errInvalidKey, maxDevKeyFile)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
	default:
		return nil, fmt.Errorf("sealed: reading development key: %w", err)
	}
	content := raw.Bytes()[:n]
	kb, err := New(keySize, opts)
	if err != nil {
		return nil, err
	}
	if n == keySize {
		copy(kb.Bytes(), content)
		return newDevSealer(kb, opts), nil
	}
	if n == 2*keySize+1 && content[n-1] == '\n' {
		content = content[:n-1]
	}
	if len(content) != 2*keySize {
		kb.Destroy()
		return nil, fmt.Errorf("%w: development key file must hold 32 raw bytes or 64 hex digits", errInvalidKey)
	}
	if _, err := hex.Decode(kb.Bytes(), content); err != nil {
		// The hex error quotes the offending byte: do not wrap it.
		kb.Destroy()
		return nil, fmt.Errorf("%w: development key file is not hex", errInvalidKey)
	}
	return newDevSealer(kb, opts), nil
}

func newDevSealer(key *Buffer, opts Options) *devSealer {
	s := &devSealer{key: key}
	s.c = core{kind: devKind, opts: opts, derive: s.derive}
	return s
}

func (s *devSealer) derive(_ context.Context, label string, dst []byte) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k := s.key.Bytes()
	if k == nil {
		return ErrDestroyed
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(devKeyInfo))
	m.Write([]byte(label))
	if out := m.Sum(dst[:0]); &out[0] != &dst[0] {
		Wipe(out)
		return errors.New("sealed: internal error: key derivation left sealed memory")
	}
	return nil
}

// Kind returns devKind.
func (s *devSealer) Kind() string { return devKind }

// Seal implements Sealer.
func (s *devSealer) Seal(ctx context.Context, label string, secret []byte) ([]byte, error) {
	return s.c.seal(ctx, label, secret)
}

// Unseal implements Sealer.
func (s *devSealer) Unseal(ctx context.Context, label string, blob []byte) (*Buffer, error) {
	return s.c.unseal(ctx, label, blob)
}

// Destroy zeroes and releases the development key; later calls to Seal and
// Unseal return ErrDestroyed. It is idempotent.
func (s *devSealer) Destroy() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key.Destroy()
}

// String never prints key material.
func (s *devSealer) String() string { return "sealed.DevSealer(" + devKind + ")" }

// core is the blob format and AEAD shared by every sealer.
type core struct {
	kind   string
	opts   Options
	derive func(ctx context.Context, label string, dst []byte) error // writes keySize bytes
}

// aead derives the key for label into a Buffer and returns an AES-256-GCM
// AEAD. The Buffer is destroyed before it returns; the AES key schedule stays
// on the Go heap (see the package documentation).
func (c *core) aead(ctx context.Context, label string) (cipher.AEAD, error) {
	if c.derive == nil {
		return nil, fmt.Errorf("%w: uninitialized sealer", errKeyUnavailable)
	}
	kb, err := New(keySize, c.opts)
	if err != nil {
		return nil, err
	}
	defer kb.Destroy()
	if err := c.derive(ctx, label, kb.Bytes()); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(kb.Bytes())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidKey, err)
	}
	return cipher.NewGCM(block)
}

func (c *core) seal(ctx context.Context, label string, secret []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !validLabel(label) {
		return nil, errInvalidLabel
	}
	if len(secret) == 0 || len(secret) > maxSecretSize {
		return nil, fmt.Errorf("%w: %d bytes, want 1..%d", errInvalidSecret, len(secret), maxSecretSize)
	}
	g, err := c.aead(ctx, label)
	if err != nil {
		return nil, err
	}
	out := appendHeader(make([]byte, 0, len(blobVersionLabel)+1+len(c.kind)+nonceSize+len(secret)+tagSize), c.kind)
	nonce := out[len(out) : len(out)+nonceSize]
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("sealed: reading nonce: %w", err)
	}
	out = out[:len(out)+nonceSize]
	return g.Seal(out, nonce, secret, associatedData(c.kind, label)), nil
}

func (c *core) unseal(ctx context.Context, label string, b []byte) (*Buffer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !validLabel(label) {
		return nil, errInvalidLabel
	}
	bl, err := parseBlob(b)
	if err != nil {
		return nil, err
	}
	if bl.kind != c.kind {
		return nil, fmt.Errorf("%w: blob kind %q, sealer kind %q", errKindMismatch, bl.kind, c.kind)
	}
	g, err := c.aead(ctx, label)
	if err != nil {
		return nil, err
	}
	out, err := New(len(bl.ciphertext)-tagSize, c.opts)
	if err != nil {
		return nil, err
	}
	dst := out.Bytes()
	pt, err := g.Open(dst[:0], bl.nonce, bl.ciphertext, associatedData(c.kind, label))
	if err != nil {
		out.Destroy()
		return nil, errAuthFailed
	}
	if len(pt) != len(dst) || &pt[0] != &dst[0] {
		// Open allocated elsewhere: never hand out plaintext off sealed memory.
		Wipe(pt)
		out.Destroy()
		return nil, errors.New("sealed: internal error: plaintext left sealed memory")
	}
	return out, nil
}
