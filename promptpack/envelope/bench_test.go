package envelope

import (
	"crypto/sha256"
	"fmt"
	"testing"
)

var benchSizes = []int{4 << 10, 1 << 20, 64 << 20}

// BenchmarkEnvelope runs Seal and Open beside raw AES-256-GCM and SHA-256
// over the same bytes, so that ratios can be read from one run:
//
//	go test ./promptpack/envelope -run '^$' -bench Envelope -benchtime 3x
func BenchmarkEnvelope(b *testing.B) {
	k, err := GenerateKey()
	if err != nil {
		b.Fatal(err)
	}
	ctx := testContext("bench")
	for _, size := range benchSizes {
		body := make([]byte, size)
		for i := range body {
			body[i] = byte(i)
		}
		name := fmt.Sprintf("%dKiB", size>>10)
		b.Run("Seal/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Seal(body, ctx, k.Public()); err != nil {
					b.Fatal(err)
				}
			}
		})
		// AppendSeal into a reused buffer: the same work as Seal without the
		// cost of faulting in a fresh output allocation each time, which is
		// what the raw AES-GCM baseline below also avoids.
		var reuse []byte
		b.Run("AppendSeal/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if reuse, _, err = (Limits{}).appendSeal(reuse[:0], body, ctx, k.Public()); err != nil {
					b.Fatal(err)
				}
			}
		})
		file, m, err := Seal(body, ctx, k.Public())
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]byte, size)
		b.Run("Open/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Open(file, m, k, ctx, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
		aead, err := newGCM(make([]byte, dekSize))
		if err != nil {
			b.Fatal(err)
		}
		out := make([]byte, 0, size+tagSize)
		nonce := make([]byte, nonceSize)
		b.Run("AES256GCMSeal/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				out = aead.Seal(out[:0], nonce, body, nil)
			}
		})
		b.Run("SHA256/"+name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				_ = sha256.Sum256(body)
			}
		})
	}
}
