package envelope

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"testing"
)

// TestSealPipelinedIsGCM: the two-core seal writes exactly the bytes of
// crypto/cipher's AES-256-GCM Seal, and the hash of exactly those bytes,
// for lengths around every block, chunk and threshold boundary.
func TestSealPipelinedIsGCM(t *testing.T) {
	key := make([]byte, 32)
	nonce := make([]byte, nonceSize)
	rand.Read(key)
	rand.Read(nonce)
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	body := make([]byte, 3*pipelineChunk+40)
	rand.Read(body)
	prefix := []byte("header bytes before the body")
	var lengths []int
	for _, base := range []int{0, 16, 4096, pipelineChunk, 2 * pipelineChunk, 3 * pipelineChunk} {
		for _, d := range []int{-17, -16, -15, -1, 0, 1, 15, 16, 17} {
			if n := base + d; n >= 0 && n <= len(body) {
				lengths = append(lengths, n)
			}
		}
	}
	for _, adLen := range []int{0, 1, 15, 16, 17, 200} {
		ad := make([]byte, adLen)
		rand.Read(ad)
		for _, n := range lengths {
			want := aead.Seal(nil, nonce, body[:n], ad)
			got := make([]byte, n+tagSize)
			sum := sealPipelined(aead, block, nonce, ad, prefix, body[:n], got)
			if !bytes.Equal(got, want) {
				t.Fatalf("ad %d, body %d: output differs from GCM", adLen, n)
			}
			if sum != sha256.Sum256(append(bytes.Clone(prefix), want...)) {
				t.Fatalf("ad %d, body %d: hash differs", adLen, n)
			}
		}
	}
}

// TestGFMulIdentityAndPow checks the multiply's identity and gfPow, and the
// multiply against GHASH of McGrew and Viega's GCM test case 2.
func TestGFMulIdentityAndPow(t *testing.T) {
	x := gfElem{0x0388dace60b6a392, 0xf328c2b971b2fe78}
	one := gfElem{hi: 1 << 63}
	if gfMul(x, one) != x || gfMul(one, x) != x {
		t.Fatal("x^0 is not the identity")
	}
	if gfPow(x, 3) != gfMul(gfMul(x, x), x) || gfPow(x, 0) != one {
		t.Fatal("gfPow disagrees with repeated gfMul")
	}
	// H = E(0^128, 0^128) and GHASH_H(C || len) for the GCM spec's test
	// case 2: C = 0388dace60b6a392f328c2b971b2fe78, len = 0^64 || 128.
	h := gfElem{0x66e94bd4ef8a2c3b, 0x884cfa59ca342b2e}
	y := gfMul(x, h)
	y = gfMul(y.xor(gfElem{0, 128}), h)
	if want := (gfElem{0xf38cbb1ad69223dc, 0xc3457ae5b6b0f885}); y != want {
		t.Fatalf("GHASH %x, want %x", y, want)
	}
}

// TestOpenPipelinedOrder: a file hashed beside the later steps still
// fails as the steps in order would, and leaves no plaintext: a changed
// byte is a manifest mismatch (step 3) even for a key that is no
// recipient (step 7), and with a manifest of the changed file it is an
// authentication failure (step 9).
func TestOpenPipelinedOrder(t *testing.T) {
	k, other := mustKey(t), mustKey(t)
	ctx := testContext("pipeline")
	body := make([]byte, pipelineMin+100)
	rand.Read(body)
	file, m := mustSeal(t, body, ctx, k.Public())
	dst := make([]byte, len(body))
	if n, err := openDefault(file, m, k, ctx, dst); err != nil || !bytes.Equal(dst[:n], body) {
		t.Fatalf("open: %v", err)
	}
	bad := bytes.Clone(file)
	bad[len(bad)-100] ^= 1
	for _, key := range []*PrivateKey{k, other} {
		clear(dst)
		dst[0] = 1
		if _, err := openDefault(bad, m, key, ctx, dst); !errors.Is(err, ErrManifestMismatch) {
			t.Fatalf("changed byte: %v, want a manifest mismatch", err)
		}
	}
	// The authentic file under a manifest whose hash differs: the body
	// opens beside the hash, and is wiped when the hash is seen to differ.
	m3 := *m
	m3.CiphertextHash[0] ^= 1
	if _, err := openDefault(file, &m3, k, ctx, dst); !errors.Is(err, ErrManifestMismatch) {
		t.Fatalf("wrong manifest hash: %v, want a manifest mismatch", err)
	}
	if !bytes.Equal(dst, make([]byte, len(dst))) {
		t.Fatal("plaintext left in dst after a manifest mismatch")
	}
	m2 := *m
	m2.CiphertextHash = sha256.Sum256(bad)
	if _, err := openDefault(bad, &m2, k, ctx, dst); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("changed byte, matching manifest: %v, want an authentication failure", err)
	}
	if !bytes.Equal(dst, make([]byte, len(dst))) {
		t.Fatal("plaintext left in dst after a failed open")
	}
}
