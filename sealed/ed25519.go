package sealed

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"
	"runtime"

	"filippo.io/edwards25519"
)

// errEd25519 refuses an Ed25519 signer or signature request.
var errEd25519 = errors.New("sealed: ed25519")

// Ed25519Signer returns a crypto.Signer that signs with the Ed25519 key
// whose 32-byte RFC 8032 seed is held in seed. It computes every signature
// from the seed in sealed memory (RFC 8032 section 5.1.6) with
// filippo.io/edwards25519: the expanded key (scalar and prefix) lives only
// in stack variables that are zeroed after each signature, and the SHA-512
// states that absorbed secret input are overwritten, so no heap object
// keeps a copy of the seed or of anything derived from it. crypto/ed25519
// cannot do this: it caches the expanded key on the heap, keyed by the
// address of the key slice, and never zeroes it.
//
// The signer reads seed at every signature and does not own it: the caller
// destroys it, and must not sign after that. Sign takes crypto.Hash(0)
// (pure Ed25519) and nothing else; its rand argument is ignored, as
// Ed25519 is deterministic. Signatures are byte-identical to
// crypto/ed25519's.
func Ed25519Signer(seed *Buffer) (crypto.Signer, error) {
	if seed.Len() != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: the seed buffer holds %d bytes, want %d", errEd25519, seed.Len(), ed25519.SeedSize)
	}
	s := &edSigner{seed: seed, pub: make(ed25519.PublicKey, ed25519.PublicKeySize)}
	var k expanded
	defer k.wipe()
	k.expand(seed.Bytes())
	var a edwards25519.Point
	copy(s.pub, a.ScalarBaseMult(&k.s).Bytes())
	return s, nil
}

type edSigner struct {
	seed *Buffer
	pub  ed25519.PublicKey
}

// Public returns a copy of the ed25519.PublicKey, as crypto/ed25519 does: the
// signer's own copy, which every signature hashes, cannot be changed through
// it.
func (s *edSigner) Public() crypto.PublicKey { return ed25519.PublicKey(bytes.Clone(s.pub)) }

// Sign returns the Ed25519 signature of message (opts must be
// crypto.Hash(0): the message is signed as is, never a digest of it).
func (s *edSigner) Sign(_ io.Reader, message []byte, opts crypto.SignerOpts) ([]byte, error) {
	if opts == nil || opts.HashFunc() != crypto.Hash(0) {
		return nil, fmt.Errorf("%w: only pure Ed25519 (crypto.Hash(0)) is supported", errEd25519)
	}
	if _, ok := opts.(*ed25519.Options); ok {
		// Ed25519ph and Ed25519ctx are other schemes; refuse them rather
		// than sign as pure Ed25519 with a context silently dropped.
		return nil, fmt.Errorf("%w: ed25519.Options (Ed25519ph, Ed25519ctx) are not supported", errEd25519)
	}
	seed := s.seed.Bytes()
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: the key has been destroyed", errEd25519)
	}
	sig := make([]byte, ed25519.SignatureSize)
	var k expanded
	defer k.wipe()
	k.expand(seed)

	// r = SHA-512(prefix || M) mod L.
	var r edwards25519.Scalar
	defer zeroScalar(&r)
	var digest [sha512.Size]byte
	h := sha512.New()
	h.Write(k.h[32:])
	h.Write(message)
	h.Sum(digest[:0])
	h.Reset() // scrub h: see zeros
	h.Write(zeros[:sha512.BlockSize-1])
	_, _ = r.SetUniformBytes(digest[:]) // cannot fail: 64 bytes
	clear(digest[:])

	// R = [r]B; k = SHA-512(R || A || M) mod L; S = r + k*s mod L.
	var bigR edwards25519.Point
	copy(sig[:32], bigR.ScalarBaseMult(&r).Bytes())
	h.Reset()
	h.Write(sig[:32])
	h.Write(s.pub)
	h.Write(message)
	h.Sum(digest[:0])
	var c, bigS edwards25519.Scalar
	_, _ = c.SetUniformBytes(digest[:])
	copy(sig[32:], bigS.MultiplyAdd(&c, &k.s, &r).Bytes())
	runtime.KeepAlive(s.seed)
	return sig, nil
}

// expanded is an expanded Ed25519 key: h = SHA-512(seed) and s, the
// clamped scalar from its first half (the prefix is h[32:]).
type expanded struct {
	h [sha512.Size]byte
	s edwards25519.Scalar
}

func (k *expanded) expand(seed []byte) {
	h := sha512.New()
	h.Write(seed)
	h.Sum(k.h[:0])
	h.Reset() // scrub h: see zeros
	h.Write(zeros[:sha512.BlockSize-1])
	_, _ = k.s.SetBytesWithClamping(k.h[:32]) // cannot fail: 32 bytes
}

func (k *expanded) wipe() {
	clear(k.h[:])
	zeroScalar(&k.s)
	runtime.KeepAlive(k)
}

func zeroScalar(s *edwards25519.Scalar) {
	*s = edwards25519.Scalar{}
	runtime.KeepAlive(s)
}

// zeros scrubs a SHA-512 state that absorbed secret input (written
// inline, so that the digest stays on the stack): Reset sets the chaining
// value back to the initial one, and a write one byte short of a block
// (which the digest buffers rather than compresses) overwrites its block
// buffer, where the secret bytes were.
var zeros [sha512.BlockSize]byte
