package sealed

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	mrand "math/rand/v2"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// newTestSigner returns an Ed25519Signer over a sealed copy of seed.
func newTestSigner(t testing.TB, seed []byte) crypto.Signer {
	t.Helper()
	b, err := NewFrom(seed, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Destroy)
	s, err := Ed25519Signer(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEd25519SignerRFC8032 checks the signer against RFC 8032 section 7.1
// (TEST 1, 2, 3 and TEST SHA(abc)).
func TestEd25519SignerRFC8032(t *testing.T) {
	abc := "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a" +
		"2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
	for _, v := range []struct{ name, seed, pub, msg, sig string }{
		{"TEST 1", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
			"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"TEST 2", "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
			"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
		{"TEST 3", "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
			"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
			"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
		{"TEST SHA(abc)", "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
			"ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf", abc,
			"dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"},
	} {
		t.Run(v.name, func(t *testing.T) {
			s := newTestSigner(t, testfile.Hex(t, v.seed))
			if got := s.Public().(ed25519.PublicKey); !bytes.Equal(got, testfile.Hex(t, v.pub)) {
				t.Fatalf("public key %x, want %s", got, v.pub)
			}
			sig, err := s.Sign(nil, testfile.Hex(t, v.msg), crypto.Hash(0))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sig, testfile.Hex(t, v.sig)) {
				t.Fatalf("signature %x, want %s", sig, v.sig)
			}
		})
	}
}

// TestEd25519SignerMatchesCryptoEd25519 compares public keys and signatures
// with crypto/ed25519 over random keys and messages of many lengths
// (around the SHA-512 block boundaries too).
func TestEd25519SignerMatchesCryptoEd25519(t *testing.T) {
	r := mrand.New(mrand.NewPCG(1, 2))
	for i := range 64 {
		seed := make([]byte, ed25519.SeedSize)
		rand.Read(seed)
		s := newTestSigner(t, seed)
		want := ed25519.NewKeyFromSeed(seed)
		if !bytes.Equal(s.Public().(ed25519.PublicKey), want.Public().(ed25519.PublicKey)) {
			t.Fatalf("key %d: public keys differ", i)
		}
		for _, n := range []int{0, 1, 63, 64, 95, 96, 97, 127, 128, 129, 255, 256, r.IntN(4096)} {
			msg := make([]byte, n)
			rand.Read(msg)
			got, err := s.Sign(rand.Reader, msg, crypto.Hash(0))
			if err != nil {
				t.Fatal(err)
			}
			if w := ed25519.Sign(want, msg); !bytes.Equal(got, w) {
				t.Fatalf("key %d, %d-byte message: signature %x, crypto/ed25519 %x", i, n, got, w)
			}
		}
	}
}

// TestEd25519SignerPublicIsACopy checks that a caller who changes the key
// Public returned does not change what the signer hashes into its
// signatures.
func TestEd25519SignerPublicIsACopy(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	s := newTestSigner(t, seed)
	pub := s.Public().(ed25519.PublicKey)
	want := bytes.Clone(pub)
	pub[0] ^= 0xff
	msg := []byte("message")
	sig, err := s.Sign(rand.Reader, msg, crypto.Hash(0))
	if err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(want, msg, sig) {
		t.Fatal("a change to the returned public key changed the signature")
	}
	if !bytes.Equal(s.Public().(ed25519.PublicKey), want) {
		t.Fatal("a change to the returned public key changed the signer's key")
	}
}

// TestEd25519SignerRefuses checks that the signer fails closed: a buffer
// that is not a seed, a prehash or context option, a destroyed seed.
func TestEd25519SignerRefuses(t *testing.T) {
	for _, n := range []int{1, 31, 33, 64} {
		b, err := New(n, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if s, err := Ed25519Signer(b); s != nil || !errors.Is(err, errEd25519) {
			t.Errorf("%d-byte buffer: signer %v, error %v", n, s, err)
		}
		b.Destroy()
	}
	if s, err := Ed25519Signer(nil); s != nil || !errors.Is(err, errEd25519) {
		t.Errorf("nil buffer: signer %v, error %v", s, err)
	}
	b, err := New(ed25519.SeedSize, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Ed25519Signer(b)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("m"))
	for name, opts := range map[string]crypto.SignerOpts{
		"nil":              nil,
		"SHA-256":          crypto.SHA256,
		"SHA-512":          crypto.SHA512,
		"Ed25519ph":        &ed25519.Options{Hash: crypto.SHA512},
		"Ed25519ctx":       &ed25519.Options{Context: "c"},
		"ed25519.Options0": &ed25519.Options{},
	} {
		if sig, err := s.Sign(nil, h[:], opts); sig != nil || !errors.Is(err, errEd25519) {
			t.Errorf("%s: signature %x, error %v", name, sig, err)
		}
	}
	b.Destroy()
	if sig, err := s.Sign(nil, []byte("m"), crypto.Hash(0)); sig != nil || !errors.Is(err, errEd25519) {
		t.Errorf("destroyed seed: signature %x, error %v", sig, err)
	}
}

// TestEd25519SignerAllocs bounds the signer's heap allocations: the
// signature itself, and nothing holding the key.
func TestEd25519SignerAllocs(t *testing.T) {
	seed := make([]byte, ed25519.SeedSize)
	s := newTestSigner(t, seed)
	msg := make([]byte, 300)
	if n := testing.AllocsPerRun(20, func() { _, _ = s.Sign(nil, msg, crypto.Hash(0)) }); n > 1 {
		t.Errorf("%v allocations per signature, want at most 1 (the signature)", n)
	}
}

// FuzzEd25519Signer compares the signer with crypto/ed25519 on arbitrary
// seeds and messages.
func FuzzEd25519Signer(f *testing.F) {
	f.Add(make([]byte, ed25519.SeedSize), []byte{})
	f.Add(bytes.Repeat([]byte{0xff}, ed25519.SeedSize), []byte("clawea"))
	f.Fuzz(func(t *testing.T, seed, msg []byte) {
		if len(seed) != ed25519.SeedSize {
			return
		}
		s := newTestSigner(t, seed)
		got, err := s.Sign(nil, msg, crypto.Hash(0))
		if err != nil {
			t.Fatal(err)
		}
		if want := ed25519.Sign(ed25519.NewKeyFromSeed(seed), msg); !bytes.Equal(got, want) {
			t.Fatalf("signature %x, crypto/ed25519 %x", got, want)
		}
	})
}

func BenchmarkEd25519Signer(b *testing.B) {
	seed := make([]byte, ed25519.SeedSize)
	msg := make([]byte, 300)
	b.Run("sealed", func(b *testing.B) {
		s := newTestSigner(b, seed)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = s.Sign(nil, msg, crypto.Hash(0))
		}
	})
	b.Run("crypto-ed25519-copy", func(b *testing.B) {
		// What WithSigningKey did: a fresh heap copy of the key per signature.
		k := ed25519.NewKeyFromSeed(seed)
		b.ReportAllocs()
		for b.Loop() {
			c := make(ed25519.PrivateKey, len(k))
			copy(c, k)
			_ = ed25519.Sign(c, msg)
			clear(c)
		}
	})
}
