package evidencedoc_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/wire/evidencedoc"
)

// joseDir is hack/jose-interop, relative to this package.
var joseDir = filepath.Join("..", "..", "hack", "jose-interop")

// nodeVerify runs hack/jose-interop/verify.mjs (the npm jose package) on jws
// with key as a JWK. It skips when the npm dependencies are not installed,
// except under CI=true, where it fails.
func nodeVerify(t *testing.T, jws []byte, key ed25519.PublicKey) ([]byte, error) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(joseDir, "node_modules", "jose")); err != nil {
		citest.SkipOrFail(t, "%s/node_modules missing (run npm ci there)", joseDir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		citest.SkipOrFail(t, "node not installed")
	}
	jwk, err := json.Marshal(map[string]string{"kty": "OKP", "crv": "Ed25519", "x": b64u.Encode(key)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "verify.mjs", string(jwk))
	cmd.Dir = joseDir
	cmd.Stdin = bytes.NewReader(jws)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Logf("node: %s", strings.TrimSpace(stderr.String()))
	}
	return out, err
}

func TestJoseInterop(t *testing.T) {
	for name, d := range map[string]func(testing.TB) []byte{
		"execution": func(tb testing.TB) []byte { return sign(tb, execDoc(tb)).JWS },
		"key":       func(tb testing.TB) []byte { return sign(tb, keyDoc(tb, []byte("c"))).JWS },
	} {
		t.Run(name, func(t *testing.T) {
			jws := d(t)
			out, err := nodeVerify(t, jws, pub())
			if err != nil {
				t.Fatalf("jose refused our JWS: %v", err)
			}
			// jose's payload, re-stringified by JavaScript, is byte-identical
			// to the canonical payload we signed.
			_, payload := segments(jws)
			if !bytes.Equal(out, payload) {
				t.Fatalf("JSON.stringify(payload) differs:\n%s\n%s", out, payload)
			}
		})
	}
	t.Run("tampered", func(t *testing.T) {
		jws := sign(t, execDoc(t)).JWS
		parts := strings.Split(string(jws), ".")
		sig, _ := b64u.Decode(parts[2])
		sig[10] ^= 1
		bad := []byte(parts[0] + "." + parts[1] + "." + b64u.Encode(sig))
		if _, err := nodeVerify(t, bad, pub()); err == nil {
			t.Fatal("jose accepted a tampered signature")
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x33}, 32)).Public().(ed25519.PublicKey)
		if _, err := nodeVerify(t, sign(t, execDoc(t)).JWS, other); err == nil {
			t.Fatal("jose accepted another key")
		}
	})
}

// TestGoJoseSignsTheSameBytes: Sign writes the compact JWS itself; go-jose,
// given the same key, payload and header parameters, produces exactly the
// same bytes, and Parse accepts them. A go-jose release that wrote the
// header another way would fail here, not in a verifier.
func TestGoJoseSignsTheSameBytes(t *testing.T) {
	for name, d := range map[string]*evidencedoc.Document{"execution": execDoc(t), "key": keyDoc(t, []byte("c"))} {
		t.Run(name, func(t *testing.T) {
			ours := sign(t, d).JWS
			_, payload := segments(ours)
			opts := (&jose.SignerOptions{}).WithType(evidencedoc.Type).WithHeader("kid", didkey.Format(pub()))
			signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: fuzzKey}, opts)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := signer.Sign(payload)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := obj.CompactSerialize()
			if err != nil {
				t.Fatal(err)
			}
			if theirs != string(ours) {
				t.Fatalf("go-jose signs other bytes:\n%s\n%s", theirs, ours)
			}
			if _, err := evidencedoc.Parse([]byte(theirs), pub()); err != nil {
				t.Fatalf("Parse refuses go-jose's JWS: %v", err)
			}
		})
	}
}
