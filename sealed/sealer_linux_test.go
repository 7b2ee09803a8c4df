//go:build linux

package sealed

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// simKeyer is a simulated platform: it derives a real per-label key from a
// root secret with HMAC-SHA256, as a SEV-SNP backend derives one from
// MSG_KEY_REQ. It records the labels it was asked for and the slices it
// returned.
type simKeyer struct {
	root     []byte
	mu       sync.Mutex
	labels   []string
	returned [][]byte
}

var _ Keyer = (*simKeyer)(nil)

func (k *simKeyer) SealingKey(_ context.Context, label string) ([]byte, error) {
	m := hmac.New(sha256.New, k.root)
	m.Write([]byte(label))
	out := m.Sum(nil)
	k.mu.Lock()
	k.labels = append(k.labels, label)
	k.returned = append(k.returned, out)
	k.mu.Unlock()
	return out, nil
}

func testDevKey() []byte {
	k := make([]byte, keySize)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

// mustSeal seals secret under testLabel with s.
func mustSeal(t testing.TB, s Sealer, secret []byte) []byte {
	t.Helper()
	blob, err := s.Seal(context.Background(), testLabel, secret)
	if err != nil {
		t.Fatalf("%s: Seal: %v", s.Kind(), err)
	}
	return blob
}

func newTestSealers(t testing.TB) (Sealer, *simKeyer, *devSealer) {
	t.Helper()
	sk := &simKeyer{root: []byte("simulated platform root secret")}
	ks, err := NewKeySealer("sev-snp", sk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewDevSealer(testDevKey(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ds.Destroy)
	return ks, sk, ds
}

const testLabel = "attester/identity-key"

func TestSealerRoundTrip(t *testing.T) {
	ks, sk, ds := newTestSealers(t)
	ctx := context.Background()
	for _, s := range []Sealer{ks, ds} {
		for _, n := range []int{1, 32, 1000, maxSecretSize} {
			secret := bytes.Repeat([]byte{0x5c}, n)
			blob, err := s.Seal(ctx, testLabel, secret)
			if err != nil {
				t.Fatalf("%s: Seal(%d): %v", s.Kind(), n, err)
			}
			if len(blob) != len(blobVersionLabel)+1+len(s.Kind())+nonceSize+n+tagSize {
				t.Fatalf("%s: blob is %d bytes", s.Kind(), len(blob))
			}
			if !bytes.HasPrefix(blob, []byte(blobVersionLabel)) {
				t.Fatalf("%s: blob does not start with the version label", s.Kind())
			}
			if bytes.Contains(blob, secret[:min(n, 16)]) && n >= 16 {
				t.Fatalf("%s: blob contains plaintext", s.Kind())
			}
			buf, err := s.Unseal(ctx, testLabel, blob)
			if err != nil {
				t.Fatalf("%s: Unseal(%d): %v", s.Kind(), n, err)
			}
			if !bytes.Equal(buf.Bytes(), secret) || !buf.Locked() {
				t.Fatalf("%s: Unseal(%d): wrong contents or unlocked (%v)", s.Kind(), n, buf)
			}
			buf.Destroy()
		}
	}
	// The platform is asked for a domain-separated label, and every key it
	// returned was zeroed after use.
	for _, l := range sk.labels {
		if l != platformKeyLabelPrefix+testLabel {
			t.Fatalf("keyer asked for %q", l)
		}
	}
	for _, k := range sk.returned {
		if !bytes.Equal(k, make([]byte, len(k))) {
			t.Fatal("platform key slice not wiped after use")
		}
	}
	if ks.Kind() != "sev-snp" || ds.Kind() != devKind {
		t.Fatalf("kinds %q %q", ks.Kind(), ds.Kind())
	}
}

func TestSealFreshNonce(t *testing.T) {
	_, _, ds := newTestSealers(t)
	a, err := ds.Seal(context.Background(), testLabel, []byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ds.Seal(context.Background(), testLabel, []byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same secret are identical")
	}
}

func TestUnsealWrongLabelOrKey(t *testing.T) {
	ks, _, ds := newTestSealers(t)
	ctx := context.Background()
	other, err := NewKeySealer("sev-snp", &simKeyer{root: []byte("another platform")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	otherDev, err := NewDevSealer(bytes.Repeat([]byte{7}, keySize), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer otherDev.Destroy()
	for _, c := range []struct {
		seal, open Sealer
	}{{ks, other}, {ds, otherDev}} {
		blob, err := c.seal.Seal(ctx, testLabel, []byte("k"))
		if err != nil {
			t.Fatal(err)
		}
		if b, err := c.seal.Unseal(ctx, testLabel+"2", blob); !errors.Is(err, errAuthFailed) || b != nil {
			t.Errorf("%s wrong label: %v", c.seal.Kind(), err)
		}
		if b, err := c.open.Unseal(ctx, testLabel, blob); !errors.Is(err, errAuthFailed) || b != nil {
			t.Errorf("%s wrong key: %v", c.seal.Kind(), err)
		}
	}
}

func TestKindSeparation(t *testing.T) {
	ks, _, ds := newTestSealers(t)
	ctx := context.Background()
	devBlob := mustSeal(t, ds, []byte("dev secret"))
	platBlob := mustSeal(t, ks, []byte("platform secret"))
	if _, err := ks.Unseal(ctx, testLabel, devBlob); !errors.Is(err, errKindMismatch) {
		t.Errorf("dev blob under platform sealer: %v", err)
	}
	if _, err := ds.Unseal(ctx, testLabel, platBlob); !errors.Is(err, errKindMismatch) {
		t.Errorf("platform blob under dev sealer: %v", err)
	}

	// A platform sealer whose platform yields exactly the development key:
	// a development blob relabelled with the platform kind must still fail,
	// because the kind is in the associated data.
	mirror := keyFunc(func(_ context.Context, label string) ([]byte, error) {
		m := hmac.New(sha256.New, testDevKey())
		m.Write([]byte(devKeyInfo))
		m.Write([]byte(strings.TrimPrefix(label, platformKeyLabelPrefix)))
		return m.Sum(nil), nil
	})
	ms, err := NewKeySealer("sev-snp", mirror, Options{})
	if err != nil {
		t.Fatal(err)
	}
	relabel := func(b []byte, kind string) []byte {
		bl, err := parseBlob(b)
		if err != nil {
			t.Fatal(err)
		}
		bl.kind = kind
		return bl.encode()
	}
	if _, err := ms.Unseal(ctx, testLabel, relabel(devBlob, "sev-snp")); !errors.Is(err, errAuthFailed) {
		t.Errorf("relabelled dev blob under platform sealer with the same key: %v", err)
	}
	mBlob := mustSeal(t, ms, []byte("mirror"))
	if _, err := ds.Unseal(ctx, testLabel, relabel(mBlob, devKind)); !errors.Is(err, errAuthFailed) {
		t.Errorf("relabelled platform blob under dev sealer with the same key: %v", err)
	}
	// Control: same key, unmodified blobs open.
	for _, c := range []struct {
		s Sealer
		b []byte
	}{{ms, mBlob}, {ds, relabel(devBlob, devKind)}} {
		buf, err := c.s.Unseal(ctx, testLabel, c.b)
		if err != nil {
			t.Fatalf("control %s: %v", c.s.Kind(), err)
		}
		buf.Destroy()
	}
}

// TestUnsealTampered flips every bit of a blob and checks each result is
// refused with the error for the region that was hit.
func TestUnsealTampered(t *testing.T) {
	ks, _, _ := newTestSealers(t)
	ctx := context.Background()
	secret := []byte("tamper-target-secret")
	blob := mustSeal(t, ks, secret)
	kindLenAt := len(blobVersionLabel)
	nonceAt := kindLenAt + 1 + len(ks.Kind())
	for i := range blob {
		for bit := range 8 {
			b := bytes.Clone(blob)
			b[i] ^= 1 << bit
			buf, err := ks.Unseal(ctx, testLabel, b)
			if err == nil || buf != nil {
				t.Fatalf("byte %d bit %d: tampered blob accepted", i, bit)
			}
			if strings.Contains(err.Error(), string(secret)) {
				t.Fatalf("error exposes the secret: %v", err)
			}
			var want error
			switch {
			case i < kindLenAt:
				want = errUnknownVersion
			case i < nonceAt: // kind length or kind: ill-formed, or another kind
				if !errors.Is(err, errKindMismatch) && !errors.Is(err, errMalformedBlob) {
					t.Fatalf("byte %d bit %d (kind): %v", i, bit, err)
				}
				continue
			default:
				want = errAuthFailed
			}
			if !errors.Is(err, want) {
				t.Fatalf("byte %d bit %d: %v, want %v", i, bit, err, want)
			}
		}
	}
}

func TestUnsealTruncatedExtendedOversized(t *testing.T) {
	_, _, ds := newTestSealers(t)
	ctx := context.Background()
	blob := mustSeal(t, ds, []byte("truncate me"))
	minLen := len(blobVersionLabel) + 1 + len(devKind) + nonceSize + tagSize + 1
	for n := range len(blob) {
		buf, err := ds.Unseal(ctx, testLabel, blob[:n])
		if buf != nil || err == nil {
			t.Fatalf("truncated to %d: accepted", n)
		}
		want := errTruncated
		if n >= minLen {
			want = errAuthFailed
		}
		if !errors.Is(err, want) {
			t.Fatalf("truncated to %d: %v, want %v", n, err, want)
		}
	}
	if _, err := ds.Unseal(ctx, testLabel, append(bytes.Clone(blob), 0)); !errors.Is(err, errAuthFailed) {
		t.Fatalf("extended: %v", err)
	}
	big := append(bytes.Clone(blob), make([]byte, MaxBlobSize)...)
	if _, err := ds.Unseal(ctx, testLabel, big); !errors.Is(err, errMalformedBlob) {
		t.Fatalf("oversized: %v", err)
	}
}

func TestUnsealUnknownVersion(t *testing.T) {
	_, _, ds := newTestSealers(t)
	ctx := context.Background()
	blob := mustSeal(t, ds, []byte("versioned"))
	v2 := bytes.Replace(bytes.Clone(blob), []byte("/sealed/v1\n"), []byte("/sealed/v2\n"), 1)
	v0 := append([]byte("clawea.dev/attester/sealed/v0\n"), blob[len(blobVersionLabel):]...)
	for _, b := range [][]byte{v2, v0, []byte("not a sealed blob at all, but long enough to parse"), bytes.ToUpper(blob[:40])} {
		if _, err := ds.Unseal(ctx, testLabel, b); !errors.Is(err, errUnknownVersion) || !errors.Is(err, errMalformedBlob) {
			t.Errorf("%q...: %v, want ErrUnknownVersion", b[:30], err)
		}
	}
}

func TestSealerInputValidation(t *testing.T) {
	ks, _, ds := newTestSealers(t)
	ctx := context.Background()
	good := mustSeal(t, ds, []byte("x"))
	for _, s := range []Sealer{ks, ds} {
		for _, l := range []string{"", "has space", "tab\t", strings.Repeat("a", maxLabelLen+1), "caf\u00e9", "nul\x00"} {
			if _, err := s.Seal(ctx, l, []byte("x")); !errors.Is(err, errInvalidLabel) {
				t.Errorf("%s Seal label %q: %v", s.Kind(), l, err)
			}
			if _, err := s.Unseal(ctx, l, good); !errors.Is(err, errInvalidLabel) {
				t.Errorf("%s Unseal label %q: %v", s.Kind(), l, err)
			}
		}
		if _, err := s.Seal(ctx, strings.Repeat("a", maxLabelLen), []byte("x")); err != nil {
			t.Errorf("%s max-length label: %v", s.Kind(), err)
		}
		for _, n := range []int{0, maxSecretSize + 1} {
			if _, err := s.Seal(ctx, testLabel, make([]byte, n)); !errors.Is(err, errInvalidSecret) {
				t.Errorf("%s secret of %d bytes: %v", s.Kind(), n, err)
			}
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Seal(cctx, testLabel, []byte("x")); !errors.Is(err, context.Canceled) {
			t.Errorf("%s canceled Seal: %v", s.Kind(), err)
		}
		if _, err := s.Unseal(cctx, testLabel, good); !errors.Is(err, context.Canceled) {
			t.Errorf("%s canceled Unseal: %v", s.Kind(), err)
		}
	}
}

func TestNewKeySealerValidation(t *testing.T) {
	sk := &simKeyer{root: []byte("r")}
	for _, kind := range []string{"", devKind, "development", "development-secure", "SEV-SNP", "sev snp", strings.Repeat("a", maxKindLen+1)} {
		if _, err := NewKeySealer(kind, sk, Options{}); !errors.Is(err, errInvalidKind) {
			t.Errorf("kind %q: %v", kind, err)
		}
	}
	if _, err := NewKeySealer("tdx", nil, Options{}); err == nil {
		t.Error("nil keyer accepted")
	}
	var zero keySealer
	if _, err := zero.Seal(context.Background(), testLabel, []byte("x")); !errors.Is(err, errKeyUnavailable) {
		t.Errorf("zero KeySealer: %v", err)
	}
}

func TestKeySealerPlatformKeyErrors(t *testing.T) {
	ctx := context.Background()
	down := errors.New("platform device unavailable")
	failing, _ := NewKeySealer("tdx", keyFunc(func(context.Context, string) ([]byte, error) { return nil, down }), Options{})
	if _, err := failing.Seal(ctx, testLabel, []byte("x")); !errors.Is(err, errKeyUnavailable) || !errors.Is(err, down) {
		t.Errorf("keyer error: %v", err)
	}
	secretKey := bytes.Repeat([]byte{0xC3}, 31)
	short, _ := NewKeySealer("tdx", keyFunc(func(context.Context, string) ([]byte, error) { return bytes.Clone(secretKey), nil }), Options{})
	_, err := short.Seal(ctx, testLabel, []byte("x"))
	if !errors.Is(err, errInvalidKey) {
		t.Errorf("31-byte key: %v", err)
	}
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "c3c3") {
		t.Errorf("error exposes key material: %v", err)
	}
}

func TestDevSealerFromFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	key := testDevKey()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hexKey := hex.EncodeToString(key)
	ref, err := NewDevSealer(key, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Destroy()
	blob := mustSeal(t, ref, []byte("from file"))
	for _, f := range []string{write("raw", key), write("hex", []byte(hexKey)), write("hexnl", []byte(hexKey+"\n")), write("HEX", []byte(strings.ToUpper(hexKey)))} {
		s, err := loadDevSealer(f, Options{})
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		buf, err := s.Unseal(ctx, testLabel, blob)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		if string(buf.Bytes()) != "from file" {
			t.Fatalf("%s: wrong secret", filepath.Base(f))
		}
		buf.Destroy()
		s.Destroy()
	}
	notHex := strings.Repeat("zq", keySize)
	bad := map[string][]byte{
		"short":   key[:31],
		"long":    append(bytes.Clone(key), 0),
		"hex63":   []byte(hexKey[:63]),
		"hex65":   []byte(hexKey + "0"),
		"hex2nl":  []byte(hexKey + "\n\n"),
		"notHex":  []byte(notHex),
		"empty":   nil,
		"toolong": bytes.Repeat([]byte("a"), 4096),
	}
	for name, data := range bad {
		_, err := loadDevSealer(write(name, data), Options{})
		if !errors.Is(err, errInvalidKey) {
			t.Errorf("%s: %v, want ErrInvalidKey", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "zq") {
			t.Errorf("%s: error quotes key file contents: %v", name, err)
		}
	}
	if _, err := loadDevSealer(filepath.Join(dir, "missing"), Options{}); err == nil || errors.Is(err, errInvalidKey) {
		t.Errorf("missing file: %v", err)
	}
	for _, n := range []int{0, 16, 33} {
		if _, err := NewDevSealer(make([]byte, n), Options{}); !errors.Is(err, errInvalidKey) {
			t.Errorf("NewDevSealer(%d bytes): %v", n, err)
		}
	}
}

func TestDevSealerDestroy(t *testing.T) {
	s, err := NewDevSealer(testDevKey(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	blob := mustSeal(t, s, []byte("x"))
	s.Destroy()
	s.Destroy()
	if _, err := s.Seal(context.Background(), testLabel, []byte("x")); !errors.Is(err, ErrDestroyed) {
		t.Errorf("Seal after Destroy: %v", err)
	}
	if _, err := s.Unseal(context.Background(), testLabel, blob); !errors.Is(err, ErrDestroyed) {
		t.Errorf("Unseal after Destroy: %v", err)
	}
}

func TestSealersNeverPrintKeys(t *testing.T) {
	ks, _, ds := newTestSealers(t)
	hexKey := hex.EncodeToString(testDevKey())
	for _, s := range []any{ks, ds} {
		for _, verb := range []string{"%v", "%+v", "%s"} {
			out := fmt.Sprintf(verb, s)
			if strings.Contains(out, hexKey[:16]) || strings.Contains(out, "simulated platform root") {
				t.Errorf("%s exposes key material: %q", verb, out)
			}
		}
	}
}

// Known-answer vector for blob format v1 with the development sealer: key
// 00 01 .. 1f, label "test/vector", secret "sealed-memory v1 vector". It pins
// the wire format and key derivation; it must never change.
const devVectorHex = "636c617765612e6465762f61747465737465722f7365616c65642f76310a14646576656c6f706d656e742d696e73656375726575f4db25c42567880ad3fc3cf55a81e0ad172e513c878150a8f56b25e4400ef128cc124972d27ee7cfbf14a077ff82d8fb4baf"

func TestDevVector(t *testing.T) {
	blob := testfile.Hex(t, devVectorHex)
	const label, secret = "test/vector", "sealed-memory v1 vector"
	ds, err := NewDevSealer(testDevKey(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Destroy()
	buf, err := ds.Unseal(context.Background(), label, blob)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Destroy()
	if string(buf.Bytes()) != secret {
		t.Fatal("vector: wrong secret")
	}

	// Independently, straight from docs/spec/sealed-memory.md.
	m := hmac.New(sha256.New, testDevKey())
	m.Write([]byte("clawea.dev/attester/v1/sealed/development-key\x00" + label))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	header := append([]byte("clawea.dev/attester/sealed/v1\n\x14"), "development-insecure"...)
	if !bytes.HasPrefix(blob, header) {
		t.Fatal("vector: header differs from the spec")
	}
	ad := append(append(bytes.Clone(header), 0, byte(len(label))), label...)
	rest := blob[len(header):]
	pt, err := gcm.Open(nil, rest[:12], rest[12:], ad)
	if err != nil || string(pt) != secret {
		t.Fatalf("vector does not follow the spec: %v", err)
	}
}
