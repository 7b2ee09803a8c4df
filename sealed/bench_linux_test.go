//go:build linux

package sealed

import (
	"context"
	"testing"
)

func BenchmarkNewDestroy(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"32B", 32}, {"1MiB", 1 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(bc.size))
			for b.Loop() {
				buf, err := New(bc.size, Options{})
				if err != nil {
					b.Fatal(err)
				}
				buf.Bytes()[0] = 1 // fault the first page in
				buf.Destroy()
			}
		})
	}
}

func BenchmarkKeySealer(b *testing.B) {
	ks, _, _ := newTestSealers(b)
	ctx := context.Background()
	secret := make([]byte, 32)
	blob, err := ks.Seal(ctx, testLabel, secret)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Seal32B", func(b *testing.B) {
		for b.Loop() {
			if _, err := ks.Seal(ctx, testLabel, secret); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Unseal32B", func(b *testing.B) {
		for b.Loop() {
			buf, err := ks.Unseal(ctx, testLabel, blob)
			if err != nil {
				b.Fatal(err)
			}
			buf.Destroy()
		}
	})
}
