package envelope

import (
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// The body of a large envelope is sealed on two cores: one encrypts and
// authenticates, the other hashes the ciphertext for the manifest as it is
// written. The bytes are exactly those of one AES-256-GCM Seal
// (NIST SP 800-38D with a 96-bit nonce): a test compares them with
// crypto/cipher's GCM for every length class.
//
// GCM is CTR encryption from inc32(J0) plus the tag
//
//	T = E(K, J0) xor GHASH_H(A || pad || C || pad || [8|A|]_64 || [8|C|]_64).
//
// crypto/cipher offers no streaming GCM, so the ciphertext is made with
// crypto/cipher's CTR (the same keystream: the 32-bit counter cannot wrap
// below 2^32 blocks, far above the body limit) one chunk at a time, each
// chunk handed to the hashing core when it is written. The tag comes from
// crypto/cipher's GCM too, run with no plaintext and C as its associated
// data, which yields tag0 = E(K, J0) xor GHASH_H(C || pad || [8|C|]_64 ||
// 0^64). GHASH is linear (Horner's rule), so
//
//	T = tag0 xor G(A)*H^(c+1) xor (L xor L0)*H
//
// where G(A) is GHASH of the padded A without a length block, c the number
// of C blocks, L and L0 the two length blocks and H = E(K, 0^128). Only that
// small correction is computed here, with a constant-time multiply in
// GF(2^128); the bulk work stays in the standard library's assembly.

// pipelineMin is the body size from which sealing and opening use two
// cores; below it a goroutine costs more than it saves.
const pipelineMin = 256 << 10

// pipelineChunk is how much ciphertext is handed to the hashing core at a
// time: small enough that hashing starts early, large enough that the
// hand-offs cost nothing measurable.
const pipelineChunk = 256 << 10

// gfElem is an element of GF(2^128) in GCM's bit order: hi holds bytes 0-7
// and lo bytes 8-15 of the block, big-endian, so bit 0 of the block (the
// coefficient of x^0) is the top bit of hi.
type gfElem struct{ hi, lo uint64 }

func gfLoad(b []byte) gfElem {
	return gfElem{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16])}
}

func (x gfElem) store(b []byte) {
	binary.BigEndian.PutUint64(b[:8], x.hi)
	binary.BigEndian.PutUint64(b[8:16], x.lo)
}

func (x gfElem) xor(y gfElem) gfElem { return gfElem{x.hi ^ y.hi, x.lo ^ y.lo} }

// gfMul is SP 800-38D algorithm 1, without branches or table lookups on
// the operands (H is derived from the key).
func gfMul(x, y gfElem) gfElem {
	var z gfElem
	v := y
	for i := range 128 {
		var bit uint64
		if i < 64 {
			bit = x.hi >> (63 - i) & 1
		} else {
			bit = x.lo >> (127 - i) & 1
		}
		m := -bit
		z.hi ^= v.hi & m
		z.lo ^= v.lo & m
		carry := -(v.lo & 1)
		v.lo = v.lo>>1 | v.hi<<63
		v.hi = v.hi>>1 ^ (0xe1 << 56 & carry)
	}
	return z
}

// gfPow returns h^n by square and multiply; n is public (a length).
func gfPow(h gfElem, n uint64) gfElem {
	r := gfElem{hi: 1 << 63} // the multiplicative identity, x^0
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			r = gfMul(r, h)
		}
		h = gfMul(h, h)
	}
	return r
}

// ghashNoLength is GHASH_H over x padded with zeros to whole blocks, with
// no length block: G(x) in the comment above.
func ghashNoLength(h gfElem, x []byte) gfElem {
	var y gfElem
	var blk [16]byte
	for len(x) > 0 {
		n := copy(blk[:], x)
		clear(blk[n:])
		y = gfMul(y.xor(gfLoad(blk[:])), h)
		x = x[n:]
	}
	return y
}

// sealPipelined writes the GCM sealing of body under aead/block with nonce
// and associated data ad to out (len(body)+tagSize bytes, not overlapping
// body), while sum hashes prefix, then the ciphertext, then the tag, on the
// calling goroutine. It returns the SHA-256 of prefix || out.
func sealPipelined(aead cipher.AEAD, block cipher.Block, nonce, ad, prefix, body, out []byte) [32]byte {
	ct := out[:len(body)]
	ready := make(chan int, len(body)/pipelineChunk+1)
	tagDone := make(chan struct{})
	go func() {
		defer close(tagDone)
		var iv [16]byte
		copy(iv[:], nonce)
		iv[15] = 2 // inc32(J0), J0 = nonce || 0^31 || 1
		ctr := cipher.NewCTR(block, iv[:])
		for off := 0; off < len(body); off += pipelineChunk {
			end := min(off+pipelineChunk, len(body))
			ctr.XORKeyStream(ct[off:end], body[off:end])
			ready <- end
		}
		close(ready)
		gcmTag(aead, block, nonce, ad, ct, out[len(body):len(body)+tagSize])
	}()
	sum := sha256.New()
	sum.Write(prefix)
	done := 0
	for end := range ready {
		sum.Write(ct[done:end])
		done = end
	}
	<-tagDone
	sum.Write(out[len(body) : len(body)+tagSize])
	return sumOf(sum)
}

// gcmTag writes to tag the GCM tag of ciphertext ct with associated data
// ad, as the comment at the top of this file derives it.
func gcmTag(aead cipher.AEAD, block cipher.Block, nonce, ad, ct, tag []byte) {
	var hb [16]byte
	block.Encrypt(hb[:], hb[:])
	h := gfLoad(hb[:])
	clear(hb[:])
	tag0 := aead.Seal(make([]byte, 0, tagSize), nonce, nil, ct)
	c := uint64(len(ct)+15) / 16
	l := gfElem{uint64(len(ad)) * 8, uint64(len(ct)) * 8}
	l0 := gfElem{uint64(len(ct)) * 8, 0}
	t := gfLoad(tag0).xor(gfMul(ghashNoLength(h, ad), gfPow(h, c+1))).xor(gfMul(l.xor(l0), h))
	t.store(tag)
}

func sumOf(h hash.Hash) (s [32]byte) {
	h.Sum(s[:0])
	return s
}
