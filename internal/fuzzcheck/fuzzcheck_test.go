package fuzzcheck

import (
	"errors"
	"testing"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

// TestRoundTrip: each broken parser or encoder is caught, a sound pair passes.
func TestRoundTrip(t *testing.T) {
	errBad := errors.New("bad")
	same := func(b []byte) ([]byte, error) { return b, nil }
	for _, c := range []struct {
		name   string
		parse  func([]byte) (*[]byte, error)
		encode func(*[]byte) ([]byte, error)
		fail   bool
	}{
		{"sound", func(b []byte) (*[]byte, error) { return &b, nil }, func(p *[]byte) ([]byte, error) { return same(*p) }, false},
		{"refused", func([]byte) (*[]byte, error) { return nil, errBad }, nil, false},
		{"value with error", func(b []byte) (*[]byte, error) { return &b, errBad }, nil, true},
		{"other bytes", func(b []byte) (*[]byte, error) { return &b, nil }, func(p *[]byte) ([]byte, error) { return append(*p, 0), nil }, true},
		{"encode fails", func(b []byte) (*[]byte, error) { return &b, nil }, func(*[]byte) ([]byte, error) { return nil, errBad }, true},
	} {
		r := &recorder{TB: t}
		RoundTrip(r, []byte("in"), c.parse, c.encode)
		if r.failed != c.fail {
			t.Errorf("%s: failed %v, want %v", c.name, r.failed, c.fail)
		}
	}
	// A slice result: nil with an error passes, a non-nil one fails.
	r := &recorder{TB: t}
	RoundTrip(r, nil, func([]byte) ([]int, error) { return []int{}, errBad }, func([]int) ([]byte, error) { return nil, nil })
	if !r.failed {
		t.Error("an empty, non-nil slice returned with an error passed")
	}
}
