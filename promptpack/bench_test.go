package promptpack

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/sealed"
)

var benchSizes = []struct {
	name string
	n    int
}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}, {"64MiB", 64 << 20}}

// BenchmarkSeal seals n bytes through the envelope (what SealPack does after
// the rebuild).
func BenchmarkSeal(b *testing.B) {
	k := mustKey(b)
	ctx := envelope.Context{PackID: "pack:bench", ReportHash: sha256.Sum256(nil)}
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			body := make([]byte, s.n)
			b.SetBytes(int64(s.n))
			for b.Loop() {
				if _, _, err := envelope.Seal(body, ctx, k.Public()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen opens n bytes into a sealed.Buffer (what OpenPack does
// before parsing). Large sizes exceed RLIMIT_MEMLOCK, so memory may be
// unlocked here.
func BenchmarkOpen(b *testing.B) {
	k := mustKey(b)
	ctx := envelope.Context{PackID: "pack:bench", ReportHash: sha256.Sum256(nil)}
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			enc, m, err := envelope.Seal(make([]byte, s.n), ctx, k.Public())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(s.n))
			for b.Loop() {
				buf, err := sealed.New(s.n, sealed.Options{AllowUnlocked: true})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := (envelope.Limits{}).Open(enc, m, k, ctx, buf.Bytes()); err != nil {
					b.Fatal(err)
				}
				buf.Destroy()
			}
		})
	}
}

// BenchmarkAESGCM is the baseline: raw AES-256-GCM over the same bytes.
func BenchmarkAESGCM(b *testing.B) {
	key := make([]byte, 32)
	rand.Read(key)
	blk, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(blk)
	nonce := make([]byte, 12)
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			pt := make([]byte, s.n)
			dst := make([]byte, 0, s.n+16)
			b.SetBytes(int64(s.n))
			for b.Loop() {
				dst = aead.Seal(dst[:0], nonce, pt, nil)
			}
		})
	}
}

// BenchmarkSHA256 is the baseline: SHA-256 over the same bytes (the
// manifest check hashes the whole file).
func BenchmarkSHA256(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			data := make([]byte, s.n)
			b.SetBytes(int64(s.n))
			for b.Loop() {
				sha256.Sum256(data)
			}
		})
	}
}

// BenchmarkOpenRebuild opens a ~200 KB pack, rebuilds the prompt and
// compares the report hash: the attester's per-pack cost.
func BenchmarkOpenRebuild(b *testing.B) {
	requireConformance(b)
	var sb strings.Builder
	sb.WriteString("{")
	for i := range 400 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"tool_%03d":{"type":"object","description":"%s","properties":{"path":{"type":"string"}}}`, i, strings.Repeat("d", 300))
	}
	sb.WriteString("}")
	p := buildVector(b, "full", BuildOptions{ToolSchemas: []byte(sb.String())})
	body, _ := p.Encode()
	trusted := selfTrusted(b, p)
	k := mustKey(b)
	enc, m, err := SealPack(p, k.Public())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(body)), "pack-bytes")
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		o, err := OpenPack(enc, m, k, m.ReportHash, OpenOptions{AllowUnlocked: true})
		if err != nil {
			b.Fatal(err)
		}
		rb, err := o.Rebuild(trusted)
		if err != nil {
			b.Fatal(err)
		}
		rb.Wipe()
		o.Destroy()
	}
}
