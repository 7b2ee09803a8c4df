//go:build linux

package sealed

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// zeroCheckReader serves data and records whether each destination it is
// asked to fill (the scratch buffer) was zero, which shows the scratch is
// wiped between chunks.
type zeroCheckReader struct {
	r        io.Reader
	dirty    bool
	failWith error // returned after the data
}

func (z *zeroCheckReader) Read(p []byte) (int, error) {
	for _, c := range p {
		if c != 0 {
			z.dirty = true
		}
	}
	n, err := z.r.Read(p)
	if err == io.EOF && z.failWith != nil {
		return n, z.failWith
	}
	return n, err
}

func TestForEachChunk(t *testing.T) {
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i%251) + 1 // never zero
	}
	for _, size := range []int{1, 4096, 5000, 10000, 20000} {
		z := &zeroCheckReader{r: bytes.NewReader(data)}
		var got []byte
		var sizes []int
		err := forEachChunk(z, size, Options{}, func(c []byte) error {
			got = append(got, c...)
			sizes = append(sizes, len(c))
			return nil
		})
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("size %d: data differs", size)
		}
		for i, n := range sizes {
			if n != size && i != len(sizes)-1 || n > size {
				t.Fatalf("size %d: chunk sizes %v", size, sizes)
			}
		}
		if z.dirty {
			t.Fatalf("size %d: scratch not wiped between chunks", size)
		}
	}
}

func TestForEachChunkEmptyAndErrors(t *testing.T) {
	calls := 0
	if err := forEachChunk(bytes.NewReader(nil), 16, Options{}, func([]byte) error { calls++; return nil }); err != nil || calls != 0 {
		t.Fatalf("empty input: err %v calls %d", err, calls)
	}
	if err := forEachChunk(bytes.NewReader(nil), 0, Options{}, func([]byte) error { return nil }); !errors.Is(err, errInvalidSize) {
		t.Fatalf("chunk size 0: %v", err)
	}
	boom := errors.New("boom")
	calls = 0
	err := forEachChunk(&zeroCheckReader{r: bytes.NewReader(make([]byte, 20)), failWith: boom}, 16, Options{}, func([]byte) error { calls++; return nil })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("reader error: err %v calls %d (partial chunk must not reach fn)", err, calls)
	}
	stop := errors.New("stop")
	calls = 0
	err = forEachChunk(bytes.NewReader(make([]byte, 100)), 16, Options{}, func([]byte) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("fn error: err %v calls %d", err, calls)
	}
}
